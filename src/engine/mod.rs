//! The engine contract and the driver: protocols, procedures, workloads, runs and results.

pub mod batch;
pub mod context;
pub mod database;
pub mod driver;
pub mod dry_run;
pub mod loader;
pub mod options;
pub mod procedure;
pub mod protocol;
pub mod report;
pub mod retry;
pub mod scgraph;
pub mod stats;
pub mod workload;

pub use batch::BatchOutcome;
pub use database::{Builder, Database, DbOptions, Loader};
pub use driver::{Backoff, RunConfig, RunLength};
pub use dry_run::declare_by_dry_run;
pub use options::{NoOptions, OptionSpec, ProtocolOptions};
pub use procedure::{
    AccessMode, AccessSet, Accumulation, Checks, Columns, Intent, Piece, Procedure, Recon,
    TableAccess, Tx, TxnType, ALL_COLUMNS,
};
pub use protocol::{
    accumulate_now, Capabilities, Isolation, PieceEnd, Protocol, Reads, Setup, Worker,
};
pub use report::RunReport;
pub use retry::Retry;
pub use stats::WorkerStats;
pub use workload::{Generator, Workload};
