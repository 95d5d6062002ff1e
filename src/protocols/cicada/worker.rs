//! The `cicada` worker: the read phase, validation, the write phase and the maintenance of one
//! thread (see the module docs of `protocols::cicada` for the protocol and why it is correct).
//!
//! Here: the worker's state, its begin and the [`Worker`] methods. By concern: the read phase
//! and the scan steps in `worker/execute.rs`, validation and the write phase in
//! `worker/validate.rs`, GC and the clocks' refresh in `worker/maintain.rs`, the single-version
//! mode's search and check in `worker/single_version.rs`, the multi-version index's paths in
//! `worker/tree.rs`, and the tests in `worker/tests.rs`.

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

mod execute;
mod maintain;
mod single_version;
mod tree;
mod validate;

use execute::*;
use single_version::*;
use tree::*;

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
    /// The clock at the worker's first maintenance (0: none yet): only versions superseded
    /// since count in `lag`, not those a previous run's workers left queued (a run of another
    /// protocol may have taken its turn in between).
    since: u64,
    /// Promotions committed, and given up.
    promotions: (u64, u64),
    /// Called with the timestamp once a transaction validated, before its versions are
    /// committed (scripted tests hold it there, its versions pending).
    validated: Option<Box<dyn FnMut(u64) + Send + 'db>>,
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
            since: 0,
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

    // ---- the read phase ------------------------------------------------------------------------

    // ---- validation ----------------------------------------------------------------------------

    // ---- the end of a transaction --------------------------------------------------------------
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
        // Acquire: pairs with the Release that linked each version below (the install CAS); the
        // chain is cut off and owned by the caller.
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

#[cfg(test)]
mod tests;
