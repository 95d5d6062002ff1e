//! Silo's record header: one TID word ([`Tid`], shared with MOCC in `occ::tid`).

pub use crate::protocols::occ::tid::Tid;
use crate::protocols::occ::OccRecord;
use crate::storage::row_store::RecordHeader;
use std::sync::atomic::AtomicU64;

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

    crate::protocols::occ::tid::tid_word_methods!();

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
    fn unlink_only_takes_absent_unlocked_records() {
        use crate::protocols::occ;
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
        let unlink = |r| occ::unlink(t, 7, r, 2);
        assert_eq!(unlink(&r), Unlink::Revived);
        r.store(Tid::new(1, 2).with(Tid::ABSENT | Tid::LOCK).0);
        assert_eq!(unlink(&r), Unlink::Busy);
        // Deleted in epoch 2, with a transaction of epoch 2 still running: not yet.
        r.store(Tid::new(2, 5).with(Tid::ABSENT).0);
        assert_eq!(unlink(&r), Unlink::Busy);
        r.store(Tid::new(1, 2).with(Tid::ABSENT).0);
        assert_eq!(unlink(&r), Unlink::Unlinked);
        assert!(r.tid().is_unlinked());
        assert_eq!(unlink(&r), Unlink::Gone, "only the first unlink owns the row");
    }
}
