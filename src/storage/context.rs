//! Per-thread storage state every protocol's worker embeds: its epoch slot, index guard, slot
//! caches, reclamation queues and scan buffer. One implementation, so that no protocol writes its
//! own epoch or allocation code.

use super::index::{pin, IndexGuard, ScanBuf};
use super::reclaim::{Reclaimer, Unlink};
use super::row_store::RecordHeader;
use super::{RowId, SlotCache, Storage, TableId};
use crate::error::{Abort, AbortReason, Error};

/// Transactions between two reclamation passes when the queues are short.
const COLLECT_EVERY: u32 = 64;
/// Queue length that triggers a reclamation pass at every begin.
const COLLECT_BACKLOG: usize = 4096;

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
        })
    }

    /// Enters a transaction: publishes the epoch and repins the index guard. Runs a reclamation
    /// pass now and then, with `unlink` as the protocol's unlink step.
    #[inline]
    pub fn enter(&mut self, unlink: impl FnMut(&R) -> Unlink) {
        self.guard.repin();
        self.epoch = self.storage.epochs().enter(self.slot);
        self.since_collect += 1;
        if self.reclaimer.pending() > 0
            && (self.since_collect >= COLLECT_EVERY || self.reclaimer.pending() > COLLECT_BACKLOG)
        {
            // Collected while this worker's epoch is published: a slot it inspects cannot be
            // freed and reused by another worker's reclaimer meanwhile.
            self.since_collect = 0;
            self.reclaimer.collect(self.storage, &mut self.caches, &self.guard, unlink);
        }
    }

    /// Leaves the transaction.
    #[inline]
    pub fn exit(&mut self) {
        self.storage.epochs().exit(self.slot);
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

    /// Looks `key` up in `table` and prefetches its record (up to four cache lines; a hint, see
    /// `Worker::prefetch`). Unknown tables and missing keys are ignored.
    #[inline]
    pub fn prefetch(&self, table: TableId, key: u64) {
        let Some(t) = self.storage.try_table(table) else { return };
        if let Some(rid) = t.index.get(key, &self.guard) {
            let rec = (t.rows.get(rid).header as *const R).cast::<u8>();
            let lines = (t.rows.slot_size() / 64).min(4);
            for i in 0..lines {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: a prefetch never faults or changes memory; `rec + 64 i` lies inside the
                // record's slot (`i < slot_size / 64`), so the pointer arithmetic stays in bounds.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        rec.add(i * 64).cast(),
                    );
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (rec, i);
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
        self.storage.epochs().unregister(self.slot);
    }
}
