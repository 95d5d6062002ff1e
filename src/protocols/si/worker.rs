//! The `si` worker: snapshot reads, pending versions installed at write time, stamped at
//! commit.

use super::record::SiRecord;
use crate::engine::procedure::ALL_COLUMNS;
use crate::engine::Worker;
use crate::error::{Abort, AbortReason};
use crate::protocols::common::mv::{Install, MvCtx, MvShared, TOMBSTONE};
use crate::protocols::common::scan::{self, ScanSteps};
use crate::protocols::common::{apply_update, check_len, table, Scratch};
use crate::storage::context::WorkerCtx;
use crate::storage::phantom::Batch;
use crate::storage::projection::Columns;
use crate::storage::version::Version;
use crate::storage::{RowId, Table, TableId};
use std::ops::ControlFlow;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// One write of the running transaction: its pending version, at the head of the row's chain.
#[derive(Clone, Copy)]
struct Write {
    table: TableId,
    key: u64,
    rid: RowId,
    version: NonNull<Version<()>>,
    /// The stamp of the version it was installed over (0: none; the history's `UNBORN`).
    prev: u64,
    /// The columns written (what an update logs); every column for a row this transaction
    /// created or revived.
    cols: Columns,
    /// It made the key present where it was not: retired again if the transaction aborts.
    created: bool,
}

/// An `si` worker.
pub struct SiWorker<'db> {
    ctx: WorkerCtx<'db, SiRecord>,
    mv: MvCtx<'db, ()>,
    writes: Vec<Write>,
    scratch: Scratch,
    active: bool,
}

#[inline(always)]
fn is_tombstone(v: &Version<()>) -> bool {
    v.flags.load(Ordering::Relaxed) & TOMBSTONE != 0
}

impl<'db> SiWorker<'db> {
    pub(super) fn new(ctx: WorkerCtx<'db, SiRecord>, shared: &'db MvShared<()>) -> Self {
        let mv = MvCtx::new(shared, ctx.slot);
        SiWorker { ctx, mv, writes: Vec::new(), scratch: Scratch::default(), active: false }
    }

    /// The row of `key`, if the index has a linked one. A row the GC unlinked is absent for
    /// this transaction: its tombstone is at or below the watermark, so at or below the
    /// snapshot, and no new row for the key can enter the index before the old entry leaves.
    #[inline]
    fn lookup(&mut self, tbl: &Table<SiRecord>, key: u64) -> Option<RowId> {
        let rid = self.ctx.lookup(tbl, key)?;
        if !tbl.rows.get(rid).header.is_unlinked() {
            return Some(rid);
        }
        self.ctx.forget(tbl.id, key);
        let rid = tbl.index.get(key, &self.ctx.guard)?;
        (!tbl.rows.get(rid).header.is_unlinked()).then_some(rid)
    }

    /// The version of `key` this transaction sees, with its row; reports a read of a committed
    /// version (tombstones too) or of the key's absence to the history.
    #[inline]
    fn see(&mut self, tbl: &'db Table<SiRecord>, key: u64) -> Option<(RowId, &'db Version<()>)> {
        let found = self.lookup(tbl, key).and_then(|rid| {
            let v =
                self.mv.shared.visible(tbl.rows.get(rid).header, self.mv.snapshot, self.mv.own());
            v.map(|v| (rid, v))
        });
        if let Some(h) = &mut self.ctx.history {
            match found {
                None => h.range(tbl.id.0, key, key),
                Some((_, v)) => {
                    let st = v.stamp.load(Ordering::Relaxed);
                    if st != self.mv.own() {
                        h.read(tbl.id.0, key, u128::from(st));
                    }
                }
            }
        }
        found
    }

    /// The write-set entry of this transaction's pending version `v`.
    fn entry_of(&mut self, v: &Version<()>) -> &mut Write {
        let p = v as *const Version<()>;
        self.writes
            .iter_mut()
            .find(|w| std::ptr::eq(w.version.as_ptr(), p))
            .expect("an own pending version has a write-set entry")
    }

    /// Installs the new version `v` of `key` at `rid`, or gives it back and aborts.
    #[inline]
    fn install(
        &mut self,
        tbl: &Table<SiRecord>,
        key: u64,
        rid: RowId,
        v: NonNull<Version<()>>,
        cols: Columns,
        created: bool,
    ) -> Result<(), Abort> {
        match self.mv.install(tbl.rows.get(rid).header, v) {
            Install::Installed(prev) => {
                let table = tbl.id;
                self.writes.push(Write { table, key, rid, version: v, prev, cols, created });
                Ok(())
            }
            // Our own version would have been seen, and a row we saw present or deleted at or
            // below our snapshot is not unlinkable: both are conflicts if they ever happen.
            Install::Conflict | Install::Own(_) | Install::Unlinked => {
                self.mv.unused(tbl.id, v);
                Err(Abort::new(AbortReason::WriteConflict))
            }
        }
    }

    fn finish(&mut self) {
        self.writes.clear();
        self.active = false;
        self.mv.finish();
        self.ctx.exit();
    }
}

impl Worker for SiWorker<'_> {
    fn begin(&mut self) {
        let epochs = self.ctx.storage.epochs();
        let mv = &mut self.mv;
        self.ctx.enter(|tbl, _, rec, _| mv.unlink(tbl.id, rec, epochs));
        self.mv.begin(self.ctx.storage);
        if let Some(h) = &mut self.ctx.history {
            h.read_point_at(self.mv.snapshot);
        }
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
        let Some((_, v)) = self.see(tbl, key) else { return Ok(None) };
        if is_tombstone(v) {
            return Ok(None);
        }
        let buf = self.scratch.get(tbl.spec.row_size);
        self.mv.row(t, v).read_cols_into(buf, &tbl.projection, cols);
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

    /// A blind write: the new version is `value`, copied once (no copy of the old one).
    #[inline]
    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        let Some((rid, v)) = self.see(tbl, key) else { return Ok(false) };
        if is_tombstone(v) {
            return Ok(false);
        }
        if v.stamp.load(Ordering::Relaxed) == self.mv.own() {
            self.mv.row(t, v).write_from(value);
            self.entry_of(v).cols = ALL_COLUMNS;
            return Ok(true);
        }
        let nv = self.mv.alloc(t, 0);
        // SAFETY: our own version, not yet published.
        self.mv.row(t, unsafe { nv.as_ref() }).write_from(value);
        self.install(tbl, key, rid, nv, ALL_COLUMNS, false)?;
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
        let tbl = table(self.ctx.storage, t)?;
        let Some((rid, v)) = self.see(tbl, key) else { return Ok(None) };
        if is_tombstone(v) {
            return Ok(None);
        }
        let (p, len) = (&tbl.projection, tbl.spec.row_size);
        let old = self.mv.row(t, v);
        let buf = self.scratch.get(len);
        old.read_cols_into(buf, p, reads | writes);
        if v.stamp.load(Ordering::Relaxed) == self.mv.own() {
            // Our own pending version: nobody else reads it, so it is written in place.
            let out = apply_update(p, writes, buf, f)?;
            old.write_cols_from(buf, p, writes);
            self.entry_of(v).cols |= writes;
            return Ok(Some(out));
        }
        let out = apply_update(p, writes, buf, f)?;
        let nv = self.mv.alloc(t, 0);
        // SAFETY: our own version, not yet published.
        let new = self.mv.row(t, unsafe { nv.as_ref() });
        new.copy_from(&old);
        new.write_cols_from(buf, p, writes);
        self.install(tbl, key, rid, nv, writes, false)?;
        Ok(Some(out))
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        let nv = self.mv.alloc(t, 0);
        // SAFETY: our own version, not yet published.
        self.mv.row(t, unsafe { nv.as_ref() }).write_from(value);
        let mut spin = crate::protocols::common::SpinWait::default();
        loop {
            // Insert first (one index traversal when the key is new, the common case).
            let fresh = match self.ctx.alloc(t) {
                Ok(r) => r,
                Err(a) => {
                    self.mv.unused(t, nv);
                    return Err(a);
                }
            };
            let frec = tbl.rows.get(fresh).header;
            frec.init(nv);
            let rid = match tbl.index.insert_if_absent(key, fresh, &self.ctx.guard) {
                Ok(()) => {
                    let w = Write {
                        table: t,
                        key,
                        rid: fresh,
                        version: nv,
                        prev: 0,
                        cols: ALL_COLUMNS,
                        created: true,
                    };
                    self.writes.push(w);
                    return Ok(true);
                }
                Err(existing) => {
                    frec.clear();
                    self.ctx.caches[t.index()].release(fresh);
                    existing
                }
            };
            let rec = tbl.rows.get(rid).header;
            if rec.is_unlinked() {
                // The GC is removing the old row's index entry.
                spin.spin();
                continue;
            }
            let seen = self.mv.shared.visible(rec, self.mv.snapshot, self.mv.own());
            let own = seen.is_some_and(|v| v.stamp.load(Ordering::Relaxed) == self.mv.own());
            if let (Some(h), Some(v)) = (&mut self.ctx.history, seen) {
                if !own {
                    h.read(t.0, key, u128::from(v.stamp.load(Ordering::Relaxed)));
                }
            }
            match seen {
                Some(v) if !is_tombstone(v) => {
                    self.mv.unused(t, nv);
                    return Ok(false);
                }
                Some(v) if own => {
                    // We deleted it in this transaction: our version becomes the row again.
                    self.mv.row(t, v).write_from(value);
                    v.flags.store(0, Ordering::Relaxed);
                    let e = self.entry_of(v);
                    (e.cols, e.created) = (ALL_COLUMNS, true);
                    self.mv.unused(t, nv);
                    return Ok(true);
                }
                _ => {
                    self.install(tbl, key, rid, nv, ALL_COLUMNS, true)?;
                    return Ok(true);
                }
            }
        }
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let Some((rid, v)) = self.see(tbl, key) else { return Ok(false) };
        if is_tombstone(v) {
            return Ok(false);
        }
        if v.stamp.load(Ordering::Relaxed) == self.mv.own() {
            v.flags.store(TOMBSTONE, Ordering::Relaxed);
            return Ok(true);
        }
        let nv = self.mv.alloc(t, TOMBSTONE);
        self.install(tbl, key, rid, nv, ALL_COLUMNS, false)?;
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

    /// The index entries and slots first, then (once the slots are on their way) the newest
    /// version each slot points to: three stages, each overlapping its misses.
    #[inline]
    fn prefetch_many(&mut self, keys: &[(TableId, u64, Columns)]) {
        self.ctx.prefetch_many(keys);
        for &(t, key, cols) in keys {
            let Some(tbl) = self.ctx.storage.try_table(t) else { continue };
            if let Some(rid) = self.ctx.lookup(tbl, key) {
                let rec = tbl.rows.get(rid).header;
                self.mv.shared.prefetch_newest(t, rec, &tbl.projection, cols);
            }
        }
    }

    #[inline]
    fn log_epoch(&self) -> u64 {
        self.ctx.log_epoch
    }

    fn commit(&mut self) -> Result<(), Abort> {
        if self.writes.is_empty() {
            // A read-only transaction is serialized at its snapshot.
            if let Some(h) = &mut self.ctx.history {
                h.serial_point_at(self.mv.snapshot);
                h.committed();
            }
            self.finish();
            return Ok(());
        }
        let c = self.mv.committing();
        let storage = self.ctx.storage;
        if let Some(log) = &mut self.ctx.log {
            // Logged before the versions are stamped: whoever reads them reads after they are
            // in the log (the log epochs' dependency rule, see `durability::log`).
            log.begin(c, self.writes.len() as u32);
            for w in &self.writes {
                let tbl = storage.table(w.table);
                // SAFETY: our pending version, alive until we stamp or retract it.
                let v = unsafe { w.version.as_ref() };
                if is_tombstone(v) {
                    log.delete(w.table.0, c, w.key);
                } else {
                    let cols = if w.created { ALL_COLUMNS } else { w.cols };
                    log.put_row(
                        w.table.0,
                        c,
                        w.key,
                        self.mv.row(w.table, v),
                        &tbl.projection,
                        cols,
                    );
                }
            }
            self.ctx.log_epoch = log.end();
        }
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            // SAFETY: as above.
            let v = unsafe { w.version.as_ref() };
            let present = !is_tombstone(v);
            // Release: the version's payload before its stamp (pairs with `visible`'s Acquire).
            v.stamp.store(c, Ordering::Release);
            if let Some(h) = &mut self.ctx.history {
                h.write(w.table.0, w.key, u128::from(c), u128::from(w.prev), present);
            }
            self.mv.written(w.table, w.rid, c);
            if !present {
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
        if let Some(h) = &mut self.ctx.history {
            h.serial_point_at(c);
            h.committed();
        }
        self.finish();
        self.ctx.commit_returning();
        Ok(())
    }

    fn abort(&mut self) {
        if !self.active {
            return;
        }
        let storage = self.ctx.storage;
        for i in (0..self.writes.len()).rev() {
            let w = self.writes[i];
            let rec = storage.table(w.table).rows.get(w.rid).header;
            self.mv.retract(w.table, rec, w.version, storage.epochs());
            if w.created {
                // The key is absent again: the GC unlinks the row once nobody can see it.
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
        self.finish();
    }
}

impl<'db> ScanSteps<'db, SiRecord> for SiWorker<'db> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, SiRecord> {
        &mut self.ctx
    }

    /// Snapshot isolation reads its snapshot: nothing to protect.
    #[inline(always)]
    fn cover(&mut self, _: &'db Table<SiRecord>, _: TableId, _: &Batch) -> Result<(), Abort> {
        Ok(())
    }

    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<SiRecord>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        let rec = tbl.rows.get(rid).header;
        if rec.is_unlinked() {
            return Ok(None);
        }
        let own = self.mv.own();
        let Some(v) = self.mv.shared.visible(rec, self.mv.snapshot, own) else { return Ok(None) };
        let st = v.stamp.load(Ordering::Relaxed);
        if let (Some(h), false) = (&mut self.ctx.history, st == own) {
            h.read(t.0, key, u128::from(st));
        }
        if is_tombstone(v) {
            return Ok(None);
        }
        let data = self.scratch.get(tbl.spec.row_size);
        self.mv.row(t, v).read_into(data);
        Ok(Some(data))
    }
}
