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

impl<V: VersionExt, T: Timestamps + Default> MvShared<V, T> {
    /// The substrate for `tables`, at most `workers` workers, collecting garbage as `gc` says.
    pub fn new(tables: &[TableSpec], workers: usize, gc: Gc) -> Self {
        MvShared {
            stores: tables
                .iter()
                .map(|t| VersionStore::with_alloc(t.row_size, gc.alloc).poisoned(gc.poison))
                .collect(),
            txns: TxnTable::new(workers),
            clock: T::default(),
            watermark: CachePadded::new(Watermark {
                stamp: AtomicU64::new(LOADED),
                since_ns: AtomicU64::new(0),
            }),
            refreshed: CachePadded::new(AtomicU64::new(0)),
            refreshing: AtomicBool::new(false),
            origin: quanta::Instant::now(),
            interval_ns: gc.interval_us * 1000,
            lag: GcLag::default(),
            read_only: ReadOnly::default(),
            orphans: std::sync::Mutex::new(Orphans { prune: Vec::new(), dead: Vec::new() }),
            orphaned: AtomicBool::new(false),
            aggressive_ns: gc.aggressive_us * 1000,
            prune_mark: CachePadded::new(AtomicU64::new(LOADED)),
            samples: std::sync::Mutex::new(VecDeque::new()),
            back_edge: CachePadded::new(AtomicU64::new(0)),
        }
    }
}

impl<V: VersionExt, T: Timestamps> MvShared<V, T> {
    /// Versions cut from chunks so far, over every table: live versions plus those pooled for
    /// reuse or waiting to be freed (a bound on version memory; it stays flat while the GC keeps
    /// up).
    pub fn carved_versions(&self) -> u64 {
        self.stores.iter().map(|s| s.carved()).sum()
    }

    /// What the versions hold now, walked over every row an index maps, and the GC lag of the
    /// versions cut since the last report by workers that have left (a worker hands its figures
    /// over when it drops). Call it when no worker runs: the chains are walked without a
    /// storage epoch.
    pub fn report(&self, storage: &Storage<MvRecord<V>>) -> crate::engine::report::VersionReport {
        let mut r = crate::engine::report::VersionReport::default();
        let mut g = crate::storage::index::pin();
        for (t, store) in storage.tables().iter().zip(&self.stores) {
            let size = store.version_bytes() as u64;
            let mut alive = 0;
            t.index.for_each_part(
                0,
                1,
                &mut g,
                || {},
                |_, rid| {
                    let mut n = 0;
                    let mut v = t.rows.get(rid).header.newest();
                    while let Some(ver) = v {
                        n += 1;
                        v = next_of(ver);
                    }
                    r.rows += 1;
                    alive += n;
                    r.longest_chain = r.longest_chain.max(n);
                },
            );
            r.alive += alive;
            r.alive_bytes += alive * size;
            r.carved += store.carved();
            r.carved_bytes += store.carved() * size;
        }
        // Relaxed: statistics handed over by workers that have been joined.
        let count = self.lag.count.swap(0, Ordering::Relaxed);
        let sum = self.lag.sum_ns.swap(0, Ordering::Relaxed);
        r.gc_lag_max_us = self.lag.max_ns.swap(0, Ordering::Relaxed) as f64 / 1e3;
        r.gc_lag_mean_us = if count == 0 { 0.0 } else { sum as f64 / count as f64 / 1e3 };
        let ro = &self.read_only;
        r.read_only_safe = ro.safe.swap(0, Ordering::Relaxed);
        r.read_only_fresh = ro.fresh.swap(0, Ordering::Relaxed);
        let sum = ro.sum_ns.swap(0, Ordering::Relaxed) as f64;
        r.read_only_staleness_mean_us =
            Some(if r.read_only_safe == 0 { 0.0 } else { sum / r.read_only_safe as f64 / 1e3 });
        r.read_only_staleness_max_us = Some(ro.max_ns.swap(0, Ordering::Relaxed) as f64 / 1e3);
        r.finish()
    }

    /// Frees every version left when the database drops: the rows' chains and the versions
    /// departed workers left waiting for grace periods (with pooled versions there is nothing
    /// to do: the stores unmap their chunks). No worker may be left.
    pub fn teardown(&self, storage: &Storage<MvRecord<V>>) {
        if self.stores.iter().all(|s| s.alloc() == VersionAlloc::Pool) {
            return;
        }
        let mut g = crate::storage::index::pin();
        for (t, store) in storage.tables().iter().zip(&self.stores) {
            t.index.for_each_part(
                0,
                1,
                &mut g,
                || {},
                |_, rid| {
                    let rec = t.rows.get(rid).header;
                    let w = rec.head.swap(UNLINKED, Ordering::Relaxed);
                    // SAFETY: no worker is left, so nothing else reaches the chain, and the
                    // swap leaves it to this walk alone (an index entry names a row once).
                    unsafe { store.free_chain(NonNull::new((w & PTR) as *mut Version<V>)) };
                },
            );
        }
        let mut o = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
        for (t, p, _) in o.dead.drain(..) {
            // SAFETY: cut off or retracted, so on no chain; queued once; no worker is left.
            unsafe { self.stores[t.index()].free_one(p.0) };
        }
    }

    /// The GC watermark: at most the oldest snapshot in use.
    #[inline]
    pub fn watermark(&self) -> u64 {
        self.watermark.stamp.load(Ordering::Acquire)
    }

    /// The watermark the GC prunes chains at: the watermark, or with AggressiveGC the clock
    /// as it was the age bound ago if that is higher, held back only by protected snapshots.
    #[inline]
    pub fn prune_mark(&self) -> u64 {
        if self.aggressive_ns == 0 {
            self.watermark()
        } else {
            // Acquire: pairs with `recompute`'s Release.
            self.prune_mark.load(Ordering::Acquire)
        }
    }

    /// Nanoseconds since the substrate was made.
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Recomputes the watermark if it is due at `now` and nobody else is at it.
    #[inline]
    fn maybe_refresh(&self, now: u64) {
        // SeqCst swap: before the snapshot loads (see `pin_watermark`).
        if now.saturating_sub(self.refreshed.load(Ordering::Relaxed)) < self.interval_ns
            || self.refreshing.swap(true, Ordering::SeqCst)
        {
            return;
        }
        self.recompute();
        self.refreshed.store(now, Ordering::Relaxed);
        // Release: the new watermark before the flag drops (pairs with `pin_watermark`).
        self.refreshing.store(false, Ordering::Release);
    }

    /// Recomputes the watermark now (waiting for a refresh in progress).
    pub fn refresh(&self) {
        let mut spin = crate::util::SpinWait::default();
        while self.refreshing.swap(true, Ordering::SeqCst) {
            spin.spin();
        }
        self.recompute();
        self.refreshing.store(false, Ordering::Release);
    }

    /// Whether a worker that published `w`, the watermark it loaded, as its snapshot may read
    /// at `w`: no refresh can pass it any more. A refresh whose scan missed the store had
    /// raised the `refreshing` flag before it (SeqCst), so the flag is seen up (then the
    /// answer is no, rather than a wait for a refresher that may be descheduled), or seen
    /// dropped after it computed, and then its watermark is seen; if the watermark is still
    /// `w`, every later refresh sees the store.
    fn pin_watermark(&self, w: u64) -> bool {
        !self.refreshing.load(Ordering::SeqCst) && self.watermark.stamp.load(Ordering::SeqCst) == w
    }

    /// Records that a transaction committed at `c` after one of its anti-dependency
    /// successors (it read a version that a transaction committed before it overwrote: its
    /// successor stamp is below `c`). Read-only transactions avoid snapshots below such a
    /// commit (see `protocols::mv::worker`).
    #[inline]
    pub fn note_back_edge(&self, c: u64) {
        let b = &self.back_edge;
        // SeqCst: before the transaction's slot goes idle (see `mvcc`'s read-only rule).
        if b.load(Ordering::Relaxed) < c {
            b.fetch_max(c, Ordering::SeqCst);
        }
    }

    /// The watermark (and AggressiveGC's) recomputed, by the holder of the `refreshing` flag.
    fn recompute(&self) {
        // SeqCst loads: see the module docs (the clock is read before the snapshots).
        let clock = self.clock.snapshot();
        let mut m = clock;
        // When the state at `m` was the newest: now if it is the clock's, else the begin of
        // the transaction whose snapshot it is (Relaxed: a statistic).
        let mut since = None;
        let mut protected = u64::MAX;
        let used = self.txns.used.load(Ordering::SeqCst);
        for s in &self.txns.slots[..used] {
            let snap = s.snapshot.load(Ordering::SeqCst);
            if snap < m {
                (m, since) = (snap, Some(s.began.load(Ordering::Relaxed)));
            }
            if self.aggressive_ns != 0 && s.protected.load(Ordering::SeqCst) {
                protected = protected.min(snap);
            }
        }
        let wm = &self.watermark;
        // The latest time the state at `m` is known to have been the newest. Relaxed
        // `since_ns`: a statistic; only the holder of the `refreshing` flag stores it.
        let since = since.unwrap_or_else(|| self.now_ns());
        let old = wm.stamp.load(Ordering::Relaxed);
        if m > old {
            wm.since_ns.store(since, Ordering::Relaxed);
        } else if m == old {
            wm.since_ns.fetch_max(since, Ordering::Relaxed);
        }
        wm.stamp.fetch_max(m, Ordering::Release);
        if self.aggressive_ns != 0 {
            // Timed after the clock was read: see `aged_clock`.
            let aged = self.aged_clock(self.now_ns(), clock);
            // Release: pairs with `prune_mark`'s Acquire.
            self.prune_mark.fetch_max(m.max(aged.min(protected)), Ordering::Release);
        }
    }

    /// Records `clock`, the clock's value read before `now` (so every snapshot of a
    /// transaction that began after `now` is at or above it), and returns the newest sample
    /// at least the age bound old (`LOADED` if there is none yet). A sample is kept every
    /// 1/32 of the bound, so the answer is at most that much older than asked for.
    fn aged_clock(&self, now: u64, clock: u64) -> u64 {
        let mut q = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if q.back().is_none_or(|&(t, _)| now >= t + self.aggressive_ns / 32) {
            q.push_back((now, clock));
        }
        let Some(due) = now.checked_sub(self.aggressive_ns) else { return LOADED };
        while q.len() > 1 && q[1].0 <= due {
            q.pop_front();
        }
        match q.front() {
            Some(&(t, c)) if t <= due => c,
            _ => LOADED,
        }
    }

    /// The version of `rec` a transaction with snapshot `s` sees (`own`: its pending stamp;
    /// its own pending version is seen), or `None`. Tombstones are returned: the caller reads
    /// them as absence. [`TooOld`] if the chain ends, without a version `s` sees, at a version
    /// whose older ones the GC cut off: only the aggressive GC cuts versions a snapshot in use
    /// may see (the watermark is at or below every snapshot), so the answer is exact there.
    #[inline]
    pub fn visible<'a>(
        &self,
        rec: &'a MvRecord<V>,
        s: u64,
        own: u64,
    ) -> Result<Option<&'a Version<V>>, TooOld> {
        self.visible_as(rec, s, own, false)
    }

    /// [`MvShared::visible`], or with `speculative` Hekaton's speculative reads: a pending
    /// version whose owner is committing at or below `s` is returned at once instead of
    /// waited for (the reader takes a commit dependency on it, see `protocols::hekaton`).
    #[inline]
    pub fn visible_as<'a>(
        &self,
        rec: &'a MvRecord<V>,
        s: u64,
        own: u64,
        speculative: bool,
    ) -> Result<Option<&'a Version<V>>, TooOld> {
        let mut v = rec.newest();
        let mut spin = crate::util::SpinWait::default();
        while let Some(ver) = v {
            loop {
                let st = ver.stamp.load(Ordering::Acquire);
                if st <= s {
                    return Ok(Some(ver));
                }
                if st == own {
                    return Ok(Some(ver));
                }
                if st & PENDING == 0 {
                    break; // committed after the snapshot, or aborted
                }
                match self.txns.owner(st) {
                    Owner::Active => break,
                    Owner::Committing(c) if c > s => break,
                    Owner::Committing(_) if speculative => return Ok(Some(ver)),
                    // Its stamp is being stored (or it just was): look again, yielding the
                    // core if the owner was descheduled.
                    Owner::Committing(_) | Owner::Done => spin.spin(),
                }
            }
            v = next_of(ver);
            // Relaxed: `prune` flags the version before its Release store of the cut, which
            // `next_of`'s Acquire load saw.
            if v.is_none() {
                let f = ver.flags.load(Ordering::Relaxed);
                if f & TRIMMED != 0 && f >> BIRTH_SHIFT <= s {
                    return Err(TooOld);
                }
            }
        }
        Ok(None)
    }

    /// The commit timestamp `v` has, or will have if its owner is committing; `None` if it was
    /// aborted (or its owner is still running).
    pub fn commit_stamp(&self, v: &Version<V>) -> Option<u64> {
        let mut spin = crate::util::SpinWait::default();
        loop {
            let st = v.stamp.load(Ordering::Acquire);
            if is_committed(st) {
                return Some(st);
            }
            if st & PENDING == 0 {
                return None;
            }
            match self.txns.owner(st) {
                Owner::Active => return None,
                Owner::Committing(c) => return Some(c),
                // Stamped or aborted now: look again.
                Owner::Done => spin.spin(),
            }
        }
    }

    /// Whether a transaction with snapshot `s`, commit timestamp `c` and pending stamp `own`
    /// would see `rec` differently at `c` than at `s`: a version of it committed in `(s, c)`,
    /// or is pending with an owner committing below `c` (waiting for owners that are stamping,
    /// none can be waited on for long). Hekaton's repeated scans ask this of every row in a
    /// scanned range.
    pub fn changed_between(&self, rec: &MvRecord<V>, s: u64, c: u64, own: u64) -> bool {
        let mut v = rec.newest();
        let mut spin = crate::util::SpinWait::default();
        while let Some(ver) = v {
            let st = ver.stamp.load(Ordering::Acquire);
            if st == own {
                // Installed over a version at or below `s` (first updater wins): nothing
                // committed beneath it since.
                return false;
            }
            if is_committed(st) {
                if st <= s {
                    return false;
                }
                if st < c {
                    return true;
                }
            } else if st & PENDING != 0 {
                match self.txns.owner(st) {
                    Owner::Active => {}
                    Owner::Committing(o) if o > c => {}
                    // At or below `s` it was seen (speculatively), as a committed version is.
                    Owner::Committing(o) => return o > s,
                    Owner::Done => {
                        spin.spin();
                        continue;
                    }
                }
            }
            v = next_of(ver);
        }
        false
    }

    /// Prefetches the newest version of `rec` of `table`: its header line and the lines of the
    /// columns `cols` (the third stage of a batched prefetch, after the index and the slot).
    #[inline]
    pub fn prefetch_newest(
        &self,
        table: TableId,
        rec: &MvRecord<V>,
        p: &Projection,
        cols: Columns,
    ) {
        if let Some(v) = rec.newest() {
            self.stores[table.index()].row(v).prefetch(p, cols);
        }
    }

    /// The newest committed version of `rec` (checkpoints, checks after a run), or `None`.
    #[inline]
    pub fn latest_committed<'a>(&self, rec: &'a MvRecord<V>) -> Option<&'a Version<V>> {
        let mut v = rec.newest();
        while let Some(ver) = v {
            if is_committed(ver.stamp.load(Ordering::Acquire)) {
                return Some(ver);
            }
            v = next_of(ver);
        }
        None
    }

    /// Copies the latest committed image of `rec` of `table` into `buf`; its stamp, or `None`
    /// for no committed row (none, or a tombstone).
    pub fn read_committed(&self, table: TableId, rec: &MvRecord<V>, buf: &mut [u8]) -> Option<u64> {
        let v = self.latest_committed(rec)?;
        if v.flags.load(Ordering::Relaxed) & TOMBSTONE != 0 {
            return None;
        }
        self.stores[table.index()].row(v).read_into(buf);
        Some(v.stamp.load(Ordering::Relaxed))
    }

    /// Loads `payload` as `row`'s only version (the bulk loader; the slot is fresh).
    pub fn load(&self, table: TableId, row: RowRef<'_, MvRecord<V>>, payload: &[u8]) {
        let store = &self.stores[table.index()];
        let v = store.alloc_shared();
        // SAFETY: a version nobody else holds (fresh from the store or its spare list).
        let ver = unsafe { v.as_ref() };
        init_version(ver, LOADED, 0);
        store.row(ver).write_from(payload);
        row.header.init(v);
    }
}

/// Sets a version up as `stamp`, `flags`, no older version, the protocol's fields reset.
#[inline]
fn init_version<V: VersionExt>(v: &Version<V>, stamp: u64, flags: u64) {
    v.stamp.store(stamp, Ordering::Relaxed);
    v.flags.store(flags, Ordering::Relaxed);
    v.next.store(std::ptr::null_mut(), Ordering::Relaxed);
    v.ext.reset();
}

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
    /// Read-only transactions begun at safe snapshots and at fresh ones, and the safe ones'
    /// summed and largest staleness (nanoseconds).
    read_only: (u64, u64, u64, u64),
    /// Versions taken off chains, waiting for two epoch grace periods: (table, version, epoch).
    dead: VecDeque<(TableId, NonNull<Version<V>>, u64)>,
    /// Versions freed so far (statistics, tests).
    pub freed: u64,
}

/// Queue lengths above which a GC pass runs at every begin.
const GC_BACKLOG: usize = 256;

impl<'db, V: VersionExt, T: Timestamps> MvCtx<'db, V, T> {
    /// The substrate state of the worker in storage slot `slot`.
    pub fn new(shared: &'db MvShared<V, T>, slot: usize) -> Self {
        shared.txns.used.fetch_max(slot + 1, Ordering::SeqCst);
        MvCtx {
            shared,
            slot,
            seq: 0,
            snapshot: 0,
            pools: shared.stores.iter().map(|_| VersionPool::default()).collect(),
            prune: VecDeque::new(),
            began_ns: 0,
            last_commit: 0,
            protected: false,
            lag: (0, 0, 0),
            read_only: (0, 0, 0, 0),
            dead: VecDeque::new(),
            freed: 0,
        }
    }

    /// The worker's slot (in the transaction table and the storage).
    #[inline(always)]
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The pending stamp of this worker's running transaction.
    #[inline(always)]
    pub fn own(&self) -> u64 {
        PENDING | (self.slot as u64) << SEQ_BITS | (self.seq & SEQ_MASK)
    }

    /// Starts a transaction: announces it, takes a snapshot, then collects garbage. The worker
    /// is inside its storage epoch (`WorkerCtx::enter`).
    #[inline]
    pub fn begin(&mut self, storage: &Storage<MvRecord<V>>) {
        self.begin_at(storage, false);
    }

    /// Makes this worker's next snapshots hold the aggressive GC back, or stop doing so: a
    /// transaction that aborted with `snapshot-too-old` is retried protected, and cannot be
    /// too old again (see the module docs). Call it between transactions.
    #[inline]
    pub fn protect(&mut self, on: bool) {
        if on != self.protected {
            self.protected = on;
            // SeqCst: before the next snapshot is drawn (see the module docs).
            self.shared.txns.slots[self.slot].protected.store(on, Ordering::SeqCst);
        }
    }

    /// Whether this worker's snapshots hold the aggressive GC back.
    #[inline]
    pub fn is_protected(&self) -> bool {
        self.protected
    }

    /// Starts a read-only transaction: at the GC watermark if no transaction committed after
    /// an anti-dependency successor above it (the safe-snapshot rule of
    /// `protocols::mv::worker`) and, with AggressiveGC, the watermark is not below its
    /// pruning mark and the worker is not protected; else as [`MvCtx::begin`] does. Returns
    /// whether the snapshot is the safe one.
    #[inline]
    pub fn begin_read_only(&mut self, storage: &Storage<MvRecord<V>>) -> bool {
        self.begin_at(storage, true)
    }

    #[inline(always)]
    fn begin_at(&mut self, storage: &Storage<MvRecord<V>>, read_only: bool) -> bool {
        let sh = self.shared;
        let t = &sh.txns.slots[self.slot];
        // Refreshed before this worker publishes anything: a refresh after the first store
        // below would find the old watermark there and keep it (a worker that runs only
        // read-only transactions, alone, would never see the watermark move).
        self.began_ns = sh.now_ns();
        sh.maybe_refresh(self.began_ns);
        self.seq += 1;
        // Relaxed: a statistic (see `TxnSlot::began`), published with the snapshot below.
        t.began.store(self.began_ns, Ordering::Relaxed);
        t.cstamp.store(0, Ordering::Relaxed);
        // Release: orders the `cstamp` reset before the new state (see `TxnTable::owner`).
        t.state.store((self.seq & SEQ_MASK) << 2 | ACTIVE, Ordering::Release);
        // The two-step snapshot publication of the module docs.
        let w = sh.watermark();
        t.snapshot.store(w, Ordering::SeqCst);
        // SeqCst: after the watermark (pairs with `note_back_edge`, through the refresh that
        // saw the noting transaction's slot idle). The safe snapshot must also include this
        // worker's own last commit: a worker reads its own writes.
        let safe = read_only
            && w >= self.last_commit
            && !self.protected
            && sh.pin_watermark(w)
            && sh.back_edge.load(Ordering::SeqCst) <= w
            && (sh.aggressive_ns == 0 || w >= sh.prune_mark());
        if safe {
            self.snapshot = w;
            let stale = self.began_ns.saturating_sub(sh.watermark.since_ns.load(Ordering::Relaxed));
            let ro = &mut self.read_only;
            (ro.0, ro.2, ro.3) = (ro.0 + 1, ro.2 + stale, ro.3.max(stale));
        } else {
            self.read_only.1 += u64::from(read_only);
            self.snapshot = sh.clock.snapshot();
            t.snapshot.store(self.snapshot, Ordering::Release);
        }
        // Relaxed `orphaned`: a hint (see `collect`).
        if !self.prune.is_empty() || !self.dead.is_empty() || sh.orphaned.load(Ordering::Relaxed) {
            self.collect(storage);
        }
        safe
    }

    /// Announces the commit and draws its timestamp. Every check that can abort is done.
    #[inline]
    pub fn committing(&mut self) -> u64 {
        let t = &self.shared.txns.slots[self.slot];
        // SeqCst: before the clock is read (see `TxnTable::owner`).
        t.state.store((self.seq & SEQ_MASK) << 2 | COMMITTING, Ordering::SeqCst);
        let c = self.shared.clock.commit();
        t.cstamp.store(c, Ordering::SeqCst);
        self.last_commit = c;
        c
    }

    /// The running transaction, committed at `c` (its snapshot if it certified nothing), read
    /// versions without tracking them: publishes `c` and its snapshot for
    /// [`TxnTable::untracked`]. Call it after the commit and before [`MvCtx::finish`], so that
    /// whoever sees the transaction ended (or this slot's next transaction) sees the pair.
    pub fn untracked_committed(&self, c: u64) {
        let t = &self.shared.txns.slots[self.slot];
        // Only this worker writes the pair: a sequence lock with odd while writing.
        let seq = t.untracked_seq.load(Ordering::Relaxed);
        t.untracked_seq.store(seq + 1, Ordering::Relaxed);
        // Release fence: the odd sequence before the pair (pairs with the readers' Acquire
        // fence).
        std::sync::atomic::fence(Ordering::Release);
        t.untracked_commit.store(c, Ordering::Relaxed);
        t.untracked_snapshot.store(self.snapshot, Ordering::Relaxed);
        // Release: the pair before the even sequence (pairs with the readers' Acquire load),
        // and before `finish`'s state store.
        t.untracked_seq.store(seq + 2, Ordering::Release);
    }

    /// Ends the transaction (after its versions are stamped or taken off).
    #[inline]
    pub fn finish(&mut self) {
        let t = &self.shared.txns.slots[self.slot];
        // Release: the versions' stamps before a reader sees the owner done.
        t.state.store((self.seq & SEQ_MASK) << 2 | IDLE, Ordering::Release);
        t.snapshot.store(NO_SNAPSHOT, Ordering::Release);
    }

    /// A new pending version of `table` for this transaction, flags `flags`.
    #[inline]
    pub fn alloc(&mut self, table: TableId, flags: u64) -> NonNull<Version<V>> {
        let v = self.pools[table.index()].alloc(&self.shared.stores[table.index()]);
        // SAFETY: a version nobody else holds (from this worker's pool).
        init_version(unsafe { v.as_ref() }, self.own(), flags);
        v
    }

    /// Gives back a version that was never published.
    #[inline]
    pub fn unused(&mut self, table: TableId, v: NonNull<Version<V>>) {
        self.pools[table.index()].free(&self.shared.stores[table.index()], v);
    }

    /// The payload of `v` of `table`.
    #[inline(always)]
    pub fn row<'v>(&self, table: TableId, v: &'v Version<V>) -> RowRef<'v, Version<V>> {
        self.shared.stores[table.index()].row(v)
    }

    /// Installs the pending version `v` as the newest of `rec`, first updater wins: the
    /// newest version must be committed at or below the snapshot (or the chain empty).
    #[inline]
    pub fn install<'a>(&self, rec: &'a MvRecord<V>, v: NonNull<Version<V>>) -> Install<'a, V> {
        let own = self.own();
        let mut spin = crate::util::SpinWait::default();
        loop {
            let w = rec.word();
            if w & UNLINKED != 0 {
                return Install::Unlinked;
            }
            let prev = match deref::<V>(w) {
                None => 0,
                Some(h) => {
                    let st = h.stamp.load(Ordering::Acquire);
                    if st == own {
                        return Install::Own(h);
                    }
                    if st == ABORTED {
                        // Its writer is taking it off the chain.
                        spin.spin();
                        continue;
                    }
                    if st & PENDING != 0 {
                        // Another's pending version. One that is committing cannot wait for
                        // us: wait for it to finish, so that a retry's snapshot includes it
                        // (aborting at once would retry into the same pending version).
                        if let Owner::Committing(_) = self.shared.txns.owner(st) {
                            spin.spin();
                            continue;
                        }
                        return Install::Conflict;
                    }
                    if st > self.snapshot {
                        return Install::Conflict;
                    }
                    st
                }
            };
            // SAFETY: our own unpublished version.
            unsafe { v.as_ref() }.next.store((w & PTR) as *mut Version<V>, Ordering::Relaxed);
            // Release: publishes the version's fields and payload (pairs with `word`'s
            // Acquire). The low bits are kept: a GC lock taken meanwhile fails the CAS and
            // the loop looks again.
            if rec
                .head
                .compare_exchange(
                    w,
                    v.as_ptr() as u64 | (w & !PTR),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Install::Installed(prev);
            }
        }
    }

    /// Takes this transaction's pending version `v` (the newest of `rec`) off the chain
    /// (abort); it is freed after the grace periods.
    pub fn retract(
        &mut self,
        table: TableId,
        rec: &MvRecord<V>,
        v: NonNull<Version<V>>,
        epochs: &Epochs,
    ) {
        // SAFETY: our own version, still on the chain.
        let ver = unsafe { v.as_ref() };
        ver.stamp.store(ABORTED, Ordering::Release);
        let next = ver.next.load(Ordering::Relaxed) as u64;
        loop {
            let w = rec.word();
            debug_assert_eq!(w & PTR, v.as_ptr() as u64, "a pending version stays the newest");
            if rec
                .head
                .compare_exchange(w, next | (w & !PTR), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                break;
            }
        }
        self.dead.push_back((table, v, epochs.retire_stamp()));
    }

    /// Queues `rid` of `table`, written at `stamp`, for pruning.
    #[inline]
    pub fn written(&mut self, table: TableId, rid: RowId, stamp: u64) {
        self.prune.push_back((table, rid, stamp, self.began_ns));
    }

    /// Prunes the rows the pruning mark ([`MvShared::prune_mark`]) has passed and frees the versions the epochs allow. The
    /// worker is inside its storage epoch.
    pub fn collect(&mut self, storage: &Storage<MvRecord<V>>) {
        // Relaxed: a hint; the lock orders the queues' contents.
        if self.shared.orphaned.load(Ordering::Relaxed) {
            self.adopt();
        }
        let w = self.shared.prune_mark();
        let mut budget = if self.prune.len() > GC_BACKLOG { usize::MAX } else { 64 };
        let mut epoch = None;
        while let Some(&(t, rid, c, written)) = self.prune.front() {
            if c > w || budget == 0 {
                break;
            }
            budget -= 1;
            self.prune.pop_front();
            let rec = storage.table(t).rows.get(rid).header;
            if let Some(cut) = prune(rec, w) {
                let e = *epoch.get_or_insert_with(|| storage.epochs().retire_stamp());
                let n = self.retire_chain(t, cut, e);
                // This transaction's begin time stands for now (a clock read saved).
                let lag = self.began_ns.saturating_sub(written);
                self.lag = (self.lag.0 + n, self.lag.1 + n * lag, self.lag.2.max(lag));
            }
        }
        let safe = storage.epochs().min_active();
        while let Some(&(t, v, e)) = self.dead.front() {
            if e >= safe {
                break;
            }
            self.dead.pop_front();
            self.pools[t.index()].free(&self.shared.stores[t.index()], v);
            self.freed += 1;
        }
    }

    /// Takes over the GC queues departed workers left (their entries wait behind this
    /// worker's, which can only delay them).
    #[cold]
    fn adopt(&mut self) {
        let mut o = self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner());
        self.prune.extend(o.prune.drain(..));
        self.dead.extend(o.dead.drain(..).map(|(t, p, e)| (t, p.0, e)));
        self.shared.orphaned.store(false, Ordering::Relaxed);
    }

    /// Queues every version from `first` on (a chain cut off, owned by the caller) for freeing
    /// after the grace periods of epoch `e`; returns how many.
    fn retire_chain(&mut self, t: TableId, first: NonNull<Version<V>>, e: u64) -> u64 {
        let mut v = Some(first);
        let mut n = 0;
        while let Some(p) = v {
            // SAFETY: the cut chain belongs to us and is freed only after the grace periods.
            let next = unsafe { p.as_ref() }.next.load(Ordering::Acquire);
            self.dead.push_back((t, p, e));
            v = NonNull::new(next);
            n += 1;
        }
        n
    }

    /// The reclaimer's unlink step for a deleted row (see the module docs): unlinks `rec` if
    /// its newest version is a tombstone at or below the watermark (or it has none), and
    /// retires its versions. `deleted` is handed the tombstone's commit timestamp before the row
    /// is marked unlinked: a transaction that then finds the key absent, with no version to tell
    /// who deleted it, learns the deletion's timestamp from wherever `deleted` put it (the
    /// phantom bucket's clock).
    pub fn unlink(
        &mut self,
        t: TableId,
        rec: &MvRecord<V>,
        epochs: &Epochs,
        deleted: impl Fn(u64),
    ) -> Unlink {
        let w = self.shared.watermark();
        let old = rec.head.fetch_or(GC_LOCK, Ordering::Acquire);
        if old & GC_LOCK != 0 {
            return Unlink::Busy;
        }
        if old & UNLINKED != 0 {
            rec.head.fetch_and(!GC_LOCK, Ordering::Release);
            return Unlink::Gone;
        }
        loop {
            let cur = rec.word();
            let verdict = match deref::<V>(cur) {
                None => None,
                Some(h) => {
                    let st = h.stamp.load(Ordering::Acquire);
                    let dead = h.flags.load(Ordering::Relaxed) & TOMBSTONE != 0;
                    if is_committed(st) && !dead {
                        Some(Unlink::Revived)
                    } else if is_committed(st) && st <= w {
                        // Before the unlinked bit is published (a failed CAS below only hands
                        // over a timestamp at or below the watermark again, which is harmless).
                        deleted(st);
                        None
                    } else {
                        // Pending (an insert over it may still abort), aborted (being taken
                        // off) or a tombstone younger than the oldest snapshot.
                        Some(Unlink::Busy)
                    }
                }
            };
            if let Some(v) = verdict {
                rec.head.fetch_and(!GC_LOCK, Ordering::Release);
                return v;
            }
            // AcqRel: a writer that installs meanwhile makes the CAS fail, and we look again.
            if rec.head.compare_exchange(cur, UNLINKED, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            {
                if let Some(first) = NonNull::new((cur & PTR) as *mut Version<V>) {
                    self.retire_chain(t, first, epochs.retire_stamp());
                }
                return Unlink::Unlinked;
            }
        }
    }

    /// Gives this worker's pooled versions back to the stores and its GC queues to the next
    /// worker that collects (it is leaving).
    pub fn release(&mut self) {
        for (pool, store) in self.pools.iter_mut().zip(&self.shared.stores) {
            pool.release(store);
        }
        if !self.prune.is_empty() || !self.dead.is_empty() {
            let mut o = self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner());
            o.prune.extend(self.prune.drain(..));
            o.dead.extend(self.dead.drain(..).map(|(t, v, e)| (t, Ptr(v), e)));
            self.shared.orphaned.store(true, Ordering::Relaxed);
        }
        // Relaxed: statistics, read after the worker is joined (`MvShared::report`).
        let (count, sum, max) = std::mem::take(&mut self.lag);
        let lag = &self.shared.lag;
        lag.count.fetch_add(count, Ordering::Relaxed);
        lag.sum_ns.fetch_add(sum, Ordering::Relaxed);
        lag.max_ns.fetch_max(max, Ordering::Relaxed);
        let (safe, fresh, sum, max) = std::mem::take(&mut self.read_only);
        let ro = &self.shared.read_only;
        ro.safe.fetch_add(safe, Ordering::Relaxed);
        ro.fresh.fetch_add(fresh, Ordering::Relaxed);
        ro.sum_ns.fetch_add(sum, Ordering::Relaxed);
        ro.max_ns.fetch_max(max, Ordering::Relaxed);
    }
}

impl<V: VersionExt, T: Timestamps> Drop for MvCtx<'_, V, T> {
    fn drop(&mut self) {
        self.release();
    }
}

/// Cuts `rec`'s chain after the newest version committed at or below `w`, under the row's GC
/// lock; returns the cut-off versions (now owned by the caller), if any.
fn prune<V: VersionExt>(rec: &MvRecord<V>, w: u64) -> Option<NonNull<Version<V>>> {
    if rec.pruned.load(Ordering::Relaxed) >= w {
        return None;
    }
    // Acquire: pairs with the Release that dropped the lock (the last pruner's cut is seen).
    let old = rec.head.fetch_or(GC_LOCK, Ordering::Acquire);
    if old & (GC_LOCK | UNLINKED) != 0 {
        if old & GC_LOCK == 0 {
            rec.head.fetch_and(!GC_LOCK, Ordering::Release);
        }
        return None; // another worker prunes it, or it is gone
    }
    let mut v = deref::<V>(old);
    let mut cut = None;
    while let Some(ver) = v {
        let st = ver.stamp.load(Ordering::Acquire);
        if is_committed(st) && st <= w {
            if let Some(first) = next_of(ver) {
                // The chain's birth, from its oldest version (committed: only the newest can
                // be pending). Under the GC lock nothing else changes the chain below `ver`.
                let mut oldest = first;
                while let Some(o) = next_of(oldest) {
                    oldest = o;
                }
                let f = oldest.flags.load(Ordering::Relaxed);
                let birth = if f & TRIMMED != 0 {
                    f >> BIRTH_SHIFT
                } else {
                    oldest.stamp.load(Ordering::Relaxed)
                };
                // Before the cut (Release below): a reader that finds the chain ending here
                // knows it was cut, and since when the row exists (`MvShared::visible`).
                ver.flags.fetch_or(TRIMMED | birth << BIRTH_SHIFT, Ordering::Relaxed);
                cut = NonNull::new(ver.next.swap(std::ptr::null_mut(), Ordering::AcqRel));
            }
            break;
        }
        v = next_of(ver);
    }
    // Relaxed: only a hint that lets later pruners skip (the lock orders the cut itself).
    rec.pruned.fetch_max(w, Ordering::Relaxed);
    // Release: the cut is visible to the next pruner.
    rec.head.fetch_and(!GC_LOCK, Ordering::Release);
    cut
}
