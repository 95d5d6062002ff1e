//! # txlab
//!
//! A multi-core, in-memory, serializable transaction engine with pluggable concurrency control,
//! the benchmark driver around it, and a serializability checker.
//!
//! Layers, top to bottom (dependencies point down only):
//!
//! * `cli` — the `txlab` command: `run` (a workload on one or more protocols, compared with
//!   `nocc`, for a timed window or a fixed number of transactions), `sweep` (a grid of runs into
//!   a JSON-lines results file, resumable, or a Slurm job array), `plot`, `report`, `reproduce`
//!   (the papers' figures as presets with their claims checked), `merge`, `compare`, `check`
//!   (contended workloads with recorded histories through the checker), `recover` (a database
//!   rebuilt from a run's log, verified), `analyze` (IC3's static analysis of a workload) and
//!   `list`. Feature `cli`.
//! * `experiment` — results files, figures (plotters), HTML reports, comparisons, which runs
//!   the noise separates, presets. Feature `cli`.
//! * [`workloads`] — YCSB (CCBench's parameters, presets A–F), SmallBank (H-Store's mix, with its
//!   money invariant), TPC-C (the full mix of specification 5.11 with consistency conditions
//!   1–10 and 12) and IC3's pieces micro-benchmark: schemas, parallel loaders, generators,
//!   procedures.
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
//! As a library, depend on txlab with `default-features = false`: the feature `cli` (on by
//! default, needed by the `txlab` binary) adds the `cli` and `experiment` modules and their
//! crates (clap, indicatif, csv, toml, ctrlc, plotters, askama, tempfile); the engine, the
//! protocols, the workloads, durability and the checker need none of them.
//!
//! Pick a protocol, declare tables, and run transactions on a worker per thread.
//! [`Database::retry`](engine::Database::retry) gives a [`Retry`] with the protocol's own
//! backoff (Cicada's adaptive regulation, shared by the database's `Retry`s; none for the
//! others): it runs a closure (or a [`Procedure`](engine::Procedure)) until it commits,
//! retrying conflicts. Retrying by hand is possible ([`Worker::begin`](engine::Worker::begin)
//! after an abort starts a retry of the same transaction), but `Retry` is the documented way.
//! An [`Abort`](error::Abort) converts into an [`Error`](error::Error) with `?`.
//!
//! ```
//! use txlab::prelude::*;
//! use txlab::protocols::two_pl::TwoPlWaitDie;
//!
//! # fn main() -> Result<(), Error> {
//! let db = Database::<TwoPlWaitDie>::new(&[TableSpec::new("kv", 8, 1000)])?;
//! let kv = db.table_id("kv").expect("declared above");
//! let mut w = db.worker()?;
//! let mut retry = db.retry();
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
//! **Aborts a program raises.** [`Abort::user`](error::Abort::user) and
//! [`Abort::with_code`](error::Abort::with_code) roll back for good (the transaction decided
//! so; retrying would decide the same); [`Abort::retry`](error::Abort::retry) rolls back and
//! asks for another attempt after backoff, as a conflict does. Every other reason is the
//! engine's: pass an operation's `Err` on with `?`.
//!
//! **Declared access sets.** `2pl-ordered` takes every lock at begin from the transaction's
//! declared set: [`Retry::run_declared`](engine::Retry::run_declared) declares each attempt
//! (for a [`Procedure`](engine::Procedure), [`Retry::run_procedure_on`](engine::Retry::run_procedure_on)
//! calls its `declare`). Using it otherwise is an error, not a quiet change of protocol: an
//! attempt begun without a set fails with [`AbortReason::Undeclared`](error::AbortReason::Undeclared),
//! an access outside the set with `AccessSetMismatch` (retried, declaring again). An
//! [`AccessSet`](engine::AccessSet) need not be sealed by hand: sealing only speeds lookups.
//!
//! **Batches (BOHM, and every other protocol).** BOHM orders whole transactions before it runs
//! them, so it has no interactive worker: [`Database::run_batch`](engine::Database::run_batch)
//! takes owned procedures and returns each with its outcome. A procedure's `run` gets `&self`
//! and a [`Tx`](engine::Tx) (the operations of a [`Worker`](engine::Worker), checked against
//! the procedure's declarations), and may run several times for one transaction (a retried
//! conflict; BOHM's re-execution of a read that met an unproduced version): what it records
//! must be set by every run, and the procedure comes back holding what its last run, the one
//! that committed or rolled back for good, recorded.
//! [`Procedure::committed`](engine::Procedure::committed) is called once per committed
//! procedure: the place for an effect that must happen once.
//!
//! **A protocol chosen at run time** (a name from a configuration file, say) runs the same
//! code: [`ProtocolKind::from_name`](protocols::ProtocolKind::from_name) and
//! [`ProtocolKind::create`](protocols::ProtocolKind::create), with the program written once,
//! generic over the protocol ([`WithDatabase`](protocols::WithDatabase)) and monomorphised for
//! each, and the protocol's options given as `--opt` pairs
//! ([`DatabaseConfig`](protocols::DatabaseConfig)). `examples/embed.rs` runs every protocol
//! family this way (`cargo run --release --example embed`; `cargo test` runs it too).
//!
//! **Durability.** A commit that returns `Ok` is acknowledged: under `--sync commit` durable,
//! and so is what it read (the commit contract in [`Protocol`](engine::Protocol)'s docs). A
//! commit the log cannot make durable returns
//! [`AbortReason::NotDurable`](error::AbortReason::NotDurable).
//!
//! [`Retry`]: engine::Retry

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

pub mod checker;
#[cfg(feature = "cli")]
pub mod cli;
pub mod durability;
pub mod engine;
pub mod error;
#[cfg(feature = "cli")]
pub mod experiment;
pub mod history;
pub mod protocols;
pub mod storage;
pub mod util;
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
