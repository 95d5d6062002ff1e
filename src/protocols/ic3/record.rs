//! IC3's record: a version word that makes each piece atomic by OCC, and the accessor list of
//! the uncommitted transactions that read or wrote the record (§3.2, §5.2). The same header
//! serves as the pseudo-record of a phantom bucket (its list holds the scans that covered the
//! bucket and the inserts and deletes in it; it has no payload).
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
//! that the last rollback restores the committed value. The committed value is the
//! before-image of the first writer entry whose transaction has not passed its commit point
//! (`txn::COMMITTED`), or the payload when there is none ([`Locked::read_committed`]: for
//! checkpoints, and for the transactions that read committed data only, see `worker`).
//!
//! **The word.** Bit 0 locks the record (a piece commits, or a transaction leaves the list or
//! rolls back, holding it); bit 1 says that uncommitted writer entries exist ([`PENDING`]);
//! bits 2 and 3 are absence and unlinking, as in the other protocols; bit 4 says that the list
//! is not empty ([`LISTED`]: the GC leaves such a record alone). The rest is the *version*:
//! the stamp of the piece that wrote the visible value, unique among all writes (its
//! transaction context's number and a sequence, see `txn`), which is what histories name.
//! Versions are never reused, so the word never returns to a value it had: a seqlock reader
//! (or a validation) that loaded the word before a change always sees the word differ after
//! it, however many changes came between. A rollback that puts a before-image back therefore
//! puts it back under a *fresh* version drawn by the rolled-back transaction, not the one that
//! committed it: a reader whose copy spanned the rolled-back write and the restore (preempted
//! mid-copy) sees the word change instead of taking a torn copy, and a piece that read the
//! rolled-back value, or the value before the write (the value is the same, the check cannot
//! tell), fails its validation. (A count of restores beside the version would do the same
//! only until it wraps, which any fixed width allows a reader preempted long enough to
//! miss.) The history names the restored value by the version that committed it: the
//! rollback reports the fresh version as an alias of it ([`Restored`],
//! `history::Recorder::restored`). Leaving the list after a commit changes no value and
//! keeps the version (only [`PENDING`] and [`LISTED`] may clear: validation ignores them).
//!
//! **The list** is oldest first and changes only under the lock. Entries live in their owner's
//! [`EntryPool`], which does not move them and reuses them only after the owner unlinked them
//! all, so a pointer in a list is valid while it is there. Appending an entry returns the
//! dependency Algorithm 1 takes (the last writer before a reader, the last accessor before a
//! writer, the owner's own entries skipped). A rolled-back writer marks every entry after its
//! own (§4.4): those transactions saw its writes, or wrote after it, and must roll back too.
//! Only a writer's entry marks: a rolled-back reader's successors saw nothing of it (the
//! paper marks after any entry; marking after readers would only abort more).

use super::txn::{DepQueue, TxnRef};
use crate::protocols::common::stamp_epoch;
use crate::protocols::occ::InPlace;
use crate::storage::projection::{Columns, Projection};
use crate::storage::row_store::{RecordHeader, RowRef};
use crate::util::SpinWait;
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
/// The accessor list is not empty.
pub const LISTED: u64 = 1 << 4;
/// Where the version starts.
pub const VERSION_SHIFT: u32 = 5;
/// The bits that say which value the record holds: its version and whether it is absent.
pub const VALUE: u64 = !(LOCK | PENDING | UNLINKED | LISTED);

/// A rollback put a before-image back under a fresh version ([`Locked::unlink`]): `version`
/// holds the value of version `of`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The fresh version the value is back under.
    pub version: u64,
    /// The version that wrote the value (0 for the absence of a row never inserted).
    pub of: u64,
}

/// Whether two words name the same visible value (lock, [`PENDING`] and [`LISTED`] aside).
#[inline]
pub fn same_version(a: u64, b: u64) -> bool {
    (a ^ b) & !(LOCK | PENDING | LISTED) == 0
}

/// The version of a word.
#[inline]
pub fn version(word: u64) -> u64 {
    word >> VERSION_SHIFT
}

/// The word bits of version `v`.
#[inline]
pub fn with_version(word: u64, v: u64) -> u64 {
    (word & ((1 << VERSION_SHIFT) - 1)) | v << VERSION_SHIFT
}

/// The record header (see the module docs).
#[repr(C, align(8))]
pub struct Ic3Record {
    word: AtomicU64,
    /// The oldest entry of the accessor list; changed under the lock.
    head: AtomicPtr<Entry>,
    /// The commit stamp of the last transaction that wrote the record and has left its list
    /// (its log stamp when the database logs, else its commit epoch's first stamp; 0 for
    /// loaded rows): what a writer's commit stamp must exceed, the stamp of the committed
    /// image for checkpoints (see `worker`'s logging), and the epoch of the value before the
    /// first listed writer for snapshot readers ([`at_boundary`]). Changed under the lock.
    stamp: AtomicU64,
}

impl Default for Ic3Record {
    fn default() -> Self {
        Ic3Record { word: AtomicU64::new(0), head: AtomicPtr::default(), stamp: AtomicU64::new(0) }
    }
}

// SAFETY: three atomic words; all zeros is a valid unlocked record with no entries (loading
// sets the version); no Drop; align 8.
unsafe impl RecordHeader for Ic3Record {}

/// One accessor-list entry: an uncommitted transaction that read or wrote a record.
pub struct Entry {
    txn: Option<TxnRef>,
    /// A writer's (an insert or delete, on a bucket's pseudo-record).
    writer: bool,
    /// A row writer's before-image (the row's size, in the owner's memory); null otherwise.
    before: *mut u8,
    /// The word's [`VALUE`] bits before the writer's piece (its version and absence); an
    /// accumulation applied under the writer moves its version ([`Locked::accumulate`]).
    before_word: AtomicU64,
    /// The version `before_word` had when the entry was appended (what the owner's history
    /// names as the version its write followed).
    appended_over: AtomicU64,
    /// The largest commit stamp of the accumulations applied under the writer (0: none): kept
    /// here until the entry leaves, then taken into the record's stamp
    /// ([`Locked::keep_accumulation_stamp`]).
    acc_stamp: AtomicU64,
    /// The next (younger) entry; changed under the record's lock.
    next: AtomicPtr<Entry>,
    /// Set by a rolled-back writer before it (under the record's lock); read by the owner
    /// before it commits.
    aborted: AtomicBool,
    /// The record it is linked on (debug builds check that an entry is never reused while
    /// linked, appended twice, or unlinked from another record).
    #[cfg(debug_assertions)]
    linked_on: AtomicPtr<Ic3Record>,
}

impl Default for Entry {
    fn default() -> Self {
        Entry {
            txn: None,
            writer: false,
            before: std::ptr::null_mut(),
            before_word: AtomicU64::new(0),
            appended_over: AtomicU64::new(0),
            acc_stamp: AtomicU64::new(0),
            next: AtomicPtr::default(),
            aborted: AtomicBool::new(false),
            #[cfg(debug_assertions)]
            linked_on: AtomicPtr::default(),
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
    #[inline]
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
    /// A fresh entry for `txn`: a reader's, or a writer's when `writer`, whose `before` is a
    /// buffer of the row's size for its before-image (which the owner keeps until the entry is
    /// unlinked; none for a bucket's pseudo-record).
    pub fn entry(
        &mut self,
        txn: TxnRef,
        writer: bool,
        before: Option<NonNull<u8>>,
    ) -> NonNull<Entry> {
        debug_assert!(writer || before.is_none(), "a reader keeps no image");
        let (chunk, slot) = (self.used / CHUNK, self.used % CHUNK);
        if chunk == self.chunks.len() {
            self.chunks.push((0..CHUNK).map(|_| Entry::default()).collect());
        }
        self.used += 1;
        let e = &mut self.chunks[chunk][slot];
        #[cfg(debug_assertions)]
        assert!(e.linked_on.get_mut().is_null(), "an entry reused while linked");
        e.txn = Some(txn);
        e.writer = writer;
        e.before = before.map_or(std::ptr::null_mut(), NonNull::as_ptr);
        *e.before_word.get_mut() = 0;
        *e.appended_over.get_mut() = 0;
        *e.acc_stamp.get_mut() = 0;
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

    /// The word itself (for `occ`'s read phase).
    #[inline]
    pub fn word(&self) -> &AtomicU64 {
        &self.word
    }

    /// The commit stamp of the last writer that left the list (see the field).
    #[inline]
    pub fn stamp(&self) -> u64 {
        // Acquire: pairs with the Release of `Locked::set_stamp`; a reader that saw the writer
        // end (or holds the lock) sees it.
        self.stamp.load(Ordering::Acquire)
    }

    /// Sets the word of a record no transaction can reach (loading, a fresh insert).
    pub fn init(&self, word: u64) {
        self.word.store(word, Ordering::Release);
    }

    /// Locks the record, spinning while another holds it.
    pub fn lock(&self) -> Locked<'_> {
        let mut spin = SpinWait::default();
        loop {
            if let Some(l) = self.try_lock() {
                return l;
            }
            spin.spin();
        }
    }

    /// Locks the record if it is free now.
    #[inline]
    pub fn try_lock(&self) -> Option<Locked<'_>> {
        let w = self.word.load(Ordering::Relaxed);
        // Acquire: the holder's changes (list, payload) before its unlock are seen.
        let locked = w & LOCK == 0
            && self
                .word
                .compare_exchange_weak(w, w | LOCK, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
        // Lazily: a guard made and dropped would unlock the record.
        locked.then(|| Locked { rec: self, word: w })
    }

    /// Locks the record for a piece's commit, spinning while another commit holds it, but not
    /// while it is absent and locked: that is an insert whose piece has not committed yet (the
    /// inserter holds the lock from the insert to its piece's commit, and may be waiting for
    /// the caller meanwhile). `None` then.
    pub fn lock_unless_inserting(&self) -> Option<Locked<'_>> {
        let mut spin = SpinWait::default();
        loop {
            if let Some(l) = self.try_lock() {
                return Some(l);
            }
            if self.load() & (LOCK | ABSENT) == LOCK | ABSENT {
                return None;
            }
            spin.spin();
        }
    }

    /// Copies the visible value (the payload) into `buf` and returns the word it goes with
    /// (unlocked): a seqlock read, waiting while the record is locked.
    #[cfg(test)]
    pub fn read(&self, row: &RowRef<'_, Ic3Record>, buf: &mut [u8]) -> u64 {
        let mut spin = SpinWait::default();
        loop {
            let v1 = self.load();
            if v1 & LOCK != 0 {
                spin.spin();
                continue;
            }
            row.read_into(buf);
            // Acquire fence: the copy happens before the re-check (seqlock read).
            std::sync::atomic::fence(Ordering::Acquire);
            if self.word.load(Ordering::Relaxed) == v1 {
                return v1;
            }
        }
    }
}

/// The value of `row` at snapshot boundary `b` if it is in place, for a snapshot reader
/// (`storage::snapshot`; `occ::OccRecord::at_boundary`): the value before the first
/// listed writer (its before-image, or the payload when no writer is listed) when the last
/// writer to leave the list committed below `b` (the record's stamp), else
/// [`InPlace::Replaced`]: that writer kept the value at `b` on the row's chain as it left.
///
/// Why: every transaction whose commit epoch is below `b` had ended when `b` was published
/// (its epoch is at least the one it entered its storage epoch in, and `b` is at most the
/// oldest running transaction's), so every writer still listed commits at or after `b`, and
/// the last one to leave is the latest writer below `b` unless its stamp says otherwise.
/// Writers commit in list order, each after the writers before it ended (a direct commit
/// writes only unlisted records), so the stamps follow the values.
///
/// A record with no writer listed and not locked is read as a seqlock (its stamp read after
/// the word: a writer that leaves afterwards commits at or after `b`, and a stamp it set
/// sends the reader to the chain, where it kept the value first); otherwise under the
/// record's lock, which piece commits and leave steps hold briefly. A record being inserted
/// and never committed (unborn, locked by its inserter until its piece commits) is absent
/// without waiting.
#[inline]
pub fn at_boundary(
    row: RowRef<'_, Ic3Record>,
    b: u64,
    buf: &mut [u8],
    p: &Projection,
    cols: Columns,
) -> InPlace {
    let rec = row.header;
    let mut spin = SpinWait::default();
    loop {
        let v1 = rec.load();
        if v1 & UNLINKED != 0 {
            return InPlace::Unlinked;
        }
        if v1 & (LOCK | PENDING) == 0 {
            if stamp_epoch(rec.stamp()) >= b {
                return InPlace::Replaced;
            }
            if v1 & ABSENT != 0 {
                return InPlace::Absent;
            }
            row.read_cols_into(buf, p, cols);
            // Acquire fence: the copy before the re-check (a seqlock read).
            fence(Ordering::Acquire);
            if rec.word.load(Ordering::Relaxed) == v1 {
                return InPlace::Present(v1);
            }
        } else if v1 & ABSENT != 0 && version(v1) == 0 {
            return InPlace::Absent;
        } else if let Some(g) = rec.lock_unless_inserting() {
            return g.at_boundary_locked(&row, b, buf);
        }
        spin.spin();
    }
}

/// A locked record: changes to the word are stored with the unlock, when it drops.
///
/// Orderings: every load and store of the accessor list (`head`, the entries' `next`) and of
/// the entries' `before_word` and `acc_stamp` made through a `Locked` is Relaxed: only the lock's
/// holder makes them, and the lock's Acquire and the unlock's Release (the record word) order
/// them between holders. Readers outside the lock never follow the list.
pub struct Locked<'r> {
    rec: &'r Ic3Record,
    word: u64,
}

impl<'r> Locked<'r> {
    /// Keeps the lock past this guard and returns the word to [`Locked::resume`] it with.
    #[inline]
    pub fn keep(self) -> u64 {
        let w = self.word;
        std::mem::forget(self);
        w
    }

    /// A guard for a lock the caller holds: one it kept ([`Locked::keep`], with the word it
    /// returned) or the lock of a fresh insert (with the word without the lock bit).
    ///
    /// # Safety
    /// The caller holds the record's lock, and no other guard for it exists.
    #[inline]
    pub unsafe fn resume(rec: &'r Ic3Record, word: u64) -> Self {
        Locked { rec, word: word & !LOCK }
    }

    /// The word as it will be unlocked.
    #[inline]
    pub fn word(&self) -> u64 {
        self.word
    }

    /// Sets or clears status bits ([`ABSENT`], [`UNLINKED`]).
    pub fn set(&mut self, bits: u64, on: bool) {
        debug_assert_eq!(bits & (LOCK | PENDING | LISTED), 0);
        self.word = if on { self.word | bits } else { self.word & !bits };
    }

    /// Records the commit stamp of a committed writer of the record (see [`Ic3Record::stamp`]).
    pub fn set_stamp(&mut self, stamp: u64) {
        // Release: see `Ic3Record::stamp`.
        self.rec.stamp.store(stamp, Ordering::Release);
    }

    /// Raises the record's stamp to `stamp` (an accumulation's, kept in a leaving entry; an
    /// accumulation's stamp may exceed a later writer's, whose stamp was taken before the
    /// accumulation went under it: the two wrote other columns).
    pub fn raise_stamp(&mut self, stamp: u64) {
        if stamp > self.rec.stamp.load(Ordering::Relaxed) {
            self.set_stamp(stamp);
        }
    }

    /// Sets the version: a piece (or a transaction committing at once) wrote the payload.
    pub fn set_version(&mut self, v: u64) {
        self.word = with_version(self.word, v);
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

    /// The first row writer entry: every writer before it has left the list.
    fn first_writer(&self) -> Option<&Entry> {
        self.entries().find(|e| !e.before.is_null())
    }

    /// The value that `entry` (a row writer's, of a committed transaction, linked here)
    /// replaced, as its before-image of the row's `len` bytes and its word's [`VALUE`] bits,
    /// when `entry` is the first row writer listed: the transaction's first write of the
    /// record, over the value that the last writer to leave committed (see [`Ic3Record`]'s
    /// stamp). `None` for a later entry of the same transaction, whose before-image is the
    /// transaction's own earlier write.
    pub fn replaced_by(&self, entry: NonNull<Entry>, len: usize) -> Option<(&[u8], u64)> {
        let e = self.first_writer().filter(|e| std::ptr::eq(*e, entry.as_ptr()))?;
        // SAFETY: a linked writer's before-image is the row's size and stays valid while
        // linked; it changes only under this lock.
        let image = unsafe { std::slice::from_raw_parts(e.before, len) };
        Some((image, e.before_word.load(Ordering::Relaxed)))
    }

    /// The value of the record at snapshot boundary `b`, for a snapshot reader (see
    /// [`at_boundary`]), copied whole into `buf` (the row's size).
    fn at_boundary_locked(&self, row: &RowRef<'_, Ic3Record>, b: u64, buf: &mut [u8]) -> InPlace {
        if self.word & UNLINKED != 0 {
            return InPlace::Unlinked;
        }
        if stamp_epoch(self.rec.stamp()) >= b {
            return InPlace::Replaced;
        }
        let word = match self.first_writer() {
            Some(e) => {
                let word = e.before_word.load(Ordering::Relaxed);
                if word & ABSENT == 0 {
                    // SAFETY: as in `replaced_by`.
                    buf.copy_from_slice(unsafe { std::slice::from_raw_parts(e.before, buf.len()) });
                }
                word
            }
            None => {
                if self.word & ABSENT == 0 {
                    row.read_into(buf);
                }
                self.word & VALUE
            }
        };
        if word & ABSENT != 0 {
            InPlace::Absent
        } else {
            InPlace::Present(word)
        }
    }

    /// The first row writer entry whose transaction has not passed its commit point: its
    /// before-image is the committed value. (Writers commit in list order, each depending on
    /// the writer before it, so the committed ones come first.)
    fn first_uncommitted_writer(&self) -> Option<&Entry> {
        self.entries()
            .find(|e| !e.before.is_null() && !e.txn.expect("linked entries have one").committed())
    }

    /// The [`VALUE`] bits (version and absence) of the latest committed value: those of the
    /// first uncommitted writer's before-image, else the word's. What a reader of committed
    /// images validates against.
    pub fn committed_word(&self) -> u64 {
        match self.first_uncommitted_writer() {
            Some(e) => e.before_word.load(Ordering::Relaxed),
            None => self.word & VALUE,
        }
    }

    /// Copies the latest committed value into `buf` and returns its word's [`VALUE`] bits
    /// (version and absence): the first uncommitted writer's before-image, else the payload.
    pub fn read_committed(&self, row: &RowRef<'_, Ic3Record>, buf: &mut [u8]) -> u64 {
        match self.first_uncommitted_writer() {
            Some(e) => {
                // SAFETY: a linked writer's before-image is the row's size and stays valid
                // while linked; it changes only under this lock.
                buf.copy_from_slice(unsafe { std::slice::from_raw_parts(e.before, buf.len()) });
                e.before_word.load(Ordering::Relaxed)
            }
            None => {
                row.read_into(buf);
                self.word & VALUE
            }
        }
    }

    /// The transaction of the last writer entry not `txn`'s, if a rolled-back writer marked
    /// it: a value `txn` read there, or would overwrite, will be rolled back.
    pub fn doomed_writer(&self, txn: TxnRef) -> Option<TxnRef> {
        let last = self.entries().filter(|e| e.writer && e.txn != Some(txn)).last()?;
        if last.aborted() {
            last.txn
        } else {
            None
        }
    }

    /// Appends `entry` (its owner's, fresh from [`EntryPool::entry`]) and adds to `deps` the
    /// transactions it now depends on directly (Algorithm 1, lines 18 and 22): a reader the
    /// last writer; a writer the last writer and every reader after it (the paper's last
    /// accessor alone is not enough: a reader between two writers may roll back on its own,
    /// without marking anyone, and the second writer could then commit before the first, whose
    /// rollback would undo it). The owner's own entries are skipped. A row writer's entry (one
    /// with a before-image; `row` is then the record's row) takes the record's current payload
    /// and version as its before-image: the caller then writes its piece's image into the
    /// payload and sets the new version.
    pub fn append(
        &mut self,
        row: Option<&RowRef<'_, Ic3Record>>,
        entry: NonNull<Entry>,
        deps: &mut DepQueue,
    ) {
        // SAFETY: the caller's entry, fresh and unlinked.
        let e = unsafe { entry.as_ref() };
        let me = e.txn.expect("a fresh entry has its transaction");
        // (Under the record's lock: the list's last entry or head, and the record word.)
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Queue);
        self.dependencies(me, e.writer, |d| deps.push(d));
        match self.entries().last() {
            Some(l) => l.next.store(entry.as_ptr(), Ordering::Relaxed),
            None => self.rec.head.store(entry.as_ptr(), Ordering::Relaxed),
        }
        #[cfg(debug_assertions)]
        {
            let on = e.linked_on.swap(std::ptr::from_ref(self.rec).cast_mut(), Ordering::Relaxed);
            assert!(on.is_null(), "an entry appended twice");
        }
        self.word |= LISTED;
        if e.writer {
            self.word |= PENDING;
        }
        if !e.before.is_null() {
            let row = row.expect("a row writer's entry goes on a row");
            // SAFETY: the owner's buffer of the row's size, not linked anywhere before now.
            let before = unsafe { std::slice::from_raw_parts_mut(e.before, row.len()) };
            row.read_into(before);
            e.before_word.store(self.word & VALUE, Ordering::Relaxed);
            e.appended_over.store(version(self.word), Ordering::Relaxed);
        }
    }

    /// Applies a committing transaction's accumulation `acc` under the uncommitted writers
    /// listed (see `worker::apply_deferred`): into the payload, whose columns `cols` it writes
    /// from `image` (the payload with `acc` applied, the row's size), and into the before-image
    /// of every row writer from the first uncommitted one on (one not yet passing its commit
    /// point, [`TxnRef::committing`]), so that rollbacks keep it and readers of the committed
    /// value see it. The accumulation is the new committed version
    /// `v`: the first uncommitted writer's before-image takes it (and hands it on as any
    /// before-image). The payload's word does not change: no transaction that reads `cols`
    /// reads them while a writer is listed but under this lock (the analysis defers an
    /// accumulation only into columns no analysed template reads or writes otherwise, and
    /// only where no other column shares their payload words), so readers of other columns
    /// keep their versions. Returns the committed version the accumulation follows, or `None`
    /// when no uncommitted writer is listed (the caller then writes the payload and its
    /// version as any commit does).
    pub fn accumulate(
        &mut self,
        row: &RowRef<'_, Ic3Record>,
        p: &Projection,
        cols: Columns,
        image: &[u8],
        acc: &crate::engine::Accumulation,
        v: u64,
    ) -> Option<u64> {
        // A writer passing its commit point is committed (it can no longer fail) and
        // serializes before: waiting for it could deadlock with a commit accumulating under
        // this one's writes (and it may be this commit itself).
        let first = self.entries().find(|e| {
            !e.before.is_null() && !e.txn.expect("linked entries have one").committing()
        })?;
        let word = first.before_word.load(Ordering::Relaxed);
        let prev = version(word);
        first.before_word.store(with_version(word, v), Ordering::Relaxed);
        let first = std::ptr::from_ref(first);
        let len = row.len();
        let mut patch = false;
        for e in self.entries() {
            patch |= std::ptr::eq(e, first);
            if patch && !e.before.is_null() {
                // SAFETY: a linked writer's before-image is the row's size and stays valid
                // while linked; it changes only under this lock.
                let before = unsafe { std::slice::from_raw_parts_mut(e.before, len) };
                let fits = acc.apply(before);
                debug_assert!(fits, "checked when deferred");
            }
        }
        row.write_cols_from(image, p, cols);
        Some(prev)
    }

    /// The largest accumulation stamp kept in the listed writers' entries (0: none): what the
    /// next commit stamp of a write of the record must exceed, as the record's stamp.
    pub fn accumulation_stamp(&self) -> u64 {
        self.entries().map(|e| e.acc_stamp.load(Ordering::Relaxed)).max().unwrap_or(0)
    }

    /// Keeps the commit stamp of an accumulation applied under the listed writers
    /// ([`Locked::accumulate`]) in their entries, until they leave: the record's stamp stays
    /// that of the committed image without the writers (what a checkpoint of the committed
    /// image carries, so that recovery replays the writers' records; the accumulation's
    /// record holds column values, and replaying it again changes nothing).
    pub fn keep_accumulation_stamp(&mut self, stamp: u64) {
        for e in self.entries().filter(|e| !e.before.is_null()) {
            e.acc_stamp.fetch_max(stamp, Ordering::Relaxed);
        }
    }

    /// Whether an accumulation moved the version that `entry` (a row writer's, linked here)
    /// was appended over: `Some((appended over, now))` (the owner's history rebases its
    /// write on the accumulation's version).
    pub fn rebased(&self, entry: NonNull<Entry>) -> Option<(u64, u64)> {
        // SAFETY: an entry of the caller's, linked here.
        let e = unsafe { entry.as_ref() };
        let over = e.appended_over.load(Ordering::Relaxed);
        let now = version(e.before_word.load(Ordering::Relaxed));
        (over != now).then_some((over, now))
    }

    /// The transactions an entry of `me` (a writer's when `writer`) appended now would depend
    /// on directly (see [`Locked::append`]), each passed to `f` (some more than once).
    pub fn dependencies(&self, me: TxnRef, writer: bool, mut f: impl FnMut(TxnRef)) {
        let me = Some(me);
        let last_writer = self.entries().enumerate().filter(|(_, x)| x.writer && x.txn != me);
        let from = last_writer.last().map_or(0, |(i, _)| i);
        for x in self.entries().skip(from) {
            if x.txn != me && (x.writer || writer) {
                f(x.txn.expect("linked entries have a transaction"));
            }
        }
    }

    /// Unlinks `entry`. When its transaction rolled back (`rolled_back`) and the entry is a
    /// writer's, every entry after it is marked; a row writer's before-image goes back into the
    /// payload, under a fresh version `fresh()` drawn by the entry's owner, when it was the
    /// last row writer (returned: what the history names it by), or to the next row writer's
    /// entry, with its version (see the module docs).
    pub fn unlink(
        &mut self,
        row: Option<&RowRef<'_, Ic3Record>>,
        entry: NonNull<Entry>,
        rolled_back: bool,
        fresh: impl FnOnce() -> u64,
    ) -> Option<Restored> {
        let mut restored = None;
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Queue);
        // SAFETY: an entry of the caller's, linked here.
        let e = unsafe { entry.as_ref() };
        #[cfg(debug_assertions)]
        {
            let on = e.linked_on.swap(std::ptr::null_mut(), Ordering::Relaxed);
            assert!(std::ptr::eq(on, self.rec), "an entry unlinked from another record");
        }
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
            let mut heir: Option<&Entry> = None;
            // SAFETY: the entries after `e` are linked (the list is unchanged but for `e`).
            let mut x = unsafe { next.as_ref() };
            while let Some(y) = x {
                y.aborted.store(true, Ordering::Relaxed);
                if let Some(t) = y.txn {
                    t.doom();
                }
                if heir.is_none() && !y.before.is_null() {
                    heir = Some(y);
                }
                // SAFETY: as above.
                x = unsafe { y.next.load(Ordering::Relaxed).as_ref() };
            }
            if !e.before.is_null() {
                let row = row.expect("a row writer's entry is on a row");
                let len = row.len();
                // SAFETY: both before-images are the row's size, valid while their entries
                // are (`e` until its owner resets its pool, after this), changed only under
                // the lock.
                let mine = unsafe { std::slice::from_raw_parts(e.before, len) };
                let before = e.before_word.load(Ordering::Relaxed);
                match heir {
                    Some(h) => {
                        // SAFETY: as above; distinct buffers (different entries).
                        unsafe { std::slice::from_raw_parts_mut(h.before, len) }
                            .copy_from_slice(mine);
                        h.before_word.store(before, Ordering::Relaxed);
                        h.acc_stamp
                            .fetch_max(e.acc_stamp.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    None => {
                        row.write_from(mine);
                        self.raise_stamp(e.acc_stamp.load(Ordering::Relaxed));
                        // The value and its absence back, under a fresh version (module docs).
                        let v = fresh();
                        self.word = with_version((self.word & !VALUE) | (before & ABSENT), v);
                        restored = Some(Restored { version: v, of: version(before) });
                    }
                }
            }
        }
        if !rolled_back && e.writer {
            // The accumulations applied under it are committed values the payload holds.
            self.raise_stamp(e.acc_stamp.load(Ordering::Relaxed));
        }
        if self.rec.head.load(Ordering::Relaxed).is_null() {
            self.word &= !(PENDING | LISTED);
        } else if e.writer && !self.entries().any(Entry::writer) {
            self.word &= !PENDING;
        }
        restored
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

    /// A version no test write uses (they write small ones).
    fn fresh() -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1 << 30);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    /// A one-word record holding `v`.
    struct Cell {
        rec: Ic3Record,
        words: [AtomicU64; 1],
    }

    impl Cell {
        fn new(v: u64) -> Self {
            let rec = Ic3Record {
                word: AtomicU64::new(1 << VERSION_SHIFT),
                head: AtomicPtr::default(),
                stamp: AtomicU64::new(0),
            };
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
        /// A piece of the entry's owner commits a write of `v` (as version `v` too).
        fn write(&self, e: NonNull<Entry>, v: u64) -> Vec<TxnRef> {
            let mut l = self.rec.lock();
            let mut deps = DepQueue::default();
            l.append(Some(&self.row()), e, &mut deps);
            self.row().write_from(&v.to_le_bytes());
            l.set_version(v);
            deps.iter().copied().collect()
        }
        /// An entry's owner appends a reader entry.
        fn look(&self, e: NonNull<Entry>) -> Vec<TxnRef> {
            let mut deps = DepQueue::default();
            self.rec.lock().append(Some(&self.row()), e, &mut deps);
            deps.iter().copied().collect()
        }
        fn unlink(&self, e: NonNull<Entry>, rolled_back: bool) -> Option<Restored> {
            self.rec.lock().unlink(Some(&self.row()), e, rolled_back, fresh)
        }
        fn committed(&self) -> u64 {
            let mut buf = [0u8; 8];
            let w = self.rec.lock().read_committed(&self.row(), &mut buf);
            assert_eq!(w & ABSENT, 0);
            u64::from_le_bytes(buf)
        }
    }

    fn buffer() -> Box<[u8; 8]> {
        Box::new([0; 8])
    }

    fn writer(pool: &mut EntryPool, t: TxnRef, b: &mut [u8; 8]) -> NonNull<Entry> {
        pool.entry(t, true, Some(NonNull::from(&mut b[0])))
    }

    #[test]
    fn reads_see_the_last_pieces_write_and_dependencies_follow_the_list() {
        let c = Cell::new(10);
        let (c1, c2, c3) = (TxnCtx::default(), TxnCtx::default(), TxnCtx::default());
        let (t1, t2, t3) = (c1.begin(0, 0), c2.begin(0, 0), c3.begin(0, 0));
        let (mut p1, mut p2, mut p3) =
            (EntryPool::default(), EntryPool::default(), EntryPool::default());
        let (mut b1, mut b3) = (buffer(), buffer());
        let (v0, w0) = c.read();
        assert_eq!(v0, 10);
        // T1 reads (no writer before it), then writes 11.
        assert!(c.look(p1.entry(t1, false, None)).is_empty());
        let deps = c.write(writer(&mut p1, t1, &mut b1), 11);
        assert!(deps.is_empty(), "its own reader entry is no dependency");
        let (v, w) = c.read();
        assert_eq!(v, 11, "T1's piece is visible before T1 commits");
        assert!(!same_version(w, w0) && w & PENDING != 0);
        assert_eq!(c.committed(), 10, "the committed value is T1's before-image");
        // T2 reads: depends on T1 (write-read); T3 writes: depends on T2 (read-write) and on
        // T1 too (write-write): T2 could roll back on its own without marking T3, and T3 must
        // not commit before T1 then (T1's rollback would undo T3's write).
        assert_eq!(c.look(p2.entry(t2, false, None)), vec![t1]);
        let e3 = writer(&mut p3, t3, &mut b3);
        assert_eq!(c.write(e3, 12), vec![t1, t2]);
        assert_eq!(c.read().0, 12);
        // T3 rolls back as the last writer: T1's value is back, under a fresh version that
        // names T1's.
        let before = c.read().1;
        let restored = c.unlink(e3, true).expect("the value is restored");
        let (v, w) = c.read();
        assert_eq!(v, 11);
        assert!(!same_version(w, before), "a reader of T3's write fails validation");
        assert_eq!(version(w), restored.version, "a fresh version");
        assert_eq!(restored.of, 11, "the version that wrote the restored value");
    }

    /// A rollback restores the value under a fresh version, so the word never returns to one
    /// a reader loaded before the rolled-back write (a seqlock reader whose copy spanned the
    /// write and the restore must see a change), however many rollbacks the record sees
    /// (a count of restores would wrap: 5 bits did after 32).
    #[test]
    fn a_restored_value_comes_back_under_a_word_never_seen() {
        let c = Cell::new(10);
        let ctx = TxnCtx::default();
        let (_, w0) = c.read();
        let mut seen = vec![w0];
        for i in 1..200 {
            let t = ctx.begin(0, 0);
            let (mut pool, mut b) = (EntryPool::default(), buffer());
            let e = writer(&mut pool, t, &mut b);
            c.write(e, 100 + i);
            let restored = c.unlink(e, true).expect("restored");
            ctx.end();
            let (v, w) = c.read();
            assert_eq!(v, 10, "the loaded value is back");
            // An alias of the version before the write (the loaded one, then the last
            // restore's: the history resolves the chain).
            assert_eq!(restored.of, version(*seen.last().unwrap()), "restore {i}");
            assert!(seen.iter().all(|&x| !same_version(x, w)), "restore {i}: an old word");
            seen.push(w);
        }
    }

    #[test]
    fn a_rolled_back_writer_marks_its_successors_and_hands_its_before_image_on() {
        let c = Cell::new(10);
        let (c1, c2, c3) = (TxnCtx::default(), TxnCtx::default(), TxnCtx::default());
        let (t1, t2, t3) = (c1.begin(0, 0), c2.begin(0, 0), c3.begin(0, 0));
        let (mut p1, mut p2, mut p3) =
            (EntryPool::default(), EntryPool::default(), EntryPool::default());
        let (mut b2, mut b3) = (buffer(), buffer());
        let r1 = p1.entry(t1, false, None);
        c.look(r1);
        let w2 = writer(&mut p2, t2, &mut b2);
        c.write(w2, 20);
        let r3 = p3.entry(t3, false, None);
        c.look(r3);
        let w3 = writer(&mut p3, t3, &mut b3);
        c.write(w3, 30);
        // T1 (a reader) rolls back: nobody is marked, nothing changes.
        let before = c.read();
        c.unlink(r1, true);
        assert_eq!(c.read(), before, "a reader leaving changes nothing visible");
        // T2 (a writer) rolls back with T3 after it: T3's entries are marked, the payload
        // keeps T3's write until T3 rolls back too, and T3 inherits the committed value.
        c.unlink(w2, true);
        // SAFETY: the pool keeps the entries alive.
        assert!(unsafe { r3.as_ref() }.aborted() && unsafe { w3.as_ref() }.aborted());
        assert_eq!(c.read().0, 30);
        assert_eq!(c.committed(), 10);
        assert_eq!(version(c.read().1), 30);
        assert_eq!(c.unlink(r3, true), None);
        let restored = c.unlink(w3, true).expect("the last writer restores");
        assert!(c.rec.lock().no_entries());
        let (v, w) = c.read();
        assert_eq!(v, 10, "the committed value is back");
        assert_eq!((version(w), restored.of), (restored.version, 1), "named by its version");
        assert_eq!(w & (PENDING | LISTED), 0);
        // A committed writer only leaves the list: its value stays, under the same version.
        let w5 = writer(&mut p1, c1.begin(0, 0), &mut b2);
        c.write(w5, 50);
        let seen = c.read();
        c.unlink(w5, false);
        let (v, w) = c.read();
        assert_eq!(v, 50);
        assert!(same_version(w, seen.1) && w & (PENDING | LISTED) == 0);
    }

    /// Threads (more than cores) run one-piece transactions that each add 1 to one record,
    /// wait for the writer before them, and roll back when marked or at random (one in
    /// eight), as cascading aborts do: the value ends as the number of commits.
    #[test]
    fn concurrent_increments_with_cascading_rollbacks_keep_exactly_the_committed_ones() {
        use super::super::txn::{Contexts, WaitPolicy};
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
                    for i in 0..TXNS {
                        let t = ctx.begin(0, 0);
                        let e = writer(&mut pool, t, &mut before);
                        let mut deps = DepQueue::default();
                        {
                            let mut l = c.rec.lock();
                            l.append(Some(&c.row()), e, &mut deps);
                            l.set_version((seed + 2) << 32 | i);
                            let v = c.words[0].load(Ordering::Relaxed);
                            c.words[0].store(v + 1, Ordering::Relaxed);
                        }
                        for d in deps.iter() {
                            d.wait(WaitPolicy::Suspend, || d.over());
                        }
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        // SAFETY: the pool keeps the entry until `reset`.
                        let marked = unsafe { e.as_ref() }.aborted();
                        let roll_back = marked || rng % 8 == 0;
                        c.unlink(e, roll_back);
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

    /// The committed value skips the writers past their commit point, which are still linked
    /// while they leave the lists: T1's write is committed from T1's commit point on, before T1
    /// unlinks, and T2's pending write on top of it is not.
    #[test]
    fn committed_writers_count_from_their_commit_point() {
        let c = Cell::new(10);
        let (c1, c2) = (TxnCtx::default(), TxnCtx::default());
        let (t1, t2) = (c1.begin(0, 0), c2.begin(0, 0));
        let (mut p1, mut p2) = (EntryPool::default(), EntryPool::default());
        let (mut b1, mut b2) = (buffer(), buffer());
        let w1 = writer(&mut p1, t1, &mut b1);
        c.write(w1, 11);
        let w2 = writer(&mut p2, t2, &mut b2);
        c.write(w2, 12);
        assert_eq!(c.committed(), 10);
        assert_eq!(version(c.rec.lock().committed_word()), 1);
        c1.commit();
        assert!(t1.committed() && !t2.committed());
        assert_eq!(c.committed(), 11, "T1 committed, still linked");
        assert_eq!(version(c.rec.lock().committed_word()), 11);
        c.unlink(w1, false);
        c1.end();
        assert_eq!(c.committed(), 11);
        c2.commit();
        assert_eq!(c.committed(), 12, "no uncommitted writer: the payload");
        c.unlink(w2, false);
        assert_eq!(version(c.rec.lock().committed_word()), 12);
    }

    #[test]
    fn rolling_back_an_insert_makes_the_record_absent_again() {
        let c = Cell::new(0);
        c.rec.init(ABSENT | LOCK);
        assert!(c.rec.lock_unless_inserting().is_none(), "an insert in progress is not waited for");
        let ctx = TxnCtx::default();
        let mut pool = EntryPool::default();
        let mut b = buffer();
        let e = writer(&mut pool, ctx.begin(0, 0), &mut b);
        // SAFETY: the lock is the insert's, held since `init`.
        let mut l = unsafe { Locked::resume(&c.rec, c.rec.load()) };
        l.append(Some(&c.row()), e, &mut DepQueue::default());
        l.set(ABSENT, false);
        l.set_version(7);
        drop(l);
        let mut buf = [0u8; 8];
        let committed = c.rec.lock().read_committed(&c.row(), &mut buf);
        assert!(committed & ABSENT != 0 && version(committed) == 0, "not committed yet");
        let restored = c.unlink(e, true).expect("the absence is restored");
        let w = c.rec.load();
        assert_eq!(w & !VALUE, 0, "unlocked, no entries");
        assert_eq!(w & VALUE, ABSENT | restored.version << VERSION_SHIFT, "absent, fresh");
        assert_eq!(restored.of, 0, "the absence of a row never inserted");
    }

    /// A bucket's pseudo-record: a scan's reader entry, then an insert's writer entry (no
    /// image), which depends on the scan; the insert's rollback marks what follows and changes
    /// no value.
    #[test]
    fn bucket_entries_order_scans_and_inserts_without_images() {
        let b = Ic3Record::default();
        let (c1, c2, c3) = (TxnCtx::default(), TxnCtx::default(), TxnCtx::default());
        let (t1, t2, t3) = (c1.begin(0, 0), c2.begin(0, 0), c3.begin(0, 0));
        let (mut p1, mut p2, mut p3) =
            (EntryPool::default(), EntryPool::default(), EntryPool::default());
        let append = |e| {
            let mut deps = DepQueue::default();
            b.lock().append(None, e, &mut deps);
            deps.iter().copied().collect::<Vec<_>>()
        };
        let scan = p1.entry(t1, false, None);
        assert!(append(scan).is_empty());
        let insert = p2.entry(t2, true, None);
        assert_eq!(append(insert), vec![t1], "the insert follows the scan");
        assert_eq!(b.load() & (PENDING | LISTED), PENDING | LISTED);
        let later = p3.entry(t3, false, None);
        assert_eq!(append(later), vec![t2], "a later scan sees the insert");
        assert_eq!(b.lock().unlink(None, insert, true, || unreachable!()), None);
        // SAFETY: the pool keeps the entry alive.
        assert!(unsafe { later.as_ref() }.aborted(), "it saw a rolled-back insert");
        assert_eq!(b.load() & (PENDING | LISTED), LISTED);
        b.lock().unlink(None, scan, false, || unreachable!());
        b.lock().unlink(None, later, true, || unreachable!());
        assert_eq!(b.load(), 0);
    }
}
