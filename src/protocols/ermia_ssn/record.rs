//! SSN's record: the multi-version substrate's head word (`protocols::mv`); SSN's
//! stamps live in every version ([`SsnExt`]).

use crate::protocols::mv::tracking::{OverwrittenExt, Readers, TrackedExt};
use crate::protocols::mv::MvRecord;
use crate::storage::version::VersionExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// SSN's fields of a version (the SSN papers' `v.pstamp`, `v.sstamp` and readers).
#[repr(C)]
#[derive(Default)]
pub struct SsnExt {
    /// The overwriter: 0 while there is none; its pending stamp while it runs
    /// (`protocols::mv`); once it committed, its successor stamp `pi`.
    pub sstamp: AtomicU64,
    /// The largest commit timestamp of a committed reader (0: none).
    pub pstamp: AtomicU64,
    /// The worker slots whose running transaction read the version and has not finished.
    pub readers: Readers,
}

// SAFETY: atomics only (zero is "not overwritten, no reader"), no Drop, align 8.
unsafe impl VersionExt for SsnExt {
    #[inline(always)]
    fn reset(&self) {
        self.sstamp.store(0, Ordering::Relaxed);
        self.pstamp.store(0, Ordering::Relaxed);
        self.readers.reset();
    }
}

impl OverwrittenExt for SsnExt {
    #[inline(always)]
    fn overwriter(&self) -> &AtomicU64 {
        &self.sstamp
    }
}

impl TrackedExt for SsnExt {
    #[inline(always)]
    fn reader_stamp(&self) -> &AtomicU64 {
        &self.pstamp
    }
    #[inline(always)]
    fn readers(&self) -> &Readers {
        &self.readers
    }
}

/// A record slot of an SSN database.
pub type SsnRecord = MvRecord<SsnExt>;
