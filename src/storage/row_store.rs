//! Stable record slots: `RowId -> &Record + payload`, never moving.
//!
//! Every table keeps its records in a [`RowStore`]: a two-level paged array (a directory of
//! segment pointers, each segment a contiguous run of slots, as Cicada §3.2 does). A slot's
//! address never changes once its segment exists, so indexes store 8-byte row ids rather than
//! pointers into memory that could move, and a protocol may hand out `&Record` references that
//! live as long as the store.
//!
//! ## Slot layout
//!
//! ```text
//!  offset 0                 header_size                       slot_size (multiple of 64)
//!  +------------------------+---------------------------------+---------+
//!  | R (protocol header)    | payload: ceil(row_size / 8) u64  | padding |
//!  +------------------------+---------------------------------+---------+
//! ```
//!
//! The header type `R` belongs to the protocol (Silo's TID word, 2PL's lock word, ...). The payload
//! is stored as `AtomicU64` words so that optimistic readers (Silo, TicToc) may copy it while a
//! writer holds the record's lock without a data race in the Rust memory model: a seqlock-style
//! read copies with relaxed loads and validates the header afterwards. On x86-64 a relaxed load
//! or store is a plain `mov`, so this costs nothing over `memcpy` for the small rows the
//! benchmarks use. Every payload load and store here is Relaxed for that reason: what orders a
//! payload between threads is the protocol's header (a lock's Acquire and Release, a version
//! word loaded before and after the copy, a version published by a Release CAS), never the
//! payload words themselves.
//!
//! ## Allocation
//!
//! Workers allocate slots from a per-worker [`SlotCache`]: a private range of `CHUNK` slots taken
//! from the table with one `fetch_add`, plus a free list of slots reclaimed by the epoch GC. The
//! hot path touches no shared counter except once per `CHUNK` allocations.

use super::projection::{Columns, Projection};
use crate::error::Error;
use crate::storage::memory;
use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// A record header type whose all-zero bit pattern is a valid, unused value.
///
/// # Safety
///
/// Implementors guarantee that (1) a value of all zero bytes is a valid `Self` (true for structs
/// made only of atomics and integers), (2) `Self` needs no `Drop` (slots are freed without
/// dropping), and (3) `align_of::<Self>() <= 64`.
pub unsafe trait RecordHeader: Send + Sync + 'static {
    /// Whether the slots of a table with rows of `row_size` bytes hold the row's payload after
    /// the header (decided per table, when its store is created). Multi-version protocols that
    /// keep every image in versions outside the slot (`storage::version`) answer `false`: their
    /// slots are the header alone, and a [`RowRef`] of such a slot has no payload words (its
    /// copies copy nothing), so everything that reads or loads rows goes through the protocol
    /// (`Protocol::read_latest`, `Protocol::load`). Cicada keeps a payload in the slot for
    /// small rows only: the payload of the version inlined in its head (§3.3).
    #[inline]
    fn slot_payload(row_size: usize) -> bool {
        let _ = row_size;
        true
    }
}

/// Identifies a slot in one table's [`RowStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowId(pub u64);

/// Slots handed to a worker at a time from the table's shared allocation cursor.
const CHUNK: u64 = 256;
/// Target size of one segment of slots.
const SEGMENT_BYTES: usize = 2 << 20;
/// Cache-line size the slots are aligned to.
pub const CACHE_LINE: usize = 64;

/// A per-worker allocation cache for one table. See the module docs.
#[derive(Debug, Default)]
pub struct SlotCache {
    next: u64,
    end: u64,
    free: Vec<RowId>,
}

impl SlotCache {
    /// Returns a reclaimed slot for reuse by this worker.
    pub fn release(&mut self, rid: RowId) {
        self.free.push(rid);
    }

    /// Moves every slot this cache holds (free list and the rest of its chunk) into `other`, so
    /// that a worker that goes away leaves no slot stranded.
    pub fn hand_over(&mut self, other: &mut SlotCache) {
        other.free.append(&mut self.free);
        other.free.extend((self.next..self.end).map(RowId));
        self.next = self.end;
    }
}

/// Stable storage for the records of one table. See the module docs.
pub struct RowStore<R: RecordHeader> {
    slot_size: usize,
    header_size: usize,
    row_size: usize,
    words: usize,
    seg_shift: u32,
    capacity: u64,
    dir: Box<[AtomicPtr<u8>]>,
    cursor: CachePadded<AtomicU64>,
    _r: PhantomData<R>,
}

// SAFETY: the store only hands out shared references to `R` (which is Sync by the RecordHeader
// bound) and to `AtomicU64` payload words; segment pointers are published with Release/Acquire.
unsafe impl<R: RecordHeader> Sync for RowStore<R> {}
// SAFETY: the store owns its segments; moving it between threads moves only the pointers.
unsafe impl<R: RecordHeader> Send for RowStore<R> {}

/// A reference to one record: its protocol header and its payload words.
pub struct RowRef<'a, R> {
    /// The protocol's header for this record.
    pub header: &'a R,
    words: &'a [AtomicU64],
    len: usize,
}

impl<R> Clone for RowRef<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for RowRef<'_, R> {}

impl<'a, R> RowRef<'a, R> {
    /// A reference to a payload kept elsewhere than in a slot (a version, see
    /// `storage::version`): `words` hold `len` bytes.
    #[inline(always)]
    pub fn from_parts(header: &'a R, words: &'a [AtomicU64], len: usize) -> Self {
        debug_assert_eq!(words.len(), len.div_ceil(8));
        RowRef { header, words, len }
    }

    /// Payload length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The payload's words (a structure kept in a row, such as an index node, reads them as
    /// numbers rather than bytes).
    #[inline(always)]
    pub fn words(&self) -> &'a [AtomicU64] {
        self.words
    }

    /// Whether the payload is empty (never true: tables have at least 1 byte per row).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Hints the CPU to fetch the cache lines of the record's header and of the words of the
    /// columns `cols` (every column: the first four lines of the slot). Never faults.
    #[inline(always)]
    pub fn prefetch(&self, p: &Projection, cols: Columns) {
        let header = (self.header as *const R).cast::<u8>();
        if p.is_whole(cols) {
            let end = self.words.as_ptr_range().end.cast::<u8>();
            let lines = ((end as usize - header as usize).div_ceil(64)).min(4);
            for i in 0..lines {
                prefetch_line::<false>(header.wrapping_add(i * 64));
            }
            return;
        }
        self.prefetch_projected(p, cols);
    }

    #[inline(never)]
    fn prefetch_projected(&self, p: &Projection, cols: Columns) {
        prefetch_line::<false>((self.header as *const R).cast::<u8>());
        let words = self.words.as_ptr().cast::<u8>();
        // Every line from the one holding word `lo` to the one holding word `hi - 1`.
        let lines = |lo: usize, hi: usize| {
            let (first, last) = (words.wrapping_add(lo * 8), words.wrapping_add(hi * 8 - 1));
            let mut line = first as usize & !63;
            while line <= last as usize {
                prefetch_line::<false>(first.wrapping_add(line.wrapping_sub(first as usize)));
                line += 64;
            }
        };
        let plan = p.plan(cols);
        if plan.is_some() {
            plan.for_each(|(lo, hi)| lines(lo, hi));
        } else {
            p.runs(cols, lines);
        }
    }

    /// Copies the payload into `dst` (which must be `len()` bytes) with relaxed loads.
    /// The caller validates the copy (seqlock) or holds a lock that excludes writers.
    #[inline]
    pub fn read_into(&self, dst: &mut [u8]) {
        self.load_run(dst, 0, self.words.len());
    }

    /// Overwrites the payload with `src` (which must be `len()` bytes) with relaxed stores.
    /// The caller holds the record's exclusive lock and publishes with its header.
    #[inline]
    pub fn write_from(&self, src: &[u8]) {
        self.store_run(src, 0, self.words.len());
    }

    /// Copies payload words `lo..hi` into the same byte positions of `dst` (`len()` bytes; the
    /// last word may be partial). Same contract as [`RowRef::read_into`].
    #[inline]
    pub fn read_words_into(&self, dst: &mut [u8], lo: usize, hi: usize) {
        self.load_run(dst, lo, hi);
    }

    /// Overwrites payload words `lo..hi` from the same byte positions of `src` (`len()` bytes).
    /// Same contract as [`RowRef::write_from`].
    #[inline]
    pub fn write_words_from(&self, src: &[u8], lo: usize, hi: usize) {
        self.store_run(src, lo, hi);
    }

    /// Overwrites the payload with `src`'s (a row of the same length), word by word with relaxed
    /// atomics: a new version made from the one it replaces. Same contract as
    /// [`RowRef::write_from`]; `src` is stable (a committed version, or the caller's own).
    #[inline]
    pub fn copy_from<S>(&self, src: &RowRef<'_, S>) {
        assert_eq!(self.words.len(), src.words.len());
        for (d, s) in self.words.iter().zip(src.words) {
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Copies the words of the columns `cols`, run after run, packed into `dst`
    /// ([`Projection::packed_len`] bytes): a redo log's record of the columns a transaction
    /// wrote. Same contract as [`RowRef::read_into`].
    pub fn read_cols_packed(&self, dst: &mut [u8], p: &Projection, cols: Columns) {
        let mut at = 0;
        p.runs(cols, |lo, hi| {
            for i in lo..hi {
                let w = self.words[i].load(Ordering::Relaxed).to_ne_bytes();
                let n = (self.len - i * 8).min(8);
                dst[at..at + n].copy_from_slice(&w[..n]);
                at += n;
            }
        });
        debug_assert_eq!(at, dst.len(), "dst is packed_len bytes");
    }

    /// The copy loop of [`RowRef::read_words_into`], always inlined into the projected copies:
    /// one bounds check per run and an unaligned 8-byte store per word. (Slice chunking and a
    /// per-word bounds check cost many instructions per run, and a projected copy of a TPC-C
    /// row makes several runs: `scripts/instructions.sh` on `-w tpcc` shows it.)
    #[inline(always)]
    fn load_run(&self, dst: &mut [u8], lo: usize, hi: usize) {
        assert!(dst.len() == self.len && lo <= hi && hi <= self.words.len());
        // Words wholly inside the payload; only the row's last word can be partial.
        let full = hi.min(self.len / 8);
        let (src, out) = (self.words.as_ptr(), dst.as_mut_ptr());
        for i in lo..full {
            // SAFETY: `i < full <= len / 8 <= words.len()`, so word `i` exists and bytes
            // `8i..8i+8` lie inside `dst` (`len` bytes, asserted above). Relaxed: ordering comes
            // from the protocol's header (see module docs).
            unsafe {
                out.add(i * 8).cast::<u64>().write_unaligned((*src.add(i)).load(Ordering::Relaxed))
            };
        }
        if full < hi {
            let w = self.words[full].load(Ordering::Relaxed).to_ne_bytes();
            copy_short(&mut dst[full * 8..], &w);
        }
    }

    /// The copy loop of [`RowRef::write_words_from`]; see [`RowRef::load_run`].
    #[inline(always)]
    fn store_run(&self, src: &[u8], lo: usize, hi: usize) {
        assert!(src.len() == self.len && lo <= hi && hi <= self.words.len());
        let full = hi.min(self.len / 8);
        let (words, inp) = (self.words.as_ptr(), src.as_ptr());
        for i in lo..full {
            // SAFETY: as in `load_run`: word `i` exists and bytes `8i..8i+8` lie inside `src`.
            unsafe {
                (*words.add(i))
                    .store(inp.add(i * 8).cast::<u64>().read_unaligned(), Ordering::Relaxed)
            };
        }
        if full < hi {
            let mut w = [0u8; 8];
            let rest = &src[full * 8..];
            copy_short(&mut w[..rest.len()], rest);
            self.words[full].store(u64::from_ne_bytes(w), Ordering::Relaxed);
        }
    }

    /// Copies the words of the columns in `cols` (see [`Projection`]) into `dst`.
    #[inline(always)]
    pub fn read_cols_into(&self, dst: &mut [u8], p: &Projection, cols: Columns) {
        if p.is_whole(cols) {
            return self.read_into(dst);
        }
        self.read_projected(dst, p, cols);
    }

    // The plan-or-walk branch is written out here, in `write_projected` and in
    // `prefetch_projected`: a shared helper taking the copy as a closure calls it from two sites,
    // LLVM keeps such a closure out of line, and Silo's NewOrder+Payment then costs more
    // instructions (`scripts/instructions.sh BIN -- -p silo -w tpcc --mix 50,50,0,0,0`).
    #[inline(never)]
    fn read_projected(&self, dst: &mut [u8], p: &Projection, cols: Columns) {
        p.prepare(dst, cols);
        let plan = p.plan(cols);
        if plan.is_some() {
            for (lo, hi) in plan {
                self.load_run(dst, lo, hi);
            }
        } else {
            p.runs(cols, |lo, hi| self.load_run(dst, lo, hi));
        }
    }

    /// Writes back the words of the columns in `cols` from `src`.
    #[inline(always)]
    pub fn write_cols_from(&self, src: &[u8], p: &Projection, cols: Columns) {
        if p.is_whole(cols) {
            return self.write_from(src);
        }
        self.write_projected(src, p, cols);
    }

    #[inline(never)]
    fn write_projected(&self, src: &[u8], p: &Projection, cols: Columns) {
        let plan = p.plan(cols);
        if plan.is_some() {
            for (lo, hi) in plan {
                self.store_run(src, lo, hi);
            }
        } else {
            p.runs(cols, |lo, hi| self.store_run(src, lo, hi));
        }
    }
}

impl<R: RecordHeader> RowStore<R> {
    /// A store for rows of `row_size` payload bytes holding at most `capacity` rows.
    pub fn new(row_size: usize, capacity: u64) -> Result<Self, Error> {
        if row_size == 0 {
            return Err(Error::Config("row size must be at least 1 byte".into()));
        }
        let header_size = std::mem::size_of::<R>().next_multiple_of(8);
        let words = if R::slot_payload(row_size) { row_size.div_ceil(8) } else { 0 };
        let slot_size = (header_size + words * 8).next_multiple_of(CACHE_LINE);
        let slots_per_seg = (SEGMENT_BYTES / slot_size).max(1).next_power_of_two();
        let seg_shift = slots_per_seg.trailing_zeros();
        let segs = capacity.div_ceil(slots_per_seg as u64);
        let segs = usize::try_from(segs)
            .map_err(|_| Error::Config(format!("table capacity {capacity} is too large")))?;
        let dir = (0..segs).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
        Ok(RowStore {
            slot_size,
            header_size,
            row_size,
            words,
            seg_shift,
            capacity,
            dir,
            cursor: CachePadded::new(AtomicU64::new(0)),
            _r: PhantomData,
        })
    }

    /// Bytes one slot occupies (header + payload, rounded to the cache line).
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Payload bytes per row.
    pub fn row_size(&self) -> usize {
        self.row_size
    }

    /// Maximum number of rows.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Slots handed out so far (an upper bound on live rows).
    pub fn allocated(&self) -> u64 {
        self.cursor.load(Ordering::Relaxed).min(self.capacity)
    }

    fn seg_layout(&self) -> Layout {
        let bytes = self.slot_size << self.seg_shift;
        Layout::from_size_align(bytes, CACHE_LINE).expect("segment layout")
    }

    /// Makes sure the segment `seg` exists.
    fn ensure_segment(&self, seg: usize) {
        // Acquire: pairs with the Release of the CAS that published the segment (here or in
        // `ensure_segment`).
        if !self.dir[seg].load(Ordering::Acquire).is_null() {
            return;
        }
        let mem = memory::map(self.seg_layout());
        // Release: pairs with the Acquire in `get` and above, publishing the zeroed segment.
        if self.dir[seg]
            .compare_exchange(ptr::null_mut(), mem, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `mem` was mapped above with this layout and never published.
            unsafe { memory::unmap(mem, self.seg_layout()) };
        }
    }

    /// Slots per segment (the granularity of [`RowStore::prefault`]).
    pub fn slots_per_segment(&self) -> u64 {
        1 << self.seg_shift
    }

    /// Maps and faults in the segments that will hold slots `from..from + count` and do not
    /// exist yet, so that workers allocating those slots later write to memory that is ready
    /// instead of taking page faults while the kernel zeroes fresh pages (the reference C++
    /// engines fault their allocators' whole region in at start-up for the same reason).
    /// Stops once `budget` bytes or more are faulted in; returns the bytes faulted in. Races
    /// with a worker creating the same segment are harmless: one mapping is published, the
    /// other unmapped.
    pub fn prefault(&self, from: u64, count: u64, budget: usize) -> usize {
        let end = from.saturating_add(count).min(self.capacity);
        if from >= end {
            return 0;
        }
        let (first, last) =
            ((from >> self.seg_shift) as usize, ((end - 1) >> self.seg_shift) as usize);
        let layout = self.seg_layout();
        let mut bytes = 0;
        for seg in first..=last {
            if bytes >= budget {
                break;
            }
            if !self.dir[seg].load(Ordering::Acquire).is_null() {
                continue;
            }
            let mem = memory::map(layout);
            memory::populate(mem, layout.size());
            // Release: as in `ensure_segment`.
            match self.dir[seg].compare_exchange(
                ptr::null_mut(),
                mem,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => bytes += layout.size(),
                // SAFETY: `mem` was mapped above with this layout and never published.
                Err(_) => unsafe { memory::unmap(mem, layout) },
            }
        }
        bytes
    }

    /// Allocates a slot for a new record. The slot holds either zeroes (never used) or a
    /// reclaimed record's old contents; the protocol initialises the header.
    #[inline]
    pub fn alloc(&self, cache: &mut SlotCache) -> Option<RowId> {
        if let Some(rid) = cache.free.pop() {
            return Some(rid);
        }
        if cache.next == cache.end {
            // Relaxed: a counter that hands out disjoint ranges; no data is published through it.
            let start = self.cursor.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= self.capacity {
                return None;
            }
            let end = (start + CHUNK).min(self.capacity);
            let first = (start >> self.seg_shift) as usize;
            let last = ((end - 1) >> self.seg_shift) as usize;
            for seg in first..=last {
                self.ensure_segment(seg);
            }
            cache.next = start;
            cache.end = end;
        }
        let rid = RowId(cache.next);
        cache.next += 1;
        if cache.next < cache.end {
            // The next insert's slot: fetch its lines (at most four) for writing now, so that
            // the header and payload stores of that insert do not fill the store buffer with
            // misses and stall the index insert's atomic behind them.
            let slot = self.slot_ptr(RowId(cache.next));
            for i in 0..(self.slot_size / CACHE_LINE).min(4) {
                prefetch_line::<true>(slot.wrapping_add(i * CACHE_LINE));
            }
        }
        Some(rid)
    }

    /// Address of `rid`'s slot, for prefetching only (near null if its segment does not exist).
    #[inline(always)]
    fn slot_ptr(&self, rid: RowId) -> *const u8 {
        let seg = (rid.0 >> self.seg_shift) as usize;
        let idx = (rid.0 & ((1u64 << self.seg_shift) - 1)) as usize;
        // Relaxed: an address for a prefetch hint only; nothing is read through it.
        let base = self.dir[seg].load(Ordering::Relaxed);
        base.wrapping_add(idx * self.slot_size).cast_const()
    }

    /// The record at `rid`.
    ///
    /// `rid` must have been returned by [`alloc`](Self::alloc) on this store; the index only
    /// holds such ids. Panics (in all builds) on an id beyond the directory.
    #[inline]
    pub fn get(&self, rid: RowId) -> RowRef<'_, R> {
        let seg = (rid.0 >> self.seg_shift) as usize;
        let idx = (rid.0 & ((1u64 << self.seg_shift) - 1)) as usize;
        // Acquire: pairs with the Release CAS in `ensure_segment`.
        let base = self.dir[seg].load(Ordering::Acquire);
        assert!(!base.is_null(), "row id {} was never allocated", rid.0);
        // SAFETY: `base` points to a live segment of `slot_size << seg_shift` bytes (segments
        // are freed only in Drop, which needs `&mut self`), `idx < 1 << seg_shift`, and the slot
        // is 64-byte aligned. The header occupies the first `size_of::<R>()` bytes, which are a
        // valid `R` because the segment was zeroed (RecordHeader contract) and every later write
        // goes through `R`'s own atomics. The payload words start at `header_size` (a multiple of
        // 8) and lie inside the slot.
        unsafe {
            let slot = base.add(idx * self.slot_size);
            let header = &*(slot as *const R);
            let words = std::slice::from_raw_parts(
                slot.add(self.header_size) as *const AtomicU64,
                self.words,
            );
            RowRef { header, words, len: self.row_size }
        }
    }
}

impl<R: RecordHeader> Drop for RowStore<R> {
    fn drop(&mut self) {
        let layout = self.seg_layout();
        for seg in self.dir.iter() {
            // Acquire (`&mut self`: no other thread is left): pairs with the publishing CAS's
            // Release.
            let p = seg.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: each non-null entry was mapped in `ensure_segment` with `layout`, and
                // `&mut self` proves no reference into it is alive.
                unsafe { memory::unmap(p, layout) };
            }
        }
    }
}

/// Copies the first `dst.len()` (fewer than 8) bytes of `src` with fixed-size moves: a
/// `copy_from_slice` of a length unknown at compile time calls `memcpy`, and a row's partial last
/// word is copied on every read and write of most TPC-C rows.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = dst.len();
    debug_assert!(n < 8 && src.len() >= n);
    let mut i = 0;
    if n & 4 != 0 {
        dst[..4].copy_from_slice(&src[..4]);
        i = 4;
    }
    if n & 2 != 0 {
        dst[i..i + 2].copy_from_slice(&src[i..i + 2]);
        i += 2;
    }
    if n & 1 != 0 {
        dst[i] = src[i];
    }
}

/// Prefetches the cache line holding `addr` into all cache levels, in anticipation of a write
/// when `FOR_WRITE` (a hint; any address).
#[inline(always)]
pub(crate) fn prefetch_line<const FOR_WRITE: bool>(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint that never faults and never changes memory, whatever the
    // address; the pointer is not dereferenced.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0, _MM_HINT_T0};
        if FOR_WRITE {
            _mm_prefetch::<_MM_HINT_ET0>(addr.cast());
        } else {
            _mm_prefetch::<_MM_HINT_T0>(addr.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Hdr(AtomicU64);
    // SAFETY: a single atomic: zero is valid, no Drop, align 8.
    unsafe impl RecordHeader for Hdr {}

    #[test]
    fn payload_round_trips_for_every_length_and_slots_are_aligned() {
        // Every partial last word (1 to 7 bytes, and none), short and long rows.
        for len in (1usize..=17).chain([100, 318, 4000]) {
            let store = RowStore::<Hdr>::new(len, 10_000).unwrap();
            let mut cache = SlotCache::default();
            let mut rids = Vec::new();
            for i in 0..600u64 {
                let rid = store.alloc(&mut cache).unwrap();
                let data: Vec<u8> = (0..len).map(|b| (b as u64 * 31 + i) as u8).collect();
                let row = store.get(rid);
                assert_eq!(row.header as *const Hdr as usize % 64, 0);
                row.write_from(&data);
                row.header.0.store(i, Ordering::Relaxed);
                rids.push((rid, data));
            }
            for (i, (rid, data)) in rids.iter().enumerate() {
                let row = store.get(*rid);
                let mut out = vec![0; len];
                row.read_into(&mut out);
                assert_eq!(&out, data, "len {len} row {i}");
                assert_eq!(row.header.0.load(Ordering::Relaxed), i as u64);
            }
        }
    }

    #[test]
    fn prefault_maps_only_missing_segments_within_capacity() {
        // 64-byte slots (8-byte header + 56 bytes): 32768 per 2 MiB segment.
        let store = RowStore::<Hdr>::new(56, 100_000).unwrap();
        let per = store.slots_per_segment();
        assert_eq!(per, 32_768);
        let seg_bytes = 2 << 20;
        assert_eq!(store.prefault(0, 1, usize::MAX), seg_bytes);
        assert_eq!(store.prefault(0, per, usize::MAX), 0, "segment 0 exists now");
        assert_eq!(
            store.prefault(per - 1, 2, usize::MAX),
            seg_bytes,
            "the range touches segment 1"
        );
        // A budget stops it after the segment that reaches it.
        assert_eq!(store.prefault(0, u64::MAX, 1), seg_bytes);
        // Past capacity: only the segments up to the last slot (4 segments in all).
        assert_eq!(store.prefault(0, u64::MAX, usize::MAX), seg_bytes);
        assert_eq!(store.prefault(100_000, 10, usize::MAX), 0);
        assert_eq!(store.prefault(5, 0, usize::MAX), 0);
        // Allocation uses the prefaulted segments: rows read back as zero, then as written.
        let mut cache = SlotCache::default();
        for i in 0..100_000u64 {
            let rid = store.alloc(&mut cache).unwrap();
            let row = store.get(rid);
            let mut out = [1u8; 56];
            row.read_into(&mut out);
            assert_eq!(out, [0u8; 56], "slot {i} is fresh");
            row.write_from(&[i as u8; 56]);
        }
    }

    /// Workers allocate and write rows while another thread faults segments in ahead of them
    /// (the driver's leader), racing them to create the same segments: every slot is handed out
    /// once, and every row keeps what its writer wrote (no segment is replaced under it).
    #[test]
    fn prefault_racing_allocation_loses_no_rows() {
        for round in 0..20u64 {
            let store = RowStore::<Hdr>::new(56, 400_000).unwrap();
            let done = std::sync::atomic::AtomicBool::new(false);
            let rows: Vec<Vec<RowId>> = std::thread::scope(|s| {
                s.spawn(|| {
                    let mut from = round * 1000;
                    while !done.load(Ordering::Relaxed) {
                        store.prefault(
                            store.allocated(),
                            2 * store.slots_per_segment(),
                            usize::MAX,
                        );
                        from = (from + 7919) % 400_000;
                        store.prefault(from, 3, usize::MAX);
                    }
                });
                let workers: Vec<_> = (0..4u64)
                    .map(|w| {
                        let store = &store;
                        s.spawn(move || {
                            let mut cache = SlotCache::default();
                            let mut mine = Vec::new();
                            while let Some(rid) = store.alloc(&mut cache) {
                                let row = store.get(rid);
                                row.write_from(&[w as u8 + 1; 56]);
                                row.header.0.store(rid.0, Ordering::Relaxed);
                                mine.push(rid);
                                if mine.len() == 90_000 {
                                    break;
                                }
                            }
                            mine
                        })
                    })
                    .collect();
                let rows = workers.into_iter().map(|h| h.join().unwrap()).collect();
                done.store(true, Ordering::Relaxed);
                rows
            });
            let mut seen = std::collections::HashSet::new();
            for (w, mine) in rows.iter().enumerate() {
                assert_eq!(mine.len(), 90_000);
                for &rid in mine {
                    assert!(seen.insert(rid), "slot {} handed out twice", rid.0);
                    let row = store.get(rid);
                    let mut out = [0u8; 56];
                    row.read_into(&mut out);
                    assert_eq!(
                        out,
                        [w as u8 + 1; 56],
                        "round {round}: slot {} lost its row",
                        rid.0
                    );
                    assert_eq!(row.header.0.load(Ordering::Relaxed), rid.0);
                }
            }
        }
    }

    #[test]
    fn allocation_stops_at_capacity_and_reuses_released_slots() {
        let store = RowStore::<Hdr>::new(8, 300).unwrap();
        let mut cache = SlotCache::default();
        let all: Vec<_> = std::iter::from_fn(|| store.alloc(&mut cache)).collect();
        assert_eq!(all.len(), 300);
        assert!(store.alloc(&mut cache).is_none());
        cache.release(all[7]);
        assert_eq!(store.alloc(&mut cache), Some(all[7]));
    }

    #[test]
    fn concurrent_allocation_hands_out_distinct_slots() {
        let store = RowStore::<Hdr>::new(16, 100_000).unwrap();
        let ids: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let mut c = SlotCache::default();
                        (0..5000).map(|_| store.alloc(&mut c).unwrap().0).collect()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<u64> = ids.into_iter().flatten().collect();
        all.sort_unstable();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
