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
//! **Concurrency-control threads** plan each batch in turn ([`Planner::plan`]); the last of
//! them to finish a batch publishes it planned. Between batches each frees the versions its
//! records shed once the execution threads are past them (below).
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
//! **Shared threads.** With `--threads 1` one thread plays both parts, and with `cc-executes`
//! every thread is an execution thread and the first `m` are CC threads too: each such thread
//! plans its share of a batch, then executes its slots of it, then plans the next. A thread
//! planning batch `b` waits for nothing but the sequencer, and one executing `b` only for
//! batches up to `b` to be planned, so the order is free of cycles. The paper dedicates
//! threads to each layer; sharing them gives the cores to whichever layer has work, which
//! matters when the threads are few (on 2 cores, `--threads 2` otherwise executes on one).
//!
//! **Garbage collection (§3.3.2).** A version superseded by a write of batch `b` is invisible
//! to every transaction after batch `b`, so once every execution thread has finished batch `b`
//! (the low watermark is the minimum of their finished-batch counters) no transaction will
//! read it again. The concurrency-control thread that owns the record cuts it off the chain
//! and frees it after a storage-epoch grace period (execution threads run each batch inside
//! their epoch, so a reader that reached it just before the cut finishes first). A superseding
//! version that passed its value on ([`super::record::PASS`]) gets the value copied in first.
//!
//! **Ending.** A timed run ends when the leader stops it: the sequencer publishes no further
//! batch and says which batch is the last; the other threads finish the batches before it and
//! leave. A run of a fixed number of transactions sequences `threads x per_worker` of them and
//! ends when every one has committed or aborted for good (re-submissions included).

use super::pipeline::{claim, executing, slot_state, stage, Batch, Claim, Outcome, Planner, Slot};
use super::record::{settle, BohmVersion};
use super::worker::{run_slot, Abandoned, Env, Heap, Scratchpad, NO_PRODUCER};
use super::Bohm;
use crate::engine::driver::{
    lead, worker_seed, Control, DurableCommits, RunConfig, RunLength, RunPhase,
};
use crate::engine::stats::WorkerStats;
use crate::engine::{Database, Generator, Procedure, Protocol, Workload};
use crate::error::{Abort, AbortReason, Error};
use crate::protocols::common::SpinWait;
use crate::storage::context::WorkerCtx;
use crate::storage::TableId;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

/// Batches in the ring: one being sequenced, one being planned, one being executed, and one
/// of slack so that a stage that runs ahead does not wait for the slowest at once.
pub const RING: usize = 4;

/// Yields of a waiting thread before it sleeps between checks.
const IDLE_YIELDS: u32 = 1000;

/// Scratchpads per execution thread: the recursion bound of dependency evaluation.
pub const DEPTH: usize = 16;

/// What the threads of one run share besides the ring.
struct Shared<'a, P> {
    env: Env<'a, P>,
    /// The acknowledgement file (`RunConfig::acks`), if any.
    ack_file: Option<&'a std::fs::File>,
    /// Slots per batch.
    size: usize,
    /// Concurrency-control threads.
    cc: usize,
    /// Execution threads.
    exec: usize,
    /// The number of the run's first batch.
    first: u64,
    /// The number of the first batch that will not be sequenced (`u64::MAX` until known).
    end: CachePadded<AtomicU64>,
    control: &'a Control,
    clock: quanta::Clock,
}

impl<P> Shared<'_, P> {
    /// Waits until batch `number` of the ring is in stage `want`; `false` if it never will be
    /// (the run ends before it, or failed). Honours the leader's pauses while waiting.
    fn wait_for(&self, number: u64, want: u64) -> bool {
        let batch = &self.env.ring[(number % RING as u64) as usize];
        let mut spin = SpinWait::default();
        let mut idle = 0u32;
        loop {
            // Acquire: pairs with the Release that published the stage; the batch's fields
            // written before it are visible.
            if batch.stage.load(Ordering::Acquire) == want
                && batch.number.load(Ordering::Relaxed) == number
            {
                return true;
            }
            // Acquire: pairs with the sequencer's Release store of `end`.
            if number >= self.end.load(Ordering::Acquire) {
                return false;
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
    fn done(&self, batch: &Batch<P>, threads: usize, next: u64) {
        // AcqRel: the last thread's increment sees every other thread's writes before it.
        if batch.done.fetch_add(1, Ordering::AcqRel) + 1 == threads as u32 {
            batch.done.store(0, Ordering::Relaxed);
            batch.stage.store(next, Ordering::Release);
        }
    }
}

/// Runs `workload` on `db` through BOHM's pipeline (see the module docs).
pub fn drive<W: Workload>(
    db: &Database<Bohm>,
    workload: &W,
    cfg: &RunConfig,
) -> Result<Vec<WorkerStats>, Error> {
    let (cc, exec) = db.protocol().split(cfg.threads)?;
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
        })
        .collect();
    // Threads that play both parts (`--threads 1`, or `cc-executes`): execution thread `e`
    // is CC thread `e` too if there is one.
    let combined = cc + exec > cfg.threads;
    let roles: Vec<(Option<usize>, Option<usize>)> = if combined {
        (0..exec).map(|e| ((e < cc).then_some(e), Some(e))).collect()
    } else {
        (0..exec).map(|e| (None, Some(e))).chain((0..cc).map(|c| (Some(c), None))).collect()
    };
    let control = Control::new(cfg, 1 + roles.len());
    // Per execution thread: how many batches it has finished (its `batch_e` plus one).
    // A run continues the timestamps of the last one on this database, so that the versions
    // earlier runs left are older than every transaction of this one.
    let first = db.protocol().next_batch.load(Ordering::Relaxed);
    let finished: Box<[CachePadded<AtomicU64>]> =
        (0..exec).map(|_| CachePadded::new(AtomicU64::new(first))).collect();
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
        cc,
        exec,
        first,
        end: CachePadded::new(AtomicU64::new(u64::MAX)),
        control: &control,
        clock: quanta::Clock::new(),
    };
    let cores = if cfg.pin { core_affinity::get_core_ids().unwrap_or_default() } else { vec![] };
    let barrier = Barrier::new(2 + roles.len());
    let (stats, seq) = std::thread::scope(|s| {
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
            .map(|(i, &(c, e))| {
                s.spawn(move || {
                    pin(i);
                    let _finished = shared.control.finish();
                    serve(db, shared, c, e, barrier)
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
        lead(db, cfg, &control, || {
            barrier.wait();
        });
        fn join<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        }
        let stats: Vec<_> = threads.into_iter().map(join).collect();
        (stats, join(seq))
    });
    let end = shared.end.load(Ordering::Acquire);
    if end != u64::MAX {
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
    let setup = WorkerCtx::new(db.storage());
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
            if shared.wait_for(n, stage::EXECUTED) {
                report(&shared.env.ring[(n % RING as u64) as usize], gens);
            }
        }
    };
    loop {
        let phase = control.phase();
        if phase == RunPhase::Stop || (left == 0 && outstanding == 0) {
            stop(number, gens);
            return Ok(());
        }
        if phase == RunPhase::Pause {
            control.pause();
            continue;
        }
        let r = (number % RING as u64) as usize;
        let batch = &shared.env.ring[r];
        // Free, or executed (`number - RING`): wait for the execution threads.
        if number >= shared.first + RING as u64 {
            if !shared.wait_for(number - RING as u64, stage::EXECUTED) {
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
            if slot.outcome.load(Ordering::Relaxed) != Outcome::Resubmit as u8 {
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
            slot.ts.store(Batch::<()>::ts_of(number, shared.size, i), Ordering::Relaxed);
            // Release: a late reader's claim that finds the slot refilled sees its timestamp
            // (see `claim`).
            slot.state.store(slot_state::UNPROCESSED, Ordering::Release);
        }
        batch.len.store(shared.size as u32, Ordering::Relaxed);
        batch.number.store(number, Ordering::Relaxed);
        // Release: pairs with the CC threads' Acquire in `wait_for`.
        batch.stage.store(stage::SEQUENCED, Ordering::Release);
        number += 1;
    }
}

/// Reports the transactions of an executed batch that finished for good to their generators
/// (the commits) and marks their slots empty; returns how many there were.
fn report<G: Generator>(batch: &Batch<G::Proc>, gens: &mut [G]) -> u64 {
    let mut n = 0;
    for slot in batch.slots.iter() {
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

/// A concurrency-control thread's state (see the module docs).
struct CcRole<'db> {
    planner: Planner<'db>,
    /// Versions cut off their chains, with the epoch they were cut in.
    dead: VecDeque<(TableId, NonNull<BohmVersion>, u64)>,
    buf: Vec<u8>,
}

impl<'db> CcRole<'db> {
    fn new<P>(db: &'db Database<Bohm>, shared: &Shared<'db, P>, c: usize) -> Result<Self, Error> {
        let ctx = WorkerCtx::new(db.storage())?;
        let planner = Planner::new(ctx, shared.env.stores, shared.env.units, c, shared.cc);
        Ok(CcRole { planner, dead: VecDeque::new(), buf: Vec::new() })
    }

    /// Plans batch `number` (SEQUENCED, Acquired by the caller) and collects garbage; `false`
    /// if the run failed.
    fn step<P>(&mut self, shared: &Shared<'_, P>, number: u64) -> bool {
        let r = (number % RING as u64) as usize;
        let batch = &shared.env.ring[r];
        // A fresh index guard per batch, so that the index's memory can be reclaimed.
        self.planner.ctx.guard.repin();
        if let Err(a) = self.planner.plan(batch, r) {
            shared.control.fail(Error::Fatal { txn: "(planning)".into(), reason: a.reason });
            return false;
        }
        shared.done(batch, shared.cc, stage::PLANNED);
        // Versions superseded in batches every execution thread has finished.
        let epochs = shared.env.storage.epochs();
        let w = shared.env.watermark();
        let mut stamp = None;
        while let Some(&(b, t, v)) = self.planner.superseding.front() {
            if b >= w {
                break;
            }
            self.planner.superseding.pop_front();
            if shared.env.units.shift(t).is_some() {
                // The table is in unit mode: its rows' writers cut their chains (see
                // `super::units`). None of them runs now: a table switches in a batch this
                // thread has not planned yet when it finds it out of unit mode here.
                continue;
            }
            // SAFETY: `v` is on its record's chain (only this thread cuts it, here).
            let v = unsafe { v.as_ref() };
            settle(shared.env.stores, t, v, &mut self.buf);
            if let Some(old) = super::record::cut_after(v) {
                let e = *stamp.get_or_insert_with(|| epochs.retire_stamp());
                let mut next = Some(old);
                while let Some(p) = next {
                    // SAFETY: the cut chain is this thread's alone; freed after the grace.
                    next = NonNull::new(unsafe { p.as_ref() }.next.load(Ordering::Relaxed));
                    self.dead.push_back((t, p, e));
                }
            }
        }
        let safe = epochs.min_active();
        while let Some(&(t, v, e)) = self.dead.front() {
            if e >= safe {
                break;
            }
            self.dead.pop_front();
            self.planner.free(t, v);
        }
        true
    }
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
    /// Its slots of the batch that are not complete yet, each with the producer (and its
    /// timestamp) another thread was executing when its last attempt was abandoned, if any.
    pending: Vec<(usize, (u64, u64))>,
    /// Its log stream and what it allocates and frees for rows of tables in unit mode.
    heap: Heap,
    /// Its measured commits on their way to durability, when the database logs.
    durable: DurableCommits<'db>,
}

impl<'db> ExecRole<'db> {
    fn new<P>(db: &'db Database<Bohm>, shared: &Shared<'db, P>, e: usize) -> Result<Self, Error> {
        let mut ctx = WorkerCtx::new(db.storage())?;
        let mut heap = Heap::new(db.storage().tables().len());
        heap.log = ctx.log.take();
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
            pending: Vec::with_capacity(shared.size / shared.exec + 1),
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
    fn step<P: Procedure>(&mut self, shared: &Shared<'_, P>, number: u64) -> bool {
        let (env, control, clock) = (&shared.env, shared.control, &shared.clock);
        let started = clock.raw();
        let begun_in = control.phase();
        let measuring = begun_in == RunPhase::Measure;
        if let Err(e) = self.durable.poll(clock, &mut self.stats) {
            control.fail(e);
            return false;
        }
        let batch = &env.ring[(number % RING as u64) as usize];
        let len = batch.len.load(Ordering::Relaxed) as usize;
        let mine = (self.e..len).step_by(shared.exec);
        self.pending.clear();
        self.pending.extend(mine.clone().map(|i| (i, NO_PRODUCER)));
        let epochs = env.storage.epochs();
        // The batch runs inside this thread's epoch: versions it reaches are not freed under it.
        epochs.enter(self.ctx.slot);
        self.ctx.guard.repin();
        let mut spin = SpinWait::default();
        let mut failed = None;
        while !self.pending.is_empty() && failed.is_none() {
            let mut progress = false;
            let mut k = 0;
            while k < self.pending.len() {
                let (i, waits_for) = self.pending[k];
                let slot = &batch.slots[i];
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
        // are durable. The slots' log epochs were published with their COMPLETE state.
        if let Some(log) = self.heap.log.as_mut().filter(|l| l.sync_commit()) {
            let last = mine.clone().map(|i| batch.slots[i].log_epoch.load(Ordering::Relaxed));
            log.wait_durable(last.max().unwrap_or(0));
        }
        let now = clock.raw();
        let measuring = overlaps_window(begun_in, control.phase());
        if measuring {
            self.measure_from.get_or_insert(started);
            self.measure_to = now;
        }
        for i in mine {
            let slot = &batch.slots[i];
            // SAFETY: complete (Acquired above): nobody writes the procedure until the
            // sequencer refills the batch, after this thread is done with it.
            let ty = unsafe { &*slot.proc.get() }.txn_type();
            let latency = clock.delta_as_nanos(slot.submitted.load(Ordering::Relaxed), now);
            let o = slot.outcome.load(Ordering::Relaxed);
            if o == Outcome::Committed as u8 {
                self.committed += 1;
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
                _ => {}
            }
        }
        control.commits(self.e, self.committed);
        self.heap.collect(env);
        // Release: pairs with the watermark's Acquire (this thread's reads are done).
        shared.env.finished[self.e].store(number + 1, Ordering::Release);
        shared.done(batch, shared.exec, stage::EXECUTED);
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
        self.stats
    }
}

/// Whether a batch begun in phase `begun` and ended in phase `ended` overlaps the measurement
/// window: begun before the leader stopped the run, and ended after the window opened (the
/// leader goes from warm-up to measuring, pausing within it, to stopping).
fn overlaps_window(begun: RunPhase, ended: RunPhase) -> bool {
    begun != RunPhase::Stop && ended != RunPhase::Warmup
}

/// Runs a thread's roles over the batches: execution thread `exec` (if any) and CC thread
/// `cc` (if any), both for a run with one thread of each (`--threads 1`).
fn serve<P: Procedure>(
    db: &Database<Bohm>,
    shared: &Shared<'_, P>,
    cc: Option<usize>,
    exec: Option<usize>,
    barrier: &Barrier,
) -> Result<Option<WorkerStats>, Error> {
    let setup = (|| {
        let c = cc.map(|c| CcRole::new(db, shared, c)).transpose()?;
        let e = exec.map(|e| ExecRole::new(db, shared, e)).transpose()?;
        Ok::<_, Error>((c, e))
    })();
    barrier.wait();
    let (mut c, mut e) = setup?;
    let mut number = shared.first;
    loop {
        if let Some(c) = &mut c {
            if !shared.wait_for(number, stage::SEQUENCED) || !c.step(shared, number) {
                break;
            }
        }
        if let Some(e) = &mut e {
            if !shared.wait_for(number, stage::PLANNED) || !e.step(shared, number) {
                break;
            }
        }
        number += 1;
    }
    Ok(e.map(|e| e.finish(&shared.clock)))
}

#[cfg(test)]
mod tests {
    use crate::engine::driver::{Backoff, RunConfig, RunLength};
    use crate::engine::{ProtocolOptions, Workload};
    use crate::prelude::*;
    use crate::protocols::bohm::Bohm;
    use crate::workloads::smallbank::{SmallBank, SmallBankConfig};
    use std::time::Duration;

    fn config(threads: usize, per_worker: u64) -> RunConfig {
        RunConfig {
            threads,
            length: RunLength::transactions(per_worker),
            backoff: Backoff::None,
            pin: false,
            seed: 7,
            check_templates: true,
            check_access_sets: true,
            prefault: true,
            breakdown: false,
            acks: None,
        }
    }

    /// A BOHM database for `workload` with options `opts`, loaded.
    fn database<W: Workload>(workload: &W, opts: &[(&str, &str)], history: bool) -> Database<Bohm> {
        let pairs: Vec<(String, String)> =
            opts.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let db = Database::<Bohm>::builder(&workload.tables())
            .options(DbOptions {
                max_workers: 16,
                epoch_interval: Duration::from_millis(2),
                record_history: history,
                ..Default::default()
            })
            .protocol_options(crate::protocols::bohm::BohmOptions::from_pairs(&pairs).unwrap())
            .txn_types(workload.txn_types())
            .build()
            .unwrap();
        workload.load(&db, 2).unwrap();
        drop(db.take_history());
        db
    }

    /// Transactions that ended (committed, or rolled back by the workload).
    fn ended(stats: &[crate::engine::stats::WorkerStats]) -> u64 {
        stats.iter().map(|s| s.total_commits() + s.user_aborts.iter().sum::<u64>()).sum()
    }

    fn smallbank(
        threads: usize,
        opts: &[(&str, &str)],
        per_worker: u64,
    ) -> (Result<(), String>, u64) {
        let sb = SmallBank::new(SmallBankConfig { customers: 50, spin_us: 0 });
        let db = database(&sb, opts, false);
        let stats = Bohm::drive(&db, &sb, &config(threads, per_worker)).unwrap();
        (sb.check(&db), ended(&stats))
    }

    /// The histories of SmallBank at 50 customers and TPC-C at one warehouse under BOHM are
    /// serializable, with many dependencies to check.
    #[test]
    fn recorded_histories_are_serializable() {
        use crate::workloads::tpcc::{Tpcc, TpccConfig};
        let sb = SmallBank::new(SmallBankConfig { customers: 50, spin_us: 0 });
        let db = database(&sb, &[("batch", "50")], true);
        let stats = Bohm::drive(&db, &sb, &config(4, 1500)).unwrap();
        assert_eq!(ended(&stats), 6000);
        assert_eq!(sb.check(&db), Ok(()));
        let rep = crate::checker::check(&db.take_history());
        assert!(rep.anomalies.is_empty(), "smallbank: {rep}");
        assert!(rep.committed > 5000 && rep.edges[..3].iter().all(|&e| e > 1000), "{rep}");
        let tpcc = Tpcc::new(TpccConfig::new(1));
        let db = database(&tpcc, &[("batch", "64")], true);
        let stats = Bohm::drive(&db, &tpcc, &config(4, 300)).unwrap();
        assert_eq!(ended(&stats), 1200);
        assert_eq!(tpcc.check(&db), Ok(()));
        let rep = crate::checker::check(&db.take_history());
        assert!(rep.anomalies.is_empty(), "tpcc: {rep}");
        assert!(rep.edges[3] + rep.edges[4] > 0, "scans made predicate edges: {rep}");
    }

    /// A second run on the same database continues the first one's timestamps: it sees the
    /// first run's writes, and TPC-C's consistency conditions hold across runs.
    #[test]
    fn a_second_run_continues_the_first() {
        use crate::workloads::tpcc::{Tpcc, TpccConfig};
        let sb = Tpcc::new(TpccConfig::new(1));
        let db = database(&sb, &[("batch", "16")], false);
        // A long run, then short ones: a short run's timestamps, restarted, would fall below
        // most of the long run's versions.
        for (run, per_worker) in [500, 50, 50].into_iter().enumerate() {
            let stats = Bohm::drive(&db, &sb, &config(4, per_worker)).unwrap();
            assert_eq!(ended(&stats), 4 * per_worker, "run {run}");
            assert_eq!(sb.check(&db), Ok(()), "run {run}");
        }
    }

    /// A batch counts when any of it falls in the window, however long it is.
    #[test]
    fn batches_count_when_they_overlap_the_window() {
        use super::{
            overlaps_window,
            RunPhase::{Measure, Pause, Stop, Warmup},
        };
        assert!(!overlaps_window(Warmup, Warmup), "all of it before the window");
        assert!(overlaps_window(Warmup, Measure), "straddles the opening");
        assert!(overlaps_window(Warmup, Stop), "spans the whole window");
        assert!(overlaps_window(Measure, Measure));
        assert!(overlaps_window(Measure, Pause) && overlaps_window(Pause, Measure));
        assert!(overlaps_window(Measure, Stop), "straddles the close");
        assert!(!overlaps_window(Stop, Stop), "all of it after the window");
    }

    #[test]
    fn smallbank_money_is_conserved_through_the_pipeline() {
        for (threads, opts) in [
            (4, vec![("batch", "16")]),
            (5, vec![("batch", "7"), ("cc-threads", "2")]),
            (5, vec![("batch", "7"), ("cc-threads", "2"), ("cc-executes", "on")]),
            (2, vec![("batch", "1000")]),
            (2, vec![("batch", "9"), ("cc-executes", "on")]),
            (1, vec![("batch", "3")]),
        ] {
            let (check, ended) = smallbank(threads, &opts, 600);
            assert_eq!(check, Ok(()), "{threads} threads, {opts:?}");
            assert_eq!(ended, threads as u64 * 600, "every transaction ended once: {opts:?}");
        }
    }
}
