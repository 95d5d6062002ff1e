//! The `nocc` worker: direct reads and writes plus an undo log for user aborts.

use super::record::NoccRecord;
use crate::engine::Worker;
use crate::error::Abort;
use crate::protocols::common::scan::{self, ScanSteps};
use crate::protocols::common::state::{ABSENT, PRESENT, UNLINKED};
use crate::protocols::common::{
    check_len, insert_existing, log_in_place, roll_back, table, update_in_place, Arena, Scratch,
    Undo, UndoKind,
};
use crate::storage::context::WorkerCtx;
use crate::storage::phantom::Batch;
use crate::storage::projection::Columns;
use crate::storage::{RowId, Table, TableId};
use std::ops::ControlFlow;

/// A `nocc` worker.
pub struct NoccWorker<'db> {
    ctx: WorkerCtx<'db, NoccRecord>,
    undo: Vec<Undo>,
    arena: Arena,
    scratch: Scratch,
    deleted: Vec<(TableId, u64, RowId)>,
    active: bool,
}

impl<'db> NoccWorker<'db> {
    pub(super) fn new(ctx: WorkerCtx<'db, NoccRecord>) -> Self {
        NoccWorker {
            ctx,
            undo: Vec::new(),
            arena: Arena::default(),
            scratch: Scratch::default(),
            deleted: Vec::new(),
            active: false,
        }
    }

    #[inline]
    fn find(&mut self, t: TableId, key: u64) -> Result<Option<RowId>, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let mut found = self.ctx.lookup(tbl, key);
        if let Some(rid) = found {
            if tbl.rows.get(rid).header.state.get() == UNLINKED {
                // A prefetched row unlinked since: the key may live in another row now.
                self.ctx.forget(t, key);
                found = tbl.index.get(key, &self.ctx.guard);
            }
        }
        let found = found.filter(|rid| tbl.rows.get(*rid).header.present());
        if let (None, Some(h)) = (found, &mut self.ctx.history) {
            h.range(t.0, key, key);
        }
        Ok(found)
    }

    fn finish(&mut self) {
        self.undo.clear();
        self.arena.clear();
        self.deleted.clear();
        self.active = false;
        self.ctx.exit();
    }
}

/// A worker dropped with a transaction open (a panic in a procedure, or a caller that neither
/// commits nor aborts) rolls it back: what it holds would otherwise block others for good.
impl Drop for NoccWorker<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}

impl Worker for NoccWorker<'_> {
    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.ctx.pinned(f)
    }

    fn begin(&mut self) {
        let logs = self.ctx.log.is_some();
        self.ctx.enter(|_, _, r, safe| NoccRecord::unlink(r, logs.then_some(safe)));
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
        let Some(rid) = self.find(t, key)? else { return Ok(None) };
        let tbl = self.ctx.storage.table(t);
        let row = tbl.rows.get(rid);
        row.header.state.note_read(&mut self.ctx.history, t.0, key);
        let buf = self.scratch.get(tbl.spec.row_size);
        row.read_cols_into(buf, &tbl.projection, cols);
        Ok(Some(f(buf)))
    }

    #[inline]
    fn read_for_update<T>(
        &mut self,
        t: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read(t, key, f)
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
        let Some(rid) = self.find(t, key)? else { return Ok(None) };
        let tbl = self.ctx.storage.table(t);
        let (scratch, arena, undo) = (&mut self.scratch, &mut self.arena, &mut self.undo);
        update_in_place(&mut self.ctx, tbl, rid, key, reads, writes, scratch, arena, undo, f)
            .map(Some)
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        // Insert first, as Silo does: one index traversal when the key is new (the common case)
        // instead of a lookup and then an insert.
        let rid = self.ctx.alloc(t)?;
        let row = tbl.rows.get(rid);
        row.write_from(value);
        row.header.state.init(PRESENT);
        let existing = match tbl.index.insert_if_absent(key, rid, &self.ctx.guard) {
            Ok(()) => {
                let h = &mut self.ctx.history;
                let prev = row.header.state.install(h, t.0, key, PRESENT, true);
                self.undo.push(Undo { table: t, rid, key, kind: UndoKind::Insert, prev });
                tbl.buckets.bump(key);
                return Ok(true);
            }
            Err(existing) => existing,
        };
        row.header.state.init(ABSENT);
        self.ctx.caches[t.index()].release(rid);
        let (scratch, arena, undo) = (&mut self.scratch, &mut self.arena, &mut self.undo);
        let revived =
            insert_existing(&mut self.ctx, tbl, existing, key, value, scratch, arena, undo)?;
        if revived {
            tbl.buckets.bump(key);
        }
        Ok(revived)
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        let Some(rid) = self.find(t, key)? else { return Ok(false) };
        let state = &self.ctx.storage.table(t).rows.get(rid).header.state;
        state.note_read(&mut self.ctx.history, t.0, key);
        let prev = state.install(&mut self.ctx.history, t.0, key, ABSENT, false);
        self.undo.push(Undo { table: t, rid, key, kind: UndoKind::Delete, prev });
        self.deleted.push((t, key, rid));
        Ok(true)
    }

    fn scan(
        &mut self,
        t: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        let storage = self.ctx.storage;
        scan::scan(self, storage, t, lo, hi, limit, f)
    }

    #[inline]
    fn prefetch(&mut self, t: TableId, key: u64) {
        self.ctx.prefetch(t, key);
    }

    #[inline]
    fn prefetch_many(&mut self, keys: &[(TableId, u64, Columns)]) {
        self.ctx.prefetch_many(keys);
    }

    #[inline]
    fn log_epoch(&self) -> u64 {
        self.ctx.log_epoch
    }

    fn commit(&mut self) -> Result<(), Abort> {
        if let Some(h) = &mut self.ctx.history {
            h.committed();
        }
        log_in_place(&mut self.ctx, &self.undo, false);
        for i in 0..self.deleted.len() {
            let (t, key, rid) = self.deleted[i];
            self.ctx.retire(t, key, rid);
        }
        self.finish();
        self.ctx.commit_returning();
        Ok(())
    }

    fn abort(&mut self) {
        if !self.active {
            return;
        }
        roll_back(&mut self.ctx, &self.undo, &self.arena);
        self.finish();
    }
}

impl<'db> ScanSteps<'db, NoccRecord> for NoccWorker<'db> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, NoccRecord> {
        &mut self.ctx
    }

    /// No isolation: nothing to protect.
    #[inline(always)]
    fn cover(&mut self, _: &'db Table<NoccRecord>, _: TableId, _: &Batch) -> Result<(), Abort> {
        Ok(())
    }

    // Inlined into the scan loop: a call per entry cost 10 % of a scan-heavy transaction.
    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<NoccRecord>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        let row = tbl.rows.get(rid);
        row.header.state.note_read(&mut self.ctx.history, t.0, key);
        if !row.header.present() {
            return Ok(None);
        }
        let data = self.scratch.get(tbl.spec.row_size);
        row.read_into(data);
        Ok(Some(data))
    }
}
