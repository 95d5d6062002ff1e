//! Named points between the phases of a commit, where tests stop a worker (and where random
//! pauses widen the windows between phases).
//!
//! Every protocol passes the same five [`CommitPhase`]s in each commit that writes (the commit
//! contract in [`crate::engine::Protocol`]'s docs says what holds at each, and each protocol's
//! module doc says where its commit reaches them); a commit that writes nothing passes
//! [`CommitPhase::Validated`] and [`CommitPhase::Acknowledging`]; every attempt passes
//! [`CommitPhase::Begun`] first, holding nothing yet. At each point the worker calls
//! the database's [`CommitHook`], if it has one ([`crate::engine::DbOptions::commit_hook`]), and
//! pauses at random after locking and after validating when the database injects pauses
//! (`DbOptions::commit_pause_us`, [`super::pause`]). With neither, a phase costs one
//! predictable branch on a field of the worker.
//!
//! The windows a commit's correctness hangs on are nanoseconds wide (a worker preempted between
//! its log record and its install, say), so random kills and pauses meet them by luck only. A
//! [`Gate`] is the hook tests use to meet them on purpose: it stops a chosen worker at a chosen
//! phase until the test lets it go, and tells the test when a worker passed a phase.

use super::pause::Pauser;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// A point between two phases of a commit (see [`crate::engine::Protocol`]'s commit contract),
/// or the start of an attempt. A commit that writes passes each commit point once; the order
/// of `Logged` and `Installed` is the protocol's (in-place protocols install before their log
/// record is complete).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum CommitPhase {
    /// A transaction attempt begins (every attempt passes it): the worker holds nothing yet,
    /// not even its storage epoch. A worker stopped here stops between two transactions.
    Begun,
    /// Everything the commit writes is held against other writers: write locks taken, or
    /// pending versions in place. Nothing is decided yet.
    Locked,
    /// The commit will commit: its reads are validated or certified, its serialization point
    /// passed. A commit that writes nothing passes this point too.
    Validated,
    /// Its log record is complete in the log buffer (when the database logs; the point is
    /// passed all the same when it does not). Its log epoch stays in flight: no group commit
    /// closes that epoch, and so no checkpoint starts reading after it, until the commit
    /// reaches `Acknowledging`.
    Logged,
    /// Its writes are visible to other transactions (installed, stamped, unlocked).
    Installed,
    /// It is about to return `Ok`: its log epoch has left flight, and under
    /// `--sync commit` it is durable, as is everything it read.
    Acknowledging,
}

impl CommitPhase {
    /// Every phase, in the contract's order.
    pub const ALL: [CommitPhase; 6] = [
        CommitPhase::Begun,
        CommitPhase::Locked,
        CommitPhase::Validated,
        CommitPhase::Logged,
        CommitPhase::Installed,
        CommitPhase::Acknowledging,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            CommitPhase::Begun => "begun",
            CommitPhase::Locked => "locked",
            CommitPhase::Validated => "validated",
            CommitPhase::Logged => "logged",
            CommitPhase::Installed => "installed",
            CommitPhase::Acknowledging => "acknowledging",
        }
    }
}

/// Where a worker is, as a [`CommitHook`] is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// The phase reached.
    pub phase: CommitPhase,
    /// The worker's slot (its storage epoch slot, a dense worker id).
    pub worker: usize,
    /// The log epoch of the worker's last logged commit (this commit's from `Logged` on, when
    /// it logged; 0 before its first, or without a log).
    pub log_epoch: u64,
}

/// Called by every worker at every [`CommitPhase`] of its commits, on the worker's thread,
/// when the database has a hook ([`crate::engine::DbOptions::commit_hook`]). It may block (a
/// test holding the worker there); whatever the worker holds at that phase stays held.
pub trait CommitHook: Send + Sync {
    /// The worker reached `at.phase`.
    fn at(&self, at: At);
}

/// A database's commit hook, as [`crate::engine::DbOptions`] holds it.
#[derive(Clone)]
pub struct Hook(pub Arc<dyn CommitHook>);

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hook(..)")
    }
}

/// What a worker does at each phase: pause (after locking and validating) and call the hook.
pub struct Injector {
    pauser: Option<Pauser>,
    hook: Option<Arc<dyn CommitHook>>,
    worker: usize,
}

impl Injector {
    /// The injector of the worker in slot `worker`, or `None` when there is nothing to inject.
    pub fn new(worker: usize, pause_us: u64, hook: Option<&Hook>) -> Option<Box<Injector>> {
        if pause_us == 0 && hook.is_none() {
            return None;
        }
        Some(Box::new(Injector {
            pauser: (pause_us > 0).then(|| Pauser::new(0x5EED ^ worker as u64, pause_us)),
            hook: hook.map(|h| h.0.clone()),
            worker,
        }))
    }

    /// The worker reached `phase`.
    #[cold]
    #[inline(never)]
    pub fn at(&mut self, phase: CommitPhase, log_epoch: u64) {
        if let Some(p) = &mut self.pauser {
            if matches!(phase, CommitPhase::Locked | CommitPhase::Validated) {
                p.pause();
            }
        }
        if let Some(h) = &self.hook {
            h.at(At { phase, worker: self.worker, log_epoch });
        }
    }
}

/// Whose arrival a [`Gate`] rule waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// Any worker.
    Any,
    /// The worker running on this thread.
    Thread(ThreadId),
    /// The worker in this slot ([`At::worker`]).
    Worker(usize),
}

impl Who {
    fn matches(self, at: &At) -> bool {
        match self {
            Who::Any => true,
            Who::Thread(t) => std::thread::current().id() == t,
            Who::Worker(w) => at.worker == w,
        }
    }
}

/// A worker that met a [`Gate`] rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// Where it was.
    pub at: At,
    /// Its thread.
    pub thread: ThreadId,
}

/// A rule set on a [`Gate`] ([`Gate::stop`], [`Gate::watch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule(u64);

struct Armed {
    id: u64,
    phase: CommitPhase,
    who: Who,
    /// Matching arrivals to let pass before the one the rule takes.
    skip: u32,
    /// Whether the arrival it takes stops there until released.
    stops: bool,
    /// A rule that must have taken an arrival before this one takes any.
    after: Option<u64>,
    hit: Option<Arrival>,
    released: bool,
}

#[derive(Default)]
struct Rules {
    armed: Vec<Armed>,
    next: u64,
}

/// A [`CommitHook`] that stops chosen workers at chosen phases and reports arrivals: the
/// deterministic injection point of the durability tests.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use txlab::prelude::*;
/// use txlab::protocols::silo::Silo;
/// use txlab::storage::inject::{CommitPhase, Gate, Who};
///
/// let gate = Arc::new(Gate::default());
/// let options = DbOptions { commit_hook: Some(gate.hook()), ..Default::default() };
/// let tables = [TableSpec::new("t", 8, 10)];
/// let db = Database::<Silo>::builder(&tables).options(options).build().unwrap();
/// let stop = gate.stop(CommitPhase::Validated, Who::Any, 0);
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         let mut w = db.worker().unwrap();
///         w.begin();
///         assert!(w.insert(TableId(0), 1, &[7; 8]).unwrap());
///         w.commit().unwrap(); // stops at `Validated` until released
///     });
///     let held = gate.wait(stop, Duration::from_secs(60)).expect("a worker arrives");
///     assert_eq!(held.at.phase, CommitPhase::Validated);
///     gate.release(stop);
/// });
/// ```
#[derive(Default)]
pub struct Gate {
    rules: Mutex<Rules>,
    /// Rules not yet hit: arrivals skip the lock while there are none.
    live: AtomicUsize,
    changed: Condvar,
}

impl Gate {
    /// This gate as a database's hook ([`crate::engine::DbOptions::commit_hook`]).
    pub fn hook(self: &Arc<Self>) -> Hook {
        Hook(self.clone())
    }

    fn lock(&self) -> MutexGuard<'_, Rules> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arm(
        &self,
        phase: CommitPhase,
        who: Who,
        skip: u32,
        stops: bool,
        after: Option<Rule>,
    ) -> Rule {
        let mut r = self.lock();
        let id = r.next;
        r.next += 1;
        let after = after.map(|a| a.0);
        r.armed.push(Armed { id, phase, who, skip, stops, after, hit: None, released: false });
        // Relaxed: the count only spares arrivals the lock; a worker that reads a stale 0
        // arrives before the rule existed, which the caller cannot tell from earlier.
        self.live.fetch_add(1, Ordering::Relaxed);
        Rule(id)
    }

    /// The next worker of `who` to reach `phase` after `skip` others stops there until
    /// [`Gate::release`].
    pub fn stop(&self, phase: CommitPhase, who: Who, skip: u32) -> Rule {
        self.arm(phase, who, skip, true, None)
    }

    /// [`Gate::stop`] of the first worker of `who` to reach `phase` once rule `after` has
    /// taken an arrival (a sequence on one thread: the first commit it locks after it
    /// acknowledged one, say).
    pub fn stop_after(&self, phase: CommitPhase, who: Who, after: Rule) -> Rule {
        self.arm(phase, who, 0, true, Some(after))
    }

    /// Notes the next arrival of a worker of `who` at `phase` after `skip` others, without
    /// stopping it ([`Gate::wait`] returns it).
    pub fn watch(&self, phase: CommitPhase, who: Who, skip: u32) -> Rule {
        self.arm(phase, who, skip, false, None)
    }

    /// Waits until `rule` took an arrival (a stopped worker is then held there); `None` after
    /// `timeout`.
    pub fn wait(&self, rule: Rule, timeout: Duration) -> Option<Arrival> {
        let until = Instant::now() + timeout;
        let mut r = self.lock();
        loop {
            let a = r.armed.iter().find(|a| a.id == rule.0)?;
            if let Some(hit) = a.hit {
                return Some(hit);
            }
            let left = until.checked_duration_since(Instant::now())?;
            r = self.changed.wait_timeout(r, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Lets the worker `rule` stopped go on; a rule that took no arrival yet is disarmed.
    pub fn release(&self, rule: Rule) {
        let mut r = self.lock();
        if let Some(i) = r.armed.iter().position(|a| a.id == rule.0) {
            if r.armed[i].hit.is_none() {
                self.live.fetch_sub(1, Ordering::Relaxed);
                r.armed.remove(i);
            } else {
                r.armed[i].released = true;
            }
        }
        self.changed.notify_all();
    }
}

impl CommitHook for Gate {
    fn at(&self, at: At) {
        // Relaxed: a fast-path hint; the rules themselves are read under the mutex.
        if self.live.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut r = self.lock();
        // Every rule this arrival meets takes it (or counts it as skipped); it stops while
        // any stop rule that took it is not released.
        let arrival = Arrival { at, thread: std::thread::current().id() };
        let mut stopped = Vec::new();
        let hit: Vec<u64> = r.armed.iter().filter(|a| a.hit.is_some()).map(|a| a.id).collect();
        for a in r.armed.iter_mut() {
            if a.hit.is_some() || a.phase != at.phase || !a.who.matches(&at) {
                continue;
            }
            if a.after.is_some_and(|after| !hit.contains(&after)) {
                continue;
            }
            if a.skip > 0 {
                a.skip -= 1;
                continue;
            }
            a.hit = Some(arrival);
            self.live.fetch_sub(1, Ordering::Relaxed);
            if a.stops {
                stopped.push(a.id);
            }
        }
        self.changed.notify_all();
        while r.armed.iter().any(|a| stopped.contains(&a.id) && !a.released) {
            r = self.changed.wait(r).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(phase: CommitPhase, worker: usize) -> At {
        At { phase, worker, log_epoch: 0 }
    }

    #[test]
    fn a_stop_holds_the_first_matching_arrival_until_released() {
        let gate = Arc::new(Gate::default());
        let stop = gate.stop(CommitPhase::Logged, Who::Worker(2), 0);
        let watch = gate.watch(CommitPhase::Logged, Who::Any, 1);
        // Other phases and workers pass.
        gate.at(at(CommitPhase::Locked, 2));
        gate.at(at(CommitPhase::Logged, 1));
        assert_eq!(gate.wait(stop, Duration::ZERO), None);
        std::thread::scope(|s| {
            let g = gate.clone();
            let held = s.spawn(move || g.at(at(CommitPhase::Logged, 2)));
            let hit = gate.wait(stop, Duration::from_secs(60)).expect("the deadlock detector");
            assert_eq!(hit.at, at(CommitPhase::Logged, 2));
            assert!(!held.is_finished(), "held until released");
            // The watch skipped worker 1's arrival and took worker 2's.
            assert_eq!(gate.wait(watch, Duration::ZERO).map(|a| a.at.worker), Some(2));
            gate.release(stop);
            held.join().unwrap();
        });
        // Spent: the next arrival passes.
        gate.at(at(CommitPhase::Logged, 2));
        // A stop after a watch takes nothing before the watch took an arrival.
        let first = gate.watch(CommitPhase::Acknowledging, Who::Worker(4), 0);
        let then = gate.stop_after(CommitPhase::Locked, Who::Worker(4), first);
        gate.at(at(CommitPhase::Locked, 4));
        assert_eq!(gate.wait(then, Duration::ZERO), None, "before the watch's arrival");
        gate.at(at(CommitPhase::Acknowledging, 4));
        std::thread::scope(|s| {
            let g = gate.clone();
            let held = s.spawn(move || g.at(at(CommitPhase::Locked, 4)));
            assert!(gate.wait(then, Duration::from_secs(60)).is_some(), "deadlock detector");
            gate.release(then);
            held.join().unwrap();
        });
        let unused = gate.stop(CommitPhase::Installed, Who::Any, 0);
        gate.release(unused);
        gate.at(at(CommitPhase::Installed, 0));
        assert_eq!(gate.wait(unused, Duration::ZERO), None, "released before any arrival");
    }
}
