//! A record state word for in-place protocols (nocc, 2PL): present, absent or unlinked, plus
//! the record's version stamp for recorded histories.
//!
//! ```text
//!  63                                                        2 1   0
//! +-----------------------------------------------------------+-----+
//! | stamp of the version installed last (history recording)   |state|
//! |   (a history `Stamp` below 2^62)                          |     |
//! +-----------------------------------------------------------+-----+
//! ```
//!
//! Zero is `ABSENT` with stamp [`UNBORN`], so a freshly zeroed slot is
//! not a row. The stamp shares the word so that recording costs no extra header space; it is
//! maintained only when the database records histories, or, when it logs, holds the commit stamp
//! of the last transaction that wrote the record (see `common::log_in_place`). Writers change the word under the
//! record's exclusive lock (2PL) or not at all protected (nocc, which promises nothing).

use crate::history::{Recorder, Stamp, UNBORN};
use std::sync::atomic::{AtomicU64, Ordering};

/// Deleted, never inserted, or an insert that was rolled back.
pub const ABSENT: u64 = 0;
/// A row.
pub const PRESENT: u64 = 1;
/// Absent and unlinked by the GC: its index entry is being removed; it cannot be revived.
pub const UNLINKED: u64 = 2;

const STATE: u64 = 0b11;
const STAMP_SHIFT: u32 = 2;

/// A record header with a state word (the in-place protocols' records).
pub trait HasState {
    /// The state word.
    fn state(&self) -> &RowState;
}

/// The state word.
#[repr(transparent)]
#[derive(Default)]
pub struct RowState(AtomicU64);

impl RowState {
    /// The current state.
    #[inline]
    pub fn get(&self) -> u64 {
        // Acquire: pairs with `set`.
        self.0.load(Ordering::Acquire) & STATE
    }
    /// Whether the record is a row.
    #[inline]
    pub fn present(&self) -> bool {
        self.get() == PRESENT
    }
    /// Sets the state, keeping the stamp; returns the stamp.
    #[inline]
    pub fn set(&self, s: u64) -> u64 {
        let w = self.0.load(Ordering::Relaxed);
        self.0.store((w & !STATE) | s, Ordering::Release);
        w >> STAMP_SHIFT
    }
    /// The stamp of the version installed last.
    #[inline]
    pub fn stamp(&self) -> u64 {
        self.0.load(Ordering::Acquire) >> STAMP_SHIFT
    }
    /// Sets state and stamp at once; returns the stamp it replaced.
    #[inline]
    pub fn set_versioned(&self, s: u64, stamp: u64) -> u64 {
        debug_assert!(stamp < 1 << (64 - STAMP_SHIFT));
        self.0.swap((stamp << STAMP_SHIFT) | s, Ordering::AcqRel) >> STAMP_SHIFT
    }
    /// Initialises the word of a record no other thread can reach yet (a fresh or reclaimed slot
    /// before its index entry publishes it): state `s`, stamp [`UNBORN`]. A plain store: the
    /// index insert that publishes the record orders it (Release).
    #[inline]
    pub fn init(&self, s: u64) {
        self.0.store(((UNBORN as u64) << STAMP_SHIFT) | s, Ordering::Relaxed);
    }
    /// Restores the stamp, keeping the state (undoing an in-place update).
    #[inline]
    pub fn restore_stamp(&self, stamp: u64) {
        let w = self.0.load(Ordering::Relaxed);
        self.0.store((stamp << STAMP_SHIFT) | (w & STATE), Ordering::Release);
    }

    /// Installs a version in place: sets state `s` and, when `history` records, a fresh stamp,
    /// and reports the write (after `UNBORN` when `fresh`, a row just created). Returns the stamp
    /// replaced, for the undo log (without history, the record's commit stamp when the database
    /// logs, which an abort must put back).
    #[inline]
    pub fn install(
        &self,
        history: &mut Option<Recorder>,
        table: u32,
        key: u64,
        s: u64,
        fresh: bool,
    ) -> u64 {
        match history {
            None => self.set(s),
            Some(h) => {
                let new = h.next_stamp();
                let old = self.set_versioned(s, new);
                let prev = if fresh { UNBORN as u64 } else { old };
                h.write(table, key, new as Stamp, prev as Stamp, s == PRESENT);
                prev
            }
        }
    }

    /// Reports a read of the current version (when `history` records).
    #[inline]
    pub fn note_read(&self, history: &mut Option<Recorder>, table: u32, key: u64) {
        if let Some(h) = history {
            h.read(table, key, self.stamp() as Stamp);
        }
    }

    /// `ABSENT -> UNLINKED`; returns the state found (`ABSENT` means it was unlinked now).
    #[inline]
    pub fn unlink(&self) -> u64 {
        let mut w = self.0.load(Ordering::Acquire);
        loop {
            if w & STATE != ABSENT {
                return w & STATE;
            }
            match self.0.compare_exchange(
                w,
                (w & !STATE) | UNLINKED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return ABSENT,
                Err(cur) => w = cur,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_and_stamp_share_the_word_without_clobbering_each_other() {
        let s = RowState::default();
        assert_eq!((s.get(), s.stamp()), (ABSENT, 0));
        assert_eq!(s.set_versioned(PRESENT, 77), 0);
        s.set(ABSENT);
        assert_eq!((s.get(), s.stamp()), (ABSENT, 77));
        assert_eq!(s.unlink(), ABSENT);
        assert_eq!((s.get(), s.stamp()), (UNLINKED, 77));
        assert_eq!(s.unlink(), UNLINKED, "only the first unlink wins");
        assert_eq!(s.set_versioned(PRESENT, (1 << 62) - 1), 77);
        assert_eq!((s.get(), s.stamp()), (PRESENT, (1 << 62) - 1));
    }
}
