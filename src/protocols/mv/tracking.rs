//! Reader tracking for the certifiers that keep per-version readers (`ermia-ssn`,
//! `ermia-ssi`): ERMIA's reader bitmaps (§3.6), the wait for a committed overwriter, and a
//! transaction's tracked reads and overwrites with their post-commit and abort steps.
//!
//! A tracking certifier's version carries three fields ([`TrackedExt`]): the *overwriter
//! word* (0 while the version is not overwritten, the overwriter's pending stamp while it runs,
//! then what the overwriter publishes at its commit), the *reader stamp* (the largest commit
//! timestamp of a committed reader) and the reader bitmap. A reader sets its bit and keeps the
//! version in its read set; at its commit it raises the reader stamp and only then clears its
//! bit, so an overwriter that scans the bits before it loads the reader stamp misses no reader
//! that committed before it.

use crate::protocols::mv::{is_pending, Owner, TxnTable, MAX_WORKERS};
use crate::storage::row_store::prefetch_line;
use crate::storage::version::{Version, VersionExt};
use crate::util::SpinWait;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// Words of a version's reader bitmap ([`Readers`]).
pub const READER_WORDS: usize = 4;
/// The most workers a protocol with reader bitmaps takes (one bit each).
pub const MAX_READERS: usize = READER_WORDS * 64;

/// The most workers a tracking certifier takes, and why ([`crate::protocols::mv::worker`]'s
/// `Certifier::MAX_WORKERS`): a reader bit each, and a slot a pending stamp can name.
pub const TRACKED_WORKERS: (usize, &str) = (
    if MAX_READERS < MAX_WORKERS { MAX_READERS } else { MAX_WORKERS },
    "a version's reader bitmap has a bit per worker",
);

/// A version's reader bitmap (ERMIA's reader tracking, §3.6): a bit per worker slot, set while
/// that worker's running transaction has read the version and not finished.
#[derive(Default)]
pub struct Readers([AtomicU64; READER_WORDS]);

/// A worker's bit in every [`Readers`].
#[derive(Clone, Copy)]
pub struct ReaderBit {
    word: usize,
    mask: u64,
}

impl ReaderBit {
    /// The bit of worker slot `slot` (below [`MAX_READERS`]).
    pub fn new(slot: usize) -> Self {
        assert!(slot < MAX_READERS, "worker slot {slot} has no reader bit");
        ReaderBit { word: slot / 64, mask: 1 << (slot % 64) }
    }
}

impl Readers {
    /// Clears every bit (a version set up anew).
    #[inline(always)]
    pub fn reset(&self) {
        for w in &self.0 {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// Sets `b`; false if it was set already (the transaction has read the version before).
    #[inline]
    pub fn mark(&self, b: ReaderBit) -> bool {
        let w = &self.0[b.word];
        if w.load(Ordering::Relaxed) & b.mask != 0 {
            return false;
        }
        // SeqCst: before the reader draws its commit timestamp, so that an overwriter that
        // draws a later one finds the bit.
        w.fetch_or(b.mask, Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
        true
    }

    /// Clears `b` (SeqCst: after what the reader published about its commit).
    #[inline]
    pub fn clear(&self, b: ReaderBit) {
        self.0[b.word].fetch_and(!b.mask, Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
    }

    /// The slots of the readers other than `own`, as the bitmap is now.
    pub fn others(&self, own: ReaderBit) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(move |(i, w)| {
            let mut bits = w.load(Ordering::SeqCst);
            if i == own.word {
                bits &= !own.mask;
            }
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    i * 64 + b
                })
            })
        })
    }
}

/// At pre-commit with commit timestamp `c`: what a version's overwriter word says once the
/// overwriter committed before us. The word is 0 while the version is not overwritten, the
/// overwriter's pending stamp while it runs, and the value it publishes (`Some`) once it
/// committed. An overwriter that is running, or certifying with a larger timestamp, commits
/// after us and accounts for the edge itself (`None`); one certifying with a smaller timestamp
/// is waited for (it waits only for smaller timestamps than its own, so the wait ends).
pub fn committed_overwriter(txns: &TxnTable, word: &AtomicU64, own: u64, c: u64) -> Option<u64> {
    let mut spin = SpinWait::default();
    loop {
        // SeqCst: pairs with the overwriter's stores of the word.
        let w = word.load(Ordering::SeqCst);
        if w == 0 || w == own {
            return None;
        }
        if !is_pending(w) {
            return Some(w);
        }
        match txns.owner(w) {
            Owner::Active => return None,
            Owner::Committing(cu) if cu > c => return None,
            Owner::Committing(_) | Owner::Done => spin.spin(),
        }
    }
}

/// A version field that names its overwriter (see the module docs): Hekaton's End field, and
/// part of every tracking certifier's version.
pub trait OverwrittenExt: VersionExt {
    /// The overwriter word.
    fn overwriter(&self) -> &AtomicU64;
}

/// The version fields of a tracking certifier (see the module docs).
pub trait TrackedExt: OverwrittenExt {
    /// The largest commit timestamp of a committed reader (0: none).
    fn reader_stamp(&self) -> &AtomicU64;
    /// The workers whose running transaction read the version.
    fn readers(&self) -> &Readers;
}

/// The committed versions a transaction overwrote: their overwriter word holds its pending
/// stamp until it publishes its commit (or withdraws the mark at its abort).
pub struct Overwrites<E> {
    list: Vec<NonNull<Version<E>>>,
}

// SAFETY: the pointers name versions of the database the worker belongs to, used only on the
// worker's thread under the epoch rules of `protocols::mv`.
unsafe impl<E> Send for Overwrites<E> {}

impl<E> Default for Overwrites<E> {
    fn default() -> Self {
        Overwrites { list: Vec::new() }
    }
}

#[inline(always)]
fn version<'a, E>(p: NonNull<Version<E>>) -> &'a Version<E> {
    // SAFETY: a version the running transaction read or overwrote; versions are freed only
    // after the epochs of every transaction that could reach them ended, and its has not.
    unsafe { p.as_ref() }
}

impl<E: OverwrittenExt> Overwrites<E> {
    /// Marks `v` as overwritten by the transaction with pending stamp `own`.
    #[inline]
    pub fn overwrote(&mut self, v: &Version<E>, own: u64) {
        // SeqCst: pairs with the readers' loads of the overwriter word.
        v.ext.overwriter().store(own, Ordering::SeqCst);
        self.list.push(NonNull::from(v));
    }

    /// The versions overwritten.
    pub fn iter(&self) -> impl Iterator<Item = &Version<E>> + '_ {
        self.list.iter().map(|&p| version(p))
    }

    /// Post-commit: every version overwritten gets what `publish` stores in its overwriter
    /// word. Forgets them.
    pub fn committed(&mut self, publish: impl Fn(&Version<E>)) {
        for v in self.iter() {
            publish(v);
        }
        self.list.clear();
    }

    /// The transaction with pending stamp `own` aborts: withdraws its marks (each version
    /// overwritten is the newest committed one again, and only this transaction could have
    /// marked it). Forgets them.
    pub fn aborted(&mut self, own: u64) {
        for v in self.iter() {
            let _ =
                v.ext.overwriter().compare_exchange(own, 0, Ordering::SeqCst, Ordering::Relaxed);
        }
        self.list.clear();
    }
}

/// A transaction's tracked versions: those it read while they had no committed overwriter (its
/// bit is set in them), those it read without marking them (a certifier's read optimisation:
/// no bit, nothing published at commit, but still checked for an overwriter at pre-commit) and
/// the committed versions it overwrote (their overwriter word holds its pending stamp).
pub struct Tracking<E> {
    bit: ReaderBit,
    reads: Vec<NonNull<Version<E>>>,
    unmarked: Vec<NonNull<Version<E>>>,
    overwrites: Overwrites<E>,
}

// SAFETY: as for `Overwrites`.
unsafe impl<E> Send for Tracking<E> {}

impl<E: TrackedExt> Tracking<E> {
    /// The tracking state of the worker in slot `slot` (below [`MAX_READERS`]).
    pub fn new(slot: usize) -> Self {
        Tracking {
            bit: ReaderBit::new(slot),
            reads: Vec::new(),
            unmarked: Vec::new(),
            overwrites: Overwrites::default(),
        }
    }

    /// Keeps a read of `v` without marking it (see [`Tracking`]): the certifier has published
    /// the read some other way.
    #[inline]
    pub fn read_unmarked(&mut self, v: &Version<E>) {
        self.unmarked.push(NonNull::from(v));
    }

    /// Whether a read was kept unmarked.
    #[inline(always)]
    pub fn has_unmarked(&self) -> bool {
        !self.unmarked.is_empty()
    }

    /// Every read kept: the marked ones, then the unmarked ones. Each version's overwriter word
    /// is prefetched a few reads ahead: a read-mostly transaction's pre-commit walks thousands
    /// of versions that have left the cache since they were read.
    pub fn all_reads(&self) -> impl Iterator<Item = &Version<E>> + '_ {
        const AHEAD: usize = 8;
        let (reads, unmarked) = (&self.reads, &self.unmarked);
        let at = move |i: usize| reads.get(i).or_else(|| unmarked.get(i - reads.len()));
        (0..reads.len() + unmarked.len()).map(move |i| {
            if let Some(&ahead) = at(i + AHEAD) {
                prefetch_line::<false>(version(ahead).ext.overwriter().as_ptr().cast());
            }
            version(*at(i).expect("in range"))
        })
    }

    /// Tracks a read of `v`, which had no committed overwriter: sets the reader bit (a bit
    /// already set is this transaction's: the version is tracked already).
    #[inline]
    pub fn read(&mut self, v: &Version<E>) {
        if v.ext.readers().mark(self.bit) {
            self.reads.push(NonNull::from(v));
        }
    }

    /// Tracks an overwrite of `v` by the transaction with pending stamp `own`.
    #[inline]
    pub fn overwrote(&mut self, v: &Version<E>, own: u64) {
        self.overwrites.overwrote(v, own);
    }

    /// Whether a read is tracked (the transaction must certify with a commit timestamp).
    #[inline(always)]
    pub fn has_reads(&self) -> bool {
        !self.reads.is_empty()
    }

    /// The tracked reads.
    pub fn reads(&self) -> impl Iterator<Item = &Version<E>> + '_ {
        self.reads.iter().map(|&p| version(p))
    }

    /// The tracked overwrites.
    pub fn overwrites(&self) -> impl Iterator<Item = &Version<E>> + '_ {
        self.overwrites.iter()
    }

    /// The worker slots of `v`'s other readers, as its bitmap is now.
    pub fn other_readers<'v>(&self, v: &'v Version<E>) -> impl Iterator<Item = usize> + 'v {
        v.ext.readers().others(self.bit)
    }

    /// Post-commit at `c`: every version read gets `c` in its reader stamp, then loses the
    /// bit; every version overwritten gets what `publish` stores in its overwriter word.
    /// Forgets the transaction.
    pub fn committed(&mut self, c: u64, publish: impl Fn(&Version<E>)) {
        for v in self.reads() {
            let stamp = v.ext.reader_stamp();
            if stamp.load(Ordering::Relaxed) < c {
                // SeqCst: before the bit is cleared (see the module docs).
                stamp.fetch_max(c, Ordering::SeqCst);
                crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
            }
            v.ext.readers().clear(self.bit);
        }
        self.reads.clear();
        self.unmarked.clear();
        self.overwrites.committed(publish);
    }

    /// The transaction with pending stamp `own` aborts: clears its bits and its marks as
    /// overwriter. Forgets the transaction.
    pub fn aborted(&mut self, own: u64) {
        for v in self.reads() {
            v.ext.readers().clear(self.bit);
        }
        self.reads.clear();
        self.unmarked.clear();
        self.overwrites.aborted(own);
    }
}
