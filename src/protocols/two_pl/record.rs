//! The 2PL record header: a reader-writer lock word and a state word.
//!
//! ```text
//!  63  62          53 52                                              0
//! +---+--------------+-------------------------------------------------+
//! | W | readers (10) | timestamp of the oldest holder (53 bits)        |
//! +---+--------------+-------------------------------------------------+
//! ```
//! An unlocked word is 0.

use crate::protocols::inplace::state::RowState;
use crate::storage::reclaim::Unlink;
use crate::storage::row_store::RecordHeader;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writer bit.
pub const WRITER: u64 = 1 << 63;
const READER_ONE: u64 = 1 << 53;
const READER_MASK: u64 = 0x3FF << 53;
/// Mask of the timestamp field.
pub const TS_MASK: u64 = READER_ONE - 1;
/// Low bits of a timestamp that name the worker (its epoch slot), so that timestamps are
/// unique: 2PL workers of one database are at most [`MAX_WORKERS`].
pub const SLOT_BITS: u32 = 11;
/// The most 2PL workers one database may have at once.
pub const MAX_WORKERS: usize = 1 << SLOT_BITS;
/// Half the timestamp space: two live timestamps are never this far apart (see [`older`]).
const HALF: u64 = READER_ONE >> 1;

/// Whether timestamp `a` is older than `b`. Serial-number arithmetic (RFC 1982) over the 53-bit
/// field: `a` is older when `b` lies less than half the space after it. Timestamps count units
/// of 1.024 µs since the database was created, so the field wraps after 51 days; comparisons stay
/// right across the wrap as long as no transaction keeps its timestamp for 25 days.
#[inline]
pub fn older(a: u64, b: u64) -> bool {
    let d = b.wrapping_sub(a) & TS_MASK;
    d != 0 && d < HALF
}

/// The older of two timestamps.
#[inline]
fn oldest(a: u64, b: u64) -> u64 {
    if older(b, a) {
        b
    } else {
        a
    }
}

/// A worker's source of wait-die timestamps: the time since the database was created, in units
/// of 1024 ns, above the worker's slot. Unique (no two workers share a slot), and monotonic per
/// worker (a reading that is not newer than the last one, in the same microsecond or from a
/// core whose clock lags, is replaced by the last one plus one unit). Across workers they order
/// transactions by start time to within a microsecond, with no shared counter.
#[derive(Debug)]
pub struct TsClock {
    origin: quanta::Instant,
    slot: u64,
    last: Option<u64>,
}

impl TsClock {
    /// The clock of the worker in epoch slot `slot` (below [`MAX_WORKERS`]) of a database created
    /// at `origin`.
    pub fn new(origin: quanta::Instant, slot: usize) -> Self {
        assert!(slot < MAX_WORKERS, "2PL worker slot {slot} out of range");
        TsClock { origin, slot: slot as u64, last: None }
    }

    /// A new timestamp, newer than every earlier one of this clock.
    #[inline]
    pub fn stamp(&mut self) -> u64 {
        let nanos = quanta::Instant::now().saturating_duration_since(self.origin).as_nanos();
        self.next_at(nanos as u64)
    }

    /// [`TsClock::stamp`] at `nanos` nanoseconds since the origin.
    #[inline]
    fn next_at(&mut self, nanos: u64) -> u64 {
        let mut ts = ((nanos >> 10) << SLOT_BITS | self.slot) & TS_MASK;
        if let Some(last) = self.last {
            if !older(last, ts) {
                ts = last.wrapping_add(1 << SLOT_BITS) & TS_MASK;
            }
        }
        self.last = Some(ts);
        ts
    }
}
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

impl crate::protocols::inplace::state::HasState for TwoPlRecord {
    #[inline]
    fn state(&self) -> &crate::protocols::inplace::state::RowState {
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
            let oldest = if cur & READER_MASK == 0 { ts } else { oldest(cur & TS_MASK, ts) };
            let new = (cur & READER_MASK) + READER_ONE + oldest;
            // Acquire: pairs with the Release in `unlock_*`.
            match self.lock.compare_exchange_weak(cur, new, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
                    return Ok(());
                }
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
        // Relaxed load: the CAS decides. Acquire CAS: the upgrade takes the word; pairs with
        // the Release unlocks of readers that held it before.
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
                Ok(_) => {
                    crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
                    return;
                }
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

    /// The GC's unlink step, under the exclusive lock (`safe`: see [`RowState::unlink`]).
    pub fn unlink(&self, safe: Option<u64>) -> Unlink {
        if self.try_write(0).is_err() {
            return Unlink::Busy;
        }
        let r = self.state.unlink(safe);
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

    /// Timestamps of workers in different slots differ even when read at the same instant, for
    /// every slot a database may have (a slot number cut to its low 8 bits would repeat).
    #[test]
    fn timestamps_are_unique_across_all_worker_slots() {
        let origin = quanta::Instant::now();
        let mut seen = std::collections::HashSet::new();
        for slot in 0..MAX_WORKERS {
            for nanos in [0, 5_000, 1 << 40] {
                assert!(seen.insert(TsClock::new(origin, slot).next_at(nanos)), "slot {slot}");
            }
        }
    }

    /// A worker's timestamps only get newer: when its clock reading stands still, goes back
    /// (another core) or runs past the end of the field, each is still newer than the last.
    #[test]
    fn timestamps_are_monotonic_per_worker_and_across_the_wrap() {
        let origin = quanta::Instant::now();
        let mut c = TsClock::new(origin, 1500);
        let end = (TS_MASK >> SLOT_BITS) << 10; // nanos at which the field wraps
        let readings = [0, 0, 100, 5_000, 4_000, 4_000, end - 3_000, end - 1, end, end + 2_048];
        let mut last = c.next_at(readings[0]);
        for &n in &readings[1..] {
            let ts = c.next_at(n);
            assert!(older(last, ts), "{last:#x} then {ts:#x} at {n} ns");
            assert!(!older(ts, last));
            assert_eq!(ts & (MAX_WORKERS as u64 - 1), 1500, "the slot stays in the low bits");
            last = ts;
        }
        assert!(last < 1 << 20, "the field wrapped: {last:#x}");
        // The real clock too.
        let mut prev = c.stamp();
        for _ in 0..1000 {
            let ts = c.stamp();
            assert!(older(prev, ts));
            prev = ts;
        }
    }

    /// The lock word keeps the oldest reader's timestamp, also when readers straddle the wrap.
    #[test]
    fn the_oldest_reader_is_kept_across_the_wrap() {
        let r = rec();
        let (before, after) = (TS_MASK - 10, 5);
        r.try_read(after).unwrap();
        r.try_read(before).unwrap();
        assert_eq!(r.try_write(1).unwrap_err(), before, "the pre-wrap reader is the oldest");
    }

    #[test]
    fn unlink_needs_the_lock_and_an_absent_record() {
        let r = rec();
        r.state.set(crate::protocols::inplace::state::PRESENT);
        assert_eq!(r.unlink(None), Unlink::Revived);
        r.state.set(crate::protocols::inplace::state::ABSENT);
        r.try_read(5).unwrap();
        assert_eq!(r.unlink(None), Unlink::Busy);
        r.unlock_read();
        assert_eq!(r.unlink(None), Unlink::Unlinked);
        assert_eq!(r.state.get(), crate::protocols::inplace::state::UNLINKED);
        assert_eq!(r.lock.load(Ordering::Relaxed), 0);
        assert_eq!(r.unlink(None), Unlink::Gone, "only the first unlink owns the row");
    }
}
