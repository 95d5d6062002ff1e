//! The substrate's shared half ([`MvShared`]): commit timestamps and snapshots, the GC watermark
//! and AggressiveGC's pruning mark, the read-only transactions' safe snapshot, and the queues a
//! departing worker leaves.

use super::*;

impl<V: VersionExt, T: Timestamps + Default> MvShared<V, T> {
    /// The substrate for `tables`, at most `workers` workers, collecting garbage as `gc` says.
    pub fn new(tables: &[TableSpec], workers: usize, gc: Gc) -> Self {
        MvShared {
            stores: tables
                .iter()
                .map(|t| VersionStore::with_alloc(t.row_size, gc.alloc).poisoned(gc.poison))
                .collect(),
            txns: TxnTable::new(workers),
            clock: T::default(),
            watermark: CachePadded::new(Watermark {
                stamp: AtomicU64::new(LOADED),
                since_ns: AtomicU64::new(0),
            }),
            refreshed: CachePadded::new(AtomicU64::new(0)),
            refreshing: AtomicBool::new(false),
            origin: quanta::Instant::now(),
            interval_ns: gc.interval_us * 1000,
            lag: GcLag::default(),
            read_only: ReadOnly::default(),
            orphans: std::sync::Mutex::new(Orphans { prune: Vec::new(), dead: Vec::new() }),
            orphaned: AtomicBool::new(false),
            aggressive_ns: gc.aggressive_us * 1000,
            prune_mark: CachePadded::new(AtomicU64::new(LOADED)),
            samples: std::sync::Mutex::new(VecDeque::new()),
            back_edge: CachePadded::new(AtomicU64::new(0)),
        }
    }
}

impl<V: VersionExt, T: Timestamps> MvShared<V, T> {
    /// Versions cut from chunks so far, over every table: live versions plus those pooled for
    /// reuse or waiting to be freed (a bound on version memory; it stays flat while the GC keeps
    /// up).
    pub fn carved_versions(&self) -> u64 {
        self.stores.iter().map(|s| s.carved()).sum()
    }

    /// What the versions hold now, walked over every row an index maps, and the GC lag of the
    /// versions cut since the last report by workers that have left (a worker hands its figures
    /// over when it drops). Call it when no worker runs: the chains are walked without a
    /// storage epoch.
    pub fn report(&self, storage: &Storage<MvRecord<V>>) -> crate::engine::report::VersionReport {
        let mut r = crate::engine::report::VersionReport::default();
        let mut g = crate::storage::index::pin();
        for (t, store) in storage.tables().iter().zip(&self.stores) {
            let size = store.version_bytes() as u64;
            let mut alive = 0;
            t.index.for_each_part(
                0,
                1,
                &mut g,
                || {},
                |_, rid| {
                    let mut n = 0;
                    let mut v = t.rows.get(rid).header.newest();
                    while let Some(ver) = v {
                        n += 1;
                        v = next_of(ver);
                    }
                    r.rows += 1;
                    alive += n;
                    r.longest_chain = r.longest_chain.max(n);
                },
            );
            r.alive += alive;
            r.alive_bytes += alive * size;
            r.carved += store.carved();
            r.carved_bytes += store.carved() * size;
        }
        // Relaxed: statistics handed over by workers that have been joined.
        let count = self.lag.count.swap(0, Ordering::Relaxed);
        let sum = self.lag.sum_ns.swap(0, Ordering::Relaxed);
        r.gc_lag_max_us = self.lag.max_ns.swap(0, Ordering::Relaxed) as f64 / 1e3;
        r.gc_lag_mean_us = if count == 0 { 0.0 } else { sum as f64 / count as f64 / 1e3 };
        let ro = &self.read_only;
        // Relaxed: statistics, added by workers that have been joined.
        r.read_only_safe = ro.safe.swap(0, Ordering::Relaxed);
        r.read_only_fresh = ro.fresh.swap(0, Ordering::Relaxed);
        let sum = ro.sum_ns.swap(0, Ordering::Relaxed) as f64;
        r.read_only_staleness_mean_us =
            Some(if r.read_only_safe == 0 { 0.0 } else { sum / r.read_only_safe as f64 / 1e3 });
        r.read_only_staleness_max_us = Some(ro.max_ns.swap(0, Ordering::Relaxed) as f64 / 1e3);
        r.finish()
    }

    /// Frees every version left when the database drops: the rows' chains and the versions
    /// departed workers left waiting for grace periods (with pooled versions there is nothing
    /// to do: the stores unmap their chunks). No worker may be left.
    pub fn teardown(&self, storage: &Storage<MvRecord<V>>) {
        if self.stores.iter().all(|s| s.alloc() == VersionAlloc::Pool) {
            return;
        }
        let mut g = crate::storage::index::pin();
        for (t, store) in storage.tables().iter().zip(&self.stores) {
            t.index.for_each_part(
                0,
                1,
                &mut g,
                || {},
                |_, rid| {
                    let rec = t.rows.get(rid).header;
                    // Relaxed: no worker is left (teardown), so nothing races with the swap.
                    let w = rec.head.swap(UNLINKED, Ordering::Relaxed);
                    // SAFETY: no worker is left, so nothing else reaches the chain, and the
                    // swap leaves it to this walk alone (an index entry names a row once).
                    unsafe { store.free_chain(NonNull::new((w & PTR) as *mut Version<V>)) };
                },
            );
        }
        let mut o = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
        for (t, p, _) in o.dead.drain(..) {
            // SAFETY: cut off or retracted, so on no chain; queued once; no worker is left.
            unsafe { self.stores[t.index()].free_one(p.0) };
        }
    }

    /// The GC watermark: at most the oldest snapshot in use.
    #[inline]
    pub fn watermark(&self) -> u64 {
        self.watermark.stamp.load(Ordering::Acquire)
    }

    /// The watermark the GC prunes chains at: the watermark, or with AggressiveGC the clock
    /// as it was the age bound ago if that is higher, held back only by protected snapshots.
    #[inline]
    pub fn prune_mark(&self) -> u64 {
        if self.aggressive_ns == 0 {
            self.watermark()
        } else {
            // Acquire: pairs with `recompute`'s Release.
            self.prune_mark.load(Ordering::Acquire)
        }
    }

    /// Nanoseconds since the substrate was made.
    #[inline(always)]
    pub(super) fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Recomputes the watermark if it is due at `now` and nobody else is at it.
    #[inline]
    pub(super) fn maybe_refresh(&self, now: u64) {
        // SeqCst swap: before the snapshot loads (see `pin_watermark`).
        if now.saturating_sub(self.refreshed.load(Ordering::Relaxed)) < self.interval_ns
            || self.refreshing.swap(true, Ordering::SeqCst)
        {
            return;
        }
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Refresh);
        self.recompute();
        // Relaxed: when the last refresh ran, a hint that only spaces refreshes out.
        self.refreshed.store(now, Ordering::Relaxed);
        // Release: the new watermark before the flag drops (pairs with `pin_watermark`).
        self.refreshing.store(false, Ordering::Release);
    }

    /// Recomputes the watermark now (waiting for a refresh in progress).
    pub fn refresh(&self) {
        let mut spin = crate::util::SpinWait::default();
        while self.refreshing.swap(true, Ordering::SeqCst) {
            spin.spin();
        }
        self.recompute();
        // Release: the new watermark before the flag drops (pairs with `pin_watermark`).
        self.refreshing.store(false, Ordering::Release);
    }

    /// Whether a worker that published `w`, the watermark it loaded, as its snapshot may read
    /// at `w`: no refresh can pass it any more. A refresh whose scan missed the store had
    /// raised the `refreshing` flag before it (SeqCst), so the flag is seen up (then the
    /// answer is no, rather than a wait for a refresher that may be descheduled), or seen
    /// dropped after it computed, and then its watermark is seen; if the watermark is still
    /// `w`, every later refresh sees the store.
    pub(super) fn pin_watermark(&self, w: u64) -> bool {
        !self.refreshing.load(Ordering::SeqCst) && self.watermark.stamp.load(Ordering::SeqCst) == w
    }

    /// Records that a transaction committed at `c` after one of its anti-dependency
    /// successors (it read a version that a transaction committed before it overwrote: its
    /// successor stamp is below `c`). Read-only transactions avoid snapshots below such a
    /// commit (see `protocols::mv::worker`).
    #[inline]
    pub fn note_back_edge(&self, c: u64) {
        let b = &self.back_edge;
        // SeqCst: before the transaction's slot goes idle (see `mv::worker`'s read-only rule).
        if b.load(Ordering::Relaxed) < c {
            b.fetch_max(c, Ordering::SeqCst);
            crate::util::shared_writes::note(crate::util::shared_writes::Site::Refresh);
        }
    }

    /// The watermark (and AggressiveGC's) recomputed, by the holder of the `refreshing` flag.
    pub(super) fn recompute(&self) {
        // SeqCst loads: see the module docs (the clock is read before the snapshots).
        let clock = self.clock.snapshot();
        let mut m = clock;
        // When the state at `m` was the newest: now if it is the clock's, else the begin of
        // the transaction whose snapshot it is (Relaxed: a statistic).
        let mut since = None;
        let mut protected = u64::MAX;
        let used = self.txns.used.load(Ordering::SeqCst);
        for s in &self.txns.slots[..used] {
            let snap = s.snapshot.load(Ordering::SeqCst);
            if snap < m {
                (m, since) = (snap, Some(s.began.load(Ordering::Relaxed)));
            }
            if self.aggressive_ns != 0 && s.protected.load(Ordering::SeqCst) {
                protected = protected.min(snap);
            }
        }
        let wm = &self.watermark;
        // The latest time the state at `m` is known to have been the newest. Relaxed
        // `since_ns`: a statistic; only the holder of the `refreshing` flag stores it.
        let since = since.unwrap_or_else(|| self.now_ns());
        let old = wm.stamp.load(Ordering::Relaxed);
        if m > old {
            wm.since_ns.store(since, Ordering::Relaxed);
        } else if m == old {
            wm.since_ns.fetch_max(since, Ordering::Relaxed);
        }
        // Release: pairs with `watermark`'s Acquire: a worker that sees the new watermark sees the
        // pruning decisions that depend on it only after it (the chains themselves are ordered by
        // the GC lock).
        wm.stamp.fetch_max(m, Ordering::Release);
        if self.aggressive_ns != 0 {
            // Timed after the clock was read: see `aged_clock`.
            let aged = self.aged_clock(self.now_ns(), clock);
            // Release: pairs with `prune_mark`'s Acquire.
            self.prune_mark.fetch_max(m.max(aged.min(protected)), Ordering::Release);
        }
    }

    /// Records `clock`, the clock's value read before `now` (so every snapshot of a
    /// transaction that began after `now` is at or above it), and returns the newest sample
    /// at least the age bound old (`LOADED` if there is none yet). A sample is kept every
    /// 1/32 of the bound, so the answer is at most that much older than asked for.
    pub(super) fn aged_clock(&self, now: u64, clock: u64) -> u64 {
        let mut q = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if q.back().is_none_or(|&(t, _)| now >= t + self.aggressive_ns / 32) {
            q.push_back((now, clock));
        }
        let Some(due) = now.checked_sub(self.aggressive_ns) else { return LOADED };
        while q.len() > 1 && q[1].0 <= due {
            q.pop_front();
        }
        match q.front() {
            Some(&(t, c)) if t <= due => c,
            _ => LOADED,
        }
    }

    /// The version of `rec` a transaction with snapshot `s` sees (`own`: its pending stamp;
    /// its own pending version is seen), or `None`. Tombstones are returned: the caller reads
    /// them as absence. [`TooOld`] if the chain ends, without a version `s` sees, at a version
    /// whose older ones the GC cut off: only the aggressive GC cuts versions a snapshot in use
    /// may see (the watermark is at or below every snapshot), so the answer is exact there.
    #[inline]
    pub fn visible<'a>(
        &self,
        rec: &'a MvRecord<V>,
        s: u64,
        own: u64,
    ) -> Result<Option<&'a Version<V>>, TooOld> {
        self.visible_as(rec, s, own, false)
    }

    /// [`MvShared::visible`], or with `speculative` Hekaton's speculative reads: a pending
    /// version whose owner is committing at or below `s` is returned at once instead of
    /// waited for (the reader takes a commit dependency on it, see `protocols::hekaton`).
    #[inline]
    pub fn visible_as<'a>(
        &self,
        rec: &'a MvRecord<V>,
        s: u64,
        own: u64,
        speculative: bool,
    ) -> Result<Option<&'a Version<V>>, TooOld> {
        let mut v = rec.newest();
        let mut spin = crate::util::SpinWait::default();
        while let Some(ver) = v {
            loop {
                // Acquire: pairs with the committer's Release stamp store (`MvWorker`'s stamping)
                // and `retract`'s ABORTED: a committed stamp seen means the payload written before
                // it is too.
                let st = ver.stamp.load(Ordering::Acquire);
                if st <= s {
                    return Ok(Some(ver));
                }
                if st == own {
                    return Ok(Some(ver));
                }
                if st & PENDING == 0 {
                    break; // committed after the snapshot, or aborted
                }
                match self.txns.owner(st) {
                    Owner::Active => break,
                    Owner::Committing(c) if c > s => break,
                    Owner::Committing(_) if speculative => return Ok(Some(ver)),
                    // Its stamp is being stored (or it just was): look again, yielding the
                    // core if the owner was descheduled.
                    Owner::Committing(_) | Owner::Done => spin.spin(),
                }
            }
            v = next_of(ver);
            // Relaxed: `prune` flags the version before its Release store of the cut, which
            // `next_of`'s Acquire load saw.
            if v.is_none() {
                let f = ver.flags.load(Ordering::Relaxed);
                if f & TRIMMED != 0 && f >> BIRTH_SHIFT <= s {
                    return Err(TooOld);
                }
            }
        }
        Ok(None)
    }

    /// The commit timestamp `v` has, or will have if its owner is committing; `None` if it was
    /// aborted (or its owner is still running).
    pub fn commit_stamp(&self, v: &Version<V>) -> Option<u64> {
        let mut spin = crate::util::SpinWait::default();
        loop {
            let st = v.stamp.load(Ordering::Acquire);
            if is_committed(st) {
                return Some(st);
            }
            if st & PENDING == 0 {
                return None;
            }
            match self.txns.owner(st) {
                Owner::Active => return None,
                Owner::Committing(c) => return Some(c),
                // Stamped or aborted now: look again.
                Owner::Done => spin.spin(),
            }
        }
    }

    /// Whether a transaction with snapshot `s`, commit timestamp `c` and pending stamp `own`
    /// would see `rec` differently at `c` than at `s`: a version of it committed in `(s, c)`,
    /// or is pending with an owner committing below `c` (waiting for owners that are stamping,
    /// none can be waited on for long). Hekaton's repeated scans ask this of every row in a
    /// scanned range.
    pub fn changed_between(&self, rec: &MvRecord<V>, s: u64, c: u64, own: u64) -> bool {
        let mut v = rec.newest();
        let mut spin = crate::util::SpinWait::default();
        while let Some(ver) = v {
            // Acquire: pairs with the committer's Release stamp store, as in `visible_as`.
            let st = ver.stamp.load(Ordering::Acquire);
            if st == own {
                // Installed over a version at or below `s` (first updater wins): nothing
                // committed beneath it since.
                return false;
            }
            if is_committed(st) {
                if st <= s {
                    return false;
                }
                if st < c {
                    return true;
                }
            } else if st & PENDING != 0 {
                match self.txns.owner(st) {
                    Owner::Active => {}
                    Owner::Committing(o) if o > c => {}
                    // At or below `s` it was seen (speculatively), as a committed version is.
                    Owner::Committing(o) => return o > s,
                    Owner::Done => {
                        spin.spin();
                        continue;
                    }
                }
            }
            v = next_of(ver);
        }
        false
    }

    /// Prefetches the newest version of `rec` of `table`: its header line and the lines of the
    /// columns `cols` (the third stage of a batched prefetch, after the index and the slot).
    #[inline]
    pub fn prefetch_newest(
        &self,
        table: TableId,
        rec: &MvRecord<V>,
        p: &Projection,
        cols: Columns,
    ) {
        if let Some(v) = rec.newest() {
            self.stores[table.index()].row(v).prefetch(p, cols);
        }
    }

    /// The newest committed version of `rec` (checkpoints, checks after a run), or `None`.
    #[inline]
    pub fn latest_committed<'a>(&self, rec: &'a MvRecord<V>) -> Option<&'a Version<V>> {
        let mut v = rec.newest();
        while let Some(ver) = v {
            // Acquire: pairs with the committer's Release stamp store, as in `visible_as`.
            if is_committed(ver.stamp.load(Ordering::Acquire)) {
                return Some(ver);
            }
            v = next_of(ver);
        }
        None
    }

    /// Copies the latest committed image of `rec` of `table` into `buf`; its stamp, or `None`
    /// for no committed row (none, or a tombstone).
    pub fn read_committed(&self, table: TableId, rec: &MvRecord<V>, buf: &mut [u8]) -> Option<u64> {
        let v = self.latest_committed(rec)?;
        if v.flags.load(Ordering::Relaxed) & TOMBSTONE != 0 {
            return None;
        }
        self.stores[table.index()].row(v).read_into(buf);
        // Relaxed: `latest_committed` loaded this committed stamp with Acquire already, and a
        // committed stamp never changes.
        Some(v.stamp.load(Ordering::Relaxed))
    }

    /// Loads `payload` as `row`'s only version (the bulk loader; the slot is fresh).
    pub fn load(&self, table: TableId, row: RowRef<'_, MvRecord<V>>, payload: &[u8]) {
        let store = &self.stores[table.index()];
        let v = store.alloc_shared();
        // SAFETY: a version nobody else holds (fresh from the store or its spare list).
        let ver = unsafe { v.as_ref() };
        init_version(ver, LOADED, 0);
        store.row(ver).write_from(payload);
        row.header.init(v);
    }
}
