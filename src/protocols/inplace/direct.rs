//! Direct execution: a record of one state word, and a worker whose reads and writes go
//! straight to the rows, with an undo log for aborts.
//!
//! Alone it is `nocc` (nothing excludes conflicts). A locking protocol that excludes every
//! conflict before an operation reaches the rows (`2pl-ordered`) runs its operations through a
//! *locked* worker ([`DirectWorker::locked`]): the same direct reads and writes, with the
//! phantom buckets left to the locking layer (they are its locks, not versions), a
//! serialization point at commit, and updates logged by their changed columns.

use crate::engine::context::WorkerCtx;
use crate::engine::Worker;
use crate::error::Abort;
use crate::protocols::common::scan::ScanSteps;
use crate::protocols::common::{check_len, table, Arena, Scratch};
use crate::protocols::inplace::state::RowState;
use crate::protocols::inplace::state::{ABSENT, PRESENT, UNLINKED};
use crate::protocols::inplace::{
    commit_in_place, insert_existing, read_in_place, returning_in_place, roll_back,
    update_in_place, Undo, UndoKind,
};
use crate::storage::phantom::Batch;
use crate::storage::projection::Columns;
use crate::storage::reclaim::Unlink;
use crate::storage::row_store::RecordHeader;
use crate::storage::{RowId, Table, TableId};

/// One state word.
#[repr(C, align(8))]
pub struct DirectRecord {
    /// Present, absent or unlinked.
    pub state: RowState,
}

// SAFETY: one atomic word; zero (ABSENT) is valid; no Drop; align 8.
unsafe impl RecordHeader for DirectRecord {}

impl crate::protocols::inplace::state::HasState for DirectRecord {
    #[inline]
    fn state(&self) -> &crate::protocols::inplace::state::RowState {
        &self.state
    }
}

impl DirectRecord {
    /// Whether the record is present.
    #[inline]
    pub fn present(&self) -> bool {
        self.state.present()
    }

    /// The GC's unlink step (`safe`: see [`RowState::unlink`]).
    pub fn unlink(&self, safe: Option<u64>) -> Unlink {
        self.state.unlink(safe)
    }
}

/// A direct worker (see the module docs).
pub struct DirectWorker<'db> {
    ctx: WorkerCtx<'db, DirectRecord>,
    undo: Vec<Undo>,
    arena: Arena,
    scratch: Scratch,
    deleted: Vec<(TableId, u64, RowId)>,
    active: bool,
    /// Runs under a locking layer (see the module docs).
    locked: bool,
    /// The last commit wrote (between `commit_held` and `returning`).
    wrote: bool,
}

impl<'db> DirectWorker<'db> {
    /// A worker on its own (`nocc`).
    pub fn new(ctx: WorkerCtx<'db, DirectRecord>) -> Self {
        DirectWorker {
            ctx,
            undo: Vec::new(),
            arena: Arena::default(),
            scratch: Scratch::default(),
            deleted: Vec::new(),
            active: false,
            locked: false,
            wrote: false,
        }
    }

    /// A worker for a locking layer that holds, before each operation, locks excluding every
    /// conflicting transaction, and releases them only after [`DirectWorker::commit_held`] or
    /// [`Worker::abort`]. Inserts leave the phantom buckets alone (the layer uses them as locks).
    pub fn locked(ctx: WorkerCtx<'db, DirectRecord>) -> Self {
        let mut w = Self::new(ctx);
        w.locked = true;
        w
    }

    /// The storage.
    pub fn storage(&self) -> &'db crate::storage::Storage<DirectRecord> {
        self.ctx.storage
    }

    /// Begins a transaction with `unlink(table, key, record, safe)` as the GC's unlink step for
    /// deleted rows ([`DirectRecord::unlink`], which it calls unless the row is busy; `safe` as
    /// there). A locking layer excludes its lock holders from it: a row revived in place under a
    /// lock must not be unlinked meanwhile.
    pub fn begin_with(
        &mut self,
        mut unlink: impl FnMut(TableId, u64, &DirectRecord, Option<u64>) -> Unlink,
    ) {
        let logs = self.ctx.log.is_some();
        self.ctx.enter(|tbl, key, r, safe| unlink(tbl.id, key, r, logs.then_some(safe)));
        self.active = true;
    }

    /// Commits with the caller's locks still held: the serialization point (a locked worker),
    /// the log records, the deleted rows handed to the GC. [`DirectWorker::returning`] follows
    /// once the locks are released.
    pub fn commit_held(&mut self) {
        if let Some(h) = &mut self.ctx.history {
            if self.locked {
                h.serial_point();
            }
            h.committed();
        }
        self.wrote = commit_in_place(&mut self.ctx, &self.undo, &self.deleted, self.locked);
        self.finish();
    }

    /// The end of a commit, after the caller released its locks (waits for durability under
    /// `--sync commit`; see [`returning_in_place`]).
    pub fn returning(&mut self) -> Result<(), Abort> {
        returning_in_place(&mut self.ctx, self.wrote)
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
impl Drop for DirectWorker<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}

impl Worker for DirectWorker<'_> {
    crate::protocols::common::forward!(ctx: scan prefetch prefetch_many log_epoch);

    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.ctx.pinned(f)
    }

    fn begin(&mut self) {
        self.begin_with(|_, _, r, safe| r.unlink(safe));
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
        Ok(Some(read_in_place(&mut self.ctx, tbl, rid, key, cols, &mut self.scratch, f)))
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
                if !self.locked {
                    tbl.buckets.bump(key);
                }
                return Ok(true);
            }
            Err(existing) => existing,
        };
        row.header.state.init(ABSENT);
        self.ctx.caches[t.index()].release(rid);
        let (scratch, arena, undo) = (&mut self.scratch, &mut self.arena, &mut self.undo);
        let revived =
            insert_existing(&mut self.ctx, tbl, existing, key, value, scratch, arena, undo)?;
        if revived && !self.locked {
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

    fn commit(&mut self) -> Result<(), Abort> {
        self.commit_held();
        self.returning()
    }

    fn abort(&mut self) {
        if !self.active {
            return;
        }
        roll_back(&mut self.ctx, &self.undo, &self.arena);
        self.finish();
    }
}

impl<'db> ScanSteps<'db, DirectRecord> for DirectWorker<'db> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, DirectRecord> {
        &mut self.ctx
    }

    /// No isolation: nothing to protect.
    #[inline(always)]
    fn cover(&mut self, _: &'db Table<DirectRecord>, _: TableId, _: &Batch) -> Result<(), Abort> {
        Ok(())
    }

    // Inlined into the scan loop: a call per entry cost 10 % of a scan-heavy transaction.
    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<DirectRecord>,
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
