//! BOHM's pipeline: the batch ring the sequencer fills, the concurrency-control threads
//! annotate with placeholders and the execution threads run (§3.1, §3.2.4, §3.3.1).
//!
//! **Batches.** The ring holds `K` batches of `B` slots, reused for the whole run, so a
//! transaction costs no allocation once the ring is warm. A batch moves through four stages,
//! each published by one Release store (or the last of `m` or `n` increments) that the next
//! stage's threads Acquire:
//!
//! ```text
//!   Free --sequencer--> Sequenced --m CC threads--> Planned --n execution threads--> Executed
//!     ^                                                                                  |
//!     +----------------- sequencer: report commits, re-submit OLLP misses ---------------+
//! ```
//!
//! A slot's fields are written by one stage and read by the later ones; the stage word's
//! Release/Acquire orders them. Within the execution stage a slot's `SlotState` (Unprocessed,
//! Executing, Complete) says which execution thread owns its procedure: the one whose CAS from
//! Unprocessed succeeded.

use super::record::{BohmExt, BohmRecord, BohmVersion};
use super::units::{unit_of, Units};
use crate::engine::context::WorkerCtx;
use crate::engine::procedure::AccessSet;
use crate::engine::AccessMode;
use crate::error::Abort;
use crate::storage::index::IndexGuard;
use crate::storage::row_store::prefetch_line;
use crate::storage::version::{VersionPool, VersionStore};
use crate::storage::{RowId, TableId};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Batch stages (see the module docs).
pub mod stage {
    /// The sequencer may fill it.
    pub const FREE: u64 = 0;
    /// Filled and timestamped: the CC threads may plan it.
    pub const SEQUENCED: u64 = 1;
    /// Every placeholder is in place: the execution threads may run it.
    pub const PLANNED: u64 = 2;
    /// Every slot is complete: the sequencer may report it.
    pub const EXECUTED: u64 = 3;

    /// The word a batch's `stage` holds: the stage and the number of the batch it belongs to,
    /// in one atomic word. A thread waiting for batch `n` of a ring position must not take the
    /// stage of the batch `n - RING` that the position held before: with the two in separate
    /// words, a waiter that loaded the old batch's PLANNED, was preempted while that batch
    /// finished and the sequencer refilled the position, and then loaded the new number, ran
    /// an unplanned batch (a null placeholder: the SIGSEGV CI saw).
    #[inline]
    pub const fn of(number: u64, stage: u64) -> u64 {
        number << 2 | stage
    }
}

/// A slot's execution state (§3.3.1).
pub mod slot_state {
    /// Not run, or its last attempt was abandoned.
    pub const UNPROCESSED: u8 = 0;
    /// An execution thread runs it.
    pub const EXECUTING: u8 = 1;
    /// Its placeholders are produced.
    pub const COMPLETE: u8 = 2;
}

/// How a slot's transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    /// Committed.
    Committed = 0,
    /// Rolled back by the procedure (its placeholders hold the previous values).
    User = 1,
    /// It touched a key it did not declare (OLLP): rolled back like a user abort, and the
    /// sequencer submits it again, declared anew, with a later timestamp.
    Resubmit = 2,
    /// The slot holds no transaction in this batch (the end of a run of a fixed number of
    /// transactions): complete from the start, nothing to count.
    Empty = 3,
    /// The procedure asked to run again (`Abort::retry`): rolled back, and submitted again
    /// like [`Outcome::Resubmit`].
    Retry = 4,
}

impl Outcome {
    /// Whether the sequencer submits the slot's transaction again in a later batch.
    pub fn resubmits(outcome: u8) -> bool {
        outcome == Outcome::Resubmit as u8 || outcome == Outcome::Retry as u8
    }
}

/// One transaction of a batch.
pub struct Slot<P> {
    /// The procedure; owned by the sequencer outside the execution stage, and by the execution
    /// thread whose CAS set [`Slot::state`] to EXECUTING within it.
    pub proc: UnsafeCell<P>,
    /// The generator (logical client) the procedure belongs to.
    pub client: UnsafeCell<usize>,
    /// The declared access set, sealed (written by the sequencer, read-only afterwards).
    pub set: UnsafeCell<AccessSet>,
    /// The declared writes in the set's order, and per write its placeholder (set by the CC
    /// thread that owns the record; read by the execution stage).
    pub writes: UnsafeCell<Vec<(TableId, u64)>>,
    /// The placeholders, index for index with `writes`.
    pub placeholders: UnsafeCell<Vec<AtomicPtr<BohmVersion>>>,
    /// The units it writes (of tables in unit mode, see [`super::units`]), in order.
    pub units: UnsafeCell<Vec<(TableId, u64)>>,
    /// The units' placeholders, index for index with `units`.
    pub unit_placeholders: UnsafeCell<Vec<AtomicPtr<BohmVersion>>>,
    /// Its declared reads of keys of tables not in unit mode that it does not write, in
    /// (table, key) order, when the protocol annotates reads (§3.2.3; set by the sequencer).
    pub reads: UnsafeCell<Vec<(TableId, u64)>>,
    /// Per read the version it sees: the record's newest version when the CC thread that owns
    /// the record planned the transaction (null: none, or not planned; the execution then
    /// finds it through the index and the chain).
    pub read_refs: UnsafeCell<Vec<AtomicPtr<BohmVersion>>>,
    /// The units of tables in unit mode that its declared reads (keys and ranges) touch and
    /// that it does not write, in order, when the protocol annotates reads (set by the
    /// sequencer; see [`super::units`]).
    pub unit_reads: UnsafeCell<Vec<(TableId, u64)>>,
    /// Per unit read the unit's version visible at the transaction's timestamp: the unit
    /// record's newest version when the CC thread that owns the unit planned the transaction
    /// (null: no writer of the unit before it). The execution waits for that version's
    /// producer instead of walking the unit's chain from its head, past every later batch's
    /// placeholders.
    pub unit_read_refs: UnsafeCell<Vec<AtomicPtr<BohmVersion>>>,
    /// The timestamp (the position in the log).
    pub ts: AtomicU64,
    /// When the transaction was first submitted to the sequencer (the clock's raw reading).
    pub submitted: AtomicU64,
    /// The log epoch of its commit (valid once COMPLETE and committed; 0 if it logged
    /// nothing): it is durable once the log's durable epoch reaches it.
    pub log_epoch: AtomicU64,
    /// With acknowledgements (`RunConfig::acks`): the commit count its client's
    /// acknowledgement row holds after it (valid once COMPLETE and committed).
    pub ack_count: AtomicU64,
    /// Execution state.
    pub state: AtomicU8,
    /// How it ended (valid once COMPLETE; `Empty` once the sequencer has reported it).
    pub outcome: AtomicU8,
}

// SAFETY: the `UnsafeCell` fields are accessed by one thread at a time, as the batch stages and
// the slot state hand them over (see the module docs); everything else is atomic.
unsafe impl<P: Send> Sync for Slot<P> {}

impl<P> Slot<P> {
    /// A slot holding `proc` of `client`.
    pub fn new(proc: P, client: usize) -> Self {
        Slot {
            proc: UnsafeCell::new(proc),
            client: UnsafeCell::new(client),
            set: UnsafeCell::new(AccessSet::default()),
            writes: UnsafeCell::new(Vec::new()),
            placeholders: UnsafeCell::new(Vec::new()),
            units: UnsafeCell::new(Vec::new()),
            unit_placeholders: UnsafeCell::new(Vec::new()),
            reads: UnsafeCell::new(Vec::new()),
            read_refs: UnsafeCell::new(Vec::new()),
            unit_reads: UnsafeCell::new(Vec::new()),
            unit_read_refs: UnsafeCell::new(Vec::new()),
            ts: AtomicU64::new(0),
            submitted: AtomicU64::new(0),
            log_epoch: AtomicU64::new(0),
            ack_count: AtomicU64::new(0),
            state: AtomicU8::new(slot_state::UNPROCESSED),
            outcome: AtomicU8::new(Outcome::Empty as u8),
        }
    }

    /// Lists the declared writes and makes room for their placeholders (the sequencer, after
    /// declaring into `set`): a write of a table in unit mode, and every write range (which
    /// puts its table in unit mode), is a write of units ([`super::units`]), created here if
    /// new. With `annotate`, lists the declared reads the CC threads annotate (see
    /// [`Slot::reads`]). An unknown table is left to the execution, which reports it.
    /// `Err(table)` if a write range of `table` covers more than
    /// [`super::units::MAX_RANGE_UNITS`] units.
    ///
    /// # Safety
    ///
    /// The caller owns the slot (its batch is being sequenced).
    pub unsafe fn plan_writes(
        &self,
        units: &Units,
        g: &IndexGuard,
        annotate: bool,
    ) -> Result<(), TableId> {
        // SAFETY: the caller owns the slot.
        let (reads, read_refs) = unsafe { (&mut *self.reads.get(), &mut *self.read_refs.get()) };
        // SAFETY: the caller owns the slot.
        let (unit_reads, unit_refs) =
            unsafe { (&mut *self.unit_reads.get(), &mut *self.unit_read_refs.get()) };
        // SAFETY: the caller owns the slot.
        let (set, writes, ph, us, uph) = unsafe {
            (
                &*self.set.get(),
                &mut *self.writes.get(),
                &mut *self.placeholders.get(),
                &mut *self.units.get(),
                &mut *self.unit_placeholders.get(),
            )
        };
        writes.clear();
        us.clear();
        reads.clear();
        unit_reads.clear();
        // Ranges first: they may put a table in unit mode for this transaction's keys too.
        for (t, lo, hi, mode) in set.ranges() {
            if mode != AccessMode::Write || lo > hi || !units.has(t) {
                continue;
            }
            let shift = units.switch(t, lo, hi);
            us.extend(Units::covering(shift, lo, hi).ok_or(t)?.map(|u| (t, u)));
        }
        for (t, key, mode) in set.keys() {
            match (mode, units.shift(t)) {
                // (Sets hold no accumulations: they declare them as writes.)
                (AccessMode::Write | AccessMode::Accumulate, Some(shift)) => {
                    us.push((t, unit_of(key, shift)))
                }
                (AccessMode::Write | AccessMode::Accumulate, None) => writes.push((t, key)),
                (AccessMode::Read, None) if annotate => reads.push((t, key)),
                // A table in unit mode has rows no placeholder stands for: its unit is
                // annotated instead.
                (AccessMode::Read, Some(shift)) if annotate => {
                    unit_reads.push((t, unit_of(key, shift)))
                }
                (AccessMode::Read, _) => {}
            }
        }
        if annotate {
            for (t, lo, hi, mode) in set.ranges() {
                let Some(shift) = units.shift(t) else { continue };
                // A range over too many units is left to the execution's walks.
                if mode != AccessMode::Read || lo > hi {
                    continue;
                }
                if let Some(covered) = Units::covering(shift, lo, hi) {
                    unit_reads.extend(covered.map(|u| (t, u)));
                }
            }
        }
        us.sort_unstable();
        us.dedup();
        unit_reads.sort_unstable();
        unit_reads.dedup();
        // Its own units are settled by waiting for their previous writers.
        unit_reads.retain(|u| us.binary_search(u).is_err());
        for &(t, u) in us.iter() {
            units.get_or_create(t, u, g);
        }
        for (list, n) in [
            (ph, writes.len()),
            (uph, us.len()),
            (read_refs, reads.len()),
            (unit_refs, unit_reads.len()),
        ] {
            for p in list.iter() {
                // Relaxed: the sequencer's own slot, published with the batch's SEQUENCED stage
                // (Release).
                p.store(std::ptr::null_mut(), Ordering::Relaxed);
            }
            while list.len() < n {
                list.push(AtomicPtr::new(std::ptr::null_mut()));
            }
        }
        Ok(())
    }
}

/// One batch: its slots and its stage.
pub struct Batch<P> {
    /// The slots; only the first [`Batch::len`] are in use.
    pub slots: Box<[Slot<P>]>,
    /// The stage and the number of the batch it belongs to, in one word ([`stage::of`]).
    pub stage: AtomicU64,
    /// The batch's number (its first slot's timestamp is `number * slots + 1`).
    pub number: AtomicU64,
    /// Slots in use.
    pub len: AtomicU32,
    /// CC partitions done with it, then execution threads done with it.
    pub done: AtomicU32,
    /// The next slot to hand out, when execution threads take slots as they go rather than
    /// round-robin (`split=adaptive`; reset by the sequencer).
    pub cursor: AtomicU32,
}

impl<P> Batch<P> {
    /// Whether this ring position holds batch `number` in stage `want` (see [`stage::of`]);
    /// an Acquire load, which pairs with the Release that published the stage, so the batch's
    /// fields written before it are visible.
    #[inline]
    pub fn is_at(&self, number: u64, want: u64) -> bool {
        self.stage.load(Ordering::Acquire) == stage::of(number, want)
    }

    /// The timestamp of slot `i` of batch `number` of batches of `size` slots: positions in
    /// the log, from 1 (0 is the loaded rows').
    #[inline]
    pub fn ts_of(number: u64, size: usize, i: usize) -> u64 {
        number * size as u64 + i as u64 + 1
    }

    /// A slot's producer value ([`super::record::BohmExt::producer`]): a tag bit (origins,
    /// which replace it once the version is produced, never have it), ring index and slot.
    #[inline]
    pub fn producer(ring_index: usize, i: usize) -> u64 {
        PRODUCER_TAG | (ring_index as u64) << 32 | i as u64
    }
}

/// The bit that marks a [`Batch::producer`] value.
pub const PRODUCER_TAG: u64 = 1 << 63;

/// What [`claim`] found.
pub enum Claim<'a, P> {
    /// The caller now runs the slot's transaction (the slot is EXECUTING).
    Mine(&'a Slot<P>),
    /// The transaction is complete (or its ring position already holds a later one, which
    /// happens only once it is).
    Complete,
    /// Another thread is running it.
    Busy,
}

/// Claims the slot of `producer` (a [`Batch::producer`] value) for running its transaction at
/// `ts`: by CAS from UNPROCESSED, and only if the slot still holds that transaction. A reader
/// may come late with a producer it loaded before the version was produced, when the batch
/// is executed and its ring position refilled: the timestamp tells.
pub fn claim<P>(ring: &[Batch<P>], producer: u64, ts: u64) -> Claim<'_, P> {
    let slot = slot_of(ring, producer);
    // Acquire: pairs with the Release of the slot's last owner (its procedure and buffers), or
    // the sequencer's Release when it refilled the slot (the timestamp below is then its own).
    match slot.state.compare_exchange(
        slot_state::UNPROCESSED,
        slot_state::EXECUTING,
        Ordering::Acquire,
        Ordering::Acquire,
    ) {
        // Relaxed `ts`: after the CAS's Acquire (success or failure), which orders the sequencer's
        // store of it.
        Ok(_) if slot.ts.load(Ordering::Relaxed) == ts => Claim::Mine(slot),
        Ok(_) => {
            // Release: hands the refilled slot back as it was.
            slot.state.store(slot_state::UNPROCESSED, Ordering::Release);
            Claim::Complete
        }
        Err(slot_state::COMPLETE) => Claim::Complete,
        Err(_) if slot.ts.load(Ordering::Relaxed) != ts => Claim::Complete,
        Err(_) => Claim::Busy,
    }
}

/// The slot a [`Batch::producer`] value names.
#[inline]
fn slot_of<P>(ring: &[Batch<P>], producer: u64) -> &Slot<P> {
    &ring[((producer >> 32) & 0xFFFF) as usize].slots[producer as u32 as usize]
}

/// Whether the transaction of `producer` (at `ts`) is being executed by some thread: an
/// attempt abandoned because of it would be abandoned again while this holds, so the execution
/// loop checks it instead of re-running the attempt. A hint: Relaxed, and [`claim`] decides.
#[inline]
pub fn executing<P>(ring: &[Batch<P>], producer: u64, ts: u64) -> bool {
    let slot = slot_of(ring, producer);
    // Relaxed: a hint (see above).
    slot.state.load(Ordering::Relaxed) == slot_state::EXECUTING
        && slot.ts.load(Ordering::Relaxed) == ts
}

/// Which CC partition owns `key` of `table` among `m`.
#[inline]
pub fn owner(table: TableId, key: u64, m: usize) -> usize {
    let h = (key ^ u64::from(table.0).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (((h >> 32) * m as u64) >> 32) as usize
}

/// Which CC partition owns unit `unit` of `table` among `m`.
#[inline]
pub fn unit_owner(table: TableId, unit: u64, m: usize) -> usize {
    owner(table, !unit, m)
}

/// How many slots ahead of the one it plans a partition prefetches the records (and twice as
/// far the index slots) of (see [`Planner::plan`]).
const AHEAD: usize = 2;

/// A placeholder the CC layer pushed (see [`Planner::superseding`]).
#[derive(Clone, Copy, Debug)]
pub struct Placed {
    /// The number of the batch that pushed it.
    pub batch: u64,
    /// Its store: a table's, or one past the last table, the units'.
    pub store: TableId,
    /// The version.
    pub version: NonNull<BohmVersion>,
    /// A row's key and slot (`None` for a unit's): the row is unlinked if the version turns
    /// out to be a deletion that nothing is pushed over.
    pub row: Option<(u64, RowId)>,
}

/// The concurrency-control work of one partition of the records (§3.2.2): it owns the records
/// `owner(table, key, m) == index`, and is the only one that pushes versions onto them or
/// inserts their keys. A partition is planned by one thread at a time, batch after batch (a
/// dedicated CC thread, or with `split=adaptive` whichever thread takes it); the thread lends
/// it its storage context.
pub struct Planner<'db> {
    /// Per table its versions, then the units' (see [`super::Bohm::stores`]).
    stores: &'db [VersionStore<BohmExt>],
    units: &'db Units,
    pools: Vec<VersionPool<BohmExt>>,
    index: usize,
    m: usize,
    /// Every placeholder pushed onto a row, and every one pushed over an older version of a
    /// unit: once every execution thread is past its batch, the versions below it are garbage
    /// (and a row whose newest version it still is, deleted, is unlinked).
    pub superseding: VecDeque<Placed>,
}

impl<'db> Planner<'db> {
    /// Partition `index` of `m`.
    pub fn new(
        stores: &'db [VersionStore<BohmExt>],
        units: &'db Units,
        index: usize,
        m: usize,
    ) -> Self {
        // Allocations come one per declared write, back to back.
        let pools = stores.iter().map(|_| VersionPool::with_lookahead(8)).collect();
        Planner { stores, units, pools, index, m, superseding: VecDeque::new() }
    }

    /// Plans `batch` (at ring index `ring_index`) with the calling thread's storage context
    /// `ctx`: for every slot in order, a placeholder for each declared write and each written
    /// unit this partition owns. An unknown table is left to the execution, which reports it;
    /// a full table fails the run.
    pub fn plan<P>(
        &mut self,
        ctx: &mut WorkerCtx<'db, BohmRecord>,
        batch: &Batch<P>,
        ring_index: usize,
    ) -> Result<(), Abort> {
        let storage = ctx.storage;
        // Relaxed: the caller saw the batch SEQUENCED with Acquire, which orders the sequencer's
        // stores of its number and length.
        let number = batch.number.load(Ordering::Relaxed);
        let len = batch.len.load(Ordering::Relaxed) as usize;
        let slots = &batch.slots[..len];
        // The keys' index slots two distances ahead, their records one distance ahead: the
        // misses of several slots overlap instead of stalling one by one.
        for s in slots.iter().take(2 * AHEAD) {
            self.prefetch(ctx, s, false);
        }
        for s in slots.iter().take(AHEAD) {
            self.prefetch(ctx, s, true);
        }
        for (i, slot) in slots.iter().enumerate() {
            if let Some(s) = slots.get(i + 2 * AHEAD) {
                self.prefetch(ctx, s, false);
            }
            if let Some(s) = slots.get(i + AHEAD) {
                self.prefetch(ctx, s, true);
            }
            // SAFETY: the batch is SEQUENCED (Acquired by the caller): the sequencer is done
            // with these fields, and CC threads only read them; each CC thread stores only
            // the placeholders of the writes it owns.
            let (writes, ph) = unsafe { (&*slot.writes.get(), &*slot.placeholders.get()) };
            // SAFETY: as above.
            let (us, uph) = unsafe { (&*slot.units.get(), &*slot.unit_placeholders.get()) };
            let ts = slot.ts.load(Ordering::Relaxed);
            let producer = Batch::<P>::producer(ring_index, i);
            let unit_store = TableId(storage.tables().len() as u32);
            for (j, &(t, u)) in us.iter().enumerate() {
                if unit_owner(t, u, self.m) != self.index {
                    continue;
                }
                let rec = self.units.get(t, u, &ctx.guard).expect("the sequencer made it");
                self.place(rec, unit_store, &uph[j], (number, ts, producer), None);
            }
            // SAFETY: as above.
            let (unit_reads, unit_refs) =
                unsafe { (&*slot.unit_reads.get(), &*slot.unit_read_refs.get()) };
            for (j, &(t, u)) in unit_reads.iter().enumerate() {
                if unit_owner(t, u, self.m) != self.index {
                    continue;
                }
                // This thread pushes every version of the unit, in timestamp order: its newest
                // now is the newest below `ts` (none: no writer before it; a record the
                // sequencer creates later gets versions above `ts` only).
                let v = self.units.get(t, u, &ctx.guard).and_then(BohmRecord::newest);
                // Relaxed: published with the batch (the last CC thread's Release of PLANNED).
                unit_refs[j].store(
                    v.map_or(std::ptr::null_mut(), |v| std::ptr::from_ref(v).cast_mut()),
                    Ordering::Relaxed,
                );
            }
            // SAFETY: as above.
            let (reads, refs) = unsafe { (&*slot.reads.get(), &*slot.read_refs.get()) };
            for (j, &(t, key)) in reads.iter().enumerate() {
                if owner(t, key, self.m) != self.index || t.index() >= storage.tables().len() {
                    continue;
                }
                // The slots before this one are planned, the later ones not: the newest
                // version is the one visible at `ts`.
                let v = storage
                    .table(t)
                    .index
                    .get(key, &ctx.guard)
                    .and_then(|rid| storage.table(t).rows.get(rid).header.newest());
                // Relaxed: published with the batch (the last CC thread's Release of PLANNED).
                refs[j].store(
                    v.map_or(std::ptr::null_mut(), |v| std::ptr::from_ref(v).cast_mut()),
                    Ordering::Relaxed,
                );
            }
            for (j, &(t, key)) in writes.iter().enumerate() {
                if owner(t, key, self.m) != self.index || t.index() >= storage.tables().len() {
                    continue;
                }
                let tbl = storage.table(t);
                let rid = match tbl.index.get(key, &ctx.guard) {
                    Some(rid) => rid,
                    None => {
                        let rid = ctx.alloc(t)?;
                        tbl.rows.get(rid).header.clear();
                        // This partition is the only inserter of `key`: the insert succeeds.
                        let inserted = tbl.index.insert_if_absent(key, rid, &ctx.guard);
                        debug_assert!(inserted.is_ok(), "only the owner inserts a key");
                        rid
                    }
                };
                let at = (number, ts, producer);
                self.place(tbl.rows.get(rid).header, t, &ph[j], at, Some((key, rid)));
            }
        }
        Ok(())
    }

    /// Prefetches what planning `slot` will touch of this partition's records: the index
    /// slots of its declared writes and annotated reads, or (`records`) the record heads they
    /// map to, a head to be written for a write.
    #[inline]
    fn prefetch<P>(&self, ctx: &WorkerCtx<'db, BohmRecord>, slot: &Slot<P>, records: bool) {
        let storage = ctx.storage;
        // SAFETY: the batch is SEQUENCED (Acquired by the caller of `plan`): the sequencer is
        // done with these fields.
        let (writes, reads) = unsafe { (&*slot.writes.get(), &*slot.reads.get()) };
        if records {
            // The placeholder lists this partition fills in (the sequencer cleared them).
            // SAFETY: as above.
            let (ph, refs) = unsafe { (&*slot.placeholders.get(), &*slot.read_refs.get()) };
            for list in [&ph[..writes.len()], &refs[..reads.len()]] {
                if let Some(first) = list.first() {
                    prefetch_line::<true>(std::ptr::from_ref(first).cast());
                }
            }
        }
        let ours = writes.iter().map(|&w| (w, true)).chain(reads.iter().map(|&r| (r, false)));
        for ((t, key), write) in ours {
            if owner(t, key, self.m) != self.index {
                continue;
            }
            let Some(tbl) = storage.try_table(t) else { continue };
            if !records {
                tbl.index.prefetch(key, &ctx.guard);
            } else if let Some(rid) = tbl.index.get(key, &ctx.guard) {
                let head = std::ptr::from_ref(tbl.rows.get(rid).header).cast::<u8>();
                if write {
                    prefetch_line::<true>(head);
                } else {
                    prefetch_line::<false>(head);
                }
            }
        }
    }

    /// Pushes a placeholder from `store`'s pool onto `rec` (row `row`, or a unit) for the
    /// transaction at `ts` in slot `producer` of batch `number`, into `slot`; a version it
    /// supersedes is garbage once that batch is past.
    fn place(
        &mut self,
        rec: &BohmRecord,
        store: TableId,
        slot: &AtomicPtr<BohmVersion>,
        (number, ts, producer): (u64, u64, u64),
        row: Option<(u64, RowId)>,
    ) {
        let had = rec.newest().is_some();
        let version = self.pools[store.index()].alloc(&self.stores[store.index()]);
        rec.push(version, ts, producer);
        // Relaxed: the placeholder reaches the execution threads with the batch's PLANNED stage
        // (the last CC thread's Release).
        slot.store(version.as_ptr(), Ordering::Relaxed);
        if had || row.is_some() {
            self.superseding.push_back(Placed { batch: number, store, version, row });
        }
    }

    /// Frees version `v` of table `t`, cut off its chain and past its grace period, into this
    /// thread's pool.
    pub fn free(&mut self, t: TableId, v: NonNull<BohmVersion>) {
        self.pools[t.index()].free(&self.stores[t.index()], v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planning_pushes_one_placeholder_per_owned_write_and_inserts_new_keys() {
        use crate::storage::{Storage, TableSpec};
        use std::time::Duration;
        let storage =
            Storage::<BohmRecord>::new(&[TableSpec::new("t", 8, 64)], 4, Duration::from_millis(5))
                .unwrap();
        let stores = [VersionStore::<BohmExt>::new(8)];
        let units = Units::new(1);
        let (t, m) = (TableId(0), 2);
        // Key 1 exists (loaded); key 2 is new.
        {
            let mut ctx = WorkerCtx::new(&storage, None).unwrap();
            let rid = ctx.alloc(t).unwrap();
            let rec = storage.table(t).rows.get(rid).header;
            rec.clear();
            rec.load(stores[0].alloc_shared());
            storage.table(t).index.insert_if_absent(1, rid, &ctx.guard).unwrap();
        }
        let batch = Batch {
            slots: vec![Slot::new((), 0), Slot::new((), 1)].into_boxed_slice(),
            stage: AtomicU64::new(stage::of(4, stage::SEQUENCED)),
            number: AtomicU64::new(4),
            len: AtomicU32::new(2),
            done: AtomicU32::new(0),
            cursor: AtomicU32::new(0),
        };
        for (i, slot) in batch.slots.iter().enumerate() {
            // SAFETY: the test owns the batch.
            unsafe {
                let set = &mut *slot.set.get();
                set.write(t, 1);
                set.write(t, 2);
                set.read(t, 3);
                set.seal();
                slot.plan_writes(&units, &crate::storage::index::pin(), true).unwrap();
            }
            slot.ts.store(Batch::<()>::ts_of(4, 2, i), Ordering::Relaxed);
        }
        let mut planners: Vec<_> = (0..m).map(|c| Planner::new(&stores, &units, c, m)).collect();
        let mut ctx = WorkerCtx::new(&storage, None).unwrap();
        for p in &mut planners {
            p.plan(&mut ctx, &batch, 1).unwrap();
        }
        let g = crate::storage::index::pin();
        for (i, slot) in batch.slots.iter().enumerate() {
            // SAFETY: planned; nothing else runs.
            let ph = unsafe { &*slot.placeholders.get() };
            for (j, key) in [1u64, 2].into_iter().enumerate() {
                let v = ph[j].load(Ordering::Relaxed);
                assert!(!v.is_null(), "slot {i}: key {key} has its placeholder");
                let rid = storage.table(t).index.get(key, &g).expect("the key is indexed");
                let rec = storage.table(t).rows.get(rid).header;
                let ts = Batch::<()>::ts_of(4, 2, i);
                assert_eq!(rec.at(ts).map(|x| x as *const _), Some(v as *const _));
                assert_eq!(
                    rec.at(ts).unwrap().ext.producer.load(Ordering::Relaxed),
                    Batch::<()>::producer(1, i)
                );
            }
        }
        assert!(storage.table(t).index.get(3, &g).is_none(), "reads insert nothing");
        // Every placeholder on a row is listed: the GC looks at each.
        let superseding: usize = planners.iter().map(|p| p.superseding.len()).sum();
        assert_eq!(superseding, 4);
    }

    /// A ring position being refilled: the sequencer has stored the new batch's number but
    /// not yet its stage, which still says the old batch (four ring turns earlier) was
    /// planned. A waiter for the new batch must not take it as planned (it then ran slots
    /// with null placeholders); the old batch's own waiters still see it.
    #[test]
    fn planning_names_for_each_unit_read_the_unit_version_visible_at_its_timestamp() {
        use crate::storage::{Storage, TableSpec};
        use std::time::Duration;
        let storage =
            Storage::<BohmRecord>::new(&[TableSpec::new("t", 8, 64)], 4, Duration::from_millis(5))
                .unwrap();
        // The table's store, then the units' store.
        let stores = [VersionStore::<BohmExt>::new(8), VersionStore::<BohmExt>::new(8)];
        let units = Units::new(1);
        let t = TableId(0);
        let batch = Batch {
            slots: (0..3).map(|i| Slot::new((), i)).collect(),
            stage: AtomicU64::new(stage::of(4, stage::SEQUENCED)),
            number: AtomicU64::new(4),
            len: AtomicU32::new(3),
            done: AtomicU32::new(0),
            cursor: AtomicU32::new(0),
        };
        let g = crate::storage::index::pin();
        for (i, slot) in batch.slots.iter().enumerate() {
            // SAFETY: the test owns the batch.
            unsafe {
                let set = &mut *slot.set.get();
                match i {
                    // Writes keys 0..=7: the table's units are 8 keys, and this writes unit 0.
                    0 => set.range(t, 0, 7, AccessMode::Write),
                    // Reads in unit 0 (written before it), unit 1 (by a range) and unit 2
                    // (written by nobody).
                    1 => {
                        set.read(t, 5);
                        set.range(t, 8, 15, AccessMode::Read);
                        set.read(t, 20);
                    }
                    // Writes unit 0 and reads in it: its own unit is not a unit read.
                    _ => {
                        set.write(t, 3);
                        set.read(t, 6);
                    }
                }
                set.seal();
                slot.plan_writes(&units, &g, true).unwrap();
            }
            slot.ts.store(Batch::<()>::ts_of(4, 3, i), Ordering::Relaxed);
        }
        // SAFETY: the test owns the batch.
        let (reads1, reads2) =
            unsafe { (&*batch.slots[1].unit_reads.get(), &*batch.slots[2].unit_reads.get()) };
        assert_eq!(*reads1, vec![(t, 0), (t, 1), (t, 2)]);
        assert!(reads2.is_empty(), "{reads2:?}");
        let m = 2;
        let mut planners: Vec<_> = (0..m).map(|c| Planner::new(&stores, &units, c, m)).collect();
        let mut ctx = WorkerCtx::new(&storage, None).unwrap();
        for p in &mut planners {
            p.plan(&mut ctx, &batch, 1).unwrap();
        }
        // SAFETY: planned; the test owns the batch.
        let (first, refs, last) = unsafe {
            (
                (&*batch.slots[0].unit_placeholders.get())[0].load(Ordering::Relaxed),
                &*batch.slots[1].unit_read_refs.get(),
                (&*batch.slots[2].unit_placeholders.get())[0].load(Ordering::Relaxed),
            )
        };
        assert!(!first.is_null());
        assert_eq!(refs[0].load(Ordering::Relaxed), first, "unit 0: the first slot's version");
        assert!(refs[1].load(Ordering::Relaxed).is_null(), "unit 1: no writer before it");
        assert!(refs[2].load(Ordering::Relaxed).is_null(), "unit 2: no writer at all");
        // SAFETY: planned versions stay alive while the test holds the batch.
        assert_eq!(unsafe { &*last }.next.load(Ordering::Relaxed), first, "the chain above it");
    }

    #[test]
    fn a_refilled_position_is_not_taken_for_the_batch_it_held() {
        let batch = Batch {
            slots: vec![Slot::new((), 0)].into_boxed_slice(),
            stage: AtomicU64::new(stage::of(3, stage::PLANNED)),
            number: AtomicU64::new(7),
            len: AtomicU32::new(1),
            done: AtomicU32::new(0),
            cursor: AtomicU32::new(0),
        };
        assert!(!batch.is_at(7, stage::PLANNED), "the new batch is not planned yet");
        assert!(!batch.is_at(7, stage::SEQUENCED), "nor sequenced");
        assert!(batch.is_at(3, stage::PLANNED));
        batch.stage.store(stage::of(7, stage::SEQUENCED), Ordering::Release);
        assert!(batch.is_at(7, stage::SEQUENCED));
        assert!(!batch.is_at(7, stage::PLANNED));
    }

    #[test]
    fn ownership_spreads_and_is_stable() {
        let m = 3;
        let mut counts = [0usize; 3];
        for k in 0..3000 {
            let o = owner(TableId(1), k, m);
            assert_eq!(o, owner(TableId(1), k, m));
            counts[o] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }

    #[test]
    fn writes_are_listed_once_in_key_order_with_room_for_placeholders() {
        let slot = Slot::new((), 0);
        // SAFETY: the test owns the slot.
        unsafe {
            let set = &mut *slot.set.get();
            set.read(TableId(0), 9);
            set.write(TableId(0), 7);
            set.read(TableId(0), 7);
            set.write(TableId(1), 2);
            set.seal();
            slot.plan_writes(&Units::new(2), &crate::storage::index::pin(), true).unwrap();
            assert_eq!(*slot.writes.get(), vec![(TableId(0), 7), (TableId(1), 2)]);
            assert_eq!((*slot.placeholders.get()).len(), 2);
        }
        assert_eq!(Batch::<()>::ts_of(2, 100, 5), 206);
        assert_eq!(Batch::<()>::producer(3, 7), PRODUCER_TAG | 3 << 32 | 7);
    }
}
