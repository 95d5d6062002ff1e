//! An ordered index for keys that are dense within groups: TPC-C's orders, new orders and order
//! lines (a district's order ids count up from 1), history rows (a sequence per worker), YCSB's
//! keys `0..N`.
//!
//! Why our own: inserting into congee costs a traversal with a version check per level, a
//! node lock (CAS), an unlock and now and then a node growth; NewOrder inserts ten order lines at
//! neighbouring keys, and those inserts were 11 % of its time. Here a key is an address:
//!
//! ```text
//! key = [ directory: 46 bits | leaf: 9 bits | slot: 9 bits ]
//! ```
//!
//! A sorted array of directories (one per 2^18 keys, so small and cache-resident) is searched by
//! binary search; the directory holds 512 leaf pointers, a leaf 512 slots of `row id + 1` (0:
//! empty). An insert is one counter increment and one CAS on the key's slot; a lookup is the
//! binary search and two dependent loads; a scan walks slots in key order. A new directory is
//! rare (every 2^18 keys): its creator copies the array with the new entry under a mutex and
//! publishes the copy; readers hold the old copy through the caller's epoch guard, which defers
//! its free. (congee, which this index first used for its directories, has range scans that miss
//! present keys while other keys are inserted or removed; see `storage::index`.)
//!
//! Each directory keeps, side by side, a counter per leaf of its entries plus inserts in flight,
//! so a scan skips emptied leaves (Delivery scans from a district's oldest undelivered order,
//! past every delivered one) at 16 leaves per cache line without touching them. An insert counts
//! itself before its CAS and a removal after its CAS, so a counter never falls below the number
//! of entries: a leaf whose counter reads 0 holds no entry whose insert has returned. (A bitmap
//! of non-empty leaves would be denser, but clearing a bit races with a concurrent insert into
//! the same leaf: the insert can return while the bit is briefly clear, and a scan then misses
//! its key; `tests::scans_see_every_inserted_key_while_its_leaf_empties_and_refills` caught that
//! design.)
//!
//! Memory: 4 KiB per leaf that was ever used, never returned while the index lives (like the
//! hash index). Sparse keys waste it: one key per 512-slot leaf costs 4 KiB. Use it only where
//! keys fill their leaves.

use crate::storage::index::IndexGuard;
use crate::storage::row_store::RowId;
use crossbeam_epoch::{Atomic, Owned};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

const SLOT_BITS: u32 = 9;
const LEAF_BITS: u32 = 9;
const SLOTS: usize = 1 << SLOT_BITS;
const LEAVES: usize = 1 << LEAF_BITS;
const DIR_SHIFT: u32 = SLOT_BITS + LEAF_BITS;

#[repr(C, align(64))]
struct Leaf {
    /// `row id + 1`, or 0 for no entry.
    slots: [AtomicU64; SLOTS],
}

#[repr(C, align(64))]
struct Dir {
    /// Per leaf: its entries plus inserts in flight (see the module docs).
    live: [AtomicU32; LEAVES],
    leaves: [AtomicPtr<Leaf>; LEAVES],
}

/// Allocates a zeroed `T`.
///
/// # Safety
///
/// All-zero bytes must be a valid `T` (here: atomics, null pointers and integers).
unsafe fn zeroed<T>() -> *mut T {
    let layout = std::alloc::Layout::new::<T>();
    // SAFETY: `T` (a Dir or a Leaf) has a non-zero size. The block has `T`'s layout, so
    // `Box::from_raw` may free it, and by the contract its zeroes are a valid `T`.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    p.cast()
}

#[inline(always)]
fn leaf_of(key: u64) -> usize {
    ((key >> SLOT_BITS) as usize) & (LEAVES - 1)
}

#[inline(always)]
fn slot_of(key: u64) -> usize {
    (key as usize) & (SLOTS - 1)
}

/// The directories, sorted by number (`key >> 18`); the `usize` is a `*mut Dir`.
struct DirMap {
    dirs: Box<[(u64, usize)]>,
}

impl DirMap {
    /// Position of the first directory numbered `d` or more.
    #[inline(always)]
    fn position(&self, d: u64) -> usize {
        self.dirs.partition_point(|&(n, _)| n < d)
    }
}

/// See the module docs.
pub struct DenseIndex {
    map: Atomic<DirMap>,
    /// Serialises directory creation (rare: once per 2^18 keys), never taken on lookups.
    grow: Mutex<()>,
}

impl Default for DenseIndex {
    fn default() -> Self {
        DenseIndex { map: Atomic::new(DirMap { dirs: Box::new([]) }), grow: Mutex::new(()) }
    }
}

impl DenseIndex {
    /// Index memory per key at full leaves, in bytes (for load-size estimates).
    pub const BYTES_PER_KEY: u64 = 8;

    /// The current directory array.
    #[inline(always)]
    fn snapshot<'g>(&self, g: &'g IndexGuard) -> &'g DirMap {
        let p = self.map.load(Ordering::Acquire, g);
        // SAFETY: `map` always holds a published array (set in `default`, replaced in
        // `dir_or_create`); a replaced array is freed through `defer_destroy`, so not before
        // every guard pinned now, `g` included, is dropped; the last one is freed in Drop.
        unsafe { p.deref() }
    }

    #[inline(always)]
    fn dir<'g>(&self, key: u64, g: &'g IndexGuard) -> Option<&'g Dir> {
        let map = self.snapshot(g);
        let d = key >> DIR_SHIFT;
        let i = map.position(d);
        let &(n, p) = map.dirs.get(i)?;
        // SAFETY: directory pointers come from `zeroed::<Dir>()` and are freed only in Drop,
        // which has `&mut self`.
        (n == d).then(|| unsafe { &*(p as *const Dir) })
    }

    #[inline(always)]
    fn leaf(dir: &Dir, li: usize) -> Option<&Leaf> {
        let p = dir.leaves[li].load(Ordering::Acquire);
        // SAFETY: leaf pointers are published once (Release CAS in `leaf_or_create`) from
        // `zeroed::<Leaf>()` and freed only in Drop.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    fn dir_or_create<'g>(&self, key: u64, g: &'g IndexGuard) -> &'g Dir {
        if let Some(d) = self.dir(key, g) {
            return d;
        }
        // A poisoned lock only means another creator panicked; the array it guards is intact.
        let _held = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = self.dir(key, g) {
            return d;
        }
        let old = self.map.load(Ordering::Acquire, g);
        // SAFETY: as in `snapshot`.
        let dirs = &unsafe { old.deref() }.dirs;
        let d = key >> DIR_SHIFT;
        let at = dirs.partition_point(|&(n, _)| n < d);
        // SAFETY: a Dir of zeroes is zero counters and null leaf pointers.
        let fresh = unsafe { zeroed::<Dir>() };
        let mut next = Vec::with_capacity(dirs.len() + 1);
        next.extend_from_slice(&dirs[..at]);
        next.push((d, fresh as usize));
        next.extend_from_slice(&dirs[at..]);
        self.map.store(Owned::new(DirMap { dirs: next.into_boxed_slice() }), Ordering::Release);
        // SAFETY: `old` is no longer reachable from `map`; readers that loaded it hold guards,
        // and the free waits for them.
        unsafe { g.defer_destroy(old) };
        // SAFETY: published just now; freed only in Drop.
        unsafe { &*fresh }
    }

    fn leaf_or_create(dir: &Dir, li: usize) -> &Leaf {
        if let Some(l) = Self::leaf(dir, li) {
            return l;
        }
        // SAFETY: a Leaf of zeroes has no entries.
        let fresh = unsafe { zeroed::<Leaf>() };
        match dir.leaves[li].compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: published by this CAS; freed only in Drop.
            Ok(_) => unsafe { &*fresh },
            // SAFETY: `fresh` was never published; `other` as in `leaf`.
            Err(other) => unsafe {
                drop(Box::from_raw(fresh));
                &*other
            },
        }
    }

    /// Looks `key` up.
    #[inline]
    pub fn get(&self, key: u64, g: &IndexGuard) -> Option<RowId> {
        let leaf = Self::leaf(self.dir(key, g)?, leaf_of(key))?;
        match leaf.slots[slot_of(key)].load(Ordering::Acquire) {
            0 => None,
            v => Some(RowId(v - 1)),
        }
    }

    /// Inserts `key -> rid` unless `key` is present; returns the existing row id if it is.
    #[inline]
    pub fn insert_if_absent(&self, key: u64, rid: RowId, g: &IndexGuard) -> Result<(), RowId> {
        debug_assert!(rid.0 < u64::MAX, "row id {} has no slot encoding", rid.0);
        let dir = self.dir_or_create(key, g);
        let li = leaf_of(key);
        let leaf = Self::leaf_or_create(dir, li);
        // Counted before the entry appears (see the module docs).
        dir.live[li].fetch_add(1, Ordering::SeqCst);
        match leaf.slots[slot_of(key)].compare_exchange(
            0,
            rid.0 + 1,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => Ok(()),
            Err(v) => {
                dir.live[li].fetch_sub(1, Ordering::SeqCst);
                Err(RowId(v - 1))
            }
        }
    }

    /// Removes `key` if it still maps to `rid`. Returns whether it was removed.
    #[inline]
    pub fn remove_if(&self, key: u64, rid: RowId, g: &IndexGuard) -> bool {
        let Some(dir) = self.dir(key, g) else { return false };
        let li = leaf_of(key);
        let Some(leaf) = Self::leaf(dir, li) else { return false };
        let removed = leaf.slots[slot_of(key)]
            .compare_exchange(rid.0.wrapping_add(1), 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if removed {
            // Uncounted after the entry is gone (see the module docs).
            dir.live[li].fetch_sub(1, Ordering::SeqCst);
        }
        removed
    }

    /// Writes the entries with `lo <= key <= hi`, in key order, into `out` until it is full;
    /// returns how many it wrote.
    pub fn scan(&self, lo: u64, hi: u64, out: &mut [(usize, usize)], g: &IndexGuard) -> usize {
        if lo > hi || out.is_empty() {
            return 0;
        }
        let mut n = 0;
        let map = self.snapshot(g);
        let d_hi = hi >> DIR_SHIFT;
        for &(dk, p) in &map.dirs[map.position(lo >> DIR_SHIFT)..] {
            if dk > d_hi {
                break;
            }
            // SAFETY: as in `dir`.
            let dir = unsafe { &*(p as *const Dir) };
            let base = dk << DIR_SHIFT;
            let from = lo.max(base);
            let to = hi.min(base | ((1 << DIR_SHIFT) - 1));
            n = Self::scan_dir(dir, base, from, to, out, n);
            if n == out.len() {
                break;
            }
        }
        n
    }

    fn scan_dir(
        dir: &Dir,
        base: u64,
        from: u64,
        to: u64,
        out: &mut [(usize, usize)],
        mut n: usize,
    ) -> usize {
        let (l_from, l_to) = (leaf_of(from), leaf_of(to));
        for li in l_from..=l_to {
            if dir.live[li].load(Ordering::SeqCst) == 0 {
                continue;
            }
            if let Some(leaf) = Self::leaf(dir, li) {
                let s_from = if li == l_from { slot_of(from) } else { 0 };
                let s_to = if li == l_to { slot_of(to) } else { SLOTS - 1 };
                let leaf_base = base | ((li as u64) << SLOT_BITS);
                for s in s_from..=s_to {
                    let v = leaf.slots[s].load(Ordering::Acquire);
                    if v != 0 {
                        out[n] = ((leaf_base | s as u64) as usize, (v - 1) as usize);
                        n += 1;
                        if n == out.len() {
                            return n;
                        }
                    }
                }
            }
        }
        n
    }
}

impl Drop for DenseIndex {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no guard can still reach the index, so the current array is ours
        // (replaced ones were handed to `defer_destroy`), and every directory and leaf came
        // from `zeroed` and is freed exactly once, here.
        unsafe {
            let map = self.map.load(Ordering::Relaxed, crossbeam_epoch::unprotected());
            for &(_, p) in map.deref().dirs.iter() {
                let dir = p as *mut Dir;
                for leaf in &(*dir).leaves {
                    let l = leaf.load(Ordering::Relaxed);
                    if !l.is_null() {
                        drop(Box::from_raw(l));
                    }
                }
                drop(Box::from_raw(dir));
            }
            drop(map.into_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::index::pin;

    /// Threads share one leaf, each inserting its own key, scanning the leaf and removing the
    /// key again, so the leaf's counter keeps passing through 0 from both directions: a scan
    /// must always find the scanner's own key (the occupancy bit may not be lost).
    #[test]
    fn scans_see_every_inserted_key_while_its_leaf_empties_and_refills() {
        let idx = DenseIndex::default();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let idx = &idx;
                s.spawn(move || {
                    let mut out = [(0usize, 0usize); 8];
                    for n in 0..100_000u64 {
                        let g = pin();
                        let rid = RowId(t << 32 | n);
                        assert_eq!(idx.insert_if_absent(t, rid, &g), Ok(()));
                        let got = idx.scan(0, SLOTS as u64 - 1, &mut out, &g);
                        assert!(
                            out[..got].contains(&(t as usize, rid.0 as usize)),
                            "thread {t}, round {n}: the scan missed our key ({:?})",
                            &out[..got]
                        );
                        assert!(idx.remove_if(t, rid, &g));
                    }
                });
            }
        });
        let g = pin();
        let mut out = [(0usize, 0usize); 8];
        assert_eq!(idx.scan(0, u64::MAX, &mut out, &g), 0);
    }

    #[test]
    fn directories_are_created_in_any_order_and_scanned_in_key_order() {
        let idx = DenseIndex::default();
        let g = pin();
        let keys = [5u64 << 40, 3, 1 << DIR_SHIFT, (1 << DIR_SHIFT) - 1, u64::MAX, 7 << 20];
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(idx.insert_if_absent(k, RowId(i as u64), &g), Ok(()));
            assert_eq!(idx.insert_if_absent(k, RowId(99), &g), Err(RowId(i as u64)));
        }
        let mut sorted: Vec<_> = keys.iter().enumerate().map(|(i, &k)| (k as usize, i)).collect();
        sorted.sort();
        let mut out = [(0usize, 0usize); 16];
        let got = idx.scan(0, u64::MAX, &mut out, &g);
        assert_eq!(&out[..got], &sorted[..]);
        // A limit stops the scan; bounds cut inside directories and leaves.
        assert_eq!(idx.scan(0, u64::MAX, &mut out[..2], &g), 2);
        assert_eq!(&out[..2], &sorted[..2]);
        let got = idx.scan(4, (5u64 << 40) - 1, &mut out, &g);
        assert_eq!(&out[..got], &sorted[1..4]);
    }
}
