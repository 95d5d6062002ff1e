//! MOCC's record header: Silo's TID word, the record's temperature and its pessimistic
//! reader-writer lock.
//!
//! ```text
//! tid:   Silo's TID word (occ::tid)
//! temp:  [period (56 bits)][temperature (8 bits)]     the period the temperature was counted in
//! lock:  lock=rwlock: [W][readers (63 bits)]          0 = free
//!        lock=mql:    [queue tail (32)][readers (32)]  (mocc::mql)
//! ```
//!
//! **Temperature** is an approximate count of the read validations that failed on the record in
//! the current *period* (a number of Silo epochs, the `temperature-reset` option): it goes up by
//! one with probability 2^-temperature, so it is about log2 of the failures, as in MOCC §3.1 and
//! CCBench. A count from an earlier period reads as 0: the periodic reset happens lazily, per
//! record, on the next bump (CCBench §3.3: the original's wholesale reset invalidates many cache
//! lines at once and races with increments).
//!
//! **The lock** is the pessimistic lock MOCC takes on hot records during the read phase and on
//! the write set at commit: the queue lock of `mocc::mql` (MOCC's MQL, `lock=mql`) or a
//! reader-writer lock word (CCBench's choice, `lock=rwlock`, whose methods are below).
//! It only schedules transactions: correctness still comes from Silo's validation of the TID
//! words, which is why a transaction may take these locks out of order, give them up, or not
//! take them at all.

use crate::protocols::occ::tid::Tid;
use crate::protocols::occ::OccRecord;
use crate::storage::row_store::RecordHeader;
use crate::util::SpinWait;
use std::sync::atomic::{AtomicU64, Ordering};

/// The highest temperature (2^20 failures in one period, CCBench's cap).
pub const TEMP_MAX: u64 = 20;
const TEMP_BITS: u32 = 8;
const TEMP_MASK: u64 = (1 << TEMP_BITS) - 1;

/// Writer bit of the lock word.
const WRITER: u64 = 1 << 63;

/// The header of a MOCC record.
#[repr(C, align(8))]
pub struct MoccRecord {
    /// Silo's TID word.
    pub tid: AtomicU64,
    /// `[period][temperature]`, see the module docs.
    pub temp: AtomicU64,
    /// The pessimistic lock's word (its layout depends on the `lock` option).
    pub lock: AtomicU64,
}

// SAFETY: three atomics; zero is a valid header (TID 0, temperature 0 of period 0, lock free),
// and the TID word is always overwritten before the slot is published; no Drop; align 8.
unsafe impl RecordHeader for MoccRecord {}

impl MoccRecord {
    /// The record's temperature in `period` (0 if it was last counted in another period).
    #[inline(always)]
    pub fn temperature(&self, period: u64) -> u64 {
        // Relaxed: a scheduling hint; nothing is read through it.
        let t = self.temp.load(Ordering::Relaxed);
        if t >> TEMP_BITS == period {
            t & TEMP_MASK
        } else {
            0
        }
    }

    /// Counts a failed read validation in `period`: the temperature goes up by one with
    /// probability 2^-temperature (`coin` is a uniformly random number). One attempt: a bump lost
    /// to a concurrent one is an approximate counter's error, not worth a retry loop.
    pub fn bump(&self, period: u64, coin: u64) {
        // Relaxed: see `temperature`.
        let old = self.temp.load(Ordering::Relaxed);
        let cur = if old >> TEMP_BITS == period { old & TEMP_MASK } else { 0 };
        if cur >= TEMP_MAX || coin & ((1u64 << cur) - 1) != 0 {
            return;
        }
        let new = (period << TEMP_BITS) | (cur + 1);
        // Relaxed: the temperature is an approximate counter that orders nothing (see
        // `temperature`).
        let _ = self.temp.compare_exchange(old, new, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Tries to take the lock in `write` or read mode once.
    #[inline]
    pub fn try_lock(&self, write: bool) -> bool {
        // Acquire on success: pairs with the Release of the unlocks, so that a holder sees what
        // the previous holder did under the lock (the lock orders transactions; the data they
        // read is still validated through the TID word).
        if write {
            self.lock.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
        } else {
            // Fails only while a writer holds it (another reader arriving at once is retried):
            // under NoWait any other failure would be a spurious abort.
            let mut cur = self.lock.load(Ordering::Relaxed);
            while cur & WRITER == 0 {
                match self.lock.compare_exchange_weak(
                    cur,
                    cur + 1,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        crate::util::shared_writes::note(
                            crate::util::shared_writes::Site::ReadMark,
                        );
                        return true;
                    }
                    Err(now) => cur = now,
                }
            }
            false
        }
    }

    /// Takes the lock in `write` or read mode, waiting (spinning, then yielding) while it is
    /// held in a conflicting mode. Readers do not queue behind waiting writers: MOCC waits only
    /// in canonical order, and a reader waiting on a waiting writer would break that argument.
    pub fn lock(&self, write: bool) {
        let mut spin = SpinWait::default();
        while !self.try_lock(write) {
            spin.spin();
        }
    }

    /// Turns this transaction's read lock into a write lock if it is the only reader.
    #[inline]
    pub fn try_upgrade(&self) -> bool {
        // Acquire: as in `try_lock`.
        self.lock.compare_exchange(1, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Releases the lock held in `write` or read mode.
    #[inline]
    pub fn unlock(&self, write: bool) {
        // Release: pairs with the Acquire of the next `try_lock`.
        if write {
            debug_assert_eq!(self.lock.load(Ordering::Relaxed), WRITER);
            self.lock.store(0, Ordering::Release);
        } else {
            // Release: a reader's unlock; pairs with a writer's Acquire when it takes the word.
            let before = self.lock.fetch_sub(1, Ordering::Release);
            crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
            debug_assert!(before & !WRITER > 0, "a read unlock without a reader");
        }
    }

    /// Whether no one holds the lock.
    #[inline(always)]
    pub fn lock_free(&self) -> bool {
        // Relaxed: a scheduling check (see the fast path of MOCC's commit); the TID lock the
        // checker holds orders the data.
        self.lock.load(Ordering::Relaxed) == 0
    }

    /// Whether the lock is held in write mode (by anyone).
    pub fn write_locked(&self) -> bool {
        self.lock.load(Ordering::Relaxed) & WRITER != 0
    }

    /// The number of read-mode holders.
    pub fn readers(&self) -> u64 {
        self.lock.load(Ordering::Relaxed) & !WRITER
    }
}

impl OccRecord for MoccRecord {
    #[inline(always)]
    fn word(&self) -> &AtomicU64 {
        &self.tid
    }

    type Aux = ();

    #[inline(always)]
    fn aux(&self) {}

    crate::protocols::occ::tid::tid_word_methods!();

    #[inline]
    fn init_fresh(&self) {
        // A recycled slot starts cold. Its lock is left alone: a retry may still lock the slot
        // by a row id its retrospective lock list kept from before the slot was recycled (a
        // harmless lock, released by that transaction; resetting it would break the release).
        // Relaxed: the index insert that publishes the record orders this store.
        self.temp.store(0, Ordering::Relaxed);
        self.store(Tid(0).with(Tid::ABSENT | Tid::LOCK).0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> MoccRecord {
        MoccRecord { tid: AtomicU64::new(0), temp: AtomicU64::new(0), lock: AtomicU64::new(0) }
    }

    #[test]
    fn temperature_counts_per_period_and_reads_cold_in_a_new_one() {
        let r = rec();
        // A coin of 0 always wins: each bump adds one.
        for _ in 0..5 {
            r.bump(7, 0);
        }
        assert_eq!(r.temperature(7), 5);
        assert_eq!(r.temperature(8), 0, "a new period starts cold");
        // At temperature 5 a bump needs the coin's low five bits clear.
        r.bump(7, 0b10000);
        assert_eq!(r.temperature(7), 5);
        r.bump(7, 0b100000);
        assert_eq!(r.temperature(7), 6);
        // The first bump of a new period restarts the count.
        r.bump(8, 1);
        assert_eq!((r.temperature(8), r.temperature(7)), (1, 0));
        for _ in 0..100 {
            r.bump(8, 0);
        }
        assert_eq!(r.temperature(8), TEMP_MAX);
    }

    #[test]
    fn the_lock_excludes_writers_from_readers_and_upgrades_a_sole_reader() {
        let r = rec();
        assert!(r.try_lock(false) && r.try_lock(false));
        assert_eq!(r.readers(), 2);
        assert!(!r.try_lock(true), "readers hold it");
        assert!(!r.try_upgrade(), "two readers cannot upgrade");
        r.unlock(false);
        assert!(r.try_upgrade());
        assert!(r.write_locked());
        assert!(!r.try_lock(false) && !r.try_lock(true));
        r.unlock(true);
        assert_eq!(r.lock.load(Ordering::Relaxed), 0);
    }
}
