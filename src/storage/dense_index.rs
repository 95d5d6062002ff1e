//! An ordered index for keys that are dense within groups: TPC-C's orders, new orders and order
//! lines (a district's order ids count up from 1), history rows (a sequence per worker), YCSB's
//! keys `0..N`.
//!
//! Why our own: inserting into congee costs a traversal with a version check per level, a
//! node lock (CAS), an unlock and now and then a node growth; NewOrder inserts ten order lines at
//! neighbouring keys, and with congee those inserts were a large share of its time (`perf
//! record` of `txlab run -w tpcc`). Here a key is an address:
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
//! keys fill their leaves. Leaves come from 2 MiB chunks (`LeafArena`), so that the
//! storage's [`Prefaulter`](crate::storage::Prefaulter) can keep the next chunk faulted in:
//! TPC-C creates a leaf every 32 NewOrders, and its first touch (a page the kernel zeroes) was
//! most of the page-fault time left in a worker once row memory was pre-faulted.

use crate::storage::index::IndexGuard;
use crate::storage::memory;
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

/// Leaves per arena chunk: 2 MiB.
const CHUNK_LEAVES: usize = 512;

/// Where leaves come from: 2 MiB chunks of zeroed memory, handed out a leaf at a time under a
/// mutex (a leaf is taken once per 512 keys, so the lock is rare), plus at most one spare chunk
/// already faulted in ([`LeafArena::prefault`]) that the next chunk is taken from. Chunks are
/// returned only when the index is dropped.
#[derive(Default)]
struct LeafArena {
    state: Mutex<ArenaState>,
}

#[derive(Default)]
struct ArenaState {
    /// Every chunk, the current one last.
    chunks: Vec<*mut Leaf>,
    /// Leaves of the current chunk handed out.
    used: usize,
    /// A chunk faulted in ahead of need, if any.
    spare: Option<*mut Leaf>,
    /// Leaves that lost a race to be published, for reuse (still zero).
    returned: Vec<*mut Leaf>,
}

// SAFETY: the raw pointers are chunks this arena owns; they are only handed out (as leaves
// published through atomics) and freed in Drop.
unsafe impl Send for ArenaState {}

impl LeafArena {
    fn chunk_layout() -> std::alloc::Layout {
        std::alloc::Layout::array::<Leaf>(CHUNK_LEAVES).expect("leaf chunk layout")
    }

    /// A zeroed leaf, valid until the arena is dropped.
    fn alloc(&self) -> *mut Leaf {
        // A poisoned lock only means a panic elsewhere; the state is consistent between calls.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = st.returned.pop() {
            return l;
        }
        if st.chunks.is_empty() || st.used == CHUNK_LEAVES {
            let chunk = st.spare.take().unwrap_or_else(|| memory::map(Self::chunk_layout()).cast());
            st.chunks.push(chunk);
            st.used = 0;
        }
        let i = st.used;
        st.used += 1;
        // SAFETY: `i < CHUNK_LEAVES`, inside the current chunk's mapping.
        unsafe { st.chunks[st.chunks.len() - 1].add(i) }
    }

    /// Takes back a leaf from [`LeafArena::alloc`] that was never published or written.
    fn give_back(&self, leaf: *mut Leaf) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).returned.push(leaf);
    }

    /// Makes sure a spare chunk is faulted in; returns the bytes faulted in now. The mapping and
    /// faulting run outside the lock, so allocating workers never wait for them.
    fn prefault(&self) -> usize {
        if self.state.lock().unwrap_or_else(|e| e.into_inner()).spare.is_some() {
            return 0;
        }
        let layout = Self::chunk_layout();
        let chunk = memory::map(layout);
        memory::populate(chunk, layout.size());
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.spare.is_none() {
            st.spare = Some(chunk.cast());
            return layout.size();
        }
        drop(st);
        // SAFETY: mapped above with this layout, never published.
        unsafe { memory::unmap(chunk, layout) };
        0
    }
}

impl Drop for LeafArena {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        for &chunk in st.chunks.iter().chain(st.spare.iter()) {
            // SAFETY: every chunk was mapped with this layout, and the index that used its
            // leaves is being dropped, so nothing refers into it.
            unsafe { memory::unmap(chunk.cast(), Self::chunk_layout()) };
        }
    }
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
    leaves: LeafArena,
}

impl Default for DenseIndex {
    fn default() -> Self {
        DenseIndex {
            map: Atomic::new(DirMap { dirs: Box::new([]) }),
            grow: Mutex::new(()),
            leaves: LeafArena::default(),
        }
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
        // SAFETY: leaf pointers are published once (Release CAS in `leaf_or_create`) from the
        // leaf arena, whose chunks are unmapped only when the index drops.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Keeps the next chunk of leaves faulted in (see `LeafArena`); returns the bytes faulted
    /// in now.
    pub fn prefault(&self) -> usize {
        self.leaves.prefault()
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
        // Acquire: pairs with the Release store of the map below (a previous grower's), under the
        // `grow` lock.
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
        // Release: publishes the new map and its directory to readers' Acquire loads (`snapshot`).
        self.map.store(Owned::new(DirMap { dirs: next.into_boxed_slice() }), Ordering::Release);
        // SAFETY: `old` is no longer reachable from `map`; readers that loaded it hold guards,
        // and the free waits for them.
        unsafe { g.defer_destroy(old) };
        // SAFETY: published just now; freed only in Drop.
        unsafe { &*fresh }
    }

    fn leaf_or_create<'a>(&self, dir: &'a Dir, li: usize) -> &'a Leaf {
        if let Some(l) = Self::leaf(dir, li) {
            return l;
        }
        // Zeroed memory: a leaf with no entries.
        let fresh = self.leaves.alloc();
        // AcqRel: Release publishes the zeroed leaf to `leaf`'s Acquire; Acquire on failure sees
        // the leaf another thread published.
        match dir.leaves[li].compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: published by this CAS; its chunk lives as long as the index, which
            // outlives `dir`'s borrow.
            Ok(_) => unsafe { &*fresh },
            Err(other) => {
                self.leaves.give_back(fresh);
                // SAFETY: as in `leaf`.
                unsafe { &*other }
            }
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

    /// Hints the CPU to load `key`'s slot (the directory and leaf pointers it reads on the way
    /// are few and stay cached).
    #[inline]
    pub fn prefetch(&self, key: u64, g: &IndexGuard) {
        if let Some(leaf) = self.dir(key, g).and_then(|d| Self::leaf(d, leaf_of(key))) {
            crate::storage::row_store::prefetch_line::<false>(
                std::ptr::from_ref(&leaf.slots[slot_of(key)]).cast(),
            );
        }
    }

    /// Inserts `key -> rid` unless `key` is present; returns the existing row id if it is.
    #[inline]
    pub fn insert_if_absent(&self, key: u64, rid: RowId, g: &IndexGuard) -> Result<(), RowId> {
        debug_assert!(rid.0 < u64::MAX, "row id {} has no slot encoding", rid.0);
        let dir = self.dir_or_create(key, g);
        let li = leaf_of(key);
        let leaf = self.leaf_or_create(dir, li);
        // Counted before the entry appears (see the module docs).
        dir.live[li].fetch_add(1, Ordering::SeqCst);
        // AcqRel: Release publishes the entry after the record it names was initialised (pairs with
        // lookups' and scans' Acquire loads); Acquire on failure reads the present entry's row id.
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
            // AcqRel: orders the removal with the SeqCst uncount below and with later inserts of
            // the key; a failure reads nothing through the value.
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
                    // Acquire: pairs with the inserting CAS's Release (the record the entry names
                    // is initialised).
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
        // (replaced ones were handed to `defer_destroy`), and every directory came from
        // `zeroed` and is freed exactly once, here. Leaves go with the arena's chunks.
        unsafe {
            let map = self.map.load(Ordering::Relaxed, crossbeam_epoch::unprotected());
            for &(_, p) in map.deref().dirs.iter() {
                drop(Box::from_raw(p as *mut Dir));
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

    /// Four threads fill leaves across several arena chunks (and directories) while another
    /// keeps a spare chunk faulted in: every key maps to its row, in gets and in a scan.
    #[test]
    fn leaves_from_prefaulted_chunks_hold_every_key() {
        let idx = DenseIndex::default();
        assert_eq!(idx.prefault(), 2 << 20, "a spare chunk");
        assert_eq!(idx.prefault(), 0, "the spare is still there");
        // 4 threads x 300 leaves of 512 keys: 1200 leaves, more than two chunks.
        let per_thread = 300 * SLOTS as u64;
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    idx.prefault();
                    std::thread::yield_now();
                }
            });
            let workers: Vec<_> = (0..4u64)
                .map(|t| {
                    let idx = &idx;
                    s.spawn(move || {
                        // Interleaved leaves: thread t takes every fourth one, so threads race
                        // to create neighbouring leaves.
                        for n in 0..per_thread {
                            let leaf = (n / SLOTS as u64) * 4 + t;
                            let key = leaf * SLOTS as u64 + n % SLOTS as u64;
                            assert_eq!(idx.insert_if_absent(key, RowId(key + 7), &pin()), Ok(()));
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
        });
        let g = pin();
        let total = 4 * per_thread;
        for key in (0..total).step_by(97) {
            assert_eq!(idx.get(key, &g), Some(RowId(key + 7)), "key {key}");
        }
        let mut out = vec![(0usize, 0usize); total as usize + 1];
        assert_eq!(idx.scan(0, u64::MAX, &mut out, &g), total as usize);
        assert!(out[..total as usize].iter().enumerate().all(|(i, &(k, r))| k == i && r == i + 7));
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
