//! Per-worker statistics, merged after a run. Plain counters owned by one thread: the hot path
//! increments its own memory and nothing shared.

use crate::error::AbortReason;
use hdrhistogram::Histogram;

/// Highest latency the histograms record (60 s, in ns); larger values saturate.
const MAX_LATENCY_NS: u64 = 60_000_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("valid bounds")
}

/// One worker's counters for the measurement window.
#[derive(Clone, Debug)]
pub struct WorkerStats {
    /// Commits per transaction type.
    pub commits: Vec<u64>,
    /// User aborts (final outcomes, not retried) per transaction type.
    pub user_aborts: Vec<u64>,
    /// Concurrency-control aborts per transaction type.
    pub aborts_by_type: Vec<u64>,
    /// Aborts per reason (indexed by `AbortReason as usize`).
    pub aborts: [u64; AbortReason::COUNT],
    /// Latency of finished transactions (commit or user abort) from the first attempt's start,
    /// including retries and backoff, in nanoseconds, per transaction type.
    pub latency: Vec<Histogram<u64>>,
    /// Nanoseconds spent in backoff.
    pub backoff_ns: u64,
    /// Nanoseconds the worker measured: from the first transaction it began in the
    /// measurement window to the moment it saw the window end (merged: the sum over workers).
    pub window_ns: u64,
    /// Workers whose `window_ns` is counted (1 per worker that measured; merged: the sum).
    pub windows: u64,
    /// The longest stretch of the window in which no worker committed, as the leader saw it
    /// between its wake-ups (set on one worker's statistics; merged: the maximum).
    pub stall_ns: u64,
    /// With logging: commits of the window that became durable (all of them, unless the log
    /// failed: workers wait for the last ones after the window).
    pub durable_commits: u64,
    /// With logging: from a transaction's first attempt to the moment its worker saw it
    /// durable (its group synced), in nanoseconds.
    pub durable_latency: Histogram<u64>,
    /// With `RunConfig::breakdown`: nanoseconds spent in each [`Phase`] (indexed by
    /// `Phase as usize`), over the window's attempts, committed or not.
    pub phase_ns: [u64; Phase::COUNT],
    /// With `RunConfig::breakdown` in a build that counts them: the writes to lines other
    /// workers write or poll, per [`crate::util::shared_writes::Site`] (indexed by `Site as
    /// usize`), over the window's attempts.
    pub shared_writes: [u64; crate::util::shared_writes::Site::COUNT],
    /// The same in raw clock ticks while the worker runs; converted into `phase_ns` when it
    /// leaves (not merged).
    pub phase_ticks: PhaseTicks,
    /// With `RunConfig::timeline`: throughput over the window, as the leader sampled it (set on
    /// one worker's statistics; merged: the one that has it).
    pub timeline: Vec<TimelinePoint>,
}

/// Throughput in one interval of a run's timeline (`RunConfig::timeline`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TimelinePoint {
    /// The interval's end, in seconds since the window began.
    pub t: f64,
    /// Commits per second in the interval.
    pub throughput: f64,
}

/// The parts of a transaction's life the driver times when a run asks for a breakdown
/// (`RunConfig::breakdown`; CCBench Fig. 12's latency breakdown). Whatever is in none of them
/// (generating the transaction, the procedure's own code, declaring access sets, the driver's
/// bookkeeping) is the report's `other`; backoff is counted apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `Worker::begin`: timestamps, and the protocol's maintenance there (Cicada's and the
    /// multi-version protocols' garbage collection).
    Begin,
    /// `prefetch` and `prefetch_many`: the index lookups and cache-line prefetches a procedure
    /// issues ahead of its operations (YCSB's and TPC-C's batches).
    Prefetch,
    /// Reads: `read`, `read_cols`, `read_for_update`, `scan`.
    Read,
    /// Writes: `write`, `update`, `update_cols`, `insert`, `delete`.
    Write,
    /// `Worker::commit`: validation and the write phase (and logging), successful or not.
    Commit,
    /// `Worker::abort`: rolling an attempt back.
    Abort,
}

impl Phase {
    /// How many phases there are.
    pub const COUNT: usize = 6;
}

/// Clock ticks per [`Phase`], accumulated by the driver and the [`crate::engine::Tx`] it hands
/// a procedure when a run times phases.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseTicks(pub [u64; Phase::COUNT]);

impl PhaseTicks {
    /// Adds the ticks from `start` to now to `phase`.
    #[inline(always)]
    pub fn add(&mut self, clock: &quanta::Clock, phase: Phase, start: u64) {
        self.0[phase as usize] += clock.raw().saturating_sub(start);
    }
}

impl WorkerStats {
    /// Empty counters for `types` transaction types.
    pub fn new(types: usize) -> Self {
        WorkerStats {
            commits: vec![0; types],
            user_aborts: vec![0; types],
            aborts_by_type: vec![0; types],
            aborts: [0; AbortReason::COUNT],
            latency: (0..types).map(|_| new_histogram()).collect(),
            backoff_ns: 0,
            window_ns: 0,
            windows: 0,
            stall_ns: 0,
            durable_commits: 0,
            durable_latency: new_histogram(),
            phase_ns: [0; Phase::COUNT],
            shared_writes: [0; crate::util::shared_writes::Site::COUNT],
            phase_ticks: PhaseTicks::default(),
            timeline: Vec::new(),
        }
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &WorkerStats) {
        for (a, b) in self.commits.iter_mut().zip(&other.commits) {
            *a += b;
        }
        for (a, b) in self.user_aborts.iter_mut().zip(&other.user_aborts) {
            *a += b;
        }
        for (a, b) in self.aborts_by_type.iter_mut().zip(&other.aborts_by_type) {
            *a += b;
        }
        for (a, b) in self.aborts.iter_mut().zip(&other.aborts) {
            *a += b;
        }
        for (a, b) in self.latency.iter_mut().zip(&other.latency) {
            a.add(b).expect("same histogram bounds");
        }
        self.backoff_ns += other.backoff_ns;
        self.window_ns += other.window_ns;
        self.windows += other.windows;
        self.stall_ns = self.stall_ns.max(other.stall_ns);
        self.durable_commits += other.durable_commits;
        self.durable_latency.add(&other.durable_latency).expect("same histogram bounds");
        for (a, b) in self.phase_ns.iter_mut().zip(&other.phase_ns) {
            *a += b;
        }
        for (a, b) in self.shared_writes.iter_mut().zip(&other.shared_writes) {
            *a += b;
        }
        if self.timeline.is_empty() {
            self.timeline.clone_from(&other.timeline);
        }
    }

    /// The measurement window in seconds as the workers timed it (their mean), or `planned`
    /// if none measured. Throughput divides by this rather than by the planned duration, so a
    /// leader that ends the window late (preempted, or busy pre-faulting memory) does not
    /// inflate it.
    pub fn window_seconds(&self, planned: f64) -> f64 {
        if self.windows == 0 || self.window_ns == 0 {
            planned
        } else {
            self.window_ns as f64 / self.windows as f64 / 1e9
        }
    }

    /// The latency of all transaction types together.
    pub fn total_latency(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for t in &self.latency {
            h.add(t).expect("same histogram bounds");
        }
        h
    }

    /// Total commits.
    pub fn total_commits(&self) -> u64 {
        self.commits.iter().sum()
    }

    /// Total user aborts.
    pub fn total_user_aborts(&self) -> u64 {
        self.user_aborts.iter().sum()
    }

    /// Total concurrency-control aborts (everything but final outcomes: user aborts, missing
    /// rows).
    pub fn total_cc_aborts(&self) -> u64 {
        self.aborts
            .iter()
            .zip(AbortReason::ALL)
            .filter(|(_, r)| !r.is_final())
            .map(|(n, _)| n)
            .sum()
    }

    /// CC aborts / (CC aborts + finished transactions): the share of attempts that were wasted.
    pub fn abort_ratio(&self) -> f64 {
        let aborts = self.total_cc_aborts();
        let done = self.total_commits()
            + self.total_user_aborts()
            + self.aborts[AbortReason::MissingRow as usize];
        if aborts + done == 0 {
            0.0
        } else {
            aborts as f64 / (aborts + done) as f64
        }
    }
}
