//! BOHM's threads (§3.1): one sequencer, `m` concurrency-control threads and `n` execution
//! threads passing batches around the ring ([`super::pipeline`]), with the driver's leader
//! ([`crate::engine::driver::lead`]) on the calling thread for the phases, the measurement
//! window and fatal errors.
//!
//! **Sequencer.** It owns one generator per logical client (`--threads` of them, as an
//! interactive run has, so TPC-C's home warehouses stay as they are); slot `i` of every batch
//! holds a procedure of client `i mod clients` for the whole run. To fill a batch it waits
//! until the ring position is free or executed, reports the committed procedures to their
//! generators, fills the others (a transaction to be re-submitted keeps its procedure and its
//! first submission time), declares each slot's access set with reconnaissance reads of the
//! latest produced values, numbers the slots and publishes the batch.
//!
//! **Concurrency control.** The records are cut into `m` partitions ([`Planner`]), each
//! planned batch after batch by one thread at a time ([`Planner::plan`]); the last partition
//! to finish a batch publishes it planned. After each batch a partition frees the versions its
//! records shed once the execution threads are past them (below). With dedicated threads
//! (the paper's split), CC thread `c` plans partition `c`.
//!
//! **Execution threads.** Thread `e` of `n` answers for slots `e, e + n, ...` of each batch:
//! it runs those still unprocessed, again and again until every one is complete (another thread
//! may run some of them as dependencies of its own). An attempt abandoned because a dependency
//! is being produced elsewhere is retried once that thread has completed it or handed it back
//! (the loop checks the producer's slot, and moves on to its other slots meanwhile: re-running
//! the procedure before would stop at the same place); one abandoned because its chain of unproduced
//! dependencies is deeper than the thread's recursion bound is retried after the thread has
//! run the deepest producer it reached at the top of its stack, so every abandonment either
//! waits for another thread's progress or makes some. Transactions are counted by the thread
//! that answers for them, when it sees them complete: commits, user aborts, re-submissions
//! (as `access-set-mismatch` aborts) and latency from the first submission to the sequencer,
//! for every batch that overlaps the measurement window (`ExecRole::step`). Abandoned
//! attempts count as `dependency-busy` aborts of the thread that made them.
//!
//! **Adaptive split** (`--opt split=adaptive`; also a run on one thread). The paper fixes how
//! many threads plan and how many execute, and proposes allocating threads to the two stages
//! by load, as SEDA does, without building it (§3.2.4). Here every thread is an execution
//! thread that also plans: before it takes work of its own, and whenever it waits (for a batch
//! to be planned, or for a dependency another thread is producing), it plans the next batch
//! of any partition whose next batch the sequencer has published and no other thread is
//! planning (a `try_lock` per partition; the partition's batches stay in order). Otherwise it
//! takes the next [`CHUNK`] slots of its batch from a shared cursor and answers for them, as
//! a dedicated execution thread answers for its round-robin share. So no thread idles while a
//! stage has work, with no controller to tune; planning goes first because it feeds the
//! execution, and the ring bounds how far ahead it runs. What it gives up is the paper's
//! affinity of a record to one CC thread's cache, at batch granularity. A thread planning
//! batch `b` waits for nothing but the sequencer, and one executing `b` only for batches up
//! to `b` to be planned, so the order is free of cycles.
//!
//! **Garbage collection (§3.3.2).** A version superseded by a write of batch `b` is invisible
//! to every transaction after batch `b`, so once every execution thread has finished batch `b`
//! (the low watermark is the minimum of their finished-batch counters) no transaction will
//! read it again. The partition that owns the record cuts it off the chain and frees it after
//! a storage-epoch grace period (execution threads run each batch inside their epoch, so a
//! reader that reached it just before the cut finishes first). A superseding version that
//! passed its value on ([`super::record::PASS`]) gets the value copied in first. A row whose
//! newest version is then a deletion is unlinked: its key leaves the index (no running
//! transaction reads below the deletion, and later ones find the key absent, as the deletion
//! says), its slot is reused after the grace period and the deletion's version once the
//! batches planned so far, whose annotated reads may name it, have executed too.
//!
//! **Ending.** A timed run ends when the leader stops it: the sequencer publishes no further
//! batch and says which batch is the last; the other threads finish the batches before it and
//! leave. A run of a fixed number of transactions sequences `threads x per_worker` of them and
//! ends when every one has committed or aborted for good (re-submissions included).

use super::pipeline::{claim, executing, slot_state, stage, Batch, Claim, Outcome, Planner, Slot};
use super::record::{cut_after, settle, BohmRecord, BohmVersion, PASS, PRODUCED, TOMBSTONE};
use super::worker::{prefetch_slot, run_slot, Abandoned, Env, Heap, Scratchpad, NO_PRODUCER};
use super::Bohm;
use crate::engine::context::WorkerCtx;
use crate::engine::driver::{
    lead, worker_seed, Control, DurableCommits, RunConfig, RunLength, RunPhase,
};
use crate::engine::stats::WorkerStats;
use crate::engine::{Database, Generator, Procedure, Protocol, Workload};
use crate::error::{Abort, AbortReason, Error};
use crate::storage::inject::CommitPhase;
use crate::storage::reclaim::Unlink;
use crate::storage::row_store::prefetch_line;
use crate::storage::TableId;
use crate::util::SpinWait;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

/// Batches in the ring: one being sequenced, one being planned, one being executed, and one
/// of slack so that a stage that runs ahead does not wait for the slowest at once.
pub const RING: usize = 4;

/// Yields of a waiting thread before it sleeps between checks.
const IDLE_YIELDS: u32 = 1000;

/// Scratchpads per execution thread: the recursion bound of dependency evaluation.
pub const DEPTH: usize = 16;

/// How many of its slots ahead of the one it runs an execution thread prefetches the versions
/// below the placeholders of (and twice as far the placeholders; see [`prefetch_slot`]).
const PREFETCH: usize = 2;

/// How many entries ahead of the one it collects a partition's garbage collection prefetches
/// (see [`Partition::step`]).
const GC_AHEAD: usize = 4;

/// Slots an execution thread takes at a time with `split=adaptive`: few enough that the
/// threads share a batch evenly whatever else they do, many enough that the shared cursor is
/// touched once per several transactions.
pub const CHUNK: u32 = 8;

/// What the threads of one run share besides the ring.
struct Shared<'a, P> {
    env: Env<'a, P>,
    /// The acknowledgement file (`RunConfig::acks`), if any.
    ack_file: Option<&'a std::fs::File>,
    /// Slots per batch.
    size: usize,
    /// The CC layer's partitions.
    partitions: Box<[CachePadded<PartitionCell<'a>>]>,
    /// Execution threads.
    exec: usize,
    /// Whether the execution threads plan too and take slots from each batch's cursor
    /// (`split=adaptive`), rather than answer for a round-robin share.
    shared_threads: bool,
    /// The number of the run's first batch.
    first: u64,
    /// The number of the first batch that will not be sequenced (`u64::MAX` until known).
    end: CachePadded<AtomicU64>,
    control: &'a Control,
    clock: quanta::Clock,
}

impl<P> Shared<'_, P> {
    /// Waits until batch `number` of the ring is in stage `want`; `false` if it never will be
    /// (the run ends before it, or failed). Honours the leader's pauses while waiting, and
    /// calls `help` (work of another stage, `true` if it did some) before every wait.
    fn wait_for(&self, number: u64, want: u64, mut help: impl FnMut() -> bool) -> bool {
        let batch = &self.env.ring[(number % RING as u64) as usize];
        let mut spin = SpinWait::default();
        let mut idle = 0u32;
        loop {
            if batch.is_at(number, want) {
                return true;
            }
            // Acquire: pairs with the sequencer's Release store of `end`.
            if number >= self.end.load(Ordering::Acquire) {
                return false;
            }
            if help() {
                spin = SpinWait::default();
                idle = 0;
                continue;
            }
            if spin.exhausted() {
                match self.control.phase() {
                    RunPhase::Pause => self.control.pause(),
                    RunPhase::Stop if self.control.failed() => return false,
                    _ => {}
                }
                idle += 1;
                if idle > IDLE_YIELDS {
                    // Long waits (a slow stage, or a pipeline with nothing to do) sleep, so
                    // that waiting threads leave the cores to the working ones.
                    std::thread::sleep(std::time::Duration::from_micros(20));
                    continue;
                }
            }
            spin.spin();
        }
    }

    /// Counts batch `number` done by one more of `threads` threads; the last publishes
    /// `next` (Release: what the threads wrote into the batch before).
    fn done(&self, batch: &Batch<P>, number: u64, threads: usize, next: u64) {
        // AcqRel: the last thread's increment sees every other thread's writes before it.
        if batch.done.fetch_add(1, Ordering::AcqRel) + 1 == threads as u32 {
            batch.done.store(0, Ordering::Relaxed);
            batch.stage.store(stage::of(number, next), Ordering::Release);
        }
    }
}

/// Runs `workload` on `db` through BOHM's pipeline (see the module docs).
pub fn drive<W: Workload>(
    db: &Database<Bohm>,
    workload: &W,
    cfg: &RunConfig,
) -> Result<Vec<WorkerStats>, Error> {
    let split = db.protocol().split(cfg.threads)?;
    let exec = split.exec;
    let size = Protocol::options(db.protocol()).batch as usize;
    let clients = cfg.threads;
    let mut gens: Vec<W::Gen> =
        (0..clients).map(|i| workload.generator(i, clients, worker_seed(cfg.seed, i))).collect();
    let ring: Vec<Batch<<W::Gen as Generator>::Proc>> = (0..RING)
        .map(|_| Batch {
            slots: (0..size).map(|i| Slot::new(gens[i % clients].blank(), i % clients)).collect(),
            stage: AtomicU64::new(stage::FREE),
            number: AtomicU64::new(u64::MAX),
            len: Default::default(),
            done: Default::default(),
            cursor: Default::default(),
        })
        .collect();
    let roles: Vec<Role> = if split.shared {
        (0..exec).map(Role::Both).collect()
    } else {
        (0..exec).map(Role::Execute).chain((0..split.partitions).map(Role::Plan)).collect()
    };
    let control = Control::new(cfg, 1 + roles.len());
    // Per execution thread: how many batches it has finished (its `batch_e` plus one).
    // A run continues the timestamps of the last one on this database, so that the versions
    // earlier runs left are older than every transaction of this one.
    let first = db.protocol().next_batch.load(Ordering::Relaxed);
    let finished: Box<[CachePadded<AtomicU64>]> =
        (0..exec).map(|_| CachePadded::new(AtomicU64::new(first))).collect();
    let (stores, units) = (db.protocol().stores(), db.protocol().units());
    let partitions = (0..split.partitions)
        .map(|c| {
            CachePadded::new(PartitionCell {
                next: AtomicU64::new(first),
                partition: Mutex::new(Partition {
                    planner: Planner::new(stores, units, c, split.partitions),
                    dead: VecDeque::new(),
                    buf: Vec::new(),
                }),
            })
        })
        .collect();
    let shared = Shared {
        env: Env {
            storage: db.storage(),
            stores: db.protocol().stores(),
            ring: &ring,
            types: workload.txn_types(),
            templates: cfg.check_templates,
            units: db.protocol().units(),
            finished: &finished,
            size,
            acks: cfg.acks.as_ref().map(|a| a.table),
        },
        ack_file: cfg.acks.as_ref().map(|a| &*a.file),
        size,
        partitions,
        exec,
        shared_threads: split.shared,
        first,
        end: CachePadded::new(AtomicU64::new(u64::MAX)),
        control: &control,
        clock: quanta::Clock::new(),
    };
    let cores = if cfg.pin { core_affinity::get_core_ids().unwrap_or_default() } else { vec![] };
    let barrier = Barrier::new(2 + roles.len());
    let (stats, seq, led) = std::thread::scope(|s| {
        let shared = &shared;
        let (barrier, cores) = (&barrier, &cores);
        let pin = move |i: usize| {
            if !cores.is_empty() {
                core_affinity::set_for_current(cores[i % cores.len()]);
            }
        };
        let threads: Vec<_> = roles
            .iter()
            .enumerate()
            .map(|(i, &role)| {
                s.spawn(move || {
                    pin(i);
                    let _finished = shared.control.finish();
                    serve(db, shared, role, barrier)
                })
            })
            .collect();
        let gens = &mut gens;
        let n = roles.len();
        let seq = s.spawn(move || {
            pin(n);
            let _finished = shared.control.finish();
            sequence::<W>(db, shared, gens, cfg, barrier)
        });
        let led = lead(db, cfg, &control, || {
            barrier.wait();
        });
        fn join<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        }
        let stats: Vec<_> = threads.into_iter().map(join).collect();
        (stats, join(seq), led)
    });
    // Acquire: pairs with the sequencer's Release store of the last batch's number; the threads are
    // joined anyway.
    let end = shared.end.load(Ordering::Acquire);
    if end != u64::MAX {
        // Relaxed: read by the next run, which starts its threads after this store (spawning orders
        // it).
        db.protocol().next_batch.store(end, Ordering::Relaxed);
    }
    if let Some(e) = control.into_error() {
        return Err(e);
    }
    seq?;
    let mut out = Vec::with_capacity(exec);
    for s in stats {
        out.extend(s?);
    }
    if let Some(first) = out.first_mut() {
        led.report(first);
    }
    Ok(out)
}

/// The sequencer (see the module docs).
fn sequence<W: Workload>(
    db: &Database<Bohm>,
    shared: &Shared<'_, <W::Gen as Generator>::Proc>,
    gens: &mut [W::Gen],
    cfg: &RunConfig,
    barrier: &Barrier,
) -> Result<(), Error> {
    let setup = db.worker_ctx();
    barrier.wait();
    let mut ctx = setup?;
    let control = shared.control;
    // A run of a fixed number of transactions: those not yet sequenced, and those sequenced
    // and not yet finished for good.
    let mut left = match cfg.length {
        RunLength::Timed { .. } => u64::MAX,
        RunLength::Transactions { per_worker } => per_worker.saturating_mul(gens.len() as u64),
    };
    let mut outstanding = 0u64;
    let mut number = shared.first;
    let stop = |number: u64, gens: &mut [W::Gen]| {
        // Release: pairs with the Acquire in `wait_for`; every batch below is published.
        shared.end.store(number, Ordering::Release);
        // The batches not reported yet, once executed: the generators account for every
        // commit whose effects the database holds (SmallBank's ledger).
        for n in number.saturating_sub(RING as u64).max(shared.first)..number {
            if shared.wait_for(n, stage::EXECUTED, || false) {
                report(&shared.env.ring[(n % RING as u64) as usize], gens);
            }
        }
    };
    // The steps of `cfg.mix_at` the generators follow.
    let mut mix_steps = 0;
    loop {
        let phase = control.phase();
        if phase == RunPhase::Stop || (left == 0 && outstanding == 0) {
            stop(number, gens);
            return Ok(());
        }
        if !cfg.mix_at.is_empty() && control.mix_steps() != mix_steps {
            mix_steps = control.mix_steps();
            gens.iter_mut().for_each(|g| g.restrict_mix(&cfg.mix_at[mix_steps - 1].types));
        }
        if phase == RunPhase::Pause {
            control.pause();
            continue;
        }
        let r = (number % RING as u64) as usize;
        let batch = &shared.env.ring[r];
        // Free, or executed (`number - RING`): wait for the execution threads.
        if number >= shared.first + RING as u64 {
            if !shared.wait_for(number - RING as u64, stage::EXECUTED, || false) {
                stop(number, gens);
                return Ok(());
            }
            outstanding -= report(batch, gens);
        }
        let now = shared.clock.raw();
        // A fresh index guard per batch, so that the index's memory can be reclaimed.
        ctx.guard.repin();
        let units = db.protocol().units();
        let annotate = Protocol::options(db.protocol()).read_annotation;
        for (i, slot) in batch.slots.iter().enumerate() {
            // SAFETY: the batch is executed (Acquired in `wait_for`) or was never published:
            // the sequencer owns every slot.
            let (proc, client) = unsafe { (&mut *slot.proc.get(), *slot.client.get()) };
            // SAFETY: as above.
            let set = unsafe { &mut *slot.set.get() };
            if !Outcome::resubmits(slot.outcome.load(Ordering::Relaxed)) {
                if left == 0 {
                    // No transaction in this slot (a re-submission may follow in a later one).
                    set.clear();
                    set.seal();
                    // SAFETY: as above. Nothing is declared: nothing can fail.
                    let _ = unsafe { slot.plan_writes(units, &ctx.guard, false) };
                    slot.state.store(slot_state::COMPLETE, Ordering::Relaxed);
                    continue;
                }
                left -= 1;
                outstanding += 1;
                gens[client].fill(proc);
                // Relaxed: published with the batch's SEQUENCED stage (Release below).
                slot.submitted.store(now, Ordering::Relaxed);
            }
            set.clear();
            // Declared a pipeline ahead of execution: a key reconnaissance guesses is declared
            // as the range it falls in (see `super::units`).
            set.declare_guesses_as_ranges(true);
            let ok = ctx.pinned(|| proc.declare(db, set));
            if let Some(t) = shared.env.acks {
                // The client's acknowledgement row, which the execution updates (see
                // `worker::run_slot`).
                set.write(t, client as u64);
            }
            set.seal();
            if !ok {
                let ty = &shared.env.types[proc.txn_type()];
                control.fail(Error::Config(format!(
                    "protocol 'bohm' needs declared access sets, but '{}' transactions do not \
                     declare one",
                    ty.name
                )));
                stop(number, gens);
                return Ok(());
            }
            // SAFETY: as above.
            if let Err(t) = unsafe { slot.plan_writes(units, &ctx.guard, annotate) } {
                let ty = &shared.env.types[proc.txn_type()];
                control.fail(Error::Config(format!(
                    "bohm: a '{}' transaction declares a write range of table '{}' over more \
                     than {} units of keys (the first write range declared on a table sets the \
                     unit)",
                    ty.name,
                    db.storage().table(t).spec.name,
                    super::units::MAX_RANGE_UNITS
                )));
                stop(number, gens);
                return Ok(());
            }
            // Relaxed: published by the slot state's Release store below.
            slot.ts.store(Batch::<()>::ts_of(number, shared.size, i), Ordering::Relaxed);
            // Release: a late reader's claim that finds the slot refilled sees its timestamp
            // (see `claim`).
            slot.state.store(slot_state::UNPROCESSED, Ordering::Release);
        }
        // Relaxed: published with the SEQUENCED stage (the Release below).
        batch.len.store(shared.size as u32, Ordering::Relaxed);
        batch.number.store(number, Ordering::Relaxed);
        batch.cursor.store(0, Ordering::Relaxed);
        // Release: pairs with the CC threads' Acquire in `wait_for`.
        batch.stage.store(stage::of(number, stage::SEQUENCED), Ordering::Release);
        number += 1;
    }
}

/// Reports the transactions of an executed batch that finished for good to their generators
/// (the commits) and marks their slots empty; returns how many there were.
fn report<G: Generator>(batch: &Batch<G::Proc>, gens: &mut [G]) -> u64 {
    let mut n = 0;
    for slot in batch.slots.iter() {
        // Relaxed: published with the slot's COMPLETE state (Acquired above).
        let o = slot.outcome.load(Ordering::Relaxed);
        if o == Outcome::Committed as u8 {
            // SAFETY: the batch is executed (the caller Acquired it): the sequencer owns it.
            unsafe { gens[*slot.client.get()].committed(&*slot.proc.get()) };
        }
        if o == Outcome::Committed as u8 || o == Outcome::User as u8 {
            slot.outcome.store(Outcome::Empty as u8, Ordering::Relaxed);
            n += 1;
        }
    }
    n
}

/// What a thread does: plan (a dedicated CC thread, of partition `c`), execute (execution
/// thread `e`), or both (execution thread `e`, planning whatever partition waits).
#[derive(Clone, Copy, Debug)]
enum Role {
    Plan(usize),
    Execute(usize),
    Both(usize),
}

/// A partition of the CC layer with the number of the next batch it plans.
struct PartitionCell<'db> {
    /// The next batch to plan: written under the lock, read without it as a hint of whether
    /// there is work (Relaxed: the lock decides).
    next: AtomicU64,
    partition: Mutex<Partition<'db>>,
}

/// A partition's state between batches (see the module docs): its planner and its garbage.
struct Partition<'db> {
    planner: Planner<'db>,
    /// Versions cut off their chains, each with the epoch it was cut in and the batch every
    /// execution thread must have finished before it is freed (0 but for unlinked deletions,
    /// which annotated reads may name).
    dead: VecDeque<(TableId, NonNull<BohmVersion>, u64, u64)>,
    buf: Vec<u8>,
}

// SAFETY: the versions it points to live in the database's version stores, which outlive the
// run; the partition is used by one thread at a time (its mutex), and only that thread
// touches the versions it lists.
unsafe impl Send for Partition<'_> {}

impl<'db> Partition<'db> {
    /// Plans batch `number` (SEQUENCED, Acquired by the caller) with `ctx`, the calling
    /// thread's storage context, and collects garbage; `false` if the run failed.
    fn step<P>(
        &mut self,
        ctx: &mut WorkerCtx<'db, BohmRecord>,
        shared: &Shared<'db, P>,
        number: u64,
    ) -> bool {
        let r = (number % RING as u64) as usize;
        let batch = &shared.env.ring[r];
        if let Err(a) = self.planner.plan(ctx, batch, r) {
            shared.control.fail(Error::Fatal { txn: "(planning)".into(), reason: a.reason });
            return false;
        }
        shared.done(batch, number, shared.partitions.len(), stage::PLANNED);
        // Versions superseded in batches every execution thread has finished.
        let (storage, stores) = (shared.env.storage, shared.env.stores);
        let epochs = storage.epochs();
        let w = shared.env.watermark();
        let mut stamp = None;
        while let Some(&placed) = self.planner.superseding.front() {
            if placed.batch >= w {
                break;
            }
            // The versions two distances ahead, and what lies below those one ahead: each
            // entry's cut reads its version and the one below, both cold by now.
            if let Some(p) = self.planner.superseding.get(2 * GC_AHEAD) {
                prefetch_line::<true>(p.version.as_ptr().cast());
            }
            if let Some(p) = self.planner.superseding.get(GC_AHEAD) {
                // SAFETY: on its chain until this partition cuts it (below, in a later turn).
                let below = unsafe { p.version.as_ref() }.next.load(Ordering::Relaxed);
                prefetch_line::<false>(below.cast());
            }
            self.planner.superseding.pop_front();
            let t = placed.store;
            if shared.env.units.shift(t).is_some() {
                // The table is in unit mode: its rows' writers cut their chains (see
                // `super::units`). None of them runs now: a table switches in a batch this
                // partition has not planned yet when it finds it out of unit mode here.
                continue;
            }
            // SAFETY: `v` is on its record's chain (only this partition cuts it, here).
            let v = unsafe { placed.version.as_ref() };
            settle(stores, t, v, &mut self.buf);
            if let Some(old) = cut_after(v) {
                let e = *stamp.get_or_insert_with(|| epochs.retire_stamp());
                let mut next = Some(old);
                while let Some(p) = next {
                    // SAFETY: the cut chain is this partition's alone; freed after the grace.
                    next = NonNull::new(unsafe { p.as_ref() }.next.load(Ordering::Relaxed));
                    self.dead.push_back((t, p, e, 0));
                }
            }
            let Some((key, rid)) = placed.row else { continue };
            // A deletion nothing was pushed over (this partition pushes every version of the
            // row, and has planned every batch up to `number`): no running transaction reads
            // below it, and a later one finds the key absent as the deletion says.
            let tbl = storage.table(t);
            // Acquire: pairs with the Release in `produce`.
            let deleted = v.flags.load(Ordering::Acquire) & (PRODUCED | TOMBSTONE | PASS)
                == PRODUCED | TOMBSTONE;
            if deleted
                && tbl.rows.get(rid).header.newest().is_some_and(|h| std::ptr::eq(h, v))
                && tbl.index.remove_if(key, rid, &ctx.guard)
            {
                let e = *stamp.get_or_insert_with(|| epochs.retire_stamp());
                // Annotated reads of the batches planned so far may name it.
                self.dead.push_back((t, placed.version, e, number + 1));
                ctx.reclaimer.unlinked(t, key, rid, e);
            }
        }
        let safe = epochs.min_active();
        while let Some(&(t, v, e, after)) = self.dead.front() {
            if e >= safe || after > w {
                break;
            }
            self.dead.pop_front();
            self.planner.free(t, v);
        }
        // Only unlinked rows are queued (BOHM retires none for the reclaimer to unlink).
        ctx.reclaimer.collect(storage, &mut ctx.caches, &ctx.guard, |_, _, _, _| Unlink::Gone);
        true
    }
}

/// Plans batch `number` of partition `c` (SEQUENCED, Acquired by the caller; the partition's
/// batches before it planned) on the calling thread, a dedicated CC thread; `false` if the run
/// failed.
fn plan_partition<'db, P>(
    shared: &Shared<'db, P>,
    ctx: &mut WorkerCtx<'db, BohmRecord>,
    c: usize,
    number: u64,
) -> bool {
    let cell = &shared.partitions[c];
    let mut part = cell.partition.lock().unwrap_or_else(|p| p.into_inner());
    // A fresh index guard per batch, so that the index's memory can be reclaimed.
    ctx.guard.repin();
    let ok = part.step(ctx, shared, number);
    // Relaxed: under the partition lock, whose release orders it for the next planner.
    cell.next.store(number + 1, Ordering::Relaxed);
    ok
}

/// Plans the next batch of one partition whose next batch is sequenced and that no other
/// thread is planning, if there is one, starting the search at partition `from`; `true` if it
/// did (or the run failed: the caller's wait notices).
fn plan_some<'db, P>(
    shared: &Shared<'db, P>,
    ctx: &mut WorkerCtx<'db, BohmRecord>,
    from: usize,
) -> bool {
    let m = shared.partitions.len();
    for k in 0..m {
        let cell = &shared.partitions[(from + k) % m];
        // Relaxed: a hint; the stage check below and the lock decide.
        let number = cell.next.load(Ordering::Relaxed);
        let batch = &shared.env.ring[(number % RING as u64) as usize];
        // Acquire (in `is_at`): pairs with the sequencer's Release of the stage.
        if !batch.is_at(number, stage::SEQUENCED) {
            continue;
        }
        let Ok(mut part) = cell.partition.try_lock() else { continue };
        // The lock orders this thread after the partition's last planner: `next` is exact.
        if cell.next.load(Ordering::Relaxed) != number {
            continue;
        }
        if !part.step(ctx, shared, number) {
            return true;
        }
        cell.next.store(number + 1, Ordering::Relaxed);
        return true;
    }
    false
}

/// An execution thread's state (see the module docs).
struct ExecRole<'db> {
    e: usize,
    ctx: WorkerCtx<'db, super::record::BohmRecord>,
    stats: WorkerStats,
    pads: Vec<Scratchpad>,
    abandoned: Abandoned,
    committed: u64,
    /// Clock readings at the start of the first batch it counted and at the end of the last
    /// (see [`ExecRole::step`]): its measured window.
    measure_from: Option<u64>,
    measure_to: u64,
    /// The slots of the batch it answers for.
    mine: Vec<usize>,
    /// Those not complete yet, each with the producer (and its timestamp) another thread was
    /// executing when its last attempt was abandoned, if any.
    pending: Vec<(usize, (u64, u64))>,
    /// Its log stream and what it allocates and frees for rows of tables in unit mode.
    heap: Heap,
    /// Its measured commits on their way to durability, when the database logs.
    durable: DurableCommits<'db>,
}

impl<'db> ExecRole<'db> {
    fn new<P>(db: &'db Database<Bohm>, shared: &Shared<'db, P>, e: usize) -> Result<Self, Error> {
        let mut ctx = db.worker_ctx()?;
        let mut heap = Heap::new(db.storage().tables().len());
        heap.log = ctx.log.take();
        heap.inject = ctx.inject.take();
        // Rows unlinked by threads of earlier runs, still in their grace periods.
        db.storage().adopt_orphans(&mut heap.reclaimer, &mut heap.caches);
        Ok(ExecRole {
            e,
            ctx,
            stats: WorkerStats::new(shared.env.types.len()),
            pads: (0..DEPTH)
                .map(|_| Scratchpad::new(db.storage().history().map(|h| h.recorder())))
                .collect(),
            abandoned: Abandoned::default(),
            committed: 0,
            measure_from: None,
            measure_to: 0,
            mine: Vec::with_capacity(shared.size / shared.exec + CHUNK as usize),
            pending: Vec::with_capacity(shared.size / shared.exec + CHUNK as usize),
            heap,
            durable: DurableCommits::new(db.log(), shared.ack_file),
        })
    }

    /// Executes this thread's slots of batch `number` (PLANNED, Acquired by the caller) and
    /// counts them; `false` if the run failed.
    ///
    /// A batch is the unit of completion: its transactions are counted if it overlaps the
    /// measurement window (begun before the leader stopped the run, ended after the window
    /// opened), and the thread's window runs from the start of the first batch it counts to
    /// the end of the last. A batch longer than the window (10 000-record reads in batches of
    /// 1 000) is counted whole, over its whole time, rather than missed.
    ///
    /// With `plans`, the thread plans whatever partition waits before it takes slots and
    /// while it waits for dependencies (see the module docs).
    fn step<P: Procedure>(&mut self, shared: &Shared<'db, P>, number: u64, plans: bool) -> bool {
        let (env, control, clock) = (&shared.env, shared.control, &shared.clock);
        let started = clock.raw();
        let begun_in = control.phase();
        let measuring = begun_in == RunPhase::Measure;
        if let Err(e) = self.durable.poll(clock, &mut self.stats) {
            control.fail(e);
            return false;
        }
        let batch = &env.ring[(number % RING as u64) as usize];
        // Relaxed: the batch reached this thread through its stage's Acquire, which orders the
        // sequencer's store.
        let len = batch.len.load(Ordering::Relaxed) as usize;
        self.mine.clear();
        self.pending.clear();
        // Slots are taken from the batch's cursor as the thread goes (adaptive), or dealt
        // round-robin (the paper).
        let mut taking = shared.shared_threads;
        if !taking {
            self.mine.extend(self.e..len);
            self.mine.retain(|i| (i - self.e) % shared.exec == 0);
            self.pending.extend(self.mine.iter().map(|&i| (i, NO_PRODUCER)));
        }
        let epochs = env.storage.epochs();
        // The batch runs inside this thread's epoch: versions it reaches are not freed under it.
        epochs.enter(self.ctx.slot);
        self.ctx.guard.repin();
        let mut spin = SpinWait::default();
        let mut failed = None;
        while failed.is_none() {
            let mut progress = false;
            if taking && self.pending.is_empty() {
                // Planning first: it feeds the execution (two loads per partition when no
                // batch waits).
                progress = plans && plan_some(shared, &mut self.ctx, self.e);
                taking = take_chunk(batch, len, &mut self.mine, &mut self.pending);
            }
            if self.pending.is_empty() {
                if taking {
                    continue;
                }
                break;
            }
            let mut k = 0;
            while k < self.pending.len() {
                // The next chunk before this one runs out, so that prefetching looks ahead
                // across chunks; not while many of its slots wait for dependencies other
                // threads are producing (taking more would mostly take more waiters, each
                // attempt abandoned again and again).
                if taking
                    && k + 2 * PREFETCH >= self.pending.len()
                    && self.pending.len() < 2 * CHUNK as usize
                {
                    progress |= plans && plan_some(shared, &mut self.ctx, self.e);
                    taking = take_chunk(batch, len, &mut self.mine, &mut self.pending);
                }
                let (i, waits_for) = self.pending[k];
                let slot = &batch.slots[i];
                // The placeholders two distances ahead, the versions below them one ahead.
                if let Some(&(j, _)) = self.pending.get(k + 2 * PREFETCH) {
                    prefetch_slot(&batch.slots[j], false);
                }
                if let Some(&(j, _)) = self.pending.get(k + PREFETCH) {
                    prefetch_slot(&batch.slots[j], true);
                }
                // Acquire: pairs with the Release that completed the slot.
                match slot.state.load(Ordering::Acquire) {
                    slot_state::COMPLETE => {
                        self.pending.swap_remove(k);
                        progress = true;
                        continue;
                    }
                    // Its last attempt stopped at a producer that is still being executed: a
                    // new one would stop there again.
                    slot_state::UNPROCESSED
                        if waits_for != NO_PRODUCER
                            && executing(env.ring, waits_for.0, waits_for.1) => {}
                    slot_state::UNPROCESSED => match self.attempt(env, slot, None) {
                        Ok(()) => progress = true,
                        Err(a) if a.reason == AbortReason::DependencyBusy => {
                            if measuring {
                                self.stats.aborts[AbortReason::DependencyBusy as usize] += 1;
                            }
                            // The producer past the recursion bound, at the top of the stack.
                            let deepest = self.abandoned.deepest.replace(NO_PRODUCER);
                            if deepest != NO_PRODUCER {
                                progress |= self.attempt(env, slot, Some(deepest)).is_ok();
                                self.abandoned.deepest.set(NO_PRODUCER);
                            }
                            self.pending[k].1 = self.abandoned.busy.replace(NO_PRODUCER);
                        }
                        Err(a) => {
                            // SAFETY: completed by `attempt`: nobody writes the procedure.
                            let ty = unsafe { &*slot.proc.get() }.txn_type();
                            let txn = env.types[ty].name.to_string();
                            failed = Some(Error::Fatal { txn, reason: a.reason });
                            break;
                        }
                    },
                    _ => {}
                }
                k += 1;
            }
            if progress {
                spin = SpinWait::default();
            } else if plans && plan_some(shared, &mut self.ctx, self.e) {
                // Waiting for dependencies other threads are producing: planning meanwhile.
                spin = SpinWait::default();
            } else {
                spin.spin();
                if spin.exhausted() && control.failed() {
                    break;
                }
            }
        }
        epochs.exit(self.ctx.slot);
        if let Some(f) = failed {
            control.fail(f);
            return false;
        }
        if !self.pending.is_empty() {
            return false;
        }
        // Its committed transactions are acknowledged now: under `--sync commit`, once they
        // are durable, and so is what they read (the commit contract): a commit that logged
        // nothing waits for the log epoch in progress, which covers every writer it read.
        // The slots' log epochs were published with their COMPLETE state.
        if let Some(log) = self.heap.log.as_mut().filter(|l| l.sync_commit()) {
            let committed = Outcome::Committed as u8;
            let mut last = 0;
            for &i in &self.mine {
                let slot = &batch.slots[i];
                // Relaxed `log_epoch` and `outcome`: published with the slot's COMPLETE state,
                // which this thread loaded with Acquire.
                last = match slot.log_epoch.load(Ordering::Relaxed) {
                    0 if slot.outcome.load(Ordering::Relaxed) == committed => {
                        last.max(log.manager().epoch_now())
                    }
                    e => last.max(e),
                };
            }
            if !log.wait_durable(last) {
                control.fail(crate::engine::driver::log_failed(Some(log.manager())));
                return false;
            }
        }
        let now = clock.raw();
        let measuring = overlaps_window(begun_in, control.phase());
        if measuring {
            self.measure_from.get_or_insert(started);
            self.measure_to = now;
        }
        for &i in &self.mine {
            let slot = &batch.slots[i];
            // SAFETY: complete (Acquired above): nobody writes the procedure until the
            // sequencer refills the batch, after this thread is done with it.
            let ty = unsafe { &*slot.proc.get() }.txn_type();
            let latency = clock.delta_as_nanos(slot.submitted.load(Ordering::Relaxed), now);
            let o = slot.outcome.load(Ordering::Relaxed);
            if o == Outcome::Committed as u8 {
                self.committed += 1;
                let epoch = slot.log_epoch.load(Ordering::Relaxed);
                self.heap.phase(CommitPhase::Acknowledging, epoch);
            }
            if !measuring {
                continue;
            }
            let stats = &mut self.stats;
            match o {
                o if o == Outcome::Committed as u8 => {
                    stats.commits[ty] += 1;
                    stats.latency[ty].saturating_record(latency);
                    let epoch = slot.log_epoch.load(Ordering::Relaxed);
                    let submitted = slot.submitted.load(Ordering::Relaxed);
                    // SAFETY: complete: the sequencer writes the client before the slot is
                    // sequenced again, after this thread is done with the batch.
                    let client = unsafe { *slot.client.get() };
                    let count = slot.ack_count.load(Ordering::Relaxed);
                    self.durable.committed(epoch, submitted, client, count);
                }
                o if o == Outcome::User as u8 => {
                    stats.aborts[AbortReason::User as usize] += 1;
                    stats.user_aborts[ty] += 1;
                    stats.latency[ty].saturating_record(latency);
                }
                o if o == Outcome::Resubmit as u8 => {
                    stats.aborts[AbortReason::AccessSetMismatch as usize] += 1;
                    stats.aborts_by_type[ty] += 1;
                }
                o if o == Outcome::Retry as u8 => {
                    stats.aborts[AbortReason::UserRetry as usize] += 1;
                    stats.aborts_by_type[ty] += 1;
                }
                _ => {}
            }
        }
        control.commits(self.e, self.committed);
        self.heap.collect(env, &self.ctx.guard);
        // Release: pairs with the watermark's Acquire (this thread's reads are done).
        shared.env.finished[self.e].store(number + 1, Ordering::Release);
        shared.done(batch, number, shared.exec, stage::EXECUTED);
        true
    }

    /// Runs `slot` of this thread's batch, or with `dependency` = (producer, timestamp) that
    /// transaction instead, if it is unprocessed (see [`run_slot`]); `Ok` if it completed
    /// here or elsewhere.
    fn attempt<P: Procedure>(
        &mut self,
        env: &Env<'_, P>,
        slot: &Slot<P>,
        dependency: Option<(u64, u64)>,
    ) -> Result<(), Abort> {
        let claimed = match dependency {
            Some((producer, ts)) => claim(env.ring, producer, ts),
            None => {
                // Acquire: pairs with the Release of the slot's last owner.
                match slot.state.compare_exchange(
                    slot_state::UNPROCESSED,
                    slot_state::EXECUTING,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => Claim::Mine(slot),
                    Err(slot_state::COMPLETE) => Claim::Complete,
                    Err(_) => Claim::Busy,
                }
            }
        };
        match claimed {
            Claim::Mine(slot) => {
                let (pad, deeper) = self.pads.split_first_mut().expect("DEPTH > 0");
                run_slot(env, &self.ctx.guard, slot, pad, deeper, &self.abandoned, &mut self.heap)
                    .map(drop)
            }
            Claim::Complete => Ok(()),
            Claim::Busy => {
                // The producer past the bound is being executed elsewhere.
                if let Some(d) = dependency {
                    self.abandoned.busy.set(d);
                }
                Err(Abort::new(AbortReason::DependencyBusy))
            }
        }
    }

    /// The statistics, with the measured window closed now.
    fn finish(mut self, clock: &quanta::Clock) -> WorkerStats {
        if let Some(sink) = self.ctx.storage.history() {
            for pad in &mut self.pads {
                if let Some(mut h) = pad.take_history() {
                    sink.deliver(&mut h);
                }
            }
        }
        if let Some(from) = self.measure_from {
            self.stats.window_ns = clock.delta_as_nanos(from, self.measure_to);
            self.stats.windows = 1;
        }
        self.durable.close(clock, &mut self.stats);
        // The rows it unlinked and the slots it holds, for later runs' threads.
        self.ctx.storage.leave(&mut self.heap.reclaimer, &mut self.heap.caches);
        self.stats
    }
}

/// Takes the next [`CHUNK`] slots of `batch` (of `len`) for the calling execution thread to
/// answer for (`split=adaptive`); `false` if none are left.
fn take_chunk<P>(
    batch: &Batch<P>,
    len: usize,
    mine: &mut Vec<usize>,
    pending: &mut Vec<(usize, (u64, u64))>,
) -> bool {
    // Relaxed: a counter; the slots' contents came with the PLANNED stage.
    let i = batch.cursor.fetch_add(CHUNK, Ordering::Relaxed) as usize;
    if i >= len {
        return false;
    }
    let took = i..(i + CHUNK as usize).min(len);
    mine.extend(took.clone());
    pending.extend(took.map(|j| (j, NO_PRODUCER)));
    true
}

/// Whether a batch begun in phase `begun` and ended in phase `ended` overlaps the measurement
/// window: begun before the leader stopped the run, and ended after the window opened (the
/// leader goes from warm-up to measuring, pausing within it, to stopping).
fn overlaps_window(begun: RunPhase, ended: RunPhase) -> bool {
    begun != RunPhase::Stop && ended != RunPhase::Warmup
}

/// Runs a thread's role over the batches (see [`Role`]).
fn serve<'db, P: Procedure>(
    db: &'db Database<Bohm>,
    shared: &Shared<'db, P>,
    role: Role,
    barrier: &Barrier,
) -> Result<Option<WorkerStats>, Error> {
    let mut number = shared.first;
    match role {
        Role::Plan(c) => {
            let setup = db.worker_ctx();
            barrier.wait();
            let mut ctx = setup?;
            db.storage().adopt_orphans(&mut ctx.reclaimer, &mut ctx.caches);
            while shared.wait_for(number, stage::SEQUENCED, || false)
                && plan_partition(shared, &mut ctx, c, number)
            {
                number += 1;
            }
            Ok(None)
        }
        Role::Execute(e) | Role::Both(e) => {
            let plans = matches!(role, Role::Both(_));
            let setup = ExecRole::new(db, shared, e);
            barrier.wait();
            let mut x = setup?;
            loop {
                let ctx = &mut x.ctx;
                let planned =
                    shared.wait_for(number, stage::PLANNED, || plans && plan_some(shared, ctx, e));
                if !planned || !x.step(shared, number, plans) {
                    break;
                }
                number += 1;
            }
            Ok(Some(x.finish(&shared.clock)))
        }
    }
}

#[cfg(test)]
mod tests;
