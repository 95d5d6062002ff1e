//! Durability: redo logging, group commit, checkpoints and recovery, the same for every
//! protocol.
//!
//! ## The contract
//!
//! A protocol hands durability each committed transaction's writes, at its serialization point
//! and with its write locks held: a **commit stamp** and, for every row written, the table, the
//! key and the row's new image, or only the columns an update changed, or its deletion. The
//! stamp orders conflicting writes the way the protocol serialised them: for every key, a later
//! writer has a larger stamp. Replaying, for each key, the image with the largest stamp, then
//! the changed columns of the updates after it in stamp order, rebuilds exactly the state the
//! protocol produced. Silo and MOCC give their commit TID, TicToc its commit timestamp, and the in-place
//! protocols (nocc, 2PL) a TID computed the same way under their locks
//! ([`crate::protocols::inplace::log_in_place`]), BOHM its timestamp (logged at completion,
//! before any of its versions is produced). Across a delete and a re-insert of a key into
//! another slot the order holds too: the new slot is used only after the old one was unlinked,
//! a grace period later, so its TIDs are in a later epoch (TicToc's new record starts at the
//! phantom bucket's clock, above the deletion's timestamp). Aborted attempts log nothing; with
//! logging off a protocol pays one branch per commit.
//!
//! The writes are appended through the worker's [`log::LogWriter`] (in
//! `engine::context::WorkerCtx::log`): `begin` (the stamp; returns the transaction's log
//! epoch), `put_row`/`delete` per write, `end`. See [`log`] for group commit and [`format`](mod@format) for
//! the files.
//!
//! A database that logs cannot also record histories: the in-place protocols keep one stamp per
//! record, which is either a history stamp or a commit stamp.

//! ## What durability needs of a database
//!
//! Durability sits below the engine and never names a protocol. Checkpoints and recovery reach a
//! database through [`Durable`], which the engine's `Database` implements: the storage (tables,
//! indexes, epochs), the log, a stable read of a row's latest committed image (what a checkpoint
//! writes) and a loader that installs a recovered row (what recovery replays into).

pub mod checkpoint;
pub mod format;
pub mod generation;
pub mod log;
pub mod recovery;

use crate::error::Error;
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowRef, Storage, TableId};
use std::sync::Arc;

/// A database as checkpoints and recovery see it. `Sync`: checkpointer and recovery threads
/// share it.
pub trait Durable: Sync {
    /// The protocol's record type (what a table's slots hold).
    type Record: RecordHeader;
    /// Installs recovered rows (one per recovery thread).
    type Installer<'a>: Install
    where
        Self: 'a;

    /// The tables.
    fn storage(&self) -> &Storage<Self::Record>;

    /// The redo log, when the database logs.
    fn log(&self) -> Option<&Arc<log::LogManager>>;

    /// The latest committed image of `row` (`key` of table `t`) into `image` and its commit
    /// stamp, or `None` when the row is absent: never a value that may still roll back. The
    /// protocol's `read_committed`; see the commit contract in `engine::protocol`.
    fn read_committed(
        &self,
        t: TableId,
        key: u64,
        row: RowRef<'_, Self::Record>,
        image: &mut [u8],
    ) -> Option<u64>;

    /// A new installer of recovered rows.
    fn installer(&self) -> Self::Installer<'_>;
}

/// Installs rows into a database outside any transaction (recovery, loading).
pub trait Install {
    /// Inserts row `key` of table `t` with `image` (a whole row).
    fn insert(&mut self, t: TableId, key: u64, image: &[u8]) -> Result<(), Error>;
}
