//! `2pl-ordered`'s records and locks.
//!
//! Records are the shared direct records ([`crate::protocols::inplace::direct`]): one state
//! word, no lock in the record. Locks live beside the records:
//!
//! * **Key locks**: a table of reader-writer words indexed by a hash of `(table, key)`. A key
//!   is locked whether or not its row exists, so a key to be inserted is locked before its row
//!   is made. Two keys may share a word: a false conflict, never a missed one, and no deadlock
//!   either, since the global order is the word's index.
//! * **Range locks**: each table's phantom bucket words ([`crate::storage::phantom`]) as
//!   two-group locks. A declared range read takes the words of its buckets in *scan* mode; every
//!   write (update, insert or delete) takes its key's word in *insert* mode, so no row of a
//!   range can change while a reader holds the range.
//!
//!   A range over more than 64 buckets would take too many words (an open-ended range, such
//!   as TPC-C Delivery's `[oldest new order, ∞)` of its district, takes every word of the
//!   table): it takes the table's **coarse range words** instead, whose buckets are `2^32`
//!   keys (a TPC-C district's orders, a customer's orders). Writers take a coarse word in
//!   insert mode too, but only in tables where a wide range was ever declared ([`Coarse`]), so
//!   that YCSB's and SmallBank's writers share no coarse word.
//!
//! Key-lock word: bit 63 is the writer, the low bits count readers; 0 is unlocked.

use crate::storage::epoch::Epochs;
use crate::storage::phantom::RangeBuckets;
use crate::storage::TableId;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use crate::protocols::inplace::direct::DirectRecord as OrderedRecord;

/// Log2 of the number of key-lock words (8 MiB of them per database).
pub const KEY_LOCK_BITS: u32 = 20;

const WRITER: u64 = 1 << 63;

/// The key locks of a database. See the module docs.
pub struct KeyLocks {
    words: Box<[AtomicU64]>,
}

impl KeyLocks {
    /// `2^bits` unlocked words.
    pub fn new(bits: u32) -> Self {
        KeyLocks { words: (0..1usize << bits).map(|_| AtomicU64::new(0)).collect() }
    }

    /// The word of `key` in `table`.
    #[inline]
    pub fn word_of(&self, table: TableId, key: u64) -> u32 {
        let h = (key ^ u64::from(table.0).rotate_left(47)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - self.words.len().trailing_zeros())) as u32
    }

    /// Takes a read lock on word `w` unless a writer holds it.
    #[inline]
    pub fn try_read(&self, w: u32) -> bool {
        let word = &self.words[w as usize];
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            if cur & WRITER != 0 {
                return false;
            }
            // Acquire: pairs with the Release in `unlock_write`: the last writer's row
            // changes are visible to this reader.
            match word.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
                    return true;
                }
                Err(v) => cur = v,
            }
        }
    }

    /// Takes the write lock on word `w` if nobody holds it.
    #[inline]
    pub fn try_write(&self, w: u32) -> bool {
        // Acquire: pairs with the Release in `unlock_read` and `unlock_write`.
        self.words[w as usize]
            .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Turns the caller's read lock on `w` into the write lock if it is the only reader.
    #[inline]
    pub fn try_upgrade(&self, w: u32) -> bool {
        // Acquire: pairs with the Release in `unlock_read` of the readers that left.
        self.words[w as usize]
            .compare_exchange(1, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases a read lock.
    #[inline]
    pub fn unlock_read(&self, w: u32) {
        // Release: pairs with the Acquire in `try_write` and `try_upgrade`.
        self.words[w as usize].fetch_sub(1, Ordering::Release);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
    }

    /// Releases the write lock.
    #[inline]
    pub fn unlock_write(&self, w: u32) {
        // Release: pairs with the Acquire of the next holder; the rows written under the lock
        // are published with it.
        self.words[w as usize].store(0, Ordering::Release);
    }
}

/// Log2 of the keys of a coarse range word's bucket.
pub const COARSE_SHIFT: u32 = 32;
/// Coarse range words per table.
pub const COARSE_WORDS: usize = 1024;

/// A table's coarse range words, and whether writers take them.
///
/// Turning them on is safe while transactions run: a transaction that declares a wide range
/// sets [`Coarse::on`], then waits, outside any transaction of its own, until every transaction
/// that was running has ended (the storage epochs: every worker's published epoch above the
/// one read after setting the flag), and only then sets `ready` and relies on the coarse words.
/// A writer reads `on` after publishing its epoch (both SeqCst), so one that read `false` is a
/// transaction that the wait outlasts.
pub struct Coarse {
    /// Writers take coarse words (SeqCst: see above).
    pub on: AtomicBool,
    /// Every writer that might have missed `on` has ended.
    ready: AtomicBool,
    /// The words.
    pub words: RangeBuckets,
}

impl Default for Coarse {
    fn default() -> Self {
        Coarse {
            on: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            words: RangeBuckets::new(COARSE_SHIFT, COARSE_WORDS),
        }
    }
}

impl Coarse {
    /// Makes the coarse words safe to rely on; the first call per table waits about one epoch.
    /// The caller must be in no transaction (it would wait for itself).
    pub fn turn_on(&self, epochs: &Epochs) {
        // Acquire: pairs with the Release below; the wait that made it true happened before.
        if self.ready.load(Ordering::Acquire) {
            return;
        }
        self.on.store(true, Ordering::SeqCst);
        let e = epochs.retire_stamp();
        let mut spin = crate::util::SpinWait::default();
        while epochs.min_active() <= e {
            spin.spin();
        }
        self.ready.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_writers_exclude_and_a_lone_reader_upgrades() {
        let l = KeyLocks::new(4);
        let w = l.word_of(TableId(0), 7);
        assert!(l.try_read(w) && l.try_read(w));
        assert!(!l.try_write(w) && !l.try_upgrade(w), "two readers: no writer, no upgrade");
        l.unlock_read(w);
        assert!(l.try_upgrade(w), "the last reader upgrades");
        assert!(!l.try_read(w) && !l.try_write(w));
        l.unlock_write(w);
        assert!(l.try_write(w));
        l.unlock_write(w);
    }

    #[test]
    fn words_spread_keys_and_tables() {
        let l = KeyLocks::new(10);
        let mut seen = std::collections::HashSet::new();
        for t in 0..4 {
            for k in 0..256 {
                seen.insert(l.word_of(TableId(t), k));
            }
        }
        assert!(seen.len() > 550, "1024 keys over 1024 words fill most of them: {}", seen.len());
    }
}
