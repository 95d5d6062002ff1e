//! Fine-grained grace periods by quiescent states (QSBR, Cicada §3.8): memory a worker cut off
//! a shared structure can be reused once every worker that might still hold a pointer into it
//! has been *quiescent* (between transactions) since. The storage epochs answer the same
//! question every `epoch_ms` (40 ms by default), which is right for record slots and index
//! entries but lets a multi-version protocol's garbage versions go cold before they are reused:
//! at hundreds of thousands of updates per second that is tens of megabytes cycling through the
//! cache. Here the grace periods are as short as the workers' transactions.
//!
//! Each worker slot holds a counter, odd while the worker is inside a transaction (and may hold
//! pointers), even between transactions. A *generation* counter advances when every slot has
//! been quiescent since the last advance: it was even when looked at, or its counter moved on
//! (the transaction seen last time ended). Memory retired at generation `g` is safe to reuse
//! once the generation reaches `g + 2` ([`Quiescence::safe`]): the advance to `g + 1` comes after
//! the retirement, and its snapshot of the slots is taken after that advance, so every
//! transaction running at the retirement is over by the advance to `g + 2`. Advancing is
//! cooperative and non-blocking: a worker calls [`Quiescence::try_advance`] on its own schedule
//! (Cicada's, every `gc-interval-us`), and a worker that finds another advancing goes on. An
//! idle worker (its counter even) never holds the generation back.
//!
//! Readers that are not workers (a checkpoint's threads read rows while workers run) take one
//! of a few extra slots for the length of one read ([`Quiescence::reader`]), so the memory they
//! walk is not reused under them either.
//!
//! Written by hand: crossbeam-epoch and seize offer epoch-based reclamation with their own
//! global epochs and deferred-function queues; this needs only "every worker passed a
//! transaction boundary", checked on the caller's schedule, with the retired memory kept in the
//! caller's own queues (Cicada's freed versions go back to per-thread pools, not to an
//! allocator).

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Slots for readers that are not workers, after the workers' (more readers than this wait
/// for one to be free).
const READER_SLOTS: usize = 8;

/// The quiescence of up to `slots` workers. See the module docs.
pub struct Quiescence {
    /// Per worker slot, then per reader slot: odd inside a transaction (a read), even
    /// between them.
    slots: Box<[CachePadded<AtomicU64>]>,
    /// Per reader slot: claimed by a reader.
    claimed: Box<[CachePadded<AtomicBool>]>,
    workers: usize,
    /// Per slot, its counter as the last advance saw it (written only by the advancer).
    seen: Box<[AtomicU64]>,
    /// The generation.
    gen: CachePadded<AtomicU64>,
    /// Held by the worker advancing.
    advancing: AtomicBool,
}

impl Quiescence {
    /// Quiescence for `slots` workers, all quiescent.
    pub fn new(slots: usize) -> Self {
        let all = slots + READER_SLOTS;
        Quiescence {
            slots: (0..all).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
            claimed: (0..READER_SLOTS).map(|_| CachePadded::new(AtomicBool::new(false))).collect(),
            workers: slots,
            seen: (0..all).map(|_| AtomicU64::new(0)).collect(),
            gen: CachePadded::new(AtomicU64::new(0)),
            advancing: AtomicBool::new(false),
        }
    }

    /// Worker `slot` enters a transaction: from now on it may hold pointers into shared
    /// memory. SeqCst: the store must be ordered before the worker's first load of a pointer
    /// (on x86 an `xchg`), and pairs with the advancer's SeqCst load of the slot.
    #[inline]
    pub fn enter(&self, slot: usize) {
        let s = &self.slots[slot];
        // Relaxed: only this worker writes its slot.
        let v = s.load(Ordering::Relaxed);
        debug_assert!(v % 2 == 0, "slot {slot} entered twice");
        s.store(v + 1, Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Slot);
    }

    /// Worker `slot` leaves its transaction: it holds no pointer any more. Release: its loads
    /// of retired memory happen before an advancer that reads this (Acquire or SeqCst) lets
    /// the memory be reused.
    #[inline]
    pub fn exit(&self, slot: usize) {
        let s = &self.slots[slot];
        // Relaxed: only this worker writes its slot.
        let v = s.load(Ordering::Relaxed);
        debug_assert!(v % 2 == 1, "slot {slot} left without entering");
        s.store(v + 1, Ordering::Release);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Slot);
    }

    /// Whether worker `slot` is between transactions now. SeqCst: a refresh of Cicada's clocks
    /// loads it after raising its flag (see `protocols::cicada::clock`, idle threads), and
    /// pairs with `enter`'s SeqCst store.
    #[inline]
    pub fn idle(&self, slot: usize) -> bool {
        self.slots[slot].load(Ordering::SeqCst) % 2 == 0
    }

    /// Marks a reader that is not a worker as inside a read until the guard drops: it may hold
    /// pointers into shared memory meanwhile. Claims a free reader slot (spinning while all
    /// are taken: readers hold them for one read).
    pub fn reader(&self) -> ReaderGuard<'_> {
        let mut spin = crate::util::SpinWait::default();
        loop {
            for (i, c) in self.claimed.iter().enumerate() {
                // Acquire: pairs with the previous holder's Release in `drop`, after which its
                // slot is even.
                if !c.load(Ordering::Relaxed)
                    && c.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
                {
                    let slot = self.workers + i;
                    self.enter(slot);
                    return ReaderGuard { q: self, slot };
                }
            }
            spin.spin();
        }
    }

    /// The generation to stamp memory with that the caller has just made unreachable: taken
    /// after every store that unlinked it (a stamp read before an unlinking store does not
    /// cover it: a worker could enter in between, read the old link, and miss the next
    /// snapshot). The SeqCst fence orders the unlinking stores before the load: a worker whose `enter` comes
    /// later in the single total order sees the memory unreachable, and one that entered
    /// earlier is in the snapshot of the next advance (or gone by then).
    #[inline]
    pub fn retire_stamp(&self) -> u64 {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.gen.load(Ordering::SeqCst)
    }

    /// Whether memory retired at generation `retired` may be reused. Acquire: pairs with the
    /// advancer's SeqCst increment, after which it had seen every transaction that could hold
    /// the memory end.
    #[inline]
    pub fn safe(&self, retired: u64) -> bool {
        self.gen.load(Ordering::Acquire) >= retired.saturating_add(2)
    }

    /// Advances the generation if every slot has been quiescent since the last advance; a no-op
    /// if another worker is advancing. Returns whether it advanced.
    pub fn try_advance(&self) -> bool {
        // Acquire: pairs with the previous advancer's Release, whose snapshot in `seen` this
        // one reads.
        if self.advancing.swap(true, Ordering::Acquire) {
            return false;
        }
        let passed = self.slots.iter().zip(self.seen.iter()).all(|(s, seen)| {
            // SeqCst: pairs with `enter` (a worker that entered before this load is seen odd)
            // and orders after `exit`'s Release.
            let v = s.load(Ordering::SeqCst);
            // Relaxed: written only under `advancing`.
            v % 2 == 0 || v != seen.load(Ordering::Relaxed)
        });
        if passed {
            self.gen.fetch_add(1, Ordering::SeqCst);
            // The snapshot after the advance: a transaction running when memory was retired at
            // the old generation is either over or seen here, and must end before the next
            // advance.
            for (s, seen) in self.slots.iter().zip(self.seen.iter()) {
                // SeqCst: after the increment in the single total order.
                seen.store(s.load(Ordering::SeqCst), Ordering::Relaxed);
            }
        }
        // Release: publishes `seen` to the next advancer.
        self.advancing.store(false, Ordering::Release);
        passed
    }
}

/// A reader's claim on a reader slot, inside a read (see [`Quiescence::reader`]).
pub struct ReaderGuard<'a> {
    q: &'a Quiescence,
    slot: usize,
}

impl Drop for ReaderGuard<'_> {
    fn drop(&mut self) {
        self.q.exit(self.slot);
        // Release: the slot's even counter before the claim is given back.
        self.q.claimed[self.slot - self.q.workers].store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory retired while a worker is inside a transaction stays unsafe until that
    /// transaction ends and two advances pass; idle workers hold nothing back; an advance
    /// waits for every busy worker to pass a boundary.
    #[test]
    fn memory_is_safe_two_advances_after_every_holder_left() {
        let q = Quiescence::new(3);
        // All idle: advances go through.
        assert!(q.try_advance() && q.try_advance());
        let g0 = q.retire_stamp();
        q.enter(0);
        let retired = q.retire_stamp();
        assert!(!q.safe(retired));
        assert!(q.try_advance(), "the snapshot of the last advance had worker 0 idle");
        assert!(!q.try_advance(), "worker 0 is still in the transaction seen");
        assert!(!q.try_advance());
        assert!(!q.safe(retired), "worker 0 may still hold the memory");
        q.exit(0);
        assert!(q.try_advance());
        assert!(q.safe(retired));
        assert_eq!(q.retire_stamp(), g0 + 2);
        // A worker that moved on to another transaction has passed a boundary.
        q.enter(1);
        assert!(q.try_advance());
        let retired = q.retire_stamp();
        q.exit(1);
        q.enter(1);
        assert!(q.try_advance(), "worker 1's transaction seen has ended");
        assert!(!q.safe(retired));
        assert!(!q.try_advance(), "its next one has not");
        q.exit(1);
        assert!(q.try_advance() && q.safe(retired));
    }

    /// A reader that is not a worker holds memory retired during its read until it is done;
    /// more readers than reader slots wait for one, and every slot is given back.
    #[test]
    fn a_reader_holds_back_reuse_like_a_worker() {
        let q = Quiescence::new(1);
        let r = q.reader();
        let retired = q.retire_stamp();
        assert!(q.try_advance(), "the last snapshot had the reader slot idle");
        assert!(!q.try_advance(), "the reader is still inside its read");
        assert!(!q.safe(retired));
        drop(r);
        assert!(q.try_advance() && q.safe(retired));
        std::thread::scope(|s| {
            for _ in 0..3 * READER_SLOTS {
                s.spawn(|| {
                    for _ in 0..1_000 {
                        let _r = q.reader();
                    }
                });
            }
        });
        assert!(q.claimed.iter().all(|c| !c.load(Ordering::SeqCst)));
        assert!(q.slots.iter().all(|s| s.load(Ordering::SeqCst) % 2 == 0));
    }

    /// Many threads on 2 cores entering and leaving while others retire and check: a retired
    /// value is never seen safe while a thread that was inside a transaction at its retirement
    /// is still inside that transaction.
    #[test]
    fn no_transaction_outlives_a_grace_period() {
        use std::sync::atomic::AtomicU64 as A;
        const THREADS: usize = 6;
        const ROUNDS: u64 = 20_000;
        let q = Quiescence::new(THREADS);
        // Per thread: the number of its transaction in progress (0: none).
        let running: Vec<A> = (0..THREADS).map(|_| A::new(0)).collect();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (q, running) = (&q, &running);
                s.spawn(move || {
                    let mut pending: std::collections::VecDeque<(u64, Vec<(usize, u64)>)> =
                        Default::default();
                    for n in 1..=ROUNDS {
                        q.enter(t);
                        running[t].store(n, Ordering::SeqCst);
                        // Retire something, noting first who is inside which transaction
                        // (so each was running at the retirement).
                        let inside: Vec<(usize, u64)> = (0..THREADS)
                            .map(|o| (o, running[o].load(Ordering::SeqCst)))
                            .filter(|&(_, n)| n != 0)
                            .collect();
                        pending.push_back((q.retire_stamp(), inside));
                        running[t].store(0, Ordering::SeqCst);
                        q.exit(t);
                        q.try_advance();
                        while pending.front().is_some_and(|(g, _)| q.safe(*g)) {
                            let (_, inside) = pending.pop_front().unwrap();
                            for (o, n) in inside {
                                let now = running[o].load(Ordering::SeqCst);
                                assert_ne!(now, n, "thread {o} is still in transaction {n}");
                            }
                        }
                    }
                });
            }
        });
        assert!(q.retire_stamp() > 0);
    }
}
