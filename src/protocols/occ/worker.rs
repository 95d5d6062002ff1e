//! The [`Worker`] methods of [`OccWorker`]: what a transaction calls, each a step of the read
//! phase (see `read.rs`) or the protocol's commit ([`OccProtocol`]).

use super::*;

impl<'db, P: OccProtocol> Worker for OccWorker<'db, P> {
    crate::protocols::common::forward!(ctx: scan prefetch prefetch_many log_epoch);

    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        self.ctx.pinned(f)
    }

    fn begin(&mut self) {
        self.ctx.enter(unlink::<P::Record>);
        self.active = true;
        P::begin(self);
    }

    /// Where the database keeps snapshots (Silo §4.9, `storage::snapshot`) and has one, the
    /// attempt reads the newest: it takes no locks, keeps no read set, refuses writes
    /// (`read-only-write`) and cannot fail its commit. Its data is up to two snapshot intervals
    /// old, older than this worker's own last commit possibly (as in Silo). It serializes at
    /// the boundary `b`: after every commit of an epoch below `b` and before the others, which
    /// the history's epoch time line ([`crate::history::epoch_ts`]) says exactly. Otherwise it
    /// runs as any transaction.
    fn begin_read_only(&mut self) {
        self.begin();
        if self.ctx.snapshot_every != 0 {
            if let Some(b) = self.ctx.read_snapshot() {
                if let Some(h) = &mut self.ctx.history {
                    let at = crate::history::epoch_ts(b, 0) - 1;
                    h.serial_point_at(at);
                    h.read_point_at(at);
                }
                P::snapshot_taken(self);
            }
        }
    }

    #[inline]
    fn typed(&mut self, ty: usize) {
        P::typed(self, ty);
    }

    #[inline]
    fn piece_begin(&mut self, piece: usize) -> Result<(), Abort> {
        P::piece_begin(self, piece)
    }

    #[inline]
    fn piece_end(&mut self, piece: usize, body: Result<(), Abort>) -> Result<PieceEnd, Abort> {
        P::piece_end(self, piece, body)
    }

    fn accumulate(&mut self, t: TableId, key: u64, acc: Accumulation) -> Result<bool, Abort> {
        self.writable()?;
        if !P::defers(self, t) {
            return accumulate_now(self, t, key, acc);
        }
        let tbl = table(self.ctx.storage, t)?;
        if !acc.fits(tbl.spec.row_size) {
            return Err(Abort::new(AbortReason::TemplateViolation));
        }
        match self.lookup(tbl, key) {
            Some(rid) => P::defer(self, t, key, rid, acc),
            None => Ok(false),
        }
    }

    #[inline]
    fn read_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read_as(t, key, cols, false, f)
    }

    /// A read announcing a write: the protocol's access step sees the intent (MOCC locks a hot
    /// record in write mode at once instead of upgrading later).
    #[inline]
    fn read_for_update<T>(
        &mut self,
        t: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read_as(t, key, ALL_COLUMNS, true, f)
    }

    #[inline]
    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        let (rid, word, aux) = loop {
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
            P::access(self, t, key, rid, tbl.rows.get(rid).header, true)?;
            let (word, aux) = Self::stable_word(tbl.rows.get(rid).header, &mut self.extra_reads);
            if !is_unlinked(word) {
                break (rid, word, aux);
            }
            self.relookup(t, key);
        };
        if is_absent(word) {
            self.push_read(t, key, rid, word, aux, false);
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
        self.writable()?;
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
            P::access(self, t, key, rid, tbl.rows.get(rid).header, true)?;
            let committed = P::reads_committed(self);
            let off = self.arena.push_reused(len);
            let buf = self.arena.get_mut(off, len);
            match Self::stable_read(
                tbl.rows.get(rid),
                buf,
                p,
                cols,
                committed,
                &mut self.extra_reads,
            ) {
                Stable::Present(word, aux) => {
                    // The update observed the columns it buffered.
                    self.push_read_cols(t, key, rid, word, aux, true, cols);
                    let out = apply_update(p, writes, self.arena.get_mut(off, len), f)?;
                    self.push_write_cols(t, rid, key, WriteKind::Update, off, cols, writes);
                    return Ok(Some(out));
                }
                Stable::Absent(word, _) if is_unlinked(word) => self.relookup(t, key),
                Stable::Absent(word, aux) => {
                    self.push_read(t, key, rid, word, aux, false);
                    return Ok(None);
                }
            }
        }
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        loop {
            // Silo §4.5: a new record, locked and absent, goes into the index now. Trying the
            // insert first costs one index traversal when the key is new (the common case),
            // instead of a lookup and then an insert. No phantom entry for the key itself:
            // creating the index entry is atomic (a racing insert of the same key is seen by
            // `insert_if_absent`, a revived record through its word), and an entry here would
            // make inserts of neighbouring keys abort each other.
            let fresh = self.ctx.alloc(t)?;
            let row = tbl.rows.get(fresh);
            row.header.init_fresh();
            // The row goes straight into the record (readers copy no absent record, and the
            // index insert below publishes it), so commit installs only the word.
            row.write_from(value);
            let rid = match tbl.index.insert_if_absent(key, fresh, &self.ctx.guard) {
                Ok(()) => {
                    row.header.inserted(&tbl.buckets, key);
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
            if !is_absent(cur) {
                // Present: the insert fails; its outcome depends on the record staying present.
                let (word, aux) = Self::stable_word(rec, &mut self.extra_reads);
                if is_absent(word) {
                    continue;
                }
                self.push_read(t, key, rid, word, aux, false);
                return Ok(false);
            }
            if is_locked(cur) || is_unlinked(cur) {
                // Another transaction is inserting or reviving it, or the GC is removing it.
                return Err(Abort::new(AbortReason::InsertConflict));
            }
            // Revive a deleted record: its word must not change before we lock it at commit.
            P::access(self, t, key, rid, rec, true)?;
            let (word, aux) = Self::stable_word(rec, &mut self.extra_reads);
            if word != cur {
                continue;
            }
            self.push_read(t, key, rid, word, aux, true);
            let off = self.arena.push(value);
            self.push_write(t, rid, key, WriteKind::Revive, off);
            self.bump(tbl, key);
            return Ok(true);
        }
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        let (rid, word, aux) = loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(false) };
            if self.find_write(t, rid).is_some() {
                break (rid, 0, Default::default());
            }
            P::access(self, t, key, rid, tbl.rows.get(rid).header, true)?;
            let (word, aux) = Self::stable_word(tbl.rows.get(rid).header, &mut self.extra_reads);
            if !is_unlinked(word) {
                break (rid, word, aux);
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
        self.push_read(t, key, rid, word, aux, !is_absent(word));
        if is_absent(word) {
            return Ok(false);
        }
        self.push_write(t, rid, key, WriteKind::Delete, NO_BUFFER);
        Ok(true)
    }

    fn reads_still_valid(&mut self) -> bool {
        P::reads_still_valid(self)
    }

    fn commit(&mut self) -> Result<(), Abort> {
        if self.ctx.snapshot != 0 {
            // A snapshot reader: nothing to validate (see `begin_read_only`).
            if let Some(h) = &mut self.ctx.history {
                h.committed();
            }
            self.ctx.phase(CommitPhase::Validated);
            self.finish(true);
        } else {
            P::commit(self)?;
        }
        self.ctx.commit_returning()
    }

    fn abort(&mut self) {
        if self.active {
            self.rollback();
        }
    }
}
