//! The single-version optimistic family's substrate: Silo, TicToc, MOCC and IC3 are built on
//! it (`2pl-*` and `nocc` write in place instead, [`super::inplace`]; the multi-version
//! protocols are in [`super::mv`]).
//!
//! **What a protocol of the family implements** ([`OccProtocol`]): its record word's version
//! bits (Silo's epoch and sequence, TicToc's wts and delta-rts, ...) and per-version extra, how a
//! read is recorded and validated, and its commit: lock the write set, draw the commit stamp,
//! validate (the serialization point), install. MOCC adds its temperature and its queue locks,
//! IC3 its pieces; both through the same hooks.
//!
//! **What it gets**: [`OccWorker`], the whole read phase: read, write and phantom sets,
//! buffered writes, inserts and deletes through absent records, range scans, prefetching,
//! history recording, and the commit-time steps that do not depend on how versions are ordered
//! (locking the write set in a deadlock-free order, validating phantoms, installing and logging
//! the writes, rolling back); [`tid`] gives Silo-style commit TIDs to those that want them.
//!
//! ## The record word
//!
//! Every record starts with one 64-bit word ([`OccRecord::word`]) whose low four bits mean the
//! same thing for every protocol here ([`LOCK`], [`LATEST`], [`ABSENT`], [`UNLINKED`]); the other
//! 60 bits are the protocol's version (Silo's epoch and sequence, TicToc's wts and delta-rts). A
//! reader copies a row between two loads of the word (a seqlock read: [`OccRecord::same_version`]
//! says whether the two loads name one version) and keeps the word, with the protocol's per-version
//! extra ([`OccRecord::aux`]) read in the same window, in its read set.
//!
//! ## Inserts, deletes and phantoms
//!
//! An insert puts a fresh record into the index at once, locked and absent (Silo §4.5), and bumps
//! its phantom bucket; a delete is a buffered write that marks the record absent at commit; absent
//! records stay in the index until the epoch GC unlinks them (`storage::reclaim`). Range scans and
//! absent-key point reads keep the versions of the phantom buckets they covered
//! (`storage::phantom`): commit re-checks them ([`OccWorker::validate_phantoms`]).
//!
//! ## The commit contract
//!
//! How the protocols here keep the points of [`crate::engine::Protocol`]'s commit contract
//! (each protocol's commit places the first two; [`OccWorker::install`] the rest):
//! `Locked` once the write set's words are locked, `Validated` once the read and phantom sets
//! are validated (the serialization point). [`OccWorker::install`] begins the log record
//! before the first record is unlocked, and installs, logs and unlocks each record in turn (its
//! image is copied to the log under its lock, so a later writer of the key logs a larger
//! stamp after it); `Logged` and `Installed` are passed together once the last record is
//! unlocked. `Worker::commit` returns through `WorkerCtx::commit_returning`, which takes the
//! log epoch out of flight (`Acknowledging`). [`read_committed`] waits out a locked record (a
//! commit installing it) and reads between two loads of its word, so a checkpoint never reads
//! a half-installed row, nor misses one installed before it.

pub mod tid;

use crate::engine::context::WorkerCtx;
use crate::engine::procedure::ALL_COLUMNS;
use crate::engine::{accumulate_now, Accumulation, PieceEnd, Worker};
use crate::error::{Abort, AbortReason};
use crate::history::{Recorder, Stamp};
use crate::protocols::common::scan::ScanSteps;
use crate::protocols::common::{apply_update, check_len, table, Arena, Scratch};
use crate::storage::inject::CommitPhase;
use crate::storage::phantom::{Batch, RangeBuckets};
use crate::storage::projection::{Columns, Projection};
use crate::storage::reclaim::Unlink;
use crate::storage::row_store::RecordHeader;
use crate::storage::snapshot::Kept;
use crate::storage::{RowId, RowRef, Table, TableId};
use crate::util::SpinWait;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Lock bit of a record word.
pub const LOCK: u64 = 1 << 0;
/// Latest-version bit (Silo's; other protocols leave it clear).
pub const LATEST: u64 = 1 << 1;
/// Absent bit: deleted, or inserted and not committed yet.
pub const ABSENT: u64 = 1 << 2;
/// Unlinked bit: the GC is removing the record from the index.
pub const UNLINKED: u64 = 1 << 3;
/// The four status bits.
pub const STATUS: u64 = 0xF;

/// Whether a word is locked.
#[inline(always)]
pub const fn is_locked(w: u64) -> bool {
    w & LOCK != 0
}
/// Whether a word is absent (deleted, an uncommitted insert, or unlinked).
#[inline(always)]
pub const fn is_absent(w: u64) -> bool {
    w & (ABSENT | UNLINKED) != 0
}
/// Whether a word is unlinked.
#[inline(always)]
pub const fn is_unlinked(w: u64) -> bool {
    w & UNLINKED != 0
}

/// The latest committed image of `row` (copied into `buf`) and its commit stamp, `None` when the
/// record is absent (deleted, or an insert not yet committed): a stable read that waits while a
/// committer holds the record (checkpoints read rows with it while transactions run).
pub fn read_committed<R: OccRecord>(row: RowRef<'_, R>, buf: &mut [u8]) -> Option<u64> {
    let mut spin = SpinWait::default();
    loop {
        let v1 = row.header.load();
        if is_absent(v1) {
            return None;
        }
        if is_locked(v1) || !R::settled(v1) {
            spin.spin();
            continue;
        }
        let aux = row.header.aux();
        row.read_into(buf);
        // Acquire fence: the copy happens before the re-check (seqlock read; pairs with the
        // Release fence after locking in `lock_write_set`).
        fence(Ordering::Acquire);
        let v2 = row.header.word().load(Ordering::Relaxed);
        if R::same_version(v1, v2) {
            return Some(R::commit_stamp(v1, aux));
        }
        spin.spin();
    }
}

/// A record header that starts with an optimistic record word. See the module docs.
pub trait OccRecord: RecordHeader {
    /// The record word.
    fn word(&self) -> &AtomicU64;

    /// Loads the record word.
    #[inline(always)]
    fn load(&self) -> u64 {
        // Acquire: pairs with the Release store that unlocks in the write phase.
        self.word().load(Ordering::Acquire)
    }

    /// Stores the record word (typically unlocking).
    #[inline(always)]
    fn store(&self, w: u64) {
        // Release: publishes the payload (and the extra) written under the lock.
        self.word().store(w, Ordering::Release);
    }

    /// Tries to set the lock bit, expecting the unlocked word `cur`.
    #[inline(always)]
    fn try_lock(&self, cur: u64) -> bool {
        debug_assert!(!is_locked(cur));
        // Acquire: the holder's reads of the record (and later payload writes) stay after it.
        self.word()
            .compare_exchange_weak(cur, cur | LOCK, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The per-version extra a reader keeps beside the word (TicToc: the version's install
    /// timestamp); `()` for protocols with none, which then pay nothing for it.
    type Aux: Copy + Default + PartialEq + std::fmt::Debug;

    /// Reads the extra (between the two loads of a stable read).
    fn aux(&self) -> Self::Aux;

    /// Whether the extra ([`OccRecord::aux`]) of the version `word` names is safe to read: false
    /// while a committer is rewriting it (it sets a bit of the word first, with Release stores
    /// of the extra after it). Always true by default.
    #[inline(always)]
    fn settled(word: u64) -> bool {
        let _ = word;
        true
    }

    /// Whether the unlocked words `a` and `b`, loaded before and after a copy of the row, name
    /// the same version (so that the copy is consistent). Equality by default; TicToc ignores
    /// the read timestamp, which readers extend without touching the row.
    #[inline(always)]
    fn same_version(a: u64, b: u64) -> bool {
        a == b
    }

    /// When the version `word` names is not committed (a protocol whose pieces write the
    /// payload before their transaction commits: IC3), copies the latest committed image of
    /// `row` into `buf` and returns its word (unlocked; absent when the committed state is) and
    /// extra. `None` when `word`'s version is committed, which it always is by default. Read
    /// phases that must see committed data only ([`OccProtocol::reads_committed`]) ask it first.
    #[inline(always)]
    fn committed_image(row: RowRef<'_, Self>, word: u64, buf: &mut [u8]) -> Option<(u64, Self::Aux)>
    where
        Self: Sized,
    {
        let _ = (row, word, buf);
        None
    }

    /// The history stamp of the version `(word, aux)` of row `rid`.
    fn stamp(word: u64, aux: Self::Aux, rid: RowId) -> Stamp;

    /// The epoch the version `word` committed in (0 for a record no transaction committed),
    /// for the snapshots of read-only transactions (`storage::snapshot`): the protocols whose
    /// words carry it (TID words) implement it, and the default [`OccRecord::at_boundary`]
    /// asks it. Asked only where the database keeps snapshots, which only a protocol that
    /// keeps them asks for ([`crate::engine::Protocol::snapshot_epochs`]).
    #[inline(always)]
    fn epoch(word: u64) -> u64 {
        let _ = word;
        unreachable!("asked only of protocols that keep snapshots")
    }

    /// For a snapshot reader at boundary `b` (`storage::snapshot`): copies the columns `cols`
    /// of the value `row` holds in place into `buf` when that value committed below `b`, or
    /// says that it committed at or after `b` ([`InPlace::Replaced`]: the value at `b` is on
    /// the row's chain, kept by the writer that replaced it). By default the value in place is
    /// the payload, whose epoch the word carries ([`OccRecord::epoch`]); a payload a committer
    /// holds is waited for (its epoch is at least `b`, so it keeps that value before replacing
    /// it, but the copy may be half overwritten). A snapshot reader records the versions it
    /// reads with the default extra.
    #[inline]
    fn at_boundary(
        row: RowRef<'_, Self>,
        b: u64,
        buf: &mut [u8],
        p: &Projection,
        cols: Columns,
    ) -> InPlace
    where
        Self: Sized,
    {
        let mut spin = SpinWait::default();
        loop {
            let v1 = row.header.load();
            if is_unlinked(v1) {
                return InPlace::Unlinked;
            }
            if Self::epoch(v1) >= b {
                // The committer kept what it replaced (the Acquire load of its word above
                // makes the copy visible).
                return InPlace::Replaced;
            }
            // An absence below `b` (a deletion, or a record no one committed yet) holds
            // whoever has it locked.
            if is_absent(v1) {
                return InPlace::Absent;
            }
            if is_locked(v1) || !Self::settled(v1) {
                spin.spin();
                continue;
            }
            row.read_cols_into(buf, p, cols);
            // Acquire fence: the copy before the re-check (as in `OccWorker::stable_read`).
            fence(Ordering::Acquire);
            if row.header.word().load(Ordering::Relaxed) == v1 {
                return InPlace::Present(v1);
            }
            spin.spin();
        }
    }

    /// The commit stamp the version `(word, aux)` was logged with (see [`OccWorker::install`]).
    fn commit_stamp(word: u64, aux: Self::Aux) -> u64;

    /// Initialises a freshly allocated record for an insert: locked, absent, and a version no
    /// transaction committed (the history's `UNBORN`).
    fn init_fresh(&self);

    /// Called when the fresh record has just become `key`'s index entry (before the insert bumps
    /// the bucket). Nothing by default; TicToc gives the record the bucket's timestamps (the
    /// absence it replaces), having kept readers off it until then.
    #[inline]
    fn inserted(&self, buckets: &RangeBuckets, key: u64) {
        let _ = (buckets, key);
    }

    /// Whether the GC may unlink an absent, unlocked record whose word is `word` now that every
    /// running transaction began in epoch `safe` or later (see `storage::reclaim`'s
    /// `Reclaimer::collect`): protocols whose commit stamps carry the epoch wait until the
    /// deletion's epoch is below `safe`, so that the key's next insert, into a fresh record,
    /// commits a larger stamp. (`self` for a protocol that keeps the stamp beside the word:
    /// IC3.)
    fn unlinkable(&self, word: u64, safe: u64) -> bool;

    /// Called when the GC has just unlinked the record (its word is `word`, final), before its
    /// index entry is removed. Nothing by default; TicToc moves the record's timestamps onto the
    /// key's phantom bucket.
    #[inline]
    fn unlinked(&self, buckets: &RangeBuckets, key: u64, word: u64) {
        let _ = (buckets, key, word);
    }
}

/// The GC's unlink step for every optimistic protocol: absent and unlocked records become
/// unlinked once [`OccRecord::unlinkable`] (see `storage::reclaim`).
pub fn unlink<R: OccRecord>(tbl: &Table<R>, key: u64, rec: &R, safe: u64) -> Unlink {
    let cur = rec.load();
    if is_locked(cur) {
        return Unlink::Busy;
    }
    if is_unlinked(cur) {
        return Unlink::Gone;
    }
    if !is_absent(cur) {
        return Unlink::Revived;
    }
    if !rec.unlinkable(cur, safe) {
        return Unlink::Busy;
    }
    // AcqRel: the unlinked word is final; later readers of it see what the unlinker saw.
    match rec.word().compare_exchange(cur, cur | UNLINKED, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            rec.unlinked(&tbl.buckets, key, cur | UNLINKED);
            Unlink::Unlinked
        }
        Err(_) => Unlink::Busy,
    }
}

/// What commit does when a write-set record is locked by another committing transaction
/// (CCBench's Wait / NoWait / NoWaitTT, §4.2 and §6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ValidationLock {
    /// Spin until it is free (Silo's original; the write set is locked in a global order, so
    /// waiting cannot deadlock).
    Wait,
    /// Abort at once and retry the transaction (CCBench's NoWait).
    NoWait,
    /// Release every lock taken, wait a moment and lock the write set again, without aborting
    /// (TicToc's original no-wait locking, CCBench's NoWaitTT).
    NoWaitTT,
}

impl ValidationLock {
    /// The `--opt validation-lock` values.
    pub const VALUES: &'static str = "wait|nowait|nowaittt";

    /// Parses an `--opt validation-lock` value.
    pub fn parse(name: &str, value: &str) -> Result<Self, String> {
        crate::engine::options::choice(
            name,
            value,
            &[
                ("wait", ValidationLock::Wait),
                ("nowait", ValidationLock::NoWait),
                ("nowaittt", ValidationLock::NoWaitTT),
            ],
        )
    }
}

/// The `--opt read-phase-extension` option, shared by the protocols built on this read phase
/// (see [`OccWorker::extend_read_phase`]).
pub const READ_PHASE_EXTENSION: crate::engine::OptionSpec = crate::engine::OptionSpec {
    name: "read-phase-extension",
    values: "0 to 1000000 (ns)",
    default: "0",
    help: "after a read phase that met a concurrent update, wait this long before validating \
           (ReadPhaseExtension, CCBench §6.2; 0: off)",
};

/// Parses an `--opt read-phase-extension` value (nanoseconds).
pub fn parse_read_phase_extension(name: &str, value: &str) -> Result<u32, String> {
    crate::engine::options::number(name, value, 0u32, 1_000_000)
}

/// The `--opt snapshot-epochs` option of the protocols that keep snapshots for read-only
/// transactions (Silo §4.9, see `storage::snapshot`).
pub const SNAPSHOT_EPOCHS: crate::engine::OptionSpec = crate::engine::OptionSpec {
    name: "snapshot-epochs",
    values: "0 to 100000 (epochs)",
    default: "0",
    help: "read-only transactions read a snapshot taken every this many epochs, without locks \
           or validation, and writers keep the old values they need (Silo §4.9: 25 epochs, 1 s); \
           0: off, read-only transactions run as the others",
};

/// Parses an `--opt snapshot-epochs` value.
pub fn parse_snapshot_epochs(name: &str, value: &str) -> Result<u32, String> {
    crate::engine::options::number(name, value, 0u32, 100_000)
}

/// A single-version optimistic protocol: its record and its commit. The read phase is
/// [`OccWorker`]'s.
pub trait OccProtocol: Sized + 'static {
    /// The record header.
    type Record: OccRecord;
    /// Per-worker state and the options commit needs.
    type Local;

    /// Commits the open transaction; on `Err` it has been rolled back.
    fn commit(w: &mut OccWorker<'_, Self>) -> Result<(), Abort>;

    /// Whether every read would still pass validation now (see
    /// [`Worker::reads_still_valid`]).
    fn reads_still_valid(w: &mut OccWorker<'_, Self>) -> bool;

    /// Whether the running attempt's reads see committed data only (see
    /// [`OccRecord::committed_image`]): IC3's transactions that run outside its analysis. False
    /// by default.
    #[inline(always)]
    fn reads_committed(w: &OccWorker<'_, Self>) -> bool {
        let _ = w;
        false
    }

    /// Whether the running attempt's read of the columns `cols` of table `t` stays out of its
    /// read set: nothing its validation would check can change them while it runs (IC3's typed
    /// transactions reading columns that no analysed template writes, under a guard against
    /// everyone else). Such a read is recorded in the history at the record's committed
    /// version ([`OccRecord::committed_image`]). Asked of every read of a row and every scan,
    /// and of reads announcing a write too (whose answer is not used: they are tracked), so
    /// that a protocol sees every read's columns. False by default.
    #[inline(always)]
    fn untracked(w: &mut OccWorker<'_, Self>, t: TableId, cols: Columns) -> bool {
        let _ = (w, t, cols);
        false
    }

    /// Whether the running attempt defers its accumulations into table `t` to its commit
    /// ([`OccProtocol::defer`]): IC3 where its analysis allows (§4.3). False by default: an
    /// accumulation is then an `update_cols` of its column.
    #[inline(always)]
    fn defers(w: &OccWorker<'_, Self>, t: TableId) -> bool {
        let _ = (w, t);
        false
    }

    /// Keeps accumulation `acc` into row `rid` (key `key`) of table `t` for the attempt's
    /// commit, which applies it; `Ok(false)` when the row is absent. Asked only where
    /// [`OccProtocol::defers`] holds, with an accumulation that fits the row.
    fn defer(
        w: &mut OccWorker<'_, Self>,
        t: TableId,
        key: u64,
        rid: RowId,
        acc: Accumulation,
    ) -> Result<bool, Abort> {
        let _ = (w, t, key, rid, acc);
        unreachable!("asked only where `defers` holds, which it never does by default")
    }

    /// Called when the read phase is about to touch row `rid` (key `key`) of table `t` (record
    /// `rec`), which is not in the write set yet: to read it, or to write it when `write`. MOCC
    /// takes its pessimistic locks on hot records here; IC3 notes the keys of records being
    /// inserted; an `Err` aborts the operation. Nothing by default.
    #[inline(always)]
    fn access(
        w: &mut OccWorker<'_, Self>,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &Self::Record,
        write: bool,
    ) -> Result<(), Abort> {
        let _ = (w, t, key, rid, rec, write);
        Ok(())
    }

    /// Called when an attempt ends, `committed` or not, before its sets are emptied and its
    /// epoch is left (so every record it reached is still safe to touch): MOCC releases its
    /// locks here and remembers what to lock first on a retry. Nothing by default.
    #[inline(always)]
    fn end(w: &mut OccWorker<'_, Self>, committed: bool) {
        let _ = (w, committed);
    }

    /// Called when an attempt begins, after its epoch is entered. Nothing by default.
    #[inline(always)]
    fn begin(w: &mut OccWorker<'_, Self>) {
        let _ = w;
    }

    /// Called when an attempt begun as read-only ([`Worker::begin_read_only`]) takes a
    /// snapshot: it reads the snapshot alone and commits nothing. Nothing by default (IC3 runs
    /// it directly, outside its analysis).
    #[inline(always)]
    fn snapshot_taken(w: &mut OccWorker<'_, Self>) {
        let _ = w;
    }

    /// [`Worker::typed`]. Nothing by default.
    #[inline(always)]
    fn typed(w: &mut OccWorker<'_, Self>, ty: usize) {
        let _ = (w, ty);
    }

    /// [`Worker::piece_begin`]. Nothing by default.
    #[inline(always)]
    fn piece_begin(w: &mut OccWorker<'_, Self>, piece: usize) -> Result<(), Abort> {
        let _ = (w, piece);
        Ok(())
    }

    /// [`Worker::piece_end`]: a protocol that commits pieces on their own (IC3) does it here.
    /// The body's outcome by default.
    #[inline(always)]
    fn piece_end(
        w: &mut OccWorker<'_, Self>,
        piece: usize,
        body: Result<(), Abort>,
    ) -> Result<PieceEnd, Abort> {
        let _ = (w, piece);
        body.map(|()| PieceEnd::Done)
    }
}

/// A read-set entry.
#[derive(Clone, Copy, Debug)]
pub struct ReadEntry<A> {
    /// Table.
    pub table: TableId,
    /// Row.
    pub rid: RowId,
    /// The record word read (unlocked).
    pub word: u64,
    /// The record's extra read with it ([`OccRecord::aux`]).
    pub aux: A,
    /// Pushed together with a write-set entry for the same row (an update, revive or delete
    /// reads what it replaces): a lock validation finds on the row is our own, and needs no
    /// search of the write set. Other reads of rows we write are found by that search.
    /// Invariant: set only while that write-set entry exists; `OccWorker::drop_write`, the one
    /// place an entry leaves the write set, clears it (a stale `mine` would let validation
    /// ignore another transaction's lock on a row we read).
    pub mine: bool,
}

/// What a write-set entry does at commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// Overwrite a present record.
    Update,
    /// Make an absent (deleted, unlocked) record present again.
    Revive,
    /// A record this transaction created (locked and absent since the insert).
    Insert,
    /// Mark a present record absent.
    Delete,
    /// A record this transaction created and then deleted: stays absent, gets retired.
    InsertDeleted,
}

impl WriteKind {
    /// Whether the record is present after commit.
    #[inline]
    pub fn present(self) -> bool {
        matches!(self, WriteKind::Update | WriteKind::Revive | WriteKind::Insert)
    }

    /// Whether the entry bumped its key's phantom bucket (it made a key appear in the index or
    /// revived an absent one).
    #[inline]
    pub fn bumped(self) -> bool {
        matches!(self, WriteKind::Revive | WriteKind::Insert | WriteKind::InsertDeleted)
    }
}

/// A write entry's `off` when it has no buffer in the arena: a delete's, or an insert's, whose
/// row is written straight into its fresh record (locked and absent, so no reader copies it).
pub const NO_BUFFER: u32 = u32::MAX;

/// A write-set entry.
#[derive(Clone, Copy, Debug)]
pub struct WriteEntry {
    /// Table.
    pub table: TableId,
    /// Row.
    pub rid: RowId,
    /// Key.
    pub key: u64,
    /// What commit does.
    pub kind: WriteKind,
    /// Arena offset of the buffered row, or [`NO_BUFFER`].
    off: u32,
    /// The columns the buffered row holds (an `update_cols` copies only the ones it sees).
    cols: Columns,
    /// The columns this transaction changed (a subset of `cols`): the words they cover are what
    /// commit installs.
    dirty: Columns,
    /// The record word seen when locking at commit (unlocked).
    pub locked: u64,
}

impl WriteEntry {
    /// The columns the entry's buffered row holds: those its updates read or wrote (every
    /// column for inserts and revives; none for a delete).
    #[inline]
    pub fn buffered(&self) -> Columns {
        self.cols
    }

    /// The columns the commit writes: the changed ones of an update, every column otherwise.
    #[inline]
    pub fn written(&self) -> Columns {
        if self.kind == WriteKind::Update {
            self.dirty
        } else {
            ALL_COLUMNS
        }
    }
}

/// A write entry's place in the lock order: (table, row), then its index `i` in the write set
/// (which the sort never reaches: an entry's record is unique in the write set).
#[inline(always)]
fn lock_key(w: &WriteEntry, i: usize) -> u128 {
    u128::from(w.table.0) << 96 | u128::from(w.rid.0) << 32 | i as u128
}

/// A phantom-set entry: a bucket version read by a scan or an absent-key read.
#[derive(Clone, Copy, Debug)]
pub struct PhantomEntry {
    /// Table.
    pub table: TableId,
    /// Bucket word.
    pub slot: u32,
    /// The version read.
    pub version: u64,
}

/// The worker of an optimistic protocol `P`. See the module docs.
pub struct OccWorker<'db, P: OccProtocol> {
    /// The storage context.
    pub ctx: WorkerCtx<'db, P::Record>,
    /// The read set.
    pub reads: Vec<ReadEntry<<P::Record as OccRecord>::Aux>>,
    /// The write set.
    pub writes: Vec<WriteEntry>,
    /// The phantom set.
    pub phantoms: Vec<PhantomEntry>,
    arena: Arena,
    scratch: Scratch,
    /// The write-set entries commit locks (all but our own inserts) in (table, row) order, each
    /// packed as `table << 96 | row << 32 | index into writes`: sorting plain integers costs
    /// one comparison per step, where sorting indexes by their entries' fields costs two loads
    /// and a tuple comparison.
    lock_order: Vec<u128>,
    /// How many of `lock_order` are locked so far during commit.
    locked: usize,
    active: bool,
    /// Bit `t` set: the write set may hold rows of table `t` (tables 64 and up share bit 63).
    /// Reads of tables this transaction never wrote skip the write-set search.
    written: u64,
    /// Reads of this attempt that met a concurrent update (waited for a lock or copied the row
    /// again): the local conflict information of [`Self::extend_read_phase`].
    extra_reads: u32,
    /// How many attempts [`Self::extend_read_phase`] delayed, since the worker was created.
    pub read_phase_extensions: u64,
    /// The protocol's per-worker state.
    pub local: P::Local,
}

/// Records a read of the version `(word, aux)` names in the read set (and, of the columns
/// `cols`, in the history when recording). A free function so that callers can hold a borrow
/// of the scratch buffer.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn push_read<R: OccRecord>(
    reads: &mut Vec<ReadEntry<R::Aux>>,
    h: &mut Option<Recorder>,
    t: TableId,
    key: u64,
    rid: RowId,
    word: u64,
    aux: R::Aux,
    mine: bool,
    cols: Columns,
) {
    reads.push(ReadEntry { table: t, rid, word, aux, mine });
    if let Some(h) = h {
        h.read_cols(t.0, key, R::stamp(word, aux, rid), cols);
    }
}

/// What a snapshot reader found in place ([`OccRecord::at_boundary`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InPlace {
    /// Present at the boundary, with the word of the version copied.
    Present(u64),
    /// Absent at the boundary.
    Absent,
    /// The record was unlinked: look the key up again.
    Unlinked,
    /// The value in place committed at or after the boundary: the chain has the value at it.
    Replaced,
}

/// Outcome of a stable read: the word (unlocked) and the extra.
enum Stable<A> {
    Present(u64, A),
    Absent(u64, A),
}

impl<'db, P: OccProtocol> OccWorker<'db, P> {
    /// A worker over `ctx` with the protocol's state `local`.
    pub fn new(ctx: WorkerCtx<'db, P::Record>, local: P::Local) -> Self {
        OccWorker {
            ctx,
            reads: Vec::new(),
            writes: Vec::new(),
            phantoms: Vec::new(),
            arena: Arena::default(),
            scratch: Scratch::default(),
            lock_order: Vec::new(),
            locked: 0,
            active: false,
            written: 0,
            extra_reads: 0,
            read_phase_extensions: 0,
            local,
        }
    }

    /// Reads a consistent copy of the columns `cols` of the record into `buf` (Silo §4.4: wait
    /// while locked, copy, re-check). Absent records are not copied. With `committed`, a
    /// version not committed yet is not read: its record's committed image is
    /// ([`OccRecord::committed_image`]; a version that becomes uncommitted between the two loads
    /// is a new one, so the re-check catches it).
    #[inline]
    fn stable_read(
        rec: RowRef<'_, P::Record>,
        buf: &mut [u8],
        p: &Projection,
        cols: Columns,
        committed: bool,
        extra: &mut u32,
    ) -> Stable<<P::Record as OccRecord>::Aux> {
        let mut spin = SpinWait::default();
        loop {
            let v1 = rec.header.load();
            if committed {
                if let Some((word, aux)) = P::Record::committed_image(rec, v1, buf) {
                    return if is_absent(word) {
                        Stable::Absent(word, aux)
                    } else {
                        Stable::Present(word, aux)
                    };
                }
            }
            if is_absent(v1) {
                // Absent records (deleted, uncommitted inserts) are not waited for: their word
                // goes into the read set and validation catches any change.
                let (word, aux) = Self::stable_word(rec.header, extra);
                if is_absent(word) {
                    return Stable::Absent(word, aux);
                }
                continue;
            }
            if is_locked(v1) {
                *extra += 1;
                spin.spin();
                continue;
            }
            let aux = rec.header.aux();
            rec.read_cols_into(buf, p, cols);
            // Acquire fence: the copy above happens before the re-check below (seqlock read;
            // pairs with the Release fence after locking in `lock_write_set`).
            fence(Ordering::Acquire);
            let v2 = rec.header.word().load(Ordering::Relaxed);
            if P::Record::same_version(v1, v2) {
                return Stable::Present(v2, aux);
            }
            // An extra read: a concurrent update interrupted the copy.
            *extra += 1;
            spin.spin();
        }
    }

    /// Reads the columns `cols` of row `rid` of `tbl` as of snapshot boundary `b` into `buf`
    /// (see `storage::snapshot`): the value in place when it committed below `b`
    /// ([`OccRecord::at_boundary`]), else the newest older value below `b`, else absent (never
    /// [`InPlace::Replaced`]).
    #[inline]
    fn snapshot_read(
        tbl: &Table<P::Record>,
        rid: RowId,
        b: u64,
        buf: &mut [u8],
        cols: Columns,
    ) -> InPlace {
        match P::Record::at_boundary(tbl.rows.get(rid), b, buf, &tbl.projection, cols) {
            InPlace::Replaced => {
                let chains =
                    tbl.chains.as_ref().expect("a snapshot reader's database keeps chains");
                match chains.at(rid, b) {
                    Some(v) => {
                        let word = v.stamp.load(Ordering::Relaxed);
                        if is_absent(word) {
                            InPlace::Absent
                        } else {
                            chains.row(v).read_cols_into(buf, &tbl.projection, cols);
                            InPlace::Present(word)
                        }
                    }
                    None => InPlace::Absent,
                }
            }
            found => found,
        }
    }

    /// [`Worker::read_cols`] of a snapshot reader: no read set, no phantom set; the history
    /// records the versions read and, for a key absent at the boundary, a point range (judged
    /// at the boundary: see [`Worker::begin_read_only`]).
    #[cold]
    fn read_at_snapshot<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let b = self.ctx.snapshot;
        while let Some(rid) = self.ctx.lookup(tbl, key) {
            let buf = self.scratch.get(tbl.spec.row_size);
            match Self::snapshot_read(tbl, rid, b, buf, cols) {
                InPlace::Present(word) => {
                    if let Some(h) = &mut self.ctx.history {
                        let stamp = P::Record::stamp(word, Default::default(), rid);
                        h.read_cols(t.0, key, stamp, cols);
                    }
                    return Ok(Some(f(buf)));
                }
                InPlace::Absent => break,
                InPlace::Unlinked => self.relookup(t, key),
                InPlace::Replaced => unreachable!("resolved by `snapshot_read`"),
            }
        }
        if let Some(h) = &mut self.ctx.history {
            h.range(t.0, key, key);
        }
        Ok(None)
    }

    /// A scan entry of a snapshot reader: the row at the boundary, its version in the history
    /// (a key absent there is one the scan's range covers). An unlinked record was deleted
    /// below every boundary in use: absent.
    #[cold]
    fn entry_at_snapshot(
        &mut self,
        tbl: &Table<P::Record>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Option<&[u8]> {
        let buf = self.scratch.get(tbl.spec.row_size);
        match Self::snapshot_read(tbl, rid, self.ctx.snapshot, buf, ALL_COLUMNS) {
            InPlace::Present(word) => {
                if let Some(h) = &mut self.ctx.history {
                    let stamp = P::Record::stamp(word, Default::default(), rid);
                    h.read_cols(t.0, key, stamp, ALL_COLUMNS);
                }
                Some(buf)
            }
            InPlace::Absent | InPlace::Unlinked => None,
            InPlace::Replaced => unreachable!("resolved by `snapshot_read`"),
        }
    }

    /// Refuses a write of a snapshot reader.
    #[inline(always)]
    fn writable(&self) -> Result<(), Abort> {
        if self.ctx.snapshot != 0 {
            return Err(Abort::new(AbortReason::ReadOnlyWrite));
        }
        Ok(())
    }

    /// Reads the word of a record and its extra without copying the row (blind writes, inserts,
    /// deletes, absent records), waiting while it is present and locked or not settled. The word
    /// is returned without the lock bit: an absent record may be locked by its inserter or
    /// reviver (not waited for: it may hold that lock for its whole transaction).
    #[inline]
    fn stable_word(rec: &P::Record, extra: &mut u32) -> (u64, <P::Record as OccRecord>::Aux) {
        let mut spin = SpinWait::default();
        loop {
            let v1 = rec.load();
            if (is_absent(v1) || !is_locked(v1)) && P::Record::settled(v1) {
                if std::mem::size_of::<<P::Record as OccRecord>::Aux>() == 0 {
                    // No extra to read consistently: one load is the answer.
                    return (v1 & !LOCK, Default::default());
                }
                let aux = rec.aux();
                // Acquire fence: pairs with the Release stores of the extra (see
                // `OccRecord::settled`); equal words around it mean the extra is theirs.
                fence(Ordering::Acquire);
                if rec.word().load(Ordering::Relaxed) == v1 {
                    return (v1 & !LOCK, aux);
                }
            }
            *extra += 1;
            spin.spin();
        }
    }

    #[inline(always)]
    fn push_read(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        word: u64,
        aux: <P::Record as OccRecord>::Aux,
        mine: bool,
    ) {
        self.push_read_cols(t, key, rid, word, aux, mine, ALL_COLUMNS);
    }

    /// [`OccWorker::push_read`] of a read that observed only the columns `cols` (the history
    /// records those).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn push_read_cols(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        word: u64,
        aux: <P::Record as OccRecord>::Aux,
        mine: bool,
        cols: Columns,
    ) {
        let h = &mut self.ctx.history;
        push_read::<P::Record>(&mut self.reads, h, t, key, rid, word, aux, mine, cols);
    }

    #[inline]
    fn push_write(&mut self, table: TableId, rid: RowId, key: u64, kind: WriteKind, off: u32) {
        self.push_write_cols(table, rid, key, kind, off, ALL_COLUMNS, ALL_COLUMNS);
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn push_write_cols(
        &mut self,
        table: TableId,
        rid: RowId,
        key: u64,
        kind: WriteKind,
        off: u32,
        cols: Columns,
        dirty: Columns,
    ) {
        debug_assert_eq!(dirty & !cols, 0, "a changed column the buffer does not hold");
        self.written |= Self::table_bit(table);
        self.writes.push(WriteEntry { table, rid, key, kind, off, cols, dirty, locked: 0 });
    }

    /// The buffered row of write entry `i` (an update, revive or insert), holding at least the
    /// columns `cols`.
    #[inline]
    fn buffered(
        &mut self,
        i: usize,
        tbl: &Table<P::Record>,
        cols: Columns,
    ) -> Result<&mut [u8], Abort> {
        let w = self.writes[i];
        if w.off == NO_BUFFER {
            self.buffer_insert(i, tbl);
        } else if !tbl.projection.contains(w.cols, cols) {
            self.widen(i, tbl, cols)?;
        }
        Ok(self.arena.get_mut(self.writes[i].off, tbl.spec.row_size))
    }

    /// Gives insert entry `i`, whose row is in its record, a buffer holding that row (a later
    /// operation of the transaction reads or changes it); commit then installs the buffer.
    #[cold]
    fn buffer_insert(&mut self, i: usize, tbl: &Table<P::Record>) {
        let w = self.writes[i];
        debug_assert_eq!(w.kind, WriteKind::Insert);
        let off = self.arena.push_reused(tbl.spec.row_size);
        // The record is locked by this transaction since its insert: no one else writes it.
        tbl.rows.get(w.rid).read_into(self.arena.get_mut(off, tbl.spec.row_size));
        self.writes[i].off = off;
    }

    /// Adds the columns `cols` to write entry `i`, which an `update_cols` made with fewer: copies
    /// the words the buffer lacks from the record, which must still be at the version that
    /// update read (otherwise validation would fail anyway, so the attempt aborts now). Words
    /// already buffered are kept: they may hold this transaction's changes.
    #[cold]
    fn widen(&mut self, i: usize, tbl: &Table<P::Record>, cols: Columns) -> Result<(), Abort> {
        let w = self.writes[i];
        let len = tbl.spec.row_size;
        let want = w.cols | cols;
        // Partial entries come only from `update_cols`, which records its read first.
        let read = self.reads.iter().rev().find(|r| r.table == w.table && r.rid == w.rid);
        let Some(&ReadEntry { word: seen, .. }) = read else {
            return Err(Abort::new(AbortReason::ReadValidation));
        };
        let p = &tbl.projection;
        let committed = P::reads_committed(self);
        let fresh = self.scratch.get(len);
        match Self::stable_read(
            tbl.rows.get(w.rid),
            fresh,
            p,
            want,
            committed,
            &mut self.extra_reads,
        ) {
            Stable::Present(word, _) if P::Record::same_version(word, seen) => {}
            _ => return Err(Abort::new(AbortReason::ReadValidation)),
        }
        // `fresh` holds every wanted word as of `seen`; put our buffered words over it, then
        // take all of it (the old columns are a subset of the wanted ones).
        let buf = self.arena.get_mut(w.off, len);
        let bytes = |lo: usize, hi: usize| lo * 8..(hi * 8).min(len);
        p.runs(w.cols, |lo, hi| fresh[bytes(lo, hi)].copy_from_slice(&buf[bytes(lo, hi)]));
        p.runs(want, |lo, hi| buf[bytes(lo, hi)].copy_from_slice(&fresh[bytes(lo, hi)]));
        self.writes[i].cols = want;
        Ok(())
    }

    /// Removes write entry `i` (a revive undone by a delete of the same row): the reads pushed
    /// with it stay and are no longer `mine`, so validation checks their rows for foreign locks.
    #[cold]
    fn drop_write(&mut self, i: usize) {
        let w = self.writes.remove(i);
        for r in &mut self.reads {
            if r.table == w.table && r.rid == w.rid {
                r.mine = false;
            }
        }
    }

    #[inline]
    fn table_bit(t: TableId) -> u64 {
        1 << t.0.min(63)
    }

    /// The write-set entry for row `rid` of table `t`, if any.
    #[inline]
    pub fn find_write(&self, t: TableId, rid: RowId) -> Option<usize> {
        if self.written & Self::table_bit(t) == 0 {
            return None;
        }
        self.writes.iter().rposition(|w| w.rid == rid && w.table == t)
    }

    /// Looks `key` up; on a miss, protects the absent key with its phantom bucket (version read
    /// before a second lookup, so an insert racing with the first lookup is not missed).
    ///
    /// Callers that then find the row unlinked call [`Self::relookup`] and start over: an
    /// unlinked row is no longer the key's index entry, so "absent" read from it proves nothing
    /// (the key may have been inserted again under another row), and its word never changes
    /// again, so validation would not notice.
    #[inline]
    fn lookup(&mut self, tbl: &Table<P::Record>, key: u64) -> Option<RowId> {
        if let Some(rid) = self.ctx.lookup(tbl, key) {
            return Some(rid);
        }
        let slot = tbl.buckets.slot_of(key);
        let version = tbl.buckets.version(slot);
        let again = tbl.index.get(key, &self.ctx.guard);
        if again.is_none() {
            self.phantoms.push(PhantomEntry { table: tbl.id, slot: slot as u32, version });
            if let Some(h) = &mut self.ctx.history {
                h.range(tbl.id.0, key, key);
            }
        }
        again
    }

    /// Forgets a prefetched row id found unlinked and lets the GC finish removing the index entry.
    #[cold]
    fn relookup(&mut self, t: TableId, key: u64) {
        self.ctx.forget(t, key);
        std::hint::spin_loop();
    }

    /// Bumps `key`'s bucket after an insert; re-stamps our own phantom entry so that our own
    /// insert does not fail our validation.
    fn bump(&mut self, tbl: &Table<P::Record>, key: u64) {
        let (slot, old) = tbl.buckets.bump(key);
        for p in &mut self.phantoms {
            if p.table == tbl.id && p.slot as usize == slot && p.version == old {
                p.version = old + 1;
            }
        }
    }

    /// [`Worker::read_cols`], announcing a write when `write` (see `read_for_update`).
    #[inline]
    fn read_as<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        write: bool,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        if self.ctx.snapshot != 0 {
            return self.read_at_snapshot(t, key, cols, f);
        }
        let tbl = table(self.ctx.storage, t)?;
        let len = tbl.spec.row_size;
        loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(None) };
            if let Some(i) = self.find_write(t, rid) {
                return Ok(match self.writes[i].kind {
                    WriteKind::Delete | WriteKind::InsertDeleted => None,
                    _ => Some(f(self.buffered(i, tbl, cols)?)),
                });
            }
            P::access(self, t, key, rid, tbl.rows.get(rid).header, write)?;
            // (Asked of a read announcing a write too: IC3 refuses typed reads of columns it
            // defers accumulations into.)
            let untracked = P::untracked(self, t, cols) && !write;
            // An untracked read names the committed version in the history (the value of its
            // columns is the same in every version the record has while it runs).
            let committed = P::reads_committed(self) || (untracked && self.ctx.history.is_some());
            let buf = self.scratch.get(len);
            match Self::stable_read(
                tbl.rows.get(rid),
                buf,
                &tbl.projection,
                cols,
                committed,
                &mut self.extra_reads,
            ) {
                Stable::Absent(word, _) if is_unlinked(word) => self.relookup(t, key),
                Stable::Present(word, aux) | Stable::Absent(word, aux) if untracked => {
                    if let Some(h) = &mut self.ctx.history {
                        h.read_cols(t.0, key, P::Record::stamp(word, aux, rid), cols);
                    }
                    return Ok((!is_absent(word)).then(|| f(buf)));
                }
                Stable::Present(word, aux) => {
                    let (reads, h) = (&mut self.reads, &mut self.ctx.history);
                    push_read::<P::Record>(reads, h, t, key, rid, word, aux, false, cols);
                    return Ok(Some(f(buf)));
                }
                Stable::Absent(word, aux) => {
                    self.push_read(t, key, rid, word, aux, false);
                    return Ok(None);
                }
            }
        }
    }

    /// Ends the attempt, `committed` or not ([`OccProtocol::end`]): empties the sets and leaves
    /// the epoch.
    pub fn finish(&mut self, committed: bool) {
        P::end(self, committed);
        self.clear_sets();
        self.active = false;
        self.ctx.exit();
    }

    /// Empties the read, write and phantom sets and the buffers without ending the attempt:
    /// a protocol that commits parts of a transaction on their own (IC3's pieces) starts the
    /// next part with it. Commit-time locks must have been released (or installed).
    pub fn clear_sets(&mut self) {
        self.locked = 0;
        self.reads.clear();
        self.writes.clear();
        self.phantoms.clear();
        self.arena.clear();
        self.lock_order.clear();
        self.written = 0;
        self.extra_reads = 0;
    }

    /// Discards what the sets hold without ending the attempt (a part of the transaction that
    /// failed its validation and runs again): undoes the inserts, as [`Self::rollback`] does,
    /// and empties the sets.
    pub fn discard_sets(&mut self) {
        self.unlock_held();
        self.undo_inserts();
        self.clear_sets();
    }

    /// The row write entry `i` installs and the columns it changed: its buffer, or `None` when
    /// the row is in the record already (an insert's) or there is none (a delete's).
    #[inline]
    pub fn write_image(&self, i: usize) -> Option<(&[u8], Columns)> {
        let w = &self.writes[i];
        if w.off == NO_BUFFER || !w.kind.present() {
            return None;
        }
        let len = self.ctx.storage.table(w.table).spec.row_size;
        Some((self.arena.get(w.off, len), w.dirty))
    }

    /// CCBench's ReadPhaseExtension (§6.2): when this attempt's read phase met a concurrent
    /// update (a read waited for a lock or had to copy the row again, the "extra reads" whose
    /// delay CCBench found to regulate contention), waits `ns` nanoseconds before validation, so
    /// that fewer transactions validate against the hot records at once. Attempts that met no
    /// conflict are not delayed. Protocols call it first thing in commit; 0 turns it off.
    #[inline]
    pub fn extend_read_phase(&mut self, ns: u32) {
        if ns == 0 || self.extra_reads == 0 {
            return;
        }
        self.read_phase_extensions += 1;
        let until = std::time::Instant::now() + std::time::Duration::from_nanos(u64::from(ns));
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Commit step: locks the write set in (table, row) order, waiting or not as `policy` says.
    /// Our inserts were locked when they were made (a record nobody else could hold) and are
    /// not locked again. Each entry's `locked` gets the word it had; an update or delete of a
    /// record that is no longer present, or a revive of one that is, fails with
    /// `ReadValidation`. On `Err` the locks taken stay held: [`Self::rollback`] releases them.
    pub fn lock_write_set(&mut self, policy: ValidationLock) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        let mut order = std::mem::take(&mut self.lock_order);
        order.clear();
        for (i, w) in self.writes.iter_mut().enumerate() {
            if matches!(w.kind, WriteKind::Insert | WriteKind::InsertDeleted) {
                let rec = storage.table(w.table).rows.get(w.rid).header;
                w.locked = rec.load() & !LOCK;
            } else {
                order.push(lock_key(w, i));
            }
        }
        order.sort_unstable();
        self.lock_order = order;
        let mut n = 0;
        let mut retry = SpinWait::default();
        while n < self.lock_order.len() {
            let i = self.lock_order[n] as u32 as usize;
            let w = self.writes[i];
            let rec = storage.table(w.table).rows.get(w.rid).header;
            let mut spin = SpinWait::default();
            let cur = loop {
                let cur = rec.load();
                if !is_locked(cur) && rec.try_lock(cur) {
                    break Some(cur);
                }
                match policy {
                    ValidationLock::Wait => spin.spin(),
                    // The first `n` are locked; commit's rollback releases them.
                    ValidationLock::NoWait => return Err(Abort::new(AbortReason::LockConflict)),
                    ValidationLock::NoWaitTT => break None,
                }
            };
            let Some(cur) = cur else {
                // NoWaitTT: give back what we hold, wait, and start over from the first lock.
                self.unlock_held();
                retry.spin();
                n = 0;
                continue;
            };
            n += 1;
            self.locked = n;
            self.writes[i].locked = cur;
            let ok = match w.kind {
                // The record must still be present (a concurrent delete committed otherwise).
                WriteKind::Update | WriteKind::Delete => !is_absent(cur),
                // Still absent and not unlinked.
                WriteKind::Revive => is_absent(cur) && !is_unlinked(cur),
                WriteKind::Insert | WriteKind::InsertDeleted => true,
            };
            if !ok {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
        }
        // Release fence: payload stores of the write phase cannot move above the lock acquisition
        // (pairs with the Acquire fence in `stable_read`).
        fence(Ordering::Release);
        Ok(())
    }

    /// Releases the locks [`Self::lock_write_set`] took (all but our inserts'), leaving the
    /// attempt open.
    pub fn unlock_write_set(&mut self) {
        self.unlock_held();
    }

    /// Restores the commit-time locks taken so far to the words they had.
    fn unlock_held(&mut self) {
        let storage = self.ctx.storage;
        for &k in &self.lock_order[..self.locked] {
            let w = &self.writes[k as u32 as usize];
            storage.table(w.table).rows.get(w.rid).header.store(w.locked);
        }
        self.locked = 0;
    }

    /// Whether row `rid` of table `t`, read with `r`, is locked by this transaction: either the
    /// read came with a write-set entry, or the row is in the write set (locked at commit).
    #[inline]
    pub fn locked_by_me(&self, r: &ReadEntry<<P::Record as OccRecord>::Aux>) -> bool {
        r.mine || self.find_write(r.table, r.rid).is_some()
    }

    /// Commit step: the phantom set's bucket versions are unchanged.
    pub fn validate_phantoms(&self) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        for p in &self.phantoms {
            if storage.table(p.table).buckets.version(p.slot as usize) != p.version {
                return Err(Abort::new(AbortReason::PhantomValidation));
            }
        }
        Ok(())
    }

    /// Releases commit-time locks and undoes inserts after a failed commit or an abort.
    pub fn rollback(&mut self) {
        self.unlock_held();
        self.undo_inserts();
        self.finish(false);
    }

    /// Our inserts stay in the index as absent records: unlocks them and lets the GC unlink
    /// them.
    fn undo_inserts(&mut self) {
        let storage = self.ctx.storage;
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            if matches!(w.kind, WriteKind::Insert | WriteKind::InsertDeleted) {
                let rec = storage.table(w.table).rows.get(w.rid).header;
                rec.store(rec.load() & !LOCK);
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
    }

    /// Commit step: installs the write set and unlocks it, logging it with commit stamp `stamp`
    /// when the database logs (the durability contract: each row's image is copied to the log
    /// after it is installed and before `publish` unlocks it). `publish(record, entry)` writes
    /// the record's new version (its word, unlocked, with [`ABSENT`] for a delete, and any extra)
    /// after the payload has been copied in, and returns the new `(word, aux)` for the history.
    /// Passes [`CommitPhase::Logged`] and [`CommitPhase::Installed`] (the log record is
    /// complete once the last record is installed) and ends the attempt; the caller's
    /// `Worker::commit` returns through `WorkerCtx::commit_returning`.
    pub fn install(
        &mut self,
        stamp: u64,
        publish: impl FnMut(&P::Record, &WriteEntry) -> (u64, <P::Record as OccRecord>::Aux),
    ) {
        // One branch per commit: the loop is compiled with and without logging.
        if self.ctx.log.is_some() {
            self.install_with::<true>(stamp, publish);
        } else {
            self.install_with::<false>(stamp, publish);
        }
        // Each record was installed, logged and unlocked in turn: both points at once.
        self.ctx.phase(CommitPhase::Logged);
        self.ctx.phase(CommitPhase::Installed);
        self.finish(true);
    }

    #[inline(always)]
    fn install_with<const LOG: bool>(
        &mut self,
        stamp: u64,
        mut publish: impl FnMut(&P::Record, &WriteEntry) -> (u64, <P::Record as OccRecord>::Aux),
    ) {
        let storage = self.ctx.storage;
        if LOG {
            let log = self.ctx.log.as_mut().expect("LOG is set only with a log");
            log.begin(stamp, self.writes.len() as u32);
        }
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            let tbl = storage.table(w.table);
            let row = tbl.rows.get(w.rid);
            // The version replaced, for the history (read under our lock, before `publish`).
            let prev = self
                .ctx
                .history
                .is_some()
                .then(|| <P::Record as OccRecord>::stamp(w.locked, row.header.aux(), w.rid));
            if self.ctx.snapshot_every != 0 {
                // The value replaced, for snapshot readers (read under our lock). An insert's
                // fresh record has none: absent, with nothing older.
                let (old, now) = (w.locked, <P::Record as OccRecord>::epoch(stamp));
                let epoch = <P::Record as OccRecord>::epoch(old);
                let value = if is_absent(old) { Kept::Absent } else { Kept::Row(row) };
                self.ctx.keep_for_snapshots(w.table, w.rid, value, old, epoch, now);
            }
            // An insert without a buffer wrote its row into the record already; deletes copy
            // nothing.
            if w.kind.present() && w.off != NO_BUFFER {
                row.write_cols_from(
                    self.arena.get(w.off, tbl.spec.row_size),
                    &tbl.projection,
                    w.dirty,
                );
            }
            if LOG {
                let log = self.ctx.log.as_mut().expect("LOG is set only with a log");
                if w.kind.present() {
                    // An update logs the columns it changed; a write that creates the row, all.
                    let cols = if w.kind == WriteKind::Update { w.dirty } else { ALL_COLUMNS };
                    log.put_row(w.table.0, stamp, w.key, row, &tbl.projection, cols);
                } else {
                    log.delete(w.table.0, stamp, w.key);
                }
            }
            let (word, aux) = publish(row.header, &w);
            if !w.kind.present() {
                self.ctx.retire(w.table, w.key, w.rid);
            }
            if let (Some(h), Some(prev)) = (&mut self.ctx.history, prev) {
                let stamp = <P::Record as OccRecord>::stamp(word, aux, w.rid);
                h.write(w.table.0, w.key, stamp, prev, w.kind.present());
            }
        }
        if LOG {
            let log = self.ctx.log.as_mut().expect("LOG is set only with a log");
            self.ctx.log_epoch = log.end();
        }
    }
}

/// A worker dropped with a transaction open (a panic in a procedure, or a caller that neither
/// commits nor aborts) rolls it back: what it holds would otherwise block others for good.
impl<P: OccProtocol> Drop for OccWorker<'_, P> {
    fn drop(&mut self) {
        self.abort();
    }
}

impl<'db, P: OccProtocol> Worker for OccWorker<'db, P> {
    crate::protocols::common::forward!(ctx: scan prefetch prefetch_many log_epoch);

    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.ctx.pinned(f)
    }

    fn begin(&mut self) {
        self.ctx.enter(unlink::<P::Record>);
        self.active = true;
        P::begin(self);
    }

    /// Where the database keeps snapshots (Silo §4.9, `storage::snapshot`) and has one, the
    /// attempt reads the newest: it takes no locks, keeps no read set, refuses writes
    /// (`read-only-write`) and cannot fail its commit. Its data is up to two snapshot intervals
    /// old, older than this worker's own last commit possibly (as in Silo). It serializes at
    /// the boundary `b`: after every commit of an epoch below `b` and before the others, which
    /// the history's epoch time line ([`crate::history::epoch_ts`]) says exactly. Otherwise it
    /// runs as any transaction.
    fn begin_read_only(&mut self) {
        self.begin();
        if self.ctx.snapshot_every != 0 {
            if let Some(b) = self.ctx.read_snapshot() {
                if let Some(h) = &mut self.ctx.history {
                    let at = crate::history::epoch_ts(b, 0) - 1;
                    h.serial_point_at(at);
                    h.read_point_at(at);
                }
                P::snapshot_taken(self);
            }
        }
    }

    #[inline]
    fn typed(&mut self, ty: usize) {
        P::typed(self, ty);
    }

    #[inline]
    fn piece_begin(&mut self, piece: usize) -> Result<(), Abort> {
        P::piece_begin(self, piece)
    }

    #[inline]
    fn piece_end(&mut self, piece: usize, body: Result<(), Abort>) -> Result<PieceEnd, Abort> {
        P::piece_end(self, piece, body)
    }

    fn accumulate(&mut self, t: TableId, key: u64, acc: Accumulation) -> Result<bool, Abort> {
        self.writable()?;
        if !P::defers(self, t) {
            return accumulate_now(self, t, key, acc);
        }
        let tbl = table(self.ctx.storage, t)?;
        if !acc.fits(tbl.spec.row_size) {
            return Err(Abort::new(AbortReason::TemplateViolation));
        }
        match self.lookup(tbl, key) {
            Some(rid) => P::defer(self, t, key, rid, acc),
            None => Ok(false),
        }
    }

    #[inline]
    fn read_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read_as(t, key, cols, false, f)
    }

    /// A read announcing a write: the protocol's access step sees the intent (MOCC locks a hot
    /// record in write mode at once instead of upgrading later).
    #[inline]
    fn read_for_update<T>(
        &mut self,
        t: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read_as(t, key, ALL_COLUMNS, true, f)
    }

    #[inline]
    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        let (rid, word, aux) = loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(false) };
            if let Some(i) = self.find_write(t, rid) {
                let w = self.writes[i];
                if matches!(w.kind, WriteKind::Delete | WriteKind::InsertDeleted) {
                    return Ok(false);
                }
                if w.off == NO_BUFFER {
                    // Our own insert: its record holds the row.
                    tbl.rows.get(rid).write_from(value);
                } else {
                    self.arena.get_mut(w.off, value.len()).copy_from_slice(value);
                }
                self.writes[i].cols = ALL_COLUMNS;
                self.writes[i].dirty = ALL_COLUMNS;
                return Ok(true);
            }
            P::access(self, t, key, rid, tbl.rows.get(rid).header, true)?;
            let (word, aux) = Self::stable_word(tbl.rows.get(rid).header, &mut self.extra_reads);
            if !is_unlinked(word) {
                break (rid, word, aux);
            }
            self.relookup(t, key);
        };
        if is_absent(word) {
            self.push_read(t, key, rid, word, aux, false);
            return Ok(false);
        }
        // A blind write reads nothing: presence is re-checked when the record is locked.
        let off = self.arena.push(value);
        self.push_write(t, rid, key, WriteKind::Update, off);
        Ok(true)
    }

    #[inline]
    fn update_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        reads: Columns,
        writes: Columns,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        let (len, p, cols) = (tbl.spec.row_size, &tbl.projection, reads | writes);
        loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(None) };
            if let Some(i) = self.find_write(t, rid) {
                if matches!(self.writes[i].kind, WriteKind::Delete | WriteKind::InsertDeleted) {
                    return Ok(None);
                }
                let out = apply_update(p, writes, self.buffered(i, tbl, cols)?, f)?;
                self.writes[i].dirty |= writes;
                return Ok(Some(out));
            }
            P::access(self, t, key, rid, tbl.rows.get(rid).header, true)?;
            let committed = P::reads_committed(self);
            let off = self.arena.push_reused(len);
            let buf = self.arena.get_mut(off, len);
            match Self::stable_read(
                tbl.rows.get(rid),
                buf,
                p,
                cols,
                committed,
                &mut self.extra_reads,
            ) {
                Stable::Present(word, aux) => {
                    // The update observed the columns it buffered.
                    self.push_read_cols(t, key, rid, word, aux, true, cols);
                    let out = apply_update(p, writes, self.arena.get_mut(off, len), f)?;
                    self.push_write_cols(t, rid, key, WriteKind::Update, off, cols, writes);
                    return Ok(Some(out));
                }
                Stable::Absent(word, _) if is_unlinked(word) => self.relookup(t, key),
                Stable::Absent(word, aux) => {
                    self.push_read(t, key, rid, word, aux, false);
                    return Ok(None);
                }
            }
        }
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        loop {
            // Silo §4.5: a new record, locked and absent, goes into the index now. Trying the
            // insert first costs one index traversal when the key is new (the common case),
            // instead of a lookup and then an insert. No phantom entry for the key itself:
            // creating the index entry is atomic (a racing insert of the same key is seen by
            // `insert_if_absent`, a revived record through its word), and an entry here would
            // make inserts of neighbouring keys abort each other.
            let fresh = self.ctx.alloc(t)?;
            let row = tbl.rows.get(fresh);
            row.header.init_fresh();
            // The row goes straight into the record (readers copy no absent record, and the
            // index insert below publishes it), so commit installs only the word.
            row.write_from(value);
            let rid = match tbl.index.insert_if_absent(key, fresh, &self.ctx.guard) {
                Ok(()) => {
                    row.header.inserted(&tbl.buckets, key);
                    self.push_write(t, fresh, key, WriteKind::Insert, NO_BUFFER);
                    self.bump(tbl, key);
                    return Ok(true);
                }
                Err(existing) => {
                    self.ctx.caches[t.index()].release(fresh);
                    existing
                }
            };
            if let Some(i) = self.find_write(t, rid) {
                let w = self.writes[i];
                return Ok(match w.kind {
                    WriteKind::Delete => {
                        // A fresh buffer: a delete has none (or a partial one of an update).
                        let off = self.arena.push(value);
                        let e = &mut self.writes[i];
                        (e.kind, e.off, e.cols, e.dirty) =
                            (WriteKind::Update, off, ALL_COLUMNS, ALL_COLUMNS);
                        true
                    }
                    WriteKind::InsertDeleted => {
                        // Still our locked record: the row goes into it again.
                        tbl.rows.get(rid).write_from(value);
                        let e = &mut self.writes[i];
                        (e.kind, e.off) = (WriteKind::Insert, NO_BUFFER);
                        true
                    }
                    _ => false,
                });
            }
            let rec = tbl.rows.get(rid).header;
            let cur = rec.load();
            if !is_absent(cur) {
                // Present: the insert fails; its outcome depends on the record staying present.
                let (word, aux) = Self::stable_word(rec, &mut self.extra_reads);
                if is_absent(word) {
                    continue;
                }
                self.push_read(t, key, rid, word, aux, false);
                return Ok(false);
            }
            if is_locked(cur) || is_unlinked(cur) {
                // Another transaction is inserting or reviving it, or the GC is removing it.
                return Err(Abort::new(AbortReason::InsertConflict));
            }
            // Revive a deleted record: its word must not change before we lock it at commit.
            P::access(self, t, key, rid, rec, true)?;
            let (word, aux) = Self::stable_word(rec, &mut self.extra_reads);
            if word != cur {
                continue;
            }
            self.push_read(t, key, rid, word, aux, true);
            let off = self.arena.push(value);
            self.push_write(t, rid, key, WriteKind::Revive, off);
            self.bump(tbl, key);
            return Ok(true);
        }
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        let (rid, word, aux) = loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(false) };
            if self.find_write(t, rid).is_some() {
                break (rid, 0, Default::default());
            }
            P::access(self, t, key, rid, tbl.rows.get(rid).header, true)?;
            let (word, aux) = Self::stable_word(tbl.rows.get(rid).header, &mut self.extra_reads);
            if !is_unlinked(word) {
                break (rid, word, aux);
            }
            self.relookup(t, key);
        };
        if let Some(i) = self.find_write(t, rid) {
            let w = &mut self.writes[i];
            return Ok(match w.kind {
                WriteKind::Update => {
                    w.kind = WriteKind::Delete;
                    true
                }
                WriteKind::Revive => {
                    // Back to absent: nothing to write, but the read-set entry keeps the check
                    // that the record stays absent and unlocked by others.
                    self.drop_write(i);
                    true
                }
                WriteKind::Insert => {
                    w.kind = WriteKind::InsertDeleted;
                    true
                }
                WriteKind::Delete | WriteKind::InsertDeleted => false,
            });
        }
        // `mine` only when the delete goes into the write set.
        self.push_read(t, key, rid, word, aux, !is_absent(word));
        if is_absent(word) {
            return Ok(false);
        }
        self.push_write(t, rid, key, WriteKind::Delete, NO_BUFFER);
        Ok(true)
    }

    fn reads_still_valid(&mut self) -> bool {
        P::reads_still_valid(self)
    }

    fn commit(&mut self) -> Result<(), Abort> {
        if self.ctx.snapshot != 0 {
            // A snapshot reader: nothing to validate (see `begin_read_only`).
            if let Some(h) = &mut self.ctx.history {
                h.committed();
            }
            self.ctx.phase(CommitPhase::Validated);
            self.finish(true);
        } else {
            P::commit(self)?;
        }
        self.ctx.commit_returning()
    }

    fn abort(&mut self) {
        if self.active {
            self.rollback();
        }
    }
}

impl<'db, P: OccProtocol> ScanSteps<'db, P::Record> for OccWorker<'db, P> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, P::Record> {
        &mut self.ctx
    }

    /// The batch's bucket versions, validated at commit (see storage::phantom).
    #[inline(always)]
    fn cover(
        &mut self,
        tbl: &'db Table<P::Record>,
        t: TableId,
        batch: &Batch,
    ) -> Result<(), Abort> {
        if self.ctx.snapshot != 0 || P::untracked(self, t, ALL_COLUMNS) {
            // A snapshot reader validates nothing, nor a scan of untracked columns.
            return Ok(());
        }
        for slot in tbl.buckets.batch_slots(batch) {
            let version = tbl.buckets.version(slot);
            self.phantoms.push(PhantomEntry { table: t, slot: slot as u32, version });
        }
        Ok(())
    }

    /// The transaction's own write if it has one, else a stable read recorded for validation.
    // Inlined into the scan loop: a call per entry cost 10 % of a scan-heavy transaction.
    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<P::Record>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        if self.ctx.snapshot != 0 {
            return Ok(self.entry_at_snapshot(tbl, t, key, rid));
        }
        if let Some(i) = self.find_write(t, rid) {
            if matches!(self.writes[i].kind, WriteKind::Delete | WriteKind::InsertDeleted) {
                return Ok(None);
            }
            return self.buffered(i, tbl, ALL_COLUMNS).map(|row| Some(&*row));
        }
        P::access(self, t, key, rid, tbl.rows.get(rid).header, false)?;
        let len = tbl.spec.row_size;
        let untracked = P::untracked(self, t, ALL_COLUMNS);
        let committed = P::reads_committed(self) || (untracked && self.ctx.history.is_some());
        let data = self.scratch.get(len);
        match Self::stable_read(
            tbl.rows.get(rid),
            data,
            &tbl.projection,
            ALL_COLUMNS,
            committed,
            &mut self.extra_reads,
        ) {
            Stable::Present(word, aux) | Stable::Absent(word, aux) if untracked => {
                if let Some(h) = &mut self.ctx.history {
                    h.read(t.0, key, P::Record::stamp(word, aux, rid));
                }
                Ok((!is_absent(word)).then_some(&*data))
            }
            Stable::Present(word, aux) => {
                let (reads, h) = (&mut self.reads, &mut self.ctx.history);
                push_read::<P::Record>(reads, h, t, key, rid, word, aux, false, ALL_COLUMNS);
                Ok(Some(data))
            }
            Stable::Absent(word, aux) => {
                let (reads, h) = (&mut self.reads, &mut self.ctx.history);
                push_read::<P::Record>(reads, h, t, key, rid, word, aux, false, ALL_COLUMNS);
                Ok(None)
            }
        }
    }
}
