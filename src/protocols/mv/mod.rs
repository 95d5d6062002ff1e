//! The multi-version family's substrate: version chains behind the record slot, the
//! per-worker transaction-state table, commit timestamps, snapshots, the GC watermark and version
//! reclamation ([`MvShared`], [`MvCtx`]), and the snapshot-reading worker built on them
//! ([`worker`]).
//!
//! **What a protocol of the family implements**: a [`worker::Certifier`], what it adds to
//! snapshot isolation to make it serializable (nothing for SI; ERMIA's SSN and SSI track each
//! version's readers with [`tracking`]; Hekaton validates its reads and waits for its commit
//! dependencies), with its version fields ([`VersionExt`]). **What it gets**: everything else:
//! reads of the begin's snapshot, pending versions installed at write time (first updater
//! wins), commit stamps, phantom protection, snapshot reads for read-only transactions,
//! logging, GC and AggressiveGC ([`worker::MvProtocol`] is the whole protocol).
//!
//! Here: records, versions and the transaction table; the shared half ([`MvShared`]:
//! timestamps, watermark, GC marks) in `mv/shared.rs`, a worker's half ([`MvCtx`]: visibility,
//! installs, pruning) in `mv/ctx.rs`.
//!
//! Cicada and BOHM are multi-version too but keep their own version layouts: Cicada's
//! multi-clock timestamps, inlined versions and early version consistency check do not fit a
//! snapshot-and-certify worker, and BOHM places versions before execution in a pipeline with no
//! snapshot at all (see `protocols::cicada` and `protocols::bohm`); they share
//! `storage::version`'s version store with this module.
//!
//! ## Records and versions
//!
//! A slot holds one word, [`MvRecord`]: the address of the newest version (versions are
//! 8-aligned, see `storage::version`), a GC lock bit and an unlinked bit. Versions go newest
//! first through `next`. A version's `stamp` is
//!
//! * its commit timestamp (`< ABORTED`; [`LOADED`] for loaded rows), or
//! * `PENDING | owner`: written by the running transaction `owner` (its worker slot and its
//!   sequence number in the [`TxnTable`]), or
//! * [`ABORTED`]: its writer aborted and is taking it off the chain.
//!
//! A deletion is a version flagged [`TOMBSTONE`]. Only the newest version can be pending or
//! aborted: a writer refuses to install over another's pending version (first updater wins).
//!
//! ## Visibility (ERMIA §3.4)
//!
//! A transaction with snapshot `s` sees the newest version whose stamp is at most `s`, and its
//! own pending versions. For another's pending version it asks the owner's slot in the
//! transaction table: an owner still running will commit above `s` (its timestamp is drawn
//! after it announced COMMITTING, and `s` was drawn before the reader looked), so the version is
//! skipped; an owner committing at `c <= s` is waited for (it is stamping its versions); one
//! committing above `s` is skipped; a finished owner has stamped or aborted the version, which
//! is read again.
//!
//! ## Timestamps
//!
//! Behind [`Timestamps`]: a snapshot is a timestamp every commit at or below which is announced
//! in the transaction table; a commit timestamp is above every snapshot taken before it was
//! drawn. [`Counter`] (a centralized counter: one `fetch_add` per commit, one load per begin)
//! is the only implementation so far; ERMIA's commit order by log offset and Cicada's
//! multi-clock come with their protocols.
//!
//! ## Garbage collection
//!
//! The *watermark* is at most the oldest snapshot in use. A worker begins by publishing the
//! current watermark as its snapshot, then draws its snapshot and publishes that: a refresh that
//! missed the first store read the clock before the worker did, so no refresh can pass a
//! running snapshot. Refreshing (the minimum of the clock and every published snapshot) is due
//! every `gc-interval-us` and is done by whichever worker begins first after it is due (CCBench
//! gives this to its thread 0; any worker will do, and embedded users have no leader thread).
//!
//! Every committed write queues `(table, row, stamp)` with its worker. Once the watermark
//! reaches the stamp, the worker *prunes* the row: under the row's GC lock it finds the newest
//! version with a stamp at or below the watermark, which every snapshot in use or to come sees
//! or passes, and cuts the chain after it. The cut versions may still be walked by readers that
//! loaded a pointer to them, so they are freed to the worker's [`VersionPool`] only after two
//! storage-epoch grace periods (as slots are, `storage::reclaim`). Queue entries name rows, not
//! versions, so an entry whose versions another worker already cut finds nothing to do, and one
//! whose row was deleted and reused prunes the new row's chain, which is as safe. A deleted row
//! is unlinked (its index entry removed, its slot freed) once its tombstone is at or below the
//! watermark, through `storage::reclaim` with `unlink` as the protocol's step. A worker that
//! leaves hands both queues to the substrate, and the next worker that begins adopts them.
//!
//! ## AggressiveGC
//!
//! One long transaction holds the watermark back, and with it every chain written since it
//! began (CCBench §7.2, Fig. 14). CCBench §7.3 proposes collecting versions such a transaction
//! might still read and aborting it if it does; nobody had built it. Here, with an age bound
//! `A` ([`Gc::aggressive_us`], the protocols' `aggressive-gc-us` option), chains are pruned at
//! the *pruning mark* instead of the watermark: the higher of the watermark and the clock's
//! value `A` ago (sampled at refreshes, every `A/32`). So a transaction that began less than
//! `A` ago never misses a version, and an older one may.
//!
//! * **Detection is exact.** The pruner flags the version it cuts after (`TRIMMED`, with the
//!   chain's *birth*: the stamp of its first version, taken from the oldest cut version, or
//!   from that one's flag if it was cut after before; stored before the cut is released). A
//!   reader whose walk ends at a flagged version without finding one its snapshot sees, and
//!   whose snapshot is at or above the birth, gets [`TooOld`]; the protocol aborts with
//!   `snapshot-too-old` and the driver retries with a fresh snapshot. Below the birth the row
//!   did not exist at the snapshot and the reader sees it absent, as it would have. Any other
//!   walk is unaffected: the versions a snapshot sees are a prefix that pruning never shortens
//!   below the version it needs, unless it cut that version off. (A row deleted and inserted
//!   again on the same chain is too old for any snapshot above its first birth.)
//! * **Starvation is bounded by one abort.** A retried `snapshot-too-old` victim is
//!   *protected* ([`MvCtx::protect`]) until it commits: its slot's `protected` flag (stored
//!   SeqCst before the snapshot is drawn) makes every refresh hold the pruning mark at or
//!   below its snapshot. A refresh whose scan missed the flag read the clock before the
//!   victim drew its snapshot (all SeqCst), so its sample is at or below that snapshot too.
//!   Protected snapshots hold the aggressive GC back as any snapshot holds the normal one:
//!   priority by age, as wait-die gives it (CCBench's suggestion).
//! * **What stays conservative.** Deleted rows are unlinked at the watermark, not the mark:
//!   after the unlink the key is simply absent, which no flag could tell a reader. The safe
//!   snapshot of read-only transactions is used only while the watermark is at or above the
//!   mark (and never when protected): otherwise it would be too old at once.

pub mod tracking;
pub mod worker;

use crate::storage::epoch::Epochs;
use crate::storage::projection::{Columns, Projection};
use crate::storage::reclaim::Unlink;
use crate::storage::row_store::RecordHeader;
use crate::storage::version::{Ptr, Version, VersionAlloc, VersionExt, VersionPool, VersionStore};
use crate::storage::{RowId, RowRef, Storage, TableId, TableSpec};
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

mod ctx;
mod shared;

use ctx::*;

/// A version's flag: it records a deletion.
pub const TOMBSTONE: u64 = 1;
/// A version's flag: the GC cut the older versions off after it (see [`MvShared::visible`]);
/// the flags word's bits from [`BIRTH_SHIFT`] up then hold the chain's birth stamp.
const TRIMMED: u64 = 2;
const BIRTH_SHIFT: u32 = 2;
/// The stamp of loaded rows: below every commit timestamp, seen by every snapshot.
pub const LOADED: u64 = 1;
/// The stamp of a version whose writer aborted.
pub const ABORTED: u64 = 1 << 62;
const PENDING: u64 = 1 << 63;
const SEQ_BITS: u32 = 48;
/// The most workers a multi-version database takes: a pending stamp holds the writer's slot in
/// the 14 bits between its sequence number and the `ABORTED` bit.
pub const MAX_WORKERS: usize = 1 << 14;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// The most workers a multi-version protocol without per-worker bitmaps takes, and why (its
/// configuration error says both).
pub const STAMPED_WORKERS: (usize, &str) =
    (MAX_WORKERS, "a pending version's stamp names its writer's slot in 14 bits");

const GC_LOCK: u64 = 1;
const UNLINKED: u64 = 2;
const PTR: u64 = !7;

/// Whether a stamp names a running transaction (see [`TxnTable::owner`]).
#[inline(always)]
pub fn is_pending(stamp: u64) -> bool {
    stamp & PENDING != 0
}

/// Whether a stamp is a commit timestamp.
#[inline(always)]
pub fn is_committed(stamp: u64) -> bool {
    stamp < ABORTED
}

/// The slot of a multi-version record: the newest version's address and two bits.
#[repr(C)]
pub struct MvRecord<V> {
    head: AtomicU64,
    /// The watermark the chain was last pruned at: a prune at the same watermark would cut
    /// nothing, and skipping it keeps a hot row's many queue entries from each walking its
    /// chain (while a descheduled snapshot holds the watermark back, that chain grows long).
    pruned: AtomicU64,
    _v: PhantomData<fn() -> V>,
}

// SAFETY: two atomic words; zero is "no version, not unlinked, not locked, never pruned"; no
// Drop; align 8.
unsafe impl<V: VersionExt> RecordHeader for MvRecord<V> {
    #[inline]
    fn slot_payload(_: usize) -> bool {
        false
    }
}

impl<V: VersionExt> MvRecord<V> {
    /// The head word (Acquire: pairs with the Release CAS that installed the newest version,
    /// so its fields are visible).
    #[inline(always)]
    fn word(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// Whether the GC removed the record from its index (the key may live in another row now).
    #[inline(always)]
    pub fn is_unlinked(&self) -> bool {
        self.word() & UNLINKED != 0
    }

    /// Makes `v` the only version of a fresh slot (a new row's insert, before the index
    /// publishes it, or the loader).
    #[inline]
    pub fn init(&self, v: NonNull<Version<V>>) {
        self.pruned.store(0, Ordering::Relaxed);
        self.head.store(v.as_ptr() as u64, Ordering::Release);
    }

    /// Empties a slot that was never published (an insert that found its key in the index).
    #[inline]
    pub fn clear(&self) {
        self.head.store(0, Ordering::Relaxed);
    }

    /// The newest version, if any.
    #[inline(always)]
    pub fn newest(&self) -> Option<&Version<V>> {
        deref(self.word())
    }
}

/// The version a head word or `next` pointer names.
#[inline(always)]
fn deref<'a, V>(word: u64) -> Option<&'a Version<V>> {
    let p = (word & PTR) as *const Version<V>;
    // SAFETY: a non-null address in a head word or `next` pointer is a version of the table's
    // store. Callers are inside a storage epoch (a transaction, a checkpoint's scan, a loader
    // or a quiescent database), and versions taken off a chain are freed only after two grace
    // periods of those epochs (see the module docs), so it is alive for the caller's use.
    unsafe { p.as_ref() }
}

#[inline(always)]
fn next_of<V>(v: &Version<V>) -> Option<&Version<V>> {
    // Acquire: pairs with `prune`'s AcqRel swap that cuts the chain (a reader sees the cut or the
    // versions below it, never a freed one: they wait out the grace periods); `install` stores
    // `next` before its Release head CAS.
    deref(v.next.load(Ordering::Acquire) as u64)
}

/// Commit timestamps and snapshots (see the module docs).
pub trait Timestamps: Send + Sync + 'static {
    /// A snapshot: every commit timestamp at or below it has been drawn.
    fn snapshot(&self) -> u64;
    /// A new commit timestamp, above every snapshot taken before.
    fn commit(&self) -> u64;
}

/// The centralized counter: commit = `fetch_add`, snapshot = load.
pub struct Counter(CachePadded<AtomicU64>);

impl Default for Counter {
    fn default() -> Self {
        Counter(CachePadded::new(AtomicU64::new(LOADED)))
    }
}

impl Timestamps for Counter {
    #[inline(always)]
    fn snapshot(&self) -> u64 {
        // SeqCst: ordered with the reader's later look at the transaction table (see
        // `TxnTable::owner`).
        self.0.load(Ordering::SeqCst)
    }

    #[inline(always)]
    fn commit(&self) -> u64 {
        // SeqCst: after the COMMITTING announcement in the table, before the stamp is stored.
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Counter);
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}

const IDLE: u64 = 0;
const ACTIVE: u64 = 1;
const COMMITTING: u64 = 2;
/// A published snapshot of a worker between transactions.
const NO_SNAPSHOT: u64 = u64::MAX;

/// One worker's entry of the transaction table (ERMIA §3.4's TID table).
struct TxnSlot {
    /// `seq << 2 | status`.
    state: AtomicU64,
    /// The commit timestamp while COMMITTING (0 until drawn).
    cstamp: AtomicU64,
    /// The snapshot in use, or `NO_SNAPSHOT`.
    snapshot: AtomicU64,
    /// Whether the running transaction's snapshot holds the aggressive GC back (a retry of a
    /// transaction that aborted with `snapshot-too-old`, see the module docs).
    protected: AtomicBool,
    /// When the running transaction began (`MvShared::now_ns`): when its snapshot's state was
    /// the newest, for the staleness of read-only snapshots taken at it.
    began: AtomicU64,
    /// The last committed transaction of this slot that read versions without tracking them
    /// (a certifier's read optimisation, e.g. ERMIA SSI's): its commit timestamp and snapshot,
    /// behind a sequence word (odd while the owner writes them).
    untracked_seq: AtomicU64,
    untracked_commit: AtomicU64,
    untracked_snapshot: AtomicU64,
}

/// What a reader learns about the owner of a pending version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Still running: it will commit above any snapshot already taken.
    Active,
    /// Committing at this timestamp.
    Committing(u64),
    /// Finished: the version is stamped or aborted now.
    Done,
}

/// Every worker's transaction state, readable by all.
pub struct TxnTable {
    slots: Box<[CachePadded<TxnSlot>]>,
    /// One more than the highest slot ever used (refreshes scan this many).
    used: AtomicUsize,
}

impl TxnTable {
    fn new(workers: usize) -> Self {
        let slot = || {
            CachePadded::new(TxnSlot {
                state: AtomicU64::new(IDLE),
                cstamp: AtomicU64::new(0),
                snapshot: AtomicU64::new(NO_SNAPSHOT),
                protected: AtomicBool::new(false),
                began: AtomicU64::new(0),
                untracked_seq: AtomicU64::new(0),
                untracked_commit: AtomicU64::new(0),
                untracked_snapshot: AtomicU64::new(0),
            })
        };
        TxnTable { slots: (0..workers).map(|_| slot()).collect(), used: AtomicUsize::new(0) }
    }

    /// The state of the transaction a pending stamp names.
    #[inline]
    pub fn owner(&self, stamp: u64) -> Owner {
        self.state_of(((stamp & !PENDING) >> SEQ_BITS) as usize, Some(stamp & SEQ_MASK))
    }

    /// The state of the transaction worker slot `slot` is running now (`Done`: none).
    #[inline]
    pub fn current(&self, slot: usize) -> Owner {
        self.state_of(slot, None)
    }

    /// One more than the highest worker slot ever used.
    #[inline]
    pub fn slots_used(&self) -> usize {
        // SeqCst: a worker raises it before its first transaction begins.
        self.used.load(Ordering::SeqCst)
    }

    /// The state of the transaction worker slot `slot` is running now and the snapshot it
    /// published: the watermark first, then its own (module docs), so the value may be lower
    /// than the snapshot the transaction reads at, never higher; `u64::MAX` when the slot runs
    /// none. The snapshot is loaded after the state: if the transaction seen ended meanwhile,
    /// it belongs to the slot's next transaction, and what the ended one published before it
    /// ended (e.g. [`TxnTable::untracked`]) is visible to loads after this call.
    #[inline]
    pub fn current_snapshot(&self, slot: usize) -> (Owner, u64) {
        let owner = self.current(slot);
        // SeqCst: pairs with the owner's snapshot stores (see above).
        (owner, self.slots[slot].snapshot.load(Ordering::SeqCst))
    }

    /// What slot `slot` published about its last committed transaction that read without
    /// tracking ([`MvCtx::untracked_committed`]): (commit timestamp, snapshot), (0, 0) if none.
    pub fn untracked(&self, slot: usize) -> (u64, u64) {
        let t = &self.slots[slot];
        let mut spin = crate::util::SpinWait::default();
        loop {
            // Acquire: pairs with the owner's Release of the even sequence (the pair before).
            let s0 = t.untracked_seq.load(Ordering::Acquire);
            if s0 & 1 == 0 {
                let c = t.untracked_commit.load(Ordering::Relaxed);
                let snap = t.untracked_snapshot.load(Ordering::Relaxed);
                // Acquire fence: the pair's loads before the sequence is read again (pairs
                // with the owner's Release fence after it made the sequence odd).
                std::sync::atomic::fence(Ordering::Acquire);
                if t.untracked_seq.load(Ordering::Relaxed) == s0 {
                    return (c, snap);
                }
            }
            spin.spin();
        }
    }

    /// The state of slot `slot`'s transaction `seq` (any, for `None`).
    fn state_of(&self, slot: usize, seq: Option<u64>) -> Owner {
        let slot = &self.slots[slot];
        let mut spin = crate::util::SpinWait::default();
        loop {
            // SeqCst: a reader that sees ACTIVE read the clock for its snapshot before the
            // owner announced COMMITTING, which precedes the owner's `commit()`.
            let st = slot.state.load(Ordering::SeqCst);
            if seq.is_some_and(|s| (st >> 2) & SEQ_MASK != s) || st & 3 == IDLE {
                return Owner::Done;
            }
            if st & 3 == ACTIVE {
                return Owner::Active;
            }
            let c = slot.cstamp.load(Ordering::SeqCst);
            // The owner may have finished and reset `cstamp` for its next transaction: the
            // state read again tells.
            if c != 0 && slot.state.load(Ordering::SeqCst) == st {
                return Owner::Committing(c);
            }
            spin.spin();
        }
    }
}

/// What a multi-version protocol shares between its workers.
pub struct MvShared<V, T: Timestamps = Counter> {
    /// Version memory, per table.
    pub stores: Vec<VersionStore<V>>,
    /// The transaction table.
    pub txns: TxnTable,
    /// Commit timestamps and snapshots.
    pub clock: T,
    watermark: CachePadded<Watermark>,
    /// When the watermark was last refreshed (`origin` ticks), and a flag for the refresher.
    refreshed: CachePadded<AtomicU64>,
    refreshing: AtomicBool,
    origin: quanta::Instant,
    interval_ns: u64,
    /// GC lag of departed workers (see [`MvShared::report`]).
    lag: GcLag,
    /// Read-only transactions of departed workers (see [`MvShared::report`]).
    read_only: ReadOnly,
    /// The GC queues departed workers left behind, adopted by the next worker that collects
    /// (`orphaned` says there are some without taking the lock).
    orphans: std::sync::Mutex<Orphans<V>>,
    orphaned: AtomicBool,
    /// AggressiveGC's age bound in nanoseconds (0: off), its watermark, and the clock's
    /// samples it is taken from: (when, clock), oldest first, touched only by the holder of
    /// the `refreshing` flag (the lock is never contended).
    aggressive_ns: u64,
    prune_mark: CachePadded<AtomicU64>,
    samples: std::sync::Mutex<VecDeque<(u64, u64)>>,
    /// The largest commit timestamp of a transaction that committed after one of its
    /// anti-dependency successors (see [`MvShared::note_back_edge`]).
    back_edge: CachePadded<AtomicU64>,
}

/// A departed worker's GC queues (see [`MvCtx::release`]).
struct Orphans<V> {
    prune: Vec<(TableId, RowId, u64, u64)>,
    dead: Vec<(TableId, Ptr<V>, u64)>,
}

/// The GC watermark and when its state was the newest (`now_ns`; for the staleness of the
/// read-only snapshots taken at it), on one line.
#[derive(Default)]
struct Watermark {
    stamp: AtomicU64,
    since_ns: AtomicU64,
}

/// Read-only transactions of departed workers: at safe snapshots, at fresh ones, and the safe
/// ones' summed and largest staleness in nanoseconds (see `VersionReport`).
#[derive(Default)]
struct ReadOnly {
    safe: AtomicU64,
    fresh: AtomicU64,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

/// GC lag sums: versions cut, their summed and largest lag in nanoseconds.
#[derive(Default)]
struct GcLag {
    count: AtomicU64,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
}

/// How the substrate collects garbage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gc {
    /// Microseconds between refreshes of the watermark (CCBench's RapidGC interval).
    pub interval_us: u64,
    /// AggressiveGC's age bound in microseconds (see the module docs); 0 turns it off.
    pub aggressive_us: u64,
    /// Where versions come from.
    pub alloc: VersionAlloc,
    /// Freed versions are poisoned (`VersionStore::poisoned`).
    pub poison: bool,
}

/// A read found that the version its snapshot sees was collected by the aggressive GC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooOld;

/// The outcome of [`MvCtx::install`].
pub enum Install<'a, V> {
    /// Installed over the version whose stamp is given (0: the chain was empty).
    Installed(u64),
    /// The newest version is this transaction's own: write into it instead.
    Own(&'a Version<V>),
    /// Another transaction wrote the record after the snapshot, or is writing it.
    Conflict,
    /// The record was unlinked: look the key up again.
    Unlinked,
}

/// A worker's side of the substrate: its transaction-table slot, snapshot, version pools, GC
/// queues.
pub struct MvCtx<'db, V: VersionExt, T: Timestamps = Counter> {
    /// The shared part.
    pub shared: &'db MvShared<V, T>,
    slot: usize,
    seq: u64,
    /// The running transaction's snapshot.
    pub snapshot: u64,
    pools: Vec<VersionPool<V>>,
    /// Rows with a committed write waiting for the watermark: (table, row, stamp, the
    /// writer's begin time in `now_ns`).
    prune: VecDeque<(TableId, RowId, u64, u64)>,
    /// When the running transaction began (`MvShared::now_ns`).
    began_ns: u64,
    /// The commit timestamp this worker drew last (0: none).
    last_commit: u64,
    /// Whether this worker's snapshots hold the aggressive GC back (as published in its slot).
    protected: bool,
    /// GC lag of the versions this worker cut: count, sum and largest (nanoseconds).
    lag: (u64, u64, u64),
    /// When the worker joined (`MvShared::now_ns`): only versions superseded since count in
    /// `lag`, not those a previous run's workers left queued (a run of another protocol may
    /// have taken its turn in between).
    since_ns: u64,
    /// Read-only transactions begun at safe snapshots and at fresh ones, and the safe ones'
    /// summed and largest staleness (nanoseconds).
    read_only: (u64, u64, u64, u64),
    /// Versions taken off chains, waiting for two epoch grace periods: (table, version, epoch).
    dead: VecDeque<(TableId, NonNull<Version<V>>, u64)>,
    /// Versions freed so far (statistics, tests).
    pub freed: u64,
}
