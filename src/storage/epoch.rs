//! Epochs: the global clock of Silo-style commit and the grace periods of memory reclamation.
//!
//! A global epoch `E` is advanced by a background thread every `epoch_interval` (Silo: 40 ms).
//! Every worker owns a cache-padded slot where it publishes the epoch it entered its current
//! transaction in, or `IDLE` between transactions. Something unlinked while the global epoch was
//! `e` can be freed once every slot is above `e` (or idle): no transaction that could have reached
//! it is still running. This module only answers *when*; what is retired and how it is unlinked is
//! the business of `storage::reclaim` and the protocol.

use super::snapshot::SnapshotClock;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Slot value of a worker outside any transaction.
pub const IDLE: u64 = u64::MAX;

/// The epoch state shared by all workers of a database.
pub struct Epochs {
    global: CachePadded<AtomicU64>,
    slots: Box<[CachePadded<AtomicU64>]>,
    taken: Mutex<Vec<bool>>,
    /// Snapshot boundaries for read-only transactions (off unless the protocol keeps
    /// snapshots, see `storage::snapshot`).
    pub snapshots: SnapshotClock,
}

impl Epochs {
    /// Epoch state for at most `max_workers` workers, starting at epoch 1.
    pub fn new(max_workers: usize) -> Self {
        Epochs {
            global: CachePadded::new(AtomicU64::new(1)),
            slots: (0..max_workers).map(|_| CachePadded::new(AtomicU64::new(IDLE))).collect(),
            taken: Mutex::new(vec![false; max_workers]),
            snapshots: SnapshotClock::new(max_workers),
        }
    }

    /// The current global epoch.
    #[inline]
    pub fn global(&self) -> u64 {
        // Acquire: pairs with the Release in `advance`.
        self.global.load(Ordering::Acquire)
    }

    /// The current global epoch, read in the single total order of SeqCst operations (the
    /// snapshot boundary's argument, see `storage::snapshot`).
    #[inline]
    pub fn global_seqcst(&self) -> u64 {
        self.global.load(Ordering::SeqCst)
    }

    /// Advances the global epoch by one.
    pub fn advance(&self) {
        // SeqCst (Release suffices for the Acquire loads): a commit's epoch read after a SeqCst
        // fence then sees every advance that precedes the fence in the SeqCst order, which the
        // snapshot boundary's argument needs (see `storage::snapshot`).
        self.global.fetch_add(1, Ordering::SeqCst);
    }

    /// Maximum number of registered workers.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Claims a worker slot, or `None` when all are taken.
    pub fn register(&self) -> Option<usize> {
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        let i = taken.iter().position(|t| !t)?;
        taken[i] = true;
        Some(i)
    }

    /// Releases a worker slot.
    pub fn unregister(&self, slot: usize) {
        self.slots[slot].store(IDLE, Ordering::Release);
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        taken[slot] = false;
    }

    /// Publishes that worker `slot` starts a transaction; returns the epoch entered.
    #[inline]
    pub fn enter(&self, slot: usize) -> u64 {
        let e = self.global.load(Ordering::SeqCst);
        // SeqCst store + fence: the slot is visible to a reclaimer before this worker reads any
        // shared structure (pairs with the fence in `min_active`'s caller, see module docs).
        self.slots[slot].store(e, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Epoch);
        e
    }

    /// Publishes that worker `slot` is between transactions.
    #[inline]
    pub fn exit(&self, slot: usize) {
        // Release: everything the transaction read happens before a reclaimer sees IDLE.
        self.slots[slot].store(IDLE, Ordering::Release);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Epoch);
    }

    /// The epoch a reclaimer stamps on something it just unlinked.
    #[inline]
    pub fn retire_stamp(&self) -> u64 {
        fence(Ordering::SeqCst);
        self.global.load(Ordering::SeqCst)
    }

    /// The smallest epoch any worker is in (`IDLE` if none is in a transaction). Items stamped
    /// with an epoch below this value are unreachable by every running transaction.
    pub fn min_active(&self) -> u64 {
        self.min_active_where(|_| true)
    }

    /// [`Epochs::min_active`] over the workers whose slot `counts` accepts (asked after the
    /// slot's epoch was loaded, and only of slots in a transaction).
    pub fn min_active_where(&self, mut counts: impl FnMut(usize) -> bool) -> u64 {
        fence(Ordering::SeqCst);
        let mut min = IDLE;
        for (i, s) in self.slots.iter().enumerate() {
            let e = s.load(Ordering::SeqCst);
            if e < min && counts(i) {
                min = e;
            }
        }
        min
    }
}

/// The background thread that advances the global epoch. Stops and joins on drop.
pub struct EpochAdvancer {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl EpochAdvancer {
    /// Starts advancing `epochs` every `interval`.
    pub fn start(epochs: Arc<Epochs>, interval: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("txlab-epoch".into())
            .spawn(move || {
                while !stop2.load(Ordering::Acquire) {
                    std::thread::park_timeout(interval);
                    epochs.advance();
                    epochs.snapshots.refresh(&epochs);
                }
            })
            .expect("spawn the epoch thread");
        EpochAdvancer { stop, handle: Some(handle) }
    }
}

impl Drop for EpochAdvancer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_active_tracks_the_oldest_running_worker() {
        let e = Epochs::new(4);
        let a = e.register().unwrap();
        let b = e.register().unwrap();
        assert_eq!(e.min_active(), IDLE);
        assert_eq!(e.enter(a), 1);
        e.advance();
        e.advance();
        assert_eq!(e.enter(b), 3);
        assert_eq!(e.min_active(), 1);
        e.exit(a);
        assert_eq!(e.min_active(), 3);
        e.exit(b);
        assert_eq!(e.min_active(), IDLE);
    }

    #[test]
    fn registration_is_bounded_and_slots_are_reused() {
        let e = Epochs::new(2);
        let a = e.register().unwrap();
        let _b = e.register().unwrap();
        assert!(e.register().is_none());
        e.unregister(a);
        assert_eq!(e.register(), Some(a));
    }

    #[test]
    fn the_advancer_moves_the_epoch_and_stops_on_drop() {
        let e = Arc::new(Epochs::new(1));
        let adv = EpochAdvancer::start(e.clone(), Duration::from_millis(1));
        let start = e.global();
        let t = std::time::Instant::now();
        while e.global() < start + 3 {
            // A deadlock detector: a 1 ms advancer needs milliseconds, even on a loaded machine.
            assert!(
                t.elapsed() < Duration::from_secs(300),
                "epoch never advanced (deadlock detector)"
            );
            std::thread::yield_now();
        }
        drop(adv);
        let stopped = e.global();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(e.global(), stopped);
    }
}
