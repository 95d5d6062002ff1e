//! Silo's worker: the shared optimistic read phase ([`crate::protocols::occ`]) and
//! Silo's commit ([`crate::protocols::occ::tid`]).

use super::record::SiloRecord;
use super::Silo;
use crate::error::Abort;
use crate::protocols::occ::tid::{commit, validate, SiloCommit, SiloLocal};
use crate::protocols::occ::{OccProtocol, OccWorker};

/// A Silo worker.
pub type SiloWorker<'db> = OccWorker<'db, Silo>;

impl OccProtocol for Silo {
    type Record = SiloRecord;
    type Local = SiloLocal;

    fn reads_still_valid(w: &mut SiloWorker<'_>) -> bool {
        validate(w).is_ok()
    }

    fn commit(w: &mut SiloWorker<'_>) -> Result<(), Abort> {
        commit(w)
    }
}

impl SiloCommit for Silo {
    #[inline(always)]
    fn silo(local: &mut SiloLocal) -> &mut SiloLocal {
        local
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Database, DbOptions, Worker};
    use crate::error::AbortReason;
    use crate::protocols::occ::ValidationLock;
    use crate::protocols::silo::Silo;
    use crate::storage::TableId;
    use crate::storage::TableSpec;

    const T: TableId = TableId(0);

    fn row(v: u64) -> [u8; 8] {
        v.to_le_bytes()
    }

    /// A database whose key `K` has a deleted (absent, still indexed) record and whose key `X`
    /// is present.
    fn db_with_deleted_k() -> Database<Silo> {
        let db = Database::<Silo>::with_options(
            &[TableSpec::new("t", 8, 16)],
            DbOptions { max_workers: 4, ..Default::default() },
        )
        .unwrap();
        {
            let mut w = db.worker().unwrap();
            w.begin();
            assert!(w.insert(T, K, &row(1)).unwrap());
            assert!(w.insert(T, X, &row(1)).unwrap());
            w.commit().unwrap();
            w.begin();
            assert!(w.delete(T, K).unwrap());
            w.commit().unwrap();
        }
        db
    }

    const K: u64 = 3;
    const X: u64 = 9;

    /// An empty database whose Silo takes the options `opts`.
    fn db_with(opts: &[(&str, &str)]) -> Database<Silo> {
        use crate::engine::ProtocolOptions;
        let pairs: Vec<(String, String)> =
            opts.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        Database::<Silo>::builder(&[TableSpec::new("t", 8, 16)])
            .options(DbOptions { max_workers: 4, ..Default::default() })
            .protocol_options(super::super::SiloOptions::from_pairs(&pairs).unwrap())
            .build()
            .unwrap()
    }

    /// The review's schedule, with the two commits interleaved phase by phase: T1 = {insert K,
    /// delete K, write X} reads K absent; T2 = {read X, insert K} reads X before T1 writes it.
    /// T2 locks K and validates X; then T1 locks X and validates K, finding T2's lock on it.
    /// Committing both would be a cycle (T1 -rw(K)-> T2 -rw(X)-> T1), so T1 must abort: its
    /// read of K, left behind by the revive it undid, is no longer backed by a lock of its own.
    #[test]
    fn a_revive_undone_by_a_delete_still_validates_against_foreign_locks() {
        let db = db_with_deleted_k();
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert!(t1.insert(T, K, &row(10)).unwrap(), "revives the deleted record");
        assert!(t1.delete(T, K).unwrap(), "and deletes it again");
        assert!(t1.write(T, X, &row(10)).unwrap());
        t2.begin();
        assert_eq!(t2.read(T, X, |r| r[0]).unwrap(), Some(1));
        assert!(t2.insert(T, K, &row(20)).unwrap());
        // T2's commit, up to its validation.
        t2.lock_write_set(ValidationLock::Wait).unwrap();
        validate(&t2).map_err(|e| e.0).expect("T2 read X before anyone wrote it");
        // T1's commit: K is locked by T2, which installs a present K after T1 read it absent.
        t1.lock_write_set(ValidationLock::Wait).unwrap();
        assert_eq!(
            validate(&t1).map_err(|(a, _)| a.reason),
            Err(AbortReason::ReadValidation),
            "T1 ignored T2's lock on a key it read"
        );
        t1.rollback();
        t2.rollback();
    }

    /// With `validation-lock=nowait`, a commit that finds a write-set record locked by another
    /// commit aborts at once (lock-conflict), releasing what it locked, and its retry commits
    /// once the other is done; with the default it would spin until the lock is free.
    #[test]
    fn nowait_validation_aborts_on_a_locked_write_set_record() {
        let db = db_with(&[("validation-lock", "nowait")]);
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert!(t1.insert(T, X, &row(1)).unwrap());
        assert!(t1.insert(T, K, &row(1)).unwrap());
        t1.commit().unwrap();
        t1.begin();
        assert!(t1.write(T, X, &row(10)).unwrap());
        t2.begin();
        assert!(t2.write(T, K, &row(20)).unwrap());
        assert!(t2.write(T, X, &row(20)).unwrap());
        // T1 holds X's lock in its commit; T2 locks K, then finds X locked.
        t1.lock_write_set(ValidationLock::Wait).unwrap();
        assert_eq!(t2.commit().map_err(|a| a.reason), Err(AbortReason::LockConflict));
        // T2's lock on K was released: T1 finishes, and T2's retry commits.
        validate(&t1).map_err(|e| e.0).unwrap();
        t1.rollback();
        t2.begin();
        assert!(t2.write(T, K, &row(20)).unwrap());
        assert!(t2.write(T, X, &row(20)).unwrap());
        t2.commit().expect("no lock is left behind");
    }

    /// The same shape without the revive: a plain absent read of K validates against the lock.
    #[test]
    fn an_absent_read_validates_against_foreign_locks() {
        let db = db_with_deleted_k();
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert_eq!(t1.read(T, K, |r| r[0]).unwrap(), None);
        assert!(t1.write(T, X, &row(10)).unwrap());
        t2.begin();
        assert!(t2.insert(T, K, &row(20)).unwrap());
        t2.lock_write_set(ValidationLock::Wait).unwrap();
        t1.lock_write_set(ValidationLock::Wait).unwrap();
        assert!(validate(&t1).is_err());
        t1.rollback();
        t2.rollback();
    }

    /// ReadPhaseExtension delays only attempts whose read phase met a concurrent update, and
    /// by at least the option's delay: a read that finds its record locked by a committer waits
    /// (an extra read), so its commit is delayed; a read that finds it free is not.
    #[test]
    fn read_phase_extension_delays_only_attempts_that_met_a_conflict() {
        use crate::protocols::occ::OccRecord;
        use std::time::{Duration, Instant};
        const NS: u32 = 1_000_000;
        let db = db_with(&[("read-phase-extension", "1000000")]);
        let mut w = db.worker().unwrap();
        w.begin();
        assert!(w.insert(T, X, &row(1)).unwrap());
        w.commit().unwrap();
        w.begin();
        assert_eq!(w.read(T, X, |r| r[0]).unwrap(), Some(1));
        w.commit().unwrap();
        assert_eq!(w.read_phase_extensions, 0, "no conflict, no delay");
        let tbl = &db.storage().tables()[0];
        let rec = tbl.rows.get(tbl.index.get(X, &crate::storage::index::pin()).unwrap()).header;
        // Liveness bound, not a timing assumption: the read normally starts long before the
        // holder lets go; a thread descheduled for the whole 50 ms just tries again.
        for attempt in 0.. {
            assert!(attempt < 100, "the read never found the record locked");
            let held = OccRecord::load(rec);
            assert!(rec.try_lock(held));
            std::thread::scope(|s| {
                s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(50));
                    rec.store(held);
                });
                w.begin();
                assert_eq!(w.read(T, X, |r| r[0]).unwrap(), Some(1));
                let start = Instant::now();
                w.commit().unwrap();
                if w.read_phase_extensions > 0 {
                    assert!(start.elapsed() >= Duration::from_nanos(u64::from(NS)));
                }
            });
            if w.read_phase_extensions > 0 {
                assert_eq!(w.read_phase_extensions, 1);
                break;
            }
        }
    }
}
