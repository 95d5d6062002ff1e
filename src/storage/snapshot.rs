//! Snapshots for read-only transactions (Silo §4.9), for the single-version protocols whose
//! commit stamps carry the epoch they committed in.
//!
//! A transaction declared read-only reads a *snapshot*: the state every commit of an epoch
//! below a boundary `b` left, and nothing later. It takes no locks, records no read set and
//! never aborts; writers keep the old values such readers still need.
//!
//! ## Boundaries
//!
//! Boundaries are multiples of `k` epochs (Silo: `k` = 25 epochs of 40 ms, one second). The
//! epoch thread publishes, after each advance, the newest boundary `b` all of whose commits have
//! finished: `b <= min(global, oldest running transaction's epoch)` ([`SnapshotClock::refresh`],
//! snapshot readers aside: see below).
//! Why that suffices: a commit of epoch `e < b` entered its transaction at epoch `e` or earlier.
//! Had it been running at the scan of the epoch slots, its slot would have held at most `e`, so
//! `b` would be at most `e`; had it entered after the scan, it would have read the global epoch
//! after the scan, so `e` would be at least the global epoch read before the scan, which is at
//! least `b`. So it had left (its installs happen before its slot went idle, a Release store the
//! scan's SeqCst loads read), and a reader that loads `b` afterwards sees its values. A
//! database without running transactions still moves the boundary: the global epoch bounds it.
//!
//! Running snapshot readers do not count (a long one would hold every boundary back, and it
//! commits nothing): the scan passes over a slot whose reader slot (below) holds a boundary.
//! What it passes over is a snapshot reader, or a later transaction of that worker, and a
//! later one takes its commit epoch after a SeqCst fence that follows the reader's exit: the
//! scan's load of the reader slot read a value from before that exit, so it precedes the fence
//! in the SeqCst order, and so does the global epoch's load before it; the commit's epoch is
//! at least that global epoch, so at least `b`. An earlier transaction of that worker had left
//! before the reader entered, and the scan read the reader's SeqCst store.
//!
//! ## Old versions
//!
//! Each table keeps, beside its row slots, one chain head per slot ([`Chains`]): the row's
//! older values, newest first, each a [`Version`] with the record word it had (the protocol's
//! word, whose meaning storage does not know) and the epoch it committed in. A writer holding
//! a record's lock that replaces a value of epoch `a` by one of epoch `c`, where `a` and `c`
//! lie in different intervals (`a / k < c / k`), first copies the value onto the chain
//! ([`Chains::save`]): one copy per record per interval, as in Silo. A reader at `b` takes the
//! value in place when its epoch is below `b`, else the newest chain entry below `b`, else the
//! row is absent at `b` (born later). The entry it needs is always there: of the row's values
//! `v_i` committed at `a_i`, the reader needs the `v_i` with `a_i < b <= a_(i+1)`, and since `b`
//! is a multiple of `k`, `a_i / k < b / k <= a_(i+1) / k`, so `v_i` was copied when `v_(i+1)`
//! replaced it. An absent value (a deletion) is copied like a present one, but only above an
//! older entry: with nothing older, an empty chain already answers "absent".
//!
//! ## Reclamation
//!
//! Readers publish their boundary in a per-worker slot. The epoch thread publishes the *oldest*
//! boundary `o` any running or future reader may use: the least of the current boundary and
//! the published ones ([`SnapshotClock::oldest`]); a reader that loads the boundary, publishes it
//! and finds it unchanged is counted (it either published before the scan or loaded a boundary
//! at least as new as the scan's). A writer that copies a value trims the chain behind the first
//! entry below `o`: every reader needs an entry at or above that one. Trimmed versions are freed
//! after the storage epochs' grace period (a reader may be walking them), through the worker's
//! reclaimer. The GC unlinks a deleted record only once its deletion's epoch is below `o` (a
//! reader below it must still find the key), and the chain of a freed row slot goes with it.
//! A record copied once and never written again keeps its copy until the row is freed: memory
//! is bounded by one version per written row beyond what readers hold.

use super::epoch::{Epochs, IDLE};
use super::memory;
use super::row_store::{prefetch_line, RecordHeader, RowRef};
use super::version::{Version, VersionExt, VersionPool, VersionStore};
use super::RowId;
use crate::error::Error;
use crossbeam_utils::CachePadded;
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

/// The per-version field of a snapshot copy: the epoch its value committed in.
#[derive(Default)]
pub struct SnapEpoch {
    /// The epoch.
    pub epoch: AtomicU64,
}

// SAFETY: one atomic; zero is valid; no Drop; align 8.
unsafe impl VersionExt for SnapEpoch {}

/// An old value on a chain.
pub type SnapVersion = Version<SnapEpoch>;

/// The snapshot boundaries of a database (see the module docs). Off until
/// [`SnapshotClock::set_every`].
pub struct SnapshotClock {
    /// Epochs between two boundaries (0: snapshots off).
    every: AtomicU64,
    /// The newest boundary whose commits have all finished (0: none yet).
    current: CachePadded<AtomicU64>,
    /// No running or future reader uses a boundary below this.
    oldest: CachePadded<AtomicU64>,
    /// Each worker slot's boundary in use, or `IDLE`.
    readers: Box<[CachePadded<AtomicU64>]>,
    /// Serialises refreshes (the epoch thread's and tests').
    refresh: Mutex<()>,
}

impl SnapshotClock {
    /// Snapshots off, for at most `max_workers` readers.
    pub fn new(max_workers: usize) -> Self {
        SnapshotClock {
            every: AtomicU64::new(0),
            current: CachePadded::new(AtomicU64::new(0)),
            oldest: CachePadded::new(AtomicU64::new(0)),
            readers: (0..max_workers).map(|_| CachePadded::new(AtomicU64::new(IDLE))).collect(),
            refresh: Mutex::new(()),
        }
    }

    /// Turns snapshots on, a boundary every `k` epochs (before any worker exists).
    pub fn set_every(&self, k: u64) {
        // Relaxed: set before the workers and the refreshes that read it are created.
        self.every.store(k, Ordering::Relaxed);
    }

    /// Epochs between two boundaries (0: off).
    #[inline]
    pub fn every(&self) -> u64 {
        // Relaxed: fixed before any reader exists (see `set_every`).
        self.every.load(Ordering::Relaxed)
    }

    /// The newest published boundary (0: none yet).
    #[inline]
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::SeqCst)
    }

    /// The oldest boundary a running or future reader may use; `u64::MAX` when snapshots are
    /// off (nothing is kept for them).
    #[inline]
    pub fn oldest(&self) -> u64 {
        if self.every() == 0 {
            return u64::MAX;
        }
        // Acquire: pairs with the Release store in `refresh`.
        self.oldest.load(Ordering::Acquire)
    }

    /// Publishes the newest boundary `epochs` allows, then the oldest one in use (see the
    /// module docs). The epoch thread calls it after every advance.
    pub fn refresh(&self, epochs: &Epochs) {
        let k = self.every();
        if k == 0 {
            return;
        }
        let _one = self.refresh.lock().unwrap_or_else(|e| e.into_inner());
        // SeqCst, in this order: the global epoch before the slots (the module docs' argument).
        let global = epochs.global_seqcst();
        // The oldest running transaction, snapshot readers aside (SeqCst: the module docs).
        let running = epochs.min_active_where(|i| self.readers[i].load(Ordering::SeqCst) == IDLE);
        let b = global.min(running) / k * k;
        if b > self.current.load(Ordering::Relaxed) {
            // SeqCst: before the reader slots are scanned below (pairs with `enter`).
            self.current.store(b, Ordering::SeqCst);
        }
        let b = self.current.load(Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let readers = self.readers.iter().map(|r| r.load(Ordering::SeqCst)).min().unwrap_or(IDLE);
        let o = b.min(readers).max(self.oldest.load(Ordering::Relaxed));
        // Release: pairs with the Acquire load in `oldest`.
        self.oldest.store(o, Ordering::Release);
    }

    /// Starts a reader in worker slot `slot`: its boundary, published, or `None` while there is
    /// no boundary yet (or snapshots are off).
    #[inline]
    pub fn enter(&self, slot: usize) -> Option<u64> {
        if self.every() == 0 {
            return None;
        }
        loop {
            let b = self.current();
            if b == 0 {
                return None;
            }
            // SeqCst store, fence and reload: either `refresh` scans this slot after the store,
            // or its scan came first and the reload sees a boundary at least as new as the one
            // it counted (see the module docs).
            self.readers[slot].store(b, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if self.current() == b {
                return Some(b);
            }
        }
    }

    /// Ends the reader in `slot`.
    #[inline]
    pub fn exit(&self, slot: usize) {
        // Release: the reader's walks happen before a refresh lets the boundary go (freeing
        // still waits for the storage epochs' grace period).
        self.readers[slot].store(IDLE, Ordering::Release);
    }
}

/// A value a writer keeps for snapshot readers ([`Chains::save`]).
pub enum Kept<'a, R> {
    /// No row (a deletion, or nothing inserted yet).
    Absent,
    /// The row in place (read under its record's lock).
    Row(RowRef<'a, R>),
    /// A copy of the row kept elsewhere, of the row's size (IC3's before-images: its pieces
    /// write the row before their transaction commits).
    Bytes(&'a [u8]),
}

/// The old values of one table's rows (see the module docs).
pub struct Chains {
    heads: NonNull<AtomicPtr<SnapVersion>>,
    len: usize,
    /// Where the copies come from.
    pub store: VersionStore<SnapEpoch>,
}

// SAFETY: the heads are atomics in memory the chains own; versions are reached only under the
// reclamation rules of the module docs.
unsafe impl Send for Chains {}
// SAFETY: as above.
unsafe impl Sync for Chains {}

impl Chains {
    /// Chains for a table of `capacity` slots of `row_size`-byte rows (the heads are mapped
    /// lazily: untouched slots cost no memory).
    pub fn new(row_size: usize, capacity: u64) -> Result<Self, Error> {
        let len = usize::try_from(capacity.max(1))
            .map_err(|_| Error::Config(format!("capacity {capacity} too large")))?;
        let layout = Layout::array::<AtomicPtr<SnapVersion>>(len)
            .map_err(|_| Error::Config(format!("capacity {capacity} too large")))?;
        let p = memory::map(layout).cast::<AtomicPtr<SnapVersion>>();
        let heads = NonNull::new(p).expect("map never returns null");
        Ok(Chains { heads, len, store: VersionStore::new(row_size) })
    }

    #[inline(always)]
    fn head(&self, rid: RowId) -> &AtomicPtr<SnapVersion> {
        assert!((rid.0 as usize) < self.len, "row {} beyond the table's capacity", rid.0);
        // SAFETY: in bounds (checked); the mapping is zeroed (null pointers) and lives as long
        // as `self`.
        unsafe { &*self.heads.as_ptr().add(rid.0 as usize) }
    }

    /// Keeps the value `value` of row `rid` (whose record word is `word`, committed in `epoch`)
    /// before a writer replaces it; then trims the chain behind the first entry below
    /// `oldest`, handing what it cut to `retire`. Called under the record's lock, which
    /// serialises every change to the row's chain.
    #[allow(clippy::too_many_arguments)]
    pub fn save<R: RecordHeader>(
        &self,
        pool: &mut VersionPool<SnapEpoch>,
        rid: RowId,
        value: Kept<'_, R>,
        word: u64,
        epoch: u64,
        oldest: u64,
        mut retire: impl FnMut(NonNull<SnapVersion>),
    ) {
        let head = self.head(rid);
        // Relaxed: only lock holders change the chain, and the lock orders them.
        let older = head.load(Ordering::Relaxed);
        if matches!(value, Kept::Absent) && older.is_null() {
            return;
        }
        let v = pool.alloc(&self.store);
        // SAFETY: a version of this store, ours until published below.
        let ver = unsafe { v.as_ref() };
        ver.stamp.store(word, Ordering::Relaxed);
        ver.ext.epoch.store(epoch, Ordering::Relaxed);
        ver.next.store(older, Ordering::Relaxed);
        match value {
            Kept::Absent => {}
            Kept::Row(row) => self.store.row(ver).copy_from(&row),
            Kept::Bytes(bytes) => self.store.row(ver).write_from(bytes),
        }
        // Release: the fields and payload above before the entry (pairs with `at`'s Acquire).
        head.store(v.as_ptr(), Ordering::Release);
        let mut at = ver;
        loop {
            // Relaxed: the chain is written only by this record's saver (`save`, under the record's
            // write lock); its entries were published with the head's Release.
            let next = at.next.load(Ordering::Relaxed);
            if at.ext.epoch.load(Ordering::Relaxed) < oldest {
                if let Some(cut) = NonNull::new(next) {
                    // Relaxed: no reader goes past `at` (every boundary in use is at or above
                    // `oldest`), and the cut versions are freed only after the grace period.
                    at.next.store(std::ptr::null_mut(), Ordering::Relaxed);
                    Self::walk(Some(cut), &mut retire);
                }
                return;
            }
            // SAFETY: a linked version, not freed while linked.
            match unsafe { next.as_ref() } {
                Some(n) => at = n,
                None => return,
            }
        }
    }

    /// Prefetches the chain head of row `rid` (a hint, with the row's own lines: a snapshot
    /// reader of a row updated since its boundary then waits for one miss, the copy, not two
    /// one after the other). Loading the head there too, to prefetch the copy, stalled the
    /// prefetching loop instead (measured in TPC-C's Stock-Level).
    #[inline(always)]
    pub fn prefetch(&self, rid: RowId) {
        prefetch_line::<false>(self.heads.as_ptr().wrapping_add(rid.0 as usize).cast());
    }

    /// The newest old value of row `rid` committed below epoch `b`, if any.
    #[inline]
    pub fn at(&self, rid: RowId, b: u64) -> Option<&SnapVersion> {
        // Acquire: pairs with the Release store in `save`.
        let mut p = self.head(rid).load(Ordering::Acquire);
        // SAFETY: linked versions are freed only after the grace period of every reader that
        // could reach them (the caller is inside a transaction epoch).
        while let Some(v) = unsafe { p.as_ref() } {
            if v.ext.epoch.load(Ordering::Relaxed) < b {
                return Some(v);
            }
            // Acquire: pairs with the Release store of the head in `save` (`next` was stored before
            // it).
            p = v.next.load(Ordering::Acquire);
        }
        None
    }

    /// Whether row `rid` has old values.
    #[inline]
    pub fn is_empty(&self, rid: RowId) -> bool {
        self.head(rid).load(Ordering::Relaxed).is_null()
    }

    /// Detaches the chain of row `rid`, whose slot is being freed (nothing can reach the row
    /// any more), handing each version to `free`.
    pub fn take(&self, rid: RowId, mut free: impl FnMut(NonNull<SnapVersion>)) {
        let first = self.head(rid).swap(std::ptr::null_mut(), Ordering::Relaxed);
        Self::walk(NonNull::new(first), &mut free);
    }

    fn walk(mut v: Option<NonNull<SnapVersion>>, f: &mut impl FnMut(NonNull<SnapVersion>)) {
        while let Some(p) = v {
            // SAFETY: a version cut off by the caller, not freed before `f` takes it.
            v = NonNull::new(unsafe { p.as_ref() }.next.load(Ordering::Relaxed));
            f(p);
        }
    }

    /// The payload of `v` as a row reference.
    #[inline]
    pub fn row<'a>(&self, v: &'a SnapVersion) -> RowRef<'a, SnapVersion> {
        self.store.row(v)
    }
}

impl Drop for Chains {
    fn drop(&mut self) {
        let layout = Layout::array::<AtomicPtr<SnapVersion>>(self.len).expect("layout of new");
        // SAFETY: mapped by `new` with this layout; the versions live in the store's chunks,
        // freed with it.
        unsafe { memory::unmap(self.heads.as_ptr().cast(), layout) };
    }
}

/// Whether a value of epoch `a` replaced by one of epoch `c` must be kept, with a boundary
/// every `k` epochs: the two lie in different intervals.
#[inline(always)]
pub fn crosses(a: u64, c: u64, k: u64) -> bool {
    a / k < c / k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Storage, TableSpec};
    use std::time::Duration;

    /// The boundary follows the global epoch in steps of `k`, held back by the oldest running
    /// transaction that is not a snapshot reader; `oldest` by the readers.
    #[test]
    fn boundaries_wait_for_running_transactions_and_readers() {
        let e = Epochs::new(3);
        let s = &e.snapshots;
        s.set_every(4);
        let (a, r) = (e.register().unwrap(), e.register().unwrap());
        s.refresh(&e);
        assert_eq!((s.current(), s.oldest()), (0, 0), "epoch 1: no boundary yet");
        assert_eq!(s.enter(r), None);
        e.enter(a);
        for _ in 0..8 {
            e.advance();
        }
        s.refresh(&e);
        assert_eq!(s.current(), 0, "a transaction of epoch 1 still runs");
        e.exit(a);
        s.refresh(&e);
        assert_eq!((e.global(), s.current(), s.oldest()), (9, 8, 8));
        // A reader is in its epoch, as every transaction, and at its boundary.
        e.enter(r);
        assert_eq!(s.enter(r), Some(8));
        e.enter(a);
        for _ in 0..4 {
            e.advance();
        }
        s.refresh(&e);
        assert_eq!((s.current(), s.oldest()), (8, 8), "epoch 9's transaction holds 12 back");
        e.exit(a);
        s.refresh(&e);
        assert_eq!(
            (s.current(), s.oldest()),
            (12, 8),
            "the reader at 8 holds `oldest`, not the boundary (it commits nothing)"
        );
        s.exit(r);
        e.exit(r);
        s.refresh(&e);
        assert_eq!(s.oldest(), 12);
    }

    fn row_of(s: &Storage<AtomicU64Hdr>, rid: u64, v: u64) -> RowId {
        let t = &s.tables()[0];
        let rid = RowId(rid);
        t.rows.get(rid).write_from(&v.to_le_bytes());
        rid
    }

    #[derive(Default)]
    struct AtomicU64Hdr {
        _w: AtomicU64,
    }
    // SAFETY: one atomic, zero valid, no Drop, align 8.
    unsafe impl RecordHeader for AtomicU64Hdr {}

    /// Saved values answer by boundary; trimming keeps what the oldest boundary needs and
    /// retires the rest; `take` hands over the whole chain.
    #[test]
    fn chains_answer_by_boundary_and_trim_behind_the_oldest() {
        let s = Storage::<AtomicU64Hdr>::new(
            &[TableSpec::new("t", 8, 16)],
            1,
            Duration::from_secs(3600),
        )
        .unwrap();
        let t = &s.tables()[0];
        let mut cache = crate::storage::SlotCache::default();
        while t.rows.alloc(&mut cache).is_some_and(|r| r.0 < 3) {}
        let c = Chains::new(8, 16).unwrap();
        let mut pool = VersionPool::default();
        let rid = row_of(&s, 2, 0);
        let val = |v: &SnapVersion| {
            let mut b = [0u8; 8];
            c.row(v).read_into(&mut b);
            u64::from_le_bytes(b)
        };
        let mut retired = Vec::new();
        // An absence with nothing older is not kept.
        c.save(&mut pool, rid, Kept::<AtomicU64Hdr>::Absent, 0xA, 0, 0, |v| retired.push(v));
        assert!(c.is_empty(rid));
        // Values 10 (epoch 3), 20 (epoch 7), a deletion (epoch 9), kept as they are replaced.
        for (v, e, present) in [(10, 3, true), (20, 7, true), (0, 9, false)] {
            row_of(&s, 2, v);
            let kept = if present { Kept::Row(t.rows.get(rid)) } else { Kept::Absent };
            c.save(&mut pool, rid, kept, v, e, 0, |p| retired.push(p));
        }
        assert!(c.at(rid, 3).is_none(), "born at 3: absent below");
        assert_eq!(c.at(rid, 4).map(val), Some(10));
        assert_eq!(c.at(rid, 8).map(val), Some(20));
        assert_eq!(c.at(rid, 10).map(|v| v.stamp.load(Ordering::Relaxed)), Some(0));
        assert!(retired.is_empty());
        // A fourth copy with the oldest boundary at 8: what readers at 8 and above need is
        // the deletion (epoch 9)'s predecessor, 20 (epoch 7), and newer; 10 goes.
        // (Kept from a copy elsewhere, as IC3 keeps its before-images: the row holds 20.)
        row_of(&s, 2, 20);
        let kept = Kept::<AtomicU64Hdr>::Bytes(&30u64.to_le_bytes());
        c.save(&mut pool, rid, kept, 30, 12, 8, |p| retired.push(p));
        assert_eq!(retired.len(), 1);
        // SAFETY: retired, not linked any more.
        assert_eq!(val(unsafe { retired[0].as_ref() }), 10);
        assert_eq!(c.at(rid, 8).map(val), Some(20));
        assert_eq!(c.at(rid, 13).map(val), Some(30));
        assert!(c.at(rid, 4).is_none(), "trimmed below the oldest boundary");
        let mut taken = 0;
        c.take(rid, |_| taken += 1);
        assert_eq!(taken, 3);
        assert!(c.is_empty(rid));
    }

    #[test]
    fn crossing_is_by_interval() {
        assert!(!crosses(4, 7, 4));
        assert!(crosses(7, 8, 4));
        assert!(crosses(0, 25, 25) && !crosses(25, 49, 25));
    }
}
