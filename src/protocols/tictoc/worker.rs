//! TicToc's commit (the paper's Algorithm 2 and §4's optimisations) on the shared optimistic read
//! phase ([`crate::protocols::occ`]).

use super::record::{TicTocRecord, TsWord, LOADED};
use super::{TicToc, TicTocOptions};
use crate::error::{Abort, AbortReason};
use crate::protocols::occ::{self, OccProtocol, OccRecord, OccWorker, ReadEntry};
use crate::storage::inject::CommitPhase;
use std::sync::atomic::{fence, Ordering};

/// A TicToc worker.
pub type TicTocWorker<'db> = OccWorker<'db, TicToc>;

/// A TicToc worker's own state: the options its commit follows.
pub struct TicTocLocal {
    options: TicTocOptions,
}

impl TicTocLocal {
    pub(super) fn new(options: TicTocOptions) -> Self {
        TicTocLocal { options }
    }
}

/// The smallest commit timestamp of a transaction that writes: above [`LOADED`], so that no
/// written version has the loader's install timestamp.
const MIN_WRITE_TS: u64 = LOADED + 1;

/// The read record's current version, read consistently: the word (maybe locked) and, when it is
/// unlocked, `installed` and `prev`.
#[derive(Clone, Copy)]
struct Current {
    word: TsWord,
    installed: u64,
    prev: u64,
}

#[inline]
fn current(rec: &TicTocRecord) -> Current {
    loop {
        let a = rec.load();
        // Relaxed, then an Acquire fence: pairs with the Release stores of `publish`; when `a`
        // is unlocked and the word is unchanged below, the fields are those of the version `a`
        // names (see `TicTocRecord::publish`). When it is locked they may be half-written.
        let installed = rec.installed.load(Ordering::Relaxed);
        let prev = rec.prev.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let b = rec.word.load(Ordering::Relaxed);
        if a == b {
            return Current { word: TsWord(a), installed, prev };
        }
        std::hint::spin_loop();
    }
}

/// Whether read `r` is valid at `cts`, extending the record's rts to `cts` where needed (the
/// paper's read-set validation, Algorithm 2 lines 9-17). A version is identified by its wts while
/// that is unchanged (a row's versions have increasing wts), else by its install timestamp, so a
/// wts moved up by a delta overflow does not fail readers of the same version (the paper compares
/// wts and aborts them).
fn validate_read(w: &TicTocWorker<'_>, r: &ReadEntry<u64>, cts: u64, history: bool) -> bool {
    let rec = w.ctx.storage.table(r.table).rows.get(r.rid).header;
    let read = TsWord(r.word);
    loop {
        let cur = rec.ts();
        if cur.is_locked() {
            if w.locked_by_me(r) {
                // Locked by us since commit began: still the version read if `installed` is,
                // and we overwrite it at `cts`, above its rts (so it needs no extension).
                return cur.status() & !occ::LOCK == read.status()
                    && rec.installed.load(Ordering::Relaxed) == r.aux;
            }
            // Another transaction is committing it: its `installed` may be half-written, and
            // its rts cannot be extended until it is done. The read is valid if the version is
            // unchanged (wts does not move while locked) and already covers `cts`.
            return TsWord::same_wts(cur.0 & !occ::LOCK, r.word) && cur.rts() >= cts;
        }
        if !TsWord::same_wts(cur.0, r.word) {
            // A moved wts: the same version after a delta overflow, or a newer one.
            let c = current(rec);
            if c.word != cur {
                continue;
            }
            if c.installed != r.aux || c.word.status() != read.status() {
                // Overwritten. With the timestamp history, the read is still valid if the version
                // read was the current one's direct predecessor and the current one was
                // installed after `cts`: the old version was then current throughout
                // [its wts, installed - 1].
                return history && c.prev == r.aux && c.installed > cts;
            }
        }
        if cur.rts() >= cts {
            return true;
        }
        // Extend rts to `cts` (shifting wts on delta overflow). AcqRel: a writer that locks
        // after this sees the new rts (and commits above it).
        let next = cur.extended(cts);
        if rec
            .word
            .compare_exchange_weak(cur.0, next.0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            crate::util::shared_writes::note(crate::util::shared_writes::Site::ReadMark);
            return true;
        }
    }
}

/// Whether every read is still the current version (no extension, no commit timestamp).
fn reads_unchanged(w: &TicTocWorker<'_>) -> bool {
    let storage = w.ctx.storage;
    w.reads.iter().all(|r| {
        let rec = storage.table(r.table).rows.get(r.rid).header;
        let cur = current(rec);
        if cur.word.is_locked() {
            TsWord::same_wts(cur.word.0 & !occ::LOCK, r.word) || w.locked_by_me(r)
        } else {
            cur.installed == r.aux && cur.word.status() == TsWord(r.word).status()
        }
    }) && w.validate_phantoms().is_ok()
}

/// Preemptive abort (§4.2 of the paper): before locking anything, a lower bound of the commit
/// timestamp (the largest wts read, one above the rts of every record read for writing) already
/// dooms a read whose record another transaction has locked with an rts below it.
fn doomed(w: &TicTocWorker<'_>) -> bool {
    let mut est = 0;
    for r in &w.reads {
        let t = TsWord(r.word);
        est = est.max(if r.mine { t.rts() + 1 } else { t.wts() });
    }
    // Nothing is locked by this transaction yet (its own inserts have no read entries), so a
    // locked record is another's.
    let storage = w.ctx.storage;
    w.reads.iter().any(|r| {
        if TsWord(r.word).rts() >= est {
            return false;
        }
        let cur = storage.table(r.table).rows.get(r.rid).header.ts();
        cur.is_locked() && cur.rts() < est
    })
}

/// The commit timestamp: at least the wts of every version read and of every bucket whose
/// absence was read, and above the rts of every record written and of the bucket of every key
/// this transaction made appear. Readers only take the first part.
fn commit_ts(w: &TicTocWorker<'_>) -> u64 {
    let storage = w.ctx.storage;
    let mut cts = 0;
    for r in &w.reads {
        cts = cts.max(TsWord(r.word).wts());
    }
    for p in &w.phantoms {
        cts = cts.max(storage.table(p.table).buckets.clock(p.slot as usize).0);
    }
    if w.writes.is_empty() {
        return cts;
    }
    for e in &w.writes {
        cts = cts.max(TsWord(e.locked).rts() + 1);
        if e.kind.bumped() {
            let b = &storage.table(e.table).buckets;
            let (wts, rts) = b.clock(b.slot_of(e.key));
            cts = cts.max(wts.max(rts) + 1);
        }
    }
    let cts = cts.max(MIN_WRITE_TS);
    debug_assert!(cts <= TsWord::MAX_WTS, "45-bit timestamps exhausted (see record.rs)");
    cts
}

/// Validates the read set and the phantom set at `cts`. Phantom buckets get their rts raised to
/// `cts` and are re-checked after a SeqCst fence (see `RangeBuckets::extend_rts`).
fn validate(w: &TicTocWorker<'_>, cts: u64) -> Result<(), Abort> {
    let history = w.local.options.timestamp_history;
    for r in &w.reads {
        if TsWord(r.word).rts() < cts && !validate_read(w, r, cts, history) {
            return Err(Abort::new(AbortReason::ReadValidation));
        }
    }
    if w.phantoms.is_empty() {
        return Ok(());
    }
    w.validate_phantoms()?;
    let storage = w.ctx.storage;
    for p in &w.phantoms {
        storage.table(p.table).buckets.extend_rts(p.slot as usize, cts);
    }
    fence(Ordering::SeqCst);
    w.validate_phantoms()
}

impl OccProtocol for TicToc {
    type Record = TicTocRecord;
    type Local = TicTocLocal;

    fn reads_still_valid(w: &mut TicTocWorker<'_>) -> bool {
        reads_unchanged(w)
    }

    fn commit(w: &mut TicTocWorker<'_>) -> Result<(), Abort> {
        let options = w.local.options;
        w.extend_read_phase(options.read_phase_extension);
        if !w.writes.is_empty() {
            if options.preemptive_abort && doomed(w) {
                w.rollback();
                return Err(Abort::new(AbortReason::ReadValidation));
            }
            // Lock the write set in a global order.
            if let Err(a) = w.lock_write_set(options.validation_lock) {
                w.rollback();
                return Err(a);
            }
            w.ctx.phase(CommitPhase::Locked);
            // Our bucket bumps happen before the bucket clocks `commit_ts` reads (the inserter's
            // side of `RangeBuckets::extend_rts`).
            fence(Ordering::SeqCst);
        }
        let cts = commit_ts(w);
        if let Some(h) = &mut w.ctx.history {
            h.serial_point_at(cts);
        }
        if let Err(a) = validate(w, cts) {
            w.rollback();
            return Err(a);
        }
        if let Some(h) = &mut w.ctx.history {
            h.committed();
        }
        w.ctx.phase(CommitPhase::Validated);
        if w.writes.is_empty() {
            w.finish(true);
            return Ok(());
        }
        // Write phase: wts = rts = cts.
        w.install(cts, |rec, e| {
            let status = if e.kind.present() { 0 } else { occ::ABSENT };
            let word = TsWord(TsWord::new(cts, cts).0 | status);
            rec.publish(word, cts);
            (word.0, cts)
        });
        Ok(())
    }
}

impl TicToc {
    /// The word of a loaded record: wts = rts = [`LOADED`].
    pub(super) fn loaded_word() -> u64 {
        TsWord::new(LOADED, LOADED).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Database, DbOptions, ProtocolOptions, Worker};
    use crate::storage::{TableId, TableSpec};

    const T: TableId = TableId(0);

    fn row(v: u64) -> [u8; 8] {
        v.to_le_bytes()
    }

    fn db(opts: &[(&str, &str)]) -> Database<TicToc> {
        let pairs: Vec<(String, String)> =
            opts.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        Database::<TicToc>::builder(&[TableSpec::new("t", 8, 16)])
            .options(DbOptions { max_workers: 4, ..Default::default() })
            .protocol_options(TicTocOptions::from_pairs(&pairs).unwrap())
            .build()
            .unwrap()
    }

    fn word(db: &Database<TicToc>, key: u64) -> TsWord {
        let tbl = &db.storage().tables()[0];
        let rid = tbl.index.get(key, &crate::storage::index::pin()).unwrap();
        tbl.rows.get(rid).header.ts()
    }

    fn put(db: &Database<TicToc>, keys: &[u64]) {
        let mut w = db.worker().unwrap();
        w.begin();
        for &k in keys {
            assert!(w.insert(T, k, &row(k)).unwrap());
        }
        w.commit().unwrap();
    }

    /// Commit timestamps are data-driven: a write lands one above the rts of what it overwrites,
    /// a read-only transaction commits at the wts it read and extends nothing it need not.
    #[test]
    fn commit_timestamps_follow_the_data() {
        let db = db(&[]);
        put(&db, &[1, 2]);
        let w1 = word(&db, 1);
        assert_eq!((w1.wts(), w1.rts()), (MIN_WRITE_TS, MIN_WRITE_TS));
        let mut w = db.worker().unwrap();
        // Write 1 three times: wts 3, 4, 5.
        for _ in 0..3 {
            w.begin();
            assert!(w.write(T, 1, &row(9)).unwrap());
            w.commit().unwrap();
        }
        assert_eq!(word(&db, 1).wts(), MIN_WRITE_TS + 3);
        // Read 1 (wts 5) and write 2 (rts 2): cts = max(5, 2 + 1) = 5, so 1's rts stays 5 and 2
        // gets wts 5.
        w.begin();
        w.read(T, 1, |_| ()).unwrap();
        assert!(w.write(T, 2, &row(7)).unwrap());
        w.commit().unwrap();
        assert_eq!((word(&db, 2).wts(), word(&db, 1).rts()), (5, 5));
        // Read 2 (wts 5, rts 5) and write 1 (rts 5): cts 6, and 2's rts is extended to 6.
        w.begin();
        w.read(T, 2, |_| ()).unwrap();
        assert!(w.write(T, 1, &row(8)).unwrap());
        w.commit().unwrap();
        assert_eq!((word(&db, 1).wts(), word(&db, 2).wts(), word(&db, 2).rts()), (6, 5, 6));
    }

    /// The delta-overflow path of rts extension, driven deterministically: a record far behind
    /// the commit timestamp gets wts moved up to `cts - MAX_DELTA`; the version is the same (a
    /// concurrent reader of it still validates) and its data is unchanged.
    #[test]
    fn rts_extension_past_the_delta_shifts_wts_and_keeps_the_version() {
        let db = db(&[]);
        put(&db, &[1, 2]);
        let mut w = db.worker().unwrap();
        // Push key 2's wts far ahead.
        let far = TsWord::MAX_DELTA * 3;
        let tbl = &db.storage().tables()[0];
        let rid2 = tbl.index.get(2, &crate::storage::index::pin()).unwrap();
        tbl.rows.get(rid2).header.publish(TsWord::new(far, far), far);
        // A reader of key 1 (wts 2) that stays open over the extension.
        let mut other = db.worker().unwrap();
        other.begin();
        assert_eq!(other.read(T, 1, |r| r[0]).unwrap(), Some(1));
        assert!(other.write(T, 2, &row(5)).unwrap());
        // Read 1 and 2, write 2: cts = far + 1, so 1's rts must reach far + 1: overflow.
        w.begin();
        w.read(T, 1, |_| ()).unwrap();
        w.read(T, 2, |_| ()).unwrap();
        assert!(w.write(T, 2, &row(6)).unwrap());
        w.commit().unwrap();
        let w1 = word(&db, 1);
        assert_eq!((w1.rts(), w1.wts()), (far + 1, far + 1 - TsWord::MAX_DELTA));
        assert_eq!(
            tbl.rows
                .get(tbl.index.get(1, &crate::storage::index::pin()).unwrap())
                .header
                .installed
                .load(Ordering::Relaxed),
            MIN_WRITE_TS
        );
        // The open reader read key 1 before the shift: same version, so it commits (above
        // key 2's new rts).
        other.commit().expect("a wts shift is not a new version");
        assert_eq!(word(&db, 2).wts(), far + 2);
    }

    /// A read of a version overwritten since validates with the timestamp history when the
    /// overwrite came after the reader's commit timestamp, and aborts without it.
    #[test]
    fn timestamp_history_keeps_reads_of_a_just_overwritten_version() {
        for (history, ok) in [("on", true), ("off", false)] {
            let db = db(&[("timestamp-history", history)]);
            put(&db, &[1, 2]);
            let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
            // r reads 1 (wts 2, rts 2); with its write of 2 (rts 2) it will commit at 3.
            r.begin();
            r.read(T, 1, |_| ()).unwrap();
            // Another reader raised 1's rts to 3, so w's overwrite of 1 lands at 4, after r.
            let tbl = &db.storage().tables()[0];
            let rid1 = tbl.index.get(1, &crate::storage::index::pin()).unwrap();
            tbl.rows.get(rid1).header.store(TsWord::new(2, 3).0);
            w.begin();
            assert!(w.write(T, 1, &row(9)).unwrap());
            w.commit().unwrap();
            assert_eq!(word(&db, 1).wts(), 4);
            assert!(r.write(T, 2, &row(3)).unwrap());
            assert_eq!(r.commit().is_ok(), ok, "timestamp-history={history}");
            if ok {
                assert_eq!(word(&db, 2).wts(), 3, "r serialised before w");
            }
        }
    }

    /// Preemptive abort: a transaction whose read record is locked by a committer with an rts
    /// below the commit-timestamp bound aborts before taking any lock.
    #[test]
    fn preemptive_abort_aborts_before_locking() {
        let db = db(&[("preemptive-abort", "on")]);
        put(&db, &[1, 2, 3]);
        let tbl = &db.storage().tables()[0];
        let rid = |k| tbl.index.get(k, &crate::storage::index::pin()).unwrap();
        // Key 3 has wts 10: a transaction reading it commits at >= 10.
        tbl.rows.get(rid(3)).header.publish(TsWord::new(10, 10), 10);
        let mut w = db.worker().unwrap();
        w.begin();
        w.read(T, 1, |_| ()).unwrap();
        w.read(T, 3, |_| ()).unwrap();
        assert!(w.write(T, 2, &row(1)).unwrap());
        // Another committer holds key 1 (rts 2 < 10).
        let rec1 = tbl.rows.get(rid(1)).header;
        let held = rec1.load();
        assert!(rec1.try_lock(held));
        assert_eq!(w.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        let rec2 = tbl.rows.get(rid(2)).header;
        assert!(!rec2.ts().is_locked(), "no lock was taken");
        rec1.store(held);
    }

    /// Absence has timestamps: a transaction that validated a scan of an empty range commits
    /// at `cts`, and an insert into that range afterwards commits above it (through the
    /// bucket's rts), even though the two share no record.
    #[test]
    fn an_insert_into_a_validated_range_commits_after_the_scanner() {
        let db = db(&[]);
        put(&db, &[1, 2]);
        let tbl = &db.storage().tables()[0];
        let rid2 = tbl.index.get(2, &crate::storage::index::pin()).unwrap();
        tbl.rows.get(rid2).header.publish(TsWord::new(50, 50), 50);
        let mut w = db.worker().unwrap();
        w.begin();
        let mut seen = 0;
        w.scan(T, 10, 20, 10, |_, _| {
            seen += 1;
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(seen, 0);
        w.read(T, 2, |_| ()).unwrap();
        assert!(w.write(T, 1, &row(1)).unwrap());
        w.commit().unwrap();
        let scanner = word(&db, 1).wts();
        assert_eq!(scanner, 50, "max(wts read = 50, rts written + 1 = 3)");
        w.begin();
        assert!(w.insert(T, 15, &row(15)).unwrap());
        w.commit().unwrap();
        assert!(word(&db, 15).wts() > scanner, "the insert serialises after the scan");
    }

    /// A key whose deleted record the GC removed from the index is absent from the deletion's
    /// timestamp on: a miss commits at or after it, and a fresh record inserted for the key
    /// starts with it (so that readers of the uncommitted insert do too) and commits above it.
    #[test]
    fn absence_after_an_unlinked_delete_is_timestamped_by_the_delete() {
        let db = db(&[]);
        put(&db, &[1]);
        let b = &db.storage().tables()[0].buckets;
        // What the GC does when it unlinks key 7's deleted record (deleted at 100, read up to
        // 120): `TicTocRecord::unlinked`.
        b.raise(7, 100, 120);
        let mut w = db.worker().unwrap();
        w.begin();
        assert_eq!(w.read(T, 7, |_| ()).unwrap(), None);
        assert!(w.write(T, 1, &row(1)).unwrap());
        w.commit().unwrap();
        assert_eq!(word(&db, 1).wts(), 100, "the miss commits at the deletion's wts");
        w.begin();
        assert!(w.insert(T, 7, &row(7)).unwrap());
        let pending = word(&db, 7);
        assert_eq!((pending.wts(), pending.rts()), (100, 120));
        assert!(pending.is_locked() && occ::is_absent(pending.0));
        w.commit().unwrap();
        assert_eq!(word(&db, 7).wts(), 121, "above the absence's rts");
    }
}
