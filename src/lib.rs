//! # txlab
//!
//! A multi-core, in-memory, serializable transaction engine with pluggable concurrency control,
//! and the benchmark driver around it.
//!
//! Layers, top to bottom (dependencies point down only):
//!
//! * [`cli`] — the `txlab` command (`run`, `list`).
//! * [`workloads`] — YCSB (and, later, TPC-C and SmallBank): schema, loader, generators,
//!   procedures.
//! * [`engine`] — the contract: [`Protocol`](engine::Protocol), [`Worker`](engine::Worker),
//!   [`Procedure`](engine::Procedure), [`Workload`](engine::Workload); the driver and results.
//! * [`protocols`] — one module per protocol (`nocc`, `two_pl`, `silo`) plus `common`.
//! * [`storage`] — tables of stable record slots, indexes, phantom buckets, epochs, reclamation.
//! * [`history`] and [`checker`] — recorded histories (every protocol reports through one
//!   recorder) and the serializability checker over them (Adya's direct serialization graph).
//!
//! ## Embedding
//!
//! ```
//! use txlab::prelude::*;
//! use txlab::protocols::two_pl::TwoPlWaitDie;
//!
//! let db = Database::new(TwoPlWaitDie::default(), &[TableSpec::new("kv", 8, 1000)]).unwrap();
//! let kv = db.table_id("kv").unwrap();
//! let mut w = db.worker().unwrap();
//! w.begin(0);
//! w.insert(kv, 7, &42u64.to_le_bytes()).unwrap();
//! w.update(kv, 7, |row| row[0] += 1).unwrap();
//! w.commit().unwrap();
//! ```

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod checker;
pub mod cli;
pub mod engine;
pub mod error;
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
