//! Maintenance between transactions (§3.8): the clocks' refresh, the GC queue's chains cut at
//! `min_rts`, and what the quiescence grace periods let a worker free.

use super::*;

impl<'db> CicadaWorker<'db> {
    /// Refreshes `min_wts`/`min_rts` (and advances the quiescence generation) when due, cuts
    /// the chains the GC queue allows and frees what the grace periods allow (§3.8). Inside the
    /// transaction's quiescence mark and storage epoch.
    pub(super) fn maintain(&mut self) {
        let p = self.p;
        p.maybe_refresh();
        if p.orphaned.load(Ordering::Relaxed) {
            p.adopt(&mut self.gc, &mut self.dead, &mut self.garbage);
        }
        let min_rts = p.clocks.min_rts();
        let mut budget = if self.gc.len() > GC_BACKLOG { usize::MAX } else { GC_BUDGET };
        // The versions cut below are stamped after the last cut (`retire_stamp` must follow
        // every unlinking store it covers); until then they carry `u64::MAX`.
        let cut_from = self.dead.len();
        let now = clock_of(self.ts);
        if self.since == 0 {
            self.since = now;
        }
        while let Some(&item) = self.gc.front() {
            if item.wts >= min_rts || budget == 0 {
                break;
            }
            budget -= 1;
            self.gc.pop_front();
            let rec = as_ref(item.rec);
            if !rec.try_lock_gc() {
                // Contended: another thread collects this record (the paper discards the item).
                continue;
            }
            if item.wts > rec.min_wts() {
                // `item.version` is still on the chain (nobody cut at or above it) and every
                // transaction now or to come sees it or a newer version. Nobody else writes its
                // `next`: a version goes in below it only at a timestamp below its `wts`, so
                // below `min_rts`, which no running transaction has; and cutting takes the GC
                // lock. So a load and a store, not a swap (a full barrier on x86).
                let next = &as_ref(item.version).next;
                // Acquire: pairs with the Release CAS that linked the version below.
                let cut = next.load(Ordering::Acquire);
                // Relaxed: readers that still reach the cut versions are inside transactions
                // that the versions' grace period outlasts (the stamp's fence orders this store
                // before it); the GC lock's release publishes it to the next collector.
                next.store(std::ptr::null_mut(), Ordering::Relaxed);
                rec.raise_min_wts(item.wts);
                rec.unlock_gc();
                if let Some(first) = NonNull::new(cut) {
                    let n = retire_chain(&mut self.dead, item.table, first, u64::MAX);
                    if clock_of(item.wts) >= self.since {
                        let lag = now.saturating_sub(clock_of(item.wts));
                        self.lag = (self.lag.0 + n, self.lag.1 + lag * n, self.lag.2.max(lag));
                    }
                }
            } else {
                rec.unlock_gc();
            }
        }
        let slots_from = self.garbage.slots.len();
        while let Some(&(t, id, at)) = self.garbage.nodes.front() {
            if at >= min_rts {
                break;
            }
            // No transaction reads the tree below `at`, where the node left it: only one that
            // read a node linking it before that commit can still reach it, and the grace
            // period of the stamp below outlasts those.
            let rec = p.trees[t.index()].rows.get(RowId(id)).header;
            if !rec.try_lock_gc() {
                break;
            }
            self.garbage.nodes.pop_front();
            if let Ok(Some(head)) = rec.newest() {
                if rec.unlink(Some(head)) {
                    // Stale GC items of the node (at or below its newest `wts`) never act on
                    // the slot again.
                    rec.raise_min_wts(wts(head));
                    retire_chain(&mut self.dead, p.node_table(t), NonNull::from(head), u64::MAX);
                }
            }
            rec.unlock_gc();
            self.garbage.slots.push_back((t, RowId(id), u64::MAX));
        }
        if self.dead.len() > cut_from || self.garbage.slots.len() > slots_from {
            let g = p.quiescence.retire_stamp();
            for s in self.garbage.slots.range_mut(slots_from..) {
                s.2 = g;
            }
            for d in self.dead.range_mut(cut_from..) {
                d.retired = g;
            }
        }
        while let Some(&(t, rid, g)) = self.garbage.slots.front() {
            if !p.quiescence.safe(g) {
                break;
            }
            self.garbage.slots.pop_front();
            self.node_slots[t.index()].release(rid);
        }
        while let Some(&d) = self.dead.front() {
            if !p.quiescence.safe(d.retired) {
                break;
            }
            self.dead.pop_front();
            let t = d.table.index();
            free_version(&mut self.pools[t], &p.stores[t], d);
        }
    }
}
