//! # txlab
//!
//! A multi-core, in-memory, serializable transaction engine with pluggable concurrency control,
//! the benchmark driver around it, and a serializability checker.
//!
//! Layers, top to bottom (dependencies point down only):
//!
//! * [`cli`] — the `txlab` command: `run` (a workload on one or more protocols, compared with
//!   `nocc`, for a timed window or a fixed number of transactions), `sweep` (a grid of runs into
//!   a JSON-lines results file, resumable, or a Slurm job array), `plot`, `report`, `reproduce`
//!   (the papers' figures as presets with their claims checked), `merge`, `compare`, `check`
//!   (contended workloads with recorded histories through the checker) and `list`.
//! * [`experiment`] — results files, figures (plotters), HTML reports, comparisons, presets.
//! * [`workloads`] — YCSB (CCBench's parameters, presets A–F), SmallBank (H-Store's mix, with its
//!   money invariant) and TPC-C (the full mix of specification 5.11 with consistency conditions
//!   1–10 and 12): schemas, parallel loaders, generators, procedures.
//! * [`engine`] — the contract: [`Protocol`](engine::Protocol), [`Worker`](engine::Worker),
//!   [`Procedure`](engine::Procedure), [`Workload`](engine::Workload); the driver, the
//!   [`Retry`](engine::Retry) helper for embedding programs, statistics and reports.
//! * [`protocols`] — one module per protocol (`nocc`; `two_pl`: no-wait and wait-die;
//!   `two_pl_ordered`; `silo`, `tictoc`, `mocc`; `si`, `ermia_ssn`, `ermia_ssi`, `hekaton`;
//!   `cicada`; `bohm`; `ic3`) plus `common`, and [`ProtocolKind`](protocols::ProtocolKind),
//!   which names them at run time.
//! * [`storage`] — tables of stable record slots, indexes (dense, ordered, hash), phantom
//!   buckets, epochs, reclamation.
//! * [`history`] and [`checker`] — recorded histories (every protocol reports through one
//!   recorder) and the serializability checker over them (Adya's direct serialization graph).
//!
//! ## Embedding
//!
//! Pick a protocol, declare tables, and run transactions on a worker per thread. [`Retry`]
//! runs a closure (or a [`Procedure`](engine::Procedure)) until it commits, retrying conflicts
//! with a random backoff; an [`Abort`](error::Abort) converts into an [`Error`](error::Error)
//! with `?`.
//!
//! ```
//! use txlab::engine::Retry;
//! use txlab::prelude::*;
//! use txlab::protocols::two_pl::TwoPlWaitDie;
//!
//! # fn main() -> Result<(), Error> {
//! let db = Database::<TwoPlWaitDie>::new(&[TableSpec::new("kv", 8, 1000)])?;
//! let kv = db.table_id("kv").expect("declared above");
//! let mut w = db.worker()?;
//! let mut retry = Retry::new();
//! retry.run(&mut w, |w| w.insert(kv, 7, &42u64.to_le_bytes()).map(drop))?;
//! let seen = retry.run(&mut w, |w| {
//!     w.update(kv, 7, |row| row[0] += 1)?;
//!     w.read(kv, 7, |row| row[0])
//! })?;
//! assert_eq!(seen, Some(43));
//! # Ok(())
//! # }
//! ```
//!
//! A protocol chosen at run time (a name from a configuration file, say) runs the same code:
//! [`ProtocolKind::from_name`](protocols::ProtocolKind::from_name) and
//! [`ProtocolKind::create`](protocols::ProtocolKind::create), with the program written once,
//! generic over the protocol ([`WithDatabase`](protocols::WithDatabase)) and monomorphised for
//! each, and the protocol's options given as `--opt` pairs
//! ([`DatabaseConfig`](protocols::DatabaseConfig)).
//!
//! A commit that returns `Ok` is acknowledged: under `--sync commit` durable, and so is what it
//! read (the commit contract in [`Protocol`](engine::Protocol)'s docs). A commit the log cannot
//! make durable returns [`AbortReason::NotDurable`](error::AbortReason::NotDurable).
//!
//! [`Retry`]: engine::Retry

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod checker;
pub mod cli;
pub mod durability;
pub mod engine;
pub mod error;
pub mod experiment;
pub mod history;
pub mod protocols;
pub mod storage;
pub mod workloads;

/// The names most programs need.
pub mod prelude {
    pub use crate::engine::{
        AccessMode, AccessSet, Database, DbOptions, Procedure, Protocol, Recon, Tx, TxnType, Worker,
    };
    pub use crate::error::{Abort, AbortReason, Error};
    pub use crate::storage::index::IndexKind;
    pub use crate::storage::{TableId, TableSpec};
}
