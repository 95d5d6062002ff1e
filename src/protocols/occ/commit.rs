//! The commit-time steps that do not depend on how a protocol orders versions: locking the
//! write set in one global order, validating the phantom set, installing and logging the writes,
//! rolling back, and clearing the sets for the next transaction.

use super::*;

/// A write entry's place in the lock order: (table, row), then its index `i` in the write set
/// (which the sort never reaches: an entry's record is unique in the write set).
#[inline(always)]
pub(super) fn lock_key(w: &WriteEntry, i: usize) -> u128 {
    u128::from(w.table.0) << 96 | u128::from(w.rid.0) << 32 | i as u128
}

impl<'db, P: OccProtocol> OccWorker<'db, P> {
    /// Ends the attempt, `committed` or not ([`OccProtocol::end`]): empties the sets and leaves
    /// the epoch.
    pub fn finish(&mut self, committed: bool) {
        P::end(self, committed);
        self.clear_sets();
        self.active = false;
        self.ctx.exit();
    }

    /// Empties the read, write and phantom sets and the buffers without ending the attempt:
    /// a protocol that commits parts of a transaction on their own (IC3's pieces) starts the
    /// next part with it. Commit-time locks must have been released (or installed).
    pub fn clear_sets(&mut self) {
        self.locked = 0;
        self.reads.clear();
        self.writes.clear();
        self.phantoms.clear();
        self.arena.clear();
        self.lock_order.clear();
        self.written = 0;
        self.extra_reads = 0;
    }

    /// Discards what the sets hold without ending the attempt (a part of the transaction that
    /// failed its validation and runs again): undoes the inserts, as [`Self::rollback`] does,
    /// and empties the sets.
    pub fn discard_sets(&mut self) {
        self.unlock_held();
        self.undo_inserts();
        self.clear_sets();
    }

    /// The row write entry `i` installs and the columns it changed: its buffer, or `None` when
    /// the row is in the record already (an insert's) or there is none (a delete's).
    #[inline]
    pub fn write_image(&self, i: usize) -> Option<(&[u8], Columns)> {
        let w = &self.writes[i];
        if w.off == NO_BUFFER || !w.kind.present() {
            return None;
        }
        let len = self.ctx.storage.table(w.table).spec.row_size;
        Some((self.arena.get(w.off, len), w.dirty))
    }

    /// CCBench's ReadPhaseExtension (§6.2): when this attempt's read phase met a concurrent
    /// update (a read waited for a lock or had to copy the row again, the "extra reads" whose
    /// delay CCBench found to regulate contention), waits `ns` nanoseconds before validation, so
    /// that fewer transactions validate against the hot records at once. Attempts that met no
    /// conflict are not delayed. Protocols call it first thing in commit; 0 turns it off.
    #[inline]
    pub fn extend_read_phase(&mut self, ns: u32) {
        if ns == 0 || self.extra_reads == 0 {
            return;
        }
        self.read_phase_extensions += 1;
        let until = std::time::Instant::now() + std::time::Duration::from_nanos(u64::from(ns));
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Commit step: locks the write set in (table, row) order, waiting or not as `policy` says.
    /// Our inserts were locked when they were made (a record nobody else could hold) and are
    /// not locked again. Each entry's `locked` gets the word it had; an update or delete of a
    /// record that is no longer present, or a revive of one that is, fails with
    /// `ReadValidation`. On `Err` the locks taken stay held: [`Self::rollback`] releases them.
    pub fn lock_write_set(&mut self, policy: ValidationLock) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        let mut order = std::mem::take(&mut self.lock_order);
        order.clear();
        for (i, w) in self.writes.iter_mut().enumerate() {
            if matches!(w.kind, WriteKind::Insert | WriteKind::InsertDeleted) {
                let rec = storage.table(w.table).rows.get(w.rid).header;
                w.locked = rec.load() & !LOCK;
            } else {
                order.push(lock_key(w, i));
            }
        }
        order.sort_unstable();
        self.lock_order = order;
        let mut n = 0;
        let mut retry = SpinWait::default();
        while n < self.lock_order.len() {
            let i = self.lock_order[n] as u32 as usize;
            let w = self.writes[i];
            let rec = storage.table(w.table).rows.get(w.rid).header;
            let mut spin = SpinWait::default();
            let cur = loop {
                let cur = rec.load();
                if !is_locked(cur) && rec.try_lock(cur) {
                    break Some(cur);
                }
                match policy {
                    ValidationLock::Wait => spin.spin(),
                    // The first `n` are locked; commit's rollback releases them.
                    ValidationLock::NoWait => return Err(Abort::new(AbortReason::LockConflict)),
                    ValidationLock::NoWaitTT => break None,
                }
            };
            let Some(cur) = cur else {
                // NoWaitTT: give back what we hold, wait, and start over from the first lock.
                self.unlock_held();
                retry.spin();
                n = 0;
                continue;
            };
            n += 1;
            self.locked = n;
            self.writes[i].locked = cur;
            let ok = match w.kind {
                // The record must still be present (a concurrent delete committed otherwise).
                WriteKind::Update | WriteKind::Delete => !is_absent(cur),
                // Still absent and not unlinked.
                WriteKind::Revive => is_absent(cur) && !is_unlinked(cur),
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

    /// Releases the locks [`Self::lock_write_set`] took (all but our inserts'), leaving the
    /// attempt open.
    pub fn unlock_write_set(&mut self) {
        self.unlock_held();
    }

    /// Restores the commit-time locks taken so far to the words they had.
    pub(super) fn unlock_held(&mut self) {
        let storage = self.ctx.storage;
        for &k in &self.lock_order[..self.locked] {
            let w = &self.writes[k as u32 as usize];
            storage.table(w.table).rows.get(w.rid).header.store(w.locked);
        }
        self.locked = 0;
    }

    /// Whether row `rid` of table `t`, read with `r`, is locked by this transaction: either the
    /// read came with a write-set entry, or the row is in the write set (locked at commit).
    #[inline]
    pub fn locked_by_me(&self, r: &ReadEntry<<P::Record as OccRecord>::Aux>) -> bool {
        r.mine || self.find_write(r.table, r.rid).is_some()
    }

    /// Commit step: the phantom set's bucket versions are unchanged.
    pub fn validate_phantoms(&self) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        for p in &self.phantoms {
            if storage.table(p.table).buckets.version(p.slot as usize) != p.version {
                return Err(Abort::new(AbortReason::PhantomValidation));
            }
        }
        Ok(())
    }

    /// Releases commit-time locks and undoes inserts after a failed commit or an abort.
    pub fn rollback(&mut self) {
        self.unlock_held();
        self.undo_inserts();
        self.finish(false);
    }

    /// Our inserts stay in the index as absent records: unlocks them and lets the GC unlink
    /// them.
    pub(super) fn undo_inserts(&mut self) {
        let storage = self.ctx.storage;
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            if matches!(w.kind, WriteKind::Insert | WriteKind::InsertDeleted) {
                let rec = storage.table(w.table).rows.get(w.rid).header;
                rec.store(rec.load() & !LOCK);
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
    }

    /// Commit step: installs the write set and unlocks it, logging it with commit stamp `stamp`
    /// when the database logs (the durability contract: each row's image is copied to the log
    /// after it is installed and before `publish` unlocks it). `publish(record, entry)` writes
    /// the record's new version (its word, unlocked, with [`ABSENT`] for a delete, and any extra)
    /// after the payload has been copied in, and returns the new `(word, aux)` for the history.
    /// Passes [`CommitPhase::Logged`] and [`CommitPhase::Installed`] (the log record is
    /// complete once the last record is installed) and ends the attempt; the caller's
    /// `Worker::commit` returns through `WorkerCtx::commit_returning`.
    pub fn install(
        &mut self,
        stamp: u64,
        publish: impl FnMut(&P::Record, &WriteEntry) -> (u64, <P::Record as OccRecord>::Aux),
    ) {
        // One branch per commit: the loop is compiled with and without logging.
        if self.ctx.log.is_some() {
            self.install_with::<true>(stamp, publish);
        } else {
            self.install_with::<false>(stamp, publish);
        }
        // Each record was installed, logged and unlocked in turn: both points at once.
        self.ctx.phase(CommitPhase::Logged);
        self.ctx.phase(CommitPhase::Installed);
        self.finish(true);
    }

    #[inline(always)]
    pub(super) fn install_with<const LOG: bool>(
        &mut self,
        stamp: u64,
        mut publish: impl FnMut(&P::Record, &WriteEntry) -> (u64, <P::Record as OccRecord>::Aux),
    ) {
        let storage = self.ctx.storage;
        if LOG {
            let log = self.ctx.log.as_mut().expect("LOG is set only with a log");
            log.begin(stamp, self.writes.len() as u32);
        }
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            let tbl = storage.table(w.table);
            let row = tbl.rows.get(w.rid);
            // The version replaced, for the history (read under our lock, before `publish`).
            let prev = self
                .ctx
                .history
                .is_some()
                .then(|| <P::Record as OccRecord>::stamp(w.locked, row.header.aux(), w.rid));
            if self.ctx.snapshot_every != 0 {
                // The value replaced, for snapshot readers (read under our lock). An insert's
                // fresh record has none: absent, with nothing older.
                let (old, now) = (w.locked, <P::Record as OccRecord>::epoch(stamp));
                let epoch = <P::Record as OccRecord>::epoch(old);
                let value = if is_absent(old) { Kept::Absent } else { Kept::Row(row) };
                self.ctx.keep_for_snapshots(w.table, w.rid, value, old, epoch, now);
            }
            // An insert without a buffer wrote its row into the record already; deletes copy
            // nothing.
            if w.kind.present() && w.off != NO_BUFFER {
                row.write_cols_from(
                    self.arena.get(w.off, tbl.spec.row_size),
                    &tbl.projection,
                    w.dirty,
                );
            }
            if LOG {
                let log = self.ctx.log.as_mut().expect("LOG is set only with a log");
                if w.kind.present() {
                    // An update logs the columns it changed; a write that creates the row, all.
                    let cols = if w.kind == WriteKind::Update { w.dirty } else { ALL_COLUMNS };
                    log.put_row(w.table.0, stamp, w.key, row, &tbl.projection, cols);
                } else {
                    log.delete(w.table.0, stamp, w.key);
                }
            }
            let (word, aux) = publish(row.header, &w);
            if !w.kind.present() {
                self.ctx.retire(w.table, w.key, w.rid);
            }
            if let (Some(h), Some(prev)) = (&mut self.ctx.history, prev) {
                let stamp = <P::Record as OccRecord>::stamp(word, aux, w.rid);
                h.write(w.table.0, w.key, stamp, prev, w.kind.present());
            }
        }
        if LOG {
            let log = self.ctx.log.as_mut().expect("LOG is set only with a log");
            self.ctx.log_epoch = log.end();
        }
    }
}
