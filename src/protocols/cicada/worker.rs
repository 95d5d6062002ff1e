//! The `cicada` worker: the read phase, validation, the write phase and the maintenance of one
//! thread (see the module docs of `protocols::cicada` for the protocol and why it is correct).

use super::index::node_words;
use super::record::{
    init_version, is_inline, next, overwrite, row_of, set_status, stable_wts, status, still, wts,
    CVersion, CicadaExt, CicadaRecord, Link, Unlinked, ABORTED, COMMITTED, DELETED, LOADED,
    PENDING, UNUSED, WRITING,
};
use super::Cicada;
use crate::engine::context::WorkerCtx;
use crate::engine::procedure::ALL_COLUMNS;
use crate::engine::Worker;
use crate::error::{Abort, AbortReason};
use crate::history::{Stamp, INITIAL, UNBORN};
use crate::protocols::cicada::btree::{NodeId, Nodes};
use crate::protocols::cicada::clock::{clock_of, ThreadClock, Tsc};
use crate::protocols::common::scan::{self, ScanSteps};
use crate::protocols::common::{apply_update, check_len, table, Scratch};
use crate::storage::inject::CommitPhase;
use crate::storage::phantom::Batch;
use crate::storage::projection::Columns;
use crate::storage::row_store::SlotCache;
use crate::storage::version::VersionPool;
use crate::storage::{RowId, Table, TableId};
use crate::util::SpinWait;
use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// How many of the most contended writes validation puts first (the paper's k = 8).
const SORT_TOP: usize = 8;
/// Commits in a row after which sorting and the early consistency check are skipped (§3.5).
const SKIP_AFTER: u32 = 5;
/// GC items processed per begin while the queue is short.
const GC_BUDGET: usize = 64;
/// A queue longer than this is worked off whole.
const GC_BACKLOG: usize = 4096;

/// A version read: the record and the version visible at the transaction's timestamp (`None`:
/// nothing visible, the key was absent), and where the search can resume (`later`, the version
/// just above the timestamp: incremental version search, §3.5).
#[derive(Clone, Copy)]
struct Read {
    rec: NonNull<CicadaRecord>,
    seen: Option<NonNull<CVersion>>,
    later: Option<NonNull<CVersion>>,
    /// The stamp of `seen` when it was read (Cicada-SV overwrites versions in place, so the
    /// version alone does not say what was read).
    wts: u64,
}

/// A write: its new version (the transaction's own until installed), and what it needs at
/// validation.
#[derive(Clone, Copy)]
struct Write {
    table: TableId,
    key: u64,
    rid: RowId,
    rec: NonNull<CicadaRecord>,
    version: NonNull<CVersion>,
    later: Option<NonNull<CVersion>>,
    /// The row was present at our timestamp (an update or deletion) rather than absent (an
    /// insert): validation checks that the version it goes in above agrees.
    over_present: bool,
    /// The new version is a deletion.
    tombstone: bool,
    /// The record is new: this transaction created it (and put it in the index).
    created: bool,
    /// The record is new and not in the index yet (deferred index updates, §3.6): validation
    /// puts it there before installing its version; until then only this transaction finds it.
    unindexed: bool,
    /// The columns written (for the log; every column for an insert).
    cols: Columns,
    /// Installed in the chain (then rolled back by marking it ABORTED).
    installed: bool,
    /// Cicada-SV: the record's write lock is held; the write phase overwrites its inlined
    /// version with `version` (a private copy), or the rollback releases it.
    locked: bool,
    /// The stamp of the version it went in above, for the history.
    prev: Stamp,
    /// The newest version's write timestamp when validation began (the contention sort).
    heat: u64,
    /// A promotion (§3.3): the visible version's data copied into the record's inlined
    /// version. Optional: if it cannot be installed or validated it is dropped, not the
    /// transaction. A later write of the key by this transaction makes it a write like others.
    promotion: bool,
    /// A promotion given up at validation (its version rolled back already).
    dropped: bool,
}

/// A phantom bucket observed: (table, bucket word, its version then).
#[derive(Clone, Copy)]
struct Observed {
    table: TableId,
    slot: u32,
    version: u64,
}

/// A version cut off a chain, waiting for the grace period of its quiescence generation
/// `retired` to pass. Whether it is an inlined one is noted when it is cut (its line is in the
/// cache then), so that freeing it does not touch it.
#[derive(Clone, Copy)]
pub(super) struct Dead {
    table: TableId,
    inline: bool,
    version: NonNull<CVersion>,
    retired: u64,
}

/// Index nodes taken out of their trees (see `btree::Nodes::retire`): each with the
/// timestamp of the commit that took it out, freed once `min_rts` passes it (no transaction
/// reads the tree below it) and the grace period of its versions' retirement then; its slot,
/// with the generation of that retirement, reused after it.
#[derive(Default)]
pub(super) struct NodeGarbage {
    nodes: VecDeque<(TableId, NodeId, u64)>,
    slots: VecDeque<(TableId, RowId, u64)>,
}

impl NodeGarbage {
    pub(super) fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.slots.is_empty()
    }

    /// Takes `other`'s nodes and slots (a departed worker's).
    pub(super) fn append(&mut self, other: &mut NodeGarbage) {
        self.nodes.append(&mut other.nodes);
        self.slots.append(&mut other.slots);
    }
}

/// A committed version whose older versions become garbage once `min_rts` passes its `wts`.
#[derive(Clone, Copy)]
pub(super) struct GcItem {
    rec: NonNull<CicadaRecord>,
    version: NonNull<CVersion>,
    wts: u64,
    table: TableId,
}

/// What the search for a record's visible version found.
struct Found<'a> {
    seen: Option<&'a CVersion>,
    later: Option<&'a CVersion>,
    /// A version above the timestamp is committed or pending (the write-latest-only rule).
    newer: bool,
    /// The stamp of `seen` as found.
    wts: u64,
    /// `seen`'s status as found was COMMITTED (a row), not DELETED. Callers use this, never
    /// `seen`'s status read again: Cicada-SV overwrites a version in place, and its status is
    /// only consistent with `wts` inside the search's seqlock window.
    present: bool,
}

impl<'a> Found<'a> {
    const NOTHING: Self = Found { seen: None, later: None, newer: false, wts: 0, present: false };

    /// The visible version, if it holds a row.
    #[inline(always)]
    fn row(&self) -> Option<&'a CVersion> {
        self.seen.filter(|_| self.present)
    }

    /// The key is absent at the timestamp: nothing visible, or a deletion.
    #[inline(always)]
    fn absent(&self) -> bool {
        !self.present
    }
}

/// A `cicada` worker.
pub struct CicadaWorker<'db> {
    // Dropped first: its clock slot is vacated before `ctx` gives the worker slot (and so the
    // clock id) back.
    clock: ThreadClock<'db, Tsc>,
    ctx: WorkerCtx<'db, CicadaRecord>,
    p: &'db Cicada,
    pools: Vec<VersionPool<CicadaExt>>,
    /// Per table, slots for the nodes of its multi-version index this worker creates.
    node_slots: Vec<SlotCache>,
    /// Index nodes the running transaction takes out of their trees: (data table, node).
    retiring: Vec<(TableId, NodeId)>,
    /// Index nodes committed transactions took out, waiting to be freed.
    garbage: NodeGarbage,
    /// The running transaction's timestamp.
    ts: u64,
    active: bool,
    /// Declared read-only: writes are refused.
    read_only: bool,
    /// Runs at `thread.rts`: nothing is tracked or validated.
    untracked: bool,
    reads: Vec<Read>,
    writes: Vec<Write>,
    /// Tables written (bit `t % 64`), so a read skips the write-set search when it can.
    written: u64,
    /// Tables with inserts not in the index yet (bit `t % 64`), so a lookup skips the search
    /// for them when it can.
    unindexed: u64,
    observed: Vec<Observed>,
    scratch: Scratch,
    /// Commits in a row (§3.5's adaptive skipping).
    streak: u32,
    /// The clock could not give a timestamp: every commit fails (see `ClockExhausted`).
    exhausted: bool,
    gc: VecDeque<GcItem>,
    /// Versions cut off, freed to their pools (or, inlined, marked UNUSED) once the storage
    /// epochs pass the one recorded.
    dead: VecDeque<Dead>,
    /// Read-only transactions at `thread.rts`, those that could not use it, and their
    /// staleness (sum and largest, ns).
    ro: (u64, u64, u64, u64),
    /// Versions cut and their lag (count, sum ns, max ns) from the superseding commit.
    lag: (u64, u64, u64),
    /// Promotions committed, and given up.
    promotions: (u64, u64),
    /// Called with the timestamp once a transaction validated, before its versions are
    /// committed (scripted tests hold it there, its versions pending).
    validated: Option<Box<dyn FnMut(u64) + Send + 'db>>,
}

/// The version visible at `ts` in the chain starting at `from` (versions above `ts` skipped,
/// pending ones waited for or, with `wait` off, an abort; aborted ones skipped).
#[inline(always)]
fn search<'a>(mut cur: Option<&'a CVersion>, ts: u64, wait: bool) -> Result<Found<'a>, Abort> {
    let mut found = Found::NOTHING;
    while let Some(v) = cur {
        if wts(v) >= ts {
            // Above the timestamp, or this transaction's own pending version (equal stamp).
            if wts(v) > ts {
                found.later = Some(v);
                found.newer |= matches!(status(v), PENDING | COMMITTED | DELETED);
            }
            cur = next(v);
            continue;
        }
        let mut spin = SpinWait::default();
        loop {
            match status(v) {
                PENDING if wait => spin.spin(),
                PENDING => return Err(Abort::new(AbortReason::WriteConflict)),
                s @ (COMMITTED | DELETED) => {
                    found.seen = Some(v);
                    found.wts = wts(v);
                    found.present = s == COMMITTED;
                    return Ok(found);
                }
                // ABORTED; UNUSED cannot be on a chain a walker reaches inside its epoch.
                _ => break,
            }
        }
        cur = next(v);
    }
    Ok(found)
}

/// Cicada-SV's visibility: `rec`'s one version (its inlined one, `head`) is visible at `ts` if
/// its stamp is below `ts`; if above, the version `ts` should see was overwritten and the
/// transaction aborts (`snapshot-too-old`). A write lock held by a transaction with a smaller
/// timestamp is about to overwrite the version below us: waited out (like a pending version),
/// or with `wait` off an abort. An aborted version (a first insert that failed) is absence.
#[inline(always)]
fn sv_search<'a>(
    rec: &CicadaRecord,
    head: Option<&'a CVersion>,
    ts: u64,
    wait: bool,
) -> Result<Found<'a>, Abort> {
    let mut found = Found::NOTHING;
    let Some(v) = head else { return Ok(found) };
    let mut spin = SpinWait::default();
    loop {
        let below = rec.locked_below(ts);
        let stamp = stable_wts(v);
        // The status and the stamp as one seqlock read: the status load (Acquire) sees an
        // overwrite's status store only if `still` then sees its `WRITING` or its new stamp.
        let s = status(v);
        if below || stamp == WRITING || (s == PENDING && stamp < ts) {
            if !wait {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            spin.spin();
            continue;
        }
        if !still(v, stamp) {
            // Overwritten between the two reads: read again.
            continue;
        }
        match s {
            // A first version's insert, aborted, or pending above our timestamp.
            ABORTED | PENDING => return Ok(found),
            _ if stamp > ts => return Err(Abort::new(AbortReason::SnapshotTooOld)),
            _ => {
                found.seen = Some(v);
                found.wts = stamp;
                found.present = s == COMMITTED;
                return Ok(found);
            }
        }
    }
}

/// The history's name of the version with write timestamp `wts` (the loaded one is
/// `INITIAL`).
#[inline(always)]
fn stamp_at(wts: u64) -> Stamp {
    if wts == LOADED {
        INITIAL
    } else {
        u128::from(wts)
    }
}

/// The history's name of a version (the loaded one is `INITIAL`).
#[inline(always)]
fn stamp_of(v: Option<&CVersion>) -> Stamp {
    v.map_or(UNBORN, |v| stamp_at(wts(v)))
}

#[inline(always)]
fn ptr(v: &CVersion) -> NonNull<CVersion> {
    NonNull::from(v)
}

#[inline(always)]
fn as_ref<'a, T>(p: NonNull<T>) -> &'a T {
    // SAFETY: every pointer a worker keeps names a record slot (alive as long as its table) or
    // a version it reached inside its transaction, which is not freed before the transaction
    // ends (cut versions wait for a quiescence grace period: `Quiescence`), and the worker
    // clears them at the end of each transaction.
    unsafe { p.as_ref() }
}

impl<'db> CicadaWorker<'db> {
    /// A worker on `ctx` of protocol `p`.
    pub(super) fn new(ctx: WorkerCtx<'db, CicadaRecord>, p: &'db Cicada) -> Self {
        let clock = p.clocks.join(ctx.slot, Tsc::new(&p.tsc));
        let mut ctx = ctx;
        if let Some(h) = &mut ctx.history {
            h.order_by_stamps();
        }
        CicadaWorker {
            clock,
            pools: (0..p.stores.len()).map(|_| VersionPool::default()).collect(),
            node_slots: p
                .trees
                .iter()
                .map(|t| {
                    // The slots departed workers left (and loading's spare ones).
                    let mut mine = SlotCache::default();
                    t.load.lock().unwrap_or_else(|e| e.into_inner()).hand_over(&mut mine);
                    mine
                })
                .collect(),
            retiring: Vec::new(),
            garbage: NodeGarbage::default(),
            ctx,
            p,
            ts: 0,
            active: false,
            read_only: false,
            untracked: false,
            reads: Vec::new(),
            writes: Vec::new(),
            written: 0,
            unindexed: 0,
            observed: Vec::new(),
            scratch: Scratch::default(),
            streak: 0,
            exhausted: false,
            gc: VecDeque::new(),
            dead: VecDeque::new(),
            ro: (0, 0, 0, 0),
            lag: (0, 0, 0),
            promotions: (0, 0),
            validated: None,
        }
    }

    /// Runs `f` with the timestamp whenever a transaction of this worker has validated, before
    /// its versions are committed: a test stops the worker there to script an interleaving
    /// (others then find its versions pending).
    #[doc(hidden)]
    pub fn on_validated(&mut self, f: impl FnMut(u64) + Send + 'db) {
        self.validated = Some(Box::new(f));
    }

    /// The running transaction's timestamp (tests).
    #[doc(hidden)]
    pub fn timestamp(&self) -> u64 {
        self.ts
    }

    // ---- begin and maintenance -----------------------------------------------------------------

    fn start(&mut self, read_only: bool) {
        if self.active {
            self.rollback();
        }
        // From here on this worker may hold pointers to versions until `finish`.
        self.p.quiescence.enter(self.ctx.slot);
        let p = self.p;
        let dead = &mut self.dead;
        self.ctx.enter(|tbl, _key, rec, _safe| p.unlink(tbl.id, rec, dead));
        self.maintain();
        let p = self.p;
        self.read_only = read_only;
        self.untracked = false;
        self.exhausted = false;
        // (Cicada-SV keeps no old versions for `thread.rts` to read.)
        if read_only && !p.options.external_consistency && !p.options.single_version {
            // At `thread.rts`: every transaction at or below it has committed (§3.1).
            self.untracked = true;
            self.ts = self.clock.next_rts();
            self.ro.0 += 1;
            if !p.clocks.central() {
                let now = self.clock.advance();
                let stale = now.saturating_sub(clock_of(self.ts));
                self.ro.2 += stale;
                self.ro.3 = self.ro.3.max(stale);
            }
        } else {
            if read_only {
                // `thread.rts` would miss recent commits: a fresh timestamp, validated.
                self.ro.1 += 1;
            }
            if p.options.external_consistency {
                // Nothing to do with the central counter (see `ThreadClock::catch_up`).
                self.clock.catch_up();
            }
            // Refreshes may have left this worker out while it was idle (its quiescence
            // mark, set above, is SeqCst).
            match self.clock.next_wts_checked() {
                Ok(ts) => self.ts = ts,
                Err(_) => {
                    self.exhausted = true;
                    self.ts = u64::MAX >> 1;
                }
            }
        }
        if let Some(h) = &mut self.ctx.history {
            h.serial_point_at(self.ts);
        }
        self.active = true;
    }

    /// Refreshes `min_wts`/`min_rts` (and advances the quiescence generation) when due, cuts
    /// the chains the GC queue allows and frees what the grace periods allow (§3.8). Inside the
    /// transaction's quiescence mark and storage epoch.
    fn maintain(&mut self) {
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
                    let lag = now.saturating_sub(clock_of(item.wts));
                    self.lag = (self.lag.0 + n, self.lag.1 + lag * n, self.lag.2.max(lag));
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

    // ---- the read phase ------------------------------------------------------------------------

    #[inline(always)]
    fn find_write(&self, t: TableId, rid: RowId) -> Option<usize> {
        if self.written & (1 << (t.0 % 64)) == 0 {
            return None;
        }
        self.writes.iter().rposition(|w| w.rid == rid && w.table == t)
    }

    /// This transaction's insert of `key` into table `t` that is not in the index yet.
    #[inline(always)]
    fn find_unindexed(&self, t: TableId, key: u64) -> Option<usize> {
        if self.unindexed & (1 << (t.0 % 64)) == 0 {
            return None;
        }
        self.writes.iter().rposition(|w| w.unindexed && w.key == key && w.table == t)
    }

    /// The row of `key`, if the index maps it to a linked record; on a miss the phantom bucket
    /// is observed (its version read before a second lookup, so that an insert racing with the
    /// first one is not missed).
    #[inline]
    fn lookup(&mut self, tbl: &'db Table<CicadaRecord>, key: u64) -> Option<RowId> {
        if let Some(rid) = self.ctx.lookup(tbl, key) {
            if !tbl.rows.get(rid).header.is_unlinked() {
                return Some(rid);
            }
            self.ctx.forget(tbl.id, key);
        }
        let slot = tbl.buckets.slot_of(key);
        let version = tbl.buckets.version(slot);
        match tbl.index.get(key, &self.ctx.guard) {
            Some(rid) if !tbl.rows.get(rid).header.is_unlinked() => Some(rid),
            _ => {
                self.observe(tbl, key, slot, version);
                None
            }
        }
    }

    /// Notes that `key` was found absent: its bucket's version (phantom validation) and the
    /// history's range read.
    #[inline(always)]
    fn observe(&mut self, tbl: &Table<CicadaRecord>, key: u64, slot: usize, version: u64) {
        if !self.untracked {
            self.observed.push(Observed { table: tbl.id, slot: slot as u32, version });
        }
        if let Some(h) = &mut self.ctx.history {
            h.range(tbl.id.0, key, key);
        }
    }

    /// The version of `rec` visible to this transaction, recorded as read (with the history);
    /// `None` when nothing is visible (the bucket is then observed too).
    #[inline]
    fn read_version(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
        rec: &'db CicadaRecord,
    ) -> Result<Result<Found<'db>, Unlinked>, Abort> {
        let wait = self.p.options.wait;
        let sv = self.p.options.single_version;
        let find = |head| {
            if sv {
                sv_search(rec, head, self.ts, wait)
            } else {
                search(head, self.ts, wait)
            }
        };
        let head = match rec.newest() {
            Ok(h) => h,
            Err(u) => return Ok(Err(u)),
        };
        let mut found = find(head)?;
        // The key is absent at our timestamp (nothing visible, or a deletion): its bucket's
        // version is needed, read before a search (an insert racing with it must bump it
        // later), so the chain is searched again after reading it. The common case, a present
        // row, reads no bucket.
        let mut bucket = None;
        if found.absent() && !self.p.mv_index() {
            let slot = tbl.buckets.slot_of(key);
            bucket = Some((slot, tbl.buckets.version(slot)));
            let head = match rec.newest() {
                Ok(h) => h,
                Err(u) => return Ok(Err(u)),
            };
            found = find(head)?;
        }
        if !self.untracked {
            self.reads.push(Read {
                rec: NonNull::from(rec),
                seen: found.seen.map(ptr),
                later: found.later.map(ptr),
                wts: found.wts,
            });
        }
        match (found.seen, bucket) {
            // (A search that saw nothing read the bucket, with the shared index; with the
            // multi-version index the caller tracks the leaf instead: `locate_in_tree`.)
            (None, bucket) => match bucket {
                Some((slot, version)) => self.observe(tbl, key, slot, version),
                None => {
                    if let Some(h) = &mut self.ctx.history {
                        h.range(tbl.id.0, key, key);
                    }
                }
            },
            (Some(_), bucket) => {
                if let Some((slot, version)) = bucket.filter(|_| !found.present) {
                    // The row may be unlinked and the key inserted again as a new record,
                    // whose versions go in above no version of this one: the bucket stands for
                    // the absence too.
                    if !self.untracked {
                        self.observed.push(Observed { table: tbl.id, slot: slot as u32, version });
                    }
                }
                if let Some(h) = &mut self.ctx.history {
                    h.read(tbl.id.0, key, stamp_at(found.wts));
                }
            }
        }
        Ok(Ok(found))
    }

    /// Finds what this transaction sees of `key`: its own write, a record's visible version
    /// (read, recorded), or nothing.
    #[inline]
    fn locate(&mut self, tbl: &'db Table<CicadaRecord>, key: u64) -> Result<Located<'db>, Abort> {
        if self.p.mv_index() {
            return self.locate_in_tree(tbl, key);
        }
        if let Some(i) = self.find_unindexed(tbl.id, key) {
            return Ok(Located::Own(i));
        }
        loop {
            let Some(rid) = self.lookup(tbl, key) else { return Ok(Located::Absent) };
            if let Some(i) = self.find_write(tbl.id, rid) {
                return Ok(Located::Own(i));
            }
            let rec = tbl.rows.get(rid).header;
            match self.read_version(tbl, key, rec)? {
                Ok(found) => return Ok(Located::Row { rid, rec, found }),
                // Unlinked meanwhile: the key may live in another row now.
                Err(Unlinked) => self.ctx.forget(tbl.id, key),
            }
        }
    }

    /// [`Worker::scan`] through the multi-version index: the tree's entries in `[lo, hi]` at
    /// our timestamp (our own node copies first), each leaf met tracked (phantom protection,
    /// §3.6), each entry read as [`ScanSteps::entry`] reads the shared index's.
    fn scan_tree(
        &mut self,
        t: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        mut f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        let tbl = table(self.ctx.storage, t)?;
        if tbl.index.kind() == crate::storage::index::IndexKind::Hash {
            // The table asked for point lookups only: its scans are refused with either index.
            return Err(Abort::new(AbortReason::Unsupported));
        }
        if limit == 0 {
            return Ok(0);
        }
        let tree = self.p.trees[t.index()].tree;
        let (mut n, mut stop) = (0, hi);
        tree.scan(&mut NodeAccess { w: self, t }, lo, hi, |nodes, key, rid| {
            Ok(match nodes.w.entry(tbl, t, key, RowId(rid))? {
                Some(row) => {
                    n += 1;
                    if f(key, row).is_break() || n == limit {
                        stop = key;
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                }
                None => ControlFlow::Continue(()),
            })
        })?;
        if let Some(h) = &mut self.ctx.history {
            h.range(t.0, lo, stop);
        }
        Ok(n)
    }

    /// [`Worker::insert`] through the multi-version index: the key's record, if the tree maps
    /// one at our timestamp, gets a version over its absence; else the key goes into the tree
    /// (a leaf write, and splits) with a record: the one the shared catalog holds for the key
    /// if any (a deleted row not unlinked yet, or an insert that aborted after validation), so
    /// that the tree and the catalog never map a key to two records, or a new record that
    /// enters the catalog at validation.
    fn insert_in_tree(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
        value: &[u8],
    ) -> Result<bool, Abort> {
        let t = tbl.id;
        let tree = self.p.trees[t.index()].tree;
        if let Some(rid) = tree.get(&mut NodeAccess { w: self, t }, key)?.value.map(RowId) {
            // The tree maps a key exactly when its row is present, at every timestamp and in
            // our own view (an insert or deletion changes both). A key mapped to a row we
            // deleted, or to a row absent at our timestamp, means that our reads straddle a
            // commit below our timestamp (internal nodes and a present key's leaf are read
            // untracked): writing the row as present while the tree we write lacks the key
            // would commit a row the index does not hold, so the attempt aborts.
            if let Some(i) = self.find_write(t, rid) {
                if self.writes[i].tombstone {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
                return Ok(false);
            }
            let rec = tbl.rows.get(rid).header;
            let Ok(found) = self.read_version(tbl, key, rec)? else {
                return Err(Abort::new(AbortReason::WriteConflict));
            };
            if found.absent() {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            return Ok(false);
        }
        let mut spin = SpinWait::default();
        let rid = loop {
            // Our own new record, deleted by us since (which took it out of our tree).
            if let Some(i) = self.find_unindexed(t, key) {
                if !self.insert_again(i, value) {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
                break self.writes[i].rid;
            }
            let Some(rid) = self.ctx.lookup(tbl, key) else {
                let fresh = self.ctx.alloc(t)?;
                tbl.rows.get(fresh).header.init(None);
                self.push_new(tbl, key, fresh, value);
                self.writes.last_mut().expect("just pushed").unindexed = true;
                self.unindexed |= 1 << (t.0 % 64);
                break fresh;
            };
            let rec = tbl.rows.get(rid).header;
            if rec.is_unlinked() {
                // The GC is removing the catalog entry of a deletion below `min_rts`.
                self.ctx.forget(t, key);
                spin.spin();
                continue;
            }
            if let Some(i) = self.find_write(t, rid) {
                // A row of ours that we deleted.
                if !self.insert_again(i, value) {
                    return Err(Abort::new(AbortReason::WriteConflict));
                }
                break rid;
            }
            if rec.in_flight() {
                // Another transaction's insert of the key is validating.
                return Err(Abort::new(AbortReason::InsertConflict));
            }
            let Ok(found) = self.read_version(tbl, key, rec)? else { continue };
            if !found.absent() {
                // Present at our timestamp, yet not in the tree we read: the tree moved
                // under a stale read.
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            self.put_version(t, key, rid, rec, &found, Some(value))?;
            break rid;
        };
        match tree.insert(&mut NodeAccess { w: self, t }, key, rid.0)? {
            None => Ok(true),
            // Committed into the leaf between our read and our write of it.
            Some(_) => Err(Abort::new(AbortReason::WriteConflict)),
        }
    }

    /// Puts a new version of `key`'s row into the write set: `value` in every column (a blind
    /// write), or a deletion (`None`); `Ok(false)` if the row is absent.
    fn overwrite(&mut self, t: TableId, key: u64, value: Option<&[u8]>) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        if let Some(value) = value {
            check_len(tbl, value)?;
        }
        match self.locate(tbl, key)? {
            Located::Absent => Ok(false),
            Located::Own(i) => {
                let w = self.writes[i];
                if w.tombstone {
                    return Ok(false);
                }
                match value {
                    Some(value) => {
                        self.row(t, as_ref(w.version)).write_from(value);
                        self.writes[i].cols = ALL_COLUMNS;
                    }
                    // A row this transaction inserted or updated: its version becomes a
                    // deletion (over nothing, for an insert: the key stays absent).
                    None => self.writes[i].tombstone = true,
                }
                self.writes[i].promotion = false;
                Ok(true)
            }
            Located::Row { rid, rec, found } => {
                if found.absent() {
                    return Ok(false);
                }
                self.put_version(t, key, rid, rec, &found, value)?;
                Ok(true)
            }
        }
    }

    /// [`CicadaWorker::locate`] with the multi-version index. A row present at our timestamp is
    /// found through the catalog (the shared index, which names each key's record) without
    /// descending the tree: its read is validated, which is all the paper asks of a present key
    /// (footnote 1: the index nodes that led to it go unvalidated), and the tree holds the key
    /// at our timestamp exactly when the row is present. An absence is read from the tree (our
    /// own node copies first), and the leaf that would hold the key is tracked (phantom
    /// protection, §3.6): the record's absent version alone would not cover a new record of
    /// the key after this one is unlinked.
    fn locate_in_tree(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        key: u64,
    ) -> Result<Located<'db>, Abort> {
        let t = tbl.id;
        if let Some(rid) = self.ctx.lookup(tbl, key) {
            if let Some(i) = self.find_write(t, rid) {
                return Ok(Located::Own(i));
            }
            let rec = tbl.rows.get(rid).header;
            match self.read_version(tbl, key, rec)? {
                Ok(found) if !found.absent() => return Ok(Located::Row { rid, rec, found }),
                // Absent: the tree decides (the read stays in the read set, harmless).
                Ok(_) => {}
                Err(Unlinked) => self.ctx.forget(t, key),
            }
        }
        let tree = self.p.trees[t.index()].tree;
        let mut nodes = NodeAccess { w: self, t };
        let found = tree.get(&mut nodes, key)?;
        let Some(rid) = found.value.map(RowId) else {
            nodes.track(found.leaf)?;
            if let Some(h) = &mut self.ctx.history {
                h.range(t.0, key, key);
            }
            return Ok(Located::Absent);
        };
        if let Some(i) = self.find_write(t, rid) {
            // Our own insert into a new record, which the catalog gets at validation.
            return Ok(Located::Own(i));
        }
        let rec = tbl.rows.get(rid).header;
        match self.read_version(tbl, key, rec)? {
            Ok(found) if !found.absent() => Ok(Located::Row { rid, rec, found }),
            // The tree maps the key to a row absent at our timestamp (or to an unlinked record,
            // whose deletion is below `min_rts` and so below our timestamp): a deletion
            // committed between our untracked read of the leaf and our read of the row. The
            // view is mixed; the leaf read is not validated, so abort now.
            _ => Err(Abort::new(AbortReason::WriteConflict)),
        }
    }

    /// Prefetches the lines of `key`'s newest version (its header and the columns `cols`)
    /// when it is not the record's inlined one, whose lines the record's prefetch covered: a
    /// row updated since it was loaded lives in a pooled version, one pointer away from its
    /// record, and a read would otherwise miss on each in turn. Reads the record's head word
    /// (its line was prefetched first); a hint, so a key without a row hint is skipped.
    #[inline]
    fn prefetch_version(&self, t: TableId, key: u64, cols: Columns) {
        let Some(tbl) = self.ctx.storage.try_table(t) else { return };
        let Some(rid) = self.ctx.hinted(tbl, key) else { return };
        let rec = tbl.rows.get(rid).header;
        if let Ok(Some(v)) = rec.newest() {
            if !std::ptr::eq(v, rec.inline()) {
                self.row(t, v).prefetch(&tbl.projection, cols);
            }
        }
    }

    /// Whether the version `v` read at stamp `stamp` still has it after its payload was
    /// copied (Cicada-SV overwrites versions in place: a copy that overlapped an overwrite
    /// may be torn, and the version it should see is gone). Multi-version chains never
    /// change a version's payload while it can be read.
    #[inline(always)]
    fn unchanged(&self, v: &CVersion, stamp: u64) -> Result<(), Abort> {
        if self.p.options.single_version && !still(v, stamp) {
            return Err(Abort::new(AbortReason::SnapshotTooOld));
        }
        Ok(())
    }

    /// Refuses a write in a transaction declared read-only.
    #[inline(always)]
    fn writable(&self) -> Result<(), Abort> {
        if self.read_only {
            return Err(Abort::new(AbortReason::ReadOnlyWrite));
        }
        Ok(())
    }

    /// Early abort (§3.2): a write over `v` whose read timestamp is above ours would fail
    /// validation; so would a read-modify-write with a newer version committed or pending
    /// (write-latest-version-only).
    #[inline(always)]
    fn early_abort(&self, found: &Found<'_>, rmw: bool) -> Result<(), Abort> {
        let o = &self.p.options;
        if let Some(v) = found.seen {
            if o.early_abort && v.ext.rts.load(Ordering::Relaxed) > self.ts {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
        }
        if rmw && o.write_latest_only && found.newer {
            return Err(Abort::new(AbortReason::WriteConflict));
        }
        Ok(())
    }

    /// A new version of `rec` for this transaction: the record's inlined one if it is free and
    /// the table inlines (§3.3), else one from the worker's pool.
    #[inline]
    fn new_version(&mut self, t: TableId, rec: &CicadaRecord) -> NonNull<CVersion> {
        if self.p.inline[t.index()] {
            if let Some(v) = rec.claim_inline() {
                init_version(as_ref(v), self.ts, true);
                return v;
            }
        }
        let v = self.pools[t.index()].alloc(&self.p.stores[t.index()]);
        init_version(as_ref(v), self.ts, false);
        v
    }

    /// The row of a version of table `t`.
    #[inline(always)]
    fn row(&self, t: TableId, v: &'db CVersion) -> crate::storage::RowRef<'db, CVersion> {
        // SAFETY: `v` is a version of table `t`: pooled from its store, or the inlined version
        // of one of its records, which is used only when the table's slots hold a payload.
        unsafe { row_of(v, self.p.row_sizes[t.index()]) }
    }

    /// Puts a new version of `key`'s row over what `found` saw (a row present at our
    /// timestamp, or its absence for an insert) into the write set: `value` in every column,
    /// or a deletion (`None`, which must write over the latest version, as an update does).
    #[inline]
    fn put_version(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &CicadaRecord,
        found: &Found<'_>,
        value: Option<&[u8]>,
    ) -> Result<(), Abort> {
        self.early_abort(found, value.is_none())?;
        let nv = self.new_version(t, rec);
        if let Some(value) = value {
            self.row(t, as_ref(nv)).write_from(value);
        }
        self.push_write(t, key, rid, rec, nv, found.later, !found.absent(), ALL_COLUMNS);
        self.writes.last_mut().expect("just pushed").tombstone = value.is_none();
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn push_write(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &CicadaRecord,
        version: NonNull<CVersion>,
        later: Option<&CVersion>,
        over_present: bool,
        cols: Columns,
    ) {
        self.written |= 1 << (t.0 % 64);
        self.writes.push(Write {
            table: t,
            key,
            rid,
            rec: NonNull::from(rec),
            version,
            later: later.map(ptr),
            over_present,
            tombstone: false,
            created: false,
            unindexed: false,
            cols,
            installed: false,
            locked: false,
            prev: UNBORN,
            heat: 0,
            promotion: false,
            dropped: false,
        });
    }

    /// Starts the insert of `key` as the new record at `rid` (initialised, with no version):
    /// a version holding `value`, which validation installs.
    fn push_new(&mut self, tbl: &'db Table<CicadaRecord>, key: u64, rid: RowId, value: &[u8]) {
        let t = tbl.id;
        let rec = tbl.rows.get(rid).header;
        let nv = self.new_version(t, rec);
        self.row(t, as_ref(nv)).write_from(value);
        self.push_write(t, key, rid, rec, nv, None, false, ALL_COLUMNS);
        self.writes.last_mut().expect("just pushed").created = true;
        if let Some(h) = &mut self.ctx.history {
            h.range(t.0, key, key);
        }
    }

    /// An insert of a key this transaction wrote already (write `i`): it fails, unless the
    /// transaction deleted the row, whose version then becomes the row again.
    fn insert_again(&mut self, i: usize, value: &[u8]) -> bool {
        let w = self.writes[i];
        if !w.tombstone {
            return false;
        }
        self.row(w.table, as_ref(w.version)).write_from(value);
        let e = &mut self.writes[i];
        (e.tombstone, e.cols) = (false, ALL_COLUMNS);
        true
    }

    /// Promotes `v`, the visible version of `rec` that this transaction read, into the
    /// record's inlined version when the paper's conditions hold (§3.3): `v` is not inlined,
    /// is below `min_rts` (so a concurrent write is unlikely), nothing newer is committed or
    /// pending, and the inlined version is free. The read becomes a read-modify-write writing
    /// the same data; if the promotion fails at validation it is dropped, not the transaction.
    #[inline(always)]
    fn maybe_promote(
        &mut self,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &'db CicadaRecord,
        found: &Found<'db>,
    ) {
        let Some(v) = found.seen else { return };
        if is_inline(v) || self.read_only || !self.p.promote[t.index()] || found.newer {
            return;
        }
        // Relaxed: a hint; the claim below is the CAS that decides.
        if rec.inline().flags.load(Ordering::Relaxed) != UNUSED
            || wts(v) >= self.p.clocks.min_rts()
            || v.ext.rts.load(Ordering::Relaxed) > self.ts
        {
            return;
        }
        let Some(nv) = rec.claim_inline() else { return };
        init_version(as_ref(nv), self.ts, true);
        self.row(t, as_ref(nv)).copy_from(&self.row(t, v));
        self.push_write(t, key, rid, rec, nv, found.later, true, ALL_COLUMNS);
        self.writes.last_mut().expect("just pushed").promotion = true;
    }

    /// Gives up promotion `i` at validation: its version is rolled back (marked ABORTED if
    /// installed, which readers skip; else freed) and it is neither logged nor committed.
    fn drop_promotion(&mut self, i: usize) {
        let w = self.writes[i];
        if w.installed {
            set_status(as_ref(w.version), ABORTED);
        } else {
            self.unused(w.table, w.version);
        }
        self.writes[i].dropped = true;
        self.promotions.1 += 1;
    }

    /// Gives back a version this transaction never installed.
    #[inline]
    fn unused(&mut self, t: TableId, v: NonNull<CVersion>) {
        let r = as_ref(v);
        if is_inline(r) {
            // Release: pairs with the next claimer's Acquire.
            r.flags.store(UNUSED, Ordering::Release);
        } else {
            self.pools[t.index()].free(&self.p.stores[t.index()], v);
        }
    }

    // ---- validation ----------------------------------------------------------------------------

    /// Puts the most contended writes first (§3.5): partial sort of the top `SORT_TOP` by the
    /// write timestamp of their record's newest version.
    fn sort_writes(&mut self) {
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
    fn visible_now(
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
    fn reads_consistent(&self) -> Result<(), Abort> {
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

    /// Cicada-SV's consistency check of the reads: a version read still has the stamp it was
    /// read at (stamps are unique, so it was not overwritten), and no transaction with a
    /// smaller timestamp holds its record's write lock (it would overwrite it below us; one
    /// with a larger timestamp loads our `rts` after taking the lock and aborts, or writes
    /// above us). A read that found nothing searches again (an insert below our timestamp
    /// also bumps the bucket observed).
    fn reads_consistent_sv(&self) -> Result<(), Abort> {
        for r in &self.reads {
            let rec = as_ref(r.rec);
            let Some(v) = r.seen else {
                if self.visible_now(rec, None)?.is_some() {
                    return Err(Abort::new(AbortReason::ReadValidation));
                }
                continue;
            };
            if rec.locked_below(self.ts) || rec.is_unlinked() || stable_wts(as_ref(v)) != r.wts {
                return Err(Abort::new(AbortReason::ReadValidation));
            }
        }
        Ok(())
    }

    /// The early version consistency check (§3.5 (2)): the reads, and the writes' visible
    /// versions' read timestamps, before anything is installed.
    fn precheck(&self) -> Result<(), Abort> {
        self.reads_consistent()?;
        for w in self.writes.iter().filter(|w| !w.promotion) {
            if let Some(v) = self.visible_now(as_ref(w.rec), w.later)? {
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
    fn install(&mut self, i: usize) -> Result<(), Abort> {
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
    fn lock_for_overwrite(&mut self, i: usize) -> Result<(), Abort> {
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
    fn index_insert(&mut self, i: usize) -> Result<(), Abort> {
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
    fn update_rts(&self) {
        for r in &self.reads {
            if let Some(v) = r.seen {
                let rts = &as_ref(v).ext.rts;
                if rts.load(Ordering::SeqCst) < self.ts {
                    rts.fetch_max(self.ts, Ordering::SeqCst);
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
    fn buckets_consistent(&self) -> Result<(), Abort> {
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
    fn writes_consistent(&mut self) -> Result<(), Abort> {
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
    fn validate(&mut self) -> Result<(), Abort> {
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

    // ---- the end of a transaction --------------------------------------------------------------

    fn finish(&mut self) {
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
    fn rollback(&mut self) {
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

    /// Rolls back the write of an index node: a version over an existing node becomes ABORTED
    /// if installed (readers skip it), else goes back; a node this transaction created goes
    /// back with its slot at once, installed or not. Nothing reached it: its only links are
    /// in our versions, which readers that meet them pending wait out and then skip, and
    /// nothing collects a version that never committed.
    fn roll_back_node(&mut self, w: Write) {
        if w.created {
            self.unused(w.table, w.version);
            let t = w.table.index() - self.p.tables;
            self.node_slots[t].release(w.rid);
        } else if w.installed {
            set_status(as_ref(w.version), ABORTED);
        } else {
            self.unused(w.table, w.version);
        }
    }

    /// Logs the writes at our timestamp (Cicada's commit stamp is its wts, §3.7), before any
    /// becomes COMMITTED; the log epoch stays in flight until `commit_returning`, after every
    /// version is COMMITTED (the commit contract: a checkpoint that waits for the epoch sees
    /// them).
    fn log(&mut self) {
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

/// Whether the version `w` goes in above (`below`) is what the write expects: the row present
/// for an update or deletion, absent (nothing, or a deletion) for an insert.
#[inline(always)]
fn expect(w: &Write, below: Option<&CVersion>) -> Result<(), Abort> {
    let present = below.is_some_and(|v| status(v) == COMMITTED);
    match (w.over_present, present) {
        (false, true) => Err(Abort::new(AbortReason::InsertConflict)),
        (true, false) => Err(Abort::new(AbortReason::WriteConflict)),
        _ => Ok(()),
    }
}

/// What [`CicadaWorker::locate`] found.
enum Located<'a> {
    /// No linked record for the key.
    Absent,
    /// This transaction's own write, at this index of the write set.
    Own(usize),
    /// A record and what is visible in it.
    Row { rid: RowId, rec: &'a CicadaRecord, found: Found<'a> },
}

/// Queues every version from `first` on for freeing after the grace period of quiescence
/// generation `retired`; returns how many.
pub(super) fn retire_chain(
    dead: &mut VecDeque<Dead>,
    t: TableId,
    first: NonNull<CVersion>,
    retired: u64,
) -> u64 {
    let mut v = Some(first);
    let mut n = 0;
    while let Some(p) = v {
        let nx = as_ref(p).next.load(Ordering::Acquire);
        let inline = is_inline(as_ref(p));
        dead.push_back(Dead { table: t, inline, version: p, retired });
        v = NonNull::new(nx);
        n += 1;
    }
    n
}

/// Frees a version whose grace period has passed: to the pool, or, inlined, back to UNUSED.
#[inline]
pub(super) fn free_version(
    pool: &mut VersionPool<CicadaExt>,
    store: &crate::storage::version::VersionStore<CicadaExt>,
    d: Dead,
) {
    if d.inline {
        // Release: pairs with the next claimer's Acquire.
        as_ref(d.version).flags.store(UNUSED, Ordering::Release);
    } else {
        pool.free(store, d.version);
    }
}

impl Drop for CicadaWorker<'_> {
    fn drop(&mut self) {
        self.abort();
        let p = self.p;
        for (slots, tree) in self.node_slots.iter_mut().zip(&p.trees) {
            slots.hand_over(&mut tree.load.lock().unwrap_or_else(|e| e.into_inner()));
        }
        let tally = super::Tally { ro: self.ro, lag: self.lag, promotions: self.promotions };
        p.leave(&mut self.pools, &mut self.gc, &mut self.dead, &mut self.garbage, tally);
    }
}

impl Worker for CicadaWorker<'_> {
    crate::protocols::common::forward!(ctx: log_epoch);

    fn pinned<T>(&mut self, f: impl FnOnce() -> T) -> T {
        // Reconnaissance reads versions too.
        let (q, slot) = (&self.p.quiescence, self.ctx.slot);
        q.enter(slot);
        let out = self.ctx.pinned(f);
        q.exit(slot);
        out
    }

    fn begin(&mut self) {
        self.start(false);
    }

    /// At `thread.rts` without tracking or validation (§3.1) when external consistency is off,
    /// else at a fresh timestamp, validated; writes fail with `read-only-write`.
    fn begin_read_only(&mut self) {
        self.start(true);
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
        let (v, stamp) = match self.locate(tbl, key)? {
            Located::Absent => return Ok(None),
            Located::Own(i) => {
                let w = self.writes[i];
                if w.tombstone {
                    return Ok(None);
                }
                (as_ref(w.version), None)
            }
            Located::Row { rid, rec, found } => match found.row() {
                Some(v) => {
                    self.maybe_promote(t, key, rid, rec, &found);
                    (v, Some(found.wts))
                }
                _ => return Ok(None),
            },
        };
        let row = self.row(t, v);
        row.read_cols_into(self.scratch.get(tbl.spec.row_size), &tbl.projection, cols);
        if let Some(stamp) = stamp {
            self.unchanged(v, stamp)?;
        }
        Ok(Some(f(self.scratch.get(tbl.spec.row_size))))
    }

    /// A blind write. Its check that the row is present is a read of the visible version
    /// (validated, its read timestamp raised): a deletion below our timestamp must not be
    /// overwritten as if the row were there.
    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.overwrite(t, key, Some(value))
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
        let (p, len) = (&tbl.projection, tbl.spec.row_size);
        match self.locate(tbl, key)? {
            Located::Absent => Ok(None),
            Located::Own(i) => {
                let w = self.writes[i];
                if w.tombstone {
                    return Ok(None);
                }
                // Our own version, not installed: written in place.
                let row = self.row(t, as_ref(w.version));
                let buf = self.scratch.get(len);
                row.read_cols_into(buf, p, reads | writes);
                let out = apply_update(p, writes, buf, f)?;
                row.write_cols_from(buf, p, writes);
                self.writes[i].cols |= writes;
                self.writes[i].promotion = false;
                Ok(Some(out))
            }
            Located::Row { rid, rec, found } => {
                let Some(old) = found.row() else {
                    return Ok(None);
                };
                self.early_abort(&found, true)?;
                let (old_v, old) = (old, self.row(t, old));
                let nv = self.new_version(t, rec);
                let new = self.row(t, as_ref(nv));
                // The old row once, into our version, then the procedure works on that copy.
                new.copy_from(&old);
                if let Err(a) = self.unchanged(old_v, found.wts) {
                    self.unused(t, nv);
                    return Err(a);
                }
                let buf = self.scratch.get(len);
                new.read_cols_into(buf, p, reads | writes);
                let out = match apply_update(p, writes, buf, f) {
                    Ok(out) => out,
                    Err(a) => {
                        self.unused(t, nv);
                        return Err(a);
                    }
                };
                new.write_cols_from(buf, p, writes);
                self.push_write(t, key, rid, rec, nv, found.later, true, writes);
                Ok(Some(out))
            }
        }
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.writable()?;
        let tbl = table(self.ctx.storage, t)?;
        check_len(tbl, value)?;
        if self.p.mv_index() {
            return self.insert_in_tree(tbl, key, value);
        }
        let deferred = self.p.options.deferred_index;
        if deferred {
            if let Some(i) = self.find_unindexed(t, key) {
                return Ok(self.insert_again(i, value));
            }
        }
        let mut spin = SpinWait::default();
        loop {
            let existing = if deferred {
                // The key's record, if the index has a linked one; else a new record that
                // enters the index at validation (§3.6).
                match self.ctx.lookup(tbl, key) {
                    Some(rid) if !tbl.rows.get(rid).header.is_unlinked() => rid,
                    found => {
                        if found.is_some() {
                            // Its deletion is below `min_rts`, so below our timestamp: the key
                            // is absent, and the GC is removing the entry.
                            self.ctx.forget(t, key);
                        }
                        let fresh = self.ctx.alloc(t)?;
                        tbl.rows.get(fresh).header.init(None);
                        self.push_new(tbl, key, fresh, value);
                        let w = self.writes.last_mut().expect("just pushed");
                        w.unindexed = true;
                        self.unindexed |= 1 << (t.0 % 64);
                        return Ok(true);
                    }
                }
            } else {
                // A new record first (one index traversal when the key is new, the common
                // case). Its head stays empty until validation installs our version: others
                // find the key with nothing visible, which they read as absence.
                let fresh = self.ctx.alloc(t)?;
                tbl.rows.get(fresh).header.init(None);
                match tbl.index.insert_if_absent(key, fresh, &self.ctx.guard) {
                    Ok(()) => {
                        self.push_new(tbl, key, fresh, value);
                        return Ok(true);
                    }
                    Err(existing) => {
                        self.ctx.caches[t.index()].release(fresh);
                        existing
                    }
                }
            };
            let rec = tbl.rows.get(existing).header;
            if rec.is_unlinked() {
                // The GC is removing the old record's index entry.
                spin.spin();
                continue;
            }
            if let Some(i) = self.find_write(t, existing) {
                return Ok(self.insert_again(i, value));
            }
            if rec.in_flight() {
                // A record with no version at all: another transaction's insert of the key is
                // in flight (or aborted, and its row not yet unlinked). It is likely to commit
                // and make this insert fail or abort one of the two at validation: abort early.
                return Err(Abort::new(AbortReason::InsertConflict));
            }
            let found = match self.read_version(tbl, key, rec)? {
                Ok(found) => found,
                Err(Unlinked) => continue,
            };
            if !found.absent() {
                return Ok(false);
            }
            self.put_version(t, key, existing, rec, &found, Some(value))?;
            return Ok(true);
        }
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        let deleted = self.overwrite(t, key, None)?;
        if deleted && self.p.mv_index() {
            // The key leaves the multi-version index with its row (§3.6): a later insert
            // finds it absent there, and the reclaimer may unlink the record once the
            // deletion is below `min_rts`, when no transaction reads the tree below it.
            let tree = self.p.trees[t.index()].tree;
            if tree.remove(&mut NodeAccess { w: self, t }, key)?.value.is_none() {
                return Err(Abort::new(AbortReason::WriteConflict));
            }
        }
        Ok(deleted)
    }

    fn scan(
        &mut self,
        t: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        if self.p.mv_index() {
            return self.scan_tree(t, lo, hi, limit, f);
        }
        let storage = self.ctx.storage;
        scan::scan(self, storage, t, lo, hi, limit, f)
    }

    #[inline]
    fn prefetch(&mut self, t: TableId, key: u64) {
        self.ctx.prefetch(t, key);
        self.prefetch_version(t, key, ALL_COLUMNS);
    }

    #[inline]
    fn prefetch_many(&mut self, keys: &[(TableId, u64, Columns)]) {
        self.ctx.prefetch_many(keys);
        // The second level, once every record's lines are on their way.
        for &(t, key, cols) in keys {
            self.prefetch_version(t, key, cols);
        }
    }

    fn reads_still_valid(&mut self) -> bool {
        self.untracked || self.reads_consistent().is_ok()
    }

    fn commit(&mut self) -> Result<(), Abort> {
        if !self.active {
            return Ok(());
        }
        if self.exhausted {
            self.rollback();
            return Err(Abort::new(AbortReason::Unsupported));
        }
        if self.untracked {
            if let Some(h) = &mut self.ctx.history {
                h.committed();
            }
            self.ctx.phase(CommitPhase::Validated);
            self.finish();
            return self.ctx.commit_returning();
        }
        if let Err(a) = self.validate() {
            self.rollback();
            return Err(a);
        }
        self.ctx.phase(CommitPhase::Validated);
        if let Some(f) = &mut self.validated {
            f(self.ts);
        }
        let wrote = !self.writes.is_empty();
        self.log();
        if wrote {
            self.ctx.phase(CommitPhase::Logged);
        }
        let ts = self.ts;
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            if w.dropped {
                continue;
            }
            let v = as_ref(w.version);
            let present = !w.tombstone;
            let s = if present { COMMITTED } else { DELETED };
            if w.locked {
                // Cicada-SV's write phase: our private copy over the one version, in place.
                let rec = as_ref(w.rec);
                let inline = rec.inline();
                overwrite(inline, ts, s, || {
                    if present {
                        self.row(w.table, inline).copy_from(&self.row(w.table, v));
                    }
                });
                rec.unlock_gc();
                self.unused(w.table, w.version);
            } else {
                set_status(v, s);
            }
            self.promotions.0 += u64::from(w.promotion);
            if let (Some(h), false) = (&mut self.ctx.history, self.p.is_node_table(w.table)) {
                h.write(w.table.0, w.key, u128::from(ts), w.prev, present);
            }
            if !self.p.options.single_version {
                self.gc.push_back(GcItem {
                    rec: w.rec,
                    version: w.version,
                    wts: ts,
                    table: w.table,
                });
            }
            if !present {
                self.ctx.retire(w.table, w.key, w.rid);
            }
        }
        if wrote {
            self.ctx.phase(CommitPhase::Installed);
        }
        for (t, id) in self.retiring.drain(..) {
            self.garbage.nodes.push_back((t, id, ts));
        }
        if let Some(h) = &mut self.ctx.history {
            h.committed();
        }
        self.streak = self.streak.saturating_add(1);
        self.clock.committed();
        self.finish();
        self.ctx.commit_returning()
    }

    fn abort(&mut self) {
        if self.active {
            self.rollback();
        }
    }
}

impl<'db> ScanSteps<'db, CicadaRecord> for CicadaWorker<'db> {
    #[inline]
    fn ctx(&mut self) -> &mut WorkerCtx<'db, CicadaRecord> {
        &mut self.ctx
    }

    /// Observes the batch's buckets (their versions, checked at validation, and their `rts`
    /// raised to our timestamp) before its entries are read from the index.
    #[inline]
    fn cover(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        t: TableId,
        batch: &Batch,
    ) -> Result<(), Abort> {
        if !self.untracked {
            for slot in tbl.buckets.batch_slots(batch) {
                let version = tbl.buckets.version(slot);
                self.observed.push(Observed { table: t, slot: slot as u32, version });
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn entry(
        &mut self,
        tbl: &'db Table<CicadaRecord>,
        t: TableId,
        key: u64,
        rid: RowId,
    ) -> Result<Option<&[u8]>, Abort> {
        let (v, stamp) = if let Some(i) = self.find_write(t, rid) {
            let w = self.writes[i];
            if w.tombstone {
                return Ok(None);
            }
            (as_ref(w.version), None)
        } else {
            let rec = tbl.rows.get(rid).header;
            let found = match self.read_version(tbl, key, rec)? {
                Ok(found) => found,
                // Unlinked: its deletion is below `min_rts`, so below our timestamp.
                Err(Unlinked) => return Ok(None),
            };
            match found.row() {
                Some(v) => (v, Some(found.wts)),
                _ => return Ok(None),
            }
        };
        let len = tbl.spec.row_size;
        self.row(t, v).read_into(self.scratch.get(len));
        if let Some(stamp) = stamp {
            self.unchanged(v, stamp)?;
        }
        Ok(Some(self.scratch.get(len)))
    }

    #[inline(always)]
    fn next_unindexed(&mut self, t: TableId, from: u64, hi: u64) -> Option<u64> {
        if self.unindexed & (1 << (t.0 % 64)) == 0 {
            return None;
        }
        self.writes
            .iter()
            .filter(|w| w.unindexed && w.table == t && (from..=hi).contains(&w.key))
            .map(|w| w.key)
            .min()
    }

    fn unindexed_entry(&mut self, t: TableId, key: u64) -> Option<&[u8]> {
        let w = self.writes[self.find_unindexed(t, key)?];
        if w.tombstone {
            return None;
        }
        let row = self.row(t, as_ref(w.version));
        let data = self.scratch.get(self.p.row_sizes[t.index()]);
        row.read_into(data);
        Some(data)
    }
}

/// A transaction's view of table `t`'s multi-version index nodes (§3.6): each node is a record
/// of the node table, read at the transaction's timestamp (its own copy first), written as a
/// new version in its write set (with the version it copied as a read), validated, committed,
/// logged not at all and collected like a row's.
struct NodeAccess<'w, 'db> {
    w: &'w mut CicadaWorker<'db>,
    /// The data table.
    t: TableId,
}

/// A node read: `None` for the transaction's own copy (its write is validated instead).
#[derive(Clone, Copy)]
struct NodeRead(Option<Read>);

impl<'db> NodeAccess<'_, 'db> {
    /// The node table and the tree's record of node `id`.
    #[inline(always)]
    fn record(&self, id: NodeId) -> (TableId, &'db CicadaRecord) {
        let p: &'db Cicada = self.w.p;
        (p.node_table(self.t), p.trees[self.t.index()].rows.get(RowId(id)).header)
    }

    /// The version of node `id` visible at the timestamp, as found. A node reached from a
    /// version visible at the timestamp was created below it and is not unlinked while we run
    /// (a node taken out is freed only once `min_rts` passes its removal), so it has one; not
    /// finding it means the tree moved under a wait=off search or a stale read.
    #[inline]
    fn visible(&self, rec: &'db CicadaRecord) -> Result<(Found<'db>, &'db CVersion), Abort> {
        let head = rec.newest().map_err(|_| Abort::new(AbortReason::WriteConflict))?;
        let found = search(head, self.w.ts, self.w.p.options.wait)?;
        let v = found.row().ok_or(Abort::new(AbortReason::WriteConflict))?;
        Ok((found, v))
    }

    #[inline(always)]
    fn words(&self, v: &'db CVersion) -> &'db [AtomicU64] {
        node_words(v, self.w.p.trees[self.t.index()].tree.shape())
    }
}

impl<'db> Nodes for NodeAccess<'_, 'db> {
    type Read = NodeRead;

    #[inline]
    fn read(&mut self, id: NodeId) -> Result<(&[AtomicU64], NodeRead), Abort> {
        let (nt, rec) = self.record(id);
        if let Some(i) = self.w.find_write(nt, RowId(id)) {
            return Ok((self.words(as_ref(self.w.writes[i].version)), NodeRead(None)));
        }
        let (found, v) = self.visible(rec)?;
        let read = Read {
            rec: NonNull::from(rec),
            seen: Some(ptr(v)),
            later: found.later.map(ptr),
            wts: found.wts,
        };
        Ok((self.words(v), NodeRead(Some(read))))
    }

    #[inline]
    fn track(&mut self, read: NodeRead) -> Result<(), Abort> {
        if let (Some(r), false) = (read.0, self.w.untracked) {
            self.w.reads.push(r);
        }
        Ok(())
    }

    fn write(&mut self, id: NodeId) -> Result<&[AtomicU64], Abort> {
        let (nt, rec) = self.record(id);
        if let Some(i) = self.w.find_write(nt, RowId(id)) {
            return Ok(self.words(as_ref(self.w.writes[i].version)));
        }
        self.w.writable()?;
        let (found, v) = self.visible(rec)?;
        self.w.early_abort(&found, true)?;
        // The copy depends on the version copied: validated like a read.
        self.w.reads.push(Read {
            rec: NonNull::from(rec),
            seen: Some(ptr(v)),
            later: found.later.map(ptr),
            wts: found.wts,
        });
        let nv = self.w.new_version(nt, rec);
        let (from, to) = (self.words(v), self.words(as_ref(nv)));
        for (d, s) in to.iter().zip(from) {
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.w.push_write(nt, id, RowId(id), rec, nv, found.later, true, ALL_COLUMNS);
        Ok(to)
    }

    fn create(&mut self) -> Result<NodeId, Abort> {
        self.w.writable()?;
        let p: &'db Cicada = self.w.p;
        let t = self.t.index();
        let rid = p.trees[t]
            .rows
            .alloc(&mut self.w.node_slots[t])
            .ok_or(Abort::new(AbortReason::TableFull))?;
        let (nt, rec) = self.record(rid.0);
        rec.init(None);
        let nv = self.w.new_version(nt, rec);
        for w in self.words(as_ref(nv)) {
            w.store(0, Ordering::Relaxed);
        }
        self.w.push_write(nt, rid.0, rid, rec, nv, None, false, ALL_COLUMNS);
        self.w.writes.last_mut().expect("just pushed").created = true;
        Ok(rid.0)
    }

    fn retire(&mut self, id: NodeId) {
        self.w.retiring.push((self.t, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cicada-SV's search reads a version's stamp and status as one: under a writer that
    /// overwrites the version in place, alternating a row (odd stamps) and a deletion (even
    /// ones), every search's `present` matches the stamp it reports. Reading the status
    /// outside the seqlock window pairs one overwrite's status with another's stamp.
    #[test]
    fn single_version_search_reads_stamp_and_status_together() {
        // SAFETY: a record head is atomics only, and all-zero is a valid, empty head (see
        // `RecordHeader for CicadaRecord`); no payload is read or written here.
        let rec: CicadaRecord = unsafe { std::mem::zeroed() };
        let v = rec.inline();
        overwrite(v, 1, COMMITTED, || {});
        const READERS: usize = 3;
        const SEARCHES: u64 = 300_000;
        let finished = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                // Overwrites until every reader is done, so that all searches race with it.
                let mut stamp = 2;
                while finished.load(Ordering::Acquire) < READERS {
                    overwrite(v, stamp, if stamp % 2 == 1 { COMMITTED } else { DELETED }, || {});
                    stamp += 1;
                }
            });
            for _ in 0..READERS {
                s.spawn(|| {
                    // Counted when the reader ends, also by a failed assertion's unwinding,
                    // so that the writer stops either way.
                    struct Finish<'a>(&'a std::sync::atomic::AtomicUsize);
                    impl Drop for Finish<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_add(1, Ordering::Release);
                        }
                    }
                    let _finish = Finish(&finished);
                    for _ in 0..SEARCHES {
                        let found = sv_search(&rec, Some(v), WRITING - 1, true).expect("waits");
                        assert!(found.seen.is_some(), "the version is always committed");
                        assert_eq!(
                            found.present,
                            found.wts % 2 == 1,
                            "stamp {} reported with the status of another overwrite",
                            found.wts
                        );
                    }
                });
            }
        });
    }
}
