//! Workloads: schema, loader, generator and procedures per benchmark.
//!
//! * [`ycsb`] — YCSB with CCBench's seven parameters, presets A–F, scans, inserts, read-latest,
//!   and a long-transaction option.
//! * [`smallbank`] — SmallBank (Cahill et al.; BOHM §4.3) with its money invariant.
//! * [`tpcc`] — TPC-C 5.11: nine tables, the five transactions, consistency conditions.
//! * [`tpce`] — TPC-E 1.14: 33 tables, the ten transactions with a market exchange emulator,
//!   consistency checks.
//! * [`spec`] — declarative workloads: tables and transaction types from a TOML file.
//! * [`pieces`] — IC3's micro-benchmark: transactions of N pieces, each updating 4 rows of its
//!   own table, contention by the first row's scope, optional user aborts.

pub mod invariant;
#[macro_use]
pub mod layout;
pub mod pieces;
pub mod smallbank;
pub mod spec;
pub mod tpcc;
pub mod tpce;
pub mod ycsb;
pub mod zipf;

use serde::Serialize;

/// Every workload, as chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// YCSB (Cooper et al., SoCC 2010) with CCBench's parameters.
    Ycsb,
    /// SmallBank (Cahill et al., SIGMOD 2008), H-Store's mix.
    Smallbank,
    /// TPC-C (specification 5.11), the full mix.
    Tpcc,
    /// TPC-E (specification 1.14), the ten transactions and the standard mix.
    Tpce,
    /// IC3's micro-benchmark (§6.2): N pieces of 4 updates, each on its own table.
    Pieces,
    /// A declarative workload from a file (`spec:FILE.toml`, see [`spec`]).
    #[cfg_attr(feature = "cli", value(skip))]
    Spec,
}

impl WorkloadKind {
    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ycsb => "ycsb",
            WorkloadKind::Smallbank => "smallbank",
            WorkloadKind::Tpcc => "tpcc",
            WorkloadKind::Tpce => "tpce",
            WorkloadKind::Pieces => "pieces",
            WorkloadKind::Spec => "spec",
        }
    }
}

/// The time now in seconds since the Unix epoch (dates in rows).
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(1)
}
