//! Hekaton's record: the multi-version substrate's head word (`protocols::mv`). A
//! version's Begin field is the substrate's stamp (a commit timestamp, or the pending stamp
//! that names its running writer); its End field is [`HekatonExt`].

use crate::protocols::mv::tracking::OverwrittenExt;
use crate::protocols::mv::MvRecord;
use crate::storage::version::VersionExt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Hekaton's field of a version: End.
#[repr(C)]
#[derive(Default)]
pub struct HekatonExt {
    /// 0 (infinity) while no transaction replaced the version; the replacing transaction's
    /// pending stamp while it runs; its commit timestamp once it committed.
    pub end: AtomicU64,
}

// SAFETY: one atomic (zero is "not replaced"), no Drop, align 8.
unsafe impl VersionExt for HekatonExt {
    #[inline(always)]
    fn reset(&self) {
        self.end.store(0, Ordering::Relaxed);
    }
}

impl OverwrittenExt for HekatonExt {
    #[inline(always)]
    fn overwriter(&self) -> &AtomicU64 {
        &self.end
    }
}

/// A record slot of a Hekaton database.
pub type HekatonRecord = MvRecord<HekatonExt>;
