//! A queue-based reader-writer lock with cancellation in one 64-bit word: MOCC's MQL (Wang and
//! Kimura, PVLDB 2016, §4), restructured so that its cancellation is simple enough to verify.
//!
//! ```text
//! word:  [tail (32 bits)][readers (32 bits)]     0 = free, no one waiting
//! node:  state (IDLE | WAITING | TURN | ABANDONED), next (a node id, or NONE)
//! ```
//!
//! **The queue.** A request that cannot be granted at once appends a queue node (MCS: the tail
//! is swapped in, the predecessor's `next` is linked) and spins on its own node's `state`, so a
//! waiter touches only its own cache line. The queue is FIFO: a reader arriving behind a waiting
//! writer waits for it, and a writer waits for the readers ahead of it.
//!
//! **Readers leave the queue when granted.** A node whose turn comes (its predecessor passed
//! the turn on, or the queue was empty) is at the *head*. A reader at the head counts itself in
//! `readers` and passes the turn on at once; its read lock is the count alone, and its node is
//! free again. A writer at the head waits until `readers` is 0 (readers granted before it are
//! still inside) and then holds the lock, keeping its node at the head until it releases: the
//! release passes the turn on. So a granted writer is always the head, and a run of readers
//! flows through the queue one after the other. While the queue is empty (tail NONE) a reader
//! just counts itself in: one CAS, as with a plain reader-writer word.
//!
//! **Cancellation.** A waiter may give up (a timed request, MOCC's cancellable lock for a
//! request out of canonical order):
//! * before its turn, by one CAS of its node's state from WAITING to ABANDONED. The node stays
//!   in the queue; the predecessor that passes the turn to it finds it abandoned and passes the
//!   turn through it to its successor, as if it had released at once, then marks it IDLE: the
//!   owner reuses a node only once it is IDLE again. If the turn came first, the CAS fails and
//!   the request goes on as granted.
//! * at the head (a writer still waiting for readers), by passing the turn on as a release does.
//!
//! MQL instead unlinks a cancelled node from its neighbours at once, through a handshake of the
//! leaving node with its predecessor and successor (flags for busy, leaving, successor leaving
//! and the successor's class, and a separate next-writer field for readers' release). The
//! abandoned node here costs its owner a node until the turn passes it and costs the passer one
//! more hop; in exchange every queue transition is a single CAS on one node or on the word, with
//! one writer per field, which is what the model-checking test (`tests/loom_mql.rs`) explores
//! exhaustively. The properties MOCC needs from MQL are kept: local spinning, FIFO fairness
//! between readers and writers, readers sharing, and a request that can be cancelled at any
//! point of its wait without waiting for anyone.
//!
//! **Nodes** belong to worker slots: a node id is `(slot + 1) << 16 | index`, so a slot has up to
//! 65 536 nodes, allocated in chunks of 256 on first use and kept for the database's lifetime (a
//! slot's next worker takes them over). A worker needs one node per write lock it holds, one per
//! request it waits on, and the abandoned ones not yet passed; when all 65 536 are in use a
//! request is refused, which MOCC treats as a lock not taken (its locks only schedule; validation
//! decides).

use super::shim::{spin_wait, AtomicPtr, AtomicU32, AtomicU64, Ordering, CHUNK, CHUNKS};
use std::sync::Arc;

/// No node (the queue is empty; no successor linked yet).
const NONE: u32 = 0;
/// Node states. IDLE is 0, so a fresh chunk starts idle.
const IDLE: u32 = 0;
const WAITING: u32 = 1;
const TURN: u32 = 2;
const ABANDONED: u32 = 3;

/// The most worker slots (a slot number plus one must fit in 16 bits).
pub const MAX_SLOTS: usize = u16::MAX as usize - 1;

#[inline(always)]
fn tail(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline(always)]
fn readers(word: u64) -> u64 {
    word & u64::from(u32::MAX)
}

#[inline(always)]
fn with_tail(word: u64, t: u32) -> u64 {
    u64::from(t) << 32 | readers(word)
}

/// A queue node, alone on its cache line (its owner spins on `state`).
#[repr(align(64))]
struct QNode {
    state: AtomicU32,
    next: AtomicU32,
}

struct Chunk {
    nodes: [QNode; CHUNK],
}

impl Chunk {
    fn new() -> Box<Chunk> {
        Box::new(Chunk {
            nodes: std::array::from_fn(|_| QNode {
                state: AtomicU32::new(IDLE),
                next: AtomicU32::new(NONE),
            }),
        })
    }
}

/// Every worker slot's queue nodes: shared by all the locks of one database.
pub struct QNodes {
    /// Per slot, its chunks; a chunk pointer is written once, by the slot's owner.
    slots: Box<[[AtomicPtr<Chunk>; CHUNKS]]>,
    /// Per slot, how many nodes exist (written by the slot's owner; read by the next one).
    created: Box<[AtomicU32]>,
}

impl QNodes {
    /// Nodes for `max_slots` worker slots; none allocated yet.
    pub fn new(max_slots: usize) -> Result<QNodes, String> {
        if max_slots > MAX_SLOTS {
            return Err(format!(
                "the queue lock supports at most {MAX_SLOTS} workers, not {max_slots}"
            ));
        }
        Ok(QNodes {
            slots: (0..max_slots)
                .map(|_| std::array::from_fn(|_| AtomicPtr::new(std::ptr::null_mut())))
                .collect(),
            created: (0..max_slots).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// The node `id` names.
    #[inline(always)]
    fn node(&self, id: u32) -> &QNode {
        let (slot, index) = ((id >> 16) as usize - 1, (id & 0xffff) as usize);
        // Acquire: pairs with the Release that published the chunk in `Mql::alloc`. The chunk
        // exists: `id` was handed out by its owner after publishing it.
        let chunk = self.slots[slot][index / CHUNK].load(Ordering::Acquire);
        debug_assert!(!chunk.is_null(), "node {id:#x} names a chunk never allocated");
        // SAFETY: chunks are allocated before any node id in them is handed out, and freed only
        // when `self` is dropped, which no lock user outlives.
        unsafe { &(*chunk).nodes[index % CHUNK] }
    }
}

impl Drop for QNodes {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            for c in slot {
                // Relaxed: `&mut self`, so no other thread holds the nodes.
                let p = c.load(Ordering::Relaxed);
                if !p.is_null() {
                    // SAFETY: allocated by `Box::into_raw` in `Mql::alloc`, freed once, here.
                    drop(unsafe { Box::from_raw(p) });
                }
            }
        }
    }
}

/// How long a request waits before it cancels itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Patience {
    /// Until granted.
    Forever,
    /// At most this many rounds of the spin-wait (spinning, then yielding).
    Spins(u32),
}

/// The outcome of a lock request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// A read lock: the count in the word (release with [`Mql::release_read`]).
    Read,
    /// A write lock held through this node (release with [`Mql::release_write`]).
    Write(u32),
    /// Not granted: cancelled after its patience ran out, or refused for want of a node.
    No,
}

/// One worker's handle on the queue lock: the database's nodes and its slot's pool.
pub struct Mql {
    nodes: Arc<QNodes>,
    pool: Pool,
}

/// A worker slot's nodes, free and abandoned.
struct Pool {
    slot: usize,
    /// Nodes this worker may use now.
    free: Vec<u32>,
    /// Nodes this worker abandoned in a queue, reusable once a passer marked them IDLE.
    abandoned: Vec<u32>,
}

impl Mql {
    /// The handle of the worker in `slot`, taking over the nodes an earlier worker of the slot
    /// left (idle ones are free; abandoned ones are reclaimed once passed).
    pub fn new(nodes: Arc<QNodes>, slot: usize) -> Mql {
        let mut pool = Pool { slot, free: Vec::new(), abandoned: Vec::new() };
        // Acquire: pairs with the Release in `alloc` (the chunks behind the count exist).
        let created = nodes.created[slot].load(Ordering::Acquire);
        for i in 0..created {
            let id = pool.id(i);
            // Acquire: pairs with the passer's Release that marked an abandoned node IDLE.
            if nodes.node(id).state.load(Ordering::Acquire) == IDLE {
                pool.free.push(id);
            } else {
                pool.abandoned.push(id);
            }
        }
        Mql { nodes, pool }
    }

    /// Takes a read lock without queueing, if no writer holds or waits for it.
    #[inline]
    pub fn try_read(word: &AtomicU64) -> bool {
        let mut cur = word.load(Ordering::Relaxed);
        while tail(cur) == NONE {
            // Acquire: pairs with the Release of the last writer's release (a tail CAS).
            match word.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    /// Takes a write lock without queueing, if no one holds or waits for it.
    #[inline]
    pub fn try_write(&mut self, word: &AtomicU64) -> Grant {
        // Relaxed: a cheap look before taking a node.
        if word.load(Ordering::Relaxed) != 0 {
            return Grant::No;
        }
        self.pool.head_if(&self.nodes, word, 0)
    }

    /// Turns the caller's read lock into a write lock if it is the only reader and no one
    /// waits; otherwise leaves the read lock as it is.
    #[inline]
    pub fn try_upgrade(&mut self, word: &AtomicU64) -> Grant {
        self.pool.head_if(&self.nodes, word, 1)
    }

    /// Requests the lock in `write` or read mode, queueing if needed and waiting with
    /// `patience`.
    pub fn acquire(&mut self, word: &AtomicU64, write: bool, patience: Patience) -> Grant {
        if !write && Self::try_read(word) {
            return Grant::Read;
        }
        self.pool.acquire(&self.nodes, word, write, patience)
    }

    /// Releases a read lock.
    #[inline]
    pub fn release_read(word: &AtomicU64) {
        // Release: pairs with the Acquire of the writer waiting at the head for readers to
        // leave, or of the next `try_write`.
        let before = word.fetch_sub(1, Ordering::Release);
        debug_assert!(readers(before) > 0, "a read release without a reader");
    }

    /// Releases the write lock held through `node`.
    #[inline]
    pub fn release_write(&mut self, word: &AtomicU64, node: u32) {
        self.pool.pass(&self.nodes, word, node);
    }

    /// Whether no one holds or waits for the lock.
    #[inline(always)]
    pub fn is_free(word: &AtomicU64) -> bool {
        word.load(Ordering::Relaxed) == 0
    }

    /// The number of read-mode holders.
    pub fn readers(word: &AtomicU64) -> u64 {
        readers(word.load(Ordering::Relaxed))
    }

    /// Whether a writer holds the lock or waits at its head, or anyone queues.
    pub fn queued(word: &AtomicU64) -> bool {
        tail(word.load(Ordering::Relaxed)) != NONE
    }

    /// Nodes this worker has abandoned in queues and not yet seen passed.
    pub fn abandoned(&self) -> usize {
        self.pool.abandoned.len()
    }

    /// Frees the abandoned nodes a passer has marked IDLE since.
    pub fn reclaim(&mut self) {
        self.pool.reclaim(&self.nodes);
    }

    /// Nodes this worker can use without allocating.
    pub fn free(&self) -> usize {
        self.pool.free.len()
    }
}

impl Pool {
    #[inline(always)]
    fn id(&self, index: u32) -> u32 {
        (self.slot as u32 + 1) << 16 | index
    }

    /// A node this worker may enqueue: a free one, an abandoned one passed since, or a new one.
    fn alloc(&mut self, nodes: &QNodes) -> Option<u32> {
        if let Some(id) = self.free.pop() {
            return Some(id);
        }
        self.reclaim(nodes);
        if let Some(id) = self.free.pop() {
            return Some(id);
        }
        // Relaxed: only this worker, the slot's owner, stores `created` (a later owner loads it
        // with Acquire in `Mql::new`).
        let created = nodes.created[self.slot].load(Ordering::Relaxed);
        if created as usize == CHUNK * CHUNKS {
            return None;
        }
        if created as usize % CHUNK == 0 {
            // Release: pairs with the Acquire in `QNodes::node`: the chunk's initialised nodes
            // are visible to whoever resolves an id in it.
            nodes.slots[self.slot][created as usize / CHUNK]
                .store(Box::into_raw(Chunk::new()), Ordering::Release);
        }
        // Release: pairs with the Acquire in `Mql::new` (a later worker of the slot).
        nodes.created[self.slot].store(created + 1, Ordering::Release);
        Some(self.id(created))
    }

    /// Moves the abandoned nodes a passer has marked IDLE to the free list.
    fn reclaim(&mut self, nodes: &QNodes) {
        let free = &mut self.free;
        // Acquire: pairs with the passer's Release in `done` (its last read of the node's
        // `next` happens before this worker reuses the node).
        self.abandoned.retain(|&id| {
            let idle = nodes.node(id).state.load(Ordering::Acquire) == IDLE;
            if idle {
                free.push(id);
            }
            !idle
        });
    }

    /// Becomes the head holding the write lock if the word is `expect` (0: free; 1: one
    /// reader, the caller, and no one queued).
    #[inline]
    fn head_if(&mut self, nodes: &QNodes, word: &AtomicU64, expect: u64) -> Grant {
        let Some(me) = self.alloc(nodes) else { return Grant::No };
        let node = nodes.node(me);
        // Relaxed: the node is this worker's until the CAS below publishes it (Release).
        node.next.store(NONE, Ordering::Relaxed);
        node.state.store(TURN, Ordering::Relaxed);
        // AcqRel: Acquire pairs with the previous holders' releases; Release publishes the
        // node's fields to the next requester, which links itself into `next`.
        match word.compare_exchange(expect, with_tail(0, me), Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => Grant::Write(me),
            Err(_) => {
                self.idle(nodes, me);
                Grant::No
            }
        }
    }

    fn acquire(
        &mut self,
        nodes: &QNodes,
        word: &AtomicU64,
        write: bool,
        patience: Patience,
    ) -> Grant {
        let Some(me) = self.alloc(nodes) else { return Grant::No };
        let node = nodes.node(me);
        // Relaxed: the node is this worker's until the enqueuing CAS below publishes it (Release).
        node.next.store(NONE, Ordering::Relaxed);
        node.state.store(WAITING, Ordering::Relaxed);
        // Enqueue. AcqRel: Release publishes the node's fields to the next requester (which
        // writes our `next`) and to the one that passes us the turn; Acquire pairs with the
        // previous tail's enqueue, whose node we link into, and with the last release.
        let mut cur = word.load(Ordering::Relaxed);
        let pred = loop {
            match word.compare_exchange_weak(
                cur,
                with_tail(cur, me),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break tail(cur),
                Err(now) => cur = now,
            }
        };
        let mut spins = 0u32;
        let mut out_of_patience = || match patience {
            Patience::Forever => false,
            Patience::Spins(n) => {
                spins += 1;
                spins > n
            }
        };
        if pred != NONE {
            // Release: pairs with the Acquire load of `next` by the predecessor's passer.
            nodes.node(pred).next.store(me, Ordering::Release);
            let mut wait = spin_wait();
            // Acquire: pairs with the passer's Release CAS to TURN (what the previous writer
            // did under the lock happens before our turn).
            while node.state.load(Ordering::Acquire) == WAITING {
                if out_of_patience() {
                    // On success the node belongs to the queue until a passer marks it IDLE;
                    // on failure the turn came first (Acquire, as above).
                    match node.state.compare_exchange(
                        WAITING,
                        ABANDONED,
                        Ordering::Relaxed,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            self.abandoned.push(me);
                            return Grant::No;
                        }
                        Err(_) => break,
                    }
                }
                wait.spin();
            }
        }
        // Our turn: we are the head.
        if !write {
            // Relaxed: the turn (the Acquire above, or the enqueue's when the queue was empty)
            // already orders us after the previous writer; the pass below publishes the count
            // to the writer behind us.
            word.fetch_add(1, Ordering::Relaxed);
            self.pass(nodes, word, me);
            return Grant::Read;
        }
        let mut wait = spin_wait();
        // Acquire: pairs with the Release of the readers' `release_read`.
        while readers(word.load(Ordering::Acquire)) != 0 {
            if out_of_patience() {
                self.pass(nodes, word, me);
                return Grant::No;
            }
            wait.spin();
        }
        Grant::Write(me)
    }

    /// Passes the turn from the head node `n` (ours) to its successor: closes the queue if it
    /// has none, else grants it, passing on through every abandoned node met (each marked
    /// IDLE for its owner once passed).
    fn pass(&mut self, nodes: &QNodes, word: &AtomicU64, mut n: u32) {
        let mut own = true;
        loop {
            let node = nodes.node(n);
            // Acquire: pairs with the successor's Release link.
            let mut next = node.next.load(Ordering::Acquire);
            if next == NONE {
                let mut cur = word.load(Ordering::Relaxed);
                while tail(cur) == n {
                    // Release: what the writer did under the lock happens before the next
                    // acquirer's Acquire on the word.
                    match word.compare_exchange_weak(
                        cur,
                        with_tail(cur, NONE),
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => {
                            self.done(nodes, n, own);
                            return;
                        }
                        Err(now) => cur = now,
                    }
                }
                // A successor swapped itself in and is about to link.
                let mut wait = spin_wait();
                loop {
                    next = node.next.load(Ordering::Acquire);
                    if next != NONE {
                        break;
                    }
                    wait.spin();
                }
            }
            self.done(nodes, n, own);
            // Release: pairs with the successor's Acquire of its state (the turn orders it
            // after us).
            match nodes.node(next).state.compare_exchange(
                WAITING,
                TURN,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(state) => {
                    debug_assert_eq!(state, ABANDONED, "a successor neither waiting nor gone");
                    n = next;
                    own = false;
                }
            }
        }
    }

    /// Node `n` is out of the queue: free for us, or IDLE for its owner to reclaim.
    #[inline]
    fn done(&mut self, nodes: &QNodes, n: u32, own: bool) {
        if own {
            self.idle(nodes, n);
        } else {
            // Release: pairs with the owner's Acquire in `alloc` or `Mql::new`; our reads of
            // the node happened before.
            nodes.node(n).state.store(IDLE, Ordering::Release);
        }
    }

    /// Returns our node `n` to the free list, IDLE (a later worker of the slot takes over the
    /// IDLE nodes).
    #[inline]
    fn idle(&mut self, nodes: &QNodes, n: u32) {
        // Relaxed: read by this slot's owners only; a later owner synchronises with us through
        // the worker slot's hand-over.
        nodes.node(n).state.store(IDLE, Ordering::Relaxed);
        self.free.push(n);
    }
}

// Not under loom: these run on std's atomics and threads (`tests/loom_mql.rs` has the models).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use std::sync::atomic::AtomicI64;
    use std::time::{Duration, Instant};

    fn handles(n: usize) -> (Arc<QNodes>, Vec<Mql>) {
        let nodes = Arc::new(QNodes::new(n).unwrap());
        let hs = (0..n).map(|s| Mql::new(nodes.clone(), s)).collect();
        (nodes, hs)
    }

    /// Spins until `f` holds: a deadlock detector (the other thread needs microseconds).
    fn until(what: &str, f: impl Fn() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(
                t.elapsed() < Duration::from_secs(300),
                "{what} never happened (deadlock detector)"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn without_contention_readers_share_and_a_writer_excludes_them() {
        let (_n, mut hs) = handles(1);
        let word = AtomicU64::new(0);
        assert!(Mql::try_read(&word) && Mql::try_read(&word));
        assert_eq!(Mql::readers(&word), 2);
        assert_eq!(hs[0].try_write(&word), Grant::No);
        assert_eq!(hs[0].try_upgrade(&word), Grant::No, "two readers");
        Mql::release_read(&word);
        let Grant::Write(n) = hs[0].try_upgrade(&word) else { panic!("a sole reader upgrades") };
        assert!(Mql::queued(&word) && Mql::readers(&word) == 0);
        assert!(!Mql::try_read(&word), "a writer holds it");
        assert_eq!(hs[0].acquire(&word, false, Patience::Spins(3)), Grant::No);
        assert_eq!(hs[0].abandoned(), 1, "the cancelled reader's node waits in the queue");
        hs[0].release_write(&word, n);
        assert!(Mql::is_free(&word), "the release passed through the abandoned node");
        let gone = hs[0].pool.abandoned[0];
        assert_eq!(hs[0].nodes.node(gone).state.load(Ordering::Relaxed), IDLE, "and marked it");
        let Grant::Write(m) = hs[0].acquire(&word, true, Patience::Forever) else { panic!() };
        hs[0].release_write(&word, m);
        assert_eq!(word.load(Ordering::Relaxed), 0);
    }

    /// A waiter that gives up leaves its node in the queue; the release passes the lock through
    /// it to the next waiter, and the owner reuses the node afterwards.
    #[test]
    fn a_cancelled_waiter_is_passed_through_and_its_node_reused() {
        let (_n, hs) = handles(3);
        let [mut a, mut b, mut c]: [Mql; 3] = hs.try_into().ok().unwrap();
        let word = AtomicU64::new(0);
        let Grant::Write(held) = a.try_write(&word) else { panic!() };
        let after_b = std::thread::scope(|s| {
            s.spawn(|| assert_eq!(b.acquire(&word, true, Patience::Spins(10)), Grant::No))
                .join()
                .unwrap();
            word.load(Ordering::Relaxed)
        });
        assert_eq!(b.abandoned(), 1);
        assert_ne!(tail(after_b), tail(with_tail(0, held)), "b's node is the tail");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let g = c.acquire(&word, false, Patience::Forever);
                assert_eq!(g, Grant::Read, "c reads once a is done");
                assert_eq!(Mql::readers(&word), 1);
                Mql::release_read(&word);
            });
            until("c queueing behind b", || tail(word.load(Ordering::Relaxed)) != tail(after_b));
            assert!(!waiter.is_finished(), "c waits behind a's write lock");
            a.release_write(&word, held);
            waiter.join().unwrap();
        });
        assert_eq!(word.load(Ordering::Relaxed), 0);
        let Grant::Write(n) = b.acquire(&word, true, Patience::Forever) else { panic!() };
        assert_eq!((b.abandoned(), b.free()), (0, 0), "b reused its passed node");
        b.release_write(&word, n);
    }

    /// A writer queues behind readers and a reader behind the waiting writer (FIFO); a writer
    /// that gives up at the head hands its turn on.
    #[test]
    fn writers_wait_for_readers_ahead_and_readers_wait_for_writers_ahead() {
        let (_n, hs) = handles(2);
        let [mut w, mut r]: [Mql; 2] = hs.try_into().ok().unwrap();
        let word = AtomicU64::new(0);
        assert!(Mql::try_read(&word));
        assert_eq!(w.acquire(&word, true, Patience::Spins(20)), Grant::No, "cancelled at the head");
        assert_eq!((w.abandoned(), Mql::queued(&word)), (0, false), "the head left cleanly");
        let word = &word;
        std::thread::scope(|s| {
            let writer = s.spawn(move || {
                let Grant::Write(n) = w.acquire(word, true, Patience::Forever) else { panic!() };
                assert_eq!(Mql::readers(word), 0);
                (w, n)
            });
            until("the writer queueing", || Mql::queued(word));
            assert!(!Mql::try_read(word), "a reader may not overtake the waiting writer");
            assert_eq!(r.acquire(word, false, Patience::Spins(5)), Grant::No);
            Mql::release_read(word);
            let (mut w, n) = writer.join().unwrap();
            w.release_write(word, n);
        });
        assert_eq!(word.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn too_many_slots_are_refused() {
        assert_eq!(
            QNodes::new(MAX_SLOTS + 1).err().unwrap(),
            format!("the queue lock supports at most {MAX_SLOTS} workers, not {}", MAX_SLOTS + 1)
        );
    }

    /// Marks a writer inside (-1), asserting that no one else is.
    fn enter_alone(inside: &AtomicI64, what: &str) {
        let was = inside.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst);
        assert_eq!(was, Ok(0), "{what}");
    }

    /// Eight threads on two cores lock four words in every mode, with and without patience,
    /// 20 000 times each: writers are alone, readers share, nothing is lost, and every
    /// abandoned node is passed and reclaimed in the end.
    #[test]
    fn stress_mutual_exclusion_under_oversubscription() {
        const THREADS: usize = 8;
        const LOCKS: usize = 4;
        let (_n, hs) = handles(THREADS);
        let words: Vec<AtomicU64> = (0..LOCKS).map(|_| AtomicU64::new(0)).collect();
        // -1: a writer inside; n > 0: n readers inside.
        let inside: Vec<AtomicI64> = (0..LOCKS).map(|_| AtomicI64::new(0)).collect();
        let writes = AtomicU64::new(0);
        let hs: Vec<Mql> = std::thread::scope(|s| {
            let ts: Vec<_> = hs
                .into_iter()
                .enumerate()
                .map(|(i, mut h)| {
                    let (words, inside, writes) = (&words, &inside, &writes);
                    s.spawn(move || {
                        let mut rng = rand::rngs::SmallRng::seed_from_u64(i as u64 + 1);
                        for _ in 0..20_000 {
                            let l = rng.random_range(0..LOCKS);
                            let (word, inside) = (&words[l], &inside[l]);
                            let patience = if rng.random_bool(0.5) {
                                Patience::Forever
                            } else {
                                Patience::Spins(rng.random_range(0..40))
                            };
                            let g = match rng.random_range(0..6) {
                                0 => {
                                    if Mql::try_read(word) {
                                        Grant::Read
                                    } else {
                                        Grant::No
                                    }
                                }
                                1 => h.try_write(word),
                                2 | 3 => h.acquire(word, false, patience),
                                _ => h.acquire(word, true, patience),
                            };
                            match g {
                                Grant::Read => {
                                    let before = inside.fetch_add(1, Ordering::SeqCst);
                                    assert!(before >= 0, "a reader entered beside a writer");
                                    std::hint::spin_loop();
                                    let g = if rng.random_bool(0.2) {
                                        h.try_upgrade(word)
                                    } else {
                                        Grant::No
                                    };
                                    inside.fetch_sub(1, Ordering::SeqCst);
                                    match g {
                                        Grant::Write(n) => {
                                            enter_alone(inside, "an upgrade beside a reader");
                                            inside.store(0, Ordering::SeqCst);
                                            h.release_write(word, n);
                                        }
                                        _ => Mql::release_read(word),
                                    }
                                }
                                Grant::Write(n) => {
                                    enter_alone(inside, "a writer entered beside another holder");
                                    writes.fetch_add(1, Ordering::Relaxed);
                                    if rng.random_bool(0.1) {
                                        std::thread::yield_now();
                                    }
                                    inside.store(0, Ordering::SeqCst);
                                    h.release_write(word, n);
                                }
                                Grant::No => {}
                            }
                        }
                        h
                    })
                })
                .collect();
            ts.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(words.iter().all(|w| w.load(Ordering::Relaxed) == 0), "a lock left held");
        assert!(writes.load(Ordering::Relaxed) > 0);
        for (i, mut h) in hs.into_iter().enumerate() {
            let before = h.abandoned();
            // Every queue is empty, so every abandoned node was passed.
            h.reclaim();
            assert_eq!(h.abandoned(), 0, "thread {i}: {before} nodes abandoned, some never passed");
        }
    }
}
