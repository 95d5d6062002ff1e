//! The 2PL worker: lock, act in place, log before-images; release everything at the end.

use super::record::{older, TsClock, TwoPlRecord, WRITER};
use super::LockPolicy;
use crate::engine::context::WorkerCtx;
use crate::engine::procedure::ALL_COLUMNS;
use crate::engine::Worker;
use crate::error::{Abort, AbortReason};
use crate::protocols::common::scan::ScanSteps;
use crate::protocols::common::{check_len, table, Arena, Scratch};
use crate::protocols::inplace::state::{ABSENT, PRESENT, UNLINKED};
use crate::protocols::inplace::{
    commit_in_place, insert_existing, read_in_place, returning_in_place, roll_back,
    update_in_place, Undo, UndoKind,
};
use crate::storage::phantom::Batch;
use crate::storage::projection::Columns;
use crate::storage::{RowId, Table, TableId};
use crate::util::SpinWait;
use rustc_hash::FxBuildHasher;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

#[derive(Clone, Copy, Debug)]
struct Held {
    table: TableId,
    rid: RowId,
    exclusive: bool,
}

#[derive(Clone, Copy, Debug)]
struct BucketHold {
    table: TableId,
    slot: u32,
    insert: bool,
}

/// A 2PL worker with lock policy `L`.
pub struct TwoPlWorker<'db, L: LockPolicy> {
    ctx: WorkerCtx<'db, TwoPlRecord>,
    clock: TsClock,
    /// The running transaction's wait-die timestamp, kept across its retries.
    ts: u64,
    /// The last attempt was aborted: the next `begin` retries it and keeps `ts`.
    retrying: bool,
    locks: Vec<Held>,
    /// `(table, row) -> index in locks`, so re-entrant acquisition is O(1) even for scans that
    /// lock hundreds of rows (cleared per transaction; keeps its capacity).
    held: HashMap<(u32, u64), usize, FxBuildHasher>,
    buckets: Vec<BucketHold>,
    undo: Vec<Undo>,
    arena: Arena,
    scratch: Scratch,
    deleted: Vec<(TableId, u64, RowId)>,
    active: bool,
    _policy: PhantomData<L>,
}

impl<'db, L: LockPolicy> TwoPlWorker<'db, L> {
    pub(super) fn new(ctx: WorkerCtx<'db, TwoPlRecord>) -> Self {
        TwoPlWorker {
            clock: TsClock::new(ctx.storage.origin(), ctx.slot),
            ctx,
            ts: 0,
            retrying: false,
            locks: Vec::new(),
            held: HashMap::default(),
            buckets: Vec::new(),
            undo: Vec::new(),
            arena: Arena::default(),
            scratch: Scratch::default(),
            deleted: Vec::new(),
            active: false,
            _policy: PhantomData,
        }
    }

    /// Locks `rid` shared or exclusive, per the policy. Re-entrant; upgrades a lone shared lock.
    #[inline]
    fn lock(&mut self, tbl: &Table<TwoPlRecord>, rid: RowId, exclusive: bool) -> Result<(), Abort> {
        let rec = tbl.rows.get(rid).header;
        if let Some(&i) = self.held.get(&(tbl.id.0, rid.0)) {
            if self.locks[i].exclusive || !exclusive {
                return Ok(());
            }
            let mut spin = SpinWait::default();
            loop {
                match rec.try_upgrade(self.ts) {
                    Ok(()) => {
                        self.locks[i].exclusive = true;
                        return Ok(());
                    }
                    // Wait-die: the oldest reader waits for the younger ones to leave; any
                    // other upgrader dies, so waits still only go from older to younger.
                    Err(oldest) if L::WAIT && oldest == self.ts => spin.spin(),
                    Err(_) => return Err(Abort::new(L::REASON)),
                }
            }
        }
        let mut spin = SpinWait::default();
        loop {
            let r = if exclusive { rec.try_write(self.ts) } else { rec.try_read(self.ts) };
            match r {
                Ok(()) => {
                    self.held.insert((tbl.id.0, rid.0), self.locks.len());
                    self.locks.push(Held { table: tbl.id, rid, exclusive });
                    return Ok(());
                }
                // Wait-die: wait only for a younger holder.
                Err(holder) if L::WAIT && older(self.ts, holder) => spin.spin(),
                Err(_) => return Err(Abort::new(L::REASON)),
            }
        }
    }

    /// Takes a scan hold on `key`'s bucket (absent-key reads).
    #[inline]
    fn hold_key_scan(&mut self, tbl: &Table<TwoPlRecord>, key: u64) -> Result<(), Abort> {
        self.hold_scan(tbl, tbl.buckets.slot_of(key))
    }

    fn hold_scan(&mut self, tbl: &Table<TwoPlRecord>, slot: usize) -> Result<(), Abort> {
        let mut own_inserts = 0;
        for b in &self.buckets {
            if b.table == tbl.id && b.slot as usize == slot {
                if !b.insert {
                    return Ok(());
                }
                own_inserts += 1;
            }
        }
        if !tbl.buckets.try_lock_scan(slot, own_inserts) {
            return Err(Abort::new(AbortReason::BucketConflict));
        }
        self.buckets.push(BucketHold { table: tbl.id, slot: slot as u32, insert: false });
        Ok(())
    }

    fn hold_insert(&mut self, tbl: &Table<TwoPlRecord>, key: u64) -> Result<(), Abort> {
        let slot = tbl.buckets.slot_of(key);
        let mut own_scans = 0;
        for b in &self.buckets {
            if b.table == tbl.id && b.slot as usize == slot {
                if b.insert {
                    return Ok(());
                }
                own_scans += 1;
            }
        }
        if !tbl.buckets.try_lock_insert(slot, own_scans) {
            return Err(Abort::new(AbortReason::BucketConflict));
        }
        self.buckets.push(BucketHold { table: tbl.id, slot: slot as u32, insert: true });
        Ok(())
    }

    /// Finds and locks the record of `key`. `None` when the key is absent; the absence is then
    /// protected by a scan hold on its bucket.
    #[inline]
    fn locate(
        &mut self,
        tbl: &Table<TwoPlRecord>,
        key: u64,
        exclusive: bool,
    ) -> Result<Option<RowId>, Abort> {
        loop {
            let rid = match self.ctx.lookup(tbl, key) {
                Some(rid) => rid,
                None => {
                    self.hold_key_scan(tbl, key)?;
                    match tbl.index.get(key, &self.ctx.guard) {
                        Some(rid) => rid,
                        None => {
                            if let Some(h) = &mut self.ctx.history {
                                h.range(tbl.id.0, key, key);
                            }
                            return Ok(None);
                        }
                    }
                }
            };
            self.lock(tbl, rid, exclusive)?;
            match tbl.rows.get(rid).header.state.get() {
                PRESENT => return Ok(Some(rid)),
                // Unlinked before we locked it: no longer the key's index entry, and the key may
                // have been inserted again under another row. Look again.
                UNLINKED => {
                    self.ctx.forget(tbl.id, key);
                    std::hint::spin_loop();
                }
                _ => {
                    // Deleted: while we hold its lock it stays the key's entry (unlinking and
                    // reviving both need the exclusive lock); the bucket hold covers the absence.
                    self.hold_key_scan(tbl, key)?;
                    // The tombstone read (its stamp names the delete).
                    tbl.rows.get(rid).header.state.note_read(&mut self.ctx.history, tbl.id.0, key);
                    return Ok(None);
                }
            }
        }
    }

    fn release(&mut self) {
        let storage = self.ctx.storage;
        for h in &self.locks {
            let rec = storage.table(h.table).rows.get(h.rid).header;
            if h.exclusive {
                rec.unlock_write();
            } else {
                rec.unlock_read();
            }
        }
        for b in &self.buckets {
            let rb = &storage.table(b.table).buckets;
            if b.insert {
                rb.unlock_insert(b.slot as usize);
            } else {
                rb.unlock_scan(b.slot as usize);
            }
        }
        self.locks.clear();
        self.held.clear();
        self.buckets.clear();
        self.undo.clear();
        self.arena.clear();
        self.deleted.clear();
        self.active = false;
        self.ctx.exit();
    }
}

/// A worker dropped with a transaction open (a panic in a procedure, or a caller that neither
/// commits nor aborts) rolls it back: what it holds would otherwise block others for good.
impl<L: LockPolicy> Drop for TwoPlWorker<'_, L> {
    fn drop(&mut self) {
        self.abort();
    }
}

impl<L: LockPolicy> Worker for TwoPlWorker<'_, L> {
    crate::protocols::common::forward!(ctx: scan prefetch prefetch_many log_epoch);

    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.ctx.pinned(f)
    }

    fn begin(&mut self) {
        // A retry (the last attempt was aborted) keeps its age; anything else is a new
        // transaction.
        if !self.retrying {
            self.ts = self.clock.stamp();
        }
        self.retrying = false;
        let logs = self.ctx.log.is_some();
        self.ctx.enter(|_, _, r, safe| TwoPlRecord::unlink(r, logs.then_some(safe)));
        self.active = true;
    }

    #[inline]
    fn read_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let Some(rid) = self.locate(tbl, key, false)? else { return Ok(None) };
        Ok(Some(read_in_place(&mut self.ctx, tbl, rid, key, cols, &mut self.scratch, f)))
    }

    #[inline]
    fn read_for_update<T>(
        &mut self,
        t: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let Some(rid) = self.locate(tbl, key, true)? else { return Ok(None) };
        Ok(Some(read_in_place(&mut self.ctx, tbl, rid, key, ALL_COLUMNS, &mut self.scratch, f)))
    }

    #[inline]
    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        check_len(table(self.ctx.storage, t)?, value)?;
        self.update(t, key, |row| row.copy_from_slice(value)).map(|r| r.is_some())
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
        let tbl = table(self.ctx.storage, t)?;
        let Some(rid) = self.locate(tbl, key, true)? else { return Ok(None) };
        let (scratch, arena, undo) = (&mut self.scratch, &mut self.arena, &mut self.undo);
        update_in_place(&mut self.ctx, tbl, rid, key, reads, writes, scratch, arena, undo, f)
            .map(Some)
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        self.hold_insert(tbl, key)?;
        // Insert first, as Silo does: one index traversal when the key is new (the common case)
        // instead of a lookup and then an insert.
        let rid = self.ctx.alloc(t)?;
        let row = tbl.rows.get(rid);
        // Published already locked by us; the index insert below publishes it (Release).
        row.header.lock.store(WRITER | self.ts, Ordering::Relaxed);
        row.write_from(value);
        row.header.state.init(PRESENT);
        let existing = match tbl.index.insert_if_absent(key, rid, &self.ctx.guard) {
            Ok(()) => {
                self.held.insert((t.0, rid.0), self.locks.len());
                self.locks.push(Held { table: t, rid, exclusive: true });
                let prev = row.header.state.install(&mut self.ctx.history, t.0, key, PRESENT, true);
                self.undo.push(Undo { table: t, rid, key, kind: UndoKind::Insert, prev });
                return Ok(true);
            }
            Err(existing) => existing,
        };
        row.header.state.init(ABSENT);
        row.header.unlock_write();
        self.ctx.caches[t.index()].release(rid);
        self.lock(tbl, existing, true)?;
        let (scratch, arena, undo) = (&mut self.scratch, &mut self.arena, &mut self.undo);
        insert_existing(&mut self.ctx, tbl, existing, key, value, scratch, arena, undo)
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let Some(rid) = self.locate(tbl, key, true)? else { return Ok(false) };
        let state = &tbl.rows.get(rid).header.state;
        state.note_read(&mut self.ctx.history, t.0, key);
        let prev = state.install(&mut self.ctx.history, t.0, key, ABSENT, false);
        self.undo.push(Undo { table: t, rid, key, kind: UndoKind::Delete, prev });
        self.deleted.push((t, key, rid));
        Ok(true)
    }

    fn commit(&mut self) -> Result<(), Abort> {
        // Every lock is still held: this is the serialization point.
        if let Some(h) = &mut self.ctx.history {
            h.serial_point();
            h.committed();
        }
        let wrote = commit_in_place(&mut self.ctx, &self.undo, &self.deleted, true);
        self.release();
        returning_in_place(&mut self.ctx, wrote)
    }

    fn abort(&mut self) {
        if !self.active {
            return;
        }
        self.retrying = true;
        roll_back(&mut self.ctx, &self.undo, &self.arena);
        self.release();
    }
}

impl<'db, L: LockPolicy> ScanSteps<'db, TwoPlRecord> for TwoPlWorker<'db, L> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, TwoPlRecord> {
        &mut self.ctx
    }

    /// Scan holds on the batch's buckets before reading it from the index.
    #[inline(always)]
    fn cover(
        &mut self,
        tbl: &'db Table<TwoPlRecord>,
        _: TableId,
        batch: &Batch,
    ) -> Result<(), Abort> {
        for slot in tbl.buckets.batch_slots(batch) {
            self.hold_scan(tbl, slot)?;
        }
        Ok(())
    }

    /// A read lock, then the row.
    // Inlined into the scan loop: a call per entry cost 10 % of a scan-heavy transaction.
    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<TwoPlRecord>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        self.lock(tbl, rid, false)?;
        let row = tbl.rows.get(rid);
        row.header.state.note_read(&mut self.ctx.history, t.0, key);
        if !row.header.state.present() {
            return Ok(None);
        }
        let data = self.scratch.get(tbl.spec.row_size);
        row.read_into(data);
        Ok(Some(data))
    }
}
