//! Validation and the write phase (§3.4, §3.5): the write set sorted by contention, the
//! pending versions installed, the read and phantom sets checked, the read timestamps raised,
//! the commit logged and the versions committed, or rolled back.

use super::*;

impl<'db> CicadaWorker<'db> {
    /// Puts the most contended writes first (§3.5): partial sort of the top `SORT_TOP` by the
    /// write timestamp of their record's newest version.
    pub(super) fn sort_writes(&mut self) {
        for w in &mut self.writes {
            let rec = as_ref(w.rec);
            w.heat = match rec.newest() {
                Ok(Some(v)) => wts(v),
                _ => 0,
            };
        }
        let n = self.writes.len();
        if n > SORT_TOP {
            self.writes.select_nth_unstable_by(SORT_TOP - 1, |a, b| b.heat.cmp(&a.heat));
            self.writes[..SORT_TOP].sort_unstable_by_key(|w| std::cmp::Reverse(w.heat));
        } else {
            self.writes.sort_unstable_by_key(|w| std::cmp::Reverse(w.heat));
        }
    }

    /// The version visible to this transaction in `rec` now, searching from `later` when the
    /// read phase found one (incremental version search, §3.5).
    #[inline(always)]
    pub(super) fn visible_now(
        &self,
        rec: &'db CicadaRecord,
        later: Option<NonNull<CVersion>>,
    ) -> Result<Option<&'db CVersion>, Abort> {
        let start = match later {
            // `later` is above our timestamp, so above `min_rts`: never cut off while we run.
            Some(l) => next(as_ref(l)),
            None => match rec.newest() {
                Ok(h) => h,
                Err(Unlinked) => return Err(Abort::new(AbortReason::ReadValidation)),
            },
        };
        Ok(search(start, self.ts, self.p.options.wait)?.seen)
    }

    /// The version consistency check of the reads (§3.4 (3a), with CCBench's fix): the
    /// version visible now is the one read, so no version appeared between it and the
    /// timestamp (the search walks the whole visible range, not just the version read).
    pub(super) fn reads_consistent(&self) -> Result<(), Abort> {
        if self.p.options.single_version {
            return self.reads_consistent_sv();
        }
        for r in &self.reads {
            let now = self.visible_now(as_ref(r.rec), r.later)?;
            if now.map(ptr) != r.seen {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
        }
        Ok(())
    }

    /// The early version consistency check (§3.5 (2)): the reads, and the writes' visible
    /// versions' read timestamps, before anything is installed.
    pub(super) fn precheck(&self) -> Result<(), Abort> {
        self.reads_consistent()?;
        for w in self.writes.iter().filter(|w| !w.promotion) {
            if let Some(v) = self.visible_now(as_ref(w.rec), w.later)? {
                // Relaxed: the precheck is a heuristic (§3.5 (2)); the check that decides comes
                // after the installs and the SeqCst fence (`writes_consistent`).
                if v.ext.rts.load(Ordering::Relaxed) > self.ts {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
            }
        }
        Ok(())
    }

    /// Installs write `i`'s pending version in wts order (§3.4 (1)), or aborts: the version it
    /// goes in above must be what the write expects (present for an update or deletion, absent
    /// or deleted for an insert) with a read timestamp at or below ours.
    pub(super) fn install(&mut self, i: usize) -> Result<(), Abort> {
        if self.writes[i].unindexed {
            self.index_insert(i)?;
        }
        let w = self.writes[i];
        if self.p.options.single_version && !is_inline(as_ref(w.version)) {
            return self.lock_for_overwrite(i);
        }
        let rec = as_ref(w.rec);
        let nv = as_ref(w.version);
        let wait = self.p.options.wait;
        loop {
            // From `later` (above our timestamp, so never cut off) or the head: skip the
            // versions above our timestamp.
            let (mut link, mut cur) = match w.later {
                Some(l) => (Link::Next(as_ref(l)), next(as_ref(l))),
                None => match rec.newest() {
                    Ok(h) => (Link::Head(rec), h),
                    Err(Unlinked) => return Err(Abort::new(AbortReason::InsertConflict)),
                },
            };
            if self.p.options.single_version && cur.is_some() {
                // Cicada-SV: a record's first version goes into its empty head only (another
                // insert's went in first).
                return Err(Abort::new(AbortReason::InsertConflict));
            }
            while let Some(v) = cur.filter(|v| wts(v) > self.ts) {
                link = Link::Next(v);
                cur = next(v);
            }
            let below = search(cur, self.ts, wait)?.seen;
            expect(&w, below)?;
            if below.is_some_and(|v| v.ext.rts.load(Ordering::SeqCst) > self.ts) {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            // Relaxed: the Release CAS below publishes it.
            nv.next.store(
                cur.map_or(std::ptr::null_mut(), |v| v as *const CVersion as *mut CVersion),
                Ordering::Relaxed,
            );
            if link.swap_in(cur, w.version) {
                let wr = &mut self.writes[i];
                wr.installed = true;
                wr.prev = stamp_of(below);
                if below.is_none() && !self.p.mv_index() {
                    // The key becomes present where no version was: absence readers above our
                    // timestamp must be told (the bucket's version, then its `rts` is checked).
                    // (The multi-version index tells them through the leaf the key enters.)
                    let tbl = self.ctx.storage.table(w.table);
                    let (slot, _) = tbl.buckets.bump(w.key);
                    self.observed.push(Observed {
                        table: w.table,
                        slot: slot as u32,
                        version: u64::MAX,
                    });
                }
                return Ok(());
            }
            // A version went in at our place meanwhile: search again.
        }
    }

    /// Cicada-SV's installation of write `i`, which overwrites its record's one version: takes
    /// the record's write lock (waiting while a transaction with a smaller timestamp holds it,
    /// so waits go one way and cannot deadlock; else an abort), then checks what the write
    /// expects of the version (present or absent), that it is below our timestamp and that no
    /// transaction above it read it. The write phase overwrites it; a record's first version
    /// (an insert into a fresh record, its inlined version) is installed as in Cicada.
    pub(super) fn lock_for_overwrite(&mut self, i: usize) -> Result<(), Abort> {
        let w = self.writes[i];
        let rec = as_ref(w.rec);
        let mut spin = SpinWait::default();
        loop {
            match rec.try_lock_write(self.ts) {
                Ok(()) => break,
                Err(holder) if holder < self.ts && self.p.options.wait => spin.spin(),
                Err(_) => return Err(Abort::new(AbortReason::WriteConflict)),
            }
        }
        self.writes[i].locked = true;
        let v = match rec.newest() {
            Ok(Some(v)) => v,
            // The first version's insert is ours to lose: no version yet, or the GC removed
            // the (deleted) record.
            _ => return Err(Abort::new(AbortReason::InsertConflict)),
        };
        debug_assert!(is_inline(v), "Cicada-SV keeps only inlined versions");
        // A first version still pending (its insert validating) is waited for below ours.
        while status(v) == PENDING {
            if wts(v) > self.ts || !self.p.options.wait {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            spin.spin();
        }
        // Under the lock the version does not change.
        let below = match status(v) {
            ABORTED => None,
            _ if wts(v) > self.ts => return Err(Abort::new(AbortReason::WriteConflict)),
            _ => Some(v),
        };
        expect(&w, below)?;
        // SeqCst: after the lock's SeqCst CAS (the store-then-load pair with readers).
        if below.is_some_and(|v| v.ext.rts.load(Ordering::SeqCst) > self.ts) {
            return Err(Abort::new(AbortReason::WriteConflict));
        }
        self.writes[i].prev = stamp_of(below);
        if below.is_none() {
            // The key becomes present where nothing was (see `install`).
            let tbl = self.ctx.storage.table(w.table);
            let (slot, _) = tbl.buckets.bump(w.key);
            self.observed.push(Observed { table: w.table, slot: slot as u32, version: u64::MAX });
        }
        Ok(())
    }

    /// Puts write `i`'s new record in the index (its deferred update, §3.6), or aborts if the
    /// key entered it since the read phase found it absent: another transaction inserted it,
    /// and this insert would at best fail. An entry whose record is being unlinked (a deletion
    /// below `min_rts`, so below our timestamp) is waited out: the GC removes it at once.
    pub(super) fn index_insert(&mut self, i: usize) -> Result<(), Abort> {
        let w = self.writes[i];
        let tbl = self.ctx.storage.table(w.table);
        let mut spin = SpinWait::default();
        loop {
            match tbl.index.insert_if_absent(w.key, w.rid, &self.ctx.guard) {
                Ok(()) => break,
                Err(existing) if tbl.rows.get(existing).header.is_unlinked() => spin.spin(),
                Err(_) => return Err(Abort::new(AbortReason::InsertConflict)),
            }
        }
        self.writes[i].unindexed = false;
        Ok(())
    }

    /// The read timestamp updates (§3.4 (2)), conditional: only a lower `rts` is raised.
    /// SeqCst: one side of the store-then-load pairs with installers (see the module docs).
    pub(super) fn update_rts(&self) {
        for r in &self.reads {
            if let Some(v) = r.seen {
                let rts = &as_ref(v).ext.rts;
                if rts.load(Ordering::SeqCst) < self.ts {
                    rts.fetch_max(self.ts, Ordering::SeqCst);
                    crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
                }
            }
        }
        let storage = self.ctx.storage;
        // Our inserts' entries (`u64::MAX`, the tail) read no absence: raising their buckets'
        // `rts` would only abort inserters below our timestamp for nothing.
        for o in self.observed.iter().filter(|o| o.version != u64::MAX) {
            storage.table(o.table).buckets.extend_rts(o.slot as usize, self.ts);
        }
    }

    /// The phantom half of the consistency check: every bucket observed absent still has the
    /// version read (plus this transaction's own inserts into it), and no reader above our
    /// timestamp observed absent a bucket we made a key appear in.
    pub(super) fn buckets_consistent(&self) -> Result<(), Abort> {
        let storage = self.ctx.storage;
        // Our inserts' entries were pushed at installation, after every observation of the
        // read phase: they are the tail, usually empty (no quadratic scan of a long scan's
        // buckets).
        let ours = self.observed.iter().rposition(|x| x.version != u64::MAX).map_or(0, |i| i + 1);
        let ours = &self.observed[ours..];
        for o in &self.observed {
            let b = &storage.table(o.table).buckets;
            if o.version == u64::MAX {
                // Our insert: the largest absence read's timestamp must be ours or below.
                if b.clock(o.slot as usize).1 > self.ts {
                    return Err(Abort::new(AbortReason::PhantomValidation));
                }
                continue;
            }
            let own = ours
                .iter()
                .filter(|x| x.version == u64::MAX && x.table == o.table && x.slot == o.slot)
                .count() as u64;
            if b.version(o.slot as usize) != o.version + own {
                return Err(Abort::new(AbortReason::PhantomValidation));
            }
        }
        Ok(())
    }

    /// The write half of the consistency check (§3.4 (3b)): the version each pending version
    /// went in above was read at or below our timestamp only.
    pub(super) fn writes_consistent(&mut self) -> Result<(), Abort> {
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            if w.dropped {
                continue;
            }
            if w.locked {
                // Cicada-SV: the version we overwrite (fixed under our lock) was read at or
                // below our timestamp only.
                let v = as_ref(w.rec).inline();
                if status(v) != ABORTED && v.ext.rts.load(Ordering::SeqCst) > self.ts {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
                continue;
            }
            let below = search(next(as_ref(w.version)), self.ts, self.p.options.wait)
                .and_then(|f| expect(&w, f.seen).map(|()| f.seen));
            let ok = match below {
                Ok(b) => b.is_none_or(|v| v.ext.rts.load(Ordering::SeqCst) <= self.ts),
                Err(_) => false,
            };
            if !ok {
                if w.promotion {
                    self.drop_promotion(i);
                    continue;
                }
                return Err(below.err().unwrap_or(Abort::new(AbortReason::WriteConflict)));
            }
        }
        Ok(())
    }

    /// Validation (§3.4-3.5); on `Err` nothing of this transaction stays visible.
    pub(super) fn validate(&mut self) -> Result<(), Abort> {
        let o = self.p.options;
        let skip = o.adaptive && self.streak >= SKIP_AFTER;
        if o.sort && !skip && self.writes.len() > 1 {
            self.sort_writes();
        }
        if o.precheck && !skip {
            self.precheck()?;
        }
        for i in 0..self.writes.len() {
            match self.install(i) {
                Ok(()) => {}
                Err(_) if self.writes[i].promotion => self.drop_promotion(i),
                Err(a) => return Err(a),
            }
        }
        if !self.writes.is_empty() {
            // Every pending version is in its chain: the write set is held.
            self.ctx.phase(CommitPhase::Locked);
        }
        // Installations (and bucket bumps) before the read timestamps are loaded below.
        fence(Ordering::SeqCst);
        self.update_rts();
        // Our read timestamps before the chains are searched again.
        fence(Ordering::SeqCst);
        self.reads_consistent()?;
        self.buckets_consistent()?;
        self.writes_consistent()
    }

    pub(super) fn finish(&mut self) {
        self.retiring.clear();
        self.reads.clear();
        self.writes.clear();
        self.observed.clear();
        self.written = 0;
        self.unindexed = 0;
        self.active = false;
        self.read_only = false;
        self.untracked = false;
        self.ctx.exit();
        self.p.quiescence.exit(self.ctx.slot);
    }

    /// Rolls back: installed versions become ABORTED (the GC cuts them off with the chain
    /// below a newer committed version, or unlinks the row), the others go back at once;
    /// records this transaction created are retired.
    pub(super) fn rollback(&mut self) {
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            if w.dropped {
                continue;
            }
            if self.p.is_node_table(w.table) {
                self.roll_back_node(w);
                continue;
            }
            if w.unindexed {
                // Never published: its version and slot go back at once.
                self.unused(w.table, w.version);
                self.ctx.caches[w.table.index()].release(w.rid);
                continue;
            }
            if w.locked {
                // Cicada-SV: nothing was overwritten yet.
                as_ref(w.rec).unlock_gc();
                self.unused(w.table, w.version);
            } else if w.installed {
                set_status(as_ref(w.version), ABORTED);
            } else {
                self.unused(w.table, w.version);
                if w.created {
                    // Not an insert in flight any more: the key's next insert may take it.
                    as_ref(w.rec).abandon();
                }
            }
            if !w.over_present {
                // Its row may be a new record nothing else made present: the GC unlinks it
                // once no version of it can be seen.
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
        self.streak = 0;
        self.clock.boost();
        self.finish();
    }

    /// Logs the writes at our timestamp (Cicada's commit stamp is its wts, §3.7), before any
    /// becomes COMMITTED; the log epoch stays in flight until `commit_returning`, after every
    /// version is COMMITTED (the commit contract: a checkpoint that waits for the epoch sees
    /// them).
    pub(super) fn log(&mut self) {
        let storage = self.ctx.storage;
        // Index nodes are not logged: recovery rebuilds the index from the rows.
        let p = self.p;
        let logged = |w: &&Write| !w.dropped && !p.is_node_table(w.table);
        let n = self.writes.iter().filter(logged).count();
        let Some(log) = self.ctx.log.as_mut().filter(|_| n > 0) else { return };
        log.begin(self.ts, n as u32);
        for w in self.writes.iter().filter(logged) {
            let tbl = storage.table(w.table);
            if w.tombstone {
                log.delete(w.table.0, self.ts, w.key);
            } else {
                // SAFETY: as `row`.
                let row = unsafe { row_of(as_ref(w.version), tbl.spec.row_size) };
                let cols = if w.over_present { w.cols } else { ALL_COLUMNS };
                log.put_row(w.table.0, self.ts, w.key, row, &tbl.projection, cols);
            }
        }
        self.ctx.log_epoch = log.end();
    }
}
