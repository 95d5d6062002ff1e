//! Silo's record header: the TID word.
//!
//! ```text
//!  63                      36 35                         4   3   2   1   0
//! +--------------------------+----------------------------+---+---+---+---+
//! |  epoch (28 bits)         |  sequence (32 bits)        | U | A | L | K |
//! +--------------------------+----------------------------+---+---+---+---+
//!   K = lock, L = latest, A = absent (deleted / not yet inserted), U = unlinked by the GC
//! ```
//!
//! TIDs compare as integers on the epoch/sequence bits, so the epoch dominates.

use crate::history::{Stamp, INITIAL, UNBORN};
use crate::protocols::common::occ::{self, OccRecord};
use crate::storage::row_store::RecordHeader;
use crate::storage::RowId;
use std::fmt;
use std::sync::atomic::AtomicU64;

/// A decoded TID word.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tid(pub u64);

impl Tid {
    /// Lock bit (the status bits are those of every optimistic record word, `common::occ`).
    pub const LOCK: u64 = occ::LOCK;
    /// Latest-version bit.
    pub const LATEST: u64 = occ::LATEST;
    /// Absent bit.
    pub const ABSENT: u64 = occ::ABSENT;
    /// Unlinked bit.
    pub const UNLINKED: u64 = occ::UNLINKED;
    /// The four status bits.
    pub const STATUS: u64 = occ::STATUS;
    const SEQ_SHIFT: u32 = 4;
    const SEQ_BITS: u32 = 32;
    const EPOCH_SHIFT: u32 = Self::SEQ_SHIFT + Self::SEQ_BITS;
    /// One step of the sequence number.
    pub const SEQ_ONE: u64 = 1 << Self::SEQ_SHIFT;
    const _PARTITION: () = assert!(
        Self::STATUS & (((1u64 << Self::SEQ_BITS) - 1) << Self::SEQ_SHIFT) == 0
            && Self::EPOCH_SHIFT + 28 == 64
    );

    /// The TID `(epoch, seq)` with no status bits.
    #[must_use]
    pub const fn new(epoch: u64, seq: u64) -> Tid {
        Tid((epoch << Self::EPOCH_SHIFT) | ((seq & 0xFFFF_FFFF) << Self::SEQ_SHIFT))
    }
    /// The epoch.
    pub const fn epoch(self) -> u64 {
        self.0 >> Self::EPOCH_SHIFT
    }
    /// The sequence number.
    pub const fn seq(self) -> u64 {
        (self.0 >> Self::SEQ_SHIFT) & 0xFFFF_FFFF
    }
    /// The word with `bits` set.
    #[must_use]
    pub const fn with(self, bits: u64) -> Tid {
        Tid(self.0 | bits)
    }
    /// The word without `bits`.
    #[must_use]
    pub const fn without(self, bits: u64) -> Tid {
        Tid(self.0 & !bits)
    }
    /// The epoch/sequence part only.
    #[must_use]
    pub const fn version(self) -> Tid {
        self.without(Self::STATUS)
    }
    /// Locked?
    pub const fn is_locked(self) -> bool {
        self.0 & Self::LOCK != 0
    }
    /// Absent (deleted, uncommitted insert, or unlinked)?
    pub const fn is_absent(self) -> bool {
        self.0 & (Self::ABSENT | Self::UNLINKED) != 0
    }
    /// Unlinked by the GC?
    pub const fn is_unlinked(self) -> bool {
        self.0 & Self::UNLINKED != 0
    }
    /// The TID of loaded records: epoch 0, below every commit TID (the global epoch starts at 1
    /// and a commit TID is at least `(current epoch, 0)`).
    pub const LOADED: Tid = Tid::new(0, 1);
    /// The version this TID names on row `rid` in a recorded history: the row id and the
    /// epoch and sequence bits, with the loader's TID as [`INITIAL`] and a never-committed row
    /// (TID 0) as [`UNBORN`]. The row id is part of it because TIDs are unique per row only: two
    /// incarnations of a key (deleted, unlinked, inserted again) may commit equal TIDs.
    pub const fn stamp(self, rid: RowId) -> Stamp {
        let v = self.0 & !Self::STATUS;
        if v == 0 {
            UNBORN
        } else if v == Self::LOADED.0 {
            INITIAL
        } else {
            ((rid.0 as u128) << 64) | v as u128
        }
    }
}

const _NO_COLLISION: () = assert!(UNBORN == 0 && INITIAL as u64 & Tid::STATUS != 0);

impl fmt::Debug for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tid(e{}.{}", self.epoch(), self.seq())?;
        for (bit, name) in [
            (Self::LOCK, "locked"),
            (Self::LATEST, "latest"),
            (Self::ABSENT, "absent"),
            (Self::UNLINKED, "unlinked"),
        ] {
            if self.0 & bit != 0 {
                write!(f, " {name}")?;
            }
        }
        f.write_str(")")
    }
}

/// The header of a Silo record.
#[repr(C, align(8))]
pub struct SiloRecord {
    /// The TID word.
    pub tid: AtomicU64,
}

// SAFETY: one atomic; zero is a valid (unlocked, present, epoch 0) word that is always overwritten
// before the slot is published; no Drop; align 8.
unsafe impl RecordHeader for SiloRecord {}

impl SiloRecord {
    /// Loads the TID word.
    #[inline]
    pub fn tid(&self) -> Tid {
        Tid(OccRecord::load(self))
    }
}

impl OccRecord for SiloRecord {
    #[inline(always)]
    fn word(&self) -> &AtomicU64 {
        &self.tid
    }

    type Aux = ();

    #[inline(always)]
    fn aux(&self) {}

    fn stamp(word: u64, _: (), rid: RowId) -> Stamp {
        Tid(word).stamp(rid)
    }

    #[inline]
    fn init_fresh(&self) {
        // TID 0: a row no transaction has committed yet (UNBORN in recorded histories).
        self.store(Tid(0).with(Tid::ABSENT | Tid::LOCK).0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_fields_round_trip_and_order_by_epoch_first() {
        let t = Tid::new(5, 77).with(Tid::LOCK | Tid::ABSENT);
        assert_eq!((t.epoch(), t.seq()), (5, 77));
        assert!(t.is_locked() && t.is_absent() && !t.is_unlinked());
        assert_eq!(t.version(), Tid::new(5, 77));
        assert!(Tid::new(6, 0) > Tid::new(5, 0xFFFF_FFFF));
        assert_eq!(format!("{t:?}"), "Tid(e5.77 locked absent)");
    }

    #[test]
    fn unlink_only_takes_absent_unlocked_records() {
        use crate::storage::reclaim::Unlink;
        use crate::storage::{Storage, TableSpec};
        let s = Storage::<SiloRecord>::new(
            &[TableSpec::new("t", 8, 4)],
            1,
            std::time::Duration::from_millis(10),
        )
        .unwrap();
        let t = &s.tables()[0];
        let r = SiloRecord { tid: AtomicU64::new(Tid::new(1, 1).0) };
        let unlink = |r| occ::unlink(t, 7, r);
        assert_eq!(unlink(&r), Unlink::Revived);
        r.store(Tid::new(1, 2).with(Tid::ABSENT | Tid::LOCK).0);
        assert_eq!(unlink(&r), Unlink::Busy);
        r.store(Tid::new(1, 2).with(Tid::ABSENT).0);
        assert_eq!(unlink(&r), Unlink::Unlinked);
        assert!(r.tid().is_unlinked());
        assert_eq!(unlink(&r), Unlink::Gone, "only the first unlink owns the row");
    }
}
