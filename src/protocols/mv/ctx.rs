//! A worker's half of the substrate ([`MvCtx`]): its slot in the transaction table, visibility
//! walks, pending versions installed and stamped or withdrawn, its GC queues and the pruning of
//! chains (see the module docs' "Garbage collection").

use super::*;

/// Sets a version up as `stamp`, `flags`, no older version, the protocol's fields reset.
#[inline]
pub(super) fn init_version<V: VersionExt>(v: &Version<V>, stamp: u64, flags: u64) {
    // Relaxed: the version is unreachable until the head CAS that publishes it (`install`, AcqRel,
    // pairs with `MvRecord::word`'s Acquire), which orders these stores before any reader's.
    v.stamp.store(stamp, Ordering::Relaxed);
    v.flags.store(flags, Ordering::Relaxed);
    v.next.store(std::ptr::null_mut(), Ordering::Relaxed);
    v.ext.reset();
}

/// Queue lengths above which a GC pass runs at every begin.
pub(super) const GC_BACKLOG: usize = 256;

impl<'db, V: VersionExt, T: Timestamps> MvCtx<'db, V, T> {
    /// The substrate state of the worker in storage slot `slot`.
    pub fn new(shared: &'db MvShared<V, T>, slot: usize) -> Self {
        shared.txns.used.fetch_max(slot + 1, Ordering::SeqCst);
        MvCtx {
            shared,
            slot,
            seq: 0,
            snapshot: 0,
            pools: shared.stores.iter().map(|_| VersionPool::default()).collect(),
            prune: VecDeque::new(),
            began_ns: 0,
            last_commit: 0,
            protected: false,
            lag: (0, 0, 0),
            since_ns: shared.now_ns(),
            read_only: (0, 0, 0, 0),
            dead: VecDeque::new(),
            freed: 0,
        }
    }

    /// The worker's slot (in the transaction table and the storage).
    #[inline(always)]
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The pending stamp of this worker's running transaction.
    #[inline(always)]
    pub fn own(&self) -> u64 {
        PENDING | (self.slot as u64) << SEQ_BITS | (self.seq & SEQ_MASK)
    }

    /// Starts a transaction: announces it, takes a snapshot, then collects garbage. The worker
    /// is inside its storage epoch (`WorkerCtx::enter`).
    #[inline]
    pub fn begin(&mut self, storage: &Storage<MvRecord<V>>) {
        self.begin_at(storage, false);
    }

    /// Makes this worker's next snapshots hold the aggressive GC back, or stop doing so: a
    /// transaction that aborted with `snapshot-too-old` is retried protected, and cannot be
    /// too old again (see the module docs). Call it between transactions.
    #[inline]
    pub fn protect(&mut self, on: bool) {
        if on != self.protected {
            self.protected = on;
            // SeqCst: before the next snapshot is drawn (see the module docs).
            self.shared.txns.slots[self.slot].protected.store(on, Ordering::SeqCst);
        }
    }

    /// Whether this worker's snapshots hold the aggressive GC back.
    #[inline]
    pub fn is_protected(&self) -> bool {
        self.protected
    }

    /// Starts a read-only transaction: at the GC watermark if no transaction committed after
    /// an anti-dependency successor above it (the safe-snapshot rule of
    /// `protocols::mv::worker`) and, with AggressiveGC, the watermark is not below its
    /// pruning mark and the worker is not protected; else as [`MvCtx::begin`] does. Returns
    /// whether the snapshot is the safe one.
    #[inline]
    pub fn begin_read_only(&mut self, storage: &Storage<MvRecord<V>>) -> bool {
        self.begin_at(storage, true)
    }

    #[inline(always)]
    pub(super) fn begin_at(&mut self, storage: &Storage<MvRecord<V>>, read_only: bool) -> bool {
        let sh = self.shared;
        let t = &sh.txns.slots[self.slot];
        // Refreshed before this worker publishes anything: a refresh after the first store
        // below would find the old watermark there and keep it (a worker that runs only
        // read-only transactions, alone, would never see the watermark move).
        self.began_ns = sh.now_ns();
        sh.maybe_refresh(self.began_ns);
        self.seq += 1;
        // Relaxed: a statistic (see `TxnSlot::began`), published with the snapshot below.
        t.began.store(self.began_ns, Ordering::Relaxed);
        t.cstamp.store(0, Ordering::Relaxed);
        // Release: orders the `cstamp` reset before the new state (see `TxnTable::owner`).
        t.state.store((self.seq & SEQ_MASK) << 2 | ACTIVE, Ordering::Release);
        // (The slot's line: the state and snapshot stores below share it.)
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Slot);
        // The two-step snapshot publication of the module docs.
        let w = sh.watermark();
        t.snapshot.store(w, Ordering::SeqCst);
        // SeqCst: after the watermark (pairs with `note_back_edge`, through the refresh that
        // saw the noting transaction's slot idle). The safe snapshot must also include this
        // worker's own last commit: a worker reads its own writes.
        let safe = read_only
            && w >= self.last_commit
            && !self.protected
            && sh.pin_watermark(w)
            && sh.back_edge.load(Ordering::SeqCst) <= w
            && (sh.aggressive_ns == 0 || w >= sh.prune_mark());
        if safe {
            self.snapshot = w;
            // Relaxed `since_ns`: a statistic (the safe snapshot's staleness); nothing is read
            // through it.
            let stale = self.began_ns.saturating_sub(sh.watermark.since_ns.load(Ordering::Relaxed));
            let ro = &mut self.read_only;
            (ro.0, ro.2, ro.3) = (ro.0 + 1, ro.2 + stale, ro.3.max(stale));
        } else {
            self.read_only.1 += u64::from(read_only);
            self.snapshot = sh.clock.snapshot();
            // Release (a refresh needs no more): one that reads the watermark stored SeqCst
            // above keeps the watermark lower, one that reads this fresh snapshot keeps it at
            // most at the snapshot in use.
            t.snapshot.store(self.snapshot, Ordering::Release);
        }
        // Relaxed `orphaned`: a hint (see `collect`).
        if !self.prune.is_empty() || !self.dead.is_empty() || sh.orphaned.load(Ordering::Relaxed) {
            self.collect(storage);
        }
        safe
    }

    /// Announces the commit and draws its timestamp. Every check that can abort is done.
    #[inline]
    pub fn committing(&mut self) -> u64 {
        let t = &self.shared.txns.slots[self.slot];
        // SeqCst: before the clock is read (see `TxnTable::owner`).
        t.state.store((self.seq & SEQ_MASK) << 2 | COMMITTING, Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Slot);
        let c = self.shared.clock.commit();
        t.cstamp.store(c, Ordering::SeqCst);
        self.last_commit = c;
        c
    }

    /// The running transaction, committed at `c` (its snapshot if it certified nothing), read
    /// versions without tracking them: publishes `c` and its snapshot for
    /// [`TxnTable::untracked`]. Call it after the commit and before [`MvCtx::finish`], so that
    /// whoever sees the transaction ended (or this slot's next transaction) sees the pair.
    pub fn untracked_committed(&self, c: u64) {
        let t = &self.shared.txns.slots[self.slot];
        // Only this worker writes the pair: a sequence lock with odd while writing.
        let seq = t.untracked_seq.load(Ordering::Relaxed);
        t.untracked_seq.store(seq + 1, Ordering::Relaxed);
        // Release fence: the odd sequence before the pair (pairs with the readers' Acquire
        // fence).
        std::sync::atomic::fence(Ordering::Release);
        t.untracked_commit.store(c, Ordering::Relaxed);
        t.untracked_snapshot.store(self.snapshot, Ordering::Relaxed);
        // Release: the pair before the even sequence (pairs with the readers' Acquire load),
        // and before `finish`'s state store.
        t.untracked_seq.store(seq + 2, Ordering::Release);
    }

    /// Ends the transaction (after its versions are stamped or taken off).
    #[inline]
    pub fn finish(&mut self) {
        let t = &self.shared.txns.slots[self.slot];
        // Release: the versions' stamps before a reader sees the owner done.
        t.state.store((self.seq & SEQ_MASK) << 2 | IDLE, Ordering::Release);
        t.snapshot.store(NO_SNAPSHOT, Ordering::Release);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Slot);
    }

    /// A new pending version of `table` for this transaction, flags `flags`.
    #[inline]
    pub fn alloc(&mut self, table: TableId, flags: u64) -> NonNull<Version<V>> {
        let v = self.pools[table.index()].alloc(&self.shared.stores[table.index()]);
        // SAFETY: a version nobody else holds (from this worker's pool).
        init_version(unsafe { v.as_ref() }, self.own(), flags);
        v
    }

    /// Gives back a version that was never published.
    #[inline]
    pub fn unused(&mut self, table: TableId, v: NonNull<Version<V>>) {
        self.pools[table.index()].free(&self.shared.stores[table.index()], v);
    }

    /// The payload of `v` of `table`.
    #[inline(always)]
    pub fn row<'v>(&self, table: TableId, v: &'v Version<V>) -> RowRef<'v, Version<V>> {
        self.shared.stores[table.index()].row(v)
    }

    /// Installs the pending version `v` as the newest of `rec`, first updater wins: the
    /// newest version must be committed at or below the snapshot (or the chain empty).
    #[inline]
    pub fn install<'a>(&self, rec: &'a MvRecord<V>, v: NonNull<Version<V>>) -> Install<'a, V> {
        let own = self.own();
        let mut spin = crate::util::SpinWait::default();
        loop {
            let w = rec.word();
            if w & UNLINKED != 0 {
                return Install::Unlinked;
            }
            let prev = match deref::<V>(w) {
                None => 0,
                Some(h) => {
                    // Acquire: pairs with the committer's Release store of its stamp (`MvWorker`'s
                    // stamping, `retract`'s ABORTED): a committed stamp seen means the version's
                    // fields are too.
                    let st = h.stamp.load(Ordering::Acquire);
                    if st == own {
                        return Install::Own(h);
                    }
                    if st == ABORTED {
                        // Its writer is taking it off the chain.
                        spin.spin();
                        continue;
                    }
                    if st & PENDING != 0 {
                        // Another's pending version. One that is committing cannot wait for
                        // us: wait for it to finish, so that a retry's snapshot includes it
                        // (aborting at once would retry into the same pending version).
                        if let Owner::Committing(_) = self.shared.txns.owner(st) {
                            spin.spin();
                            continue;
                        }
                        return Install::Conflict;
                    }
                    if st > self.snapshot {
                        return Install::Conflict;
                    }
                    st
                }
            };
            // SAFETY: our own unpublished version.
            unsafe { v.as_ref() }.next.store((w & PTR) as *mut Version<V>, Ordering::Relaxed);
            // Release: publishes the version's fields and payload (pairs with `word`'s
            // Acquire). The low bits are kept: a GC lock taken meanwhile fails the CAS and
            // the loop looks again.
            if rec
                .head
                .compare_exchange(
                    w,
                    v.as_ptr() as u64 | (w & !PTR),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Install::Installed(prev);
            }
        }
    }

    /// Takes this transaction's pending version `v` (the newest of `rec`) off the chain
    /// (abort); it is freed after the grace periods.
    pub fn retract(
        &mut self,
        table: TableId,
        rec: &MvRecord<V>,
        v: NonNull<Version<V>>,
        epochs: &Epochs,
    ) {
        // SAFETY: our own version, still on the chain.
        let ver = unsafe { v.as_ref() };
        ver.stamp.store(ABORTED, Ordering::Release);
        let next = ver.next.load(Ordering::Relaxed) as u64;
        loop {
            let w = rec.word();
            debug_assert_eq!(w & PTR, v.as_ptr() as u64, "a pending version stays the newest");
            // AcqRel, as `install`'s: a GC lock taken meanwhile fails the CAS (and it retries);
            // the version below was published when it was installed, so nothing new is.
            if rec
                .head
                .compare_exchange(w, next | (w & !PTR), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                break;
            }
        }
        self.dead.push_back((table, v, epochs.retire_stamp()));
    }

    /// Queues `rid` of `table`, written at `stamp`, for pruning.
    #[inline]
    pub fn written(&mut self, table: TableId, rid: RowId, stamp: u64) {
        self.prune.push_back((table, rid, stamp, self.began_ns));
    }

    /// Prunes the rows the pruning mark ([`MvShared::prune_mark`]) has passed and frees the versions the epochs allow. The
    /// worker is inside its storage epoch.
    pub fn collect(&mut self, storage: &Storage<MvRecord<V>>) {
        // Relaxed: a hint; the lock orders the queues' contents.
        if self.shared.orphaned.load(Ordering::Relaxed) {
            self.adopt();
        }
        let w = self.shared.prune_mark();
        let mut budget = if self.prune.len() > GC_BACKLOG { usize::MAX } else { 64 };
        let mut epoch = None;
        while let Some(&(t, rid, c, written)) = self.prune.front() {
            if c > w || budget == 0 {
                break;
            }
            budget -= 1;
            self.prune.pop_front();
            let rec = storage.table(t).rows.get(rid).header;
            if let Some(cut) = prune(rec, w) {
                let e = *epoch.get_or_insert_with(|| storage.epochs().retire_stamp());
                let n = self.retire_chain(t, cut, e);
                // This transaction's begin time stands for now (a clock read saved).
                if written >= self.since_ns {
                    let lag = self.began_ns.saturating_sub(written);
                    self.lag = (self.lag.0 + n, self.lag.1 + n * lag, self.lag.2.max(lag));
                }
            }
        }
        let safe = storage.epochs().min_active();
        while let Some(&(t, v, e)) = self.dead.front() {
            if e >= safe {
                break;
            }
            self.dead.pop_front();
            self.pools[t.index()].free(&self.shared.stores[t.index()], v);
            self.freed += 1;
        }
    }

    /// Takes over the GC queues departed workers left (their entries wait behind this
    /// worker's, which can only delay them).
    #[cold]
    pub(super) fn adopt(&mut self) {
        let mut o = self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner());
        self.prune.extend(o.prune.drain(..));
        self.dead.extend(o.dead.drain(..).map(|(t, p, e)| (t, p.0, e)));
        // Relaxed: a hint; the `orphans` lock orders the queues themselves.
        self.shared.orphaned.store(false, Ordering::Relaxed);
    }

    /// Queues every version from `first` on (a chain cut off, owned by the caller) for freeing
    /// after the grace periods of epoch `e`; returns how many.
    pub(super) fn retire_chain(&mut self, t: TableId, first: NonNull<Version<V>>, e: u64) -> u64 {
        let mut v = Some(first);
        let mut n = 0;
        while let Some(p) = v {
            // SAFETY: the cut chain belongs to us and is freed only after the grace periods.
            let next = unsafe { p.as_ref() }.next.load(Ordering::Acquire);
            self.dead.push_back((t, p, e));
            v = NonNull::new(next);
            n += 1;
        }
        n
    }

    /// The reclaimer's unlink step for a deleted row (see the module docs): unlinks `rec` if
    /// its newest version is a tombstone at or below the watermark (or it has none), and
    /// retires its versions. `deleted` is handed the tombstone's commit timestamp before the row
    /// is marked unlinked: a transaction that then finds the key absent, with no version to tell
    /// who deleted it, learns the deletion's timestamp from wherever `deleted` put it (the
    /// phantom bucket's clock).
    pub fn unlink(
        &mut self,
        t: TableId,
        rec: &MvRecord<V>,
        epochs: &Epochs,
        deleted: impl Fn(u64),
    ) -> Unlink {
        let w = self.shared.watermark();
        // Acquire: the GC lock; pairs with the Release that drops it (here and in `prune`), so this
        // holder sees the chain the last holder left.
        let old = rec.head.fetch_or(GC_LOCK, Ordering::Acquire);
        if old & GC_LOCK != 0 {
            return Unlink::Busy;
        }
        if old & UNLINKED != 0 {
            rec.head.fetch_and(!GC_LOCK, Ordering::Release);
            return Unlink::Gone;
        }
        loop {
            let cur = rec.word();
            let verdict = match deref::<V>(cur) {
                None => None,
                Some(h) => {
                    // Acquire: pairs with the committer's Release stamp store, as in `install`;
                    // `flags` is written before the version is published (Relaxed).
                    let st = h.stamp.load(Ordering::Acquire);
                    let dead = h.flags.load(Ordering::Relaxed) & TOMBSTONE != 0;
                    if is_committed(st) && !dead {
                        Some(Unlink::Revived)
                    } else if is_committed(st) && st <= w {
                        // Before the unlinked bit is published (a failed CAS below only hands
                        // over a timestamp at or below the watermark again, which is harmless).
                        deleted(st);
                        None
                    } else {
                        // Pending (an insert over it may still abort), aborted (being taken
                        // off) or a tombstone younger than the oldest snapshot.
                        Some(Unlink::Busy)
                    }
                }
            };
            if let Some(v) = verdict {
                rec.head.fetch_and(!GC_LOCK, Ordering::Release);
                return v;
            }
            // AcqRel: a writer that installs meanwhile makes the CAS fail, and we look again.
            if rec.head.compare_exchange(cur, UNLINKED, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            {
                if let Some(first) = NonNull::new((cur & PTR) as *mut Version<V>) {
                    self.retire_chain(t, first, epochs.retire_stamp());
                }
                return Unlink::Unlinked;
            }
        }
    }

    /// Gives this worker's pooled versions back to the stores and its GC queues to the next
    /// worker that collects (it is leaving).
    pub fn release(&mut self) {
        for (pool, store) in self.pools.iter_mut().zip(&self.shared.stores) {
            pool.release(store);
        }
        if !self.prune.is_empty() || !self.dead.is_empty() {
            let mut o = self.shared.orphans.lock().unwrap_or_else(|e| e.into_inner());
            o.prune.extend(self.prune.drain(..));
            o.dead.extend(self.dead.drain(..).map(|(t, v, e)| (t, Ptr(v), e)));
            // Relaxed: a hint that `collect` reads; the `orphans` lock orders the queues
            // themselves.
            self.shared.orphaned.store(true, Ordering::Relaxed);
        }
        // Relaxed: statistics, read after the worker is joined (`MvShared::report`).
        let (count, sum, max) = std::mem::take(&mut self.lag);
        let lag = &self.shared.lag;
        lag.count.fetch_add(count, Ordering::Relaxed);
        lag.sum_ns.fetch_add(sum, Ordering::Relaxed);
        lag.max_ns.fetch_max(max, Ordering::Relaxed);
        let (safe, fresh, sum, max) = std::mem::take(&mut self.read_only);
        let ro = &self.shared.read_only;
        ro.safe.fetch_add(safe, Ordering::Relaxed);
        ro.fresh.fetch_add(fresh, Ordering::Relaxed);
        ro.sum_ns.fetch_add(sum, Ordering::Relaxed);
        ro.max_ns.fetch_max(max, Ordering::Relaxed);
    }
}

impl<V: VersionExt, T: Timestamps> Drop for MvCtx<'_, V, T> {
    fn drop(&mut self) {
        self.release();
    }
}

/// Cuts `rec`'s chain after the newest version committed at or below `w`, under the row's GC
/// lock; returns the cut-off versions (now owned by the caller), if any.
pub(super) fn prune<V: VersionExt>(rec: &MvRecord<V>, w: u64) -> Option<NonNull<Version<V>>> {
    if rec.pruned.load(Ordering::Relaxed) >= w {
        return None;
    }
    // Acquire: pairs with the Release that dropped the lock (the last pruner's cut is seen).
    let old = rec.head.fetch_or(GC_LOCK, Ordering::Acquire);
    // (The lock, the cut and the unlock: one line, written once per pruned row.)
    crate::util::shared_writes::note(crate::util::shared_writes::Site::Gc);
    if old & (GC_LOCK | UNLINKED) != 0 {
        if old & GC_LOCK == 0 {
            rec.head.fetch_and(!GC_LOCK, Ordering::Release);
        }
        return None; // another worker prunes it, or it is gone
    }
    let mut v = deref::<V>(old);
    let mut cut = None;
    while let Some(ver) = v {
        // Acquire: pairs with the committer's Release stamp store (a committed stamp seen, the
        // version's fields are too).
        let st = ver.stamp.load(Ordering::Acquire);
        if is_committed(st) && st <= w {
            if let Some(first) = next_of(ver) {
                // The chain's birth, from its oldest version (committed: only the newest can
                // be pending). Under the GC lock nothing else changes the chain below `ver`.
                let mut oldest = first;
                while let Some(o) = next_of(oldest) {
                    oldest = o;
                }
                // Relaxed `flags` and `stamp` of the oldest version: only GC-lock holders write
                // TRIMMED (this one holds it; the lock's Acquire orders the last holder's store),
                // and a committed version's stamp no longer changes.
                let f = oldest.flags.load(Ordering::Relaxed);
                let birth = if f & TRIMMED != 0 {
                    f >> BIRTH_SHIFT
                } else {
                    oldest.stamp.load(Ordering::Relaxed)
                };
                // Before the cut (Release below): a reader that finds the chain ending here
                // knows it was cut, and since when the row exists (`MvShared::visible`).
                ver.flags.fetch_or(TRIMMED | birth << BIRTH_SHIFT, Ordering::Relaxed);
                cut = NonNull::new(ver.next.swap(std::ptr::null_mut(), Ordering::AcqRel));
            }
            break;
        }
        v = next_of(ver);
    }
    // Relaxed: only a hint that lets later pruners skip (the lock orders the cut itself).
    rec.pruned.fetch_max(w, Ordering::Relaxed);
    // Release: the cut is visible to the next pruner.
    rec.head.fetch_and(!GC_LOCK, Ordering::Release);
    cut
}
