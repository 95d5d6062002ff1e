//! SSI's record: the multi-version substrate's head word (`protocols::mv`); SSI's
//! stamps live in every version ([`SsiExt`]).

use crate::protocols::mv::tracking::{OverwrittenExt, Readers, TrackedExt};
use crate::protocols::mv::MvRecord;
use crate::storage::version::VersionExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// SSI's fields of a version (ERMIA §3.6: the overwriter's `s0` as the version's `s1`, its
/// `s1` as the version's `s2`, the readers' `rstamp`, and the reader bitmap).
#[repr(C)]
#[derive(Default)]
pub struct SsiExt {
    /// The overwriter: 0 while there is none; its pending stamp while it runs
    /// (`protocols::mv`); once it committed, its commit timestamp.
    pub sstamp: AtomicU64,
    /// Once the overwriter committed: the smallest commit timestamp of a transaction that
    /// overwrote what the overwriter read and committed before it (0: none). Stored before
    /// `sstamp`.
    pub s2: AtomicU64,
    /// The largest commit timestamp of a committed reader (0: none).
    pub rstamp: AtomicU64,
    /// The worker slots whose running transaction read the version and has not finished.
    pub readers: Readers,
    /// The largest snapshot of a transaction that read the version without marking it (ERMIA's
    /// read optimisation, `old-version-age`; the paper's `bstamp`), 0 for none.
    pub bstamp: AtomicU64,
}

// SAFETY: atomics only (zero is "not overwritten, no reader"), no Drop, align 8.
unsafe impl VersionExt for SsiExt {
    #[inline(always)]
    fn reset(&self) {
        self.sstamp.store(0, Ordering::Relaxed);
        self.s2.store(0, Ordering::Relaxed);
        self.rstamp.store(0, Ordering::Relaxed);
        self.bstamp.store(0, Ordering::Relaxed);
        self.readers.reset();
    }
}

impl OverwrittenExt for SsiExt {
    #[inline(always)]
    fn overwriter(&self) -> &AtomicU64 {
        &self.sstamp
    }
}

impl TrackedExt for SsiExt {
    #[inline(always)]
    fn reader_stamp(&self) -> &AtomicU64 {
        &self.rstamp
    }
    #[inline(always)]
    fn readers(&self) -> &Readers {
        &self.readers
    }
}

/// A record slot of an SSI database.
pub type SsiRecord = MvRecord<SsiExt>;
