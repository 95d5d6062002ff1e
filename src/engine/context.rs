//! Per-thread storage state every protocol's worker embeds: its epoch slot, index guard, slot
//! caches, reclamation queues and scan buffer. One implementation, so that no protocol writes its
//! own epoch or allocation code.

use crate::durability::log::{LogManager, LogWriter};
use crate::error::{Abort, AbortReason, Error};
use crate::history::Recorder;
use crate::storage::index::{pin, IndexGuard, ScanBuf};
use crate::storage::inject::{CommitPhase, Injector};
use crate::storage::projection::Columns;
use crate::storage::reclaim::{Reclaimer, Unlink};
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowId, SlotCache, Storage, Table, TableId};
use std::sync::Arc;

/// Transactions between two reclamation passes when the queues are short.
const COLLECT_EVERY: u32 = 64;
/// Queue length that triggers a reclamation pass at every begin.
const COLLECT_BACKLOG: usize = 4096;
/// Slots of the hint table (a power of two): row ids remembered from prefetches per attempt.
const HINT_SLOTS: usize = 64;
/// Slots a hint may be placed in (linear probing from its home slot); if all are taken by
/// other keys of this attempt, the hint is dropped and the operation searches the index.
const HINT_PROBES: usize = 4;
/// A `Hint::table` no key has: a forgotten hint, which lookups probe past.
const FORGOTTEN: u32 = u32::MAX;

/// A row id that `prefetch` found for a key in the attempt numbered `attempt`.
#[derive(Clone, Copy, Default)]
struct Hint {
    attempt: u32,
    table: u32,
    key: u64,
    rid: u64,
}

/// The home slot of `key` of `table` in the hint table.
#[inline(always)]
fn hint_slot(table: u32, key: u64) -> usize {
    let h = (key ^ u64::from(table).rotate_left(40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - HINT_SLOTS.trailing_zeros())) as usize
}

/// A worker thread's storage-side state. Not `Send`: it belongs to the thread that created it.
pub struct WorkerCtx<'db, R: RecordHeader> {
    /// The storage.
    pub storage: &'db Storage<R>,
    /// This worker's epoch slot (also a dense worker id).
    pub slot: usize,
    /// Index guard, repinned at every begin.
    pub guard: IndexGuard,
    /// One slot cache per table.
    pub caches: Vec<SlotCache>,
    /// Deleted records waiting for their grace periods.
    pub reclaimer: Reclaimer,
    /// Buffer for index range scans.
    pub scan_buf: ScanBuf,
    /// Epoch entered by the running transaction.
    pub epoch: u64,
    since_collect: u32,
    /// Whether a transaction attempt is running (between `enter` and `exit`).
    in_txn: bool,
    /// Row ids found by `prefetch`, direct-mapped by key; entries of earlier attempts (another
    /// `attempt` number) are empty. See [`WorkerCtx::lookup`].
    hints: Box<[Hint; HINT_SLOTS]>,
    /// The running attempt's number in `hints` (never 0, which marks a never-used slot).
    attempt: u32,
    /// The history recorder, when the database records histories. Protocols report reads,
    /// writes and range reads here; attempts begin and end with `enter` and `exit`.
    pub history: Option<Recorder>,
    /// Pauses and the commit hook at the phases of commits, when the storage asks for them
    /// (tests; see [`crate::storage::inject`]).
    pub inject: Option<Box<Injector>>,
    /// This worker's log stream, when the database logs. Protocols append each committed
    /// transaction's writes here, with its commit stamp, while they hold its write locks (the
    /// durability contract, see [`crate::durability`]).
    pub log: Option<LogWriter>,
    /// The log epoch of this worker's last logged commit (0: none yet): it is durable once the
    /// log's durable epoch reaches it.
    pub log_epoch: u64,
    /// The largest commit stamp this worker has given (the in-place protocols' stamps, see
    /// [`crate::protocols::inplace::log_in_place`]).
    pub last_stamp: u64,
    /// Epochs between two snapshot boundaries (0: the database keeps no snapshots, see
    /// [`crate::storage::snapshot`]).
    pub snapshot_every: u64,
    /// The boundary the running attempt reads at, when it reads a snapshot (0: it does not).
    pub snapshot: u64,
}

impl<'db, R: RecordHeader> WorkerCtx<'db, R> {
    /// Registers a worker with `storage`, appending to `log` when the database logs (the
    /// protocols' `worker` passes its [`Database`](crate::engine::Database)'s: see
    /// [`Database::worker_ctx`](crate::engine::Database::worker_ctx)).
    pub fn new(storage: &'db Storage<R>, log: Option<&Arc<LogManager>>) -> Result<Self, Error> {
        let slot = storage.epochs().register().ok_or_else(|| {
            Error::Config(format!(
                "too many workers: this database was created for at most {}",
                storage.epochs().capacity()
            ))
        })?;
        Ok(WorkerCtx {
            storage,
            slot,
            guard: pin(),
            caches: (0..storage.tables().len()).map(|_| SlotCache::default()).collect(),
            reclaimer: Reclaimer::default(),
            scan_buf: ScanBuf::default(),
            epoch: 0,
            since_collect: 0,
            in_txn: false,
            hints: Box::new([Hint::default(); HINT_SLOTS]),
            attempt: 1,
            history: storage.history().map(|s| s.recorder()),
            inject: Injector::new(slot, storage.commit_pause_us(), storage.commit_hook()),
            log: log.map(|m| m.writer(slot)),
            log_epoch: 0,
            last_stamp: 0,
            snapshot_every: storage.epochs().snapshots.every(),
            snapshot: 0,
        })
    }

    /// Enters a transaction: publishes the epoch and repins the index guard. Runs a reclamation
    /// pass now and then, with `unlink` as the protocol's unlink step.
    #[inline]
    pub fn enter(&mut self, unlink: impl FnMut(&Table<R>, u64, &R, u64) -> Unlink) {
        // Before the epoch is published: a worker stopped here holds nothing.
        self.phase(CommitPhase::Begun);
        self.guard.repin();
        self.epoch = self.storage.epochs().enter(self.slot);
        self.in_txn = true;
        self.forget_hints();
        if let Some(h) = &mut self.history {
            h.begin();
        }
        self.since_collect += 1;
        let due = self.since_collect >= COLLECT_EVERY;
        if due {
            self.since_collect = 0;
            // Rows and slots of dropped workers (one flag load every few dozen transactions).
            self.storage.adopt_orphans(&mut self.reclaimer, &mut self.caches);
            // Index garbage: a repin only moves this worker to the current crossbeam epoch; it
            // never advances the epoch or runs deferred frees (only `pin` and `flush` do, and the
            // guard stays pinned for the worker's life). Without this, congee's replaced nodes
            // and the dense index's old directories would pile up for the whole run.
            self.guard.flush();
        }
        if self.reclaimer.pending() > 0 && (due || self.reclaimer.pending() > COLLECT_BACKLOG) {
            // Collected while this worker's epoch is published: a slot it inspects cannot be
            // freed and reused by another worker's reclaimer meanwhile.
            self.since_collect = 0;
            self.reclaimer.collect(self.storage, &mut self.caches, &self.guard, unlink);
        }
    }

    /// The running commit reached `phase` (see [`crate::storage::inject`]): pauses at random or calls
    /// the database's commit hook when it has them; one predictable branch otherwise.
    /// Protocols call it at each phase of their commits but the last, which
    /// [`WorkerCtx::commit_returning`] passes.
    #[inline(always)]
    pub fn phase(&mut self, phase: CommitPhase) {
        if let Some(i) = &mut self.inject {
            i.at(phase, self.log_epoch);
        }
    }

    /// A successful commit is about to return, its writes installed and its locks released
    /// (the end of the commit contract, see [`crate::engine::Protocol`]): its log epoch leaves
    /// flight ([`LogWriter::installed`]); under `--sync commit` it waits until the commit is
    /// durable, or, for a commit that logged nothing, until everything it could have read is
    /// (the log epoch in progress now); then it passes [`CommitPhase::Acknowledging`].
    /// `Err(NotDurable)` when the log has failed and the commit wrote (under `--sync commit`,
    /// whatever it did): its writes are installed in memory, but no log holds them. Every
    /// protocol's `Worker::commit` ends with it.
    #[inline]
    pub fn commit_returning(&mut self) -> Result<(), Abort> {
        if let Some(log) = &mut self.log {
            if !log.returning(self.log_epoch) {
                return Err(Abort::new(AbortReason::NotDurable));
            }
        }
        self.phase(CommitPhase::Acknowledging);
        Ok(())
    }

    /// Runs `f` between transactions with this worker's epoch published: rows, slots and
    /// versions `f` reaches through the index are not freed and reused meanwhile
    /// (reconnaissance, `Worker::pinned`).
    #[inline]
    pub fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        debug_assert!(!self.in_txn, "pinned inside a transaction");
        self.storage.epochs().enter(self.slot);
        let out = f();
        self.storage.epochs().exit(self.slot);
        out
    }

    /// Makes the running attempt (entered, not yet reading) a snapshot reader: its boundary,
    /// or `None` when the database keeps no snapshots or has none yet (see
    /// [`crate::storage::snapshot`]).
    #[inline]
    pub fn read_snapshot(&mut self) -> Option<u64> {
        debug_assert!(self.in_txn && self.snapshot == 0);
        let b = self.storage.epochs().snapshots.enter(self.slot)?;
        self.snapshot = b;
        Some(b)
    }

    /// Keeps the value `value` of row `rid` of table `t` (word `word`, committed in epoch
    /// `epoch`) for snapshot readers before a commit of epoch `now` replaces it, if the two lie
    /// in different snapshot intervals (see [`crate::storage::snapshot`]). Called under the
    /// record's lock; nothing when the database keeps no snapshots.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn keep_for_snapshots(
        &mut self,
        t: TableId,
        rid: RowId,
        value: crate::storage::snapshot::Kept<'_, R>,
        word: u64,
        epoch: u64,
        now: u64,
    ) {
        let k = self.snapshot_every;
        if k == 0 || !crate::storage::snapshot::crosses(epoch, now, k) {
            return;
        }
        let chains = self.storage.table(t).chains.as_ref().expect("snapshots keep chains");
        let epochs = self.storage.epochs();
        self.reclaimer.save_old(epochs, chains, t, rid, value, word, epoch);
    }

    /// Leaves the transaction.
    #[inline]
    pub fn exit(&mut self) {
        if self.snapshot != 0 {
            self.storage.epochs().snapshots.exit(self.slot);
            self.snapshot = 0;
        }
        self.in_txn = false;
        self.forget_hints();
        if let Some(h) = &mut self.history {
            h.end();
        }
        self.storage.epochs().exit(self.slot);
    }

    /// Looks `key` up in `table`'s index, or takes the row id a `prefetch` of this attempt found.
    ///
    /// A hint is as good as a fresh lookup done at prefetch time: the row cannot have been freed
    /// and reused since, because reuse waits for every transaction that was running when the row
    /// was unlinked, this one included. It may, like any lookup result, have been deleted and
    /// unlinked since; a protocol that finds the row unlinked calls [`WorkerCtx::forget`] and
    /// looks again (the key may have been inserted anew under another row).
    #[inline]
    pub fn lookup(&self, table: &Table<R>, key: u64) -> Option<RowId> {
        match self.hint(table.id.0, key) {
            Some(i) => Some(RowId(self.hints[i].rid)),
            None => table.index.get(key, &self.guard),
        }
    }

    /// The row this attempt's hint names for `key` (see [`WorkerCtx::prefetch_cols`]), without
    /// searching the index when there is none.
    #[inline]
    pub fn hinted(&self, table: &Table<R>, key: u64) -> Option<RowId> {
        self.hint(table.id.0, key).map(|i| RowId(self.hints[i].rid))
    }

    /// The hint table slot holding this attempt's hint for `key`, if any.
    #[inline]
    fn hint(&self, table: u32, key: u64) -> Option<usize> {
        let home = hint_slot(table, key);
        for p in 0..HINT_PROBES {
            let i = (home + p) & (HINT_SLOTS - 1);
            let h = &self.hints[i];
            if h.attempt != self.attempt {
                return None;
            }
            if h.key == key && h.table == table {
                return Some(i);
            }
        }
        None
    }

    /// Empties the hint table: a new attempt number (slots are cleared only when it wraps).
    #[inline]
    fn forget_hints(&mut self) {
        self.attempt = self.attempt.wrapping_add(1);
        if self.attempt == 0 {
            self.hints.fill(Hint::default());
            self.attempt = 1;
        }
    }

    /// Ends a range scan: gives the scan buffer back and, when the scan succeeded and histories
    /// are recorded, reports the predicate read of `[lo, last]` (`last`: the scan's upper bound,
    /// or the key where its limit or its caller stopped it).
    #[inline]
    pub fn end_scan(&mut self, buf: ScanBuf, ok: bool, table: TableId, lo: u64, last: u64) {
        self.scan_buf = buf;
        if let (true, Some(h)) = (ok, &mut self.history) {
            h.range(table.0, lo, last);
        }
    }

    /// Drops the hint for `key` (its row was found unlinked).
    #[inline]
    pub fn forget(&mut self, table: TableId, key: u64) {
        if let Some(i) = self.hint(table.0, key) {
            // Still this attempt's slot, so that lookups of keys placed after it probe on.
            self.hints[i].table = FORGOTTEN;
        }
    }

    /// Allocates a slot in `table`, or aborts with `TableFull`.
    #[inline]
    pub fn alloc(&mut self, table: TableId) -> Result<RowId, Abort> {
        self.storage
            .table(table)
            .rows
            .alloc(&mut self.caches[table.index()])
            .ok_or(Abort::new(AbortReason::TableFull))
    }

    /// Prefetches several keys, each for the columns its coming operation uses: first every
    /// hash bucket, then each record (see [`WorkerCtx::prefetch_cols`]), so that the index misses
    /// overlap as well as the record misses.
    #[inline]
    pub fn prefetch_many(&mut self, keys: &[(TableId, u64, Columns)]) {
        for &(table, key, _) in keys {
            if let Some(crate::storage::index::Index::Hash(h)) =
                self.storage.try_table(table).map(|t| &t.index)
            {
                h.prefetch(key);
            }
        }
        for &(table, key, cols) in keys {
            self.prefetch_cols(table, key, cols);
        }
    }

    /// [`WorkerCtx::prefetch_cols`] of the whole row (its first four cache lines).
    #[inline(always)]
    pub fn prefetch(&mut self, table: TableId, key: u64) {
        self.prefetch_cols(table, key, u64::MAX);
    }

    /// Looks `key` up in `table` and prefetches the cache lines of its record's header and of
    /// the columns `cols` (a hint, see `Worker::prefetch`). Inside a transaction attempt the row
    /// id is remembered for [`WorkerCtx::lookup`], so the operation that follows does not search
    /// the index again. Unknown tables and missing keys are ignored.
    #[inline(always)]
    pub fn prefetch_cols(&mut self, table: TableId, key: u64, cols: Columns) {
        let Some(t) = self.storage.try_table(table) else { return };
        if let Some(rid) = t.index.get(key, &self.guard) {
            if self.in_txn {
                self.remember(table.0, key, rid);
            }
            t.rows.get(rid).prefetch(&t.projection, cols);
            if self.snapshot != 0 {
                if let Some(c) = &t.chains {
                    c.prefetch(rid);
                }
            }
        }
    }

    /// Puts a hint in the first of `key`'s probe slots that is free or already holds `key`.
    #[inline]
    fn remember(&mut self, table: u32, key: u64, rid: RowId) {
        let home = hint_slot(table, key);
        for p in 0..HINT_PROBES {
            let i = (home + p) & (HINT_SLOTS - 1);
            let h = &mut self.hints[i];
            if h.attempt != self.attempt || (h.key == key && h.table == table) {
                *h = Hint { attempt: self.attempt, table, key, rid: rid.0 };
                return;
            }
        }
    }

    /// Retires a committed delete (or an aborted insert) of `key` at row `rid`.
    #[inline]
    pub fn retire(&mut self, table: TableId, key: u64, rid: RowId) {
        let e = self.storage.epochs().global();
        self.reclaimer.retire(table, key, rid, e);
    }
}

impl<R: RecordHeader> Drop for WorkerCtx<'_, R> {
    fn drop(&mut self) {
        if let (Some(h), Some(sink)) = (&mut self.history, self.storage.history()) {
            h.end();
            sink.deliver(&mut h.take());
        }
        self.storage.leave(&mut self.reclaimer, &mut self.caches);
        self.storage.epochs().unregister(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::IndexKind;
    use crate::storage::TableSpec;
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    /// A header these tests never read: the hint table only deals in row ids.
    struct Hdr {
        _word: AtomicU64,
    }
    // SAFETY: a single atomic: zero is valid, no Drop, align 8.
    unsafe impl RecordHeader for Hdr {}

    /// Two tables whose key `k` maps to row `k + 1000 * table` (so a hint of the wrong table
    /// or key shows up as a wrong row id).
    fn storage() -> Storage<Hdr> {
        let specs: Vec<TableSpec> = ["a", "b"]
            .iter()
            .map(|n| TableSpec::new(*n, 8, 4096).with_index(IndexKind::Hash))
            .collect();
        let s = Storage::new(&specs, 2, Duration::from_millis(10)).unwrap();
        for t in s.tables() {
            // Slots for every row id the keys map to (prefetches touch the rows).
            let mut cache = SlotCache::default();
            while t.rows.alloc(&mut cache).is_some_and(|r| r.0 < 1500) {}
            for k in 0..500u64 {
                let rid = RowId(k + 1000 * u64::from(t.id.0));
                t.index.insert_if_absent(k, rid, &pin()).unwrap();
            }
        }
        s
    }

    /// Between transactions the worker holds no epoch; inside `pinned` it holds the current
    /// one, so nothing retired from now on is freed until `f` returns.
    #[test]
    fn pinned_publishes_the_epoch_while_it_runs() {
        let s = storage();
        let mut ctx = WorkerCtx::new(&s, None).unwrap();
        let epochs = s.epochs();
        let idle = epochs.min_active();
        let inside = ctx.pinned(|| epochs.min_active());
        assert!(inside <= epochs.global() && inside < idle, "{inside} {idle}");
        assert_eq!(epochs.min_active(), idle, "left again");
    }

    #[test]
    fn hints_answer_for_their_own_key_and_attempt_only() {
        let s = storage();
        let (a, b) = (&s.tables()[0], &s.tables()[1]);
        let mut ctx = WorkerCtx::new(&s, None).unwrap();
        ctx.enter(|_, _, _, _| Unlink::Gone);
        // More keys than the table has slots, in both tables: some hints are dropped, and a
        // lookup must then fall back to the index, never answer with another key's row.
        for k in 0..100 {
            ctx.prefetch(a.id, k);
            ctx.prefetch(b.id, k);
        }
        // Hints outlive index changes within the attempt: remove two keys from the index.
        assert!(a.index.remove_if(7, RowId(7), &ctx.guard));
        assert!(a.index.remove_if(8, RowId(8), &ctx.guard));
        let hinted = |ctx: &WorkerCtx<'_, Hdr>, k| ctx.hint(0, k).is_some();
        assert!(hinted(&ctx, 7) || hinted(&ctx, 8), "at least one of two early keys is hinted");
        for k in 0..100u64 {
            let expect_a =
                if (k == 7 || k == 8) && !hinted(&ctx, k) { None } else { Some(RowId(k)) };
            assert_eq!(ctx.lookup(a, k), expect_a, "table a key {k}");
            assert_eq!(ctx.lookup(b, k), Some(RowId(k + 1000)), "table b key {k}");
        }
        ctx.forget(a.id, 7);
        ctx.forget(a.id, 8);
        assert_eq!((ctx.lookup(a, 7), ctx.lookup(a, 8)), (None, None), "forgotten: index only");
        // Keys probed past a forgotten slot are still found.
        for k in 0..100u64 {
            if k != 7 && k != 8 {
                assert_eq!(ctx.lookup(a, k), Some(RowId(k)));
            }
        }
        ctx.exit();
        a.index.insert_if_absent(9, RowId(0), &ctx.guard).unwrap_err();
        assert!(a.index.remove_if(9, RowId(9), &ctx.guard));
        ctx.enter(|_, _, _, _| Unlink::Gone);
        assert_eq!(ctx.lookup(a, 9), None, "a new attempt starts with no hints");
        ctx.exit();
    }

    #[test]
    fn attempt_numbers_wrap_without_reviving_old_hints() {
        let s = storage();
        let a = &s.tables()[0];
        let mut ctx = WorkerCtx::new(&s, None).unwrap();
        ctx.enter(|_, _, _, _| Unlink::Gone);
        let stale = ctx.attempt;
        ctx.prefetch(a.id, 3);
        assert!(ctx.hint(0, 3).is_some());
        ctx.exit();
        assert!(a.index.remove_if(3, RowId(3), &ctx.guard));
        // Run the attempt counter round until the next attempt has the stale hint's number.
        ctx.attempt = u32::MAX - 1;
        ctx.enter(|_, _, _, _| Unlink::Gone);
        ctx.exit();
        ctx.enter(|_, _, _, _| Unlink::Gone);
        assert_eq!(ctx.attempt, stale);
        assert_eq!(ctx.lookup(a, 3), None, "the wrap cleared the table");
        ctx.exit();
    }
}
