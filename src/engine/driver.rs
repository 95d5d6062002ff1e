//! The interactive driver: worker threads pinned to cores, warm-up then a timed measurement
//! window (or a fixed number of transactions per worker), retries with backoff, and statistics.
//!
//! Every worker thread owns a protocol worker, a workload generator and an RNG. It runs
//! transactions back to back; an aborted transaction is retried with the *same* parameters until
//! it commits (so slow transaction types are not starved out of the mix), after a backoff chosen
//! by the [`Backoff`] policy. A user abort is a final outcome and is not retried.
//!
//! The calling thread is the *leader*: it switches phases (warm-up, measure, stop) and, with
//! adaptive backoff, runs Cicada's contention regulation (§3.9): every 5 ms it sums the workers'
//! commit counters and hill-climbs the globally shared maximum backoff by 0.5 µs steps in the
//! direction in which throughput improved. Workers read that maximum only after an abort.
//! Unless [`RunConfig::prefault`] is off, the leader also faults memory in for the tables that
//! grow ([`crate::storage::Prefaulter`]), so that inserting workers do not wait for the kernel to
//! zero fresh pages (the C++ engines we compare with fault their whole allocator region in
//! before they measure). During warm-up (and throughout a run of a fixed number of
//! transactions) it does so every 5 ms, ahead of the tables' cursors. At the end of a warm-up it
//! pauses the workers and faults in what the window will need: each table's warm-up growth,
//! scaled to the window's length, plus a quarter ([`RESERVE_MARGIN`]). The measured window then
//! neither takes page faults nor shares its cores with the faulting leader (on a machine with as
//! many workers as cores, faulting alongside them cost more than it saved); if the estimate runs
//! short, the 5 ms steps take over again.
//!
//! A protocol that runs its own threads ([`crate::engine::Protocol::drive`], BOHM's pipeline)
//! uses the same leader: its threads share a [`Control`] (phases, pause handshake, commit
//! counters, the first fatal error) and the calling thread runs [`lead`], so that its runs have
//! the same warm-up, window, prefaulting and failure handling as interactive ones, and it
//! reports through the same [`WorkerStats`].

use super::database::Database;
use super::procedure::{AccessSet, Checks, Intent, Procedure, Tx};
use super::protocol::{Protocol, Worker};
use super::stats::{Phase, TimelinePoint, WorkerStats};
use super::workload::{Generator, Workload};
use crate::error::{Abort, AbortReason, Error};
use crate::storage::Prefaulter;
use crossbeam_utils::CachePadded;
use rand::{Rng, RngExt, SeedableRng};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// Backoff after a concurrency-control abort.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Backoff {
    /// Retry at once.
    None,
    /// Wait a uniformly random time in `[0, max_us)` microseconds (DBx1000 uses 100 µs).
    Fixed {
        /// Maximum backoff in microseconds.
        max_us: f64,
    },
    /// Cicada's globally coordinated hill climbing of the maximum backoff (§3.9).
    Adaptive,
    /// The protocol's own default ([`Protocol::DEFAULT_BACKOFF`]): adaptive for Cicada, none
    /// for the others.
    Protocol,
}

impl Backoff {
    /// The policy protocol `P` runs with: this one, or `P`'s default for [`Backoff::Protocol`].
    pub fn of<P: Protocol>(self) -> Backoff {
        match self {
            Backoff::Protocol => P::DEFAULT_BACKOFF,
            b => b,
        }
    }
}

/// How long a run lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RunLength {
    /// A warm-up, then a measurement window, both timed by the leader.
    Timed {
        /// Warm-up before measuring.
        #[serde(rename = "warmup_s", serialize_with = "crate::util::serialize_secs")]
        warmup: Duration,
        /// Measurement window.
        #[serde(rename = "duration_s", serialize_with = "crate::util::serialize_secs")]
        duration: Duration,
    },
    /// Every worker runs exactly this many transactions (each ends committed or with a user
    /// abort; concurrency aborts are retried within it), all of them measured, and stops. What a
    /// run does then depends on the seed and the schedule, never on how fast the machine is:
    /// tests use this.
    Transactions {
        /// Transactions per worker.
        per_worker: u64,
    },
}

impl RunLength {
    /// A timed run of `warmup` then `duration`.
    pub fn timed(warmup: Duration, duration: Duration) -> Self {
        RunLength::Timed { warmup, duration }
    }

    /// A run of `per_worker` transactions per worker.
    pub fn transactions(per_worker: u64) -> Self {
        RunLength::Transactions { per_worker }
    }
}

/// Durable acknowledgements, for crash tests (`txlab run --ack-file`): every transaction also
/// writes its worker's count of commits and its worker's ledger ([`Generator::ledger`]: e.g.
/// SmallBank's net deposits, counting this transaction) into row `worker` of `table` (16 bytes,
/// appended to the workload's tables), and once a commit is durable its worker appends `worker
/// count` to `file`. After a crash, every count in the file must be at most the recovered row's,
/// and the recovered ledgers add up to what the recovered data implies.
#[derive(Clone, Debug)]
pub struct Acks {
    /// The acknowledgement table.
    pub table: crate::storage::TableId,
    /// Where durable counts are appended, one line per write.
    pub file: std::sync::Arc<std::fs::File>,
}

/// The name of the acknowledgement table ([`Acks`]).
pub const ACK_TABLE: &str = "txlab_acks";
/// The acknowledgement table's row: commit count (u64), ledger (i64).
pub const ACK_ROW: usize = 16;
/// The acknowledgement table's capacity: worker slots (keys `0..ACK_WORKERS`).
pub const ACK_WORKERS: u64 = 1100;

/// How a run is driven.
#[derive(Clone, Debug, Serialize)]
pub struct RunConfig {
    /// Worker threads.
    pub threads: usize,
    /// How long the run lasts: a timed window, or a number of transactions per worker.
    pub length: RunLength,
    /// Backoff policy (by default each protocol's own, [`Backoff::Protocol`]).
    pub backoff: Backoff,
    /// Pin worker `i` to core `i mod cores`.
    pub pin: bool,
    /// Base seed; worker `i` derives its own.
    pub seed: u64,
    /// Check piece templates at run time.
    pub check_templates: bool,
    /// Declare access sets before each transaction and check them at run time.
    pub check_access_sets: bool,
    /// Let the leader fault memory in ahead of growing tables (see the module docs).
    pub prefault: bool,
    /// Time each phase of the measured transactions (begin, prefetches, reads, writes, commit,
    /// abort: [`crate::engine::stats::Phase`]) for the report's breakdown. Off by default: two
    /// clock reads per operation cost a little throughput.
    pub breakdown: bool,
    /// Durable acknowledgements for crash tests (needs a database that logs).
    #[serde(skip)]
    pub acks: Option<Acks>,
    /// Changes of the mix of transaction types during a timed run (IC3 §6.9), in time order:
    /// the workers' generators restrict themselves to each step's types
    /// ([`crate::engine::Generator::restrict_mix`]) once the protocol has been told
    /// ([`Database::set_mix`]). A step at 0 applies from the start of the warm-up.
    pub mix_at: Vec<MixStep>,
    /// Sample the throughput over the window in intervals of this length
    /// ([`WorkerStats::timeline`]; the leader reads the commit counters as it wakes up).
    pub timeline: Option<Duration>,
}

/// A change of the mix ([`RunConfig::mix_at`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MixStep {
    /// When, from the start of the measurement window.
    pub at: Duration,
    /// The transaction types that run from then on (indices into the workload's types).
    pub types: Vec<usize>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            threads: 1,
            length: RunLength::timed(Duration::from_millis(500), Duration::from_secs(2)),
            backoff: Backoff::Protocol,
            pin: true,
            seed: 1,
            check_templates: cfg!(debug_assertions),
            check_access_sets: false,
            prefault: true,
            breakdown: false,
            acks: None,
            mix_at: Vec::new(),
            timeline: None,
        }
    }
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;
/// Workers wait (sleeping) while the leader faults memory in before the window.
const PAUSE: u8 = 3;

/// With more workers than cores, a transaction retried this many times yields its core before
/// each further attempt.
const YIELD_AFTER_RETRIES: u32 = 2;

/// Faulted in before the window: the warm-up's growth rate times the window, times this.
pub const RESERVE_MARGIN: f64 = 1.25;

/// Hill-climbing period (Cicada §3.9: 5 ms).
pub(crate) const REGULATION_PERIOD: Duration = Duration::from_millis(5);
/// How often the leader faults memory in ahead of growing tables.
const PREFAULT_PERIOD: Duration = Duration::from_millis(5);
/// Hill-climbing step (Cicada §3.9: 0.5 µs).
pub(crate) const REGULATION_STEP_NS: i64 = 500;

/// Cicada's contention regulation (§3.9): every period, the maximum backoff moves one step in
/// the direction that raised throughput over the last period (up if raising it raised
/// throughput or lowering it lowered it, down otherwise; a coin flip when either stood
/// still). The driver's leader and the database's shared regulator for embedded programs
/// ([`crate::engine::Retry`]) both step it.
#[derive(Debug)]
pub(crate) struct HillClimb {
    /// (throughput, maximum backoff in ns) of the last two periods.
    hist: [(f64, i64); 2],
    rng: rand::rngs::Xoshiro256PlusPlus,
}

impl HillClimb {
    pub(crate) fn new(seed: u64) -> Self {
        HillClimb {
            hist: [(0.0, 0), (0.0, 0)],
            rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The maximum backoff (ns) for the next period, given the throughput of the period that
    /// ran with `cur`.
    pub(crate) fn step(&mut self, throughput: f64, cur: u64) -> u64 {
        let cur = cur as i64;
        self.hist = [self.hist[1], (throughput, cur)];
        let (dt, db) = (self.hist[1].0 - self.hist[0].0, self.hist[1].1 - self.hist[0].1);
        let up =
            if db == 0 || dt == 0.0 { self.rng.next_u32() & 1 == 0 } else { dt / db as f64 > 0.0 };
        let next = if up { cur + REGULATION_STEP_NS } else { (cur - REGULATION_STEP_NS).max(0) };
        next as u64
    }
}

/// A run's phase, as its threads see it ([`Control::phase`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunPhase {
    /// Before the measurement window: run, but do not count.
    Warmup,
    /// Count what completes.
    Measure,
    /// Stop between transactions and call [`Control::pause`]: the leader faults memory in.
    Pause,
    /// Leave.
    Stop,
}

/// What the threads of a run share with its leader: the phase, the per-thread commit counters
/// the leader watches (stalls, Cicada's regulation), the maximum backoff it sets, the first fatal
/// error and the pause handshake. The interactive driver's workers use it, and so does a
/// protocol that runs its own threads ([`crate::engine::Protocol::drive`]) with [`lead`] on the
/// calling thread, so that both have the same phases, window and failure handling.
pub struct Control {
    phase: CachePadded<AtomicU8>,
    max_backoff_ns: CachePadded<AtomicU64>,
    commits: Box<[CachePadded<AtomicU64>]>,
    fatal: Mutex<Option<Error>>,
    /// Threads that have left their loop (a run of a fixed number of transactions ends when all
    /// have).
    finished: CachePadded<AtomicUsize>,
    /// Threads waiting in the `Pause` phase.
    paused: CachePadded<AtomicUsize>,
    /// The steps of [`RunConfig::mix_at`] in force (0: none yet).
    mix_steps: CachePadded<AtomicUsize>,
    /// The threads that report to it.
    threads: usize,
}

impl Control {
    /// The control of a run of `cfg` by `threads` threads, each of which ends by dropping its
    /// [`Control::finish`] guard and honours [`RunPhase::Pause`].
    pub fn new(cfg: &RunConfig, threads: usize) -> Self {
        let first = match cfg.length {
            RunLength::Timed { .. } => WARMUP,
            RunLength::Transactions { .. } => MEASURE,
        };
        Control {
            phase: CachePadded::new(AtomicU8::new(first)),
            max_backoff_ns: CachePadded::new(AtomicU64::new(match cfg.backoff {
                Backoff::Fixed { max_us } => (max_us * 1000.0) as u64,
                _ => 0,
            })),
            commits: (0..threads).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
            fatal: Mutex::new(None),
            finished: CachePadded::new(AtomicUsize::new(0)),
            paused: CachePadded::new(AtomicUsize::new(0)),
            mix_steps: CachePadded::new(AtomicUsize::new(0)),
            threads,
        }
    }

    /// How many steps of [`RunConfig::mix_at`] are in force: a thread restricts its
    /// transactions to the last one's types.
    #[inline]
    pub fn mix_steps(&self) -> usize {
        // Acquire: pairs with the leader's Release store, made after the protocol was told.
        self.mix_steps.load(Ordering::Acquire)
    }

    /// The phase now.
    #[inline]
    pub fn phase(&self) -> RunPhase {
        // Acquire: pairs with the leader's Release stores, so that a thread that sees `Measure`
        // or `Stop` also sees what the leader did before (the faulted-in memory, a fatal error).
        match self.phase.load(Ordering::Acquire) {
            WARMUP => RunPhase::Warmup,
            MEASURE => RunPhase::Measure,
            PAUSE => RunPhase::Pause,
            _ => RunPhase::Stop,
        }
    }

    /// Whether the run is stopping (a cheap check inside long loops, such as a backoff).
    #[inline]
    pub fn stopping(&self) -> bool {
        // Relaxed: a hint; the thread reads the phase again with Acquire before it leaves.
        self.phase.load(Ordering::Relaxed) == STOP
    }

    /// Called by a thread that saw [`RunPhase::Pause`] between transactions: counts it paused
    /// and sleeps until the leader moves on.
    pub fn pause(&self) {
        // Release: pairs with the leader's Acquire in `pause_workers`.
        self.paused.fetch_add(1, Ordering::Release);
        while self.phase.load(Ordering::Acquire) == PAUSE {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Publishes thread `i`'s count of commits so far, for the leader's stall watch and
    /// regulation.
    #[inline]
    pub fn commits(&self, i: usize, total: u64) {
        // Relaxed: the counters are statistics; no data is read through them.
        self.commits[i].store(total, Ordering::Relaxed);
    }

    /// Stops the run with `error`, unless an earlier error stopped it already.
    pub fn fail(&self, error: Error) {
        let mut f = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(error);
        self.phase.store(STOP, Ordering::Release);
    }

    /// Whether a thread reported a fatal error ([`Control::fail`]).
    pub fn failed(&self) -> bool {
        self.fatal.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// The maximum backoff after an abort, in nanoseconds (fixed, or the leader's regulation).
    #[inline]
    pub fn max_backoff_ns(&self) -> u64 {
        // Relaxed: a tuning value; any recent one will do.
        self.max_backoff_ns.load(Ordering::Relaxed)
    }

    /// A guard that counts its thread as finished when dropped, also when the thread panics,
    /// so that the leader of a fixed-length run never waits for a thread that is gone.
    pub fn finish(&self) -> Finished<'_> {
        Finished(&self.finished)
    }

    /// The error that stopped the run, if any.
    pub fn into_error(self) -> Option<Error> {
        self.fatal.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

/// See [`Control::finish`].
pub struct Finished<'a>(&'a AtomicUsize);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        // Release: pairs with the leader's Acquire load (nothing is read through it; the
        // threads' statistics travel through their join handles).
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// Derives worker `i`'s seed from the base seed (SplitMix64 step).
pub fn worker_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs `workload` on `db` with one interactive worker per thread. Returns each worker's
/// statistics for the measurement window.
pub fn run_interactive<P: Protocol, W: Workload>(
    db: &Database<P>,
    workload: &W,
    cfg: &RunConfig,
) -> Result<Vec<WorkerStats>, Error> {
    if cfg.threads == 0 {
        return Err(Error::Config("--threads must be at least 1".into()));
    }
    let resolved;
    let cfg = match cfg.backoff {
        Backoff::Protocol => {
            resolved = RunConfig { backoff: cfg.backoff.of::<P>(), ..cfg.clone() };
            &resolved
        }
        _ => cfg,
    };
    let control = Control::new(cfg, cfg.threads);
    let cores = if cfg.pin { core_affinity::get_core_ids().unwrap_or_default() } else { vec![] };
    let barrier = Barrier::new(cfg.threads + 1);
    let stats = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|i| {
                let (control, barrier, cores) = (&control, &barrier, &cores);
                s.spawn(move || {
                    if !cores.is_empty() {
                        core_affinity::set_for_current(cores[i % cores.len()]);
                    }
                    let _finished = control.finish();
                    worker_loop(db, workload, cfg, control, barrier, i)
                })
            })
            .collect();
        let led = lead(db, cfg, &control, || {
            barrier.wait();
        });
        let mut stats = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Vec<_>>();
        if let Some(Ok(first)) = stats.first_mut() {
            led.report(first);
        }
        stats
    });
    if let Some(e) = control.into_error() {
        return Err(e);
    }
    stats.into_iter().collect()
}

/// What the leader saw of a run ([`lead`]).
#[derive(Debug, Default)]
pub struct Led {
    /// The longest stretch of the measurement window in which no thread committed (as seen
    /// between wake-ups).
    pub stall: Duration,
    /// The throughput per interval of [`RunConfig::timeline`] (empty without it).
    pub timeline: Vec<TimelinePoint>,
}

impl Led {
    /// Puts it into one thread's statistics (the merge keeps it).
    pub fn report(self, stats: &mut WorkerStats) {
        stats.stall_ns = self.stall.as_nanos() as u64;
        stats.timeline = self.timeline;
    }
}

/// Leads a run of `cfg` on `db` on the calling thread until it stops (see [`Led`]).
/// `release` is called once, before the first phase starts and after the prefaulter (unless
/// [`RunConfig::prefault`] is off) has noted where the tables end: let the run's threads start
/// there. The leader switches the phases of `control` (warm-up, measure, stop; or it waits for
/// every thread to finish a run of a fixed number of transactions), pauses the threads before
/// the window to fault in what it will need, faults memory in ahead of growing tables between
/// sleeps, and, with adaptive backoff, runs Cicada's contention regulation (see the module docs).
/// It changes the mix at the steps of [`RunConfig::mix_at`] (telling the protocol, then the
/// threads) and samples the timeline.
pub fn lead<P: Protocol>(
    db: &Database<P>,
    cfg: &RunConfig,
    control: &Control,
    release: impl FnOnce(),
) -> Led {
    let mut prefaulter = cfg.prefault.then(|| Prefaulter::new(db.storage()));
    let start = Prefaulter::cursors(db.storage());
    let set_mix = |i: usize| match db.set_mix(&cfg.mix_at[i].types) {
        // Release: see `Control::mix_steps`.
        Ok(()) => control.mix_steps.store(i + 1, Ordering::Release),
        Err(e) => control.fail(e),
    };
    // Steps at 0 are in force from the warm-up on.
    let first = cfg.mix_at.iter().take_while(|s| s.at.is_zero()).count();
    (0..first).for_each(set_mix);
    release();
    lead_phases(cfg, control, first, |event| {
        let beyond = |t, rows, budget| db.protocol().prefault(t, rows, budget);
        match (event, &mut prefaulter) {
            (Lead::Mix(i), _) => set_mix(i),
            (Lead::Tick, Some(p)) => drop(p.step(db.storage(), beyond)),
            (Lead::Reserve { scale }, Some(p)) => {
                let _ = p.reserve(db.storage(), &start, scale, beyond);
            }
            (_, None) => {}
        }
    })
}

/// What the leader does besides switching phases.
enum Lead {
    /// A periodic prefaulter step between sleeps.
    Tick,
    /// The workers are paused before the window: fault in `scale` times the warm-up's growth.
    Reserve { scale: f64 },
    /// Step `.0` of [`RunConfig::mix_at`] is due.
    Mix(usize),
}

/// The leader's part: phases (a timed run) or waiting for every worker to finish (a run of a
/// fixed number of transactions), contention regulation, the prefaulter between sleeps and
/// before the window, the mix steps from `step` on (`event` does the last three), and the
/// timeline.
fn lead_phases(
    cfg: &RunConfig,
    control: &Control,
    mut step: usize,
    mut event: impl FnMut(Lead),
) -> Led {
    let adaptive = cfg.backoff == Backoff::Adaptive;
    let mut climb = HillClimb::new(worker_seed(cfg.seed, usize::MAX));
    let start = Instant::now();
    let mut measure_at = None;
    // The commits and time at the last regulation step.
    let mut last_commits = 0u64;
    let mut last_t = Instant::now();
    // Stall watch: the commit count last seen, and since when it has not moved.
    let mut seen = (0u64, Instant::now());
    let mut longest_stall = Duration::ZERO;
    // Relaxed: the per-worker counters are statistics; no data is read through them.
    let commits_now = || control.commits.iter().map(|c| c.load(Ordering::Relaxed)).sum::<u64>();
    // The timeline's samples: (seconds into the window, commits so far).
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let measuring = |m: Option<Instant>| match cfg.length {
        RunLength::Timed { .. } => m.is_some(),
        RunLength::Transactions { .. } => true,
    };
    let period = if adaptive {
        REGULATION_PERIOD
    } else if cfg.prefault {
        PREFAULT_PERIOD
    } else {
        Duration::from_millis(20)
    };
    loop {
        if control.failed() {
            break;
        }
        let now = Instant::now();
        let sleep = match cfg.length {
            RunLength::Timed { warmup, duration } => {
                let elapsed = now - start;
                if measure_at.is_none() && elapsed >= warmup {
                    if cfg.prefault && !warmup.is_zero() {
                        let scale = duration.as_secs_f64() / warmup.as_secs_f64() * RESERVE_MARGIN;
                        if !pause_workers(control) {
                            break;
                        }
                        event(Lead::Reserve { scale });
                    }
                    // Release: pairs with the workers' Acquire load of the phase
                    // (`Control::phase`): what the leader did before (prefaulting, resuming)
                    // happens before their measured transactions.
                    control.phase.store(MEASURE, Ordering::Release);
                    measure_at = Some(Instant::now());
                    if cfg.timeline.is_some() {
                        samples.push((0.0, commits_now()));
                    }
                    continue;
                }
                if let Some(m) = measure_at {
                    if cfg.mix_at.get(step).is_some_and(|s| now - m >= s.at) {
                        event(Lead::Mix(step));
                        step += 1;
                        continue;
                    }
                }
                let left = match measure_at {
                    Some(m) if now - m >= duration => break,
                    Some(m) => duration.saturating_sub(now - m),
                    None => warmup.saturating_sub(elapsed),
                };
                // Wake up in time for the next mix step and timeline sample.
                let into = measure_at.map(|m| now - m);
                let due = |at: Duration| into.map_or(Duration::MAX, |i| at.saturating_sub(i));
                let next_step = cfg.mix_at.get(step).map_or(Duration::MAX, |s| due(s.at));
                let next_sample = match (cfg.timeline, samples.last()) {
                    (Some(iv), Some(&(t, _))) => due(Duration::from_secs_f64(t) + iv),
                    _ => Duration::MAX,
                };
                let soon = next_step.min(next_sample);
                // Regulation keeps its period; otherwise wake up in time for the next phase.
                if adaptive {
                    period.min(soon)
                } else {
                    left.min(period).min(soon)
                }
            }
            RunLength::Transactions { .. } => {
                // Acquire: pairs with the Release increment of each `Finished` guard.
                if control.finished.load(Ordering::Acquire) == control.threads {
                    break;
                }
                period
            }
        };
        event(Lead::Tick);
        std::thread::sleep(sleep.saturating_sub(now.elapsed()));
        let commits = commits_now();
        let t = Instant::now();
        if let (Some(iv), Some(m), Some(&(last, _))) = (cfg.timeline, measure_at, samples.last()) {
            let into = (t - m).as_secs_f64();
            if into >= last + iv.as_secs_f64() {
                samples.push((into, commits));
            }
        }
        if commits != seen.0 || !measuring(measure_at) {
            seen = (commits, t);
        } else {
            longest_stall = longest_stall.max(t - seen.1);
        }
        if adaptive {
            let tput = (commits - last_commits) as f64 / (t - last_t).as_secs_f64();
            (last_commits, last_t) = (commits, t);
            // Relaxed: the backoff bound is a heuristic only the leader writes; a worker that reads
            // a stale one backs off by the previous period's.
            let cur = control.max_backoff_ns.load(Ordering::Relaxed);
            control.max_backoff_ns.store(climb.step(tput, cur), Ordering::Relaxed);
        }
    }
    // Release: pairs with the workers' Acquire load of the phase, as MEASURE above.
    control.phase.store(STOP, Ordering::Release);
    if let (Some(m), Some(&(last, _))) = (measure_at, samples.last()) {
        let into = m.elapsed().as_secs_f64();
        // (A last interval shorter than half a one would be noise.)
        if cfg.timeline.is_some_and(|iv| into - last >= iv.as_secs_f64() / 2.0) {
            samples.push((into, commits_now()));
        }
    }
    let timeline = samples
        .windows(2)
        .map(|w| TimelinePoint {
            t: w[1].0,
            throughput: (w[1].1 - w[0].1) as f64 / (w[1].0 - w[0].0),
        })
        .collect();
    Led { stall: longest_stall, timeline }
}

/// Sets the `PAUSE` phase and waits until every thread still running has stopped between
/// transactions; `false` if a thread reported a fatal error meanwhile.
fn pause_workers(control: &Control) -> bool {
    control.phase.store(PAUSE, Ordering::Release);
    // Acquire: pairs with the threads' Release increments (nothing is read through them).
    while control.paused.load(Ordering::Acquire) + control.finished.load(Ordering::Acquire)
        < control.threads
    {
        if control.failed() {
            return false;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    true
}

// Never inlined (it runs once per thread): profilers and `scripts/instructions.sh` find the
// workers' time under this name for every workload.
#[inline(never)]
fn worker_loop<P: Protocol, W: Workload>(
    db: &Database<P>,
    workload: &W,
    cfg: &RunConfig,
    control: &Control,
    barrier: &Barrier,
    i: usize,
) -> Result<WorkerStats, Error> {
    let types = workload.txn_types();
    let mut stats = WorkerStats::new(types.len());
    let setup =
        db.worker().map(|w| (w, workload.generator(i, cfg.threads, worker_seed(cfg.seed, i))));
    barrier.wait();
    let (mut worker, mut gen) = setup?;
    let mut slot = gen.blank();
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(worker_seed(cfg.seed ^ 0xB0FF, i));
    let mut set = AccessSet::default();
    let clock = quanta::Clock::new();
    let declare = cfg.check_access_sets || P::CAPS.needs_access_set;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let oversubscribed = cfg.threads > cores;
    let mut committed = 0u64;
    // A fixed-length run: transactions this worker has left (each ends committed or with a
    // user abort).
    let mut left = match cfg.length {
        RunLength::Timed { .. } => u64::MAX,
        RunLength::Transactions { per_worker } => per_worker,
    };
    // Clock reading at the first transaction begun in the measurement window (see `window`).
    let mut measure_from = None;
    let mut durable = DurableCommits::new(db.log(), cfg.acks.as_ref().map(|a| &*a.file));
    // The steps of `cfg.mix_at` this worker's generator follows.
    let mut mix_steps = 0;
    loop {
        if let Err(e) = durable.poll(&clock, &mut stats) {
            control.fail(e);
            break;
        }
        if !cfg.mix_at.is_empty() {
            let now = control.mix_steps();
            if now != mix_steps {
                gen.restrict_mix(&cfg.mix_at[now - 1].types);
                mix_steps = now;
            }
        }
        let phase = control.phase();
        if phase == RunPhase::Stop || left == 0 {
            break;
        }
        if phase == RunPhase::Pause {
            control.pause();
            continue;
        }
        left -= 1;
        let measuring = phase == RunPhase::Measure;
        if measuring && measure_from.is_none() {
            measure_from = Some(clock.raw());
            if cfg.breakdown {
                crate::util::shared_writes::start();
            }
        }
        let ledger = gen.ledger();
        gen.fill(&mut slot);
        let proc = &slot;
        let ty = proc.txn_type();
        let mut retries = 0u32;
        let t0 = clock.raw();
        let timing = measuring && cfg.breakdown;
        // A phase's start on the clock, read only when phases are timed.
        let start = || if timing { clock.raw() } else { 0 };
        loop {
            let declared = if declare {
                set.clear();
                // In the worker's epoch: reconnaissance walks rows and versions the GC frees.
                let ok = worker.pinned(|| proc.declare(db, &mut set));
                if let (true, Some(a)) = (ok, &cfg.acks) {
                    // A crash test's acknowledgement row, written in the same transaction.
                    set.write(a.table, i as u64);
                }
                set.seal();
                if !ok && P::CAPS.needs_access_set {
                    control.fail(Error::Config(format!(
                        "protocol '{}' needs declared access sets, but '{}' transactions of \
                         workload '{}' do not declare one",
                        P::NAME,
                        types[ty].name,
                        workload.name()
                    )));
                    return Ok(close(stats, &clock, measure_from, &mut durable));
                }
                ok.then_some(&set)
            } else {
                None
            };
            // A crash test's acknowledgement row is written in the same transaction.
            let read_only = proc.read_only() && cfg.acks.is_none();
            let s = start();
            worker.typed(ty);
            match (declared, Intent::of(proc)) {
                (Some(set), _) if P::CAPS.needs_access_set => worker.begin_declared(set),
                (_, Intent::ReadOnly) if !read_only => worker.begin(),
                (_, intent) => intent.begin(&mut worker),
            }
            if timing {
                stats.phase_ticks.add(&clock, Phase::Begin, s);
            }
            let checks = Checks {
                templates: cfg.check_templates || P::CAPS.templates,
                access_set: declared,
                read_only,
                writes_only: false,
            };
            let mut tx = Tx::new(&mut worker, &types[ty], checks);
            if timing {
                tx = tx.timed(&clock, &mut stats.phase_ticks);
            }
            let result = proc.run(&mut tx).and_then(|()| match &cfg.acks {
                Some(a) => {
                    write_ack(&mut worker, a.table, i, committed + 1, ledger + proc.ledger())
                }
                None => Ok(()),
            });
            let s = start();
            let result = result.and_then(|()| worker.commit());
            if timing {
                stats.phase_ticks.add(&clock, Phase::Commit, s);
            }
            match result {
                Ok(()) => {
                    committed += 1;
                    gen.committed(proc);
                    control.commits(i, committed);
                    if measuring {
                        stats.commits[ty] += 1;
                        stats.latency[ty].saturating_record(clock.delta_as_nanos(t0, clock.raw()));
                        durable.committed(worker.log_epoch(), t0, i, committed);
                    }
                    break;
                }
                Err(abort) => {
                    let reason = classify(&mut worker, abort);
                    let s = start();
                    worker.abort();
                    if timing {
                        stats.phase_ticks.add(&clock, Phase::Abort, s);
                    }
                    if measuring {
                        stats.aborts[reason as usize] += 1;
                    }
                    if reason.is_final() {
                        if measuring {
                            stats.user_aborts[ty] += u64::from(reason == AbortReason::User);
                            stats.latency[ty]
                                .saturating_record(clock.delta_as_nanos(t0, clock.raw()));
                        }
                        break;
                    }
                    if reason == AbortReason::NotDurable {
                        control.fail(log_failed(db.log()));
                        return Ok(close(stats, &clock, measure_from, &mut durable));
                    }
                    if reason.is_fatal() {
                        control.fail(Error::Fatal { txn: types[ty].name.to_string(), reason });
                        return Ok(close(stats, &clock, measure_from, &mut durable));
                    }
                    if measuring {
                        stats.aborts_by_type[ty] += 1;
                    }
                    retries += 1;
                    // More workers than cores: the transaction that made this one abort may be
                    // descheduled while it holds what this one needs, and retrying at once
                    // would only burn this core's time slice. After a few quick retries, let
                    // the other workers run first.
                    if oversubscribed && retries >= YIELD_AFTER_RETRIES {
                        std::thread::yield_now();
                    }
                    let max = control.max_backoff_ns();
                    if max > 0 {
                        let wait = rng.random_range(0..max);
                        let b0 = clock.raw();
                        while clock.delta_as_nanos(b0, clock.raw()) < wait {
                            std::hint::spin_loop();
                        }
                        if measuring {
                            stats.backoff_ns += wait;
                        }
                    }
                    if control.stopping() {
                        return Ok(close(stats, &clock, measure_from, &mut durable));
                    }
                }
            }
        }
    }
    Ok(close(stats, &clock, measure_from, &mut durable))
}

/// Writes `count` and `ledger` into row `worker` of the acknowledgement table ([`Acks`]).
pub fn write_ack<W: Worker>(
    w: &mut W,
    t: crate::storage::TableId,
    worker: usize,
    count: u64,
    ledger: i64,
) -> Result<(), Abort> {
    let mut v = [0u8; ACK_ROW];
    v[..8].copy_from_slice(&count.to_le_bytes());
    v[8..].copy_from_slice(&ledger.to_le_bytes());
    if !w.write(t, worker as u64, &v)? && !w.insert(t, worker as u64, &v)? {
        return Err(Abort::new(AbortReason::InsertConflict));
    }
    Ok(())
}

/// An acknowledgement row's commit count and ledger ([`write_ack`]).
pub fn read_ack(row: &[u8]) -> (u64, i64) {
    let word = |i: usize| row[i..i + 8].try_into().expect("acknowledgement rows are 16 bytes");
    (u64::from_le_bytes(word(0)), i64::from_le_bytes(word(8)))
}

/// Closes a worker's statistics when it leaves ([`window`]), after waiting for its measured
/// commits to become durable ([`DurableCommits::close`]).
fn close(
    stats: WorkerStats,
    clock: &quanta::Clock,
    from: Option<u64>,
    durable: &mut DurableCommits<'_>,
) -> WorkerStats {
    let mut stats = window(stats, clock, from);
    durable.close(clock, &mut stats);
    // Zeros unless the window counted (`RunConfig::breakdown` in a counting build).
    stats.shared_writes = crate::util::shared_writes::take();
    stats
}

/// A worker's measured commits on their way to durability, when the database logs: each is
/// counted in [`WorkerStats::durable_commits`] and [`WorkerStats::durable_latency`] (from its
/// first submission) once the log's durable epoch reaches its log epoch, and acknowledged in
/// the acknowledgement file ([`Acks`]), if any. The interactive driver and pipelines (BOHM's
/// execution threads) report durability through it. Without a log it does nothing.
///
/// Each commit names the acknowledgement row it wrote: its worker (a pipeline's logical
/// client) and the commit count the row holds after it. A worker's lines in the file may come
/// out of order (a pipeline's threads acknowledge the clients' commits as their batches end);
/// the recovery check takes each worker's largest count.
pub struct DurableCommits<'a> {
    log: Option<&'a std::sync::Arc<crate::durability::log::LogManager>>,
    acks: Option<&'a std::fs::File>,
    /// The measured commits not yet seen durable: (log epoch, first submission's clock
    /// reading, worker, the count its acknowledgement row holds after the commit).
    undurable: VecDeque<(u64, u64, usize, u64)>,
    /// The log epoch of the last commit that logged.
    last_epoch: u64,
    /// Per worker with commits that became durable in one call of `seen`, the largest count.
    newly: Vec<(usize, u64)>,
}

impl<'a> DurableCommits<'a> {
    /// The bookkeeping of a thread for the database's log (`Database::log`), acknowledging
    /// in `acks`, if any.
    pub fn new(
        log: Option<&'a std::sync::Arc<crate::durability::log::LogManager>>,
        acks: Option<&'a std::fs::File>,
    ) -> Self {
        DurableCommits {
            log,
            acks,
            undurable: VecDeque::with_capacity(if log.is_some() { 1 << 16 } else { 0 }),
            last_epoch: 0,
            newly: Vec::new(),
        }
    }

    /// Counts the commits that became durable since the last call; the run's error if the log
    /// failed (a write error, a full disk: the run stops, and what was acknowledged stays
    /// durable).
    #[inline]
    pub fn poll(&mut self, clock: &quanta::Clock, stats: &mut WorkerStats) -> Result<(), Error> {
        let Some(log) = self.log else { return Ok(()) };
        if log.failed() {
            return Err(log_failed(Some(log)));
        }
        self.seen(log.durable_epoch(), clock, stats);
        Ok(())
    }

    /// A measured commit of log epoch `epoch` (0 or an epoch already seen: it logged nothing),
    /// first submitted at clock reading `t0`, after which `worker`'s acknowledgement row holds
    /// `count` (its commits so far; ignored without acknowledgements).
    #[inline]
    pub fn committed(&mut self, epoch: u64, t0: u64, worker: usize, count: u64) {
        let Some(log) = self.log else { return };
        // A commit that logged nothing (read-only) is durable with the epoch in progress,
        // which covers whatever it read.
        let ticket = if epoch > self.last_epoch { epoch } else { log.epoch_now() };
        self.last_epoch = self.last_epoch.max(epoch);
        self.undurable.push_back((ticket, t0, worker, count));
    }

    /// Waits for every commit counted so far to become durable (within a group interval, or
    /// until the log fails, which the run reports, and they are not counted) and counts them.
    pub fn close(&mut self, clock: &quanta::Clock, stats: &mut WorkerStats) {
        if let (Some(log), Some(&(last, ..))) = (self.log, self.undurable.back()) {
            if log.await_durable(last).is_ok() {
                // Everything up to `last` is durable now.
                self.seen(last, clock, stats);
            }
        }
    }

    /// Counts the commits whose log epoch is at most `durable` (and acknowledges each
    /// worker's largest count among them in the acknowledgement file, if any).
    #[inline]
    fn seen(&mut self, durable: u64, clock: &quanta::Clock, stats: &mut WorkerStats) {
        if self.undurable.front().is_none_or(|&(e, ..)| e > durable) {
            return;
        }
        let now = clock.raw();
        while let Some(&(e, t0, worker, count)) = self.undurable.front() {
            if e > durable {
                break;
            }
            self.undurable.pop_front();
            stats.durable_commits += 1;
            stats.durable_latency.saturating_record(clock.delta_as_nanos(t0, now));
            if self.acks.is_some() {
                // A handful of workers at most (one for the interactive driver).
                match self.newly.iter_mut().find(|(w, _)| *w == worker) {
                    Some((_, c)) => *c = (*c).max(count),
                    None => self.newly.push((worker, count)),
                }
            }
        }
        if let Some(mut file) = self.acks {
            use std::io::Write as _;
            let mut lines = String::new();
            for (worker, count) in self.newly.drain(..) {
                lines.push_str(&format!("{worker} {count}\n"));
            }
            // One append per call: short lines are written whole (O_APPEND), whatever kills
            // us; a line cut anyway is ignored by the check or reads as a smaller count, which
            // claims less than was acknowledged.
            let _ = file.write_all(lines.as_bytes());
        }
    }
}

/// The error a run stops with when its log failed (a commit returned
/// [`AbortReason::NotDurable`], or the log's error was seen between transactions): the log's
/// first error, which names the file and the operating system's error.
pub fn log_failed(log: Option<&std::sync::Arc<crate::durability::log::LogManager>>) -> Error {
    Error::Durability(format!(
        "the log failed, the run stopped: {}",
        log.and_then(|l| l.error()).unwrap_or_else(|| "no log error recorded".into())
    ))
}

/// Closes a worker's statistics: its measured window, from `from` (if it measured at all) to
/// now, when it has seen the window end or is leaving early.
fn window(mut stats: WorkerStats, clock: &quanta::Clock, from: Option<u64>) -> WorkerStats {
    if let Some(from) = from {
        stats.window_ns = clock.delta_as_nanos(from, clock.raw());
        stats.windows = 1;
    }
    for (ns, &ticks) in stats.phase_ns.iter_mut().zip(&stats.phase_ticks.0) {
        *ns = clock.delta_as_nanos(0, ticks);
    }
    stats
}

/// The reason to count for a failed attempt, asked before the worker rolls back: a
/// `MissingRow` seen through reads that no longer validate is a concurrency abort (an
/// optimistic attempt saw an inconsistent mix of states) and is retried.
pub fn classify<W: Worker>(worker: &mut W, abort: Abort) -> AbortReason {
    if abort.reason == AbortReason::MissingRow && !worker.reads_still_valid() {
        AbortReason::ReadValidation
    } else {
        abort.reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::shared_writes::Site;
    use crate::workloads::ycsb::{Ycsb, YcsbConfig};

    /// Runs `per_worker` read-only YCSB transactions (one read each: a transaction that read a
    /// key twice would lock it once) on 2 workers under `P` with the breakdown on; returns the
    /// merged statistics.
    fn read_only<P: Protocol>(per_worker: u64) -> WorkerStats {
        let cfg =
            YcsbConfig { records: 1000, ops: 1, read_ratio: 1.0, theta: 0.0, ..Default::default() };
        let ycsb = Ycsb::new(cfg, 2);
        let db =
            Database::<P>::builder(&ycsb.tables()).txn_types(ycsb.txn_types()).build().unwrap();
        ycsb.load(&db, 2).unwrap();
        let run = RunConfig {
            threads: 2,
            length: RunLength::transactions(per_worker),
            pin: false,
            breakdown: true,
            ..RunConfig::default()
        };
        let mut total = WorkerStats::new(ycsb.txn_types().len());
        for s in P::drive(&db, &ycsb, &run).unwrap() {
            total.merge(&s);
        }
        total
    }

    /// The unit tests count shared writes (`util::shared_writes`): 2PL takes and releases a
    /// read lock per read, Silo reads invisibly, and every protocol enters and leaves its epoch
    /// once per attempt; nothing is counted outside the measured transactions.
    #[test]
    fn a_breakdown_counts_the_shared_writes_of_the_measured_transactions() {
        let tpl = read_only::<crate::protocols::two_pl::TwoPlNoWait>(300);
        let commits = tpl.total_commits();
        assert_eq!(commits, 600);
        let n = |s: &WorkerStats, site: Site| s.shared_writes[site as usize];
        assert_eq!(n(&tpl, Site::ReadMark), 2 * commits, "a lock and an unlock per read");
        assert_eq!(n(&tpl, Site::Epoch), 2 * commits, "no aborts: one attempt per commit");
        let silo = read_only::<crate::protocols::silo::Silo>(300);
        assert_eq!(n(&silo, Site::Epoch), 2 * silo.total_commits());
        let others: u64 =
            Site::ALL.iter().filter(|&&s| s != Site::Epoch).map(|&s| n(&silo, s)).sum();
        assert_eq!(others, 0, "Silo's reads write nothing shared: {:?}", silo.shared_writes);
    }
}
