//! TicToc's record header: the timestamp word, the version's install timestamp and its
//! predecessor's.
//!
//! ```text
//!  63                            19 18                 4   3   2   1   0
//! +--------------------------------+--------------------+---+---+---+---+
//! |  wts (45 bits)                 |  delta (15 bits)   | U | A | I | K |
//! +--------------------------------+--------------------+---+---+---+---+
//!   rts = wts + delta; K = lock, A = absent, U = unlinked (the status bits of `occ`);
//!   I = installing: the lock holder is rewriting `installed` and `prev`
//! ```
//!
//! `installed` is the commit timestamp the version was written with. It names the version (the
//! history's stamp, and what validation compares): `wts` may move up later when an rts extension
//! overflows delta, `installed` never changes while the version is current. `prev` is the
//! previous version's `installed` (the timestamp history, §4.3 of the paper).
//!
//! 45 bits of wts last 2^45 ≈ 3.5 · 10^13 timestamp steps: a record written ten million times a
//! second, each write one step above the last, takes 40 days to reach it.

use crate::history::{Stamp, INITIAL, UNBORN};
use crate::protocols::occ::{self, OccRecord};
use crate::storage::phantom::RangeBuckets;
use crate::storage::row_store::RecordHeader;
use crate::storage::RowId;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A decoded timestamp word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TsWord(pub u64);

impl TsWord {
    const DELTA_SHIFT: u32 = 4;
    const DELTA_BITS: u32 = 15;
    const WTS_SHIFT: u32 = Self::DELTA_SHIFT + Self::DELTA_BITS;
    /// The largest delta (rts - wts) the word holds.
    pub const MAX_DELTA: u64 = (1 << Self::DELTA_BITS) - 1;
    /// The largest wts.
    pub const MAX_WTS: u64 = (1 << (64 - Self::WTS_SHIFT)) - 1;
    const DELTA_MASK: u64 = Self::MAX_DELTA << Self::DELTA_SHIFT;
    const _LAYOUT: () = assert!(Self::DELTA_MASK & occ::STATUS == 0 && Self::WTS_SHIFT == 19);

    /// The word `(wts, rts)` with no status bits (`rts - wts` must fit in delta).
    #[must_use]
    pub const fn new(wts: u64, rts: u64) -> TsWord {
        debug_assert!(wts <= Self::MAX_WTS && rts >= wts && rts - wts <= Self::MAX_DELTA);
        TsWord(wts << Self::WTS_SHIFT | (rts - wts) << Self::DELTA_SHIFT)
    }
    /// The write timestamp.
    pub const fn wts(self) -> u64 {
        self.0 >> Self::WTS_SHIFT
    }
    /// The read timestamp.
    pub const fn rts(self) -> u64 {
        self.wts() + ((self.0 & Self::DELTA_MASK) >> Self::DELTA_SHIFT)
    }
    /// The status bits.
    pub const fn status(self) -> u64 {
        self.0 & occ::STATUS
    }
    /// Locked?
    pub const fn is_locked(self) -> bool {
        occ::is_locked(self.0)
    }
    /// Whether `a` and `b` have the same wts and status bits (they may differ in delta).
    pub const fn same_wts(a: u64, b: u64) -> bool {
        (a ^ b) & !Self::DELTA_MASK == 0
    }
    /// The word with its rts raised to `ts` (`ts > rts`), status bits kept. When `ts - wts`
    /// does not fit in delta, wts moves up to `ts - MAX_DELTA` (the paper's overflow handling:
    /// the version's claimed start moves later, which only makes readers that compare wts
    /// conservative).
    #[must_use]
    pub const fn extended(self, ts: u64) -> TsWord {
        let wts = if ts - self.wts() > Self::MAX_DELTA { ts - Self::MAX_DELTA } else { self.wts() };
        TsWord(Self::new(wts, ts).0 | self.status())
    }
}

impl fmt::Debug for TsWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TsWord(wts {} rts {}", self.wts(), self.rts())?;
        for (bit, name) in
            [(occ::LOCK, "locked"), (occ::ABSENT, "absent"), (occ::UNLINKED, "unlinked")]
        {
            if self.0 & bit != 0 {
                write!(f, " {name}")?;
            }
        }
        f.write_str(")")
    }
}

/// The installing bit (see [`TicTocRecord::publish`]).
pub const INSTALLING: u64 = occ::LATEST;

/// `installed` of loaded records; commit timestamps of writers start above it, and 0 is a
/// version no transaction committed.
pub const LOADED: u64 = 1;

/// The header of a TicToc record.
#[repr(C, align(8))]
pub struct TicTocRecord {
    /// The timestamp word.
    pub word: AtomicU64,
    /// The commit timestamp this version was installed with (see the module docs).
    pub installed: AtomicU64,
    /// The previous version's `installed`.
    pub prev: AtomicU64,
}

// SAFETY: three atomics; zero is a valid (unlocked, present, wts 0) header that is always
// overwritten before the slot is published; no Drop; align 8.
unsafe impl RecordHeader for TicTocRecord {}

impl TicTocRecord {
    /// The decoded word.
    #[inline]
    pub fn ts(&self) -> TsWord {
        TsWord(self.load())
    }

    /// Writes a new version's timestamps under the lock, then stores `word` (unlocking). A
    /// reader that reads `installed` between two equal loads of the word reads a consistent one:
    /// the [`INSTALLING`] bit goes into the word before either field changes, and each field's
    /// Release store, once read, makes that bit visible to the reader's second load.
    #[inline]
    pub fn publish(&self, word: TsWord, installed: u64) {
        // Relaxed: we hold the lock, so nobody else writes the word.
        let held = self.word.load(Ordering::Relaxed);
        self.word.store(held | INSTALLING, Ordering::Relaxed);
        // Release: pairs with the reader's Acquire fence after it loads the field (see above).
        self.prev.store(self.installed.load(Ordering::Relaxed), Ordering::Release);
        self.installed.store(installed, Ordering::Release);
        self.store(word.0);
    }
}

impl OccRecord for TicTocRecord {
    #[inline(always)]
    fn word(&self) -> &AtomicU64 {
        &self.word
    }

    type Aux = u64;

    #[inline(always)]
    fn aux(&self) -> u64 {
        // Relaxed: read between two loads of the word (an Acquire load, then an Acquire fence
        // before the second), which pair with the Release store of `publish`.
        self.installed.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn settled(word: u64) -> bool {
        word & INSTALLING == 0
    }

    #[inline(always)]
    fn same_version(a: u64, b: u64) -> bool {
        TsWord::same_wts(a, b)
    }

    fn stamp(_: u64, installed: u64, rid: RowId) -> Stamp {
        match installed {
            0 => UNBORN,
            LOADED => INITIAL,
            // Install timestamps are unique per row (each is above its predecessor's rts), not
            // per key: the row id makes them unique per key.
            ts => (u128::from(rid.0) << 64) | u128::from(ts),
        }
    }

    /// The install timestamp: the commit timestamp the version was logged with (its wts may
    /// have moved since, on a delta overflow).
    #[inline]
    fn commit_stamp(_: u64, installed: u64) -> u64 {
        installed
    }

    /// Not settled until [`OccRecord::inserted`]: readers that find the record in the index
    /// before then wait for its timestamps.
    #[inline]
    fn init_fresh(&self) {
        self.installed.store(0, Ordering::Relaxed);
        self.prev.store(0, Ordering::Relaxed);
        self.store(TsWord::new(0, 0).0 | occ::ABSENT | occ::LOCK | INSTALLING);
    }

    /// The absence this record now stands for began at the bucket's wts (the deletion of the
    /// key's previous incarnation, if any) and was read up to its rts: the record starts with
    /// those timestamps, so that a reader of the uncommitted insert commits after that deletion
    /// (read after the index insert: a GC removal the insert saw was preceded by its raise).
    #[inline]
    fn inserted(&self, buckets: &RangeBuckets, key: u64) {
        let (wts, rts) = buckets.clock(buckets.slot_of(key));
        let rts = rts.clamp(wts, wts + TsWord::MAX_DELTA);
        self.store(TsWord::new(wts, rts).0 | occ::ABSENT | occ::LOCK);
    }

    /// At once: [`OccRecord::unlinked`] hands the deletion's timestamps to the key's bucket,
    /// which the key's next insert starts from.
    #[inline]
    fn unlinkable(&self, _: u64, _: u64) -> bool {
        true
    }

    fn unlinked(&self, buckets: &RangeBuckets, key: u64, word: u64) {
        let w = TsWord(word);
        buckets.raise(key, w.wts(), w.rts());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_status_bits_stay_clear() {
        let w = TsWord(TsWord::new(1000, 1300).0 | occ::LOCK | occ::ABSENT);
        assert_eq!((w.wts(), w.rts()), (1000, 1300));
        assert!(w.is_locked() && occ::is_absent(w.0) && !occ::is_unlinked(w.0));
        assert_eq!(format!("{w:?}"), "TsWord(wts 1000 rts 1300 locked absent)");
        let top = TsWord::new(TsWord::MAX_WTS, TsWord::MAX_WTS);
        assert_eq!((top.wts(), top.status()), (TsWord::MAX_WTS, 0));
        assert!(TsWord::same_wts(TsWord::new(5, 5).0, TsWord::new(5, 9).0));
        assert!(!TsWord::same_wts(TsWord::new(5, 5).0, TsWord::new(6, 6).0));
        assert!(!TsWord::same_wts(TsWord::new(5, 5).0, TsWord::new(5, 5).0 | occ::LOCK));
    }

    /// Delta overflow: extending rts further than delta reaches moves wts up so that rts is
    /// exactly the target and delta is full; status bits survive.
    #[test]
    fn extension_past_the_delta_shifts_wts() {
        let w = TsWord(TsWord::new(10, 20).0 | occ::ABSENT);
        let e = w.extended(10 + TsWord::MAX_DELTA);
        assert_eq!((e.wts(), e.rts(), e.status()), (10, 10 + TsWord::MAX_DELTA, occ::ABSENT));
        let far = 10 + TsWord::MAX_DELTA + 1;
        let e = w.extended(far);
        assert_eq!((e.wts(), e.rts(), e.status()), (11, far, occ::ABSENT));
        let e = w.extended(1 << 40);
        assert_eq!((e.rts(), e.rts() - e.wts()), (1 << 40, TsWord::MAX_DELTA));
    }

    #[test]
    fn stamps_name_versions_by_install_timestamp() {
        assert_eq!(TicTocRecord::stamp(0, 0, RowId(3)), UNBORN);
        assert_eq!(TicTocRecord::stamp(0, LOADED, RowId(3)), INITIAL);
        assert_eq!(TicTocRecord::stamp(0, 7, RowId(3)), 3 << 64 | 7);
    }
}
