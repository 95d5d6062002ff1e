//! The read phase: stable (seqlock) and snapshot reads into the read set, buffered writes,
//! inserts and deletes through absent records, the write set's lookups, and the range scans'
//! steps.

use super::*;

/// Records a read of the version `(word, aux)` names in the read set (and, of the columns
/// `cols`, in the history when recording). A free function so that callers can hold a borrow
/// of the scratch buffer.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn push_read<R: OccRecord>(
    reads: &mut Vec<ReadEntry<R::Aux>>,
    h: &mut Option<Recorder>,
    t: TableId,
    key: u64,
    rid: RowId,
    word: u64,
    aux: R::Aux,
    mine: bool,
    cols: Columns,
) {
    reads.push(ReadEntry { table: t, rid, word, aux, mine });
    if let Some(h) = h {
        h.read_cols(t.0, key, R::stamp(word, aux, rid), cols);
    }
}

impl<'db, P: OccProtocol> ScanSteps<'db, P::Record> for OccWorker<'db, P> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, P::Record> {
        &mut self.ctx
    }

    /// The batch's bucket versions, validated at commit (see storage::phantom).
    #[inline(always)]
    fn cover(
        &mut self,
        tbl: &'db Table<P::Record>,
        t: TableId,
        batch: &Batch,
    ) -> Result<(), Abort> {
        if self.ctx.snapshot != 0 || P::untracked(self, t, ALL_COLUMNS) {
            // A snapshot reader validates nothing, nor a scan of untracked columns.
            return Ok(());
        }
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
        tbl: &'db Table<P::Record>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        if self.ctx.snapshot != 0 {
            return Ok(self.entry_at_snapshot(tbl, t, key, rid));
        }
        if let Some(i) = self.find_write(t, rid) {
            if matches!(self.writes[i].kind, WriteKind::Delete | WriteKind::InsertDeleted) {
                return Ok(None);
            }
            return self.buffered(i, tbl, ALL_COLUMNS).map(|row| Some(&*row));
        }
        P::access(self, t, key, rid, tbl.rows.get(rid).header, false)?;
        let len = tbl.spec.row_size;
        let untracked = P::untracked(self, t, ALL_COLUMNS);
        let committed = P::reads_committed(self) || (untracked && self.ctx.history.is_some());
        let data = self.scratch.get(len);
        match Self::stable_read(
            tbl.rows.get(rid),
            data,
            &tbl.projection,
            ALL_COLUMNS,
            committed,
            &mut self.extra_reads,
        ) {
            Stable::Present(word, aux) | Stable::Absent(word, aux) if untracked => {
                if let Some(h) = &mut self.ctx.history {
                    h.read(t.0, key, P::Record::stamp(word, aux, rid));
                }
                Ok((!is_absent(word)).then_some(&*data))
            }
            Stable::Present(word, aux) => {
                let (reads, h) = (&mut self.reads, &mut self.ctx.history);
                push_read::<P::Record>(reads, h, t, key, rid, word, aux, false, ALL_COLUMNS);
                Ok(Some(data))
            }
            Stable::Absent(word, aux) => {
                let (reads, h) = (&mut self.reads, &mut self.ctx.history);
                push_read::<P::Record>(reads, h, t, key, rid, word, aux, false, ALL_COLUMNS);
                Ok(None)
            }
        }
    }
}

impl<'db, P: OccProtocol> OccWorker<'db, P> {
    /// Reads a consistent copy of the columns `cols` of the record into `buf` (Silo §4.4: wait
    /// while locked, copy, re-check). Absent records are not copied. With `committed`, a
    /// version not committed yet is not read: its record's committed image is
    /// ([`OccRecord::committed_image`]; a version that becomes uncommitted between the two loads
    /// is a new one, so the re-check catches it).
    #[inline]
    pub(super) fn stable_read(
        rec: RowRef<'_, P::Record>,
        buf: &mut [u8],
        p: &Projection,
        cols: Columns,
        committed: bool,
        extra: &mut u32,
    ) -> Stable<<P::Record as OccRecord>::Aux> {
        let mut spin = SpinWait::default();
        loop {
            let v1 = rec.header.load();
            if committed {
                if let Some((word, aux)) = P::Record::committed_image(rec, v1, buf) {
                    return if is_absent(word) {
                        Stable::Absent(word, aux)
                    } else {
                        Stable::Present(word, aux)
                    };
                }
            }
            if is_absent(v1) {
                // Absent records (deleted, uncommitted inserts) are not waited for: their word
                // goes into the read set and validation catches any change.
                let (word, aux) = Self::stable_word(rec.header, extra);
                if is_absent(word) {
                    return Stable::Absent(word, aux);
                }
                continue;
            }
            if is_locked(v1) {
                *extra += 1;
                spin.spin();
                continue;
            }
            let aux = rec.header.aux();
            rec.read_cols_into(buf, p, cols);
            // Acquire fence: the copy above happens before the re-check below (seqlock read;
            // pairs with the Release fence after locking in `lock_write_set`).
            fence(Ordering::Acquire);
            let v2 = rec.header.word().load(Ordering::Relaxed);
            if P::Record::same_version(v1, v2) {
                return Stable::Present(v2, aux);
            }
            // An extra read: a concurrent update interrupted the copy.
            *extra += 1;
            spin.spin();
        }
    }

    /// Reads the columns `cols` of row `rid` of `tbl` as of snapshot boundary `b` into `buf`
    /// (see `storage::snapshot`): the value in place when it committed below `b`
    /// ([`OccRecord::at_boundary`]), else the newest older value below `b`, else absent (never
    /// [`InPlace::Replaced`]).
    #[inline]
    pub(super) fn snapshot_read(
        tbl: &Table<P::Record>,
        rid: RowId,
        b: u64,
        buf: &mut [u8],
        cols: Columns,
    ) -> InPlace {
        match P::Record::at_boundary(tbl.rows.get(rid), b, buf, &tbl.projection, cols) {
            InPlace::Replaced => {
                let chains =
                    tbl.chains.as_ref().expect("a snapshot reader's database keeps chains");
                match chains.at(rid, b) {
                    Some(v) => {
                        // Relaxed: a chain version is immutable once linked; `chains.at` reached it
                        // through the boundary's Acquire loads.
                        let word = v.stamp.load(Ordering::Relaxed);
                        if is_absent(word) {
                            InPlace::Absent
                        } else {
                            chains.row(v).read_cols_into(buf, &tbl.projection, cols);
                            InPlace::Present(word)
                        }
                    }
                    None => InPlace::Absent,
                }
            }
            found => found,
        }
    }

    /// [`Worker::read_cols`] of a snapshot reader: no read set, no phantom set; the history
    /// records the versions read and, for a key absent at the boundary, a point range (judged
    /// at the boundary: see [`Worker::begin_read_only`]).
    #[cold]
    pub(super) fn read_at_snapshot<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        let b = self.ctx.snapshot;
        while let Some(rid) = self.ctx.lookup(tbl, key) {
            let buf = self.scratch.get(tbl.spec.row_size);
            match Self::snapshot_read(tbl, rid, b, buf, cols) {
                InPlace::Present(word) => {
                    if let Some(h) = &mut self.ctx.history {
                        let stamp = P::Record::stamp(word, Default::default(), rid);
                        h.read_cols(t.0, key, stamp, cols);
                    }
                    return Ok(Some(f(buf)));
                }
                InPlace::Absent => break,
                InPlace::Unlinked => self.relookup(t, key),
                InPlace::Replaced => unreachable!("resolved by `snapshot_read`"),
            }
        }
        if let Some(h) = &mut self.ctx.history {
            h.range(t.0, key, key);
        }
        Ok(None)
    }

    /// A scan entry of a snapshot reader: the row at the boundary, its version in the history
    /// (a key absent there is one the scan's range covers). An unlinked record was deleted
    /// below every boundary in use: absent.
    #[cold]
    pub(super) fn entry_at_snapshot(
        &mut self,
        tbl: &Table<P::Record>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Option<&[u8]> {
        let buf = self.scratch.get(tbl.spec.row_size);
        match Self::snapshot_read(tbl, rid, self.ctx.snapshot, buf, ALL_COLUMNS) {
            InPlace::Present(word) => {
                if let Some(h) = &mut self.ctx.history {
                    let stamp = P::Record::stamp(word, Default::default(), rid);
                    h.read_cols(t.0, key, stamp, ALL_COLUMNS);
                }
                Some(buf)
            }
            InPlace::Absent | InPlace::Unlinked => None,
            InPlace::Replaced => unreachable!("resolved by `snapshot_read`"),
        }
    }

    /// Refuses a write of a snapshot reader.
    #[inline(always)]
    pub(super) fn writable(&self) -> Result<(), Abort> {
        if self.ctx.snapshot != 0 {
            return Err(Abort::new(AbortReason::ReadOnlyWrite));
        }
        Ok(())
    }

    /// Reads the word of a record and its extra without copying the row (blind writes, inserts,
    /// deletes, absent records), waiting while it is present and locked or not settled. The word
    /// is returned without the lock bit: an absent record may be locked by its inserter or
    /// reviver (not waited for: it may hold that lock for its whole transaction).
    #[inline]
    pub(super) fn stable_word(
        rec: &P::Record,
        extra: &mut u32,
    ) -> (u64, <P::Record as OccRecord>::Aux) {
        let mut spin = SpinWait::default();
        loop {
            let v1 = rec.load();
            if (is_absent(v1) || !is_locked(v1)) && P::Record::settled(v1) {
                if std::mem::size_of::<<P::Record as OccRecord>::Aux>() == 0 {
                    // No extra to read consistently: one load is the answer.
                    return (v1 & !LOCK, Default::default());
                }
                let aux = rec.aux();
                // Acquire fence: pairs with the Release stores of the extra (see
                // `OccRecord::settled`); equal words around it mean the extra is theirs.
                fence(Ordering::Acquire);
                if rec.word().load(Ordering::Relaxed) == v1 {
                    return (v1 & !LOCK, aux);
                }
            }
            *extra += 1;
            spin.spin();
        }
    }

    #[inline(always)]
    pub(super) fn push_read(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        word: u64,
        aux: <P::Record as OccRecord>::Aux,
        mine: bool,
    ) {
        self.push_read_cols(t, key, rid, word, aux, mine, ALL_COLUMNS);
    }

    /// [`OccWorker::push_read`] of a read that observed only the columns `cols` (the history
    /// records those).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn push_read_cols(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        word: u64,
        aux: <P::Record as OccRecord>::Aux,
        mine: bool,
        cols: Columns,
    ) {
        let h = &mut self.ctx.history;
        push_read::<P::Record>(&mut self.reads, h, t, key, rid, word, aux, mine, cols);
    }

    #[inline]
    pub(super) fn push_write(
        &mut self,
        table: TableId,
        rid: RowId,
        key: u64,
        kind: WriteKind,
        off: u32,
    ) {
        self.push_write_cols(table, rid, key, kind, off, ALL_COLUMNS, ALL_COLUMNS);
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn push_write_cols(
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
        self.writes.push(WriteEntry { table, rid, key, kind, off, cols, dirty, locked: 0 });
    }

    /// The buffered row of write entry `i` (an update, revive or insert), holding at least the
    /// columns `cols`.
    #[inline]
    pub(super) fn buffered(
        &mut self,
        i: usize,
        tbl: &Table<P::Record>,
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
    pub(super) fn buffer_insert(&mut self, i: usize, tbl: &Table<P::Record>) {
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
    pub(super) fn widen(
        &mut self,
        i: usize,
        tbl: &Table<P::Record>,
        cols: Columns,
    ) -> Result<(), Abort> {
        let w = self.writes[i];
        let len = tbl.spec.row_size;
        let want = w.cols | cols;
        // Partial entries come only from `update_cols`, which records its read first.
        let read = self.reads.iter().rev().find(|r| r.table == w.table && r.rid == w.rid);
        let Some(&ReadEntry { word: seen, .. }) = read else {
            return Err(Abort::new(AbortReason::ReadValidation));
        };
        let p = &tbl.projection;
        let committed = P::reads_committed(self);
        let fresh = self.scratch.get(len);
        match Self::stable_read(
            tbl.rows.get(w.rid),
            fresh,
            p,
            want,
            committed,
            &mut self.extra_reads,
        ) {
            Stable::Present(word, _) if P::Record::same_version(word, seen) => {}
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
    pub(super) fn drop_write(&mut self, i: usize) {
        let w = self.writes.remove(i);
        for r in &mut self.reads {
            if r.table == w.table && r.rid == w.rid {
                r.mine = false;
            }
        }
    }

    #[inline]
    pub(super) fn table_bit(t: TableId) -> u64 {
        1 << t.0.min(63)
    }

    /// The write-set entry for row `rid` of table `t`, if any.
    #[inline]
    pub fn find_write(&self, t: TableId, rid: RowId) -> Option<usize> {
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
    /// (the key may have been inserted again under another row), and its word never changes
    /// again, so validation would not notice.
    #[inline]
    pub(super) fn lookup(&mut self, tbl: &Table<P::Record>, key: u64) -> Option<RowId> {
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
    pub(super) fn relookup(&mut self, t: TableId, key: u64) {
        self.ctx.forget(t, key);
        std::hint::spin_loop();
    }

    /// Bumps `key`'s bucket after an insert; re-stamps our own phantom entry so that our own
    /// insert does not fail our validation.
    pub(super) fn bump(&mut self, tbl: &Table<P::Record>, key: u64) {
        let (slot, old) = tbl.buckets.bump(key);
        for p in &mut self.phantoms {
            if p.table == tbl.id && p.slot as usize == slot && p.version == old {
                p.version = old + 1;
            }
        }
    }

    /// [`Worker::read_cols`], announcing a write when `write` (see `read_for_update`).
    #[inline]
    pub(super) fn read_as<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        write: bool,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        if self.ctx.snapshot != 0 {
            return self.read_at_snapshot(t, key, cols, f);
        }
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
            P::access(self, t, key, rid, tbl.rows.get(rid).header, write)?;
            // (Asked of a read announcing a write too: IC3 refuses typed reads of columns it
            // defers accumulations into.)
            let untracked = P::untracked(self, t, cols) && !write;
            // An untracked read names the committed version in the history (the value of its
            // columns is the same in every version the record has while it runs).
            let committed = P::reads_committed(self) || (untracked && self.ctx.history.is_some());
            let buf = self.scratch.get(len);
            match Self::stable_read(
                tbl.rows.get(rid),
                buf,
                &tbl.projection,
                cols,
                committed,
                &mut self.extra_reads,
            ) {
                Stable::Absent(word, _) if is_unlinked(word) => self.relookup(t, key),
                Stable::Present(word, aux) | Stable::Absent(word, aux) if untracked => {
                    if let Some(h) = &mut self.ctx.history {
                        h.read_cols(t.0, key, P::Record::stamp(word, aux, rid), cols);
                    }
                    return Ok((!is_absent(word)).then(|| f(buf)));
                }
                Stable::Present(word, aux) => {
                    let (reads, h) = (&mut self.reads, &mut self.ctx.history);
                    push_read::<P::Record>(reads, h, t, key, rid, word, aux, false, cols);
                    return Ok(Some(f(buf)));
                }
                Stable::Absent(word, aux) => {
                    self.push_read(t, key, rid, word, aux, false);
                    return Ok(None);
                }
            }
        }
    }
}
