//! Workloads: schema, loader, generator and procedures per benchmark.
//!
//! * [`ycsb`] — YCSB with CCBench's seven parameters, presets A–F, scans, inserts, read-latest,
//!   and a long-transaction option.

pub mod ycsb;
pub mod zipf;

use serde::Serialize;

/// Every workload, as chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// YCSB (Cooper et al., SoCC 2010) with CCBench's parameters.
    Ycsb,
}

impl WorkloadKind {
    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ycsb => "ycsb",
        }
    }
}
