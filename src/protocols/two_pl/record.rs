//! The 2PL record header: a reader-writer lock word and a state word.
//!
//! ```text
//!  63  62          53 52                                              0
//! +---+--------------+-------------------------------------------------+
//! | W | readers (10) | timestamp of the oldest holder (53 bits)        |
//! +---+--------------+-------------------------------------------------+
//! ```
//! An unlocked word is 0.

use crate::protocols::common::state::{RowState, ABSENT, PRESENT};
use crate::storage::reclaim::Unlink;
use crate::storage::row_store::RecordHeader;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writer bit.
pub const WRITER: u64 = 1 << 63;
const READER_ONE: u64 = 1 << 53;
const READER_MASK: u64 = 0x3FF << 53;
/// Mask of the timestamp field.
pub const TS_MASK: u64 = READER_ONE - 1;
const _: () = assert!(WRITER & READER_MASK == 0 && READER_MASK & TS_MASK == 0);
const _: () = assert!(WRITER | READER_MASK | TS_MASK == u64::MAX);

/// The header of a 2PL record.
#[repr(C, align(16))]
pub struct TwoPlRecord {
    /// The lock word.
    pub lock: AtomicU64,
    /// Present, absent or unlinked.
    pub state: RowState,
}

// SAFETY: two atomic words; zero (unlocked, absent) is valid; no Drop; align 16 <= 64.
unsafe impl RecordHeader for TwoPlRecord {}

impl crate::protocols::common::state::HasState for TwoPlRecord {
    #[inline]
    fn state(&self) -> &crate::protocols::common::state::RowState {
        &self.state
    }
}

impl TwoPlRecord {
    /// Takes a shared lock, or returns the holder's timestamp.
    #[inline]
    pub fn try_read(&self, ts: u64) -> Result<(), u64> {
        let mut cur = self.lock.load(Ordering::Relaxed);
        loop {
            if cur & WRITER != 0 || cur & READER_MASK == READER_MASK {
                return Err(cur & TS_MASK);
            }
            let oldest = if cur & READER_MASK == 0 { ts } else { (cur & TS_MASK).min(ts) };
            let new = (cur & READER_MASK) + READER_ONE + oldest;
            // Acquire: pairs with the Release in `unlock_*`.
            match self.lock.compare_exchange_weak(cur, new, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(v) => cur = v,
            }
        }
    }

    /// Takes an exclusive lock, or returns the holder's timestamp.
    #[inline]
    pub fn try_write(&self, ts: u64) -> Result<(), u64> {
        match self.lock.compare_exchange(0, WRITER | ts, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Ok(()),
            Err(v) => Err(v & TS_MASK),
        }
    }

    /// Upgrades a shared lock held alone to an exclusive one. `Err(oldest)` when other readers
    /// hold it: `oldest` is the smallest reader timestamp, which equals the caller's own exactly
    /// when the caller is the oldest reader (the field never rises while readers remain).
    #[inline]
    pub fn try_upgrade(&self, ts: u64) -> Result<(), u64> {
        let cur = self.lock.load(Ordering::Relaxed);
        if cur & (WRITER | READER_MASK) == READER_ONE
            && self
                .lock
                .compare_exchange(cur, WRITER | ts, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return Ok(());
        }
        Err(cur & TS_MASK)
    }

    /// Releases a shared lock.
    #[inline]
    pub fn unlock_read(&self) {
        let mut cur = self.lock.load(Ordering::Relaxed);
        loop {
            debug_assert!(cur & READER_MASK != 0 && cur & WRITER == 0);
            let new = if cur & READER_MASK == READER_ONE { 0 } else { cur - READER_ONE };
            // Release: the reads made under the lock happen before a writer's acquisition.
            match self.lock.compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }

    /// Releases an exclusive lock.
    #[inline]
    pub fn unlock_write(&self) {
        // Release: publishes the payload written under the lock.
        self.lock.store(0, Ordering::Release);
    }

    /// The GC's unlink step, under the exclusive lock.
    pub fn unlink(&self) -> Unlink {
        if self.try_write(0).is_err() {
            return Unlink::Busy;
        }
        let r = match self.state.unlink() {
            ABSENT => Unlink::Unlinked,
            PRESENT => Unlink::Revived,
            _ => Unlink::Gone,
        };
        self.unlock_write();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> TwoPlRecord {
        TwoPlRecord { lock: AtomicU64::new(0), state: RowState::default() }
    }

    #[test]
    fn readers_share_writers_exclude_and_the_oldest_reader_timestamp_is_kept() {
        let r = rec();
        r.try_read(50).unwrap();
        r.try_read(30).unwrap();
        r.try_read(40).unwrap();
        assert_eq!(r.try_write(10), Err(30));
        assert_eq!(r.try_upgrade(50), Err(30));
        r.unlock_read();
        r.unlock_read();
        assert_eq!(r.try_upgrade(40), Ok(()), "one reader left may upgrade");
        assert_eq!(r.try_read(7), Err(40));
        r.unlock_write();
        assert_eq!(r.lock.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn unlink_needs_the_lock_and_an_absent_record() {
        let r = rec();
        r.state.set(PRESENT);
        assert_eq!(r.unlink(), Unlink::Revived);
        r.state.set(ABSENT);
        r.try_read(5).unwrap();
        assert_eq!(r.unlink(), Unlink::Busy);
        r.unlock_read();
        assert_eq!(r.unlink(), Unlink::Unlinked);
        assert_eq!(r.state.get(), crate::protocols::common::state::UNLINKED);
        assert_eq!(r.lock.load(Ordering::Relaxed), 0);
        assert_eq!(r.unlink(), Unlink::Gone, "only the first unlink owns the row");
    }
}
