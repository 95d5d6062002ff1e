//! A pre-sized hash index `u64 -> RowId` whose lookups cost one cache miss.
//!
//! Written by hand because no crate offers this shape (ECOSYSTEM.md §2 recommends it for dense
//! `u64` keys, as DBx1000 and Cicada do): general-purpose concurrent maps (`scc::HashIndex`,
//! papaya) resize, keep entries apart from bucket metadata and reclaim removed entries, so a
//! lookup touches several cache lines: in a Silo run of YCSB (e) on 10 M rows, `scc::HashIndex`
//! lookups took a large share of all cycles (`perf record` of `txlab run -p silo -w ycsb --preset
//! e --records 10000000`). Here:
//!
//! * The bucket array is sized once, from the expected row count, to a power of two with at most
//!   two keys per bucket on average, and never resized. A bucket is one cache line:
//!
//!   ```text
//!   | version: u64 | keys: [u64; 3] | rids: [u64; 3] (row id + 1, 0 = empty) | next: *Bucket |
//!   ```
//!
//!   Keys hash to a bucket by Fibonacci hashing (multiply, keep the high bits), which spreads
//!   dense keys evenly; a full bucket chains to overflow buckets. Overflow buckets are never
//!   unlinked or freed before the index is dropped (their slots are reused by later inserts), so a
//!   reader may follow `next` without any reclamation scheme. A table that outgrows its estimate
//!   stays correct; its chains just get longer.
//! * Readers are optimistic: the first bucket's `version` is a sequence lock for its whole chain.
//!   A reader loads it, scans the chain with relaxed atomic loads, and retries if it changed. It
//!   writes no shared memory. Writers (insert, remove) lock the chain by making the version odd.
//!   Every field is an atomic, so a racing read is never undefined behaviour, only retried.
//!   Orderings: keys and row ids are loaded Relaxed between the reader's two loads of the
//!   version (Acquire, then an Acquire fence before the Relaxed re-load), and stored Relaxed
//!   under the version lock, whose Acquire CAS and Release unlock order them between writers and
//!   before a reader's re-load; `next` is loaded with Acquire, pairing with the Release that
//!   links an initialised overflow bucket.

use crate::storage::memory;
use crate::storage::row_store::RowId;
use std::alloc::Layout;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};

/// Key slots per bucket (what fits in one cache line beside the version and `next`).
const SLOTS: usize = 3;
/// Fibonacci hashing multiplier: 2^64 / golden ratio.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;
/// Smallest bucket array.
const MIN_BUCKETS: usize = 64;

#[repr(C, align(64))]
struct Bucket {
    /// Sequence lock of the chain that starts here (only the first bucket's is used): odd while a
    /// writer is inside.
    version: AtomicU64,
    keys: [AtomicU64; SLOTS],
    /// Row id + 1; 0 marks an empty slot.
    rids: [AtomicU64; SLOTS],
    next: AtomicPtr<Bucket>,
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

impl Bucket {
    /// Finds `key` in this one bucket: the stored row id + 1, or 0.
    #[inline]
    fn find(&self, key: u64) -> u64 {
        for i in 0..SLOTS {
            let r = self.rids[i].load(Ordering::Relaxed);
            if r != 0 && self.keys[i].load(Ordering::Relaxed) == key {
                return r;
            }
        }
        0
    }
}

/// See the module docs.
pub struct HashIndex {
    buckets: *mut Bucket,
    /// log2 of the number of buckets.
    bits: u32,
}

// SAFETY: all shared state is atomics; the bucket array and overflow buckets live until `drop`,
// which takes `&mut self`.
unsafe impl Send for HashIndex {}
// SAFETY: as above; concurrent access goes through atomics under the sequence-lock protocol.
unsafe impl Sync for HashIndex {}

impl HashIndex {
    /// An empty index sized for `expected` keys (at most two per bucket on average).
    pub fn new(expected: usize) -> Self {
        let n = expected.div_ceil(2).next_power_of_two().max(MIN_BUCKETS);
        let bits = n.trailing_zeros();
        // `memory::map` returns zeroed memory, and an all-zero `Bucket` is valid: version 0,
        // empty slots, no overflow.
        let buckets = memory::map(Self::layout(n)).cast::<Bucket>();
        HashIndex { buckets, bits }
    }

    fn layout(n: usize) -> Layout {
        Layout::array::<Bucket>(n).expect("bucket array size overflows the address space")
    }

    /// Bytes of index memory per key at the sizing rule's worst case (one key per bucket).
    pub const MAX_BYTES_PER_KEY: u64 = 64;

    #[inline]
    fn head(&self, key: u64) -> &Bucket {
        let i = (key.wrapping_mul(FIB) >> (64 - self.bits)) as usize;
        // SAFETY: `i < 2^bits`, the array's length; the array lives as long as `self`.
        unsafe { &*self.buckets.add(i) }
    }

    /// The number of chains (the bucket array's length): [`HashIndex::for_each_in`] ranges.
    pub fn chains(&self) -> usize {
        1 << self.bits
    }

    /// Calls `f` on every entry of the chains `range`, each chain read consistently (sequence
    /// lock; a chain being written is waited for) into `buf` first. Entries inserted or removed
    /// meanwhile may or may not be seen; the others are seen once. For checkpoints, which read
    /// every row without stopping writers.
    pub fn for_each_in(
        &self,
        range: std::ops::Range<usize>,
        buf: &mut Vec<(u64, RowId)>,
        mut f: impl FnMut(u64, RowId),
    ) {
        for c in range.start..range.end.min(self.chains()) {
            // SAFETY: `c < 2^bits`, the array's length; the array lives as long as `self`.
            let head = unsafe { &*self.buckets.add(c) };
            loop {
                let v1 = head.version.load(Ordering::Acquire);
                if v1 & 1 == 1 {
                    std::hint::spin_loop();
                    continue;
                }
                buf.clear();
                Self::walk(head, |b| {
                    for i in 0..SLOTS {
                        let r = b.rids[i].load(Ordering::Relaxed);
                        if r != 0 {
                            buf.push((b.keys[i].load(Ordering::Relaxed), RowId(r - 1)));
                        }
                    }
                    None::<()>
                });
                // Sequence-lock read: the loads above happen before the re-check.
                fence(Ordering::Acquire);
                if head.version.load(Ordering::Relaxed) == v1 {
                    break;
                }
            }
            for &(k, r) in buf.iter() {
                f(k, r);
            }
        }
    }

    /// Hints the CPU to load `key`'s first bucket.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults or changes memory.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (self.head(key) as *const Bucket).cast(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    /// Looks `key` up.
    #[inline]
    pub fn get(&self, key: u64) -> Option<RowId> {
        let head = self.head(key);
        loop {
            let v1 = head.version.load(Ordering::Acquire);
            if v1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut found = head.find(key);
            let mut b = head.next.load(Ordering::Acquire);
            while found == 0 && !b.is_null() {
                // SAFETY: overflow buckets are published with Release after initialisation and
                // never freed before the index is dropped.
                let bucket = unsafe { &*b };
                found = bucket.find(key);
                b = bucket.next.load(Ordering::Acquire);
            }
            // Sequence-lock read: the loads above happen before the re-check.
            fence(Ordering::Acquire);
            if head.version.load(Ordering::Relaxed) == v1 {
                return found.checked_sub(1).map(RowId);
            }
        }
    }

    /// Locks `head`'s chain; returns the even version it had.
    #[inline]
    fn lock(head: &Bucket) -> u64 {
        loop {
            let v = head.version.load(Ordering::Relaxed);
            if v & 1 == 0
                && head
                    .version
                    .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                // Sequence-lock write: the odd version is ordered before the slot stores that
                // follow, so a reader that sees any of them sees the version change.
                fence(Ordering::Release);
                return v;
            }
            std::hint::spin_loop();
        }
    }

    #[inline]
    fn unlock(head: &Bucket, v: u64) {
        head.version.store(v + 2, Ordering::Release);
    }

    /// Calls `f` on each bucket of `head`'s chain until it returns `Some`.
    #[inline]
    fn walk<T>(head: &Bucket, mut f: impl FnMut(&Bucket) -> Option<T>) -> Option<T> {
        let mut b: *const Bucket = head;
        while !b.is_null() {
            // SAFETY: `head` is in the array; overflow buckets live until the index is dropped.
            let bucket = unsafe { &*b };
            if let Some(t) = f(bucket) {
                return Some(t);
            }
            b = bucket.next.load(Ordering::Acquire);
        }
        None
    }

    /// Inserts `key -> rid` unless `key` is present; returns the existing row id if it is.
    pub fn insert_if_absent(&self, key: u64, rid: RowId) -> Result<(), RowId> {
        let head = self.head(key);
        let v = Self::lock(head);
        let existing = Self::walk(head, |b| b.find(key).checked_sub(1));
        if let Some(old) = existing {
            Self::unlock(head, v);
            return Err(RowId(old));
        }
        let placed = Self::walk(head, |b| {
            let i = (0..SLOTS).find(|&i| b.rids[i].load(Ordering::Relaxed) == 0)?;
            b.keys[i].store(key, Ordering::Relaxed);
            b.rids[i].store(rid.0 + 1, Ordering::Relaxed);
            Some(())
        });
        if placed.is_none() {
            // Chain full: append an overflow bucket holding the key. Off the hot path (a chain
            // overflows only when the table outgrows its estimate or keys collide).
            let fresh = Box::new(Bucket {
                version: AtomicU64::new(0),
                keys: [AtomicU64::new(key), AtomicU64::new(0), AtomicU64::new(0)],
                rids: [AtomicU64::new(rid.0 + 1), AtomicU64::new(0), AtomicU64::new(0)],
                next: AtomicPtr::new(std::ptr::null_mut()),
            });
            let mut tail = head;
            loop {
                let n = tail.next.load(Ordering::Relaxed);
                if n.is_null() {
                    break;
                }
                // SAFETY: as in `walk`.
                tail = unsafe { &*n };
            }
            tail.next.store(Box::into_raw(fresh), Ordering::Release);
        }
        Self::unlock(head, v);
        Ok(())
    }

    /// Removes `key` if it still maps to `rid`. Returns whether it was removed.
    pub fn remove_if(&self, key: u64, rid: RowId) -> bool {
        let head = self.head(key);
        let v = Self::lock(head);
        let removed = Self::walk(head, |b| {
            let i = (0..SLOTS).find(|&i| {
                b.rids[i].load(Ordering::Relaxed) == rid.0 + 1
                    && b.keys[i].load(Ordering::Relaxed) == key
            })?;
            b.rids[i].store(0, Ordering::Relaxed);
            Some(())
        });
        Self::unlock(head, v);
        removed.is_some()
    }
}

impl Drop for HashIndex {
    fn drop(&mut self) {
        let n = 1usize << self.bits;
        for i in 0..n {
            // SAFETY: `i < n`; no reader remains (`&mut self`).
            let mut b = unsafe { &*self.buckets.add(i) }.next.load(Ordering::Relaxed);
            while !b.is_null() {
                // SAFETY: every overflow bucket came from `Box::into_raw` and is linked exactly
                // once, so it is freed exactly once.
                let bucket = unsafe { Box::from_raw(b) };
                b = bucket.next.load(Ordering::Relaxed);
            }
        }
        // SAFETY: the array came from `memory::map` with this layout; nothing refers into it.
        unsafe { memory::unmap(self.buckets.cast(), Self::layout(n)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngExt, SeedableRng};
    use std::collections::HashMap;
    use std::sync::atomic::AtomicBool;

    /// Random operations against a HashMap model on a tiny table, so chains overflow and slots
    /// are reused.
    #[test]
    fn matches_a_hashmap_model_with_long_chains() {
        let idx = HashIndex::new(0);
        let mut model = HashMap::new();
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(11);
        for step in 0..50_000u64 {
            let key = match step % 101 {
                0 => u64::MAX,
                1 => 0,
                _ => rng.random_range(0..1_500u64),
            };
            match rng.next_u32() % 3 {
                0 | 1 => {
                    let r = idx.insert_if_absent(key, RowId(step));
                    match model.get(&key) {
                        Some(&old) => assert_eq!(r, Err(RowId(old))),
                        None => {
                            assert_eq!(r, Ok(()));
                            model.insert(key, step);
                        }
                    }
                }
                _ => {
                    let expect = model.get(&key).copied();
                    let target = if step % 2 == 0 { expect.unwrap_or(1) } else { 987_654 };
                    let removed = idx.remove_if(key, RowId(target));
                    assert_eq!(removed, expect == Some(target));
                    if removed {
                        model.remove(&key);
                    }
                }
            }
            assert_eq!(idx.get(key).map(|r| r.0), model.get(&key).copied());
        }
        for (k, v) in &model {
            assert_eq!(idx.get(*k), Some(RowId(*v)));
        }
    }

    /// Readers never see a key mapped to another key's row while writers churn the same chains:
    /// each key `k` only ever maps to rows `k * 1000 + n`, and keys that are never removed are
    /// always found.
    #[test]
    fn concurrent_readers_see_only_consistent_entries() {
        let idx = HashIndex::new(0); // 64 buckets: every chain is shared and overflows.
        for k in 0..64u64 {
            idx.insert_if_absent(k, RowId(k * 1000)).unwrap();
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for w in 0..4u64 {
                let idx = &idx;
                let stop = &stop;
                s.spawn(move || {
                    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(w);
                    for n in 1..20_000u64 {
                        let k = 64 + w * 100 + rng.random_range(0..100u64);
                        let rid = RowId(k * 1000 + n % 1000);
                        if idx.insert_if_absent(k, rid).is_ok() {
                            assert!(idx.remove_if(k, rid));
                        }
                    }
                    stop.store(true, Ordering::Relaxed);
                });
            }
            for r in 0..4u64 {
                let idx = &idx;
                let stop = &stop;
                s.spawn(move || {
                    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(100 + r);
                    while !stop.load(Ordering::Relaxed) {
                        let k = rng.random_range(0..464u64);
                        match idx.get(k) {
                            Some(rid) => assert_eq!(rid.0 / 1000, k, "key {k} -> {rid:?}"),
                            None => assert!(k >= 64, "permanent key {k} not found"),
                        }
                    }
                });
            }
        });
        for k in 64..464u64 {
            assert_eq!(idx.get(k), None);
        }
    }
}
