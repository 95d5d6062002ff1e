//! Workloads: schema, loader, generator and procedures per benchmark.
//!
//! * [`ycsb`] — YCSB with CCBench's seven parameters, presets A–F, scans, inserts, read-latest,
//!   and a long-transaction option.
//! * [`smallbank`] — SmallBank (Cahill et al.; BOHM §4.3) with its money invariant.
//! * [`tpcc`] — TPC-C 5.11: nine tables, the five transactions, consistency conditions.

pub mod smallbank;
pub mod tpcc;
pub mod ycsb;
pub mod zipf;

use serde::Serialize;

/// Every workload, as chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// YCSB (Cooper et al., SoCC 2010) with CCBench's parameters.
    Ycsb,
    /// SmallBank (Cahill et al., SIGMOD 2008), H-Store's mix.
    Smallbank,
    /// TPC-C (specification 5.11), the full mix.
    Tpcc,
}

impl WorkloadKind {
    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ycsb => "ycsb",
            WorkloadKind::Smallbank => "smallbank",
            WorkloadKind::Tpcc => "tpcc",
        }
    }
}
