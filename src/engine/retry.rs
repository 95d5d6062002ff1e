//! Running a transaction until it commits: the retry loop every embedding program needs.
//!
//! [`Database::retry`] gives a [`Retry`] with the protocol's own backoff (what `txlab run`
//! uses: Cicada's adaptive regulation, shared by every `Retry` of the database; none for the
//! others); [`Retry::new`] one with a generic randomized exponential backoff. Either way,
//! [`Retry::run`] begins an attempt, runs a closure against the worker, commits, and on a
//! retryable abort (a conflict, or the program's own [`Abort::retry`]) rolls back, backs off
//! and tries again; it stops at a commit, at an abort that retrying cannot cure (a user abort,
//! a missing row, a procedure bug or a full table: see
//! [`AbortReason::is_retryable`](crate::error::AbortReason::is_retryable)), or after
//! [`Retry::max_attempts`] attempts. [`Retry::run_declared`] declares the attempt's access set
//! first (what `2pl-ordered` locks from); [`Retry::run_procedure`] runs a [`Procedure`].
//! Attempts are counted by the worker itself (see [`Worker::begin`]), so a retried
//! transaction keeps its age under wait-die.
//!
//! ```
//! use txlab::prelude::*;
//! use txlab::protocols::two_pl::TwoPlWaitDie;
//!
//! # fn main() -> Result<(), Error> {
//! let db = Database::<TwoPlWaitDie>::new(&[TableSpec::new("kv", 8, 100)])?;
//! let kv = db.table_id("kv").expect("declared above");
//! let mut w = db.worker()?;
//! let mut retry = db.retry();
//! retry.run(&mut w, |w| w.insert(kv, 1, &10u64.to_le_bytes()).map(drop))?;
//! // Withdraw 15 if the balance allows; code 1 says why not.
//! let outcome = retry.run(&mut w, |w| {
//!     let balance = w.read(kv, 1, |r| u64::from_le_bytes(r.try_into().unwrap()))?;
//!     match balance {
//!         Some(b) if b >= 15 => w.write(kv, 1, &(b - 15).to_le_bytes()).map(drop),
//!         _ => Err(Abort::with_code(1)),
//!     }
//! });
//! assert_eq!(outcome.unwrap_err().user_code(), Some(1));
//! # Ok(())
//! # }
//! ```
//!
//! A transaction whose protocol takes its locks from a declared access set (`2pl-ordered`)
//! declares it in every attempt; the other protocols ignore the declaration:
//!
//! ```
//! use txlab::engine::AccessSet;
//! use txlab::prelude::*;
//! use txlab::protocols::two_pl_ordered::TwoPlOrdered;
//!
//! # fn main() -> Result<(), Error> {
//! let db = Database::<TwoPlOrdered>::new(&[TableSpec::new("kv", 8, 100)])?;
//! let kv = db.table_id("kv").expect("declared above");
//! db.loader().insert(kv, 1, &10u64.to_le_bytes())?;
//! let mut w = db.worker()?;
//! let mut retry = db.retry();
//! let declare = |set: &mut AccessSet| set.write(kv, 1);
//! let old = retry.run_declared(&mut w, declare, |w| {
//!     let b = w.read(kv, 1, |r| u64::from_le_bytes(r.try_into().unwrap()))?.unwrap();
//!     w.write(kv, 1, &(b + 1).to_le_bytes())?;
//!     Ok(b)
//! })?;
//! assert_eq!(old, 10);
//! // An access the declaration does not cover is refused, and so is an undeclared attempt.
//! let e = retry.max_attempts(1).run_declared(&mut w, declare, |w| w.read(kv, 2, |_| ()));
//! assert_eq!(e.unwrap_err().reason, AbortReason::AccessSetMismatch);
//! let e = db.retry().run(&mut w, |w| w.read(kv, 1, |_| ()));
//! assert_eq!(e.unwrap_err().reason, AbortReason::Undeclared);
//! # Ok(())
//! # }
//! ```

use super::database::Database;
use super::driver::{classify, Backoff, HillClimb, REGULATION_PERIOD};
use super::procedure::{AccessSet, Checks, Intent, Procedure, Tx, TxnType};
use super::protocol::{Protocol, Worker};
use crate::error::Abort;
use crossbeam_utils::CachePadded;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `Retry` with the protocol's own backoff retries at once this many times, then yields its
/// core before each further attempt (the transaction it conflicts with may be descheduled).
const YIELD_AFTER_ATTEMPTS: u32 = 2;

/// Commits a `Retry` counts locally before it adds them to its regulator's total.
const COMMITS_PER_REPORT: u32 = 16;

/// How a [`Retry`] waits after a retryable abort.
#[derive(Clone, Debug)]
enum Policy {
    /// A uniform time below `min(2^attempts µs, max)` ([`Retry::new`]).
    Exponential(Duration),
    /// A uniform time below `max` (`Backoff::Fixed`).
    Uniform(Duration),
    /// Retry at once, yielding after [`YIELD_AFTER_ATTEMPTS`] (`Backoff::None`).
    Immediate,
    /// A uniform time below the regulated maximum (`Backoff::Adaptive`).
    Adaptive(Arc<Regulator>),
}

/// Cicada's contention regulation for programs that run their own threads: the maximum
/// backoff every [`Retry`] of a database shares, stepped every [`REGULATION_PERIOD`] by
/// [`HillClimb`] from the commits the `Retry`s report. Where the driver has a leader thread
/// that wakes every period, here whichever `Retry` first finds a step due takes it (the
/// others pass by the lock without waiting).
#[derive(Debug)]
pub(crate) struct Regulator {
    origin: Instant,
    /// Nanoseconds after `origin` at which the next step is due.
    due_ns: CachePadded<AtomicU64>,
    max_backoff_ns: CachePadded<AtomicU64>,
    /// Commits reported so far.
    commits: CachePadded<AtomicU64>,
    /// The commits and time of the last step, and the climb.
    climb: Mutex<(u64, Instant, HillClimb)>,
}

impl Regulator {
    pub(crate) fn new() -> Self {
        let origin = Instant::now();
        Regulator {
            origin,
            due_ns: CachePadded::new(AtomicU64::new(REGULATION_PERIOD.as_nanos() as u64)),
            max_backoff_ns: CachePadded::new(AtomicU64::new(0)),
            commits: CachePadded::new(AtomicU64::new(0)),
            climb: Mutex::new((0, origin, HillClimb::new(0x00C1_CADA))),
        }
    }

    /// The maximum backoff now, in nanoseconds.
    fn max_backoff_ns(&self) -> u64 {
        // Relaxed: a tuning value; a stale one only makes one wait a little off.
        self.max_backoff_ns.load(Ordering::Relaxed)
    }

    /// Adds `n` commits and takes the step if one is due.
    fn report(&self, n: u64) {
        // Relaxed: a statistic, read by the step under the lock.
        self.commits.fetch_add(n, Ordering::Relaxed);
        self.step_if_due();
    }

    /// Takes a regulation step if one is due and no other thread is taking it.
    fn step_if_due(&self) {
        let now = self.origin.elapsed().as_nanos() as u64;
        // Relaxed: `due_ns` is only a hint outside the lock; it is read again under it.
        if now < self.due_ns.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut g) = self.climb.try_lock() else { return };
        // Under the lock, which orders every step's stores before the next step's loads.
        if now < self.due_ns.load(Ordering::Relaxed) {
            return;
        }
        let (last_commits, last_t, climb) = &mut *g;
        let t = Instant::now();
        // Relaxed: the regulator's inputs and outputs are heuristics (commit counts, a backoff
        // bound, a schedule); the mutex held here orders one step after another, and a worker that
        // reads a stale bound only backs off by the previous period's.
        let commits = self.commits.load(Ordering::Relaxed);
        let secs = (t - *last_t).as_secs_f64().max(1e-9);
        let next = climb.step((commits - *last_commits) as f64 / secs, self.max_backoff_ns());
        self.max_backoff_ns.store(next, Ordering::Relaxed);
        (*last_commits, *last_t) = (commits, t);
        self.due_ns.store(now + REGULATION_PERIOD.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// A retry policy with its own random source (one per thread, like a worker).
#[derive(Debug)]
pub struct Retry {
    max_attempts: u32,
    policy: Policy,
    rng: rand::rngs::Xoshiro256PlusPlus,
    /// Commits not yet reported to an adaptive policy's regulator.
    unreported: u32,
    /// The access set [`Retry::run_declared`] declares into (reused: no allocation once warm).
    set: AccessSet,
}

impl Default for Retry {
    fn default() -> Self {
        Retry::new()
    }
}

impl Drop for Retry {
    fn drop(&mut self) {
        if let Policy::Adaptive(r) = &self.policy {
            r.report(u64::from(self.unreported));
        }
    }
}

impl<P: Protocol> Database<P> {
    /// A [`Retry`] with the protocol's own backoff ([`Protocol::DEFAULT_BACKOFF`], what
    /// `txlab run` uses): Cicada's adaptive regulation (§3.9), shared by every `Retry` of this
    /// database; for the other protocols none (retry at once, yielding the core after a few
    /// attempts). Each call seeds its random source differently.
    pub fn retry(&self) -> Retry {
        self.retry_with(Backoff::Protocol)
    }

    /// A [`Retry`] with `backoff` ([`Backoff::Protocol`]: the protocol's, as
    /// [`Database::retry`]).
    pub fn retry_with(&self, backoff: Backoff) -> Retry {
        let policy = match backoff.of::<P>() {
            Backoff::Fixed { max_us } => Policy::Uniform(Duration::from_secs_f64(max_us / 1e6)),
            Backoff::Adaptive => Policy::Adaptive(self.regulator().clone()),
            Backoff::None | Backoff::Protocol => Policy::Immediate,
        };
        let mut retry = Retry::new().seed(self.next_retry_seed());
        retry.policy = policy;
        retry
    }
}

impl Retry {
    /// Unlimited attempts, a randomized exponential backoff of at most 100 µs (DBx1000's
    /// bound), a fixed seed. [`Database::retry`] gives the protocol's own backoff instead.
    pub fn new() -> Self {
        Retry {
            max_attempts: u32::MAX,
            policy: Policy::Exponential(Duration::from_micros(100)),
            rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(0x7E7),
            unreported: 0,
            set: AccessSet::default(),
        }
    }

    /// Gives up after `n` attempts (at least 1), returning the last abort.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Backs off exponentially, waiting at most `d` between attempts (zero: retry at once).
    pub fn max_backoff(mut self, d: Duration) -> Self {
        self.policy = Policy::Exponential(d);
        self
    }

    /// Seeds the backoff's random source (threads that retry with one seed back off alike).
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed);
        self
    }

    /// Runs `body` in transaction attempts on `w` until one commits; returns what that attempt's
    /// `body` returned. `Err` is the abort that ended it: one retrying cannot cure, or the last
    /// after [`Retry::max_attempts`]. Every failed attempt is rolled back.
    pub fn run<W: Worker, T>(
        &mut self,
        w: &mut W,
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        self.run_as(w, Intent::ReadWrite, None, body)
    }

    /// [`Retry::run`] for a transaction that reads much and writes little: every attempt begins
    /// with [`Worker::begin_read_mostly`].
    pub fn run_read_mostly<W: Worker, T>(
        &mut self,
        w: &mut W,
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        self.run_as(w, Intent::ReadMostly, None, body)
    }

    /// [`Retry::run`] for a transaction that writes nothing: every attempt begins with
    /// [`Worker::begin_read_only`].
    pub fn run_read_only<W: Worker, T>(
        &mut self,
        w: &mut W,
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        self.run_as(w, Intent::ReadOnly, None, body)
    }

    /// [`Retry::run`] for a transaction that declares its access set: every attempt clears
    /// the set, lets `declare` fill it (reading the database first if a key depends on data,
    /// as a [`Procedure::declare`] does) and begins with [`Worker::begin_declared`]. A protocol
    /// that locks from the set (`2pl-ordered`) refuses an access outside it with
    /// [`crate::error::AbortReason::AccessSetMismatch`], which is retried, declaring again; the others
    /// ignore the set. Give up on a mismatch that declaring again cannot cure with
    /// [`Retry::max_attempts`].
    pub fn run_declared<W: Worker, T>(
        &mut self,
        w: &mut W,
        mut declare: impl FnMut(&mut AccessSet),
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        let mut set = std::mem::take(&mut self.set);
        let out = self.attempts(
            w,
            |w| {
                set.clear();
                w.pinned(|| declare(&mut set));
                set.seal();
                w.begin_declared(&set);
            },
            body,
        );
        self.set = set;
        out
    }

    fn run_as<W: Worker, T>(
        &mut self,
        w: &mut W,
        intent: Intent,
        ty: Option<usize>,
        body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        let begin = |w: &mut W| match ty {
            Some(ty) => intent.begin_typed(w, ty),
            None => intent.begin(w),
        };
        self.attempts(w, begin, body)
    }

    /// The retry loop: `begin`, `body`, commit; on a retryable abort, roll back, back off and
    /// go again.
    fn attempts<W: Worker, T>(
        &mut self,
        w: &mut W,
        mut begin: impl FnMut(&mut W),
        mut body: impl FnMut(&mut W) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        let mut attempts = 0u32;
        loop {
            begin(w);
            let abort = match body(w) {
                Ok(out) => match w.commit() {
                    Ok(()) => {
                        self.committed();
                        return Ok(out);
                    }
                    Err(a) => a,
                },
                Err(a) => a,
            };
            // A missing row seen through stale reads is a concurrency abort (see `classify`).
            let reason = classify(w, abort);
            w.abort();
            attempts += 1;
            if !reason.is_retryable() {
                return Err(abort);
            }
            if attempts >= self.max_attempts {
                return Err(abort);
            }
            self.back_off(attempts);
        }
    }

    /// Runs `procedure` (of transaction type `ty`) until it commits, as [`Retry::run`] does,
    /// with `checks` applied to every attempt (a procedure that declares itself read-only runs
    /// as one: [`Retry::run_read_only`]; one that declares itself read-mostly begins so:
    /// [`Retry::run_read_mostly`]). For a protocol that locks from declared access sets
    /// (`2pl-ordered`), [`Retry::run_procedure_on`] declares the procedure's set first.
    pub fn run_procedure<W: Worker, P: Procedure>(
        &mut self,
        w: &mut W,
        ty: &TxnType,
        procedure: &P,
        checks: Checks<'_>,
    ) -> Result<(), Abort> {
        let read_only = procedure.read_only();
        let checks = Checks { read_only, ..checks };
        let body = |w: &mut W| procedure.run(&mut Tx::new(w, ty, checks));
        self.run_as(w, Intent::of(procedure), Some(procedure.txn_type()), body)
    }

    /// [`Retry::run_procedure`] on a worker of `db`, declaring the procedure's access set
    /// ([`Procedure::declare`], with `db` for its reconnaissance) before every attempt when the
    /// protocol locks from declared sets (`2pl-ordered`), and checking every operation against
    /// it, as the driver does; for the other protocols, exactly [`Retry::run_procedure`]. The
    /// one call that runs a procedure under any interactive protocol. A procedure that
    /// declares nothing under a protocol that needs a declaration fails with
    /// [`crate::error::AbortReason::Undeclared`].
    pub fn run_procedure_on<P: Protocol, Q: Procedure>(
        &mut self,
        db: &Database<P>,
        w: &mut P::Worker<'_>,
        ty: &TxnType,
        procedure: &Q,
        checks: Checks<'_>,
    ) -> Result<(), Abort> {
        if !P::CAPS.needs_access_set {
            return self.run_procedure(w, ty, procedure, checks);
        }
        let read_only = procedure.read_only();
        let set = std::cell::RefCell::new(std::mem::take(&mut self.set));
        let intent = Intent::of(procedure);
        let out = self.attempts(
            w,
            |w| {
                let mut set = set.borrow_mut();
                set.clear();
                let declared = w.pinned(|| procedure.declare(db, &mut set));
                set.seal();
                w.typed(procedure.txn_type());
                if declared {
                    w.begin_declared(&set);
                } else {
                    set.clear();
                    intent.begin(w);
                }
            },
            |w| {
                let set = set.borrow();
                let access_set = (!set.is_empty()).then_some(&*set);
                let checks = Checks { read_only, access_set, ..checks };
                procedure.run(&mut Tx::new(w, ty, checks))
            },
        );
        self.set = set.into_inner();
        out
    }

    /// Counts a commit for an adaptive policy's regulator (reported in groups, so that
    /// threads do not meet on its counter at every commit).
    #[inline]
    fn committed(&mut self) {
        if let Policy::Adaptive(r) = &self.policy {
            self.unreported += 1;
            if self.unreported >= COMMITS_PER_REPORT {
                r.report(u64::from(self.unreported));
                self.unreported = 0;
            }
        }
    }

    /// Waits after the `attempts`-th failed attempt, as the policy says: spinning for short
    /// waits (a sleep's wake-up costs more than they last), sleeping for long ones.
    fn back_off(&mut self, attempts: u32) {
        let cap = match &self.policy {
            Policy::Exponential(max) => Duration::from_micros(1u64 << attempts.min(30)).min(*max),
            Policy::Uniform(max) => *max,
            Policy::Immediate => {
                if attempts >= YIELD_AFTER_ATTEMPTS {
                    std::thread::yield_now();
                }
                return;
            }
            Policy::Adaptive(r) => {
                r.step_if_due();
                Duration::from_nanos(r.max_backoff_ns())
            }
        };
        if cap.is_zero() {
            return;
        }
        let wait = Duration::from_nanos(self.rng.random_range(0..cap.as_nanos() as u64));
        if wait > Duration::from_micros(200) {
            std::thread::sleep(wait);
            return;
        }
        let until = Instant::now() + wait;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::driver::REGULATION_STEP_NS;
    use crate::protocols::{cicada::Cicada, silo::Silo};
    use crate::storage::TableSpec;

    /// A database's `Retry`s take the protocol's backoff: Cicada's regulated one, shared by
    /// all of them; none for Silo; what a caller names otherwise.
    #[test]
    fn retries_take_the_protocols_backoff() {
        let tables = [TableSpec::new("t", 8, 10)];
        let db = Database::<Cicada>::new(&tables).unwrap();
        let (a, b) = (db.retry(), db.retry());
        match (&a.policy, &b.policy) {
            (Policy::Adaptive(x), Policy::Adaptive(y)) => assert!(Arc::ptr_eq(x, y), "shared"),
            other => panic!("cicada regulates its backoff: {other:?}"),
        }
        let fixed = db.retry_with(Backoff::Fixed { max_us: 3.0 });
        assert!(matches!(fixed.policy, Policy::Uniform(d) if d == Duration::from_micros(3)));
        let db = Database::<Silo>::new(&tables).unwrap();
        assert!(matches!(db.retry().policy, Policy::Immediate));
        assert!(matches!(Retry::new().policy, Policy::Exponential(_)));
    }

    /// The regulator steps only when a step is due, by Cicada's step, in the direction the
    /// last two periods' throughput points to; the commits `Retry`s report reach it.
    #[test]
    fn the_regulator_climbs_when_a_step_is_due() {
        let r = Regulator::new();
        r.due_ns.store(u64::MAX, Ordering::Relaxed);
        r.report(5);
        assert_eq!(r.max_backoff_ns(), 0, "no step before it is due");
        assert_eq!(r.commits.load(Ordering::Relaxed), 5);
        for _ in 0..8 {
            r.due_ns.store(0, Ordering::Relaxed);
            let before = r.max_backoff_ns() as i64;
            r.step_if_due();
            let moved = r.max_backoff_ns() as i64 - before;
            assert!(moved == REGULATION_STEP_NS || (-REGULATION_STEP_NS..=0).contains(&moved));
            assert!(r.due_ns.load(Ordering::Relaxed) > 0, "the next step is a period away");
        }
        // Throughput that rises while the backoff rises keeps it rising.
        let mut climb = HillClimb::new(1);
        assert_eq!(climb.step(100.0, 1000), 1000 + REGULATION_STEP_NS as u64, "first: no history");
        let up = climb.step(200.0, 1500);
        assert_eq!(up, 2000, "more throughput with more backoff: up again");
        assert_eq!(climb.step(100.0, 2000), 1500, "less throughput with more backoff: down");
        let mut retry = Retry::new();
        retry.policy = Policy::Adaptive(Arc::new(Regulator::new()));
        for _ in 0..COMMITS_PER_REPORT {
            retry.committed();
        }
        let Policy::Adaptive(reg) = &retry.policy else { unreachable!() };
        assert_eq!(reg.commits.load(Ordering::Relaxed), u64::from(COMMITS_PER_REPORT));
    }
}
