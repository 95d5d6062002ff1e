//! BOHM's execution side (§3.3.1): a transaction runs at its timestamp against the versions
//! the concurrency-control threads planned, buffering its writes, and on completion fills its
//! placeholders.
//!
//! **Reads** take the newest version below the transaction's timestamp. If its data is not
//! produced yet, its producer is run here, recursively, if it is still Unprocessed (its slot's
//! CAS succeeds); if another thread is executing it, this attempt is *abandoned*: the buffered
//! writes are dropped, the slot goes back to Unprocessed, and some thread runs it again later
//! (a procedure cannot be suspended in the middle of `run`). Recursion depth is bounded by the
//! contexts an execution thread keeps ([`Scratchpad`] per depth); past it, the attempt is
//! abandoned too.
//!
//! **Completion** fills every placeholder: a written key gets the buffered image (or a
//! tombstone); a declared key the transaction did not write, and every key of a transaction
//! that rolled back, gets the previous version's value, copied if it is produced and marked
//! [`PASS`] (readers go on to the previous version) if not: waiting for it could stall this
//! thread behind its own unfinished slots. A produced version's producer field becomes its
//! *origin* (whose value it holds, see [`BohmExt`]).
//!
//! **Histories** (`txlab check`, `DbOptions::record_history`): each recursion depth records
//! into its own recorder, since evaluation nests one transaction inside another. A transaction
//! is serialized at its timestamp; a read names the origin of what it saw (a point read that
//! finds nothing records a predicate read of the key; a scan records its range); a committed
//! write names its version (timestamp + 1) and the origin of the version below, which is
//! produced first (its producer evaluated, or the attempt abandoned) so that it is known.

use super::pipeline::{claim, slot_state, Batch, Claim, Outcome, Slot};
use super::record::{
    begin_of, cut_after, next_of, origin_of, produce, seen_from, settle, BohmExt, BohmRecord,
    BohmVersion, Seen, LOADED, NEVER, PASS, PRODUCED, TOMBSTONE,
};
use super::units::{unit_of, Units};
use crate::durability::log::LogWriter;
use crate::engine::{Checks, Procedure, Tx, TxnType, Worker};
use crate::error::{Abort, AbortReason};
use crate::history::{Recorder, Stamp, INITIAL, UNBORN};
use crate::protocols::common::{check_len, table};
use crate::storage::index::{IndexGuard, ScanBuf};
use crate::storage::inject::{CommitPhase, Injector};
use crate::storage::projection::Columns;
use crate::storage::reclaim::{Reclaimer, Unlink};
use crate::storage::row_store::SlotCache;
use crate::storage::version::{VersionPool, VersionStore};
use crate::storage::{RowId, Storage, TableId};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// No producer: the value of an [`Abandoned`] field that names none.
pub const NO_PRODUCER: (u64, u64) = (u64::MAX, 0);

/// Why [`run_slot`] abandoned an attempt, as (producer, timestamp) pairs for the execution
/// loop: each field is [`NO_PRODUCER`] unless the abandonment had that cause.
#[derive(Debug)]
pub struct Abandoned {
    /// The producer it could not run for want of a deeper scratchpad: the loop runs it next,
    /// at the top of its stack.
    pub deepest: Cell<(u64, u64)>,
    /// The producer another thread was executing: the attempt would be abandoned again while
    /// that lasts, so the loop does not retry it before (see [`super::pipeline::executing`]).
    pub busy: Cell<(u64, u64)>,
}

impl Default for Abandoned {
    fn default() -> Self {
        Abandoned { deepest: Cell::new(NO_PRODUCER), busy: Cell::new(NO_PRODUCER) }
    }
}

/// The history stamp of a value of origin `origin` (see [`super::record::BohmExt`]): the
/// loaded rows' is [`INITIAL`], a write's its timestamp plus one, an absence no version wrote
/// [`UNBORN`].
#[inline]
pub fn stamp_of(origin: u64) -> Stamp {
    match origin {
        NEVER => UNBORN,
        LOADED => INITIAL,
        ts => Stamp::from(ts) + 1,
    }
}

/// What every execution context of a run shares.
pub struct Env<'db, P> {
    /// The tables.
    pub storage: &'db Storage<BohmRecord>,
    /// Per table, its versions.
    pub stores: &'db [VersionStore<BohmExt>],
    /// The batch ring.
    pub ring: &'db [Batch<P>],
    /// The workload's transaction types.
    pub types: &'db [TxnType],
    /// Check every operation against its type's piece template (`RunConfig::check_templates`).
    pub templates: bool,
    /// The units of tables written by declared ranges.
    pub units: &'db Units,
    /// Per execution thread: how many batches it has finished (the low watermark is their
    /// minimum).
    pub finished: &'db [CachePadded<AtomicU64>],
    /// Slots per batch.
    pub size: usize,
    /// The acknowledgement table (`RunConfig::acks`), if any: every transaction declares a
    /// write of its client's row, and a committing one counts itself in it.
    pub acks: Option<TableId>,
}

impl<P> Env<'_, P> {
    /// The low watermark: every execution thread has finished every batch below it.
    pub fn watermark(&self) -> u64 {
        // Acquire: pairs with each execution thread's Release store after finishing a batch
        // (its reads of the versions below happened before).
        self.finished.iter().map(|f| f.load(Ordering::Acquire)).min().unwrap_or(0)
    }
}

/// An execution thread's own resources, shared by its recursion depths: its log stream, when
/// the database logs, and its memory for the rows it writes in unit mode ([`super::units`]):
/// version pools and row slot caches per table, the versions it cut off, each with the
/// epoch it was cut in, until their grace period has passed, and the rows it unlinked, until
/// theirs has.
pub struct Heap {
    /// The thread's log stream (taken from its storage context).
    pub log: Option<LogWriter>,
    /// The thread's commit-phase injection (taken from its storage context; see
    /// [`crate::storage::inject`]).
    pub inject: Option<Box<Injector>>,
    pools: Vec<VersionPool<BohmExt>>,
    /// Row slots per table (public so that the thread can hand them to the storage when it
    /// leaves, and adopt what departed threads left).
    pub caches: Vec<SlotCache>,
    dead: VecDeque<(TableId, NonNull<BohmVersion>, u64)>,
    /// Rows it unlinked, until their slots may be reused (public as `caches`).
    pub reclaimer: Reclaimer,
    buf: Vec<u8>,
    scan: ScanBuf,
}

impl Heap {
    /// An empty heap for `tables` tables.
    pub fn new(tables: usize) -> Self {
        Heap {
            log: None,
            inject: None,
            pools: (0..tables).map(|_| VersionPool::default()).collect(),
            caches: (0..tables).map(|_| SlotCache::default()).collect(),
            dead: VecDeque::new(),
            reclaimer: Reclaimer::default(),
            buf: Vec::new(),
            scan: ScanBuf::default(),
        }
    }

    /// A committing transaction of this thread reached `phase` (see
    /// [`crate::storage::inject`]), its log epoch `log_epoch` (0: it logged nothing).
    #[inline(always)]
    pub fn phase(&mut self, phase: CommitPhase, log_epoch: u64) {
        if let Some(i) = &mut self.inject {
            i.at(phase, log_epoch);
        }
    }

    /// Frees the versions and row slots whose grace period has passed.
    pub fn collect<P>(&mut self, env: &Env<'_, P>, guard: &IndexGuard) {
        let safe = env.storage.epochs().min_active();
        while let Some(&(t, v, e)) = self.dead.front() {
            if e >= safe {
                break;
            }
            self.dead.pop_front();
            self.pools[t.index()].free(&env.stores[t.index()], v);
        }
        // Only unlinked rows are queued (BOHM retires none for the reclaimer to unlink).
        self.reclaimer.collect(env.storage, &mut self.caches, guard, |_, _, _, _| Unlink::Gone);
    }

    /// Queues the versions from `v` down, cut off their chain, for freeing after the grace
    /// period of epoch `e`.
    fn retire_chain(&mut self, t: TableId, v: NonNull<BohmVersion>, e: u64) {
        let mut next = Some(v);
        while let Some(p) = next {
            // SAFETY: the cut chain is this thread's alone; freed after the grace.
            next = NonNull::new(unsafe { p.as_ref() }.next.load(Ordering::Relaxed));
            self.dead.push_back((t, p, e));
        }
    }
}

/// One buffered write.
#[derive(Clone, Copy, Debug)]
struct Buffered {
    table: TableId,
    key: u64,
    /// Present after the write (an insert or update), or deleted.
    present: bool,
    /// The image's offset in the arena.
    off: usize,
}

/// One transaction's buffers; an execution thread keeps one per recursion depth.
#[derive(Default)]
pub struct Scratchpad {
    writes: Vec<Buffered>,
    /// The units (of tables in unit mode) whose writers before the transaction's timestamp
    /// are known complete.
    settled: Vec<(TableId, u64)>,
    /// Rows of units it writes that it found deleted (a tombstone, the newest version):
    /// candidates for unlinking at completion (see [`Exec::unlink_deleted`]).
    deleted: Vec<(TableId, u64, RowId)>,
    /// The slots taken for the rows of units it creates, by index into `writes`
    /// ([`Exec::reserve_unit_rows`]).
    fresh: Vec<(usize, RowId)>,
    arena: Vec<u8>,
    read: Vec<u8>,
    scan: ScanBuf,
    /// The history recorder of the transactions run at this depth, when the database records
    /// histories (evaluation nests transactions, so each depth records its own).
    recorder: Option<Recorder>,
}

impl Scratchpad {
    /// Buffers recording into `recorder`, if any.
    pub fn new(recorder: Option<Recorder>) -> Self {
        Scratchpad { recorder, ..Default::default() }
    }

    /// The history recorded at this depth so far (moved out).
    pub fn take_history(&mut self) -> Option<crate::history::History> {
        self.recorder.as_mut().map(|r| r.take())
    }

    fn clear(&mut self) {
        self.writes.clear();
        self.settled.clear();
        self.deleted.clear();
        self.fresh.clear();
        self.arena.clear();
    }

    fn find(&self, t: TableId, key: u64) -> Option<usize> {
        self.writes.iter().position(|w| w.table == t && w.key == key)
    }
}

/// The abandonment of an attempt whose dependency another thread is producing.
#[inline]
fn busy() -> Abort {
    Abort::new(AbortReason::DependencyBusy)
}

/// A transaction being executed at its timestamp: the [`Worker`] its procedure runs against.
pub struct Exec<'a, 'db, P> {
    env: &'a Env<'db, P>,
    guard: &'a IndexGuard,
    ts: u64,
    pad: &'a mut Scratchpad,
    deeper: &'a mut [Scratchpad],
    abandoned: &'a Abandoned,
    /// The transaction's declared writes and their placeholders (see [`Slot`]).
    writes: &'a [(TableId, u64)],
    placeholders: &'a [AtomicPtr<BohmVersion>],
    /// The units it writes (sorted) and their placeholders.
    units: &'a [(TableId, u64)],
    unit_placeholders: &'a [AtomicPtr<BohmVersion>],
    /// Its annotated reads and the versions they see (see [`Slot::reads`]).
    reads: &'a [(TableId, u64)],
    read_refs: &'a [AtomicPtr<BohmVersion>],
    /// Its annotated unit reads and the unit versions visible to it (see [`Slot::unit_reads`]).
    unit_reads: &'a [(TableId, u64)],
    unit_read_refs: &'a [AtomicPtr<BohmVersion>],
    heap: &'a mut Heap,
}

impl<'db, P: Procedure> Exec<'_, 'db, P> {
    /// The version of `key` visible at this transaction's timestamp (`None`: absent), running
    /// its producer first if needed.
    fn visible(&mut self, t: TableId, key: u64) -> Result<Option<&'db BohmVersion>, Abort> {
        // A declared write: the version below its placeholder is the one visible here (the
        // placeholder's begin is this timestamp), found without the index or the chain's head.
        if let Some(j) = self.writes.iter().position(|&w| w == (t, key)) {
            // SAFETY: the placeholder was pushed before the batch was PLANNED; it stays alive
            // while its batch runs (see `complete`).
            let own: &'db BohmVersion = unsafe { &*self.placeholders[j].load(Ordering::Relaxed) };
            loop {
                match next_of(own).map(seen_from) {
                    None => return Ok(self.observed(t, key, None)),
                    Some(Seen::Absent { .. }) => return Ok(self.observed(t, key, None)),
                    Some(Seen::Data(v)) => return Ok(self.observed(t, key, Some(v))),
                    Some(Seen::Pending { version, producer }) => {
                        self.evaluate(producer, super::record::begin_of(version))?
                    }
                }
            }
        }
        // An annotated read: the version its CC thread found is the one visible here.
        if let Ok(j) = self.reads.binary_search(&(t, key)) {
            // SAFETY: as above (the CC thread stored it before the batch was PLANNED).
            if let Some(v) = unsafe { self.read_refs[j].load(Ordering::Relaxed).as_ref() } {
                loop {
                    match seen_from(v) {
                        Seen::Absent { .. } => return Ok(self.observed(t, key, None)),
                        Seen::Data(v) => return Ok(self.observed(t, key, Some(v))),
                        Seen::Pending { version, producer } => {
                            self.evaluate(producer, begin_of(version))?
                        }
                    }
                }
            }
        }
        let tbl = table(self.env.storage, t)?;
        self.settle_unit(t, key)?;
        let Some(rid) = tbl.index.get(key, self.guard) else {
            return Ok(self.observed(t, key, None));
        };
        let rec: &'db BohmRecord = tbl.rows.get(rid).header;
        loop {
            match rec.seen(self.ts) {
                Seen::Data(v) => return Ok(self.observed(t, key, Some(v))),
                Seen::Absent { origin } => {
                    if origin != NEVER {
                        self.found_deleted(t, key, rid);
                    }
                    return Ok(self.observed(t, key, None));
                }
                Seen::Pending { version, producer } => {
                    self.evaluate(producer, super::record::begin_of(version))?
                }
            }
        }
    }

    /// In a table in unit mode: makes sure every writer of the unit of `key` before this
    /// timestamp has completed (see [`super::units`]), evaluating the latest as reads do.
    #[inline]
    fn settle_unit(&mut self, t: TableId, key: u64) -> Result<(), Abort> {
        let Some(shift) = self.env.units.shift(t) else { return Ok(()) };
        let u = unit_of(key, shift);
        // A unit's chain is walked once per transaction: its writers stay complete.
        if self.pad.settled.contains(&(t, u)) {
            return Ok(());
        }
        if let Ok(j) = self.unit_reads.binary_search(&(t, u)) {
            // Annotated: its CC thread found the unit's version visible here (none: no writer
            // before this timestamp).
            // SAFETY: as for annotated reads in `visible`.
            if let Some(v) = unsafe { self.unit_read_refs[j].load(Ordering::Relaxed).as_ref() } {
                while let Seen::Pending { version, producer } = seen_from(v) {
                    self.evaluate(producer, begin_of(version))?;
                }
            }
        } else if let Some(rec) = self.env.units.get(t, u, self.guard) {
            self.after_writers(rec)?;
        }
        self.pad.settled.push((t, u));
        Ok(())
    }

    /// Notes a row this transaction found deleted if it is a row of a unit the transaction
    /// writes: it may unlink it at completion ([`Exec::unlink_deleted`]).
    #[inline]
    fn found_deleted(&mut self, t: TableId, key: u64, rid: RowId) {
        if let Some(shift) = self.env.units.shift(t) {
            if self.units.binary_search(&(t, unit_of(key, shift))).is_ok() {
                self.pad.deleted.push((t, key, rid));
            }
        }
    }

    /// Unlinks the rows noted by [`Exec::found_deleted`] whose deletion no running transaction
    /// can see past (its tombstone is the row's newest version, older than the watermark
    /// batch's first timestamp `first_live`) and that this transaction does not write: their
    /// keys leave the index, their versions and slots are freed after a grace period. Without
    /// this a table in unit mode keeps every row it ever deleted, and scans over it (TPC-C's
    /// Delivery looking for a district's oldest new order) walk them all.
    ///
    /// Only the writer of a unit may do this, before it produces its unit placeholder: it is
    /// then the only thread that pushes versions onto the unit's rows or inserts its keys. A
    /// reader that looks the key up later finds it absent, which is what the tombstone said at
    /// its timestamp; one that found the row id before runs inside its epoch, which the grace
    /// period waits for.
    fn unlink_deleted(&mut self, first_live: u64) {
        let mut stamp = None;
        for k in 0..self.pad.deleted.len() {
            let (t, key, rid) = self.pad.deleted[k];
            if self.pad.find(t, key).is_some() {
                continue;
            }
            let tbl = self.env.storage.table(t);
            if tbl.index.get(key, self.guard) != Some(rid) {
                continue;
            }
            let Some(head) = tbl.rows.get(rid).header.newest() else { continue };
            // Acquire: pairs with the Release in `produce` / `push_produced`.
            let f = head.flags.load(Ordering::Acquire);
            if f & (PRODUCED | TOMBSTONE | PASS) != PRODUCED | TOMBSTONE
                || begin_of(head) >= first_live
            {
                continue;
            }
            let removed = tbl.index.remove_if(key, rid, self.guard);
            debug_assert!(removed, "only the unit's writer removes its keys");
            let e = *stamp.get_or_insert_with(|| self.env.storage.epochs().retire_stamp());
            self.heap.retire_chain(t, NonNull::from(head), e);
            self.heap.reclaimer.unlinked(t, key, rid, e);
        }
    }

    /// Waits (by evaluating it, or abandoning the attempt) for the newest version of unit
    /// record `rec` below this timestamp to be produced.
    fn after_writers(&mut self, rec: &BohmRecord) -> Result<(), Abort> {
        while let Seen::Pending { version, producer } = rec.seen(self.ts) {
            self.evaluate(producer, begin_of(version))?;
        }
        Ok(())
    }

    /// Makes sure the version below `own` (a placeholder of this transaction) is produced.
    fn produce_below(&mut self, own: &BohmVersion) -> Result<(), Abort> {
        while let Some(Seen::Pending { version, producer }) = next_of(own).map(seen_from) {
            self.evaluate(producer, begin_of(version))?;
        }
        Ok(())
    }

    /// Before the transaction runs: every previous writer of each unit it writes has
    /// completed (so it reads their rows and pushes its own above theirs).
    fn after_unit_writers(&mut self) -> Result<(), Abort> {
        for j in 0..self.unit_placeholders.len() {
            // SAFETY: pushed by the unit's CC thread before the batch was PLANNED; alive while
            // the batch runs.
            let own: &'db BohmVersion =
                unsafe { &*self.unit_placeholders[j].load(Ordering::Relaxed) };
            self.produce_below(own)?;
        }
        Ok(())
    }

    /// Records what a read of `key` saw (the version, or absence) when histories are
    /// recorded, and returns it.
    #[inline]
    fn observed(
        &mut self,
        t: TableId,
        key: u64,
        v: Option<&'db BohmVersion>,
    ) -> Option<&'db BohmVersion> {
        if let Some(r) = &mut self.pad.recorder {
            match v {
                Some(v) => r.read(t.0, key, stamp_of(origin_of(v))),
                None => r.range(t.0, key, key),
            }
        }
        v
    }

    /// Runs the transaction of slot `producer` (at `ts`) here if nobody has, so that its
    /// versions are produced; `DependencyBusy` if another thread is running it or recursion is
    /// too deep, with the producer named in [`Abandoned`].
    fn evaluate(&mut self, producer: u64, ts: u64) -> Result<(), Abort> {
        match claim(self.env.ring, producer, ts) {
            Claim::Mine(slot) => {
                let Some((pad, rest)) = self.deeper.split_first_mut() else {
                    // Release: hands the slot back as it was.
                    slot.state.store(slot_state::UNPROCESSED, Ordering::Release);
                    // The execution loop runs this producer first, at the top of its stack.
                    self.abandoned.deepest.set((producer, ts));
                    return Err(busy());
                };
                run_slot(self.env, self.guard, slot, pad, rest, self.abandoned, self.heap).map(drop)
            }
            Claim::Complete => Ok(()),
            Claim::Busy => {
                self.abandoned.busy.set((producer, ts));
                Err(busy())
            }
        }
    }

    /// With histories recorded: makes sure the version below each placeholder this
    /// transaction writes is produced, so that its write can name it (evaluating producers as
    /// reads do, or abandoning the attempt).
    fn produce_prevs(&mut self) -> Result<(), Abort> {
        for j in 0..self.writes.len() {
            // SAFETY: as in `visible`.
            let own: &'db BohmVersion = unsafe { &*self.placeholders[j].load(Ordering::Relaxed) };
            self.produce_below(own)?;
        }
        Ok(())
    }

    /// Takes a slot for every row of a table in unit mode that the transaction creates
    /// (pushed later by [`Exec::push_unit_writes`]): `TableFull` if one finds none, with the
    /// slots taken given back. Nothing is visible yet, and the transaction has not logged:
    /// after this nothing can fail.
    fn reserve_unit_rows(&mut self) -> Result<(), Abort> {
        self.pad.fresh.clear();
        for i in 0..self.pad.writes.len() {
            let b = self.pad.writes[i];
            if !b.present || self.writes.contains(&(b.table, b.key)) {
                continue;
            }
            let tbl = self.env.storage.table(b.table);
            if tbl.index.get(b.key, self.guard).is_some() {
                continue;
            }
            match tbl.rows.alloc(&mut self.heap.caches[b.table.index()]) {
                Some(rid) => {
                    tbl.rows.get(rid).header.clear();
                    self.pad.fresh.push((i, rid));
                }
                None => {
                    for &(j, rid) in &self.pad.fresh {
                        let t = self.pad.writes[j].table;
                        self.heap.caches[t.index()].release(rid);
                    }
                    self.pad.fresh.clear();
                    return Err(Abort::new(AbortReason::TableFull));
                }
            }
        }
        Ok(())
    }

    /// Pushes the committed writes of rows of tables in unit mode (those without a
    /// placeholder), produced, and cuts the garbage below them (see [`super::units`]). Every
    /// one went through [`Exec::visible`] at this timestamp, which produced the versions below
    /// it; a row it creates goes into the slot [`Exec::reserve_unit_rows`] took. Called after
    /// the transaction logged (the commit contract: nothing of it is visible before its log
    /// epoch is in flight).
    fn push_unit_writes(&mut self) {
        let first_live = Batch::<P>::ts_of(self.env.watermark(), self.env.size, 0);
        self.unlink_deleted(first_live);
        let mut fresh = self.pad.fresh.iter().copied().peekable();
        for i in 0..self.pad.writes.len() {
            let b = self.pad.writes[i];
            if self.writes.contains(&(b.table, b.key)) {
                continue;
            }
            let (t, key) = (b.table, b.key);
            debug_assert!(self.env.units.shift(t).is_some(), "a write without a placeholder");
            let tbl = self.env.storage.table(t);
            let (rid, fresh) = match fresh.next_if(|&(j, _)| j == i) {
                Some((_, rid)) => (rid, true),
                None => match tbl.index.get(key, self.guard) {
                    Some(rid) => (rid, false),
                    // Inserted and deleted again: nothing to push.
                    None => {
                        debug_assert!(!b.present, "a created row has a slot reserved");
                        continue;
                    }
                },
            };
            let rec: &'db BohmRecord = tbl.rows.get(rid).header;
            let prev = match rec.newest().map(seen_from) {
                Some(Seen::Data(p)) => stamp_of(origin_of(p)),
                Some(Seen::Absent { origin }) => stamp_of(origin),
                None => UNBORN,
                Some(Seen::Pending { .. }) => unreachable!("visible produced the versions below"),
            };
            let store = &self.env.stores[t.index()];
            let v = self.heap.pools[t.index()].alloc(store);
            if b.present {
                let len = tbl.spec.row_size;
                // SAFETY: a fresh version nobody else can reach yet.
                store.row(unsafe { v.as_ref() }).write_from(&self.pad.arena[b.off..b.off + len]);
            }
            rec.push_produced(v, self.ts, if b.present { 0 } else { TOMBSTONE });
            if fresh {
                // Into the index after its version: only the unit's writer inserts its keys,
                // one writer at a time.
                let inserted = tbl.index.insert_if_absent(key, rid, self.guard);
                debug_assert!(inserted.is_ok(), "one writer of a unit at a time");
            }
            if let Some(r) = &mut self.pad.recorder {
                r.write(t.0, key, stamp_of(self.ts), prev, b.present);
            }
            // The oldest version a running transaction may read is the newest one older than
            // the watermark batch's first timestamp; the versions below it are garbage.
            // SAFETY: pushed just above.
            let mut x = next_of(unsafe { v.as_ref() });
            while let Some(old) = x {
                if begin_of(old) < first_live {
                    break;
                }
                x = next_of(old);
            }
            if let Some(keep) = x {
                settle(self.env.stores, t, keep, &mut self.heap.buf);
                if let Some(cut) = cut_after(keep) {
                    let e = self.env.storage.epochs().retire_stamp();
                    self.heap.retire_chain(t, cut, e);
                }
            }
        }
    }

    /// Logs the committed transaction's writes (whole images, or deletions) at its timestamp,
    /// the commit stamp (for every key a later writer has a later timestamp), before any of
    /// them is produced: a transaction that reads one logs later, so its log epoch is not
    /// older (the log epochs' dependency rule). Returns the log epoch; 0 if it logged nothing.
    /// The epoch stays in flight until the versions are produced (`run_slot`).
    fn log(&mut self) -> u64 {
        let Some(log) = self.heap.log.as_mut().filter(|_| !self.pad.writes.is_empty()) else {
            return 0;
        };
        log.begin(self.ts, self.pad.writes.len() as u32);
        for b in &self.pad.writes {
            if b.present {
                let len = self.env.storage.table(b.table).spec.row_size;
                log.put_image(b.table.0, self.ts, b.key, &self.pad.arena[b.off..b.off + len]);
            } else {
                log.delete(b.table.0, self.ts, b.key);
            }
        }
        let epoch = log.end();
        // The ring is written out as the thread goes (its epoch leaves flight once the
        // versions are produced, in `run_slot`); the commit is acknowledged (and waited for
        // under `--sync commit`) when its batch is counted.
        log.write_out();
        epoch
    }

    /// The current image of `key` (the buffered one, or the visible version's) into the
    /// arena, as a buffered write; `None` if absent. The whole row is copied, whatever columns
    /// the caller uses: completion writes the whole image into the new version.
    fn buffer(&mut self, t: TableId, key: u64) -> Result<Option<usize>, Abort> {
        if let Some(i) = self.pad.find(t, key) {
            return Ok(self.pad.writes[i].present.then_some(i));
        }
        let Some(v) = self.visible(t, key)? else { return Ok(None) };
        let tbl = table(self.env.storage, t)?;
        let len = tbl.spec.row_size;
        let off = self.pad.arena.len();
        self.pad.arena.resize(off + len, 0);
        self.env.stores[t.index()].row(v).read_into(&mut self.pad.arena[off..off + len]);
        self.pad.writes.push(Buffered { table: t, key, present: true, off });
        Ok(Some(self.pad.writes.len() - 1))
    }

    /// Fills this transaction's placeholders (see the module docs) and completes `slot`.
    fn complete(&mut self, slot: &Slot<P>, outcome: Outcome) {
        // SAFETY: this thread owns the slot (its CAS to EXECUTING succeeded); the CC threads'
        // writes to it happened before the batch was PLANNED, which this thread Acquired.
        let (writes, ph) = unsafe { (&*slot.writes.get(), &*slot.placeholders.get()) };
        for (i, &(t, key)) in writes.iter().enumerate() {
            // SAFETY: every declared write's placeholder was pushed by its CC thread before
            // the batch was PLANNED; it stays alive until the batch watermark passes this batch.
            let v = unsafe { &*ph[i].load(Ordering::Relaxed) };
            let own = (outcome == Outcome::Committed).then(|| self.pad.find(t, key)).flatten();
            match own {
                Some(w) => {
                    let b = self.pad.writes[w];
                    if b.present {
                        let len = self.env.storage.table(t).spec.row_size;
                        self.env.stores[t.index()]
                            .row(v)
                            .write_from(&self.pad.arena[b.off..b.off + len]);
                    }
                    if let Some(r) = &mut self.pad.recorder {
                        let prev = match next_of(v).map(seen_from) {
                            Some(Seen::Data(p)) => stamp_of(origin_of(p)),
                            Some(Seen::Absent { origin }) => stamp_of(origin),
                            None => UNBORN,
                            Some(Seen::Pending { .. }) => {
                                unreachable!("produce_prevs produced every version below")
                            }
                        };
                        r.write(t.0, key, stamp_of(self.ts), prev, b.present);
                    }
                    produce(v, if b.present { 0 } else { TOMBSTONE }, self.ts);
                }
                None => match next_of(v).map(seen_from) {
                    None => produce(v, TOMBSTONE, NEVER),
                    Some(Seen::Absent { origin }) => produce(v, TOMBSTONE, origin),
                    Some(Seen::Data(prev)) => {
                        let len = self.env.storage.table(t).spec.row_size;
                        let buf = &mut self.pad.read;
                        buf.resize(len, 0);
                        let store = &self.env.stores[t.index()];
                        store.row(prev).read_into(buf);
                        store.row(v).write_from(buf);
                        produce(v, 0, origin_of(prev));
                    }
                    Some(Seen::Pending { .. }) => produce(v, PASS, 0),
                },
            }
        }
        // The units: after the rows (`push_unit_writes`), whatever the outcome.
        for p in self.unit_placeholders {
            // SAFETY: as the placeholders above.
            produce(unsafe { &*p.load(Ordering::Relaxed) }, 0, self.ts);
        }
        if let Some(r) = &mut self.pad.recorder {
            // A rolled-back attempt's placeholders hold the previous values under their
            // origins: no read names it, and the history keeps only what commits.
            if outcome == Outcome::Committed {
                r.committed();
                r.end();
            } else {
                r.discard();
            }
        }
        // Relaxed: published by the COMPLETE store below (Release).
        slot.outcome.store(outcome as u8, Ordering::Relaxed);
        // Release: the placeholders' state and the outcome before COMPLETE (pairs with the
        // Acquire of whoever checks the slot).
        slot.state.store(slot_state::COMPLETE, Ordering::Release);
    }
}

/// Prefetches what running `slot` (of a planned batch the caller executes) touches first:
/// the placeholders it fills, or (`deep`, once they are cached) the versions below them,
/// which its read-modify-writes read, and the versions its annotated reads see. Execution
/// otherwise waits on these lines one by one: the CC layer wrote the placeholders batches
/// ago, and the versions below are wherever their records' last writers left them.
#[inline]
pub fn prefetch_slot<P>(slot: &Slot<P>, deep: bool) {
    use crate::storage::row_store::prefetch_line;
    // SAFETY: the batch is PLANNED (Acquired by the caller) and being executed: the lists are
    // read-only, and the versions they name live until the batch watermark passes it.
    let (writes, ph) = unsafe { (&*slot.writes.get(), &*slot.placeholders.get()) };
    // SAFETY: as above.
    let (reads, refs) = unsafe { (&*slot.reads.get(), &*slot.read_refs.get()) };
    let version = |v: *const BohmVersion| {
        prefetch_line::<false>(v.cast());
        prefetch_line::<false>(v.cast::<u8>().wrapping_add(64));
    };
    for p in &ph[..writes.len()] {
        // Relaxed: addresses for prefetch hints only; the caller Acquired the PLANNED batch, and
        // execution loads them again to read through them.
        let v = p.load(Ordering::Relaxed);
        if !deep {
            prefetch_line::<true>(v.cast());
        } else if !v.is_null() {
            // SAFETY: as above.
            let below = unsafe { &*v }.next.load(Ordering::Relaxed);
            if !below.is_null() {
                version(below);
            }
        }
    }
    if deep {
        for r in &refs[..reads.len()] {
            let v = r.load(Ordering::Relaxed);
            if !v.is_null() {
                version(v);
            }
        }
    }
}

/// Runs the transaction of `slot`, which the caller moved to EXECUTING, with `pad` as its
/// buffers and `deeper` for recursion. On completion returns its outcome; an abandoned attempt
/// (`DependencyBusy`) sets the slot back to UNPROCESSED and returns the abort, having named
/// its cause in `abandoned`; any other abort that is not a final outcome (a procedure bug, a full table)
/// completes the slot as rolled back and returns the abort.
pub fn run_slot<P: Procedure>(
    env: &Env<'_, P>,
    guard: &IndexGuard,
    slot: &Slot<P>,
    pad: &mut Scratchpad,
    deeper: &mut [Scratchpad],
    abandoned: &Abandoned,
    heap: &mut Heap,
) -> Result<Outcome, Abort> {
    // SAFETY: the caller's CAS made this thread the slot's owner; the sequencer wrote the
    // procedure and the set before the batch was SEQUENCED.
    // The CC threads' writes to `writes` and `placeholders` happened before the batch was
    // PLANNED, which the caller Acquired.
    let (proc, set, writes, placeholders, units, unit_placeholders) = unsafe {
        (
            &*slot.proc.get(),
            &*slot.set.get(),
            &*slot.writes.get(),
            &*slot.placeholders.get(),
            &*slot.units.get(),
            &*slot.unit_placeholders.get(),
        )
    };
    // SAFETY: as above (the sequencer wrote the reads, the CC threads their versions).
    let (reads, read_refs) = unsafe { (&*slot.reads.get(), &*slot.read_refs.get()) };
    let read_refs = &read_refs[..reads.len()];
    // SAFETY: as above.
    let (unit_reads, unit_read_refs) =
        unsafe { (&*slot.unit_reads.get(), &*slot.unit_read_refs.get()) };
    let unit_read_refs = &unit_read_refs[..unit_reads.len()];
    // The placeholder lists keep their length across transactions; the current ones are first.
    let unit_placeholders = &unit_placeholders[..units.len()];
    heap.phase(CommitPhase::Begun, 0);
    pad.clear();
    let ts = slot.ts.load(Ordering::Relaxed);
    if let Some(r) = &mut pad.recorder {
        r.begin();
        // The transaction's position is its serialization point and where it reads.
        r.serial_point_at(ts);
    }
    let mut exec = Exec {
        env,
        guard,
        ts,
        pad,
        deeper,
        abandoned,
        writes,
        placeholders,
        units,
        unit_placeholders,
        reads,
        read_refs,
        unit_reads,
        unit_read_refs,
        heap,
    };
    let ty = &env.types[proc.txn_type()];
    // BOHM needs the write set only: reads are at the timestamp, declared or not.
    let checks = Checks {
        templates: env.templates,
        access_set: Some(set),
        read_only: proc.read_only(),
        writes_only: true,
    };
    let mut result = exec.after_unit_writers();
    if result.is_ok() {
        // Every writer before it of each unit it writes is complete now (each waited for the
        // one before it).
        exec.pad.settled.extend_from_slice(units);
        result = proc.run(&mut Tx::new(&mut exec, ty, checks));
    }
    if let (Ok(()), Some(t)) = (result, env.acks) {
        // Counted in its client's acknowledgement row, a declared read-modify-write: the row
        // holds the client's commits up to this timestamp and their ledger, as the
        // interactive driver writes it.
        // SAFETY: as above (the sequencer wrote the client before the batch was SEQUENCED).
        let client = unsafe { *slot.client.get() };
        let row = exec.read(t, client as u64, crate::engine::driver::read_ack);
        result = row.and_then(|row| {
            let (count, ledger) = row.unwrap_or((0, 0));
            // Relaxed: published by `complete`'s Release of the slot's state.
            slot.ack_count.store(count + 1, Ordering::Relaxed);
            crate::engine::driver::write_ack(
                &mut exec,
                t,
                client,
                count + 1,
                ledger + proc.ledger(),
            )
        });
    }
    if result.is_ok() && exec.pad.recorder.is_some() {
        result = exec.produce_prevs();
    }
    if result.is_ok() {
        // Nothing can fail after this.
        result = exec.reserve_unit_rows();
    }
    let wrote = !exec.pad.writes.is_empty();
    let outcome = match result {
        Ok(()) => {
            // It commits: its placeholders (placed before it ran) held its writes, and nothing
            // can abandon it any more.
            if wrote {
                exec.heap.phase(CommitPhase::Locked, 0);
            }
            exec.heap.phase(CommitPhase::Validated, 0);
            // Logged before any of its writes is visible (its log epoch in flight until they
            // all are): the rows of its units are pushed, readable, just after.
            let epoch = exec.log();
            if wrote {
                exec.heap.phase(CommitPhase::Logged, epoch);
            }
            exec.push_unit_writes();
            // Published by `complete`'s Release of the slot's state.
            slot.log_epoch.store(epoch, Ordering::Relaxed);
            Outcome::Committed
        }
        Err(a) if a.reason == AbortReason::DependencyBusy => {
            if let Some(r) = &mut exec.pad.recorder {
                r.discard();
            }
            // Release: hands the slot back (pairs with the next owner's Acquire CAS).
            slot.state.store(slot_state::UNPROCESSED, Ordering::Release);
            return Err(a);
        }
        Err(a) if a.reason.is_final() => Outcome::User,
        Err(a) if a.reason == AbortReason::AccessSetMismatch => Outcome::Resubmit,
        Err(a) if a.reason == AbortReason::UserRetry => Outcome::Retry,
        Err(a) => {
            exec.complete(slot, Outcome::User);
            return Err(a);
        }
    };
    exec.complete(slot, outcome);
    if outcome == Outcome::Committed && wrote {
        // Relaxed: this thread stored the log epoch (it completed the slot).
        exec.heap.phase(CommitPhase::Installed, slot.log_epoch.load(Ordering::Relaxed));
    }
    // Its versions are produced: its log epoch leaves flight (the commit contract; the batch
    // acknowledges it later).
    if let Some(log) = &mut exec.heap.log {
        log.installed();
    }
    Ok(outcome)
}

impl<P: Procedure> Worker for Exec<'_, '_, P> {
    /// The execution thread begins it; nothing to do.
    fn begin(&mut self) {}

    #[inline]
    fn read_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        if let Some(i) = self.pad.find(t, key) {
            let b = self.pad.writes[i];
            if !b.present {
                return Ok(None);
            }
            let len = self.env.storage.table(t).spec.row_size;
            return Ok(Some(f(&self.pad.arena[b.off..b.off + len])));
        }
        let Some(v) = self.visible(t, key)? else { return Ok(None) };
        let tbl = table(self.env.storage, t)?;
        let buf = &mut self.pad.read;
        buf.resize(tbl.spec.row_size, 0);
        self.env.stores[t.index()].row(v).read_cols_into(buf, &tbl.projection, cols);
        Ok(Some(f(buf)))
    }

    fn write(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        check_len(table(self.env.storage, t)?, value)?;
        self.update(t, key, |row| row.copy_from_slice(value)).map(|r| r.is_some())
    }

    fn update_cols<T>(
        &mut self,
        t: TableId,
        key: u64,
        reads: Columns,
        writes: Columns,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        let _ = (reads, writes);
        let Some(i) = self.buffer(t, key)? else { return Ok(None) };
        let b = self.pad.writes[i];
        let len = self.env.storage.table(t).spec.row_size;
        Ok(Some(f(&mut self.pad.arena[b.off..b.off + len])))
    }

    fn insert(&mut self, t: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        check_len(table(self.env.storage, t)?, value)?;
        match self.pad.find(t, key) {
            Some(i) if self.pad.writes[i].present => return Ok(false),
            Some(i) => {
                let off = self.pad.writes[i].off;
                self.pad.arena[off..off + value.len()].copy_from_slice(value);
                self.pad.writes[i].present = true;
                return Ok(true);
            }
            None => {}
        }
        if self.visible(t, key)?.is_some() {
            return Ok(false);
        }
        let off = self.pad.arena.len();
        self.pad.arena.extend_from_slice(value);
        self.pad.writes.push(Buffered { table: t, key, present: true, off });
        Ok(true)
    }

    fn delete(&mut self, t: TableId, key: u64) -> Result<bool, Abort> {
        let Some(i) = self.buffer(t, key)? else { return Ok(false) };
        self.pad.writes[i].present = false;
        Ok(true)
    }

    fn scan(
        &mut self,
        t: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        mut f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        const CHUNK: usize = 64;
        let tbl = table(self.env.storage, t)?;
        let len = tbl.spec.row_size;
        if let Some(shift) = self.env.units.shift(t) {
            // Every earlier writer of the range's units has completed before the index is
            // read: the keys they inserted are in it.
            let units = self.env.units;
            let mut buf = std::mem::take(&mut self.heap.scan);
            let (ulo, uhi) = (unit_of(lo, shift), unit_of(hi, shift));
            let r = units.each_in(t, ulo, uhi, &mut buf, self.guard, |rec| self.after_writers(rec));
            self.heap.scan = buf;
            r?;
        }
        let (mut from, mut visited) = (lo, 0);
        // The keys from `lo` up to this one were all observed (present or absent).
        let mut covered = None;
        let mut scan = std::mem::take(&mut self.pad.scan);
        let out = 'chunks: loop {
            if from > hi {
                covered = Some(hi);
                break Ok(visited);
            }
            if visited >= limit {
                break Ok(visited);
            }
            if !tbl.index.scan(from, hi, CHUNK, &mut scan, self.guard) {
                break Err(Abort::new(AbortReason::Unsupported));
            }
            let n = scan.len();
            for (key, _) in scan.entries() {
                let r = self.read_cols(t, key, crate::engine::ALL_COLUMNS, |row| {
                    debug_assert_eq!(row.len(), len);
                    f(key, row)
                });
                covered = Some(key);
                match r {
                    Err(a) => break 'chunks Err(a),
                    Ok(None) => {}
                    Ok(Some(flow)) => {
                        visited += 1;
                        if flow.is_break() || visited >= limit {
                            break 'chunks Ok(visited);
                        }
                    }
                }
                from = key.saturating_add(1);
                if key == u64::MAX {
                    break 'chunks Ok(visited);
                }
            }
            if n < CHUNK {
                covered = Some(hi);
                break Ok(visited);
            }
        };
        self.pad.scan = scan;
        if let (Ok(_), Some(upto), Some(r)) = (&out, covered, &mut self.pad.recorder) {
            // Every key of the range without a read of its own was observed absent.
            r.range(t.0, lo, upto);
        }
        out
    }

    /// Completion fills the placeholders (see [`run_slot`]); nothing can fail here.
    fn commit(&mut self) -> Result<(), Abort> {
        Ok(())
    }

    /// The buffered writes are dropped by the caller of `run`.
    fn abort(&mut self) {}
}

#[cfg(test)]
mod tests;
