//! Version memory for the multi-version protocols.
//!
//! A multi-version protocol keeps a record's versions outside its slot (ERMIA §3.5: the slot is
//! the indirection array's entry and holds the protocol's head word, which points to the newest
//! version; older versions follow through `next`). This module owns their memory; what the
//! words of a version mean belongs to `protocols::mv` and the protocol.
//!
//! ## Layout
//!
//! ```text
//!  +--------+--------+--------+------------------+------------------------------+
//!  | stamp  | next   | flags  | V (protocol's)   | payload: ceil(row/8) words   |   8-aligned
//!  +--------+--------+--------+------------------+------------------------------+
//! ```
//!
//! The payload is atomic words, as in a slot, so that a version can be handed out as a
//! [`RowRef`] and every column-projected copy, write-back and log record of `storage` works on
//! it unchanged.
//!
//! ## Allocation (CCBench's AssertiveVersionReuse)
//!
//! A table's [`VersionStore`] cuts versions of its size from 2 MiB huge-page chunks. Each worker
//! keeps a [`VersionPool`] per table: a free list of versions it reclaimed and a private range
//! of a chunk, so the hot path neither calls the global allocator nor touches a shared counter
//! (one lock per chunk, or per batch of versions handed back by departed workers). Versions are
//! never returned to the operating system before the store drops; a pool whose worker leaves
//! gives its free versions back to the store ([`VersionPool::release`]), where the next worker
//! that runs dry takes them.
//!
//! With [`VersionAlloc::Malloc`] (the factor analysis's baseline, `version-alloc=malloc`) every
//! version comes from the global allocator and goes back to it when reclaimed; pools then only
//! count. Versions still on chains when the database drops are freed by the protocol's teardown
//! ([`VersionStore::free_chain`]).

use super::memory;
use super::row_store::prefetch_line;
use super::RowRef;
use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

/// A protocol's per-version fields (SSN's stamps, Hekaton's end timestamp; `()` for SI).
///
/// # Safety
///
/// All-zero bytes must be a valid value (chunks are zeroed; a recycled version keeps its
/// previous value until the protocol resets it), the type needs no `Drop` and its alignment is
/// at most 8.
pub unsafe trait VersionExt: Send + Sync + 'static {
    /// Resets the fields for a new version (a recycled one keeps its last use's values).
    #[inline(always)]
    fn reset(&self) {}
}

// SAFETY: a zero-sized type.
unsafe impl VersionExt for () {}

/// One version of a record. See the module docs for the layout; the payload follows the
/// struct.
#[repr(C)]
pub struct Version<V> {
    /// The version's commit stamp, or a protocol's marker while it is pending or after it
    /// aborted (see `protocols::mv`).
    pub stamp: AtomicU64,
    /// The next older version, or null.
    pub next: AtomicPtr<Version<V>>,
    /// Bit flags (`protocols::mv::TOMBSTONE`).
    pub flags: AtomicU64,
    /// The protocol's fields.
    pub ext: V,
}

const CHUNK_BYTES: usize = 2 << 20;
fn chunk_layout() -> Layout {
    Layout::from_size_align(CHUNK_BYTES, 64).expect("chunk layout")
}

/// The byte a poisoned store writes over freed payloads.
pub const POISON: u8 = 0xA5;

/// Versions a pool takes from the store's spare list at once.
const REFILL: usize = 256;

/// A raw version pointer that may cross threads (pools, spare lists and orphaned GC queues
/// hold them).
pub(crate) struct Ptr<V>(pub(crate) NonNull<Version<V>>);
// SAFETY: a version is made of atomics and a `VersionExt` (Send + Sync); the pointer is only
// dereferenced under the protocols' reclamation rules.
unsafe impl<V> Send for Ptr<V> {}

/// Where versions come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VersionAlloc {
    /// Per-worker pools carved from huge-page chunks, reclaimed versions reused (CCBench's
    /// AssertiveVersionReuse).
    Pool,
    /// The global allocator, one call per version allocated and per version freed.
    Malloc,
}

/// The versions of one table: their size and the chunks they are cut from.
pub struct VersionStore<V> {
    row_size: usize,
    alloc: VersionAlloc,
    /// Freed versions are overwritten with [`POISON`] (a debugging aid, see
    /// [`VersionStore::poisoned`]).
    poison: bool,
    words: usize,
    /// Bytes per version (a multiple of 8).
    bytes: usize,
    /// Every chunk, freed when the store drops.
    chunks: Mutex<Vec<usize>>,
    /// Chunks faulted in ahead of need ([`VersionStore::prefault`]), taken before new ones.
    ready: Mutex<Vec<usize>>,
    /// Versions given back by pools of departed workers.
    spare: Mutex<Vec<Ptr<V>>>,
    /// The chunk shared by threads without a pool (the loader): next free byte and its end.
    shared: Mutex<(usize, usize)>,
    /// Versions cut from chunks so far (with `Malloc`: versions allocated and not freed, as
    /// pools report them when they are released, wrapping).
    carved: AtomicU64,
    _v: PhantomData<V>,
}

// SAFETY: the store owns its chunks; the raw pointers in it are addresses of memory it owns.
unsafe impl<V: VersionExt> Sync for VersionStore<V> {}
// SAFETY: as above.
unsafe impl<V: VersionExt> Send for VersionStore<V> {}

impl<V: VersionExt> VersionStore<V> {
    const _ALIGN: () = assert!(std::mem::align_of::<Version<V>>() == 8);

    /// A store for versions of `row_size` payload bytes, cut from chunks.
    pub fn new(row_size: usize) -> Self {
        Self::with_alloc(row_size, VersionAlloc::Pool)
    }

    /// A store for versions of `row_size` payload bytes, allocated as `alloc` says.
    pub fn with_alloc(row_size: usize, alloc: VersionAlloc) -> Self {
        let () = Self::_ALIGN;
        let words = row_size.div_ceil(8);
        let bytes = std::mem::size_of::<Version<V>>().next_multiple_of(8) + words * 8;
        VersionStore {
            row_size,
            alloc,
            poison: false,
            words,
            bytes,
            chunks: Mutex::new(Vec::new()),
            ready: Mutex::new(Vec::new()),
            spare: Mutex::new(Vec::new()),
            shared: Mutex::new((0, 0)),
            carved: AtomicU64::new(0),
            _v: PhantomData,
        }
    }

    /// This store with every freed version overwritten: stamp 0 (which every snapshot would
    /// see), no older version, and each payload byte [`POISON`]. A reader that reaches a version
    /// after it was freed then reads a row no writer wrote, instead of, perhaps, the right one.
    pub fn poisoned(mut self, on: bool) -> Self {
        self.poison = on;
        self
    }

    /// Overwrites a freed version (see [`VersionStore::poisoned`]).
    #[cold]
    fn poison(&self, v: NonNull<Version<V>>) {
        // SAFETY: a version of this store that nobody may reach any more.
        let ver = unsafe { v.as_ref() };
        ver.stamp.store(0, Ordering::Relaxed);
        ver.next.store(std::ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the payload words follow the struct (see `row`).
        let words = unsafe { (v.as_ptr() as *const Version<V>).add(1).cast::<AtomicU64>() };
        for i in 0..self.words {
            // SAFETY: inside the version's `words` payload words.
            unsafe { &*words.add(i) }.store(u64::from_ne_bytes([POISON; 8]), Ordering::Relaxed);
        }
    }

    /// Where this store's versions come from.
    pub fn alloc(&self) -> VersionAlloc {
        self.alloc
    }

    /// Frees one version nothing refers to any more, when the database drops (see
    /// [`VersionStore::free_chain`]; a no-op with pools).
    ///
    /// # Safety
    ///
    /// `v` is this store's, on no chain, and nothing refers to it any more.
    pub unsafe fn free_one(&self, v: NonNull<Version<V>>) {
        if self.alloc == VersionAlloc::Malloc {
            // SAFETY: the caller's contract; `Malloc` versions all come from `malloc`.
            unsafe { self.unmalloc(v) };
            self.carved.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Bytes one version takes.
    pub fn version_bytes(&self) -> usize {
        self.bytes
    }

    /// Versions cut from chunks so far (live, pooled or waiting for reclamation).
    pub fn carved(&self) -> u64 {
        self.carved.load(Ordering::Relaxed)
    }

    /// A new chunk: its first byte and its end. A chunk faulted in ahead is taken first.
    fn chunk(&self) -> (usize, usize) {
        let p = match self.ready.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            Some(p) => p,
            None => self.map_chunk(),
        };
        (p, p + CHUNK_BYTES)
    }

    /// Maps a chunk and records it for the drop.
    fn map_chunk(&self) -> usize {
        let p = memory::map(chunk_layout()) as usize;
        self.chunks.lock().unwrap_or_else(|e| e.into_inner()).push(p);
        p
    }

    /// Faults chunks in until room for `versions` more versions lies ready beyond what pools
    /// have taken, spending at most `budget` bytes (at least one chunk when any is missing);
    /// returns the bytes faulted in. Something other than the workers calls it (the driver's
    /// prefaulter, `storage::Prefaulter`), so that a worker that carves a new chunk takes no
    /// page faults: the same service the row store's slots get.
    pub fn prefault(&self, versions: u64, budget: usize) -> usize {
        if self.alloc == VersionAlloc::Malloc {
            return 0;
        }
        let want = versions.saturating_mul(self.bytes as u64).div_ceil(CHUNK_BYTES as u64);
        let mut done = 0;
        loop {
            let have = self.ready.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
            if have >= want || (done > 0 && done + CHUNK_BYTES > budget) {
                return done;
            }
            let p = self.map_chunk();
            memory::populate(p as *mut u8, CHUNK_BYTES);
            self.ready.lock().unwrap_or_else(|e| e.into_inner()).push(p);
            done += CHUNK_BYTES;
        }
    }

    /// Chunks faulted in and not yet taken.
    pub fn ready_chunks(&self) -> usize {
        self.ready.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The payload of `v` as a row reference (the protocols' copy and log routines take one).
    #[inline(always)]
    pub fn row<'a>(&self, v: &'a Version<V>) -> RowRef<'a, Version<V>> {
        // SAFETY: every version of this store is `bytes` long: the struct, then `words` payload
        // words (8-aligned, since the struct's size is a multiple of its alignment 8), inside
        // one chunk, which lives as long as the store and so at least as long as `v`.
        let words = unsafe {
            let base = (v as *const Version<V>).add(1).cast::<AtomicU64>();
            std::slice::from_raw_parts(base, self.words)
        };
        RowRef::from_parts(v, words, self.row_size)
    }

    /// The layout of one version from the global allocator.
    fn layout(&self) -> Layout {
        Layout::from_size_align(self.bytes, 8).expect("version layout")
    }

    /// A zeroed version from the global allocator.
    #[inline]
    fn malloc(&self) -> NonNull<Version<V>> {
        let layout = self.layout();
        // SAFETY: the layout has a non-zero size (the struct alone is 24 bytes).
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        match NonNull::new(p.cast::<Version<V>>()) {
            Some(p) => p,
            None => std::alloc::handle_alloc_error(layout),
        }
    }

    /// Gives a version allocated by [`VersionStore::malloc`] back to the global allocator.
    ///
    /// # Safety
    ///
    /// `v` came from this store's `malloc` and nothing refers to it any more.
    #[inline]
    unsafe fn unmalloc(&self, v: NonNull<Version<V>>) {
        // SAFETY: by the caller's contract, allocated with this layout and unreachable.
        unsafe { std::alloc::dealloc(v.as_ptr().cast(), self.layout()) }
    }

    /// Frees `first` and every older version after it (a chain nothing can reach any more,
    /// when the database drops) back to the global allocator; with pools, nothing to do (the
    /// chunks go when the store drops). Returns how many versions were freed.
    ///
    /// # Safety
    ///
    /// The chain is this store's and nothing refers to any of its versions any more.
    pub unsafe fn free_chain(&self, first: Option<NonNull<Version<V>>>) -> u64 {
        if self.alloc == VersionAlloc::Pool {
            return 0;
        }
        let mut v = first;
        let mut n = 0;
        while let Some(p) = v {
            // SAFETY: unreachable by others (the caller's contract); read before it is freed.
            v = NonNull::new(unsafe { p.as_ref() }.next.load(Ordering::Relaxed));
            // SAFETY: as above; each version of a chain is freed once.
            unsafe { self.unmalloc(p) };
            n += 1;
        }
        self.carved.fetch_sub(n, Ordering::Relaxed);
        n
    }

    /// A version for a thread without a pool (the bulk loader): one lock per call.
    pub fn alloc_shared(&self) -> NonNull<Version<V>> {
        if self.alloc == VersionAlloc::Malloc {
            // Relaxed: a statistic.
            self.carved.fetch_add(1, Ordering::Relaxed);
            return self.malloc();
        }
        if let Some(p) = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return p.0;
        }
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if s.0 + self.bytes > s.1 {
            *s = self.chunk();
        }
        let p = s.0;
        s.0 += self.bytes;
        self.carved.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `p` lies inside a mapped chunk (never null).
        unsafe { NonNull::new_unchecked(p as *mut Version<V>) }
    }
}

impl<V> Drop for VersionStore<V> {
    fn drop(&mut self) {
        let layout = chunk_layout();
        for &p in self.chunks.get_mut().unwrap_or_else(|e| e.into_inner()).iter() {
            // SAFETY: each chunk was mapped by `chunk` with this layout and is unmapped once;
            // nothing refers to versions after their store drops (the database drops its
            // workers and tables first).
            unsafe { memory::unmap(p as *mut u8, layout) };
        }
    }
}

/// A worker's versions of one table: reclaimed versions to reuse, and a private range of a
/// chunk. Not shared; see the module docs.
pub struct VersionPool<V> {
    free: Vec<Ptr<V>>,
    next: usize,
    end: usize,
    /// With `Malloc`: versions this pool allocated minus those it freed (wrapping; added to
    /// the store's count when the pool is released).
    net: u64,
    /// How many allocations ahead `alloc` prefetches (see [`VersionPool::with_lookahead`]).
    ahead: usize,
}

impl<V> Default for VersionPool<V> {
    fn default() -> Self {
        VersionPool { free: Vec::new(), next: 0, end: 0, net: 0, ahead: 1 }
    }
}

impl<V> VersionPool<V> {
    /// An empty pool whose allocations prefetch the version `ahead` allocations later (1 by
    /// default): a caller that allocates many versions in a row with little work between them
    /// (BOHM's concurrency-control layer, one per declared write) otherwise waits on each
    /// reclaimed version's cold line, one prefetch being too close to hide the miss.
    pub fn with_lookahead(ahead: usize) -> Self {
        VersionPool { ahead: ahead.max(1), ..Self::default() }
    }
}

impl<V: VersionExt> VersionPool<V> {
    /// A version of `store`'s size, its fields as its last use left them (zero if new).
    ///
    /// Each allocation prefetches the version the next one will hand out, for writing (as slot
    /// allocation does): a reclaimed version has gone cold, and its first stores would
    /// otherwise wait for the line.
    #[inline]
    pub fn alloc(&mut self, store: &VersionStore<V>) -> NonNull<Version<V>> {
        if store.alloc == VersionAlloc::Malloc {
            self.net = self.net.wrapping_add(1);
            return store.malloc();
        }
        let v = self.take(store);
        // The version the allocation `ahead` from now hands out, if the pool knows it.
        let next = match self.free.len().checked_sub(self.ahead) {
            Some(i) => self.free[i].0.as_ptr() as usize,
            None if self.free.is_empty() => self.next + (self.ahead - 1) * store.bytes,
            None => return v,
        };
        for line in (next & !63..next + store.bytes).step_by(64).take(4) {
            prefetch_line::<true>(line as *const u8);
        }
        v
    }

    #[inline(always)]
    fn take(&mut self, store: &VersionStore<V>) -> NonNull<Version<V>> {
        if let Some(p) = self.free.pop() {
            return p.0;
        }
        if self.next + store.bytes > self.end {
            self.refill(store);
            if let Some(p) = self.free.pop() {
                return p.0;
            }
        }
        let p = self.next;
        self.next += store.bytes;
        // Relaxed: a statistic.
        store.carved.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `p` lies inside a mapped chunk (never null).
        unsafe { NonNull::new_unchecked(p as *mut Version<V>) }
    }

    #[cold]
    fn refill(&mut self, store: &VersionStore<V>) {
        {
            let mut spare = store.spare.lock().unwrap_or_else(|e| e.into_inner());
            let n = spare.len().min(REFILL);
            let at = spare.len() - n;
            self.free.extend(spare.drain(at..));
        }
        if self.free.is_empty() {
            (self.next, self.end) = store.chunk();
        }
    }

    /// Takes back a version of `store` nobody can reach any more (with `Malloc`, gives it
    /// back to the global allocator).
    #[inline]
    pub fn free(&mut self, store: &VersionStore<V>, v: NonNull<Version<V>>) {
        if store.poison {
            store.poison(v);
        }
        if store.alloc == VersionAlloc::Malloc {
            self.net = self.net.wrapping_sub(1);
            // SAFETY: a `Malloc` store's versions all come from `malloc`; the caller hands
            // over a version nobody can reach.
            unsafe { store.unmalloc(v) };
            return;
        }
        self.free.push(Ptr(v));
    }

    /// Versions waiting in this pool for reuse.
    pub fn pooled(&self) -> usize {
        self.free.len()
    }

    /// Gives every version of the pool (and the rest of its chunk range) back to `store`, for
    /// other workers (its worker is leaving).
    pub fn release(&mut self, store: &VersionStore<V>) {
        // Relaxed: a statistic, read after the workers are joined.
        store.carved.fetch_add(std::mem::take(&mut self.net), Ordering::Relaxed);
        let mut spare = store.spare.lock().unwrap_or_else(|e| e.into_inner());
        spare.append(&mut self.free);
        while self.next + store.bytes <= self.end {
            // SAFETY: inside the pool's chunk range (never null).
            spare.push(Ptr(unsafe { NonNull::new_unchecked(self.next as *mut Version<V>) }));
            self.next += store.bytes;
            store.carved.fetch_add(1, Ordering::Relaxed);
        }
        self.end = self.next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn pools_hand_out_distinct_versions_and_reuse_freed_ones() {
        let store = VersionStore::<()>::new(100);
        assert_eq!(store.version_bytes(), 24 + 13 * 8);
        let mut pool = VersionPool::default();
        let mut seen = HashSet::new();
        let vs: Vec<_> = (0..40_000).map(|_| pool.alloc(&store)).collect();
        for v in &vs {
            assert!(seen.insert(v.as_ptr() as usize), "a version handed out twice");
            // SAFETY: a version of this store, used by this thread only.
            let r = store.row(unsafe { v.as_ref() });
            assert_eq!(r.len(), 100);
            r.write_from(&[7u8; 100]);
        }
        assert_eq!(store.carved(), 40_000);
        pool.free(&store, vs[5]);
        assert_eq!(pool.alloc(&store), vs[5], "a freed version is reused first");
        // A departing pool's versions go to the next pool that runs dry.
        for v in &vs[..300] {
            pool.free(&store, *v);
        }
        pool.release(&store);
        let carved = store.carved();
        let mut other = VersionPool::default();
        let got: HashSet<_> = (0..300).map(|_| other.alloc(&store).as_ptr() as usize).collect();
        assert_eq!(got.len(), 300);
        assert_eq!(store.carved(), carved, "the spare list serves a new pool before any chunk");
        assert!(got
            .iter()
            .all(|p| !seen.contains(p) || vs[..300].iter().any(|v| v.as_ptr() as usize == *p)));
    }

    /// A poisoned store overwrites what it frees; an unpoisoned one leaves it.
    #[test]
    fn poisoned_stores_overwrite_freed_versions() {
        for on in [false, true] {
            let store = VersionStore::<()>::new(20).poisoned(on);
            let mut pool = VersionPool::default();
            let v = pool.alloc(&store);
            // SAFETY: a version of this store, used by this thread only.
            let ver = unsafe { v.as_ref() };
            ver.stamp.store(7, Ordering::Relaxed);
            store.row(ver).write_from(&[1; 20]);
            pool.free(&store, v);
            let mut after = [0u8; 20];
            store.row(ver).read_into(&mut after);
            let (stamp, byte) = if on { (0, POISON) } else { (7, 1) };
            assert_eq!(ver.stamp.load(Ordering::Relaxed), stamp, "poison {on}");
            assert_eq!(after, [byte; 20], "poison {on}");
        }
    }

    /// Prefaulted chunks are kept ready up to what was asked, within the budget (at least one
    /// chunk), and pools carve them before mapping new ones.
    #[test]
    fn prefaulted_chunks_are_carved_first() {
        let store = VersionStore::<()>::new(1000);
        let per_chunk = CHUNK_BYTES / store.version_bytes();
        assert_eq!(store.prefault(0, usize::MAX), 0, "nothing asked for");
        assert_eq!(store.prefault(3 * per_chunk as u64, 1), CHUNK_BYTES, "one chunk at least");
        assert_eq!(store.prefault(3 * per_chunk as u64, usize::MAX), 2 * CHUNK_BYTES);
        assert_eq!(store.ready_chunks(), 3);
        assert_eq!(store.prefault(3 * per_chunk as u64, usize::MAX), 0, "ready already");
        let mut pool = VersionPool::default();
        let first = pool.alloc(&store);
        let ready = store.ready.lock().unwrap().clone();
        assert_eq!(ready.len(), 2, "the pool took a ready chunk");
        assert_eq!(store.chunks.lock().unwrap().len(), 3, "and mapped none");
        assert!(ready.iter().all(|&c| !(c..c + CHUNK_BYTES).contains(&(first.as_ptr() as usize))));
    }
}
