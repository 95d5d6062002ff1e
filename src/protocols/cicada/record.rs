//! Cicada's record: a head with the newest version's address, the GC lock, `record.min_wts`
//! and an inlined version (§3.2-3.3, §3.8), and the version fields.
//!
//! ```text
//!  slot: | head | gc | min_wts | inline: [wts][next][status][rts] | payload (rows up to 216 B) |
//! ```
//!
//! The inlined version is laid out exactly as a pooled one (`storage::version`: the struct, then
//! the payload words), with the slot's payload as its payload, so one [`RowRef`] maker serves
//! both and a chain mixes them freely. Rows longer than [`INLINE_MAX`] bytes get no payload in the
//! slot; their inlined version is never used.

use crate::storage::row_store::RecordHeader;
use crate::storage::version::{Version, VersionExt};
use crate::storage::RowRef;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most payload bytes inlined in the head (the paper's 216: four cache lines per head).
pub const INLINE_MAX: usize = 216;

/// A version's status (its `flags` word's low bits; `INLINE` above them).
pub const UNUSED: u64 = 0;
/// Installed, its writer validating.
pub const PENDING: u64 = 1;
/// Committed.
pub const COMMITTED: u64 = 2;
/// Its writer aborted.
pub const ABORTED: u64 = 3;
/// A committed deletion.
pub const DELETED: u64 = 4;
const STATUS: u64 = 7;
/// Set on the inlined version of a head, whichever its status.
pub const INLINE: u64 = 8;

/// The write timestamp of loaded and recovered rows: below every transaction's.
pub const LOADED: u64 = 0;

/// The stamp of an inlined version being overwritten in place (Cicada-SV's write phase): above
/// every timestamp, and never a version's own.
pub const WRITING: u64 = u64::MAX;

const UNLINKED: u64 = 1;
/// A head with no version whose inserter aborted before installing one (a head with no version
/// and no bit is an insert in flight).
const ABANDONED: u64 = 2;
const PTR: u64 = !7;
const GC_LOCK: u64 = 1;

/// Cicada's field of a version: its read timestamp (§3.2). The write timestamp is the
/// version's stamp and the status its flags.
#[repr(C)]
#[derive(Default)]
pub struct CicadaExt {
    /// The largest timestamp of a (possibly) committed transaction that read the version.
    pub rts: AtomicU64,
}

// SAFETY: one atomic (zero: never read), no Drop, align 8.
unsafe impl VersionExt for CicadaExt {
    #[inline(always)]
    fn reset(&self) {
        self.rts.store(0, Ordering::Relaxed);
    }
}

/// One version of a Cicada record.
pub type CVersion = Version<CicadaExt>;

/// The status of `v`. Acquire: pairs with the writer's Release store of the status, after
/// which the payload (written before installation) and its log record are complete.
#[inline(always)]
pub fn status(v: &CVersion) -> u64 {
    v.flags.load(Ordering::Acquire) & STATUS
}

/// The write timestamp of `v` (immutable once installed: the Acquire load of the link that led
/// here made it visible).
#[inline(always)]
pub fn wts(v: &CVersion) -> u64 {
    v.stamp.load(Ordering::Relaxed)
}

/// The version after `v` (older), if any. Acquire: pairs with the Release CAS that installed
/// it, or with the store of a pending version's `next` before its own installation.
#[inline(always)]
pub fn next(v: &CVersion) -> Option<&CVersion> {
    // SAFETY: chain members live until a quiescence grace period after they are
    // cut off, and every walker is inside a transaction (or reconnaissance) that marks it.
    unsafe { v.next.load(Ordering::Acquire).as_ref() }
}

/// The row of version `v` of a table with rows of `row_size` bytes.
///
/// # Safety
///
/// `v` must be a version of that table: a pooled one (the store cuts it with its payload words
/// after the struct) or an inlined one of a head whose slot holds a payload (the slot's payload
/// follows the struct, see the module docs). Either lives as long as the reference.
#[inline(always)]
pub unsafe fn row_of(v: &CVersion, row_size: usize) -> RowRef<'_, CVersion> {
    // SAFETY: the caller's promise: `row_size.div_ceil(8)` atomic words follow the struct.
    let words = unsafe {
        let base = (v as *const CVersion).add(1).cast::<AtomicU64>();
        std::slice::from_raw_parts(base, row_size.div_ceil(8))
    };
    RowRef::from_parts(v, words, row_size)
}

/// The head of a Cicada record (see the module docs).
#[repr(C)]
pub struct CicadaRecord {
    /// The newest version's address, and [`UNLINKED`] once the GC removed the record from its
    /// index.
    head: AtomicU64,
    /// The GC lock (§3.8), `GC_LOCK` when held. With `single-version=on` (Cicada-SV) it is
    /// also the record's write lock, holding its holder's timestamp: the GC, the reclaimer
    /// and writers exclude each other.
    gc: AtomicU64,
    /// `record.min_wts`: versions at or below it may have been cut off (§3.8). Kept when the
    /// slot is reused, so that a stale GC item of the old record never passes the check.
    min_wts: AtomicU64,
    /// The inlined version.
    inline: CVersion,
}

// SAFETY: atomics only; zero is "no version, unlocked, inlined version UNUSED"; no Drop;
// align 8.
unsafe impl RecordHeader for CicadaRecord {
    #[inline]
    fn slot_payload(row_size: usize) -> bool {
        row_size <= INLINE_MAX
    }
}

const _LAYOUT: () = {
    // The inlined version's payload is the slot's: it must end the header exactly.
    assert!(std::mem::size_of::<CicadaRecord>() % 8 == 0);
    assert!(
        std::mem::offset_of!(CicadaRecord, inline) + std::mem::size_of::<CVersion>()
            == std::mem::size_of::<CicadaRecord>()
    );
};

/// Where a version is linked from: the head or an older version's `next`.
#[derive(Clone, Copy)]
pub enum Link<'a> {
    /// The record's head.
    Head(&'a CicadaRecord),
    /// The `next` field of a version.
    Next(&'a CVersion),
}

impl<'a> Link<'a> {
    /// Replaces `old` by `new` (whose `next` is `old` already). SeqCst: the installation is
    /// one side of the store-then-load pairs of validation (see the worker's docs); Release
    /// publishes the new version's fields.
    #[inline(always)]
    pub fn swap_in(self, old: Option<&CVersion>, new: NonNull<CVersion>) -> bool {
        let old = old.map_or(std::ptr::null_mut(), |v| v as *const CVersion as *mut CVersion);
        match self {
            Link::Head(r) => r.replace_head(old as u64, new.as_ptr() as u64),
            Link::Next(v) => v
                .next
                .compare_exchange(old, new.as_ptr(), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok(),
        }
    }
}

/// The record was unlinked by the GC: its key may live in another row now.
#[derive(Clone, Copy, Debug)]
pub struct Unlinked;

impl CicadaRecord {
    /// Replaces the head's version `old` (an address, 0 for none) by `new` (an address, or
    /// `UNLINKED`), whatever flag besides `UNLINKED` the word carries; fails if the version
    /// changed or the record was unlinked. SeqCst: see [`Link::swap_in`].
    #[inline]
    fn replace_head(&self, old: u64, new: u64) -> bool {
        let mut w = self.head.load(Ordering::SeqCst);
        loop {
            if w & UNLINKED != 0 || w & PTR != old {
                return false;
            }
            match self.head.compare_exchange(w, new, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(now) => w = now,
            }
        }
    }

    /// Whether the record has no version and its inserter is still running: a new key's
    /// record between its insert into the index and its validation.
    #[inline]
    pub fn in_flight(&self) -> bool {
        self.head.load(Ordering::Acquire) == 0
    }

    /// Marks a record this transaction created, and never installed a version in, as
    /// abandoned: no longer an insert in flight (see [`CicadaRecord::in_flight`]).
    #[inline]
    pub fn abandon(&self) {
        // Release: a later inserter that sees the mark sees the record as it was left.
        let _ = self.head.compare_exchange(0, ABANDONED, Ordering::Release, Ordering::Relaxed);
    }

    /// The newest version, or `Err` if the record was unlinked. Acquire: pairs with the CAS
    /// that installed it.
    #[inline(always)]
    pub fn newest(&self) -> Result<Option<&CVersion>, Unlinked> {
        let w = self.head.load(Ordering::Acquire);
        if w & UNLINKED != 0 {
            return Err(Unlinked);
        }
        // SAFETY: a version of this record's table (see `next`).
        Ok(unsafe { ((w & PTR) as *const CVersion).as_ref() })
    }

    /// Whether the GC unlinked the record.
    #[inline(always)]
    pub fn is_unlinked(&self) -> bool {
        self.head.load(Ordering::Acquire) & UNLINKED != 0
    }

    /// The inlined version.
    #[inline(always)]
    pub fn inline(&self) -> &CVersion {
        &self.inline
    }

    /// Claims the inlined version for a new version (UNUSED -> PENDING, §3.3). Its fields are
    /// the claimer's until it installs it.
    #[inline]
    pub fn claim_inline(&self) -> Option<NonNull<CVersion>> {
        // Acquire: after the free (Release) that made it UNUSED, nothing reads its old contents.
        self.inline
            .flags
            .compare_exchange(UNUSED, PENDING | INLINE, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| NonNull::from(&self.inline))
    }

    /// Makes `v` the only version of a fresh or reused slot before anyone can reach it (the
    /// loader; a new row before its index entry is published).
    #[inline]
    pub fn init(&self, v: Option<NonNull<CVersion>>) {
        self.gc.store(0, Ordering::Relaxed);
        let w = v.map_or(0, |v| v.as_ptr() as u64);
        // Release: the version's fields before the address.
        self.head.store(w, Ordering::Release);
    }

    /// Takes the GC lock, if free.
    #[inline]
    pub fn try_lock_gc(&self) -> bool {
        // Acquire: pairs with `unlock_gc`, so the previous holder's cut and `min_wts` are seen.
        // (With the cut, `min_wts` and the unlock: one line, written per collected version.)
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Gc);
        self.gc.compare_exchange(0, GC_LOCK, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Takes the record's write lock for a transaction at `ts` (Cicada-SV), or returns the
    /// holder's timestamp (`GC_LOCK` for the GC). SeqCst: one side of the store-then-load
    /// pairs with readers, which raise the `rts` then load the lock (see `lock_holder`).
    #[inline]
    pub fn try_lock_write(&self, ts: u64) -> Result<(), u64> {
        debug_assert!(ts > GC_LOCK);
        self.gc.compare_exchange(0, ts, Ordering::SeqCst, Ordering::SeqCst).map(|_| ())
    }

    /// The write lock's holder: a timestamp, `GC_LOCK`, or 0 when free. SeqCst: pairs with
    /// [`CicadaRecord::try_lock_write`] (a reader raises the `rts` then loads this; a writer
    /// takes the lock then loads the `rts`: one sees the other).
    #[inline(always)]
    pub fn lock_holder(&self) -> u64 {
        self.gc.load(Ordering::SeqCst)
    }

    /// Whether the lock is held by a transaction with a timestamp below `ts` (or by the GC):
    /// one that may overwrite the version below `ts` (see [`CicadaRecord::lock_holder`]).
    #[inline(always)]
    pub fn locked_below(&self, ts: u64) -> bool {
        let holder = self.lock_holder();
        holder != 0 && holder < ts
    }

    /// Releases the GC lock (or, with Cicada-SV, the write lock).
    #[inline]
    pub fn unlock_gc(&self) {
        self.gc.store(0, Ordering::Release);
    }

    /// `record.min_wts` (read and written under the GC lock).
    #[inline]
    pub fn min_wts(&self) -> u64 {
        self.min_wts.load(Ordering::Relaxed)
    }

    /// Raises `record.min_wts` (under the GC lock, which every writer of it holds: a plain
    /// load and store, no read-modify-write).
    #[inline]
    pub fn raise_min_wts(&self, wts: u64) {
        if wts > self.min_wts.load(Ordering::Relaxed) {
            self.min_wts.store(wts, Ordering::Relaxed);
        }
    }

    /// Marks the record unlinked if its head is still `head`; the chain is then the caller's.
    /// AcqRel: a writer that installed at the head meanwhile makes it fail.
    #[inline]
    pub fn unlink(&self, head: Option<&CVersion>) -> bool {
        self.replace_head(head.map_or(0, |v| v as *const CVersion as u64), UNLINKED)
    }

    /// Empties the head when the database drops (teardown): the chain, returned, is the
    /// caller's.
    pub fn take_chain(&self) -> Option<NonNull<CVersion>> {
        let w = self.head.swap(UNLINKED, Ordering::Relaxed);
        NonNull::new((w & PTR) as *mut CVersion)
    }
}

/// Sets a version up as a new one of a transaction at `wts`: pending, not read, no older one.
#[inline]
pub fn init_version(v: &CVersion, wts: u64, inline: bool) {
    v.stamp.store(wts, Ordering::Relaxed);
    v.flags.store(PENDING | if inline { INLINE } else { 0 }, Ordering::Relaxed);
    v.next.store(std::ptr::null_mut(), Ordering::Relaxed);
    v.ext.rts.store(wts, Ordering::Relaxed);
}

/// Ends a version's writer's part: `s` (COMMITTED, DELETED or ABORTED), keeping the inline
/// bit. Release: the payload and, for a commit, the log record before the status (pairs with
/// [`status`]).
#[inline]
pub fn set_status(v: &CVersion, s: u64) {
    let inline = v.flags.load(Ordering::Relaxed) & INLINE;
    v.flags.store(s | inline, Ordering::Release);
}

/// The stamp of `v` read for a stable copy (Cicada-SV overwrites versions in place): Acquire,
/// pairs with [`overwrite`]'s final Release store, so the payload copied after it is at least
/// that new; the copy is good if [`still`] then finds the same stamp.
#[inline(always)]
pub fn stable_wts(v: &CVersion) -> u64 {
    v.stamp.load(Ordering::Acquire)
}

/// Whether `v`'s stamp is still `stamp` after a copy of its payload (see [`stable_wts`]): a
/// seqlock's second read. The Acquire fence orders the copy's loads before it: a copy that saw
/// any store of an overwrite sees the overwrite's `WRITING` here (or its new stamp).
#[inline(always)]
pub fn still(v: &CVersion, stamp: u64) -> bool {
    std::sync::atomic::fence(Ordering::Acquire);
    v.stamp.load(Ordering::Relaxed) == stamp
}

/// Overwrites the inlined version `v` in place at `wts` with status `s` (COMMITTED or
/// DELETED), its payload written by `write` (Cicada-SV's write phase, under the record's write
/// lock). A seqlock: the stamp is `WRITING` while the payload changes, so a reader's copy that
/// overlaps is caught by [`still`].
#[inline]
pub fn overwrite(v: &CVersion, wts: u64, s: u64, write: impl FnOnce()) {
    v.stamp.store(WRITING, Ordering::Relaxed);
    // Release: the `WRITING` store before the payload's stores (pairs with `still`'s fence).
    std::sync::atomic::fence(Ordering::Release);
    write();
    v.ext.rts.store(wts, Ordering::Relaxed);
    v.flags.store(s | INLINE, Ordering::Relaxed);
    // Release: the payload, status and `rts` before the stamp (pairs with `stable_wts`).
    v.stamp.store(wts, Ordering::Release);
}

/// Whether `v` is a record's inlined version.
#[inline(always)]
pub fn is_inline(v: &CVersion) -> bool {
    v.flags.load(Ordering::Relaxed) & INLINE != 0
}
