//! IC3's transaction contexts: what a transaction publishes for the transactions that depend on
//! it (its attempt, its type and how many of its pieces have committed), the waits of
//! Algorithm 1 (a piece of a dependency, or its end) and Algorithm 2 (every dependency's end),
//! and the dependency queue.
//!
//! A context belongs to one worker at a time and is reused for every attempt it runs (the
//! paper's fixed-size, reused context, §5.2). Its state is one word, so a waiter reads a
//! consistent quadruple with one load: the attempt's *generation* (a new one for every
//! attempt, retries included), the SC-graph it runs on (a version number modulo
//! [`GRAPH_VERSIONS`]: at most two graphs run at once, see `ic3`'s online analysis), its
//! workload type, and its *progress*: the number of its template pieces whose merged pieces
//! have committed, the same measure whichever graph chopped them, so that a waiter on another
//! graph reads it too ([`COMMITTED`] from its commit point while it leaves the accessor lists;
//! [`DONE`] once the attempt committed or rolled back). A dependency is
//! a context and a generation ([`TxnRef`]): once the context's generation moves on, the
//! attempt it named is over, however it ended (a rolled-back attempt marks the accessor-list
//! entries that saw its writes before it lets go of its generation, so its dependents learn
//! that from their own entries: see `record`).
//!
//! Contexts live in the protocol, not in the workers, so that a dependency queue's pointers
//! stay valid after the worker that ran the attempt is gone.

use crate::util::SpinWait;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Progress of an attempt that has ended (committed or rolled back).
pub const DONE: u64 = 0xFFFF;
/// Progress of an attempt that has committed and is leaving the accessor lists: its writes are
/// committed data from this store on (the commit point that reads of committed images see,
/// `record::Locked::committed_word`).
pub const COMMITTED: u64 = DONE - 1;
/// Progress of an attempt passing its commit point: it has taken its commit epoch after this
/// store and is about to store [`COMMITTED`] (see [`TxnCtx::committing`]). A reader of
/// committed images waits until it has ([`TxnRef::committed`]).
pub const COMMITTING: u64 = DONE - 2;
/// The type of an attempt that runs directly (untyped, or of a type the graph leaves out).
pub const UNTYPED: u64 = 0xFF;
const PROGRESS_BITS: u32 = 16;
const TYPE_BITS: u32 = 8;
const GRAPH_BITS: u32 = 4;
const GRAPH_SHIFT: u32 = PROGRESS_BITS + TYPE_BITS;
const GEN_SHIFT: u32 = GRAPH_SHIFT + GRAPH_BITS;
/// Graph versions a state tells apart (it keeps a version modulo this).
pub const GRAPH_VERSIONS: u64 = 1 << GRAPH_BITS;

/// The most workload types a context can name (the type field's width, less [`UNTYPED`]).
pub const MAX_TYPES: usize = UNTYPED as usize;
/// The most template pieces a type may have (below [`COMMITTING`]).
pub const MAX_PIECES: usize = COMMITTING as usize - 1;

/// A context's state word, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    /// The attempt's generation.
    pub gen: u64,
    /// The version of the graph it runs on, modulo [`GRAPH_VERSIONS`] (0 when direct).
    pub graph: u64,
    /// Its workload type, or [`UNTYPED`].
    pub ty: u64,
    /// Template pieces committed (always the end of a merged piece), or [`DONE`].
    pub progress: u64,
}

impl State {
    fn pack(self) -> u64 {
        debug_assert!(self.ty <= UNTYPED && self.progress <= DONE && self.graph < GRAPH_VERSIONS);
        self.gen << GEN_SHIFT | self.graph << GRAPH_SHIFT | self.ty << PROGRESS_BITS | self.progress
    }

    fn unpack(w: u64) -> Self {
        State {
            gen: w >> GEN_SHIFT,
            graph: (w >> GRAPH_SHIFT) & (GRAPH_VERSIONS - 1),
            ty: (w >> PROGRESS_BITS) & ((1 << TYPE_BITS) - 1),
            progress: w & DONE,
        }
    }

    /// Whether it is a running attempt on graph `graph` (a version modulo
    /// [`GRAPH_VERSIONS`]) that does not run directly.
    pub fn runs_on(&self, graph: u64) -> bool {
        self.ty != UNTYPED && self.progress != DONE && self.graph == graph
    }

    /// Whether it is a running attempt, typed or direct.
    pub fn runs(&self) -> bool {
        self.progress != DONE
    }
}

/// One transaction context (see the module docs).
#[derive(Debug, Default)]
pub struct TxnCtx {
    state: AtomicU64,
    /// The context's number among the protocol's (part of every version it gives).
    id: u64,
    /// Versions given so far (only the owning worker touches it).
    versions: AtomicU64,
    /// The latest generation a rolled-back writer doomed (§4.4: it marked one of the attempt's
    /// entries), so that the attempt learns it while it waits instead of at its commit.
    doomed: AtomicU64,
    /// Workers parked until this context's state changes ([`WaitPolicy::Suspend`]).
    sleepers: AtomicU32,
    /// The attempt is closing its untracked reads ([`TxnCtx::close`]).
    closing: AtomicBool,
}

/// How many bits of a version count a context's writes (the rest names the context).
const VERSION_SEQ_BITS: u32 = 45;

/// The most contexts (workers) whose versions a record's word can name: the context's number
/// plus one fills the version's bits above its sequence (`record::VERSION_SHIFT`).
pub const MAX_CONTEXTS: usize = (1 << (64 - super::record::VERSION_SHIFT - VERSION_SEQ_BITS)) - 1;

impl TxnCtx {
    /// The current state.
    #[inline]
    pub fn load(&self) -> State {
        // Acquire: pairs with the Release stores of `begin`, `progress` and `end`, so a waiter
        // that sees a piece committed or an attempt over also sees what it did before (its
        // accessor-list entries, the payloads it installed, the abort marks it set).
        State::unpack(self.state.load(Ordering::Acquire))
    }

    /// Starts a new attempt of workload type `ty` ([`UNTYPED`] for a direct one) on graph
    /// version `graph` and returns its reference. Only the owning worker calls it, when its
    /// previous attempt has ended (which woke its waiters: nobody waits for a new attempt's
    /// start).
    pub fn begin(&self, ty: u64, graph: u64) -> TxnRef {
        debug_assert!(ty <= UNTYPED);
        let gen = (self.load().gen + 1) & ((1 << (64 - GEN_SHIFT)) - 1);
        let graph = graph % GRAPH_VERSIONS;
        // SeqCst (Release for `load`): a worker that begins on a graph stores its state and
        // then loads which graph is current, SeqCst (`ic3`'s begin), and a mix change stores
        // the new current graph and then loads every context's state, SeqCst: either the
        // worker sees the new graph and begins again on it, or the change sees the attempt.
        self.state.store(State { gen, graph, ty, progress: 0 }.pack(), Ordering::SeqCst);
        TxnRef { ctx: self, gen }
    }

    /// Moves the attempt just begun (no piece committed, no entry anywhere, nobody depends on
    /// it) to graph version `graph` and type `ty`.
    pub fn rebegin(&self, ty: u64, graph: u64) {
        let s = State { ty, graph: graph % GRAPH_VERSIONS, ..self.load() };
        debug_assert_eq!(s.progress, 0);
        // SeqCst: see `begin`.
        self.state.store(s.pack(), Ordering::SeqCst);
    }

    /// The attempt that read untracked is about to check that no direct writer of untracked
    /// columns overlapped it, and then to pass its commit point: a writer that begins from here
    /// on waits until [`TxnCtx::reopen`] (see `worker`'s untracked reads).
    #[inline]
    pub fn close(&self) {
        // SeqCst: before the check's load of the writers that began, paired with a writer's
        // count of itself before its loads of `closing` (`Contexts::wait_while_closing`).
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Ends [`TxnCtx::close`]: the attempt passed its commit point or failed its check.
    #[inline]
    pub fn reopen(&self) {
        // Release: a waiting writer sees the commit point and the writes before it.
        self.closing.store(false, Ordering::Release);
    }

    /// The state now, for a mix change's scan of the contexts (SeqCst: see `begin`).
    pub fn load_seqcst(&self) -> State {
        State::unpack(self.state.load(Ordering::SeqCst))
    }

    /// Stores a new state and wakes the workers parked on the context.
    #[inline]
    fn publish(&self, s: State) {
        // SeqCst (a Release store, for `load`, and more): in the single order of SeqCst
        // operations, either this store comes before a parking waiter's load of the state
        // (made after it counted itself in `sleepers`, SeqCst, in `TxnRef::wait`), which then
        // sees it and does not sleep, or the waiter's count comes before the load below, which
        // sees it and wakes it: no wake-up is lost.
        self.state.store(s.pack(), Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            // SAFETY: the key is this context's address, which only `TxnRef::wait` parks on;
            // the token is the default one, which nobody interprets.
            unsafe {
                parking_lot_core::unpark_all(self.key(), parking_lot_core::DEFAULT_UNPARK_TOKEN)
            };
        }
    }

    /// The parking key of the context: its address.
    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Publishes that the running attempt has committed its first `pieces` template pieces
    /// (the end of a merged piece).
    pub fn progress(&self, pieces: u64) {
        debug_assert!(pieces < COMMITTING);
        self.publish(State { progress: pieces, ..self.load() });
    }

    /// Publishes that the running attempt is passing its commit point ([`COMMITTING`]): its
    /// commit epoch, read after this store and a SeqCst fence, is then at least the epoch of
    /// every reader of committed images that found it not committed (the reader takes its
    /// epoch first, fences, then looks: see `worker`'s commit epochs), and at most the epoch of
    /// every one that finds it committed (which waits for [`TxnCtx::commit`], made after the
    /// epoch was read). It cannot roll back from here.
    pub fn committing(&self) {
        self.publish(State { progress: COMMITTING, ..self.load() });
    }

    /// Publishes that the running attempt has committed: the commit point (see [`COMMITTED`]).
    /// It then leaves the accessor lists and [ends](TxnCtx::end). (A reader of committed images
    /// that loads this state, Acquire, counts the attempt's writes as committed.)
    pub fn commit(&self) {
        self.publish(State { progress: COMMITTED, ..self.load() });
    }

    /// Publishes that the running attempt is over (committed, or rolled back and its entries
    /// marked).
    pub fn end(&self) {
        self.publish(State { progress: DONE, ..self.load() });
    }

    /// A version no write has had: the context's number above a count of its writes, so
    /// never 0 (unborn) or 1 (loaded), and unique across the workers that use the context in
    /// turn. Only the owning worker calls it.
    #[inline]
    pub fn next_version(&self) -> u64 {
        // Relaxed: only the owner reads and writes the count (a new owner takes the context
        // through `Contexts::take`, whose Acquire orders it after the old owner's last use).
        let n = self.versions.load(Ordering::Relaxed) + 1;
        self.versions.store(n, Ordering::Relaxed);
        debug_assert!(n < 1 << VERSION_SEQ_BITS);
        (self.id + 1) << VERSION_SEQ_BITS | n
    }
}

/// An attempt: its context and generation. Valid as long as the protocol's contexts are.
#[derive(Clone, Copy, Debug)]
pub struct TxnRef {
    ctx: *const TxnCtx,
    gen: u64,
}

// SAFETY: a TxnRef only reads its context's atomic word, and contexts live in the protocol
// (`Contexts`), which outlives every worker and every attempt that holds a reference.
unsafe impl Send for TxnRef {}
// SAFETY: as for Send.
unsafe impl Sync for TxnRef {}

impl PartialEq for TxnRef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.ctx, other.ctx) && self.gen == other.gen
    }
}
impl Eq for TxnRef {}

impl TxnRef {
    /// Tells the attempt that a rolled-back writer marked one of its entries.
    #[inline]
    pub fn doom(&self) {
        // SAFETY: contexts outlive every reference to them (see the Send impl).
        // Relaxed: a hint read by the owner's waits; the mark itself (the entry's flag) is
        // what its commit checks, after seeing the marker end (Acquire there).
        unsafe { &*self.ctx }.doomed.fetch_max(self.gen, Ordering::Relaxed);
    }

    /// Whether a rolled-back writer has doomed the attempt (see [`TxnRef::doom`]).
    #[inline]
    pub fn doomed(&self) -> bool {
        // SAFETY: as in `doom`.
        unsafe { &*self.ctx }.doomed.load(Ordering::Relaxed) == self.gen
    }

    /// The context's state now.
    #[inline]
    pub fn state(&self) -> State {
        // SAFETY: contexts outlive every reference to them (see the Send impl).
        unsafe { &*self.ctx }.load()
    }

    /// The attempt's workload type (or [`UNTYPED`]) and graph version while it runs, `None`
    /// once it is over.
    pub fn running(&self) -> Option<(u64, u64)> {
        let s = self.state();
        (s.gen == self.gen && s.progress != DONE).then_some((s.ty, s.graph))
    }

    /// Whether the attempt is over (committed or rolled back).
    #[inline]
    pub fn over(&self) -> bool {
        let s = self.state();
        s.gen != self.gen || s.progress == DONE
    }

    /// Whether the attempt has passed its commit point ([`TxnCtx::commit`]) or is over,
    /// waiting while it is passing it ([`COMMITTING`]: a few stores away, and it takes no lock
    /// meanwhile). For the attempt of an entry still linked (seen under the record's lock),
    /// whether it committed: its entries leave before it ends.
    #[inline]
    pub fn committed(&self) -> bool {
        let mut spin = SpinWait::default();
        loop {
            let s = self.state();
            if s.gen != self.gen || s.progress == COMMITTED {
                return true;
            }
            if s.progress != COMMITTING {
                return false;
            }
            spin.spin();
        }
    }

    /// Whether the attempt is passing its commit point ([`COMMITTING`]: it can no longer fail),
    /// has passed it, or is over, without waiting: for a commit that holds locks itself (an
    /// accumulation applied under listed writers, `record::Locked::accumulate`), which must
    /// not wait for another such commit.
    #[inline]
    pub fn committing(&self) -> bool {
        let s = self.state();
        s.gen != self.gen || matches!(s.progress, COMMITTING | COMMITTED | DONE)
    }

    /// Whether the attempt has committed the merged piece that holds its template piece
    /// `piece` (or is over).
    #[inline]
    pub fn passed(&self, piece: usize) -> bool {
        let s = self.state();
        s.gen != self.gen || s.progress > piece as u64
    }
}

/// How a worker waits for another transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitPolicy {
    /// Spins (the paper's default), yielding the core after a while so that the transaction
    /// waited for can run when workers outnumber cores.
    Spin,
    /// Yields the core at once every time it looks.
    Yield,
    /// Yields the core a few times, then sleeps until the transaction waited for changes its
    /// state (the paper's suspend-wait; a sleeping worker leaves its core to the others).
    Suspend,
}

/// Yields of the core before a suspend-wait sleeps (it does not spin first: with more workers
/// than cores, spinning before yielding, or sleeping at once, cost TPC-C much of its throughput
/// against yielding alone: `txlab run -p ic3 -w tpcc --threads 8` when this is changed).
const SUSPEND_YIELDS: u32 = 8;
/// The longest a suspended worker sleeps before it looks again. Only a doomed attempt (marked
/// by a rolled-back writer it does not wait for) needs it: every other condition a worker
/// waits for is a state change of the transaction it sleeps on, which wakes it.
const SUSPEND_TIMEOUT: Duration = Duration::from_millis(1);

impl TxnRef {
    /// Waits until `done` holds, as `policy` says. `done` is a condition on this attempt's
    /// state (or the waiter's own doom, see `SUSPEND_TIMEOUT`); a suspended waiter sleeps
    /// on its context until that state changes.
    pub fn wait(&self, policy: WaitPolicy, mut done: impl FnMut() -> bool) {
        let spins = match policy {
            WaitPolicy::Spin => 256,
            WaitPolicy::Yield | WaitPolicy::Suspend => 0,
        };
        let mut spin = SpinWait::spinning(spins);
        let mut yields = 0;
        while !done() {
            if policy != WaitPolicy::Suspend || yields < SUSPEND_YIELDS {
                yields += u32::from(spin.exhausted());
                spin.spin();
                continue;
            }
            // SAFETY: contexts outlive every reference to them (see the Send impl).
            let ctx = unsafe { &*self.ctx };
            // SeqCst: see `TxnCtx::publish`.
            ctx.sleepers.fetch_add(1, Ordering::SeqCst);
            // SAFETY: the key is the context's address (see `TxnCtx::publish`); `validate`
            // only loads atomics (it runs under the queue's lock, and must not park or panic).
            unsafe {
                parking_lot_core::park(
                    ctx.key(),
                    || !done(),
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    Some(Instant::now() + SUSPEND_TIMEOUT),
                )
            };
            ctx.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The protocol's contexts, one per worker slot.
pub struct Contexts {
    slots: Box<[CachePadded<(TxnCtx, AtomicBool)>]>,
}

impl Contexts {
    /// `n` contexts, each with no attempt running.
    pub fn new(n: usize) -> Self {
        let slots = (0..n as u64)
            .map(|id| {
                let ctx = TxnCtx { id, ..TxnCtx::default() };
                ctx.end();
                CachePadded::new((ctx, AtomicBool::new(false)))
            })
            .collect();
        Contexts { slots }
    }

    /// Takes a free context for a new worker, `None` when all are taken.
    pub fn take(&self) -> Option<&TxnCtx> {
        self.slots.iter().find_map(|s| {
            // Acquire: pairs with the Release of `give_back`: the previous owner's last
            // attempt is over before the context is reused.
            s.1.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                .then_some(&s.0)
        })
    }

    /// Every context's state now (SeqCst: see [`TxnCtx::begin`]).
    pub fn states(&self) -> impl Iterator<Item = State> + '_ {
        self.slots.iter().map(|s| s.0.load_seqcst())
    }

    /// Waits while any context is closing its untracked reads ([`TxnCtx::close`]): a direct
    /// writer of columns that typed attempts read untracked, before it locks anything (see
    /// `worker`'s untracked reads). Closing lasts from a check to a commit point, with no
    /// wait for a direct attempt in between, so this ends.
    pub fn wait_while_closing(&self) {
        for slot in self.slots.iter() {
            let mut spin = SpinWait::default();
            // SeqCst: after the writer counted itself (`worker::UntrackedWriters::enter`);
            // Acquire for the closing attempt's writes before its `reopen`.
            while slot.0.closing.load(Ordering::SeqCst) {
                spin.spin();
            }
        }
    }

    /// Returns a context taken with [`Contexts::take`] (its attempt over).
    pub fn give_back(&self, ctx: &TxnCtx) {
        debug_assert_eq!(ctx.load().progress, DONE);
        if let Some(s) = self.slots.iter().find(|s| std::ptr::eq(&s.0, ctx)) {
            // Release: see `take`.
            s.1.store(false, Ordering::Release);
        }
    }
}

/// A transaction's direct dependencies (Algorithm 1, lines 19 and 23), each once.
#[derive(Debug, Default)]
pub struct DepQueue {
    deps: Vec<TxnRef>,
}

impl DepQueue {
    /// Empties the queue (capacity kept).
    pub fn clear(&mut self) {
        self.deps.clear();
    }

    /// Adds `dep` unless it is there already.
    pub fn push(&mut self, dep: TxnRef) {
        if !self.deps.contains(&dep) {
            self.deps.push(dep);
        }
    }

    /// The dependencies, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &TxnRef> {
        self.deps.iter()
    }

    /// Whether `dep` is there.
    pub fn contains(&self, dep: &TxnRef) -> bool {
        self.deps.contains(dep)
    }

    /// Drops the dependencies that are over (they constrain nothing any more).
    pub fn prune(&mut self) {
        self.deps.retain(|d| !d.over());
    }

    /// Number of dependencies.
    pub fn len(&self) -> usize {
        self.deps.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.deps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct writer of untracked columns waits while a context closes its untracked reads
    /// (`worker`'s guard): never past a closing context. (A broken wait would pass at once,
    /// and this would then fail unless the spawned thread had not run within the pause: the
    /// pause only bounds how surely a broken wait is caught.)
    #[test]
    fn a_writer_waits_while_a_context_closes() {
        let contexts = Contexts::new(3);
        let (a, b) = (contexts.take().unwrap(), contexts.take().unwrap());
        a.close();
        b.close();
        let passed = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                contexts.wait_while_closing();
                passed.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(20));
            assert!(!passed.load(Ordering::SeqCst), "passed two closing contexts");
            a.reopen();
            std::thread::sleep(Duration::from_millis(20));
            assert!(!passed.load(Ordering::SeqCst), "passed a closing context");
            b.reopen();
        });
        assert!(passed.load(Ordering::SeqCst));
    }

    #[test]
    fn a_reference_sees_its_attempt_progress_and_end_and_not_the_next_attempt() {
        let ctx = TxnCtx::default();
        let a = ctx.begin(3, 0);
        assert_eq!(a.running(), Some((3, 0)));
        assert!(!a.passed(0) && !a.over());
        ctx.progress(1);
        assert!(a.passed(0) && !a.passed(1));
        ctx.end();
        assert!(a.over() && a.passed(7));
        assert_eq!(a.running(), None);
        let b = ctx.begin(UNTYPED, 0);
        assert!(a.over(), "a retry is a new attempt: the old one stays over");
        assert!(!b.over() && b != a);
        assert_eq!(b.running(), Some((UNTYPED, 0)));
    }

    #[test]
    fn waiting_for_a_piece_returns_once_another_thread_commits_it() {
        let ctx = TxnCtx::default();
        let a = ctx.begin(0, 0);
        std::thread::scope(|s| {
            let waiter = s.spawn(move || {
                a.wait(WaitPolicy::Spin, || a.passed(1));
                a.state().progress
            });
            ctx.progress(1);
            ctx.progress(2);
            let seen = waiter.join().unwrap();
            assert!(seen >= 2, "piece 1 is passed only at progress 2, saw {seen}");
        });
    }

    #[test]
    fn contexts_are_taken_once_and_given_back() {
        let c = Contexts::new(2);
        let (x, y) = (c.take().unwrap(), c.take().unwrap());
        assert!(c.take().is_none(), "two slots");
        x.begin(0, 0);
        x.end();
        c.give_back(x);
        assert!(std::ptr::eq(c.take().unwrap(), x));
        let _ = y;
    }

    #[test]
    fn the_dependency_queue_holds_each_attempt_once_and_prunes_ended_ones() {
        let (c1, c2) = (TxnCtx::default(), TxnCtx::default());
        let (a, b) = (c1.begin(0, 0), c2.begin(1, 0));
        let mut q = DepQueue::default();
        q.push(a);
        q.push(b);
        q.push(a);
        assert_eq!(q.len(), 2);
        c1.end();
        q.prune();
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![b]);
    }
}
