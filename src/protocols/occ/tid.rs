//! Silo's TID word and Silo's commit (§4.4, Figure 2), shared by the protocols whose records
//! start with a TID word: Silo, and MOCC, which takes its locks and then commits as Silo does.
//!
//! The TID word:
//!
//! ```text
//!  63                      36 35                         4   3   2   1   0
//! +--------------------------+----------------------------+---+---+---+---+
//! |  epoch (28 bits)         |  sequence (32 bits)        | U | A | L | K |
//! +--------------------------+----------------------------+---+---+---+---+
//!   K = lock, L = latest, A = absent (deleted / not yet inserted), U = unlinked by the GC
//! ```
//!
//! TIDs compare as integers on the epoch/sequence bits, so the epoch dominates.

use crate::error::{Abort, AbortReason};
use crate::history::{epoch_ts, now_ns, Stamp, INITIAL, UNBORN};
use crate::protocols::occ::{self, OccProtocol, OccRecord, OccWorker, ValidationLock};
use crate::protocols::occ::{ABSENT, LATEST, LOCK};
use crate::storage::inject::CommitPhase;
use crate::storage::RowId;
use std::fmt;
use std::sync::atomic::{fence, Ordering};

/// A decoded TID word.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tid(pub u64);

impl Tid {
    /// Lock bit (the status bits are those of every optimistic record word, `occ`).
    pub const LOCK: u64 = occ::LOCK;
    /// Latest-version bit.
    pub const LATEST: u64 = occ::LATEST;
    /// Absent bit.
    pub const ABSENT: u64 = occ::ABSENT;
    /// Unlinked bit.
    pub const UNLINKED: u64 = occ::UNLINKED;
    /// The four status bits.
    pub const STATUS: u64 = occ::STATUS;
    const SEQ_SHIFT: u32 = 4;
    const SEQ_BITS: u32 = 32;
    const EPOCH_SHIFT: u32 = Self::SEQ_SHIFT + Self::SEQ_BITS;
    /// One step of the sequence number.
    pub const SEQ_ONE: u64 = 1 << Self::SEQ_SHIFT;
    const _PARTITION: () = assert!(
        Self::STATUS & (((1u64 << Self::SEQ_BITS) - 1) << Self::SEQ_SHIFT) == 0
            && Self::EPOCH_SHIFT + 28 == 64
    );

    /// The TID `(epoch, seq)` with no status bits.
    #[must_use]
    pub const fn new(epoch: u64, seq: u64) -> Tid {
        Tid((epoch << Self::EPOCH_SHIFT) | ((seq & 0xFFFF_FFFF) << Self::SEQ_SHIFT))
    }
    /// The epoch.
    pub const fn epoch(self) -> u64 {
        self.0 >> Self::EPOCH_SHIFT
    }
    /// The sequence number.
    pub const fn seq(self) -> u64 {
        (self.0 >> Self::SEQ_SHIFT) & 0xFFFF_FFFF
    }
    /// The word with `bits` set.
    #[must_use]
    pub const fn with(self, bits: u64) -> Tid {
        Tid(self.0 | bits)
    }
    /// The word without `bits`.
    #[must_use]
    pub const fn without(self, bits: u64) -> Tid {
        Tid(self.0 & !bits)
    }
    /// The epoch/sequence part only.
    #[must_use]
    pub const fn version(self) -> Tid {
        self.without(Self::STATUS)
    }
    /// Locked?
    pub const fn is_locked(self) -> bool {
        self.0 & Self::LOCK != 0
    }
    /// Absent (deleted, uncommitted insert, or unlinked)?
    pub const fn is_absent(self) -> bool {
        self.0 & (Self::ABSENT | Self::UNLINKED) != 0
    }
    /// Unlinked by the GC?
    pub const fn is_unlinked(self) -> bool {
        self.0 & Self::UNLINKED != 0
    }
    /// The TID of loaded records: epoch 0, below every commit TID (the global epoch starts at 1
    /// and a commit TID is at least `(current epoch, 0)`).
    pub const LOADED: Tid = Tid::new(0, 1);
    /// The version this TID names on row `rid` in a recorded history: the row id and the
    /// epoch and sequence bits, with the loader's TID as [`INITIAL`] and a never-committed row
    /// (TID 0) as [`UNBORN`]. The row id is part of it because TIDs are unique per row only: two
    /// incarnations of a key (deleted, unlinked, inserted again) may commit equal TIDs.
    pub const fn stamp(self, rid: RowId) -> Stamp {
        let v = self.0 & !Self::STATUS;
        if v == 0 {
            UNBORN
        } else if v == Self::LOADED.0 {
            INITIAL
        } else {
            ((rid.0 as u128) << 64) | v as u128
        }
    }
}

const _NO_COLLISION: () = assert!(UNBORN == 0 && INITIAL as u64 & Tid::STATUS != 0);

impl fmt::Debug for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tid(e{}.{}", self.epoch(), self.seq())?;
        for (bit, name) in [
            (Self::LOCK, "locked"),
            (Self::LATEST, "latest"),
            (Self::ABSENT, "absent"),
            (Self::UNLINKED, "unlinked"),
        ] {
            if self.0 & bit != 0 {
                write!(f, " {name}")?;
            }
        }
        f.write_str(")")
    }
}

/// The [`OccRecord`] methods every record whose word is a TID word (Silo, MOCC) implements
/// the same way: its history stamp, its commit stamp, and when the GC may unlink it (once the
/// deletion's epoch is below every running transaction's, see `OccRecord::unlinkable`).
macro_rules! tid_word_methods {
    () => {
        fn stamp(word: u64, _: (), rid: $crate::storage::RowId) -> $crate::history::Stamp {
            $crate::protocols::occ::tid::Tid(word).stamp(rid)
        }

        #[inline]
        fn commit_stamp(word: u64, _: ()) -> u64 {
            $crate::protocols::occ::tid::Tid(word).version().0
        }

        #[inline]
        fn unlinkable(&self, word: u64, safe: u64) -> bool {
            $crate::protocols::occ::tid::Tid(word).epoch() < safe
        }

        #[inline(always)]
        fn epoch(word: u64) -> u64 {
            $crate::protocols::occ::tid::Tid(word).epoch()
        }
    };
}
pub(crate) use tid_word_methods;

/// A Silo worker's own state (also the Silo part of protocols built on Silo's commit).
pub struct SiloLocal {
    /// The last TID this worker committed with.
    last_tid: Tid,
    /// What commit does with a locked write-set record.
    lock: ValidationLock,
    /// ReadPhaseExtension's delay, ns.
    extension: u32,
}

impl SiloLocal {
    /// The state of a worker that locks its write set under `lock` and extends read phases
    /// that met a conflict by `extension` ns.
    pub fn new(lock: ValidationLock, extension: u32) -> Self {
        SiloLocal { last_tid: Tid(0), lock, extension }
    }

    /// ReadPhaseExtension's delay, ns.
    pub fn extension(&self) -> u32 {
        self.extension
    }
}

/// A protocol whose records start with Silo's TID word and that commits as Silo does (Silo, and
/// MOCC on top of its locks).
pub trait SiloCommit: OccProtocol {
    /// The Silo part of the worker's state.
    fn silo(local: &mut Self::Local) -> &mut SiloLocal;

    /// Called when validation finds that read `i` of the read set changed or is locked by
    /// another transaction, before the attempt rolls back. Nothing by default.
    #[inline(always)]
    fn invalid(w: &mut OccWorker<'_, Self>, i: usize) {
        let _ = (w, i);
    }
}

/// Phase 3: the read set's TIDs are unchanged and not locked by another transaction, and the
/// phantom set's bucket versions are unchanged. A failed read names its index.
pub fn validate<P: OccProtocol>(w: &OccWorker<'_, P>) -> Result<(), (Abort, Option<usize>)> {
    let storage = w.ctx.storage;
    for (i, r) in w.reads.iter().enumerate() {
        let cur = Tid(OccRecord::load(storage.table(r.table).rows.get(r.rid).header));
        if cur.without(Tid::LOCK).0 != r.word || (cur.is_locked() && !w.locked_by_me(r)) {
            return Err((Abort::new(AbortReason::ReadValidation), Some(i)));
        }
    }
    w.validate_phantoms().map_err(|a| (a, None))
}

/// [`validate`], telling `P` which read failed.
fn validate_or_report<P: SiloCommit>(w: &mut OccWorker<'_, P>) -> Result<(), Abort> {
    validate(w).map_err(|(a, read)| {
        if let Some(i) = read {
            P::invalid(w, i);
        }
        a
    })
}

/// Silo's commit (§4.4, Figure 2) of any [`SiloCommit`] protocol.
pub fn commit<P: SiloCommit>(w: &mut OccWorker<'_, P>) -> Result<(), Abort> {
    let extension = P::silo(&mut w.local).extension;
    w.extend_read_phase(extension);
    let done = commit_if(w, |_| true)?;
    debug_assert!(done);
    Ok(())
}

/// [`commit`] without ReadPhaseExtension, in which `admit` decides, once the write set is
/// locked, whether the commit goes on. If it does not, the locks are released and the attempt
/// stays open (`Ok(false)`): the caller may commit it again another way. `Ok(true)`: committed.
pub fn commit_if<P: SiloCommit>(
    w: &mut OccWorker<'_, P>,
    admit: impl FnOnce(&OccWorker<'_, P>) -> bool,
) -> Result<bool, Abort> {
    if w.writes.is_empty() {
        // Read-only: no locks to order before validation (so no fence), no TID to choose;
        // the transaction serializes at its validation, in the epoch it reads there (the
        // fence orders that load after the reads, for the history's time line only).
        if let Some(h) = &mut w.ctx.history {
            fence(Ordering::SeqCst);
            h.serial_point_at(epoch_ts(w.ctx.storage.epochs().global(), now_ns()));
        }
        let r = validate_or_report(w);
        if let (Ok(()), Some(h)) = (&r, &mut w.ctx.history) {
            h.committed();
        }
        if r.is_ok() {
            w.ctx.phase(CommitPhase::Validated);
        }
        w.finish(r.is_ok());
        return r.map(|()| true);
    }
    // Phase 1: lock the write set in a global order.
    let policy = P::silo(&mut w.local).lock;
    if let Err(a) = w.lock_write_set(policy) {
        w.rollback();
        return Err(a);
    }
    if !admit(w) {
        w.unlock_write_set();
        return Ok(false);
    }
    w.ctx.phase(CommitPhase::Locked);
    // Phase 2: the serialization point.
    fence(Ordering::SeqCst);
    let epoch = w.ctx.storage.epochs().global();
    if let Some(h) = &mut w.ctx.history {
        h.serial_point_at(epoch_ts(epoch, now_ns()));
    }
    // Phase 3.
    if let Err(a) = validate_or_report(w) {
        w.rollback();
        return Err(a);
    }
    if let Some(h) = &mut w.ctx.history {
        h.committed();
    }
    w.ctx.phase(CommitPhase::Validated);
    // Phase 4: the commit TID: larger than every TID read or written and than this worker's
    // last, in epoch `epoch` or later.
    let mut max = P::silo(&mut w.local).last_tid.version();
    for r in &w.reads {
        max = max.max(Tid(r.word).version());
    }
    for e in &w.writes {
        max = max.max(Tid(e.locked).version());
    }
    let mut tid = Tid(max.0 + Tid::SEQ_ONE);
    if tid.epoch() < epoch {
        tid = Tid::new(epoch, 0);
    }
    P::silo(&mut w.local).last_tid = tid;
    // Phase 5: install and unlock.
    w.install(tid.0, |rec, e| {
        let word = if e.kind.present() { tid.0 | LATEST } else { tid.0 | LATEST | ABSENT };
        debug_assert_eq!(word & LOCK, 0);
        rec.store(word);
        (word, Default::default())
    });
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_fields_round_trip_and_order_by_epoch_first() {
        let t = Tid::new(5, 77).with(Tid::LOCK | Tid::ABSENT);
        assert_eq!((t.epoch(), t.seq()), (5, 77));
        assert!(t.is_locked() && t.is_absent() && !t.is_unlinked());
        assert_eq!(t.version(), Tid::new(5, 77));
        assert!(Tid::new(6, 0) > Tid::new(5, 0xFFFF_FFFF));
        assert_eq!(format!("{t:?}"), "Tid(e5.77 locked absent)");
    }
}

/// Silo's snapshots (§4.9) as the protocols that commit through [`commit`] keep them: the same
/// tests for each (`storage::snapshot` keeps the chains; the commit fills them).
#[cfg(test)]
macro_rules! snapshot_tests {
    ($($name:ident => $p:ty),* $(,)?) => {$(
        mod $name {
            use crate::engine::{Database, DbOptions, Protocol, ProtocolOptions, Worker};
            use crate::error::AbortReason;
            use crate::protocols::occ::OccWorker;
            use crate::storage::{TableId, TableSpec};

            type P = $p;
            const T: TableId = TableId(0);
            const K: u64 = 3;
            const X: u64 = 9;
            const Y: u64 = 11;

            fn row(v: u64) -> [u8; 8] {
                v.to_le_bytes()
            }

        /// A database whose protocol keeps a snapshot every 2 epochs, its epochs moved by hand
        /// ([`tick`]): the epoch thread's interval is an hour.
        fn db_snapshots() -> Database<P> {
            let pairs = [("snapshot-epochs".to_string(), "2".to_string())];
            let epoch_interval = std::time::Duration::from_secs(3600);
            Database::<P>::builder(&[TableSpec::new("t", 8, 64)])
                .options(DbOptions { max_workers: 4, epoch_interval, ..Default::default() })
                .protocol_options(<P as Protocol>::Options::from_pairs(&pairs).unwrap())
                .build()
                .unwrap()
        }

        /// Advances the global epoch `n` times and publishes the snapshot boundary, as the epoch
        /// thread does.
        fn tick(db: &Database<P>, n: usize) {
            let e = db.storage().epochs();
            for _ in 0..n {
                e.advance();
            }
            e.snapshots.refresh(e);
        }

        fn get(w: &mut OccWorker<'_, P>, k: u64) -> Option<u8> {
            w.read(T, k, |r| r[0]).unwrap()
        }

        fn keys(w: &mut OccWorker<'_, P>) -> Vec<(u64, u8)> {
            let mut out = Vec::new();
            w.scan(T, 0, 63, usize::MAX, |k, r| {
                out.push((k, r[0]));
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
            out
        }

        /// A read-only attempt reads the newest snapshot: the values committed below its boundary
        /// (an update's predecessor, a deleted row, not a row inserted later), by point reads and
        /// scans; it refuses writes; the others read the latest state. A later boundary shows the
        /// later commits.
        #[test]
        fn read_only_transactions_read_the_snapshot_and_refuse_writes() {
            let db = db_snapshots();
            let (mut w, mut r) = (db.worker().unwrap(), db.worker().unwrap());
            r.begin_read_only();
            assert_eq!(r.ctx.snapshot, 0, "epoch 1: no boundary yet, an ordinary attempt");
            r.commit().unwrap();
            w.begin();
            assert!(w.insert(T, X, &row(1)).unwrap());
            assert!(w.insert(T, K, &row(1)).unwrap());
            w.commit().unwrap();
            tick(&db, 1);
            assert_eq!(db.storage().epochs().snapshots.current(), 2);
            // Epoch 2: X updated, K deleted, Y inserted.
            w.begin();
            assert!(w.write(T, X, &row(2)).unwrap());
            assert!(w.delete(T, K).unwrap());
            assert!(w.insert(T, Y, &row(5)).unwrap());
            w.commit().unwrap();
            r.begin_read_only();
            assert_eq!(r.ctx.snapshot, 2);
            assert_eq!((get(&mut r, X), get(&mut r, K), get(&mut r, Y)), (Some(1), Some(1), None));
            assert_eq!(keys(&mut r), vec![(K, 1), (X, 1)]);
            assert_eq!(r.write(T, X, &row(9)).map_err(|a| a.reason), Err(AbortReason::ReadOnlyWrite));
            r.abort();
            r.begin();
            assert_eq!((get(&mut r, X), get(&mut r, K), get(&mut r, Y)), (Some(2), None, Some(5)));
            r.commit().unwrap();
            tick(&db, 2);
            r.begin_read_only();
            assert_eq!(r.ctx.snapshot, 4);
            assert_eq!(keys(&mut r), vec![(X, 2), (Y, 5)]);
            r.commit().unwrap();
        }

        /// The old values kept for row `k`, newest first.
        fn kept(db: &Database<P>, k: u64) -> Vec<u8> {
            let tbl = &db.storage().tables()[0];
            let rid = tbl.index.get(k, &crate::storage::index::pin()).unwrap();
            let chains = tbl.chains.as_ref().unwrap();
            let mut out = Vec::new();
            let mut v = chains.at(rid, u64::MAX);
            while let Some(x) = v {
                let mut b = [0u8; 8];
                chains.row(x).read_into(&mut b);
                out.push(b[0]);
                // SAFETY: no one else runs; the chain is not trimmed meanwhile.
                v = unsafe { x.next.load(std::sync::atomic::Ordering::Relaxed).as_ref() };
            }
            out
        }

        /// Updates within one snapshot interval keep one copy, the interval's last value, when
        /// the first update of a later interval replaces it; a copy stays while a reader may need
        /// it, and goes once the oldest boundary in use has passed it.
        #[test]
        fn one_copy_per_record_per_interval_kept_while_needed() {
            let db = db_snapshots();
            let (mut w, mut r) = (db.worker().unwrap(), db.worker().unwrap());
            let set = |w: &mut OccWorker<'_, P>, v: u64| {
                w.begin();
                assert!(w.write(T, X, &row(v)).unwrap());
                w.commit().unwrap();
            };
            w.begin();
            assert!(w.insert(T, X, &row(0)).unwrap());
            w.commit().unwrap();
            (1..=3).for_each(|v| set(&mut w, v));
            assert!(kept(&db, X).is_empty(), "one interval: nothing kept");
            tick(&db, 2);
            (4..=6).for_each(|v| set(&mut w, v));
            assert_eq!(kept(&db, X), vec![3], "epoch 1's last value");
            r.begin_read_only();
            assert_eq!(r.ctx.snapshot, 2);
            tick(&db, 2);
            set(&mut w, 7);
            assert_eq!(kept(&db, X), vec![6, 3], "the reader at 2 still needs 3");
            assert_eq!(get(&mut r, X), Some(3));
            assert_eq!(db.storage().epochs().snapshots.current(), 4, "not held back by the reader");
            r.commit().unwrap();
            tick(&db, 0);
            r.begin_read_only();
            assert_eq!((r.ctx.snapshot, get(&mut r, X)), (4, Some(6)));
            r.commit().unwrap();
            tick(&db, 1);
            set(&mut w, 8);
            assert_eq!(kept(&db, X), vec![7], "boundary 6: only 7 is needed");
            assert_eq!(w.ctx.reclaimer.pending_versions(), 2, "6 and 3 wait for their grace period");
        }

        /// A deleted record stays in the index while a snapshot reader may still see it, and the
        /// GC unlinks it once no boundary in use is at or below its deletion.
        #[test]
        fn a_deleted_record_stays_while_a_snapshot_can_see_it() {
            let db = db_snapshots();
            let (mut w, mut r) = (db.worker().unwrap(), db.worker().unwrap());
            w.begin();
            assert!(w.insert(T, K, &row(7)).unwrap());
            w.commit().unwrap();
            tick(&db, 1);
            w.begin();
            assert!(w.delete(T, K).unwrap());
            w.commit().unwrap();
            r.begin_read_only();
            assert_eq!(r.ctx.snapshot, 2);
            tick(&db, 4);
            let indexed = || {
                let tbl = &db.storage().tables()[0];
                tbl.index.get(K, &crate::storage::index::pin()).is_some()
            };
            // Enough transactions for several reclamation passes.
            let churn = |w: &mut OccWorker<'_, P>| {
                for _ in 0..500 {
                    w.begin();
                    w.read(T, X, |_| ()).unwrap();
                    w.commit().unwrap();
                }
            };
            churn(&mut w);
            assert!(indexed(), "unlinked under a reader at 2 of a deletion in epoch 2");
            assert_eq!(get(&mut r, K), Some(7));
            r.commit().unwrap();
            tick(&db, 1);
            churn(&mut w);
            assert!(!indexed(), "no reader left at or below the deletion's epoch");
        }
        }
    )*};
}

#[cfg(test)]
snapshot_tests! {
    silo_snapshots => crate::protocols::silo::Silo,
    mocc_snapshots => crate::protocols::mocc::Mocc,
}
