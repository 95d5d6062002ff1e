//! The `nocc` record header.

use crate::protocols::common::state::RowState;
use crate::storage::reclaim::Unlink;
use crate::storage::row_store::RecordHeader;

/// One state word.
#[repr(C, align(8))]
pub struct NoccRecord {
    /// Present, absent or unlinked.
    pub state: RowState,
}

// SAFETY: one atomic word; zero (ABSENT) is valid; no Drop; align 8.
unsafe impl RecordHeader for NoccRecord {}

impl crate::protocols::common::state::HasState for NoccRecord {
    #[inline]
    fn state(&self) -> &crate::protocols::common::state::RowState {
        &self.state
    }
}

impl NoccRecord {
    /// Whether the record is present.
    #[inline]
    pub fn present(&self) -> bool {
        self.state.present()
    }

    /// The GC's unlink step (`safe`: see [`RowState::unlink`]).
    pub fn unlink(&self, safe: Option<u64>) -> Unlink {
        self.state.unlink(safe)
    }
}
