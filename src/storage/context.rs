//! Per-thread storage state every protocol's worker embeds: its epoch slot, index guard, slot
//! caches, reclamation queues and scan buffer. One implementation, so that no protocol writes its
//! own epoch or allocation code.

use super::index::{pin, IndexGuard, ScanBuf};
use super::reclaim::{Reclaimer, Unlink};
use super::row_store::RecordHeader;
use super::{RowId, SlotCache, Storage, Table, TableId};
use crate::error::{Abort, AbortReason, Error};
use crate::history::Recorder;
use crate::storage::projection::Columns;

/// Transactions between two reclamation passes when the queues are short.
const COLLECT_EVERY: u32 = 64;
/// Queue length that triggers a reclamation pass at every begin.
const COLLECT_BACKLOG: usize = 4096;
/// Row ids remembered from prefetches per transaction attempt.
const MAX_HINTS: usize = 32;

/// A row id that `prefetch` found for a key in the running attempt.
#[derive(Clone, Copy, Default)]
struct Hint {
    table: u32,
    key: u64,
    rid: u64,
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
    /// Row ids found by `prefetch` in this attempt; see [`WorkerCtx::lookup`].
    hints: [Hint; MAX_HINTS],
    n_hints: usize,
    /// The history recorder, when the database records histories. Protocols report reads,
    /// writes and range reads here; attempts begin and end with `enter` and `exit`.
    pub history: Option<Recorder>,
}

impl<'db, R: RecordHeader> WorkerCtx<'db, R> {
    /// Registers a worker with `storage`.
    pub fn new(storage: &'db Storage<R>) -> Result<Self, Error> {
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
            hints: [Hint::default(); MAX_HINTS],
            n_hints: 0,
            history: storage.history().map(|s| s.recorder()),
        })
    }

    /// Enters a transaction: publishes the epoch and repins the index guard. Runs a reclamation
    /// pass now and then, with `unlink` as the protocol's unlink step.
    #[inline]
    pub fn enter(&mut self, unlink: impl FnMut(&R) -> Unlink) {
        self.guard.repin();
        self.epoch = self.storage.epochs().enter(self.slot);
        self.in_txn = true;
        self.n_hints = 0;
        if let Some(h) = &mut self.history {
            h.begin();
        }
        self.since_collect += 1;
        let due = self.since_collect >= COLLECT_EVERY;
        if due {
            self.since_collect = 0;
            // Rows and slots of dropped workers (one flag load every few dozen transactions).
            self.storage.adopt_orphans(&mut self.reclaimer, &mut self.caches);
        }
        if self.reclaimer.pending() > 0 && (due || self.reclaimer.pending() > COLLECT_BACKLOG) {
            // Collected while this worker's epoch is published: a slot it inspects cannot be
            // freed and reused by another worker's reclaimer meanwhile.
            self.since_collect = 0;
            self.reclaimer.collect(self.storage, &mut self.caches, &self.guard, unlink);
        }
    }

    /// Leaves the transaction.
    #[inline]
    pub fn exit(&mut self) {
        self.in_txn = false;
        self.n_hints = 0;
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
        for h in &self.hints[..self.n_hints] {
            if h.key == key && h.table == table.id.0 {
                return Some(RowId(h.rid));
            }
        }
        table.index.get(key, &self.guard)
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
        let n = self.n_hints;
        if let Some(i) = self.hints[..n].iter().position(|h| h.key == key && h.table == table.0) {
            self.hints[i] = self.hints[n - 1];
            self.n_hints = n - 1;
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
            if self.in_txn && self.n_hints < MAX_HINTS {
                self.hints[self.n_hints] = Hint { table: table.0, key, rid: rid.0 };
                self.n_hints += 1;
            }
            t.rows.get(rid).prefetch(&t.projection, cols);
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
