//! Phantom protection shared by every protocol: versioned key-range buckets.
//!
//! A table's key space is cut into *buckets* of `2^shift` consecutive keys (the granularity,
//! chosen per table; default 64 keys). Each bucket maps to one word of a fixed array of
//! `slots` words (default 16384, 128 KiB per table) by a mixing fold of the bucket number; consecutive buckets land on
//! distinct words, far-apart buckets may share a word (a false conflict, never a missed one).
//!
//! The word is read two ways, depending on the protocol family:
//!
//! * **Optimistic protocols** (Silo, TicToc, MOCC, ...) treat the word as a *version*. A scan
//!   reads the version of each bucket it covers *before* reading that part of the index and keeps
//!   `(slot, version)` in its phantom set; an absent-key point read does the same for the key's
//!   bucket. Every insert of a key (a new index entry, or the revival of a deleted record) bumps
//!   its bucket's version *after* touching the index. At commit the phantom set is re-checked: a
//!   changed version means a key may have appeared in a range that was read, and the transaction
//!   aborts. This is Silo's node-set validation with buckets in place of B-tree leaves, so it works
//!   over any index crate.
//! * **Pessimistic protocols** (2PL) treat the word as a two-group lock: the low 32 bits count
//!   *scan* holders (scans and absent-key reads), the high 32 bits count *insert* holders. Scans
//!   are compatible with scans and inserts with inserts; a scan and an insert into the same bucket
//!   conflict. Bucket locks never wait (the caller aborts), which keeps wait-die deadlock-free.
//!
//! Deletes need no bucket action: a deleted record stays in the index, marked absent, until the
//! epoch GC unlinks it, and readers track the record itself (its TID word or its lock).
//!
//! **Cost.** An insert costs one atomic RMW on its bucket word. A scan reads one word per bucket
//! it covers, in batches of 1, 2, 4 ... 64 buckets (one index range call per batch), stopping at
//! the batch where its limit is reached; once a scan would cover as many buckets as there are
//! words, it reads every word once and scans the rest of its range in one call (so no scan reads
//! more than about twice `slots` words). Validation re-reads each recorded word. Granularity is
//! the trade-off: a larger bucket means fewer words per scan but more false conflicts between
//! scans and inserts of nearby keys. The words are packed eight to a cache line: padding each to
//! its own line (1 MiB per table instead of 128 KiB) measured no better on TPC-C or YCSB-E
//! (`txlab run -w tpcc --repeat 3`, `txlab run -w ycsb --preset e --repeat 3`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Default log2 of keys per bucket.
pub const DEFAULT_SHIFT: u32 = 6;
/// Default number of bucket words per table.
pub const DEFAULT_SLOTS: usize = 16384;

const SCAN_ONE: u64 = 1;
const SCAN_MASK: u64 = 0xFFFF_FFFF;
const INSERT_ONE: u64 = 1 << 32;
const _: () = assert!(SCAN_MASK & INSERT_ONE == 0 && SCAN_MASK + 1 == INSERT_ONE);

/// The bucket words of one table. See the module docs.
pub struct RangeBuckets {
    shift: u32,
    slot_bits: u32,
    words: Box<[AtomicU64]>,
    /// One clock per word when a timestamp-ordered protocol asked for them, else empty.
    clocks: Box<[Clock]>,
}

/// The logical timestamps of one bucket word (see [`RangeBuckets::enable_clocks`]).
#[derive(Default)]
struct Clock {
    wts: AtomicU64,
    rts: AtomicU64,
}

/// One batch of a scan's coverage: the bucket words to read (or lock) first, then the key range
/// to read from the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// First key of the batch (inclusive).
    pub lo: u64,
    /// Last key of the batch (inclusive).
    pub hi: u64,
    first_bucket: u64,
    buckets: u64,
    visited: u64,
    all: bool,
}

impl RangeBuckets {
    /// `2^shift` keys per bucket, `slots` words (rounded up to a power of two).
    pub fn new(shift: u32, slots: usize) -> Self {
        let slots = slots.max(1).next_power_of_two();
        RangeBuckets {
            shift: shift.min(63),
            slot_bits: slots.trailing_zeros(),
            words: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            clocks: Box::new([]),
        }
    }

    /// Gives every word a logical clock of two words that only grow, whose meaning is the
    /// protocol's:
    ///
    /// * TicToc (data-driven timestamps): `wts`, the largest commit timestamp of a deletion
    ///   whose record was unlinked from the bucket (absence observed in the bucket is valid from
    ///   there on), and `rts`, the largest commit timestamp of a transaction that validated
    ///   absence observed in the bucket (a key that appears in it afterwards must commit later).
    /// * The serializable multi-version certifiers (`protocols::mv::worker`): `wts`, the
    ///   largest commit timestamp of a transaction that made a key of the bucket present, and
    ///   `rts`, the largest commit timestamp of one that observed absence in it.
    pub fn enable_clocks(&mut self) {
        self.clocks = (0..self.words.len()).map(|_| Clock::default()).collect();
    }

    /// Whether the words have clocks.
    #[inline]
    pub fn has_clocks(&self) -> bool {
        !self.clocks.is_empty()
    }

    /// Log2 of keys per bucket.
    pub fn shift(&self) -> u32 {
        self.shift
    }

    /// Number of words.
    pub fn slots(&self) -> usize {
        self.words.len()
    }

    #[inline]
    fn slot_of_bucket(&self, b: u64) -> usize {
        // Consecutive buckets map to distinct words; the high part is mixed in so that ranges
        // far apart (e.g. other warehouses in a composite key) spread over the array.
        let high = b >> self.slot_bits;
        let mix = high.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        ((b ^ mix) & ((1u64 << self.slot_bits) - 1)) as usize
    }

    /// The word index of `key`'s bucket.
    #[inline]
    pub fn slot_of(&self, key: u64) -> usize {
        self.slot_of_bucket(key >> self.shift)
    }

    // ---- optimistic use ------------------------------------------------------------------------

    /// Reads the version of word `slot`.
    #[inline]
    pub fn version(&self, slot: usize) -> u64 {
        // Acquire: pairs with the Release in `bump`; an index insert made before a bump we see is
        // visible to the index read that follows.
        self.words[slot].load(Ordering::Acquire)
    }

    /// Bumps the version of `key`'s bucket after an insert touched the index. Returns the word
    /// index and the version *before* the bump (so the inserter can re-stamp its own entry).
    #[inline]
    pub fn bump(&self, key: u64) -> (usize, u64) {
        let slot = self.slot_of(key);
        // AcqRel: Release orders the preceding index insert before the new version.
        let old = self.words[slot].fetch_add(1, Ordering::AcqRel);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
        (slot, old)
    }

    // ---- timestamp-ordered use (with clocks) ---------------------------------------------------

    /// The clock `(wts, rts)` of word `slot`.
    #[inline]
    pub fn clock(&self, slot: usize) -> (u64, u64) {
        let c = &self.clocks[slot];
        // SeqCst: `wts` pairs with the Release in `raise` (a reader that missed a key whose
        // record the GC removed sees the deletion's timestamp); `rts` is the inserter's side of
        // the protocol described at `extend_rts`.
        (c.wts.load(Ordering::SeqCst), c.rts.load(Ordering::SeqCst))
    }

    /// Raises the clock of `key`'s word to at least `(wts, rts)`: the GC, before it removes an
    /// unlinked record's index entry, hands its timestamps to the bucket.
    #[inline]
    pub fn raise(&self, key: u64, wts: u64, rts: u64) {
        let c = &self.clocks[self.slot_of(key)];
        // Release: the index removal that follows is ordered after it (pairs with `clock`).
        c.wts.fetch_max(wts, Ordering::Release);
        c.rts.fetch_max(rts, Ordering::Release);
    }

    /// Raises the `rts` of word `slot` to at least `ts` (a transaction that validated absence
    /// in it commits at `ts`). The caller then issues a SeqCst fence and re-checks the version;
    /// an inserter bumps the version, issues a SeqCst fence and reads `rts` ([`Self::clock`]).
    /// By the fences' total order, either the re-check sees the bump (the validator aborts) or
    /// the inserter's read sees `ts` or more (it commits later). When `rts` is already at least
    /// `ts`, the SeqCst load that saw it stands in for the write: the inserter's SeqCst read
    /// cannot see an older value (C++20 coherence order, which Rust follows).
    #[inline]
    pub fn extend_rts(&self, slot: usize, ts: u64) {
        let rts = &self.clocks[slot].rts;
        if rts.load(Ordering::SeqCst) < ts {
            rts.fetch_max(ts, Ordering::SeqCst);
            crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
        }
    }

    /// Raises the `wts` of word `slot` to at least `ts` and returns its previous value
    /// (SeqCst: one side of the store-then-load pairs of `protocols::mv::worker`).
    #[inline]
    pub fn extend_wts(&self, slot: usize, ts: u64) -> u64 {
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
        self.clocks[slot].wts.fetch_max(ts, Ordering::SeqCst)
    }

    // ---- pessimistic use -----------------------------------------------------------------------

    /// Takes a scan hold on word `slot` unless an insert holds it; `own_inserts` insert holds
    /// belong to the caller and do not conflict.
    #[inline]
    pub fn try_lock_scan(&self, slot: usize, own_inserts: u32) -> bool {
        let w = &self.words[slot];
        let mut cur = w.load(Ordering::Relaxed);
        loop {
            if cur >> 32 != u64::from(own_inserts) {
                return false;
            }
            // Acquire: pairs with the Release in `unlock_insert`.
            match w.compare_exchange_weak(cur, cur + SCAN_ONE, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
                    return true;
                }
                Err(v) => cur = v,
            }
        }
    }

    /// Releases a scan hold.
    #[inline]
    pub fn unlock_scan(&self, slot: usize) {
        // Release: pairs with the Acquire in `try_lock_insert`.
        self.words[slot].fetch_sub(SCAN_ONE, Ordering::Release);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
    }

    /// Takes an insert hold on word `slot` unless a scan holds it; `own_scans` scan holds belong
    /// to the caller and do not conflict.
    #[inline]
    pub fn try_lock_insert(&self, slot: usize, own_scans: u32) -> bool {
        let w = &self.words[slot];
        let mut cur = w.load(Ordering::Relaxed);
        loop {
            if cur & SCAN_MASK != u64::from(own_scans) {
                return false;
            }
            match w.compare_exchange_weak(
                cur,
                cur + INSERT_ONE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
                    return true;
                }
                Err(v) => cur = v,
            }
        }
    }

    /// Releases an insert hold.
    #[inline]
    pub fn unlock_insert(&self, slot: usize) {
        self.words[slot].fetch_sub(INSERT_ONE, Ordering::Release);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
    }

    /// Takes a scan and an insert hold on word `slot` at once, only when nobody else holds it
    /// (a range written as a whole, or scanned and written by one transaction). Taking the two
    /// one after the other could deadlock two waiters that each hold one; this takes neither
    /// unless it can take both.
    #[inline]
    pub fn try_lock_both(&self, slot: usize) -> bool {
        // Acquire: pairs with the Release in `unlock_scan` and `unlock_insert`.
        let taken = self.words[slot]
            .compare_exchange(0, SCAN_ONE + INSERT_ONE, Ordering::Acquire, Ordering::Relaxed)
            .is_ok();
        if taken {
            crate::util::shared_writes::note(crate::util::shared_writes::Site::Phantom);
        }
        taken
    }

    /// The words of the buckets covering `[lo, hi]` (`lo <= hi`), each once, into `out`
    /// (cleared first): every word when the range covers at least as many buckets as there are
    /// words.
    pub fn range_slots(&self, lo: u64, hi: u64, out: &mut Vec<usize>) {
        out.clear();
        let (first, last) = (lo >> self.shift, hi >> self.shift);
        if last - first >= self.words.len() as u64 - 1 {
            out.extend(0..self.words.len());
            return;
        }
        out.extend((first..=last).map(|b| self.slot_of_bucket(b)));
        out.sort_unstable();
        out.dedup();
    }

    // ---- scan coverage -------------------------------------------------------------------------

    /// The first batch covering `[lo, hi]` (`lo <= hi`): the bucket of `lo`.
    pub fn first_batch(&self, lo: u64, hi: u64) -> Batch {
        self.batch(lo, hi, lo >> self.shift, 1, 0)
    }

    /// The batch after `prev` within `[.., hi]`, or `None` when `prev` reached `hi`. Batches
    /// double up to 64 buckets; once the buckets covered would reach the number of words, one
    /// last batch covers the rest of the range with every word.
    pub fn next_batch(&self, prev: &Batch, hi: u64) -> Option<Batch> {
        if prev.hi >= hi || prev.all {
            return None;
        }
        let visited = prev.visited;
        let b = prev.first_bucket + prev.buckets;
        Some(self.batch(prev.hi + 1, hi, b, (prev.buckets * 2).min(64), visited))
    }

    fn batch(&self, lo: u64, hi: u64, first_bucket: u64, want: u64, visited: u64) -> Batch {
        let last_bucket = hi >> self.shift;
        let buckets = want.min(last_bucket - first_bucket + 1);
        let slots = self.words.len() as u64;
        if visited + buckets >= slots && last_bucket - first_bucket + 1 > buckets {
            // The rest of the range would touch at least every word: read each once.
            return Batch {
                lo,
                hi,
                first_bucket: 0,
                buckets: slots,
                visited: visited + slots,
                all: true,
            };
        }
        let end_bucket = first_bucket + buckets - 1;
        let batch_hi =
            if end_bucket == last_bucket { hi } else { ((end_bucket + 1) << self.shift) - 1 };
        Batch { lo, hi: batch_hi, first_bucket, buckets, visited: visited + buckets, all: false }
    }

    /// The words a batch covers, in order (each once when the batch covers every word).
    pub fn batch_slots(&self, batch: &Batch) -> impl Iterator<Item = usize> + '_ {
        let (all, first) = (batch.all, batch.first_bucket);
        (0..batch.buckets).map(
            move |i| {
                if all {
                    i as usize
                } else {
                    self.slot_of_bucket(first + i)
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cover(rb: &RangeBuckets, lo: u64, hi: u64) -> Vec<Batch> {
        let mut out = vec![rb.first_batch(lo, hi)];
        while let Some(b) = rb.next_batch(out.last().unwrap(), hi) {
            out.push(b);
        }
        out
    }

    #[test]
    fn range_slots_cover_every_key_once_and_saturate_at_every_word() {
        let rb = RangeBuckets::new(4, 64);
        let mut out = Vec::new();
        for (lo, hi) in [(0u64, 0u64), (5, 200), (16, 31), (1 << 40, (1 << 40) + 999)] {
            rb.range_slots(lo, hi, &mut out);
            for k in (lo..=hi).step_by(3).chain([hi]) {
                assert!(out.contains(&rb.slot_of(k)), "key {k} of [{lo}, {hi}] covered");
            }
            assert!(out.windows(2).all(|w| w[0] < w[1]), "sorted, each word once: {out:?}");
        }
        rb.range_slots(7, u64::MAX, &mut out);
        assert_eq!(out, (0..64).collect::<Vec<_>>(), "an unbounded range takes every word");
    }

    #[test]
    fn both_holds_are_taken_together_or_not_at_all() {
        let rb = RangeBuckets::new(4, 64);
        assert!(rb.try_lock_scan(3, 0));
        assert!(!rb.try_lock_both(3), "a scan holder excludes a writer of the whole bucket");
        rb.unlock_scan(3);
        assert!(rb.try_lock_both(3));
        assert!(!rb.try_lock_scan(3, 0) && !rb.try_lock_insert(3, 0) && !rb.try_lock_both(3));
        rb.unlock_scan(3);
        rb.unlock_insert(3);
        assert!(rb.try_lock_insert(3, 0), "both released");
    }

    #[test]
    fn batches_tile_the_range_exactly_and_cover_every_key_bucket() {
        let rb = RangeBuckets::new(4, 1024);
        for (lo, hi) in [(0u64, 0u64), (5, 5), (3, 100), (16, 31), (17, 5000), (0, 16 * 1023)] {
            let bs = cover(&rb, lo, hi);
            assert_eq!(bs[0].lo, lo);
            assert_eq!(bs.last().unwrap().hi, hi);
            for w in bs.windows(2) {
                assert_eq!(w[0].hi + 1, w[1].lo, "batches are contiguous");
            }
            for b in &bs {
                let slots: Vec<_> = rb.batch_slots(b).collect();
                for k in [b.lo, b.hi, (b.lo + b.hi) / 2] {
                    assert!(slots.contains(&rb.slot_of(k)), "key {k} covered by its batch");
                }
            }
        }
    }

    #[test]
    fn a_range_wider_than_the_array_ends_with_one_batch_of_every_word() {
        let rb = RangeBuckets::new(6, 64);
        let bs = cover(&rb, 0, u64::MAX);
        let last = bs.last().unwrap();
        assert_eq!(last.hi, u64::MAX);
        let mut slots: Vec<_> = rb.batch_slots(last).collect();
        slots.sort_unstable();
        assert_eq!(slots, (0..64).collect::<Vec<_>>());
        let words: u64 = bs.iter().map(|b| b.buckets).sum();
        assert!(words < 2 * 64, "at most about twice the words in all: {words}");
        assert_eq!(bs[0].hi, 63, "a scan that stops early reads one bucket");
    }

    #[test]
    fn consecutive_buckets_use_distinct_words() {
        let rb = RangeBuckets::new(6, 4096);
        let base = 7u64 << 40;
        let mut seen: Vec<_> = (0..4096u64).map(|i| rb.slot_of(base + (i << 6))).collect();
        seen.sort_unstable();
        seen.dedup();
        assert!(seen.len() >= 4095);
    }

    #[test]
    fn scan_and_insert_holds_exclude_each_other_but_not_themselves() {
        let rb = RangeBuckets::new(6, 16);
        assert!(rb.try_lock_scan(3, 0));
        assert!(rb.try_lock_scan(3, 0));
        assert!(!rb.try_lock_insert(3, 0));
        assert!(!rb.try_lock_insert(3, 1), "one scan hold is someone else's");
        rb.unlock_scan(3);
        assert!(!rb.try_lock_insert(3, 0));
        assert!(rb.try_lock_insert(3, 1), "the only scan hold is the caller's own");
        rb.unlock_insert(3);
        rb.unlock_scan(3);
        assert!(rb.try_lock_insert(3, 0));
        assert!(rb.try_lock_insert(3, 0));
        assert!(!rb.try_lock_scan(3, 0));
        assert!(!rb.try_lock_scan(3, 1));
        assert!(rb.try_lock_scan(3, 2));
        rb.unlock_scan(3);
        rb.unlock_insert(3);
        rb.unlock_insert(3);
        assert!(rb.try_lock_scan(3, 0));
    }

    #[test]
    fn bump_changes_the_version_seen_by_readers() {
        let rb = RangeBuckets::new(6, 16);
        let s = rb.slot_of(1000);
        let v = rb.version(s);
        assert_eq!(rb.bump(1000), (s, v));
        assert_ne!(rb.version(s), v);
    }
}
