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
//! Here: the record word, the two traits and the sets. The read phase is in `occ/read.rs`, the
//! shared commit steps in `occ/commit.rs`, and the [`Worker`] methods in `occ/worker.rs`.
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

mod commit;
mod read;
mod worker;

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
}

/// A worker dropped with a transaction open (a panic in a procedure, or a caller that neither
/// commits nor aborts) rolls it back: what it holds would otherwise block others for good.
impl<P: OccProtocol> Drop for OccWorker<'_, P> {
    fn drop(&mut self) {
        self.abort();
    }
}
