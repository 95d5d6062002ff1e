//! The contract between protocols and everything above them.
//!
//! A [`Protocol`] owns a record header type and creates per-thread [`Worker`]s. A worker executes
//! the operation interface (read, read-for-update, blind write, update-in-place, insert, delete,
//! range scan) for one transaction at a time, then commits or aborts. Procedures never see a
//! protocol: they are written once against [`Worker`] (through [`Tx`](super::Tx)) and monomorphised
//! per protocol, so there is no `dyn` call on the per-operation path.
//!
//! ## Conventions every worker follows
//!
//! * A miss is `Ok(None)` / `Ok(false)`, never an error.
//! * An operation that returns `Err(Abort)` leaves the transaction open; the caller then calls
//!   [`Worker::abort`], which rolls back everything. [`Worker::commit`] that fails has already
//!   rolled back; calling `abort` afterwards is a harmless no-op.
//! * Payload slices passed to `write`/`insert` are exactly the table's row size; anything else is
//!   an `Unsupported` abort (a procedure bug), as is a scan on a hash-indexed table.
//! * Reads hand the row to a closure: no reference into engine memory outlives the call, and the
//!   closure sees a consistent image (a validated copy under optimistic protocols).

use super::database::Database;
use super::driver::{self, Backoff, RunConfig};
use super::options::ProtocolOptions;
use super::procedure::ALL_COLUMNS;
use super::procedure::{Accumulation, TxnType};
use super::stats::WorkerStats;
use super::workload::Workload;
use crate::error::{Abort, AbortReason, Error};
use crate::storage::projection::Columns;
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowId, RowRef, TableId, TableSpec};
use std::ops::ControlFlow;

/// What a protocol promises and supports, for the CLI's listing and for refusing impossible
/// combinations with a message instead of a crash.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Capabilities {
    /// The isolation level the protocol promises (what `txlab check` holds it to).
    pub isolation: Isolation,
    /// Supports inserts and deletes.
    pub inserts: bool,
    /// Supports range scans (with phantom protection if serializable).
    pub scans: bool,
    /// Needs each transaction's access set before it runs.
    pub needs_access_set: bool,
    /// Reads see the database as of the transaction's begin (a multi-version snapshot), not
    /// the latest committed state: a row another transaction commits meanwhile stays unseen.
    pub snapshot_reads: bool,
    /// Whether reads write shared memory, and when (CCBench §3.2: visible reads cost cache-line
    /// transfers on read-mostly workloads; invisible ones need validation).
    pub reads: Reads,
    /// Runs interactive transactions: a caller's thread begins, operates and commits through
    /// [`Database::worker`]. A protocol that orders whole transactions before running them
    /// (BOHM's pipeline) is not interactive: it runs workloads through [`Protocol::drive`], and
    /// `Database::worker` refuses it.
    pub interactive: bool,
    /// Schedules by the workload's piece templates (IC3): every operation is checked against
    /// its piece's template whatever the run asks (`RunConfig::check_templates`), because an
    /// access the template does not declare would break what the protocol's static analysis
    /// promised, and a transaction typed with no template runs the protocol's untyped path.
    pub templates: bool,
}

/// How a protocol's reads show up in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reads {
    /// A read writes nothing shared, ever (`nocc`; Silo validates instead).
    Invisible,
    /// A read writes nothing shared in the read phase; validation may extend the record's read
    /// timestamp (TicToc's rts extension is a write).
    InvisibleUntilValidation,
    /// A read takes a shared lock, a write to the record (2PL).
    Visible,
    /// Reads of hot records take a shared lock; other reads are invisible (MOCC).
    VisibleWhenHot,
    /// A read registers in the version it read (a bit of its reader bitmap, SSN) and
    /// validation publishes its commit timestamp there.
    Registered,
    /// A read is invisible while its piece runs, and leaves an entry in the record's accessor
    /// list when the piece commits (IC3).
    Listed,
}

impl Reads {
    /// The text `txlab list` shows.
    pub fn describe(self) -> &'static str {
        match self {
            Reads::Invisible => "invisible",
            Reads::InvisibleUntilValidation => "invisible, validation writes read timestamps",
            Reads::Visible => "visible (read locks)",
            Reads::VisibleWhenHot => "visible on hot records (read locks), else invisible",
            Reads::Registered => "visible (a bit in the version's reader bitmap)",
            Reads::Listed => "visible from its piece's commit (an accessor-list entry)",
        }
    }
}

/// An isolation level a protocol promises. The checker maps each to the anomaly classes it
/// permits (`checker::permitted`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// Serializable: no anomaly at all.
    Serializable,
    /// Snapshot isolation: write skew and the read-only anomaly (G2-item) are permitted.
    Snapshot,
    /// No isolation (`nocc`): anything goes.
    None,
}

impl Isolation {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Serializable => "serializable",
            Isolation::Snapshot => "snapshot isolation",
            Isolation::None => "no isolation",
        }
    }

    /// The command-line value (`txlab check --isolation`).
    pub fn flag(self) -> &'static str {
        match self {
            Isolation::Serializable => "serializable",
            Isolation::Snapshot => "snapshot",
            Isolation::None => "none",
        }
    }
}

/// What a protocol is set up with when its database is created.
#[derive(Clone, Copy, Debug)]
pub struct Setup<'a> {
    /// The tables, in `TableId` order.
    pub tables: &'a [TableSpec],
    /// The most workers that may exist at once.
    pub max_workers: usize,
    /// The workload's transaction types (their piece templates), empty when the database is
    /// used without a workload.
    pub txn_types: &'a [TxnType],
}

/// A concurrency-control protocol: one value per database, shared by all workers.
///
/// ## The commit contract
///
/// Every protocol commits a transaction that writes through the same five points, in this
/// order but for `Logged` and `Installed`, whose order is the protocol's (each protocol's
/// module doc says where its commit reaches each). They are named by
/// [`CommitPhase`](crate::storage::inject::CommitPhase), and every worker passes them through
/// `WorkerCtx::phase`, where tests stop it with a
/// [`Gate`](crate::storage::inject::Gate); a commit that writes nothing passes `Validated`
/// and `Acknowledging` only.
///
/// 1. **Locked.** Everything the transaction writes is held against other writers (write
///    locks, pending versions, accessor-list entries, placeholders).
/// 2. **Validated**, the serialization point: the reads are validated or certified, and the
///    transaction will commit. Its *commit stamp* is fixed by the time it logs: for every key,
///    a later writer has a larger stamp ([`crate::durability`]).
/// 3. **Logged** (when the database logs).
///    [`LogWriter::begin`](crate::durability::log::LogWriter::begin) comes after the
///    serialization point and before any write becomes visible, and each
///    write's record is appended while that write is still held; `begin` puts the
///    transaction's log epoch in flight, so that a transaction that reads or overwrites one of
///    its writes logs in the same epoch or a later one.
/// 4. **Installed.** The writes are visible to other transactions (installed and unlocked,
///    versions stamped or produced, the commit point passed).
/// 5. **Acknowledging.** `Worker::commit` ends with `WorkerCtx::commit_returning`, which
///    first takes the log epoch out of flight
///    ([`LogWriter::installed`](crate::durability::log::LogWriter::installed)): never before
///    point 4, so a closed log epoch's transactions are all installed. Under `--sync commit` it
///    then waits until the commit is durable; a commit that logged nothing waits until the log
///    epoch in progress is durable, which covers every write it read (a writer reads the
///    epoch before its writes become visible, and the epoch only grows). Under `group` and
///    `none` it returns at once: the commit is durable once the log's durable epoch reaches
///    [`Worker::log_epoch`]. When the log has failed, a commit that logged (under `--sync
///    commit`, any commit) returns [`AbortReason::NotDurable`] instead of `Ok`: its writes are
///    installed in memory, but no log holds them.
///
/// **What a checkpoint may read.** A checkpoint notes the log epoch `s` in progress, waits
/// until `s` is durable (so, by point 5, every transaction of an epoch up to `s` has
/// installed), then reads every row with [`Protocol::read_committed`] while workers run. That
/// must give a committed image (never a value of a transaction that may still roll back) at
/// least as new as every write installed before the call, with the stamp of the transaction
/// that wrote it. An image from a transaction of an epoch above `s` is fine: recovery replays
/// that transaction too.
///
/// **What recovery replays** ([`crate::durability::recovery`]): the newest checkpoint, then
/// every logged transaction of an epoch in `(s, durable]`, each key taking the image with the
/// largest stamp and the changed columns of the updates after it in stamp order. Epochs up to
/// `s` are skipped: by point 5 the checkpoint holds them.
pub trait Protocol: Send + Sync + Sized + 'static {
    /// The name used on the command line and in results.
    const NAME: &'static str;
    /// A one-line description for `txlab list`.
    const DESCRIPTION: &'static str;
    /// What the protocol supports.
    const CAPS: Capabilities;
    /// The header stored in front of every record's payload.
    type Record: RecordHeader;
    /// The per-thread executor.
    type Worker<'db>: Worker + 'db;
    /// The protocol's options (defaults as its paper; `--opt NAME=VALUE`).
    type Options: ProtocolOptions;
    /// Whether the phantom buckets carry logical clocks (protocols that order transactions by
    /// data-driven timestamps, such as TicToc, need absence to have timestamps too; see
    /// `storage::phantom`).
    const BUCKET_CLOCKS: bool = false;
    /// The backoff a run uses unless it names one ([`Backoff::Protocol`]): the protocol's own
    /// contention control where its paper has one (Cicada's regulation, §3.9), else none.
    const DEFAULT_BACKOFF: Backoff = Backoff::None;

    /// Sets the protocol up for a new database.
    fn new(options: Self::Options, setup: &Setup<'_>) -> Result<Self, Error>;

    /// The options it was set up with.
    fn options(&self) -> &Self::Options;

    /// Every how many epochs the storage takes a snapshot for the read-only transactions
    /// ([`Worker::begin_read_only`], Silo §4.9, `storage::snapshot`); 0 (the default): none.
    /// A protocol that returns more than 0 keeps the old values its commits replace
    /// (`WorkerCtx::keep_for_snapshots`) and reads snapshots for declared read-only attempts.
    #[inline]
    fn snapshot_epochs(&self) -> u64 {
        0
    }

    /// Loads `payload` (the table's row size) into the freshly allocated slot `row` of `table`
    /// as a committed row below every stamp the protocol will give (bulk loading, recovery).
    fn load(&self, table: TableId, row: RowRef<'_, Self::Record>, payload: &[u8]);

    /// A row just loaded (see [`Protocol::load`]) entered `table`'s primary index under `key`
    /// at `rid`: a protocol with an index of its own (cicada's multi-version index) adds it
    /// there too. Loading does not overlap transactions on the table. Default: nothing.
    fn indexed(&self, _table: TableId, _key: u64, _rid: RowId) {}

    /// Whether a record is present (not deleted, not an uncommitted insert), as a best-effort
    /// non-transactional read.
    fn is_present(&self, rec: &Self::Record) -> bool;

    /// Copies the row of `row` (of `table`) into `buf` if it is present, as a best-effort
    /// non-transactional read (reconnaissance reads, checks after a run, which every
    /// `Database::visit_present` goes through). The default copies the slot's payload.
    fn read_latest(&self, table: TableId, row: RowRef<'_, Self::Record>, buf: &mut [u8]) -> bool {
        let _ = table;
        if !self.is_present(row.header) {
            return false;
        }
        row.read_into(buf);
        true
    }

    /// Copies the latest committed image of the record of `key` in `table` into `buf` (the payload's
    /// length) and returns the commit stamp it was logged with (see [`crate::durability`]), or
    /// `None` when the record is not a committed row. Consistent while transactions run:
    /// checkpoints read rows with it without stopping workers (the caller keeps an epoch
    /// published, so the slot is not reused meanwhile). The image is never a value that may
    /// still roll back, and is at least as new as every write installed before the call (the
    /// commit contract above: a checkpoint reads only after every transaction of its start
    /// epoch has installed, and relies on this to hold them all).
    fn read_committed(
        &self,
        table: TableId,
        key: u64,
        row: RowRef<'_, Self::Record>,
        buf: &mut [u8],
    ) -> Option<u64>;

    /// Creates a worker for the calling thread.
    fn worker(db: &Database<Self>) -> Result<Self::Worker<'_>, Error>;

    /// The workload runs the transaction types `types` from now on (valid indices into
    /// [`Setup::txn_types`]; see [`Database::set_mix`]). Default: nothing (the protocol treats
    /// every type alike).
    fn set_mix(&self, types: &[usize]) -> Result<(), Error> {
        let _ = types;
        Ok(())
    }

    /// What the protocol's versions hold, for a multi-version protocol (`None` for the others):
    /// read at the end of a run, when no worker runs.
    fn versions(&self, db: &Database<Self>) -> Option<super::report::VersionReport> {
        let _ = db;
        None
    }

    /// Frees what the protocol keeps outside the slots (a multi-version protocol's versions
    /// from the global allocator) when the database drops; no worker is left. Default: nothing.
    fn teardown(&self, storage: &crate::storage::Storage<Self::Record>) {
        let _ = storage;
    }

    /// Faults in the memory the protocol keeps outside the slots for `rows` more rows of
    /// `table` (a multi-version protocol's versions), spending at most `budget` bytes; returns
    /// the bytes faulted in. The driver's prefaulter calls it beside the row store's own, so
    /// that a protocol whose rows live outside the slots gets the same service (default:
    /// nothing to fault).
    fn prefault(&self, table: TableId, rows: u64, budget: usize) -> usize {
        let _ = (table, rows, budget);
        0
    }

    /// Runs a workload with this protocol's thread model. The default runs interactive workers
    /// (one per thread, each executing whole transactions); a protocol with its own pipeline
    /// (BOHM) overrides it and still reports through [`WorkerStats`].
    fn drive<W: Workload>(
        db: &Database<Self>,
        workload: &W,
        cfg: &RunConfig,
    ) -> Result<Vec<WorkerStats>, Error> {
        driver::run_interactive(db, workload, cfg)
    }
}

/// What the end of a piece asks for ([`Worker::piece_end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceEnd {
    /// The piece is done.
    Done,
    /// The piece's run was discarded: run its body again.
    Again,
}

/// [`Worker::accumulate`] applied at once, as an [`Worker::update_cols`] of its column (the
/// default, and what a protocol that defers some accumulations does with the others).
pub fn accumulate_now<W: Worker + ?Sized>(
    w: &mut W,
    table: TableId,
    key: u64,
    acc: Accumulation,
) -> Result<bool, Abort> {
    let cols = acc.columns();
    match w.update_cols(table, key, cols, cols, |row| acc.apply(row))? {
        None => Ok(false),
        Some(true) => Ok(true),
        Some(false) => Err(Abort::new(AbortReason::TemplateViolation)),
    }
}

/// The operation interface a protocol implements. See the module docs for the conventions.
pub trait Worker {
    /// Starts a transaction attempt. An attempt that follows [`Worker::abort`] is a retry of the
    /// aborted transaction, one that follows a commit (or none) a new transaction: protocols that
    /// order transactions by age keep a retried transaction's age, so it eventually becomes the
    /// oldest and wins (wait-die). A caller that gives up after an abort and starts another
    /// transaction lends it the old age once, which only raises its priority.
    /// [`crate::engine::Retry`] runs the whole loop.
    fn begin(&mut self);

    /// Starts a transaction attempt that promises to write nothing (see [`Worker::begin`] for
    /// attempts and retries). A multi-version protocol may run it on an older snapshot that is
    /// safe without certification (`protocols::mv::worker`), a protocol that keeps
    /// snapshots ([`Protocol::snapshot_epochs`]: Silo §4.9) on the newest snapshot, and both
    /// then refuse its writes with [`crate::error::AbortReason::ReadOnlyWrite`]; the others run
    /// it as any transaction (the default). Procedures declare it with [`crate::engine::Procedure::read_only`].
    #[inline]
    fn begin_read_only(&mut self) {
        self.begin();
    }

    /// Starts a transaction attempt whose access set was declared before it began (see
    /// [`Worker::begin`] for attempts and retries). The driver calls it instead of the other
    /// `begin`s for a protocol whose [`Capabilities::needs_access_set`] is set
    /// ([`crate::engine::Retry::run_declared`] and [`crate::engine::Retry::run_procedure_on`]
    /// do the same for a program); a protocol that locks in a global order (`2pl-ordered`)
    /// takes every lock here, and refuses an attempt begun otherwise
    /// ([`crate::error::AbortReason::Undeclared`]) and an access outside the set
    /// ([`crate::error::AbortReason::AccessSetMismatch`]). The set need not be sealed. The
    /// other protocols ignore it (the default).
    #[inline]
    fn begin_declared(&mut self, set: &super::procedure::AccessSet) {
        let _ = set;
        self.begin();
    }

    /// Starts a transaction attempt that reads much and writes little (see [`Worker::begin`]
    /// for attempts and retries): it may write. A protocol may treat its reads differently
    /// (ERMIA SSI's read optimisation, `protocols::ermia_ssi`); the others run it as any
    /// transaction (the default). Procedures declare it with
    /// [`crate::engine::Procedure::read_mostly`].
    #[inline]
    fn begin_read_mostly(&mut self) {
        self.begin();
    }

    /// Reads `key`; `f` sees the row ([`Worker::read_cols`] of every column).
    #[inline]
    fn read<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read_cols(table, key, ALL_COLUMNS, f)
    }

    /// Reads `key` announcing that it will be written (2PL takes the exclusive lock now). The
    /// default is a plain [`Worker::read`], for protocols whose reads announce nothing.
    #[inline]
    fn read_for_update<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read(table, key, f)
    }

    /// Overwrites the whole row of `key` without reading it. `Ok(false)` if `key` is absent.
    #[must_use = "`Ok(false)` means the key is absent and nothing was written"]
    fn write(&mut self, table: TableId, key: u64, value: &[u8]) -> Result<bool, Abort>;

    /// Reads and modifies the row of `key` in place ([`Worker::update_cols`] reading and writing
    /// every column). `Ok(None)` if `key` is absent.
    #[inline]
    #[must_use = "`Ok(None)` means the key is absent and nothing was changed"]
    fn update<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.update_cols(table, key, ALL_COLUMNS, ALL_COLUMNS, f)
    }

    /// Reads the columns `cols` of `key` (a mask over the table's declared columns;
    /// `ALL_COLUMNS` for the whole row): `f` sees a whole-row slice in which only those columns'
    /// bytes are guaranteed. A protocol that copies rows copies just the words they occupy (see
    /// `storage::projection`).
    fn read_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort>;

    /// Reads and modifies `key` in place, column by column: `f` sees the columns
    /// `reads | writes` (the other bytes of the slice are unspecified) and may change the
    /// columns `writes`; only those are written back, so a change anywhere else may be lost (and
    /// is a `TemplateViolation` when the database checks projections, see
    /// `DbOptions::poison_unprojected`). A column `f` reads and changes belongs in `writes`
    /// (`reads` may leave it out). The row counts as written whatever `writes` holds: locks and
    /// versions are per row. `Ok(None)` if `key` is absent.
    #[must_use = "`Ok(None)` means the key is absent and nothing was changed"]
    fn update_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        reads: Columns,
        writes: Columns,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort>;

    /// Accumulates `acc` into `key`'s row: a commutative change the transaction does not
    /// read ([`Accumulation`]). A protocol may apply it at commit rather than now (IC3, where
    /// its analysis allows, §4.3), so the transaction must not count on reading its effect.
    /// The default applies it at once as [`Worker::update_cols`] of its column.
    /// `Ok(false)` if `key` is absent; an accumulation that does not fit the row is a
    /// `TemplateViolation` (a procedure bug).
    #[must_use = "`Ok(false)` means the key is absent and nothing was changed"]
    fn accumulate(&mut self, table: TableId, key: u64, acc: Accumulation) -> Result<bool, Abort> {
        accumulate_now(self, table, key, acc)
    }

    /// Inserts a new row. `Ok(false)` if `key` is present.
    #[must_use = "`Ok(false)` means the key is present already and nothing was inserted"]
    fn insert(&mut self, table: TableId, key: u64, value: &[u8]) -> Result<bool, Abort>;

    /// Deletes the row of `key`. `Ok(false)` if `key` is absent.
    #[must_use = "`Ok(false)` means the key is absent and nothing was deleted"]
    fn delete(&mut self, table: TableId, key: u64) -> Result<bool, Abort>;

    /// Visits the present rows with `lo <= key <= hi` in key order, at most `limit` of them,
    /// stopping early when `f` breaks. Returns the number visited. Serializable protocols protect
    /// the range read (up to the last row visited when the scan stopped early) against phantoms.
    fn scan(
        &mut self,
        table: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort>;

    /// A hint that `key` will be accessed soon: looks it up and prefetches its record so that
    /// the cache misses of several upcoming operations overlap; a protocol may remember the row
    /// id for this attempt's next operation on the key. Records nothing for validation and
    /// changes no shared state; the default does nothing.
    #[inline]
    fn prefetch(&mut self, table: TableId, key: u64) {
        let _ = (table, key);
    }

    /// [`Worker::prefetch`] for several keys at once, so that index misses overlap too (a hash
    /// index's buckets are all requested before any is searched). Each key comes with the
    /// columns its coming operation uses: only their cache lines (and the header's) are fetched.
    /// The default prefetches one whole key after another.
    #[inline]
    fn prefetch_many(&mut self, keys: &[(TableId, u64, Columns)]) {
        for &(t, k, _) in keys {
            self.prefetch(t, k);
        }
    }

    /// Names the transaction type of the attempt begun next: `ty` indexes the templates the
    /// protocol was set up with ([`Setup::txn_types`]). The engine calls it before every
    /// attempt of a typed transaction (the driver, [`crate::engine::Retry::run_procedure`], the
    /// checker); the next `begin*` consumes it, so an attempt begun without it is untyped. A
    /// protocol that schedules by template (IC3) acts on it; the others ignore it (the default).
    #[inline]
    fn typed(&mut self, ty: usize) {
        let _ = ty;
    }

    /// Marks the start of (one run of) piece `piece` of the transaction's template, before its
    /// body runs. A protocol that runs pieces on their own (IC3) may wait here for the pieces
    /// it depends on. The default does nothing.
    #[inline]
    fn piece_begin(&mut self, piece: usize) -> Result<(), Abort> {
        let _ = piece;
        Ok(())
    }

    /// Marks the end of a run of piece `piece`, whose body returned `body`. Returns
    /// [`PieceEnd::Again`] when the piece must run again: the protocol has discarded what the
    /// run did (its piece-level validation failed), and [`crate::engine::Tx::piece`] runs the
    /// body once more from [`Worker::piece_begin`]. An `Err` ends the transaction attempt (the
    /// caller then aborts). The default passes the body's outcome on.
    #[inline]
    fn piece_end(&mut self, piece: usize, body: Result<(), Abort>) -> Result<PieceEnd, Abort> {
        let _ = piece;
        body.map(|()| PieceEnd::Done)
    }

    /// Whether every read of the open transaction would still pass validation now. Optimistic
    /// protocols check their read and phantom sets without locking anything; protocols whose
    /// reads cannot go stale (locking, or no isolation at all) answer `true`, the default.
    ///
    /// Optimistic transactions may observe a mix of states that validation would reject later
    /// (no opacity). The driver asks this when a procedure finds its data inconsistent (a
    /// [`MissingRow`](crate::error::AbortReason::MissingRow) abort): if the reads are stale the
    /// attempt is a concurrency abort and is retried, otherwise the row really is missing.
    fn reads_still_valid(&mut self) -> bool {
        true
    }

    /// The log epoch of this worker's last commit that logged writes (0 if none, or if the
    /// database does not log): it is durable once the log's durable epoch reaches it
    /// ([`crate::durability::log::LogManager::durable_epoch`]).
    fn log_epoch(&self) -> u64 {
        0
    }

    /// Tries to commit. On `Err` the transaction has been rolled back, except for
    /// [`AbortReason::NotDurable`]: the log failed, and the transaction's writes are installed
    /// in memory but held by no log (see the commit contract in [`Protocol`]'s docs).
    ///
    /// `Ok` is the acknowledgement: under `--sync commit` the commit is durable, and so is
    /// everything it read (a read-only commit waits for that too); otherwise it is durable once
    /// the log's durable epoch reaches [`Worker::log_epoch`] (for a commit that logged
    /// nothing, the log epoch in progress when it returned).
    fn commit(&mut self) -> Result<(), Abort>;

    /// Runs `f` between transactions so that rows it reads outside any transaction (through
    /// [`crate::engine::Recon`], e.g. a procedure's reconnaissance) are not freed and reused
    /// under it: the worker's storage epoch is published meanwhile. The default runs `f` as
    /// is, for a worker that frees nothing.
    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        f()
    }

    /// Rolls back the open transaction (a no-op if none is open). Dropping a worker does it
    /// too: every protocol's worker rolls back an open transaction when it drops.
    fn abort(&mut self);
}
