//! IC3's record: a version word that makes each piece atomic by OCC, and the accessor list of
//! the uncommitted transactions that read or wrote the record (§3.2, §5.2).
//!
//! **The visible value lives in the payload.** IC3 reads the *stash*, the value the last
//! committed piece wrote, and installs a transaction's writes into the record at transaction
//! commit. Here a committed piece writes the payload itself and its accessor entry keeps the
//! *before-image* it replaced: the same values are visible (the payload is the stash), but a
//! read is the plain seqlock read every optimistic protocol here makes, with no lock and no
//! list walk even on a hot record with pending writers, and a transaction's commit installs
//! nothing (it only leaves the lists). The price is paid by the rare rollback: a rolled-back
//! writer that is the record's last writer puts its before-image back; one with later writers
//! (who are marked and will roll back too) hands its before-image to the next of them, so
//! that the last rollback restores the committed value. The committed value is the first
//! writer entry's before-image, or the payload when there is none ([`Locked::read_committed`],
//! for checkpoints).
//!
//! **The word.** Bit 0 locks the record (a piece commits, or a transaction leaves the list or
//! rolls back, holding it); bit 1 says that uncommitted writer entries exist ([`PENDING`]);
//! bits 2 and 3 are absence and unlinking, as in the other protocols; the rest is a version
//! that moves whenever the payload changes (a piece's write, a rollback's restore), which is
//! what a piece validates. Leaving the list after a commit changes no value, so it keeps the
//! version (only [`PENDING`] may clear: validation ignores that bit).
//!
//! **The list** is oldest first and changes only under the lock. Entries live in their owner's
//! [`EntryPool`], which does not move them and reuses them only after the owner unlinked them
//! all, so a pointer in a list is valid while it is there. Appending an entry returns the
//! dependency Algorithm 1 takes (the last writer before a reader, the last accessor before a
//! writer, the owner's own entries skipped). A rolled-back writer marks every entry after its
//! own (§4.4): those transactions saw its writes, or wrote after it, and must roll back too.
//! Only a writer's entry marks: a rolled-back reader's successors saw nothing of it (the
//! paper marks after any entry; marking after readers would only abort more).

use super::txn::TxnRef;
use crate::protocols::common::SpinWait;
use crate::storage::row_store::{RecordHeader, RowRef};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Lock bit.
pub const LOCK: u64 = 1 << 0;
/// Uncommitted writer entries exist: the payload is not (only) committed data.
pub const PENDING: u64 = 1 << 1;
/// Absent: deleted, or inserted and not committed yet.
pub const ABSENT: u64 = 1 << 2;
/// The GC is removing the record from the index.
pub const UNLINKED: u64 = 1 << 3;
/// One version step.
pub const VERSION: u64 = 1 << 4;

/// Whether two words name the same visible value (lock and [`PENDING`] aside).
#[inline]
pub fn same_version(a: u64, b: u64) -> bool {
    (a ^ b) & !(LOCK | PENDING) == 0
}

/// The record header (see the module docs).
#[repr(C, align(8))]
pub struct Ic3Record {
    word: AtomicU64,
    /// The oldest entry of the accessor list; changed under the lock.
    head: AtomicPtr<Entry>,
}

// SAFETY: two atomic words; all zeros is a valid unlocked record with no entries (loading sets
// the version); no Drop; align 8.
unsafe impl RecordHeader for Ic3Record {}

/// One accessor-list entry: an uncommitted transaction that read or wrote a record.
pub struct Entry {
    txn: Option<TxnRef>,
    /// A writer's before-image (the row's size, in the owner's memory); null for a reader.
    before: *mut u8,
    /// Whether the record was absent before the writer's piece.
    before_absent: AtomicBool,
    /// The next (younger) entry; changed under the record's lock.
    next: AtomicPtr<Entry>,
    /// Set by a rolled-back writer before it (under the record's lock); read by the owner
    /// before it commits.
    aborted: AtomicBool,
}

impl Default for Entry {
    fn default() -> Self {
        Entry {
            txn: None,
            before: std::ptr::null_mut(),
            before_absent: AtomicBool::new(false),
            next: AtomicPtr::default(),
            aborted: AtomicBool::new(false),
        }
    }
}

// SAFETY: `before` is a buffer in the owner's memory that the owner keeps while the entry is
// linked, written and read only under the record's lock; `next` changes only under the lock.
unsafe impl Send for Entry {}
// SAFETY: as for Send.
unsafe impl Sync for Entry {}

impl Entry {
    /// Whether a rolled-back writer before it marked it.
    #[inline]
    pub fn aborted(&self) -> bool {
        // Relaxed: set before the marking writer's context ended (Release there) and read
        // after the owner saw every dependency end (Acquire there), or under the lock.
        self.aborted.load(Ordering::Relaxed)
    }

    /// Whether the entry is a writer's.
    pub fn writer(&self) -> bool {
        !self.before.is_null()
    }
}

/// Where a transaction's entries live: chunks that never move, reused from the start once the
/// transaction has unlinked all of them ([`EntryPool::reset`]).
#[derive(Default)]
pub struct EntryPool {
    chunks: Vec<Box<[Entry]>>,
    used: usize,
}

const CHUNK: usize = 64;

impl EntryPool {
    /// A fresh entry for `txn`: a writer's with `before`, a buffer of the row's size for its
    /// before-image (which the owner keeps until the entry is unlinked), or a reader's.
    pub fn entry(&mut self, txn: TxnRef, before: Option<NonNull<u8>>) -> NonNull<Entry> {
        let (chunk, slot) = (self.used / CHUNK, self.used % CHUNK);
        if chunk == self.chunks.len() {
            self.chunks.push((0..CHUNK).map(|_| Entry::default()).collect());
        }
        self.used += 1;
        let e = &mut self.chunks[chunk][slot];
        e.txn = Some(txn);
        e.before = before.map_or(std::ptr::null_mut(), NonNull::as_ptr);
        *e.before_absent.get_mut() = false;
        *e.next.get_mut() = std::ptr::null_mut();
        *e.aborted.get_mut() = false;
        NonNull::from(e)
    }

    /// Makes every entry reusable; the caller has unlinked them all.
    pub fn reset(&mut self) {
        self.used = 0;
    }

    /// Entries handed out since the last reset.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }
}

impl Ic3Record {
    /// The word.
    #[inline]
    pub fn load(&self) -> u64 {
        // Acquire: pairs with the Release store that unlocks (`Locked::drop`).
        self.word.load(Ordering::Acquire)
    }

    /// Sets the word of a record being loaded (no transaction runs on it).
    pub fn init(&self, word: u64) {
        self.word.store(word, Ordering::Release);
    }

    /// Locks the record, spinning while another holds it.
    pub fn lock(&self) -> Locked<'_> {
        let mut spin = SpinWait::default();
        loop {
            let w = self.word.load(Ordering::Relaxed);
            // Acquire: the holder's changes (list, payload) before its unlock are seen.
            if w & LOCK == 0
                && self
                    .word
                    .compare_exchange_weak(w, w | LOCK, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Locked { rec: self, word: w };
            }
            spin.spin();
        }
    }

    /// Copies the visible value (the payload) into `buf` and returns the word it goes with
    /// (unlocked): a seqlock read, waiting while the record is locked.
    pub fn read(&self, row: &RowRef<'_, Ic3Record>, buf: &mut [u8]) -> u64 {
        let mut spin = SpinWait::default();
        loop {
            let v1 = self.load();
            if v1 & LOCK != 0 {
                spin.spin();
                continue;
            }
            row.read_into(buf);
            // Acquire fence: the copy happens before the re-check (seqlock read; pairs with
            // the Acquire of `lock`, which keeps a writer's payload stores after its lock).
            fence(Ordering::Acquire);
            if self.word.load(Ordering::Relaxed) == v1 {
                return v1;
            }
        }
    }
}

/// A locked record: changes to the word are stored with the unlock, when it drops.
pub struct Locked<'r> {
    rec: &'r Ic3Record,
    word: u64,
}

impl Locked<'_> {
    /// The word as it will be unlocked.
    #[inline]
    pub fn word(&self) -> u64 {
        self.word
    }

    /// Moves the version on: the payload changed.
    pub fn bump(&mut self) {
        self.word = self.word.wrapping_add(VERSION);
    }

    /// Sets or clears status bits ([`ABSENT`], [`UNLINKED`]).
    pub fn set(&mut self, bits: u64, on: bool) {
        debug_assert_eq!(bits & (LOCK | PENDING), 0);
        self.word = if on { self.word | bits } else { self.word & !bits };
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        // SAFETY: linked entries are valid while linked (module docs), and the list cannot
        // change while the lock is held.
        let mut next = unsafe { self.rec.head.load(Ordering::Relaxed).as_ref() };
        std::iter::from_fn(move || {
            let e = next?;
            // SAFETY: as above.
            next = unsafe { e.next.load(Ordering::Relaxed).as_ref() };
            Some(e)
        })
    }

    /// Copies the latest committed value into `buf` and says whether it is present: the first
    /// writer entry's before-image, else the payload.
    pub fn read_committed(&self, row: &RowRef<'_, Ic3Record>, buf: &mut [u8]) -> bool {
        match self.entries().find(|e| e.writer()) {
            Some(e) => {
                // SAFETY: a linked writer's before-image is the row's size and stays valid
                // while linked; it changes only under this lock.
                buf.copy_from_slice(unsafe { std::slice::from_raw_parts(e.before, buf.len()) });
                !e.before_absent.load(Ordering::Relaxed)
            }
            None => {
                row.read_into(buf);
                self.word & ABSENT == 0
            }
        }
    }

    /// Whether the last writer entry not `txn`'s was marked by a rolled-back writer: what
    /// `txn` read or would overwrite there will be rolled back (validation fails; the piece
    /// runs again once the marked entries are gone).
    pub fn doomed_for(&self, txn: TxnRef) -> bool {
        let last = self.entries().filter(|e| e.writer() && e.txn != Some(txn)).last();
        last.is_some_and(Entry::aborted)
    }

    /// Appends `entry` (its owner's, fresh from [`EntryPool::entry`]) and returns the
    /// transaction it now depends on directly, if any (Algorithm 1, lines 18 and 22). A
    /// writer's entry takes the record's current payload as its before-image: the caller then
    /// writes its piece's image into the payload, and the version moves on.
    pub fn append(&mut self, row: &RowRef<'_, Ic3Record>, entry: NonNull<Entry>) -> Option<TxnRef> {
        // SAFETY: the caller's entry, fresh and unlinked.
        let e = unsafe { entry.as_ref() };
        let me = e.txn;
        let mut dep = None;
        let mut last: Option<&Entry> = None;
        for x in self.entries() {
            if x.txn != me && (x.writer() || e.writer()) {
                dep = x.txn;
            }
            last = Some(x);
        }
        match last {
            Some(l) => l.next.store(entry.as_ptr(), Ordering::Relaxed),
            None => self.rec.head.store(entry.as_ptr(), Ordering::Relaxed),
        }
        if e.writer() {
            // SAFETY: the owner's buffer of the row's size, not linked anywhere before now.
            let before = unsafe { std::slice::from_raw_parts_mut(e.before, row.len()) };
            row.read_into(before);
            e.before_absent.store(self.word & ABSENT != 0, Ordering::Relaxed);
            self.word |= PENDING;
            self.bump();
        }
        dep
    }

    /// Unlinks `entry`. When its transaction rolled back (`rolled_back`) and the entry is a
    /// writer's, every entry after it is marked, and its before-image goes back into the
    /// payload (it was the last writer) or to the next writer entry (see the module docs).
    pub fn unlink(
        &mut self,
        row: &RowRef<'_, Ic3Record>,
        entry: NonNull<Entry>,
        rolled_back: bool,
    ) {
        // SAFETY: an entry of the caller's, linked here.
        let e = unsafe { entry.as_ref() };
        let next = e.next.load(Ordering::Relaxed);
        let head = self.rec.head.load(Ordering::Relaxed);
        if head == entry.as_ptr() {
            self.rec.head.store(next, Ordering::Relaxed);
        } else {
            let prev = self.entries().find(|x| x.next.load(Ordering::Relaxed) == entry.as_ptr());
            debug_assert!(prev.is_some(), "the entry is linked");
            if let Some(p) = prev {
                p.next.store(next, Ordering::Relaxed);
            }
        }
        if rolled_back && e.writer() {
            let mut heir: Option<&Entry> = None;
            // SAFETY: the entries after `e` are linked (the list is unchanged but for `e`).
            let mut x = unsafe { next.as_ref() };
            while let Some(y) = x {
                y.aborted.store(true, Ordering::Relaxed);
                if heir.is_none() && y.writer() {
                    heir = Some(y);
                }
                // SAFETY: as above.
                x = unsafe { y.next.load(Ordering::Relaxed).as_ref() };
            }
            let len = row.len();
            // SAFETY: both before-images are the row's size, valid while their entries are
            // (`e` until its owner resets its pool, after this), changed only under the lock.
            let mine = unsafe { std::slice::from_raw_parts(e.before, len) };
            let absent = e.before_absent.load(Ordering::Relaxed);
            match heir {
                Some(h) => {
                    // SAFETY: as above; distinct buffers (different entries).
                    unsafe { std::slice::from_raw_parts_mut(h.before, len) }.copy_from_slice(mine);
                    h.before_absent.store(absent, Ordering::Relaxed);
                }
                None => {
                    row.write_from(mine);
                    self.word = if absent { self.word | ABSENT } else { self.word & !ABSENT };
                    self.bump();
                }
            }
        }
        if e.writer() && !self.entries().any(Entry::writer) {
            self.word &= !PENDING;
        }
    }

    /// Whether the list is empty.
    pub fn no_entries(&self) -> bool {
        self.rec.head.load(Ordering::Relaxed).is_null()
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // Release: publishes the list and payload changes made under the lock (pairs with the
        // Acquire of `lock` and `load`).
        self.rec.word.store(self.word & !LOCK, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::super::txn::TxnCtx;
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A one-word record holding `v`.
    struct Cell {
        rec: Ic3Record,
        words: [AtomicU64; 1],
    }

    impl Cell {
        fn new(v: u64) -> Self {
            let rec = Ic3Record { word: AtomicU64::new(VERSION), head: AtomicPtr::default() };
            Cell { rec, words: [AtomicU64::new(v)] }
        }
        fn row(&self) -> RowRef<'_, Ic3Record> {
            RowRef::from_parts(&self.rec, &self.words, 8)
        }
        fn read(&self) -> (u64, u64) {
            let mut buf = [0u8; 8];
            let w = self.rec.read(&self.row(), &mut buf);
            (u64::from_le_bytes(buf), w)
        }
        /// A piece of the entry's owner commits a write of `v`.
        fn write(&self, e: NonNull<Entry>, v: u64) -> Option<TxnRef> {
            let mut l = self.rec.lock();
            let dep = l.append(&self.row(), e);
            self.row().write_from(&v.to_le_bytes());
            dep
        }
        fn committed(&self) -> u64 {
            let mut buf = [0u8; 8];
            assert!(self.rec.lock().read_committed(&self.row(), &mut buf));
            u64::from_le_bytes(buf)
        }
    }

    fn buffer() -> Box<[u8; 8]> {
        Box::new([0; 8])
    }

    #[test]
    fn reads_see_the_last_pieces_write_and_dependencies_follow_the_list() {
        let c = Cell::new(10);
        let (c1, c2, c3) = (TxnCtx::default(), TxnCtx::default(), TxnCtx::default());
        let (t1, t2, t3) = (c1.begin(0), c2.begin(0), c3.begin(0));
        let (mut p1, mut p2, mut p3) =
            (EntryPool::default(), EntryPool::default(), EntryPool::default());
        let (mut b1, mut b3) = (buffer(), buffer());
        let (v0, w0) = c.read();
        assert_eq!(v0, 10);
        // T1 reads (no writer before it), then writes 11.
        assert!(c.rec.lock().append(&c.row(), p1.entry(t1, None)).is_none());
        let dep = c.write(p1.entry(t1, Some(NonNull::from(&mut b1[0]))), 11);
        assert!(dep.is_none(), "its own reader entry is no dependency");
        let (v, w) = c.read();
        assert_eq!(v, 11, "T1's piece is visible before T1 commits");
        assert!(!same_version(w, w0) && w & PENDING != 0);
        assert_eq!(c.committed(), 10, "the committed value is T1's before-image");
        // T2 reads: depends on T1 (write-read); T3 writes: depends on T2 (read-write).
        assert_eq!(c.rec.lock().append(&c.row(), p2.entry(t2, None)), Some(t1));
        let e3 = p3.entry(t3, Some(NonNull::from(&mut b3[0])));
        assert_eq!(c.write(e3, 12), Some(t2));
        assert_eq!(c.read().0, 12);
        // T3 rolls back as the last writer: T1's value is back, under a new version.
        let before = c.read().1;
        c.rec.lock().unlink(&c.row(), e3, true);
        let (v, w) = c.read();
        assert_eq!(v, 11);
        assert!(!same_version(w, before));
        assert!(!c.rec.lock().doomed_for(t3));
    }

    #[test]
    fn a_rolled_back_writer_marks_its_successors_and_hands_its_before_image_on() {
        let c = Cell::new(10);
        let (c1, c2, c3) = (TxnCtx::default(), TxnCtx::default(), TxnCtx::default());
        let (t1, t2, t3) = (c1.begin(0), c2.begin(0), c3.begin(0));
        let (mut p1, mut p2, mut p3) =
            (EntryPool::default(), EntryPool::default(), EntryPool::default());
        let (mut b2, mut b3) = (buffer(), buffer());
        let r1 = p1.entry(t1, None);
        c.rec.lock().append(&c.row(), r1);
        let w2 = p2.entry(t2, Some(NonNull::from(&mut b2[0])));
        c.write(w2, 20);
        let r3 = p3.entry(t3, None);
        c.rec.lock().append(&c.row(), r3);
        let w3 = p3.entry(t3, Some(NonNull::from(&mut b3[0])));
        c.write(w3, 30);
        // T1 (a reader) rolls back: nobody is marked, nothing changes.
        let before = c.read();
        c.rec.lock().unlink(&c.row(), r1, true);
        assert_eq!(c.read(), before, "a reader leaving changes nothing visible");
        // T2 (a writer) rolls back with T3 after it: T3's entries are marked, the payload
        // keeps T3's write until T3 rolls back too, and T3 inherits the committed value.
        c.rec.lock().unlink(&c.row(), w2, true);
        // SAFETY: the pool keeps the entries alive.
        assert!(unsafe { r3.as_ref() }.aborted() && unsafe { w3.as_ref() }.aborted());
        assert_eq!(c.read().0, 30);
        assert_eq!(c.committed(), 10);
        let c4 = TxnCtx::default();
        assert!(c.rec.lock().doomed_for(c4.begin(0)), "a new reader would read doomed data");
        c.rec.lock().unlink(&c.row(), r3, true);
        c.rec.lock().unlink(&c.row(), w3, true);
        assert!(c.rec.lock().no_entries());
        let (v, w) = c.read();
        assert_eq!(v, 10, "the committed value is back");
        assert_eq!(w & PENDING, 0);
        // A committed writer only leaves the list: its value stays, under the same version.
        let w5 = p1.entry(c1.begin(0), Some(NonNull::from(&mut b2[0])));
        c.write(w5, 50);
        let seen = c.read();
        c.rec.lock().unlink(&c.row(), w5, false);
        let (v, w) = c.read();
        assert_eq!(v, 50);
        assert!(same_version(w, seen.1) && w & PENDING == 0);
    }

    /// Threads (more than cores) run one-piece transactions that each add 1 to one record,
    /// wait for the writer before them, and roll back when marked or at random (one in
    /// eight), as cascading aborts do: the value ends as the number of commits.
    #[test]
    fn concurrent_increments_with_cascading_rollbacks_keep_exactly_the_committed_ones() {
        use super::super::txn::{wait_until, Contexts, WaitPolicy};
        const THREADS: usize = 6;
        const TXNS: u64 = 3_000;
        let c = Cell::new(0);
        let contexts = Contexts::new(THREADS);
        let commits = AtomicU64::new(0);
        std::thread::scope(|s| {
            for seed in 0..THREADS as u64 {
                let (c, contexts, commits) = (&c, &contexts, &commits);
                s.spawn(move || {
                    let ctx = contexts.take().expect("a context per thread");
                    let mut pool = EntryPool::default();
                    let mut before = buffer();
                    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for _ in 0..TXNS {
                        let t = ctx.begin(0);
                        let e = pool.entry(t, Some(NonNull::from(&mut before[0])));
                        let dep = {
                            let mut l = c.rec.lock();
                            let dep = l.append(&c.row(), e);
                            let v = c.words[0].load(Ordering::Relaxed);
                            c.words[0].store(v + 1, Ordering::Relaxed);
                            dep
                        };
                        if let Some(d) = dep {
                            wait_until(WaitPolicy::Yield, || d.over());
                        }
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        // SAFETY: the pool keeps the entry until `reset`.
                        let marked = unsafe { e.as_ref() }.aborted();
                        let roll_back = marked || rng % 8 == 0;
                        c.rec.lock().unlink(&c.row(), e, roll_back);
                        if !roll_back {
                            commits.fetch_add(1, Ordering::Relaxed);
                        }
                        ctx.end();
                        pool.reset();
                    }
                    contexts.give_back(ctx);
                });
            }
        });
        let commits = commits.load(Ordering::Relaxed);
        assert!(commits > 0 && commits < THREADS as u64 * TXNS);
        assert_eq!(c.read().0, commits, "every committed increment and no other");
        assert!(c.rec.lock().no_entries());
    }

    #[test]
    fn rolling_back_an_insert_makes_the_record_absent_again() {
        let c = Cell::new(0);
        c.rec.init(VERSION | ABSENT);
        let ctx = TxnCtx::default();
        let mut pool = EntryPool::default();
        let mut b = buffer();
        let e = pool.entry(ctx.begin(0), Some(NonNull::from(&mut b[0])));
        let mut l = c.rec.lock();
        l.append(&c.row(), e);
        l.set(ABSENT, false);
        drop(l);
        let mut buf = [0u8; 8];
        assert!(!c.rec.lock().read_committed(&c.row(), &mut buf), "not committed yet");
        c.rec.lock().unlink(&c.row(), e, true);
        assert!(c.rec.load() & ABSENT != 0);
    }
}
