//! BOHM's records and versions (§3.2.3, Figure 3).
//!
//! A record's slot holds one word: the newest version's address. Versions come from the
//! table's [`VersionStore`] (`storage::version`): the common header's `stamp` is the *begin
//! timestamp* (the writing transaction's position in the log), `next` the *prev pointer*,
//! `flags` the version's state, and BOHM's field ([`BohmExt`]) the *txn pointer*: the batch
//! slot of the transaction that produces the data. The payload is the *data*, uninitialised
//! until that transaction has run.
//!
//! **One writer per record.** Only the concurrency-control thread that owns a record (by a
//! hash of its table and key) pushes versions onto it, batch by batch, so the head needs no
//! CAS. Execution threads fill the data of versions that exist already and publish it with
//! [`PRODUCED`] (Release; readers Acquire).
//!
//! **No end timestamp.** The paper's end timestamp is the begin timestamp of the next newer
//! version. Readers walk newest first, so the first version with `begin < ts` is the one
//! visible at `ts`; storing the end would only be a second write into the older version,
//! which BOHM's CC thread would make to a line the execution threads read.

use crate::storage::row_store::RecordHeader;
use crate::storage::version::{Version, VersionExt, VersionStore};
use crate::storage::TableId;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// The data of the version has been written and may be read.
pub const PRODUCED: u64 = 1;
/// The version says the record is absent (a deletion, or an aborted insert).
pub const TOMBSTONE: u64 = 2;
/// The version's value is the previous version's (a declared write the transaction did not
/// make, or one of a transaction that rolled back, whose previous version was not produced
/// yet when it completed: readers go on to the previous version; the GC copies the value in
/// before it frees the previous version).
pub const PASS: u64 = 4;

/// The begin timestamp of loaded rows: below every transaction's.
pub const LOADED: u64 = 0;

/// The origin of "no version": absent since before every transaction (above every
/// timestamp, without the producer tag bit).
pub const NEVER: u64 = (1 << 63) - 1;

/// BOHM's version field. Until the version is produced: the batch slot whose transaction
/// produces it (its *txn pointer*, a tagged `Batch::producer` value). Once produced: its
/// *origin*, the begin timestamp of the version whose value it holds (its own for a write;
/// an older one's for a value passed on or copied; [`NEVER`] for an absence that no version
/// wrote), which names the value in recorded histories.
#[derive(Default)]
#[repr(C)]
pub struct BohmExt {
    /// The producing transaction, then the origin.
    pub producer: AtomicU64,
}

// SAFETY: one atomic word; zero is valid; no Drop; align 8.
unsafe impl VersionExt for BohmExt {}

/// A BOHM version.
pub type BohmVersion = Version<BohmExt>;

/// The slot of a BOHM record: the newest version, or null (no version: absent at every
/// timestamp).
#[repr(C, align(8))]
pub struct BohmRecord {
    head: AtomicPtr<BohmVersion>,
}

// SAFETY: one atomic pointer; null is "no version"; no Drop; align 8. The payload lives in
// the versions, not in the slot.
unsafe impl RecordHeader for BohmRecord {
    #[inline]
    fn slot_payload(_: usize) -> bool {
        false
    }
}

/// What a transaction at some timestamp sees of a record.
pub enum Seen<'a> {
    /// The visible version, produced: its data can be read.
    Data(&'a BohmVersion),
    /// Absent: no version below the timestamp (`origin` [`NEVER`]), or a produced tombstone
    /// (its origin).
    Absent {
        /// The origin of the absence.
        origin: u64,
    },
    /// The visible version is not produced yet; `producer` (a [`BohmExt::producer`] value)
    /// must run first.
    Pending {
        /// The version.
        version: &'a BohmVersion,
        /// Its producer.
        producer: u64,
    },
}

impl BohmRecord {
    /// The newest version (Acquire: pairs with the Release in [`BohmRecord::push`], so the
    /// version's fields are visible).
    #[inline]
    pub fn newest(&self) -> Option<&BohmVersion> {
        // SAFETY: a non-null head is a version of the table's store, freed only after every
        // reader that could have loaded it has left (the batch watermark and a storage-epoch
        // grace period, see `super`).
        unsafe { self.head.load(Ordering::Acquire).as_ref() }
    }

    /// Pushes `v` as the newest version, a placeholder of the transaction at `ts` in batch
    /// slot `producer`. Only the record's concurrency-control thread calls this (or the loader,
    /// before any transaction runs).
    #[inline]
    pub fn push(&self, v: NonNull<BohmVersion>, ts: u64, producer: u64) {
        // SAFETY: `v` is a fresh version of the table's store that nobody else can reach yet.
        let nv = unsafe { v.as_ref() };
        nv.stamp.store(ts, Ordering::Relaxed);
        nv.flags.store(0, Ordering::Relaxed);
        nv.ext.producer.store(producer, Ordering::Relaxed);
        nv.next.store(self.head.load(Ordering::Relaxed), Ordering::Relaxed);
        // Release: pairs with the Acquire in `newest`; the fields above are visible with it.
        self.head.store(v.as_ptr(), Ordering::Release);
    }

    /// A record with no version (a unit's, outside any table: see `super::units`).
    pub fn empty() -> Self {
        BohmRecord { head: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// Pushes `v` as the newest version, already produced with `flags` (0 or [`TOMBSTONE`]):
    /// a row of a table in unit mode, written by a unit writer at completion (see
    /// `super::units`: the writers of a unit push one at a time, in timestamp order, so the head
    /// needs no CAS). Its origin is `ts`.
    #[inline]
    pub fn push_produced(&self, v: NonNull<BohmVersion>, ts: u64, flags: u64) {
        // SAFETY: a fresh version nobody else can reach yet.
        let nv = unsafe { v.as_ref() };
        nv.stamp.store(ts, Ordering::Relaxed);
        nv.flags.store(PRODUCED | flags, Ordering::Relaxed);
        nv.ext.producer.store(ts, Ordering::Relaxed);
        // Relaxed: the previous pusher's head happened before (its unit version was produced
        // with Release and Acquired by this writer before it ran; versions placed before the
        // switch came with the batch's PLANNED stage).
        nv.next.store(self.head.load(Ordering::Relaxed), Ordering::Relaxed);
        // Release: pairs with the Acquire in `newest`; the data and fields above come with it.
        self.head.store(v.as_ptr(), Ordering::Release);
    }

    /// Empties a fresh slot (a reused one keeps its last head).
    #[inline]
    pub fn clear(&self) {
        self.head.store(std::ptr::null_mut(), Ordering::Relaxed);
    }

    /// Makes `v` the only, produced version (the loader).
    pub fn load(&self, v: NonNull<BohmVersion>) {
        self.push(v, LOADED, 0);
        // SAFETY: as in `push`.
        unsafe { v.as_ref() }.flags.store(PRODUCED, Ordering::Release);
    }

    /// What a transaction at `ts` sees: the newest version with a begin timestamp below `ts`
    /// (the transaction's own placeholders, at `ts`, and later ones are skipped).
    #[inline]
    pub fn seen(&self, ts: u64) -> Seen<'_> {
        let mut v = self.newest();
        while let Some(x) = v {
            // Relaxed: a version's stamp is set before its push publishes it (Release head store,
            // Acquired in `newest`) and never changes.
            if x.stamp.load(Ordering::Relaxed) < ts {
                return seen_from(x);
            }
            v = next_of(x);
        }
        Seen::Absent { origin: NEVER }
    }

    /// The version pushed at `ts` (a transaction's own placeholder), if any.
    #[inline]
    pub fn at(&self, ts: u64) -> Option<&BohmVersion> {
        let mut v = self.newest();
        while let Some(x) = v {
            // Relaxed: set before the push published the version, never changed (as in `seen`).
            let s = x.stamp.load(Ordering::Relaxed);
            if s == ts {
                return Some(x);
            }
            if s < ts {
                return None;
            }
            v = next_of(x);
        }
        None
    }

    /// The newest produced version's state, for reconnaissance reads (best effort).
    #[inline]
    pub fn latest_produced(&self) -> Option<&BohmVersion> {
        let mut v = self.newest();
        while let Some(x) = v {
            // Acquire: pairs with the Release in `produce`.
            let f = x.flags.load(Ordering::Acquire);
            if f & PRODUCED != 0 && f & PASS == 0 {
                return (f & TOMBSTONE == 0).then_some(x);
            }
            v = next_of(x);
        }
        None
    }
}

/// The value a reader sees at version `v`: its own, or, through [`PASS`] versions, an older
/// one's.
#[inline]
pub fn seen_from(v: &BohmVersion) -> Seen<'_> {
    let mut x = v;
    loop {
        // Acquire: pairs with the Release in `produce`; the data written before it is visible.
        let f = x.flags.load(Ordering::Acquire);
        if f & PRODUCED == 0 {
            let producer = x.ext.producer.load(Ordering::Relaxed);
            if producer & super::pipeline::PRODUCER_TAG == 0 {
                // Produced meanwhile (the origin replaced the producer): read the flags again.
                continue;
            }
            return Seen::Pending { version: x, producer };
        }
        if f & PASS != 0 {
            // A PASS version always has an older one, until the GC gives it that version's
            // value (its flags change first, Release) and cuts the chain below it (after, with
            // AcqRel): a reader that finds no older version reads the flags again.
            if let Some(n) = next_of(x) {
                x = n;
            }
            continue;
        }
        return if f & TOMBSTONE != 0 {
            Seen::Absent { origin: origin_of(x) }
        } else {
            Seen::Data(x)
        };
    }
}

/// Publishes `v` with state `flags` (0: its data, written before this call; [`TOMBSTONE`];
/// or [`PASS`]) and `origin` (see [`BohmExt`]; ignored for PASS).
#[inline]
pub fn produce(v: &BohmVersion, flags: u64, origin: u64) {
    debug_assert_eq!(origin & super::pipeline::PRODUCER_TAG, 0, "an origin is a timestamp");
    v.ext.producer.store(origin, Ordering::Relaxed);
    // Release: pairs with the Acquire in `seen_from`; the data and the origin before it.
    v.flags.store(PRODUCED | flags, Ordering::Release);
}

/// The origin of a produced version (see [`BohmExt`]); call it after an Acquire load of its
/// flags showed it produced.
#[inline]
pub fn origin_of(v: &BohmVersion) -> u64 {
    v.ext.producer.load(Ordering::Relaxed)
}

/// The next older version.
#[inline]
pub fn next_of(v: &BohmVersion) -> Option<&BohmVersion> {
    // SAFETY: as in `BohmRecord::newest`.
    unsafe { v.next.load(Ordering::Acquire).as_ref() }
}

/// A version's begin timestamp.
#[inline]
pub fn begin_of(v: &BohmVersion) -> u64 {
    v.stamp.load(Ordering::Relaxed)
}

/// Cuts the chain after `v`: the versions older than `v` are returned for freeing (the GC,
/// once no reader can reach them: see `super`).
#[inline]
pub fn cut_after(v: &BohmVersion) -> Option<NonNull<BohmVersion>> {
    NonNull::new(v.next.swap(std::ptr::null_mut(), Ordering::AcqRel))
}

/// Gives a produced version that passes its value on ([`PASS`]) that value, copied from the
/// version below it, before the versions below are cut off. Only the thread that cuts the
/// record's chain does this (its CC thread, or in unit mode its writer), after every
/// transaction that could read below `v` has finished.
pub fn settle(stores: &[VersionStore<BohmExt>], t: TableId, v: &BohmVersion, buf: &mut Vec<u8>) {
    // Acquire: pairs with the Release in `produce`.
    if v.flags.load(Ordering::Acquire) & PASS == 0 {
        return;
    }
    match next_of(v).map(seen_from) {
        Some(Seen::Data(prev)) => {
            let store = &stores[t.index()];
            buf.resize(store.row(prev).len(), 0);
            store.row(prev).read_into(buf);
            store.row(v).write_from(buf);
            produce(v, 0, origin_of(prev));
        }
        Some(Seen::Absent { origin }) => produce(v, TOMBSTONE, origin),
        None => produce(v, TOMBSTONE, NEVER),
        Some(Seen::Pending { .. }) => unreachable!("every version below the watermark is produced"),
    }
}

const _: () = assert!(std::mem::size_of::<BohmExt>() == 8);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::version::VersionStore;

    fn version(store: &VersionStore<BohmExt>) -> NonNull<BohmVersion> {
        store.alloc_shared()
    }

    #[test]
    fn readers_see_the_newest_version_below_their_timestamp() {
        let store = VersionStore::<BohmExt>::new(8);
        let rec = BohmRecord { head: AtomicPtr::new(std::ptr::null_mut()) };
        let tag = crate::protocols::bohm::pipeline::PRODUCER_TAG;
        assert!(matches!(rec.seen(5), Seen::Absent { origin: NEVER }), "no version: absent");
        rec.load(version(&store));
        let (p1, p2, p3) = (tag | 1, tag | 2, tag | 3);
        for (ts, slot) in [(10, p1), (20, p2)] {
            rec.push(version(&store), ts, slot);
        }
        assert!(matches!(rec.seen(1), Seen::Data(v) if begin_of(v) == LOADED));
        assert!(
            matches!(rec.seen(10), Seen::Data(v) if begin_of(v) == LOADED),
            "a transaction does not see its own placeholder"
        );
        assert!(matches!(rec.seen(15), Seen::Pending { producer, .. } if producer == p1));
        assert!(matches!(rec.seen(u64::MAX), Seen::Pending { producer, .. } if producer == p2));
        let v10 = rec.at(10).expect("the placeholder at 10");
        assert_eq!(begin_of(v10), 10);
        assert!(rec.at(12).is_none());
        produce(v10, 0, 10);
        assert!(matches!(rec.seen(15), Seen::Data(v) if begin_of(v) == 10));
        assert!(matches!(rec.latest_produced(), Some(v) if begin_of(v) == 10));
        produce(rec.at(20).unwrap(), TOMBSTONE, 20);
        assert!(matches!(rec.seen(21), Seen::Absent { origin: 20 }), "a tombstone");
        assert!(rec.latest_produced().is_none());
        // A PASS version shows the one below it.
        rec.push(version(&store), 30, p3);
        produce(rec.at(30).unwrap(), PASS, 0);
        assert!(matches!(rec.seen(31), Seen::Absent { origin: 20 }), "passes to the tombstone");
        // Cutting after 10 leaves the loaded version unreachable.
        let cut = cut_after(rec.at(10).unwrap()).expect("the loaded version");
        // SAFETY: the cut version is still allocated (the store frees nothing here).
        assert_eq!(begin_of(unsafe { cut.as_ref() }), LOADED);
        assert!(matches!(rec.seen(5), Seen::Absent { origin: NEVER }), "nothing below 10 now");
    }
}
