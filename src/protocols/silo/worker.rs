//! The Silo worker: read phase operations and the commit protocol.

use super::record::{SiloRecord, Tid};
use crate::engine::procedure::ALL_COLUMNS;
use crate::engine::Worker;
use crate::error::{Abort, AbortReason};
use crate::history::Recorder;
use crate::protocols::common::scan::{self, ScanSteps};
use crate::protocols::common::{apply_update, check_len, table, Arena, Scratch, SpinWait};
use crate::storage::context::WorkerCtx;
use crate::storage::phantom::Batch;
use crate::storage::projection::{Columns, Projection};
use crate::storage::{RowId, Table, TableId};
use std::ops::ControlFlow;
use std::sync::atomic::{fence, Ordering};

#[derive(Clone, Copy, Debug)]
struct ReadEntry {
    table: TableId,
    rid: RowId,
    tid: Tid,
    /// Pushed together with a write-set entry for the same row (an update, revive or delete
    /// reads what it replaces): a lock validation finds on the row is our own, and needs no
    /// search of the write set. Other reads of rows we write are found by that search.
    /// Invariant: set only while that write-set entry exists; [`SiloWorker::drop_write`], the one
    /// place an entry leaves the write set, clears it (a stale `mine` would let validation
    /// ignore another transaction's lock on a row we read).
    mine: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteKind {
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

/// A write entry's `off` when it has no buffer in the arena: a delete's, or an insert's, whose
/// row is written straight into its fresh record (locked and absent, so no reader copies it).
const NO_BUFFER: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct WriteEntry {
    table: TableId,
    rid: RowId,
    key: u64,
    kind: WriteKind,
    /// Arena offset of the buffered row, or [`NO_BUFFER`].
    off: u32,
    /// The columns the buffered row holds (an `update_cols` copies only the ones it sees).
    cols: Columns,
    /// The columns this transaction changed (a subset of `cols`): the words they cover are what
    /// commit installs.
    dirty: Columns,
    /// The TID seen when locking at commit.
    locked_tid: Tid,
}

/// A write entry's place in the lock order: (table, row), then its index `i` in the write set
/// (which the sort never reaches: an entry's record is unique in the write set).
#[inline(always)]
fn lock_key(w: &WriteEntry, i: usize) -> u128 {
    u128::from(w.table.0) << 96 | u128::from(w.rid.0) << 32 | i as u128
}

#[derive(Clone, Copy, Debug)]
struct PhantomEntry {
    table: TableId,
    slot: u32,
    version: u64,
}

/// A Silo worker.
pub struct SiloWorker<'db> {
    ctx: WorkerCtx<'db, SiloRecord>,
    reads: Vec<ReadEntry>,
    writes: Vec<WriteEntry>,
    phantoms: Vec<PhantomEntry>,
    arena: Arena,
    scratch: Scratch,
    /// The last TID this worker committed with.
    last_tid: Tid,
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
    /// Abort instead of waiting when a write-set record is locked at commit
    /// ([`super::ValidationLock::NoWait`]).
    nowait: bool,
}

/// Records a read of the version `tid` names (when recording histories).
#[inline]
fn note_read(h: &mut Option<Recorder>, t: TableId, key: u64, rid: RowId, tid: Tid) {
    if let Some(h) = h {
        h.read(t.0, key, tid.stamp(rid));
    }
}

/// Outcome of a stable read.
enum Stable {
    Present(Tid),
    Absent(Tid),
}

impl<'db> SiloWorker<'db> {
    pub(super) fn new(ctx: WorkerCtx<'db, SiloRecord>, nowait: bool) -> Self {
        SiloWorker {
            ctx,
            reads: Vec::new(),
            writes: Vec::new(),
            phantoms: Vec::new(),
            arena: Arena::default(),
            scratch: Scratch::default(),
            last_tid: Tid(0),
            lock_order: Vec::new(),
            locked: 0,
            active: false,
            written: 0,
            nowait,
        }
    }

    /// Reads a consistent copy of the columns `cols` of the record into `buf` (§4.4: wait while
    /// locked, copy, re-check). Absent records are not copied.
    #[inline]
    fn stable_read(
        rec: crate::storage::RowRef<'_, SiloRecord>,
        buf: &mut [u8],
        p: &Projection,
        cols: Columns,
    ) -> Stable {
        let mut spin = SpinWait::default();
        loop {
            let v1 = rec.header.load();
            if v1.is_absent() {
                // Absent records (deleted, uncommitted inserts) are not waited for: their TID goes
                // into the read set and validation catches any change.
                return Stable::Absent(v1.without(Tid::LOCK));
            }
            if v1.is_locked() {
                spin.spin();
                continue;
            }
            rec.read_cols_into(buf, p, cols);
            // Acquire fence: the copy above happens before the re-check below (seqlock read).
            fence(Ordering::Acquire);
            let v2 = Tid(rec.header.tid.load(Ordering::Relaxed));
            if v1 == v2 {
                return Stable::Present(v1);
            }
            spin.spin();
        }
    }

    /// Reads the TID of a record without copying it (blind writes, inserts, deletes).
    #[inline]
    fn stable_tid(rec: &SiloRecord) -> Tid {
        let mut spin = SpinWait::default();
        loop {
            let v = rec.load();
            if v.is_absent() || !v.is_locked() {
                return v.without(Tid::LOCK);
            }
            spin.spin();
        }
    }

    #[inline]
    fn push_write(&mut self, table: TableId, rid: RowId, key: u64, kind: WriteKind, off: u32) {
        self.push_write_cols(table, rid, key, kind, off, ALL_COLUMNS, ALL_COLUMNS);
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn push_write_cols(
        &mut self,
        table: TableId,
        rid: RowId,
        key: u64,
        kind: WriteKind,
        off: u32,
        cols: Columns,
        dirty: Columns,
    ) {
        debug_assert_eq!(dirty & !cols, 0, "a changed column the buffer does not hold");
        self.written |= Self::table_bit(table);
        let locked_tid = Tid(0);
        self.writes.push(WriteEntry { table, rid, key, kind, off, cols, dirty, locked_tid });
    }

    /// The buffered row of write entry `i` (an update, revive or insert), holding at least the
    /// columns `cols`.
    #[inline]
    fn buffered(
        &mut self,
        i: usize,
        tbl: &Table<SiloRecord>,
        cols: Columns,
    ) -> Result<&mut [u8], Abort> {
        let w = self.writes[i];
        if w.off == NO_BUFFER {
            self.buffer_insert(i, tbl);
        } else if !tbl.projection.contains(w.cols, cols) {
            self.widen(i, tbl, cols)?;
        }
        Ok(self.arena.get_mut(self.writes[i].off, tbl.spec.row_size))
    }

    /// Gives insert entry `i`, whose row is in its record, a buffer holding that row (a later
    /// operation of the transaction reads or changes it); commit then installs the buffer.
    #[cold]
    fn buffer_insert(&mut self, i: usize, tbl: &Table<SiloRecord>) {
        let w = self.writes[i];
        debug_assert_eq!(w.kind, WriteKind::Insert);
        let off = self.arena.push_reused(tbl.spec.row_size);
        // The record is locked by this transaction since its insert: no one else writes it.
        tbl.rows.get(w.rid).read_into(self.arena.get_mut(off, tbl.spec.row_size));
        self.writes[i].off = off;
    }

    /// Adds the columns `cols` to write entry `i`, which an `update_cols` made with fewer: copies
    /// the words the buffer lacks from the record, which must still be at the version that
    /// update read (otherwise validation would fail anyway, so the attempt aborts now). Words
    /// already buffered are kept: they may hold this transaction's changes.
    #[cold]
    fn widen(&mut self, i: usize, tbl: &Table<SiloRecord>, cols: Columns) -> Result<(), Abort> {
        let w = self.writes[i];
        let len = tbl.spec.row_size;
        let want = w.cols | cols;
        // Partial entries come only from `update_cols`, which records its read first.
        let read = self.reads.iter().rev().find(|r| r.table == w.table && r.rid == w.rid);
        let Some(&ReadEntry { tid: seen, .. }) = read else {
            return Err(Abort::new(AbortReason::ReadValidation));
        };
        let p = &tbl.projection;
        let fresh = self.scratch.get(len);
        match Self::stable_read(tbl.rows.get(w.rid), fresh, p, want) {
            Stable::Present(tid) if tid == seen => {}
            _ => return Err(Abort::new(AbortReason::ReadValidation)),
        }
        // `fresh` holds every wanted word as of `seen`; put our buffered words over it, then
        // take all of it (the old columns are a subset of the wanted ones).
        let buf = self.arena.get_mut(w.off, len);
        let bytes = |lo: usize, hi: usize| lo * 8..(hi * 8).min(len);
        p.runs(w.cols, |lo, hi| fresh[bytes(lo, hi)].copy_from_slice(&buf[bytes(lo, hi)]));
        p.runs(want, |lo, hi| buf[bytes(lo, hi)].copy_from_slice(&fresh[bytes(lo, hi)]));
        self.writes[i].cols = want;
        Ok(())
    }

    /// Removes write entry `i` (a revive undone by a delete of the same row): the reads pushed
    /// with it stay and are no longer `mine`, so validation checks their rows for foreign locks.
    #[cold]
    fn drop_write(&mut self, i: usize) {
        let w = self.writes.remove(i);
        for r in &mut self.reads {
            if r.table == w.table && r.rid == w.rid {
                r.mine = false;
            }
        }
    }

    #[inline]
    fn table_bit(t: TableId) -> u64 {
        1 << t.0.min(63)
    }

    #[inline]
    fn find_write(&self, t: TableId, rid: RowId) -> Option<usize> {
        if self.written & Self::table_bit(t) == 0 {
            return None;
        }
        self.writes.iter().rposition(|w| w.rid == rid && w.table == t)
    }

    /// Looks `key` up; on a miss, protects the absent key with its phantom bucket (version read
    /// before a second lookup, so an insert racing with the first lookup is not missed).
    ///
    /// Callers that then find the row unlinked call [`Self::relookup`] and start over: an
    /// unlinked row is no longer the key's index entry, so "absent" read from it proves nothing
    /// (the key may have been inserted again under another row), and its TID never changes again,
    /// so validation would not notice.
    #[inline]
    fn lookup(&mut self, tbl: &Table<SiloRecord>, key: u64) -> Option<RowId> {
        if let Some(rid) = self.ctx.lookup(tbl, key) {
            return Some(rid);
        }
        let slot = tbl.buckets.slot_of(key);
        let version = tbl.buckets.version(slot);
        let again = tbl.index.get(key, &self.ctx.guard);
        if again.is_none() {
            self.phantoms.push(PhantomEntry { table: tbl.id, slot: slot as u32, version });
            if let Some(h) = &mut self.ctx.history {
                h.range(tbl.id.0, key, key);
            }
        }
        again
    }

    /// Forgets a prefetched row id found unlinked and lets the GC finish removing the index entry.
    #[cold]
    fn relookup(&mut self, t: TableId, key: u64) {
        self.ctx.forget(t, key);
        std::hint::spin_loop();
    }

    /// Bumps `key`'s bucket after an insert; re-stamps our own phantom entry so that our own
    /// insert does not fail our validation.
    fn bump(&mut self, tbl: &Table<SiloRecord>, key: u64) {
        let (slot, old) = tbl.buckets.bump(key);
        for p in &mut self.phantoms {
            if p.table == tbl.id && p.slot as usize == slot && p.version == old {
                p.version = old + 1;
            }
        }
    }

    fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.phantoms.clear();
        self.arena.clear();
        self.lock_order.clear();
        self.locked = 0;
        self.active = false;
        self.written = 0;
        self.ctx.exit();
    }

    /// Phase 1: lock the write set in (table, row) order. Our inserts were locked when they
    /// were made (a record nobody else could hold) and are not locked again.
    fn lock_write_set(&mut self) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        let mut order = std::mem::take(&mut self.lock_order);
        order.clear();
        for (i, w) in self.writes.iter_mut().enumerate() {
            if matches!(w.kind, WriteKind::Insert | WriteKind::InsertDeleted) {
                let rec = storage.table(w.table).rows.get(w.rid).header;
                w.locked_tid = rec.load().without(Tid::LOCK);
            } else {
                order.push(lock_key(w, i));
            }
        }
        order.sort_unstable();
        self.lock_order = order;
        for n in 0..self.lock_order.len() {
            let i = self.lock_order[n] as u32 as usize;
            let w = self.writes[i];
            let rec = storage.table(w.table).rows.get(w.rid).header;
            let mut spin = SpinWait::default();
            let cur = loop {
                let cur = rec.load();
                if !cur.is_locked() && rec.try_lock(cur) {
                    break cur;
                }
                if self.nowait {
                    // The first `n` are locked; commit's rollback releases them.
                    return Err(Abort::new(AbortReason::LockConflict));
                }
                spin.spin();
            };
            self.locked = n + 1;
            self.writes[i].locked_tid = cur;
            let ok = match w.kind {
                // The record must still be present (a concurrent delete committed otherwise).
                WriteKind::Update | WriteKind::Delete => !cur.is_absent(),
                // Still absent and not unlinked.
                WriteKind::Revive => cur.is_absent() && !cur.is_unlinked(),
                WriteKind::Insert | WriteKind::InsertDeleted => true,
            };
            if !ok {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
        }
        // Release fence: payload stores of the write phase cannot move above the lock acquisition
        // (pairs with the Acquire fence in `stable_read`).
        fence(Ordering::Release);
        Ok(())
    }

    /// Phase 3: validate the read set and the phantom set.
    fn validate(&self) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        for r in &self.reads {
            let cur = storage.table(r.table).rows.get(r.rid).header.load();
            if cur.without(Tid::LOCK) != r.tid {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
            if cur.is_locked() && !r.mine && self.find_write(r.table, r.rid).is_none() {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
        }
        for p in &self.phantoms {
            if storage.table(p.table).buckets.version(p.slot as usize) != p.version {
                return Err(Abort::new(AbortReason::PhantomValidation));
            }
        }
        Ok(())
    }

    /// Releases commit-time locks and undoes inserts after a failed commit or an abort.
    fn rollback(&mut self) {
        let storage = self.ctx.storage;
        // Commit-time locks, restored to the TID they had.
        for &k in &self.lock_order[..self.locked] {
            let w = &self.writes[k as u32 as usize];
            storage.table(w.table).rows.get(w.rid).header.store(w.locked_tid);
        }
        // Our inserts stay in the index as absent records: unlock them and let the GC unlink them.
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            if matches!(w.kind, WriteKind::Insert | WriteKind::InsertDeleted) {
                let rec = storage.table(w.table).rows.get(w.rid).header;
                rec.store(rec.load().without(Tid::LOCK));
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
        self.clear();
    }
}

impl Worker for SiloWorker<'_> {
    fn begin(&mut self) {
        self.ctx.enter(SiloRecord::unlink);
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
        let len = tbl.spec.row_size;
        loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(None) };
            if let Some(i) = self.find_write(t, rid) {
                return Ok(match self.writes[i].kind {
                    WriteKind::Delete | WriteKind::InsertDeleted => None,
                    _ => Some(f(self.buffered(i, tbl, cols)?)),
                });
            }
            let buf = self.scratch.get(len);
            match Self::stable_read(tbl.rows.get(rid), buf, &tbl.projection, cols) {
                Stable::Present(tid) => {
                    self.reads.push(ReadEntry { table: t, rid, tid, mine: false });
                    note_read(&mut self.ctx.history, t, key, rid, tid);
                    return Ok(Some(f(buf)));
                }
                Stable::Absent(tid) if tid.is_unlinked() => self.relookup(t, key),
                Stable::Absent(tid) => {
                    self.reads.push(ReadEntry { table: t, rid, tid, mine: false });
                    note_read(&mut self.ctx.history, t, key, rid, tid);
                    return Ok(None);
                }
            }
        }
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
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        let (rid, tid) = loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(false) };
            if let Some(i) = self.find_write(t, rid) {
                let w = self.writes[i];
                if matches!(w.kind, WriteKind::Delete | WriteKind::InsertDeleted) {
                    return Ok(false);
                }
                if w.off == NO_BUFFER {
                    // Our own insert: its record holds the row.
                    tbl.rows.get(rid).write_from(value);
                } else {
                    self.arena.get_mut(w.off, value.len()).copy_from_slice(value);
                }
                self.writes[i].cols = ALL_COLUMNS;
                self.writes[i].dirty = ALL_COLUMNS;
                return Ok(true);
            }
            let tid = Self::stable_tid(tbl.rows.get(rid).header);
            if !tid.is_unlinked() {
                break (rid, tid);
            }
            self.relookup(t, key);
        };
        if tid.is_absent() {
            self.reads.push(ReadEntry { table: t, rid, tid, mine: false });
            note_read(&mut self.ctx.history, t, key, rid, tid);
            return Ok(false);
        }
        // A blind write reads nothing: presence is re-checked when the record is locked.
        let off = self.arena.push(value);
        self.push_write(t, rid, key, WriteKind::Update, off);
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
        let (len, p, cols) = (tbl.spec.row_size, &tbl.projection, reads | writes);
        loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(None) };
            if let Some(i) = self.find_write(t, rid) {
                if matches!(self.writes[i].kind, WriteKind::Delete | WriteKind::InsertDeleted) {
                    return Ok(None);
                }
                let out = apply_update(p, writes, self.buffered(i, tbl, cols)?, f)?;
                self.writes[i].dirty |= writes;
                return Ok(Some(out));
            }
            let off = self.arena.push_reused(len);
            let buf = self.arena.get_mut(off, len);
            match Self::stable_read(tbl.rows.get(rid), buf, p, cols) {
                Stable::Present(tid) => {
                    self.reads.push(ReadEntry { table: t, rid, tid, mine: true });
                    note_read(&mut self.ctx.history, t, key, rid, tid);
                    let out = apply_update(p, writes, self.arena.get_mut(off, len), f)?;
                    self.push_write_cols(t, rid, key, WriteKind::Update, off, cols, writes);
                    return Ok(Some(out));
                }
                Stable::Absent(tid) if tid.is_unlinked() => self.relookup(t, key),
                Stable::Absent(tid) => {
                    self.reads.push(ReadEntry { table: t, rid, tid, mine: false });
                    note_read(&mut self.ctx.history, t, key, rid, tid);
                    return Ok(None);
                }
            }
        }
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        loop {
            // §4.5: a new record, locked and absent, goes into the index now. Trying the insert
            // first costs one index traversal when the key is new (the common case), instead of
            // a lookup and then an insert. No phantom entry for the key itself: creating the
            // index entry is atomic (a racing insert of the same key is seen by
            // `insert_if_absent`, a revived record through its TID), and an entry here would
            // make inserts of neighbouring keys abort each other.
            let fresh = self.ctx.alloc(t)?;
            let row = tbl.rows.get(fresh);
            // TID 0: a row no transaction has committed yet (UNBORN in recorded histories).
            row.header.store(Tid(0).with(Tid::ABSENT | Tid::LOCK));
            // The row goes straight into the record (readers copy no absent record, and the
            // index insert below publishes it), so commit installs only the TID.
            row.write_from(value);
            let rid = match tbl.index.insert_if_absent(key, fresh, &self.ctx.guard) {
                Ok(()) => {
                    self.push_write(t, fresh, key, WriteKind::Insert, NO_BUFFER);
                    self.bump(tbl, key);
                    return Ok(true);
                }
                Err(existing) => {
                    self.ctx.caches[t.index()].release(fresh);
                    existing
                }
            };
            if let Some(i) = self.find_write(t, rid) {
                let w = self.writes[i];
                return Ok(match w.kind {
                    WriteKind::Delete => {
                        // A fresh buffer: a delete has none (or a partial one of an update).
                        let off = self.arena.push(value);
                        let e = &mut self.writes[i];
                        (e.kind, e.off, e.cols, e.dirty) =
                            (WriteKind::Update, off, ALL_COLUMNS, ALL_COLUMNS);
                        true
                    }
                    WriteKind::InsertDeleted => {
                        // Still our locked record: the row goes into it again.
                        tbl.rows.get(rid).write_from(value);
                        let e = &mut self.writes[i];
                        (e.kind, e.off) = (WriteKind::Insert, NO_BUFFER);
                        true
                    }
                    _ => false,
                });
            }
            let rec = tbl.rows.get(rid).header;
            let cur = rec.load();
            if !cur.is_absent() {
                // Present: the insert fails; its outcome depends on the record staying present.
                let tid = Self::stable_tid(rec);
                if tid.is_absent() {
                    continue;
                }
                self.reads.push(ReadEntry { table: t, rid, tid, mine: false });
                note_read(&mut self.ctx.history, t, key, rid, tid);
                return Ok(false);
            }
            if cur.is_locked() || cur.is_unlinked() {
                // Another transaction is inserting or reviving it, or the GC is removing it.
                return Err(Abort::new(AbortReason::InsertConflict));
            }
            // Revive a deleted record: its TID must not change before we lock it at commit.
            self.reads.push(ReadEntry { table: t, rid, tid: cur, mine: true });
            note_read(&mut self.ctx.history, t, key, rid, cur);
            let off = self.arena.push(value);
            self.push_write(t, rid, key, WriteKind::Revive, off);
            self.bump(tbl, key);
            return Ok(true);
        }
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let (rid, tid) = loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(false) };
            if self.find_write(t, rid).is_some() {
                break (rid, Tid(0));
            }
            let tid = Self::stable_tid(tbl.rows.get(rid).header);
            if !tid.is_unlinked() {
                break (rid, tid);
            }
            self.relookup(t, key);
        };
        if let Some(i) = self.find_write(t, rid) {
            let w = &mut self.writes[i];
            return Ok(match w.kind {
                WriteKind::Update => {
                    w.kind = WriteKind::Delete;
                    true
                }
                WriteKind::Revive => {
                    // Back to absent: nothing to write, but the read-set entry keeps the check
                    // that the record stays absent and unlocked by others.
                    self.drop_write(i);
                    true
                }
                WriteKind::Insert => {
                    w.kind = WriteKind::InsertDeleted;
                    true
                }
                WriteKind::Delete | WriteKind::InsertDeleted => false,
            });
        }
        // `mine` only when the delete goes into the write set.
        self.reads.push(ReadEntry { table: t, rid, tid, mine: !tid.is_absent() });
        note_read(&mut self.ctx.history, t, key, rid, tid);
        if tid.is_absent() {
            return Ok(false);
        }
        self.push_write(t, rid, key, WriteKind::Delete, NO_BUFFER);
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

    fn reads_still_valid(&mut self) -> bool {
        self.validate().is_ok()
    }

    fn commit(&mut self) -> Result<(), Abort> {
        if self.writes.is_empty() {
            // Read-only: no locks to order before validation (so no fence), no TID to choose;
            // the transaction serializes at its validation.
            if let Some(h) = &mut self.ctx.history {
                h.serial_point();
            }
            self.ctx.commit_pause();
            let r = self.validate();
            if let (Ok(()), Some(h)) = (&r, &mut self.ctx.history) {
                h.committed();
            }
            self.clear();
            return r;
        }
        // Phase 1.
        if let Err(a) = self.lock_write_set() {
            self.rollback();
            return Err(a);
        }
        self.ctx.commit_pause();
        // Phase 2: the serialization point.
        fence(Ordering::SeqCst);
        let epoch = self.ctx.storage.epochs().global();
        if let Some(h) = &mut self.ctx.history {
            h.serial_point();
        }
        // Phase 3.
        if let Err(a) = self.validate() {
            self.rollback();
            return Err(a);
        }
        if let Some(h) = &mut self.ctx.history {
            h.committed();
        }
        self.ctx.commit_pause();
        // Phase 4: the commit TID.
        let mut max = self.last_tid.version();
        for r in &self.reads {
            max = max.max(r.tid.version());
        }
        for w in &self.writes {
            max = max.max(w.locked_tid.version());
        }
        let mut tid = Tid(max.0 + Tid::SEQ_ONE);
        if tid.epoch() < epoch {
            tid = Tid::new(epoch, 0);
        }
        self.last_tid = tid;
        // Phase 5: install and unlock.
        let storage = self.ctx.storage;
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            let tbl = storage.table(w.table);
            let row = tbl.rows.get(w.rid);
            match w.kind {
                // An insert without a buffer wrote its row into the record already.
                WriteKind::Insert if w.off == NO_BUFFER => row.header.store(tid.with(Tid::LATEST)),
                WriteKind::Update | WriteKind::Revive | WriteKind::Insert => {
                    row.write_cols_from(
                        self.arena.get(w.off, tbl.spec.row_size),
                        &tbl.projection,
                        w.dirty,
                    );
                    row.header.store(tid.with(Tid::LATEST));
                }
                WriteKind::Delete | WriteKind::InsertDeleted => {
                    row.header.store(tid.with(Tid::LATEST | Tid::ABSENT));
                    self.ctx.retire(w.table, w.key, w.rid);
                }
            }
            if let Some(h) = &mut self.ctx.history {
                let present =
                    matches!(w.kind, WriteKind::Update | WriteKind::Revive | WriteKind::Insert);
                h.write(w.table.0, w.key, tid.stamp(w.rid), w.locked_tid.stamp(w.rid), present);
            }
        }
        self.clear();
        Ok(())
    }

    fn abort(&mut self) {
        if self.active {
            self.rollback();
        }
    }
}

impl<'db> ScanSteps<'db, SiloRecord> for SiloWorker<'db> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, SiloRecord> {
        &mut self.ctx
    }

    /// The batch's bucket versions, validated at commit (see storage::phantom).
    #[inline(always)]
    fn cover(
        &mut self,
        tbl: &'db Table<SiloRecord>,
        t: TableId,
        batch: &Batch,
    ) -> Result<(), Abort> {
        for slot in tbl.buckets.batch_slots(batch) {
            let version = tbl.buckets.version(slot);
            self.phantoms.push(PhantomEntry { table: t, slot: slot as u32, version });
        }
        Ok(())
    }

    /// The transaction's own write if it has one, else a stable read recorded for validation.
    // Inlined into the scan loop: a call per entry cost 10 % of a scan-heavy transaction.
    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<SiloRecord>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        if let Some(i) = self.find_write(t, rid) {
            if matches!(self.writes[i].kind, WriteKind::Delete | WriteKind::InsertDeleted) {
                return Ok(None);
            }
            return self.buffered(i, tbl, ALL_COLUMNS).map(|row| Some(&*row));
        }
        let data = self.scratch.get(tbl.spec.row_size);
        match Self::stable_read(tbl.rows.get(rid), data, &tbl.projection, ALL_COLUMNS) {
            Stable::Present(tid) => {
                self.reads.push(ReadEntry { table: t, rid, tid, mine: false });
                note_read(&mut self.ctx.history, t, key, rid, tid);
                Ok(Some(data))
            }
            Stable::Absent(tid) => {
                self.reads.push(ReadEntry { table: t, rid, tid, mine: false });
                note_read(&mut self.ctx.history, t, key, rid, tid);
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Database, DbOptions};
    use crate::protocols::silo::Silo;
    use crate::storage::TableSpec;

    const T: TableId = TableId(0);

    fn row(v: u64) -> [u8; 8] {
        v.to_le_bytes()
    }

    /// A database whose key `K` has a deleted (absent, still indexed) record and whose key `X`
    /// is present.
    fn db_with_deleted_k() -> Database<Silo> {
        let db = Database::<Silo>::with_options(
            &[TableSpec::new("t", 8, 16)],
            DbOptions { max_workers: 4, ..Default::default() },
        )
        .unwrap();
        {
            let mut w = db.worker().unwrap();
            w.begin();
            assert!(w.insert(T, K, &row(1)).unwrap());
            assert!(w.insert(T, X, &row(1)).unwrap());
            w.commit().unwrap();
            w.begin();
            assert!(w.delete(T, K).unwrap());
            w.commit().unwrap();
        }
        db
    }

    const K: u64 = 3;
    const X: u64 = 9;

    /// The review's schedule, with the two commits interleaved phase by phase: T1 = {insert K,
    /// delete K, write X} reads K absent; T2 = {read X, insert K} reads X before T1 writes it.
    /// T2 locks K and validates X; then T1 locks X and validates K, finding T2's lock on it.
    /// Committing both would be a cycle (T1 -rw(K)-> T2 -rw(X)-> T1), so T1 must abort: its
    /// read of K, left behind by the revive it undid, is no longer backed by a lock of its own.
    #[test]
    fn a_revive_undone_by_a_delete_still_validates_against_foreign_locks() {
        let db = db_with_deleted_k();
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert!(t1.insert(T, K, &row(10)).unwrap(), "revives the deleted record");
        assert!(t1.delete(T, K).unwrap(), "and deletes it again");
        assert!(t1.write(T, X, &row(10)).unwrap());
        t2.begin();
        assert_eq!(t2.read(T, X, |r| r[0]).unwrap(), Some(1));
        assert!(t2.insert(T, K, &row(20)).unwrap());
        // T2's commit, up to its validation.
        t2.lock_write_set().unwrap();
        t2.validate().expect("T2 read X before anyone wrote it");
        // T1's commit: K is locked by T2, which installs a present K after T1 read it absent.
        t1.lock_write_set().unwrap();
        assert_eq!(
            t1.validate().map_err(|a| a.reason),
            Err(AbortReason::ReadValidation),
            "T1 ignored T2's lock on a key it read"
        );
        t1.rollback();
        t2.rollback();
    }

    /// With `validation-lock=nowait`, a commit that finds a write-set record locked by another
    /// commit aborts at once (lock-conflict), releasing what it locked, and its retry commits
    /// once the other is done; with the default it would spin until the lock is free.
    #[test]
    fn nowait_validation_aborts_on_a_locked_write_set_record() {
        use crate::engine::ProtocolOptions;
        let options =
            super::super::SiloOptions::from_pairs(&[("validation-lock".into(), "nowait".into())])
                .unwrap();
        let db = Database::<Silo>::builder(&[TableSpec::new("t", 8, 16)])
            .options(DbOptions { max_workers: 4, ..Default::default() })
            .protocol_options(options)
            .build()
            .unwrap();
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert!(t1.insert(T, X, &row(1)).unwrap());
        assert!(t1.insert(T, K, &row(1)).unwrap());
        t1.commit().unwrap();
        t1.begin();
        assert!(t1.write(T, X, &row(10)).unwrap());
        t2.begin();
        assert!(t2.write(T, K, &row(20)).unwrap());
        assert!(t2.write(T, X, &row(20)).unwrap());
        // T1 holds X's lock in its commit; T2 locks K, then finds X locked.
        t1.lock_write_set().unwrap();
        assert_eq!(t2.commit().map_err(|a| a.reason), Err(AbortReason::LockConflict));
        // T2's lock on K was released: T1 finishes, and T2's retry commits.
        t1.validate().unwrap();
        t1.rollback();
        t2.begin();
        assert!(t2.write(T, K, &row(20)).unwrap());
        assert!(t2.write(T, X, &row(20)).unwrap());
        t2.commit().expect("no lock is left behind");
    }

    /// The same shape without the revive: a plain absent read of K validates against the lock.
    #[test]
    fn an_absent_read_validates_against_foreign_locks() {
        let db = db_with_deleted_k();
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert_eq!(t1.read(T, K, |r| r[0]).unwrap(), None);
        assert!(t1.write(T, X, &row(10)).unwrap());
        t2.begin();
        assert!(t2.insert(T, K, &row(20)).unwrap());
        t2.lock_write_set().unwrap();
        t1.lock_write_set().unwrap();
        assert!(t1.validate().is_err());
        t1.rollback();
        t2.rollback();
    }
}
