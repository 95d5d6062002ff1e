//! A record state word for in-place protocols (nocc, 2PL): present, absent or unlinked.
//! Zero is `ABSENT`, so a freshly zeroed slot is not a row.

use std::sync::atomic::{AtomicU64, Ordering};

/// Deleted, never inserted, or an insert that was rolled back.
pub const ABSENT: u64 = 0;
/// A row.
pub const PRESENT: u64 = 1;
/// Absent and unlinked by the GC: its index entry is being removed; it cannot be revived.
pub const UNLINKED: u64 = 2;

/// The state word.
#[repr(transparent)]
#[derive(Default)]
pub struct RowState(AtomicU64);

impl RowState {
    /// The current state.
    #[inline]
    pub fn get(&self) -> u64 {
        // Acquire: pairs with `set`.
        self.0.load(Ordering::Acquire)
    }
    /// Whether the record is a row.
    #[inline]
    pub fn present(&self) -> bool {
        self.get() == PRESENT
    }
    /// Sets the state.
    #[inline]
    pub fn set(&self, s: u64) {
        self.0.store(s, Ordering::Release);
    }
    /// `ABSENT -> UNLINKED`; returns the state found (`ABSENT` means it was unlinked now).
    #[inline]
    pub fn unlink(&self) -> u64 {
        match self.0.compare_exchange(ABSENT, UNLINKED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(s) | Err(s) => s,
        }
    }
}
