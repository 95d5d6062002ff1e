//! IC3's record: a version word that makes each piece atomic by OCC, and the accessor list of
//! the uncommitted transactions that read or wrote the record (§3.2, §5.2).
//!
//! **The word.** Bit 0 locks the record (a piece commits, or a transaction installs or
//! unlinks its entries, holding it); bit 1 says that uncommitted writer entries exist
//! ([`PENDING`]); bits 2 and 3 are absence and unlinking, as in the other protocols; the rest is
//! a version that changes whenever the *visible value* changes: when a piece commits a write
//! (a new stash) and when a rolled-back writer's entry leaves (the stash before it shows
//! again). Installing a committed transaction's image into the payload changes nothing a
//! reader sees (the image is the stash it read already, or a later writer's stash hides it),
//! so it keeps the version.
//!
//! **The visible value** is the stash of the last writer entry, else the payload: what a read
//! returns (pieces of uncommitted transactions are visible once committed, the point of IC3).
//! A stash is the image the writer's piece committed, kept in the writer's own memory and read
//! only under the lock; removing the entry reverts the visible value with no copy.
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
/// Uncommitted writer entries exist: the visible value is a stash.
pub const PENDING: u64 = 1 << 1;
/// Absent: deleted, or inserted and not committed yet.
pub const ABSENT: u64 = 1 << 2;
/// The GC is removing the record from the index.
pub const UNLINKED: u64 = 1 << 3;
/// One version step.
pub const VERSION: u64 = 1 << 4;

/// The record header (see the module docs).
#[repr(C, align(8))]
pub struct Ic3Record {
    word: AtomicU64,
    /// The oldest entry of the accessor list; changed under the lock.
    head: AtomicPtr<Entry>,
}

// SAFETY: two atomic words; all zeros is a valid unlocked record with no entries (absent bit
// clear: loading sets the version); no Drop; align 8.
unsafe impl RecordHeader for Ic3Record {}

/// One accessor-list entry: an uncommitted transaction that read or wrote a record.
pub struct Entry {
    txn: Option<TxnRef>,
    writer: bool,
    /// The writer's committed image (the table's row size), in the owner's memory.
    stash: *const u8,
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
            writer: false,
            stash: std::ptr::null(),
            next: AtomicPtr::default(),
            aborted: AtomicBool::new(false),
        }
    }
}

// SAFETY: the raw pointers are a stash in the owner's memory, read only under the record's
// lock while the entry is linked (the owner frees neither before unlinking it), and the list
// link, changed only under the lock.
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
        self.writer
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
    /// A fresh entry for `txn` (a writer's with its stash `stash` of the row's size, a
    /// reader's with none).
    pub fn entry(&mut self, txn: TxnRef, stash: Option<NonNull<u8>>) -> NonNull<Entry> {
        let (chunk, slot) = (self.used / CHUNK, self.used % CHUNK);
        if chunk == self.chunks.len() {
            self.chunks.push((0..CHUNK).map(|_| Entry::default()).collect());
        }
        self.used += 1;
        let e = &mut self.chunks[chunk][slot];
        e.txn = Some(txn);
        e.writer = stash.is_some();
        e.stash = stash.map_or(std::ptr::null(), |p| p.as_ptr().cast_const());
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
            // Acquire: the holder's changes (list, stash, payload) before its unlock are seen.
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

    /// Copies the visible value into `buf` (the row's size) and returns the word it goes
    /// with (unlocked), the version a piece validates. Without pending writers it is a
    /// seqlock read of the payload; with some, a read under the lock.
    pub fn read(&self, row: &RowRef<'_, Ic3Record>, buf: &mut [u8]) -> u64 {
        let mut spin = SpinWait::default();
        loop {
            let v1 = self.load();
            if v1 & LOCK != 0 {
                spin.spin();
                continue;
            }
            if v1 & PENDING != 0 {
                let locked = self.lock();
                locked.read_visible(row, buf);
                return locked.word();
            }
            row.read_into(buf);
            // Acquire fence: the copy happens before the re-check (seqlock read; pairs with
            // the Acquire of `lock`, which orders a writer's payload stores after its lock).
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

/// What appending an entry found.
#[derive(Clone, Copy, Debug, Default)]
pub struct Appended {
    /// The transaction the appender now depends on directly, if any.
    pub dep: Option<TxnRef>,
}

impl Locked<'_> {
    /// The word as it will be unlocked.
    #[inline]
    pub fn word(&self) -> u64 {
        self.word
    }

    /// The record.
    pub fn record(&self) -> &Ic3Record {
        self.rec
    }

    /// Moves the version on: the visible value changed.
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

    /// The stash of the last writer entry, if any.
    fn stash(&self) -> Option<*const u8> {
        self.entries().filter(|e| e.writer).last().map(|e| e.stash)
    }

    /// Copies the visible value into `buf`.
    pub fn read_visible(&self, row: &RowRef<'_, Ic3Record>, buf: &mut [u8]) {
        match self.stash() {
            // SAFETY: a linked writer's stash is the row's size and stays valid while linked.
            Some(s) => buf.copy_from_slice(unsafe { std::slice::from_raw_parts(s, buf.len()) }),
            None => row.read_into(buf),
        }
    }

    /// Whether the last writer entry not `txn`'s was marked by a rolled-back writer: what
    /// `txn` would read or overwrite there will be rolled back (validation fails; the piece
    /// runs again once the marked entries are gone).
    pub fn doomed_for(&self, txn: TxnRef) -> bool {
        self.entries().filter(|e| e.writer && e.txn != Some(txn)).last().is_some_and(Entry::aborted)
    }

    /// Appends `entry` (its owner's, fresh from [`EntryPool::entry`]) and returns the
    /// dependency it creates (Algorithm 1, lines 18 and 22). A writer's entry makes its stash
    /// the visible value: the version moves on.
    pub fn append(&mut self, entry: NonNull<Entry>) -> Appended {
        // SAFETY: the caller's entry, fresh and unlinked.
        let e = unsafe { entry.as_ref() };
        let me = e.txn;
        let mut dep = None;
        let mut last: Option<&Entry> = None;
        for x in self.entries() {
            if x.txn != me && (x.writer || e.writer) {
                dep = x.txn;
            }
            last = Some(x);
        }
        match last {
            Some(l) => l.next.store(entry.as_ptr(), Ordering::Relaxed),
            None => self.rec.head.store(entry.as_ptr(), Ordering::Relaxed),
        }
        if e.writer {
            self.word |= PENDING;
            self.bump();
        }
        Appended { dep }
    }

    /// Unlinks `entry`. When its transaction rolled back (`rolled_back`) and the entry is a
    /// writer's, every entry after it is marked and the version moves on (the visible value
    /// reverts).
    pub fn unlink(&mut self, entry: NonNull<Entry>, rolled_back: bool) {
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
        if rolled_back && e.writer {
            // SAFETY: the entries after `e` are linked (the list is unchanged but for `e`).
            let mut x = unsafe { next.as_ref() };
            while let Some(y) = x {
                y.aborted.store(true, Ordering::Relaxed);
                // SAFETY: as above.
                x = unsafe { y.next.load(Ordering::Relaxed).as_ref() };
            }
            self.bump();
        }
        if e.writer && !self.entries().any(|x| x.writer) {
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
        // Release: publishes the list, stash and payload changes made under the lock (pairs
        // with the Acquire of `lock` and `load`).
        self.rec.word.store(self.word & !LOCK, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::super::txn::TxnCtx;
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn row<'a>(rec: &'a Ic3Record, words: &'a [AtomicU64]) -> RowRef<'a, Ic3Record> {
        RowRef::from_parts(rec, words, 8)
    }

    fn stash(v: u64) -> Box<[u8; 8]> {
        Box::new(v.to_le_bytes())
    }

    fn read(rec: &Ic3Record, words: &[AtomicU64]) -> (u64, u64) {
        let mut buf = [0u8; 8];
        let w = rec.read(&row(rec, words), &mut buf);
        (u64::from_le_bytes(buf), w)
    }

    #[test]
    fn reads_see_the_last_writers_stash_and_dependencies_follow_the_list() {
        let rec = Ic3Record { word: AtomicU64::new(VERSION), head: AtomicPtr::default() };
        let words = [AtomicU64::new(10)];
        let (c1, c2, c3) = (TxnCtx::default(), TxnCtx::default(), TxnCtx::default());
        let (t1, t2, t3) = (c1.begin(0), c2.begin(0), c3.begin(0));
        let (mut p1, mut p2, mut p3) =
            (EntryPool::default(), EntryPool::default(), EntryPool::default());
        let (s1, s2) = (stash(11), stash(12));
        let (v0, w0) = read(&rec, &words);
        assert_eq!(v0, 10, "no entries: the payload");
        // T1 reads (no writer before it), then writes.
        let a = rec.lock().append(p1.entry(t1, None));
        assert!(a.dep.is_none());
        let a = rec.lock().append(p1.entry(t1, Some(NonNull::from(&s1[0]))));
        assert!(a.dep.is_none(), "its own reader entry is no dependency");
        let (v, w) = read(&rec, &words);
        assert_eq!(v, 11, "T1's stash");
        assert_ne!(w, w0, "a new stash is a new version");
        assert!(w & PENDING != 0);
        // T2 reads: depends on T1 (write-read); T3 writes: depends on T2 (read-write).
        assert_eq!(rec.lock().append(p2.entry(t2, None)).dep, Some(t1));
        let e3 = p3.entry(t3, Some(NonNull::from(&s2[0])));
        assert_eq!(rec.lock().append(e3).dep, Some(t2));
        assert_eq!(read(&rec, &words).0, 12, "the last writer's stash");
        // T3 rolls back: the visible value reverts to T1's stash, nothing after T3 to mark.
        rec.lock().unlink(e3, true);
        assert_eq!(read(&rec, &words).0, 11);
        assert!(!rec.lock().doomed_for(t3));
    }

    #[test]
    fn a_rolled_back_writer_marks_the_entries_after_it_and_commit_unlinks_quietly() {
        let rec = Ic3Record { word: AtomicU64::new(VERSION), head: AtomicPtr::default() };
        let words = [AtomicU64::new(10)];
        let (c1, c2, c3) = (TxnCtx::default(), TxnCtx::default(), TxnCtx::default());
        let (t1, t2, t3) = (c1.begin(0), c2.begin(0), c3.begin(0));
        let (mut p1, mut p2, mut p3) =
            (EntryPool::default(), EntryPool::default(), EntryPool::default());
        let (s1, s2) = (stash(20), stash(30));
        let r1 = p1.entry(t1, None);
        rec.lock().append(r1);
        let w2 = p2.entry(t2, Some(NonNull::from(&s1[0])));
        rec.lock().append(w2);
        let r3 = p3.entry(t3, None);
        rec.lock().append(r3);
        let w3 = p3.entry(t3, Some(NonNull::from(&s2[0])));
        rec.lock().append(w3);
        // T1 (a reader) rolls back: nobody is marked, the value is unchanged.
        let before = read(&rec, &words);
        rec.lock().unlink(r1, true);
        assert_eq!(read(&rec, &words), before, "a reader leaving changes nothing visible");
        // T2 (a writer) rolls back: T3's entries are marked, T3's stash stays visible until
        // T3 leaves too, and T3 itself sees that what it overwrote is doomed.
        rec.lock().unlink(w2, true);
        // SAFETY: the pool keeps the entries alive.
        assert!(unsafe { r3.as_ref() }.aborted() && unsafe { w3.as_ref() }.aborted());
        assert_eq!(read(&rec, &words).0, 30);
        let c4 = TxnCtx::default();
        assert!(rec.lock().doomed_for(c4.begin(0)), "a new reader would read doomed data");
        rec.lock().unlink(r3, true);
        rec.lock().unlink(w3, true);
        assert!(rec.lock().no_entries());
        let (v, w) = read(&rec, &words);
        assert_eq!(v, 10, "back to the payload");
        assert_eq!(w & PENDING, 0);
        // A committed writer installs its stash, then unlinks without a new version.
        let w5 = p1.entry(c1.begin(0), Some(NonNull::from(&s1[0])));
        rec.lock().append(w5);
        let (_, seen) = read(&rec, &words);
        let mut l = rec.lock();
        words[0].store(20, Ordering::Relaxed);
        l.unlink(w5, false);
        drop(l);
        assert_eq!(read(&rec, &words), (20, seen & !PENDING));
    }
}
