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
use crate::storage::reclaim::Unlink;
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

    /// The GC's unlink step (`ABSENT -> UNLINKED`), with the record's writers kept out by the
    /// caller (2PL's lock) or not at all (nocc). `safe` is given when the database logs: the
    /// stamp is then a commit stamp, and the record stays linked (`Busy`) until its deletion's
    /// epoch ([`crate::protocols::common::stamp_epoch`]) is below `safe`, the oldest running transaction's (see
    /// `Reclaimer::collect`).
    #[inline]
    pub fn unlink(&self, safe: Option<u64>) -> Unlink {
        let mut w = self.0.load(Ordering::Acquire);
        loop {
            match w & STATE {
                ABSENT => {}
                PRESENT => return Unlink::Revived,
                _ => return Unlink::Gone,
            }
            if safe
                .is_some_and(|safe| crate::protocols::common::stamp_epoch(w >> STAMP_SHIFT) >= safe)
            {
                return Unlink::Busy;
            }
            match self.0.compare_exchange(
                w,
                (w & !STATE) | UNLINKED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Unlink::Unlinked,
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
        assert_eq!(s.unlink(None), Unlink::Unlinked);
        assert_eq!((s.get(), s.stamp()), (UNLINKED, 77));
        assert_eq!(s.unlink(None), Unlink::Gone, "only the first unlink wins");
        assert_eq!(s.set_versioned(PRESENT, (1 << 62) - 1), 77);
        assert_eq!((s.get(), s.stamp()), (PRESENT, (1 << 62) - 1));
        assert_eq!(s.unlink(None), Unlink::Revived);
    }

    #[test]
    fn a_logged_deletion_stays_linked_until_its_epoch_is_over() {
        let s = RowState::default();
        s.set_versioned(ABSENT, super::super::stamp_after(0, 7));
        assert_eq!(s.unlink(Some(7)), Unlink::Busy, "a transaction of epoch 7 still runs");
        assert_eq!(s.get(), ABSENT);
        assert_eq!(s.unlink(Some(8)), Unlink::Unlinked);
    }
}
