//! Loosely synchronized per-thread clocks: Cicada's multi-clock timestamp allocation (Cicada
//! §3.1), the timestamp source of `cicada` (not wired to a protocol yet).
//!
//! **Clocks.** Each thread owns a 64-bit software clock in nanoseconds ([`ThreadClock`]). Before
//! it allocates a timestamp it adds the time it measured locally since its last allocation
//! ([`TimeSource`]: the TSC through `quanta`), at most `max_increment_ns` (the paper's bound of
//! one hour: a TSC that jumps cannot throw a clock far ahead) and nothing when time went
//! backwards. It publishes the clock in its slot of [`Clocks`] for the others to peek at.
//!
//! **Timestamps.** The *adjusted clock* is the local clock plus the thread's boost, raised to one
//! above the previous adjusted clock; the timestamp is the adjusted clock shifted left by
//! [`ID_BITS`] with the thread id below it. Each thread's timestamps therefore rise strictly and
//! no two threads share one, which is all Cicada's protocol needs (§3.1); they need not follow
//! physical time.
//!
//! **Skew correction.** *One-sided synchronization*: every `sync_interval_ns` of local time (the
//! paper's 100 µs) a thread reads the clock of the next thread in round-robin order, adds
//! `sync_latency_ns` for the cache line's trip, and adopts it if it is ahead. A slow clock
//! catches up with the fast ones; a fast one is never pulled back. *Clock boost*: after an abort
//! a thread's adjusted clock runs `boost_ns` (the paper's 1 µs) ahead of its clock until its
//! next commit. Both are heuristics: no guarantee rests on them, so the clocks are read and
//! written with relaxed ordering.
//!
//! **`min_wts` and `min_rts`.** Each thread publishes `thread.wts`, its latest timestamp, and
//! `thread.rts`, the timestamp its current transaction reads at: `min_wts - 1` for a read-only
//! transaction (the paper's `thread.rts`), its `wts` for a read-write one. The leader's
//! [`Clocks::refresh`] sets `min_wts` to the minimum `wts` over the threads that have joined and
//! `min_rts` to the minimum `rts`, at most the new `min_wts - 1`, never lowering either. A
//! thread's timestamps only rise, so a published `wts` is a lower bound of every timestamp the
//! thread will still use, whichever older value the leader happens to read: a read-only
//! transaction at `min_wts - 1` can miss no read-write transaction. Versions that no timestamp at
//! or above `min_rts` can reach are garbage. (The paper has every thread publish `min_wts - 1` as
//! its `rts` at every begin; a read-write transaction then holds `min_rts` below the `min_wts`
//! of its begin for as long as it runs, although it reads at its own, larger, timestamp.)
//!
//! A read-only begin must not fall below a `min_rts` that a refresh computes from the slot's
//! previous value (a `wts`, possibly above the new `rts`): the refresh raises a flag before it
//! reads the slots and lowers it after publishing; the thread stores its `rts`, then checks
//! (all SeqCst) that no refresh is under way and that `min_rts` is not above its `rts`, and
//! otherwise tries again. A refresh whose read missed the store raised its flag first, so the
//! thread sees the flag, or the finished refresh's `min_rts`.
//!
//! **Idle threads.** A thread between transactions holds no version, but its slot still holds
//! its last `wts`, which would keep `min_wts` (and the GC) where it was for as long as the thread
//! stays idle. A refresh may therefore skip the slots its caller says are idle
//! ([`Clocks::try_refresh`]'s `idle`: Cicada passes its quiescence marks), and `min_wts` may then
//! pass an idle thread's clock. A thread that begins again must not take a timestamp below it:
//! it marks itself busy (its caller's SeqCst store), and [`ThreadClock::next_wts_checked`]
//! publishes the timestamp, then checks (SeqCst) that no refresh is under way and that `min_wts`
//! is not above it, and otherwise raises its clock past `min_wts` and tries again. A refresh that
//! saw the thread idle raised its flag before it looked, so the thread sees the flag or the
//! finished refresh's `min_wts` (the argument of read-only begins above).
//!
//! A thread joins
//! ([`Clocks::join`]) with its clock above every published clock and above `min_wts`, and leaves
//! when its `ThreadClock` is dropped (its slot then holds nothing back); joining, leaving and
//! refreshing exclude each other through one mutex, taken only there, never on a transaction's
//! path, so that a refresh cannot compute a minimum above the first timestamp of a thread that
//! joins during it.
//!
//! **Central counter.** With [`ClockParams::central`] a timestamp's clock part comes from one
//! shared counter by fetch-and-add instead (Cicada §4.6's baseline: "traditional timestamp
//! allocation with atomic fetch-and-add on a shared counter"): every begin writes the same cache
//! line. Synchronization, boost and the TSC are unused; the thread id stays below the count,
//! `min_wts` and `min_rts` work as above, and a transaction that begins after another's
//! `next_wts` returned gets a larger timestamp (the counter's modification order), so
//! [`ThreadClock::catch_up`] has nothing to do. The clock part then counts timestamps, not
//! nanoseconds.
//!
//! **Wraparound.** The paper reinserts versions whose timestamps are about to expire. txlab
//! bounds the clock instead: [`CLOCK_LIMIT`] is 2^54 - 1 ns, about 208 days of clock time from
//! the database's first timestamp, and an allocation beyond it fails with [`ClockExhausted`]
//! rather than wrap. The clocks advance at the speed of the fastest TSC plus the catch-up of
//! synchronization; a run of the CLI lasts at most a day.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bits of a timestamp that hold the thread id.
pub const ID_BITS: u32 = 10;
/// The most threads one set of clocks serves (txlab's largest worker count).
pub const MAX_CLOCKS: usize = 1 << ID_BITS;
/// The largest adjusted clock a timestamp can hold.
pub const CLOCK_LIMIT: u64 = u64::MAX >> ID_BITS;
/// A slot's `wts` and `rts` while no thread owns it.
const VACANT: u64 = u64::MAX;

/// The clock part of a timestamp.
#[inline(always)]
pub fn clock_of(ts: u64) -> u64 {
    ts >> ID_BITS
}

/// The thread id of a timestamp.
#[inline(always)]
pub fn thread_of(ts: u64) -> usize {
    (ts & ((1 << ID_BITS) - 1)) as usize
}

/// The clocks' tuning (Cicada §3.1's values by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockParams {
    /// The largest step one measurement may add to a clock (the paper: one hour).
    pub max_increment_ns: u64,
    /// Local time between two one-sided synchronizations (the paper: 100 µs).
    pub sync_interval_ns: u64,
    /// How far a remote clock has moved on while its cache line travelled here (the paper
    /// compensates without giving a figure: a cross-core transfer takes about 100 ns).
    pub sync_latency_ns: u64,
    /// The boost after an abort (the paper: 1 µs).
    pub boost_ns: u64,
    /// Timestamps from one shared counter instead of the clocks (see the module docs).
    pub central: bool,
}

impl Default for ClockParams {
    fn default() -> Self {
        ClockParams {
            max_increment_ns: 3_600_000_000_000,
            sync_interval_ns: 100_000,
            sync_latency_ns: 100,
            boost_ns: 1_000,
            central: false,
        }
    }
}

/// Where a clock measures elapsed time.
pub trait TimeSource {
    /// Nanoseconds since the previous call (since creation for the first), 0 if time seemed to
    /// go backwards.
    fn elapsed_ns(&mut self) -> u64;
}

/// The time stamp counter, read raw and converted with `quanta`'s calibration.
pub struct Tsc {
    clock: quanta::Clock,
    last: u64,
}

impl Tsc {
    /// A source that starts measuring now.
    pub fn new(clock: &quanta::Clock) -> Self {
        Tsc { clock: clock.clone(), last: clock.raw() }
    }
}

impl TimeSource for Tsc {
    #[inline]
    fn elapsed_ns(&mut self) -> u64 {
        let now = self.clock.raw();
        // 0 when `now` is behind `last` (another core's counter): `last` stays the furthest
        // reading, so time is not counted twice.
        let d = self.clock.delta_as_nanos(self.last, now);
        self.last = self.last.max(now);
        d
    }
}

/// A timestamp allocation past [`CLOCK_LIMIT`] (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockExhausted;

impl std::fmt::Display for ClockExhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the timestamp clocks reached their limit (2^54 ns, about 208 days)")
    }
}

/// One thread's published state.
struct Slot {
    /// The thread's clock, for one-sided synchronization.
    clock: AtomicU64,
    /// `thread.wts`, or `VACANT`.
    wts: AtomicU64,
    /// `thread.rts`, or `VACANT`.
    rts: AtomicU64,
}

/// The clocks of up to [`MAX_CLOCKS`] threads, with `min_wts` and `min_rts`.
pub struct Clocks {
    slots: Box<[CachePadded<Slot>]>,
    min_wts: CachePadded<AtomicU64>,
    min_rts: CachePadded<AtomicU64>,
    /// Taken to join, to leave and to refresh (see the module docs).
    members: Mutex<()>,
    /// A refresh is reading the slots (see the module docs: read-only begins).
    refreshing: AtomicBool,
    /// One above the highest slot ever joined: the slots above it hold nothing, so loops over
    /// the threads stop there (a database sized for 256 workers run by 2 reads 2 slots).
    used: AtomicUsize,
    /// The last count handed out, with [`ClockParams::central`].
    counter: CachePadded<AtomicU64>,
    params: ClockParams,
}

impl Clocks {
    /// Clocks for `threads` threads, starting at `start` ns (above the clock part of every
    /// timestamp already used, e.g. recovered from a log).
    pub fn new(threads: usize, start: u64, params: ClockParams) -> Result<Self, String> {
        if !(1..=MAX_CLOCKS).contains(&threads) {
            return Err(format!("{threads} clocks: from 1 to {MAX_CLOCKS} threads are supported"));
        }
        if start >= CLOCK_LIMIT {
            return Err(format!("a clock cannot start at {start} ns: the limit is {CLOCK_LIMIT}"));
        }
        let slot = || {
            CachePadded::new(Slot {
                clock: AtomicU64::new(start),
                wts: AtomicU64::new(VACANT),
                rts: AtomicU64::new(VACANT),
            })
        };
        let first = start << ID_BITS;
        Ok(Clocks {
            slots: (0..threads).map(|_| slot()).collect(),
            min_wts: CachePadded::new(AtomicU64::new(first)),
            min_rts: CachePadded::new(AtomicU64::new(first.saturating_sub(1))),
            members: Mutex::new(()),
            refreshing: AtomicBool::new(false),
            used: AtomicUsize::new(0),
            counter: CachePadded::new(AtomicU64::new(start)),
            params,
        })
    }

    /// The slots of the threads that have joined so far (and of some that left). Acquire:
    /// pairs with `join`'s Release, which comes before the joined thread's first timestamp.
    #[inline(always)]
    fn used(&self) -> &[CachePadded<Slot>] {
        &self.slots[..self.used.load(Ordering::Acquire)]
    }

    /// Whether timestamps come from the shared counter ([`ClockParams::central`]).
    #[inline(always)]
    pub fn central(&self) -> bool {
        self.params.central
    }

    /// How many threads the clocks serve.
    pub fn threads(&self) -> usize {
        self.slots.len()
    }

    /// `min_wts`: no read-write transaction that has not committed yet has a smaller timestamp.
    #[inline(always)]
    pub fn min_wts(&self) -> u64 {
        // Acquire: pairs with `refresh`'s release, which follows its acquire loads of the
        // slots, which follow the threads' commits (see the module docs).
        self.min_wts.load(Ordering::Acquire)
    }

    /// `min_rts`: no running transaction reads at a smaller timestamp.
    #[inline(always)]
    pub fn min_rts(&self) -> u64 {
        // Acquire: as `min_wts`.
        self.min_rts.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // The guard protects no data: a panic while holding it leaves nothing inconsistent.
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The clock of thread `id` (below [`Clocks::threads`], not joined already), measuring time
    /// with `source`. Its clock starts above every published clock and above `min_wts`.
    pub fn join<S: TimeSource>(&self, id: usize, source: S) -> ThreadClock<'_, S> {
        let _members = self.lock();
        let slot = &self.slots[id];
        // Relaxed: under the members lock, which orders every join and leave of the slot.
        assert_eq!(slot.wts.load(Ordering::Relaxed), VACANT, "clock {id} joined twice");
        // Release: pairs with `used`'s Acquire: a refresh that counts this slot sees its fields as
        // stored below or VACANT (the slot is zeroed at creation).
        self.used.fetch_max(id + 1, Ordering::Release);
        let local = if self.params.central {
            // Relaxed: the thread's first count is drawn after this load (its own later
            // fetch-and-add on the counter), so it is above what is published here.
            self.counter.load(Ordering::Relaxed)
        } else {
            // Relaxed: the clocks are a heuristic (see the module docs); a stale peer only starts
            // this clock lower, never below `min_wts`.
            let peers = self.used().iter().map(|s| s.clock.load(Ordering::Relaxed)).max();
            peers.unwrap_or(0).max(clock_of(self.min_wts())) + 1
        };
        // Relaxed: a clock others peek at for one-sided synchronization, a heuristic.
        slot.clock.store(local, Ordering::Relaxed);
        // Under the lock: the next refresh sees these, and every later timestamp of this
        // thread is above them.
        slot.wts.store(local << ID_BITS | id as u64, Ordering::Release);
        slot.rts.store(self.min_wts().saturating_sub(1), Ordering::Release);
        ThreadClock {
            clocks: self,
            id,
            local,
            last: local,
            boost: 0,
            since_sync: 0,
            peer: id,
            source,
        }
    }

    /// The leader's step: `min_wts` and `min_rts` rise to the minimum of the joined threads'
    /// `wts` and `rts` (unchanged while none has joined).
    pub fn refresh(&self) {
        let members = self.lock();
        self.recompute(members, |_| false);
    }

    /// [`Clocks::refresh`] unless a thread is joining, leaving or refreshing right now (then
    /// nothing, at once): the step of a worker that finds a refresh due, which must not wait.
    /// The slots for which `idle` says so (a SeqCst load of the thread's mark, whose threads
    /// take timestamps with [`ThreadClock::next_wts_checked`]) are left out. Whether it
    /// refreshed.
    pub fn try_refresh(&self, idle: impl Fn(usize) -> bool) -> bool {
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Refresh);
        match self.members.try_lock() {
            Ok(members) => self.recompute(members, idle),
            Err(std::sync::TryLockError::Poisoned(e)) => self.recompute(e.into_inner(), idle),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        }
        true
    }

    /// The minimum over the slots that are not `idle`, published (the caller holds the
    /// members' lock).
    fn recompute(&self, _members: std::sync::MutexGuard<'_, ()>, idle: impl Fn(usize) -> bool) {
        // SeqCst: the flag is raised before the slots (and the idle marks) are read (see the
        // module docs).
        self.refreshing.store(true, Ordering::SeqCst);
        let (mut wts, mut rts) = (VACANT, VACANT);
        for (i, s) in self.used().iter().enumerate() {
            if idle(i) {
                continue;
            }
            // SeqCst: after the flag; pairs with the threads' stores, made after their previous
            // transactions' commits.
            wts = wts.min(s.wts.load(Ordering::SeqCst));
            rts = rts.min(s.rts.load(Ordering::SeqCst));
        }
        if wts != VACANT {
            // Under the lock: no lost update. SeqCst: before the flag is lowered.
            self.min_wts.store(self.min_wts.load(Ordering::Relaxed).max(wts), Ordering::SeqCst);
            let rts = rts.min(wts - 1);
            self.min_rts.store(self.min_rts.load(Ordering::Relaxed).max(rts), Ordering::SeqCst);
        }
        self.refreshing.store(false, Ordering::SeqCst);
    }
}

/// One thread's clock (see the module docs).
pub struct ThreadClock<'c, S: TimeSource> {
    clocks: &'c Clocks,
    id: usize,
    /// The local clock.
    local: u64,
    /// The last adjusted clock.
    last: u64,
    /// The boost added until the next commit.
    boost: u64,
    /// Local time since the last one-sided synchronization.
    since_sync: u64,
    /// The thread peeked at last.
    peer: usize,
    source: S,
}

impl<S: TimeSource> ThreadClock<'_, S> {
    /// The thread id below every timestamp of this clock.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The local clock (without the boost).
    pub fn local(&self) -> u64 {
        self.local
    }

    /// Advances the clock and returns a timestamp for a read-write transaction (`thread.wts`),
    /// above every earlier one of this thread; publishes it and the thread's read timestamp.
    #[inline]
    pub fn next_wts(&mut self) -> Result<u64, ClockExhausted> {
        let adjusted = if self.clocks.params.central {
            // Relaxed: uniqueness and order come from the counter's modification order, in
            // which this thread's later draws, and every draw that begins after this one
            // returned, come later.
            self.local = self.clocks.counter.fetch_add(1, Ordering::Relaxed) + 1;
            crate::util::shared_writes::note(crate::util::shared_writes::Site::Counter);
            self.local
        } else {
            self.advance();
            self.local.saturating_add(self.boost).max(self.last + 1)
        };
        if adjusted > CLOCK_LIMIT {
            return Err(ClockExhausted);
        }
        self.last = adjusted;
        let slot = &self.clocks.slots[self.id];
        // Relaxed: a hint for the others' synchronization (see the module docs).
        slot.clock.store(self.local, Ordering::Relaxed);
        let wts = adjusted << ID_BITS | self.id as u64;
        // Release: pairs with `refresh`'s loads; after this thread's previous commit. A
        // read-write transaction reads at its `wts`.
        slot.wts.store(wts, Ordering::Release);
        slot.rts.store(wts, Ordering::Release);
        // (The three stores share the slot's line.)
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Slot);
        Ok(wts)
    }

    /// [`ThreadClock::next_wts`] for a thread that refreshes may have skipped as idle (see the
    /// module docs): the timestamp is published, then, if a refresh is under way or `min_wts`
    /// went above it, the clock is raised past `min_wts` and another is taken. The caller has
    /// marked itself busy (a SeqCst store) before.
    #[inline]
    pub fn next_wts_checked(&mut self) -> Result<u64, ClockExhausted> {
        loop {
            let ts = self.next_wts()?;
            let c = self.clocks;
            // SeqCst: after the caller's busy mark and this thread's slot; pairs with the
            // refresh's flag store and its loads of the marks (see the module docs).
            if c.refreshing.load(Ordering::SeqCst) {
                std::thread::yield_now();
                continue;
            }
            let min = c.min_wts.load(Ordering::SeqCst);
            if min <= ts {
                return Ok(ts);
            }
            // Refreshes skipped this thread while it was idle, and `min_wts` passed its clock.
            // (With the central counter the next count is above every one drawn already.)
            self.local = self.local.max(clock_of(min) + 1);
        }
    }

    /// Advances the local clock by the time measured since the last step (and synchronizes
    /// when due) without allocating a timestamp; returns it (nanoseconds, the clock part of a
    /// timestamp).
    #[inline]
    pub fn advance(&mut self) -> u64 {
        let params = &self.clocks.params;
        let step = self.source.elapsed_ns().min(params.max_increment_ns);
        self.local = self.local.saturating_add(step);
        self.since_sync += step;
        if self.since_sync >= params.sync_interval_ns {
            self.since_sync = 0;
            self.synchronize();
        }
        self.local
    }

    /// A timestamp for a read-only transaction (`thread.rts = min_wts - 1`): every read-write
    /// transaction at or below it has committed. Published for `min_rts`, at or above it (see
    /// the module docs).
    #[inline]
    pub fn next_rts(&mut self) -> u64 {
        let c = self.clocks;
        let slot = &c.slots[self.id];
        loop {
            // SeqCst throughout: the store, then the flag and `min_rts` (see the module docs).
            let rts = c.min_wts.load(Ordering::SeqCst).saturating_sub(1);
            slot.rts.store(rts, Ordering::SeqCst);
            crate::util::shared_writes::note(crate::util::shared_writes::Site::Slot);
            if !c.refreshing.load(Ordering::SeqCst) && c.min_rts.load(Ordering::SeqCst) <= rts {
                return rts;
            }
            std::thread::yield_now();
        }
    }

    /// Raises the local clock above every timestamp any thread has drawn (the published
    /// `thread.wts`, boost included), so that this thread's next timestamp follows every
    /// transaction that began before the call: a commit that returned before it is ordered
    /// before the next transaction (external consistency, the option §3.1 discusses). It reads
    /// every thread's slot, so it costs what loosely synchronized clocks save.
    #[inline]
    pub fn catch_up(&mut self) {
        if self.clocks.params.central {
            return;
        }
        // Acquire: pairs with the peers' Release stores of their `wts`; a store that happened
        // before this call (a transaction that began and committed before it) is seen.
        let top = self
            .clocks
            .used()
            .iter()
            .map(|s| s.wts.load(Ordering::Acquire))
            .filter(|&w| w != VACANT)
            .max();
        if let Some(w) = top {
            self.local = self.local.max(clock_of(w) + 1);
        }
    }

    /// After an abort: the adjusted clock runs `boost_ns` ahead until [`ThreadClock::committed`].
    #[inline]
    pub fn boost(&mut self) {
        self.boost = self.clocks.params.boost_ns;
    }

    /// After a commit: the boost ends.
    #[inline]
    pub fn committed(&mut self) {
        self.boost = 0;
    }

    /// One-sided synchronization with the next thread in round-robin order.
    #[cold]
    fn synchronize(&mut self) {
        let slots = self.clocks.used();
        if slots.len() <= 1 {
            return;
        }
        self.peer = (self.peer + 1) % slots.len();
        if self.peer == self.id {
            self.peer = (self.peer + 1) % slots.len();
        }
        // Relaxed: see the module docs.
        let remote = slots[self.peer].clock.load(Ordering::Relaxed);
        let remote = remote.saturating_add(self.clocks.params.sync_latency_ns);
        if remote > self.local {
            self.local = remote;
        }
    }
}

impl<S: TimeSource> Drop for ThreadClock<'_, S> {
    fn drop(&mut self) {
        let _members = self.clocks.lock();
        let slot = &self.clocks.slots[self.id];
        // Release, under the members lock: pairs with the refresh's Acquire loads; a refresh that
        // sees VACANT leaves the slot out, as it must once the thread is gone.
        slot.wts.store(VACANT, Ordering::Release);
        slot.rts.store(VACANT, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Time that moves only when the test says: each call returns the step set last.
    #[derive(Clone, Default)]
    struct Manual(Rc<Cell<u64>>);

    impl TimeSource for Manual {
        fn elapsed_ns(&mut self) -> u64 {
            self.0.get()
        }
    }

    fn clocks(threads: usize) -> Clocks {
        Clocks::new(threads, 1_000, ClockParams::default()).unwrap()
    }

    /// More threads than cores, each allocating many timestamps on the real TSC: every
    /// thread's rise strictly, carry its id, and no two are equal.
    #[test]
    fn timestamps_rise_per_thread_and_are_unique() {
        const THREADS: usize = 8;
        const EACH: usize = 50_000;
        let clocks = clocks(THREADS);
        let tsc = quanta::Clock::new();
        let all: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|id| {
                    let (clocks, tsc) = (&clocks, &tsc);
                    s.spawn(move || {
                        let mut c = clocks.join(id, Tsc::new(tsc));
                        (0..EACH)
                            .map(|i| {
                                if i % 7 == 0 {
                                    c.boost();
                                } else if i % 7 == 3 {
                                    c.committed();
                                }
                                c.next_wts().unwrap()
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut every = Vec::with_capacity(THREADS * EACH);
        for (id, ts) in all.iter().enumerate() {
            assert!(ts.windows(2).all(|w| w[0] < w[1]), "thread {id}'s timestamps fell");
            assert!(ts.iter().all(|&t| thread_of(t) == id), "thread {id}'s id suffix");
            every.extend_from_slice(ts);
        }
        every.sort_unstable();
        every.dedup();
        assert_eq!(every.len(), THREADS * EACH, "two threads shared a timestamp");
    }

    /// While a thread's latest timestamp is its current one, `min_wts` stays at or below it,
    /// however refreshes, joins and departures interleave: threads (more than cores) leave and
    /// join again every few hundred timestamps while a leader refreshes without pause.
    #[test]
    fn min_wts_never_passes_a_running_timestamp() {
        const THREADS: usize = 6;
        const ROUNDS: usize = 200;
        let clocks = clocks(THREADS);
        let tsc = quanta::Clock::new();
        let done = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for id in 0..THREADS {
                let (clocks, tsc, done) = (&clocks, &tsc, &done);
                s.spawn(move || {
                    for round in 0..ROUNDS {
                        let mut c = clocks.join(id, Tsc::new(tsc));
                        for _ in 0..(100 + round % 7 * 50) {
                            let ts = c.next_wts().unwrap();
                            let m = clocks.min_wts();
                            assert!(m <= ts, "min_wts {m} passed thread {id}'s timestamp {ts}");
                            assert!(c.next_rts() < ts);
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                });
            }
            s.spawn(|| {
                let mut last = 0;
                while done.load(Ordering::Relaxed) < THREADS {
                    clocks.refresh();
                    let m = clocks.min_wts();
                    assert!(m >= last, "min_wts fell from {last} to {m}");
                    last = m;
                    std::thread::yield_now();
                }
            });
        });
    }

    /// A measurement is capped at `max_increment_ns`, and time that stands still or goes back
    /// still gives rising timestamps (one nanosecond apart).
    #[test]
    fn increments_are_bounded_and_stalled_time_still_rises() {
        let clocks = clocks(1);
        let time = Manual::default();
        let mut c = clocks.join(0, time.clone());
        let start = c.local();
        time.0.set(u64::MAX / 2);
        let a = c.next_wts().unwrap();
        assert_eq!(c.local(), start + ClockParams::default().max_increment_ns);
        time.0.set(0);
        let b = c.next_wts().unwrap();
        let d = c.next_wts().unwrap();
        assert_eq!([clock_of(b), clock_of(d)], [clock_of(a) + 1, clock_of(a) + 2]);
    }

    /// The boost puts the adjusted clock `boost_ns` ahead; after the commit the timestamps keep
    /// rising from there until the clock passes them.
    #[test]
    fn a_boost_lasts_until_the_commit() {
        let clocks = clocks(1);
        let time = Manual::default();
        let mut c = clocks.join(0, time.clone());
        time.0.set(10);
        let plain = clock_of(c.next_wts().unwrap());
        assert_eq!(plain, c.local());
        c.boost();
        let boosted = clock_of(c.next_wts().unwrap());
        assert_eq!(boosted, c.local() + 1_000);
        c.committed();
        let after = clock_of(c.next_wts().unwrap());
        assert_eq!(after, boosted + 1, "held above the boosted timestamp");
        time.0.set(2_000);
        assert_eq!(clock_of(c.next_wts().unwrap()), c.local(), "the clock passed it");
    }

    /// A slow clock adopts a faster one (plus the latency) once its own time since its last
    /// synchronization reaches the interval; a fast clock ignores a slow one.
    #[test]
    fn one_sided_synchronization_corrects_a_slow_clock() {
        let clocks = clocks(2);
        let (fast_time, slow_time) = (Manual::default(), Manual::default());
        let mut fast = clocks.join(0, fast_time.clone());
        let mut slow = clocks.join(1, slow_time.clone());
        fast_time.0.set(1_000_000);
        fast.next_wts().unwrap();
        slow_time.0.set(10);
        slow.next_wts().unwrap();
        assert!(slow.local() < fast.local(), "no synchronization before the interval");
        slow_time.0.set(100_000);
        let ts = slow.next_wts().unwrap();
        assert_eq!(slow.local(), fast.local() + 100, "the fast clock plus the latency");
        assert_eq!(clock_of(ts), slow.local());
        // The fast clock peeks at the slow one and keeps its own.
        fast_time.0.set(100_000);
        let before = fast.local();
        fast.next_wts().unwrap();
        assert_eq!(fast.local(), before + 100_000);
    }

    /// A refresh leaves out the threads its caller calls idle, so `min_wts` passes an idle
    /// thread's clock; the idle thread's next checked timestamp is above `min_wts` (its clock
    /// raised past it), while an unchecked one would have fallen below.
    #[test]
    fn idle_threads_hold_nothing_back_and_resume_above_min_wts() {
        let clocks = clocks(2);
        let (t0, t1) = (Manual::default(), Manual::default());
        let mut busy = clocks.join(0, t0.clone());
        let mut idle = clocks.join(1, t1.clone());
        t1.0.set(10);
        let wi = idle.next_wts().unwrap();
        t0.0.set(1_000_000);
        let wb = busy.next_wts().unwrap();
        clocks.try_refresh(|_| false);
        assert_eq!(clocks.min_wts(), wi, "counted, the idle thread holds min_wts");
        clocks.try_refresh(|slot| slot == 1);
        assert_eq!(clocks.min_wts(), wb, "left out, it does not");
        assert!(clock_of(wb) > idle.local() + 10, "min_wts passed the idle thread's clock");
        let resumed = idle.next_wts_checked().unwrap();
        assert!(resumed > clocks.min_wts(), "{resumed} resumes above min_wts {}", clocks.min_wts());
        assert_eq!(clock_of(resumed), clock_of(wb) + 1 + 10, "raised past min_wts, then stepped");
        // Unchecked, a thread left behind takes a timestamp below min_wts.
        clocks.try_refresh(|_| false);
        t0.0.set(1_000_000);
        let wb = busy.next_wts().unwrap();
        clocks.try_refresh(|slot| slot == 1);
        assert_eq!(clocks.min_wts(), wb);
        assert!(idle.next_wts().unwrap() < clocks.min_wts());
        assert!(idle.next_wts_checked().unwrap() > clocks.min_wts());
    }

    /// `min_wts` and `min_rts` follow the slowest joined thread, never fall, skip a departed
    /// thread, and a thread that joins starts above `min_wts` and every clock.
    #[test]
    fn the_leader_keeps_min_wts_and_min_rts() {
        let clocks = clocks(3);
        let (t0, t1) = (Manual::default(), Manual::default());
        let mut a = clocks.join(0, t0.clone());
        let mut b = clocks.join(1, t1.clone());
        t0.0.set(5_000);
        t1.0.set(50);
        let wa = a.next_wts().unwrap();
        let wb = b.next_wts().unwrap();
        assert!(wb < wa);
        clocks.refresh();
        assert_eq!(clocks.min_wts(), wb);
        assert_eq!(clocks.min_rts(), wb - 1, "min_rts is below min_wts");
        assert_eq!(a.next_rts(), wb - 1, "a read-only transaction reads below every writer");
        clocks.refresh();
        assert_eq!(clocks.min_rts(), wb - 1);
        // b's read-write transaction reads at its timestamp, and holds `min_rts` back no
        // further than `min_wts - 1` once a is a writer again.
        let wa = a.next_wts().unwrap();
        clocks.refresh();
        assert_eq!(clocks.min_rts(), wb - 1);
        assert!(wa > wb);
        let mut early = clocks.join(2, Manual::default());
        let we = early.next_wts().unwrap();
        assert!(clock_of(we) > a.local(), "a thread joins above every clock, not only min_wts");
        drop(early);
        drop(b);
        a.next_wts().unwrap();
        clocks.refresh();
        assert!(clocks.min_wts() > wb, "the departed thread holds nothing back");
        let m = clocks.min_wts();
        let mut c = clocks.join(2, Manual::default());
        let wc = c.next_wts().unwrap();
        assert!(clock_of(wc) > clock_of(m) && clock_of(wc) > a.local(), "joins above all");
        clocks.refresh();
        assert_eq!(clocks.min_wts(), m, "a's timestamp is still the smallest");
    }

    /// With the central counter, more threads than cores draw timestamps that are unique, rise
    /// per thread, and are exactly the counts from the start onwards (one fetch-and-add each);
    /// a thread that joins later starts above every count drawn, and `min_wts` follows the
    /// slowest thread as with clocks.
    #[test]
    fn the_central_counter_hands_out_each_count_once() {
        const THREADS: usize = 8;
        const EACH: u64 = 20_000;
        let params = ClockParams { central: true, ..ClockParams::default() };
        let clocks = Clocks::new(THREADS + 1, 1_000, params).unwrap();
        assert!(clocks.central());
        let all: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|id| {
                    let clocks = &clocks;
                    s.spawn(move || {
                        let mut c = clocks.join(id, Manual::default());
                        let mut mine = Vec::with_capacity(EACH as usize);
                        for i in 0..EACH {
                            if i % 7 == 0 {
                                c.boost();
                                c.catch_up();
                            }
                            let ts = c.next_wts().unwrap();
                            assert_eq!(thread_of(ts), id);
                            assert!(mine.last().is_none_or(|&l| l < ts), "rises per thread");
                            mine.push(ts);
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut counts: Vec<u64> = all.iter().map(|&t| clock_of(t)).collect();
        counts.sort_unstable();
        let expected: Vec<u64> = (1_001..=1_000 + THREADS as u64 * EACH).collect();
        assert_eq!(counts, expected, "every count once, none skipped: no boost, no clock");
        let mut late = clocks.join(THREADS, Manual::default());
        let first = late.next_wts().unwrap();
        assert_eq!(clock_of(first), 1_001 + THREADS as u64 * EACH);
        clocks.refresh();
        assert_eq!(clocks.min_wts(), first, "the only joined thread holds min_wts");
        late.next_wts().unwrap();
        clocks.refresh();
        assert!(clocks.min_wts() > first);
    }

    /// At the limit an allocation fails instead of wrapping; bad sizes are refused.
    #[test]
    fn the_clock_stops_at_its_limit() {
        let clocks = Clocks::new(1, CLOCK_LIMIT - 3, ClockParams::default()).unwrap();
        let mut c = clocks.join(0, Manual::default());
        assert_eq!(clock_of(c.next_wts().unwrap()), CLOCK_LIMIT - 1);
        assert_eq!(clock_of(c.next_wts().unwrap()), CLOCK_LIMIT);
        assert_eq!(c.next_wts(), Err(ClockExhausted));
        assert!(Clocks::new(0, 0, ClockParams::default()).is_err());
        assert!(Clocks::new(MAX_CLOCKS + 1, 0, ClockParams::default()).is_err());
        let e = Clocks::new(1, CLOCK_LIMIT, ClockParams::default()).err().unwrap();
        assert_eq!(
            e,
            format!("a clock cannot start at {CLOCK_LIMIT} ns: the limit is {CLOCK_LIMIT}")
        );
    }
}
