//! MOCC's worker: the shared optimistic read phase with a lock step before each access to a hot
//! record, Silo's commit after locking the write set, and the lists of locks held (CLL) and to
//! take first on a retry (RLL).

use super::record::MoccRecord;
use super::Mocc;
use crate::error::{Abort, AbortReason};
use crate::protocols::mocc::mql::{Grant, Mql, Patience, QNodes};
use crate::protocols::occ::tid::{self, SiloCommit, SiloLocal};
use crate::protocols::occ::{OccProtocol, OccWorker, ValidationLock, WriteKind};
use crate::storage::{RowId, Storage, TableId};
use std::sync::Arc;

/// How long a lock requested out of canonical order waits before it is cancelled (rounds of
/// the queue waiter's spin-wait, all of them spins: a few microseconds).
const OUT_OF_ORDER_PATIENCE: u32 = 128;

/// A MOCC worker.
pub type MoccWorker<'db> = OccWorker<'db, Mocc>;

/// A lock held or to take: the record's place in the canonical order (table, row) and the mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockEntry {
    /// `table << 64 | row`: the canonical order.
    pub key: u128,
    /// Write mode (else read).
    pub write: bool,
    /// The queue node a held MQL write lock is released through (else 0).
    pub node: u32,
}

impl LockEntry {
    fn new(key: u128, write: bool) -> LockEntry {
        LockEntry { key, write, node: 0 }
    }
}

#[inline(always)]
fn key(t: TableId, rid: RowId) -> u128 {
    u128::from(t.0) << 64 | u128::from(rid.0)
}

/// A MOCC worker's own state.
pub struct MoccLocal {
    pub(super) silo: SiloLocal,
    /// The current lock list: locks held, in canonical order.
    pub cll: Vec<LockEntry>,
    /// The retrospective lock list: what the last aborted attempt found hot or wrote, in
    /// canonical order; a retry takes each entry before anything after it.
    pub rll: Vec<LockEntry>,
    /// Records whose read validation failed in this attempt (they join the RLL).
    failed: Vec<u128>,
    /// Commit's buffer for the write set in canonical order.
    order: Vec<u128>,
    /// Temperature at which a record is locked pessimistically.
    threshold: u64,
    /// Silo epochs per temperature period.
    reset_epochs: u64,
    /// Wait for a conflicting lock (in canonical order), or abort.
    policy: ValidationLock,
    /// Xorshift state for the temperature's coin.
    rng: u64,
    /// The queue lock's handle (`lock=mql`); `None`: the reader-writer lock word.
    mql: Option<Mql>,
    /// Pessimistic locks taken since the worker was created (read phase and commit).
    pub hot_locks: u64,
}

impl MoccLocal {
    pub(super) fn new(o: &super::MoccOptions, nodes: Option<Arc<QNodes>>, slot: usize) -> Self {
        MoccLocal {
            // The write set is locked through the MOCC locks first (with `policy`), so Silo's
            // own locking of the TID words never meets another committer (see `commit`).
            silo: SiloLocal::new(ValidationLock::Wait, o.read_phase_extension),
            cll: Vec::new(),
            rll: Vec::new(),
            failed: Vec::new(),
            order: Vec::new(),
            threshold: u64::from(o.temperature_threshold),
            reset_epochs: u64::from(o.temperature_reset),
            policy: o.validation_lock,
            rng: slot as u64 + 1,
            mql: nodes.map(|n| Mql::new(n, slot)),
            hot_locks: 0,
        }
    }

    fn coin(&mut self) -> u64 {
        // xorshift64: the temperature's coin needs no quality beyond independence of the bits.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

/// How a lock request waits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Not at all (NoWait).
    No,
    /// Until granted (in canonical order).
    Forever,
    /// A while, then cancelled (out of canonical order; MQL only).
    Bounded,
}

/// Requests `rec`'s lock in mode `write`; the entry of a granted lock.
#[inline]
fn request(
    mql: &mut Option<Mql>,
    rec: &MoccRecord,
    k: u128,
    write: bool,
    wait: Wait,
) -> Option<LockEntry> {
    let node = match mql {
        None => match wait {
            Wait::No | Wait::Bounded => rec.try_lock(write).then_some(0)?,
            Wait::Forever => {
                rec.lock(write);
                0
            }
        },
        Some(m) => {
            let g = match wait {
                Wait::No if write => m.try_write(&rec.lock),
                Wait::No => {
                    if Mql::try_read(&rec.lock) {
                        Grant::Read
                    } else {
                        Grant::No
                    }
                }
                Wait::Forever => m.acquire(&rec.lock, write, Patience::Forever),
                Wait::Bounded => {
                    m.acquire(&rec.lock, write, Patience::Spins(OUT_OF_ORDER_PATIENCE))
                }
            };
            match g {
                Grant::Read => 0,
                Grant::Write(n) => n,
                Grant::No => return None,
            }
        }
    };
    Some(LockEntry { key: k, write, node })
}

/// Releases the lock `e` holds on `rec`.
#[inline]
fn release(mql: &mut Option<Mql>, rec: &MoccRecord, e: LockEntry) {
    match mql {
        None => rec.unlock(e.write),
        Some(_) if !e.write => Mql::release_read(&rec.lock),
        Some(m) => m.release_write(&rec.lock, e.node),
    }
}

/// Turns our read lock on `rec` into a write lock if we are its only holder; the write lock's
/// node.
#[inline]
fn upgrade(mql: &mut Option<Mql>, rec: &MoccRecord) -> Option<u32> {
    match mql {
        None => rec.try_upgrade().then_some(0),
        Some(m) => match m.try_upgrade(&rec.lock) {
            Grant::Write(n) => Some(n),
            _ => None,
        },
    }
}

/// The temperature period of the running attempt.
#[inline(always)]
fn period(w: &MoccWorker<'_>) -> u64 {
    w.ctx.epoch / w.local.reset_epochs
}

/// Takes the lock of `k` in mode `write` (MOCC's `lock`, §3.3): a lock held in a weaker mode is
/// upgraded. A lock needed out of canonical order is, with MQL, first requested with a bounded
/// wait while the later locks are kept (MOCC's cancellable request: it cannot deadlock, since
/// it gives up); without MQL, or when that request is cancelled, the held locks after `k` are
/// released (their reads stay optimistic and are validated as usual). Then every RLL entry
/// before `k` is taken, and `k` itself, waiting in canonical order (deadlock-free: a waiter holds
/// only locks before the one it waits for), or aborting on a conflict under
/// `validation-lock=nowait`.
fn lock(w: &mut MoccWorker<'_>, k: u128, rec: &MoccRecord, write: bool) -> Result<(), Abort> {
    let l = &mut w.local;
    if let Some(i) = l.cll.iter().rposition(|e| e.key == k) {
        if l.cll[i].write || !write {
            return Ok(());
        }
        if let Some(node) = upgrade(&mut l.mql, rec) {
            l.cll[i] = LockEntry { key: k, write: true, node };
            return Ok(());
        }
        // Another reader holds it too: give the read lock up and queue for the write lock in
        // canonical order (two upgraders waiting for each other would deadlock).
        let e = l.cll.remove(i);
        release(&mut l.mql, rec, e);
    }
    let violations = l.cll.partition_point(|e| e.key < k);
    if violations < l.cll.len() && l.mql.is_some() && l.policy != ValidationLock::NoWait {
        if let Some(e) = request(&mut l.mql, rec, k, write, Wait::Bounded) {
            l.hot_locks += 1;
            l.cll.insert(violations, e);
            return Ok(());
        }
    }
    for e in l.cll.drain(violations..) {
        release(&mut l.mql, record_of(w.ctx.storage, e.key), e);
    }
    take_rll_before(l, w.ctx.storage, k)?;
    take(l, rec, LockEntry::new(k, write))
}

/// Takes the RLL's entries after the last lock held and before `k` in canonical order.
#[inline]
fn take_rll_before(l: &mut MoccLocal, storage: &Storage<MoccRecord>, k: u128) -> Result<(), Abort> {
    let floor = l.cll.last().map(|e| e.key);
    let from = l.rll.partition_point(|e| Some(e.key) <= floor);
    let to = l.rll.partition_point(|e| e.key < k);
    for j in from..to {
        let e = l.rll[j];
        take(l, record_of(storage, e.key), e)?;
    }
    Ok(())
}

/// Takes one lock at the end of the CLL (the caller keeps canonical order).
fn take(l: &mut MoccLocal, rec: &MoccRecord, e: LockEntry) -> Result<(), Abort> {
    let wait = if l.policy == ValidationLock::NoWait { Wait::No } else { Wait::Forever };
    match request(&mut l.mql, rec, e.key, e.write, wait) {
        Some(e) => {
            l.hot_locks += 1;
            l.cll.push(e);
            Ok(())
        }
        // MQL refuses a request only when the worker ran out of queue nodes: the lock is
        // skipped (it only schedules; validation decides).
        None if wait == Wait::Forever => Ok(()),
        None => Err(Abort::new(AbortReason::LockConflict)),
    }
}

/// The record a lock key names.
#[inline]
fn record_of(storage: &Storage<MoccRecord>, k: u128) -> &MoccRecord {
    storage.table(TableId((k >> 64) as u32)).rows.get(RowId(k as u64)).header
}

impl OccProtocol for Mocc {
    type Record = MoccRecord;
    type Local = MoccLocal;

    fn reads_still_valid(w: &mut MoccWorker<'_>) -> bool {
        tid::validate(w).is_ok()
    }

    /// A hot record (or one the RLL names) is locked before the access: in write mode for a
    /// write, or when the RLL says the last attempt wrote it.
    #[inline(always)]
    fn access(
        w: &mut MoccWorker<'_>,
        t: TableId,
        _: u64,
        rid: RowId,
        rec: &MoccRecord,
        write: bool,
    ) -> Result<(), Abort> {
        let k = key(t, rid);
        let remembered = if w.local.rll.is_empty() {
            None
        } else {
            let rll = &w.local.rll;
            rll.binary_search_by(|e| e.key.cmp(&k)).ok().map(|i| rll[i].write)
        };
        if remembered.is_none() && rec.temperature(period(w)) < w.local.threshold {
            // A cold record: nothing to lock, but a retry's RLL entries before it are due now.
            if !w.local.rll.is_empty() {
                take_rll_before(&mut w.local, w.ctx.storage, k)?;
            }
            return Ok(());
        }
        lock(w, k, rec, write || remembered == Some(true))
    }

    fn commit(w: &mut MoccWorker<'_>) -> Result<(), Abort> {
        let extension = w.local.silo.extension();
        w.extend_read_phase(extension);
        // The fast path, for an attempt that holds no MOCC lock and has no RLL (no hot record
        // met): Silo's commit, admitted once the TID words are locked if no one holds a MOCC
        // lock on the write set. A reader or writer that takes one after that check finds the
        // TID word locked or changed, as under Silo; a held one sends the commit the slow way.
        if w.local.cll.is_empty() && w.local.rll.is_empty() {
            let storage = w.ctx.storage;
            let free = |w: &MoccWorker<'_>| {
                w.writes.iter().all(|e| {
                    matches!(e.kind, WriteKind::Insert | WriteKind::InsertDeleted)
                        || record_of(storage, key(e.table, e.rid)).lock_free()
                })
            };
            if tid::commit_if(w, free)? {
                return Ok(());
            }
        }
        // The write set's MOCC locks, in canonical order, before Silo's commit locks the TID
        // words: a committer on this path holds a record's MOCC write lock before its TID lock,
        // and one on the fast path holds TID locks only while it waits for nothing, so locking
        // the TID words never waits for long; our own inserts are locked already (a record
        // nobody else can reach).
        let mut order = std::mem::take(&mut w.local.order);
        order.clear();
        order.extend(
            w.writes
                .iter()
                .filter(|e| !matches!(e.kind, WriteKind::Insert | WriteKind::InsertDeleted))
                .map(|e| key(e.table, e.rid)),
        );
        order.sort_unstable();
        for &k in &order {
            if let Err(a) = lock(w, k, record_of(w.ctx.storage, k), true) {
                w.local.order = order;
                w.rollback();
                return Err(a);
            }
        }
        w.local.order = order;
        tid::commit_if(w, |_| true).map(drop)
    }

    /// Releases the CLL. An aborted attempt leaves an RLL for its retry (MOCC §3.4, as CCBench
    /// builds it): its write set in write mode, and the reads that are hot or failed validation.
    fn end(w: &mut MoccWorker<'_>, committed: bool) {
        let storage = w.ctx.storage;
        let l = &mut w.local;
        for e in l.cll.drain(..) {
            release(&mut l.mql, record_of(storage, e.key), e);
        }
        w.local.rll.clear();
        if !committed {
            let period = period(w);
            let l = &mut w.local;
            for e in &w.writes {
                if !matches!(e.kind, WriteKind::Insert | WriteKind::InsertDeleted) {
                    l.rll.push(LockEntry::new(key(e.table, e.rid), true));
                }
            }
            for r in &w.reads {
                let k = key(r.table, r.rid);
                if l.failed.contains(&k) || record_of(storage, k).temperature(period) >= l.threshold
                {
                    l.rll.push(LockEntry::new(k, false));
                }
            }
            // One entry per record, the write mode winning.
            l.rll.sort_unstable_by(|a, b| a.key.cmp(&b.key).then(b.write.cmp(&a.write)));
            l.rll.dedup_by_key(|e| e.key);
        }
        w.local.failed.clear();
    }
}

impl SiloCommit for Mocc {
    #[inline(always)]
    fn silo(local: &mut MoccLocal) -> &mut SiloLocal {
        &mut local.silo
    }

    /// The record warms up (MOCC §3.1) and joins the RLL.
    fn invalid(w: &mut MoccWorker<'_>, i: usize) {
        let r = w.reads[i];
        let k = key(r.table, r.rid);
        let (period, coin) = (period(w), w.local.coin());
        record_of(w.ctx.storage, k).bump(period, coin);
        w.local.failed.push(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Database, DbOptions, Protocol, ProtocolOptions, Worker};
    use crate::protocols::mocc::{LockKind, MoccOptions};
    use crate::storage::TableSpec;
    use std::time::Duration;

    const T: TableId = TableId(0);

    fn row(v: u64) -> [u8; 8] {
        v.to_le_bytes()
    }

    /// A database with keys 1..=4 whose MOCC takes `opts`; epochs last an hour, so that the
    /// temperature period does not change under a test.
    fn db_with(opts: &[(&str, &str)]) -> Database<Mocc> {
        let pairs: Vec<(String, String)> =
            opts.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        let db = Database::<Mocc>::builder(&[TableSpec::new("t", 8, 16)])
            .options(DbOptions {
                max_workers: 4,
                epoch_interval: Duration::from_secs(3600),
                ..Default::default()
            })
            .protocol_options(MoccOptions::from_pairs(&pairs).unwrap())
            .build()
            .unwrap();
        {
            let mut w = db.worker().unwrap();
            w.begin();
            for k in 1..=4 {
                assert!(w.insert(T, k, &row(k)).unwrap());
            }
            w.commit().unwrap();
        }
        db
    }

    /// (readers, a writer holds or waits) of `rec`'s lock, under either lock kind.
    fn held(db: &Database<Mocc>, rec: &MoccRecord) -> (u64, bool) {
        match db.protocol().options().lock {
            LockKind::Rwlock => (rec.readers(), rec.write_locked()),
            LockKind::Mql => (Mql::readers(&rec.lock), Mql::queued(&rec.lock)),
        }
    }

    /// The CLL's (key, write mode) pairs.
    fn cll(w: &MoccWorker<'_>) -> Vec<(u128, bool)> {
        w.local.cll.iter().map(|e| (e.key, e.write)).collect()
    }

    /// Key `k`'s record and its place in the canonical order.
    fn rec(db: &Database<Mocc>, k: u64) -> (&MoccRecord, u128) {
        let tbl = &db.storage().tables()[0];
        let rid = tbl.index.get(k, &crate::storage::index::pin()).unwrap();
        (tbl.rows.get(rid).header, key(T, rid))
    }

    /// Heats `k` up to `n` in the current period.
    fn heat(db: &Database<Mocc>, k: u64, n: u64) {
        let period = db.storage().epochs().global();
        for _ in 0..n {
            rec(db, k).0.bump(period, 0);
        }
        assert_eq!(rec(db, k).0.temperature(period), n);
    }

    /// A transaction that read X, then failed validation because X changed, warms X up; its
    /// retry's RLL holds X (read) and what it wrote (Y, write), and the retry takes both locks
    /// before it touches anything after them in canonical order, before reading X again.
    #[test]
    fn a_retry_locks_the_hot_record_it_aborted_on_first() {
        for lock in ["mql", "rwlock"] {
            a_retry_locks_first(lock);
        }
    }

    fn a_retry_locks_first(lock: &str) {
        let db = db_with(&[("temperature-threshold", "1"), ("lock", lock)]);
        let (x, y, z) = (1, 2, 4);
        let ((rx, kx), (ry, ky), (rz, kz)) = (rec(&db, x), rec(&db, y), rec(&db, z));
        assert!(kx < ky && ky < kz, "keys inserted in order get rows in order");
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert_eq!(t1.read(T, x, |r| r[0]).unwrap(), Some(1));
        t2.begin();
        assert_eq!(t2.update(T, x, |r| r[0] = 9).unwrap(), Some(()));
        t2.commit().unwrap();
        assert!(t1.write(T, y, &row(7)).unwrap());
        assert_eq!(t1.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        let period = db.storage().epochs().global();
        assert_eq!(rx.temperature(period), 1, "a failed validation at temperature 0 warms up");
        assert_eq!(t1.local.rll, vec![LockEntry::new(kx, false), LockEntry::new(ky, true)]);
        assert_eq!(
            (held(&db, rx), held(&db, ry)),
            ((0, false), (0, false)),
            "the abort released all"
        );
        // The retry's first access is to Z, after X and Y: X and Y are locked first.
        t1.begin();
        assert_eq!(t1.read(T, z, |r| r[0]).unwrap(), Some(4));
        assert_eq!((held(&db, rx), held(&db, ry)), ((1, false), (0, true)));
        assert_eq!(held(&db, rz), (0, false), "Z is cold");
        assert_eq!(t1.read(T, x, |r| r[0]).unwrap(), Some(9));
        assert!(t1.write(T, y, &row(7)).unwrap());
        t1.commit().expect("X was read under its lock");
        assert!(t1.local.rll.is_empty() && t1.local.cll.is_empty());
        assert_eq!((held(&db, rx), held(&db, ry)), ((0, false), (0, false)));
    }

    /// A hot record needed out of canonical order: the reader-writer word releases the held
    /// locks after it (their reads stay optimistic and validated) and locks it in order; MQL's
    /// bounded request gets it at once when it is free, keeping the later lock. A hot record
    /// read and then updated has its read lock upgraded.
    #[test]
    fn out_of_order_locks_and_upgrades() {
        for lock in ["mql", "rwlock"] {
            let db = db_with(&[("temperature-threshold", "2"), ("lock", lock)]);
            for k in [1, 3] {
                heat(&db, k, 2);
            }
            let ((ra, ka), (rb, kb)) = (rec(&db, 1), rec(&db, 3));
            let mut w = db.worker().unwrap();
            w.begin();
            assert_eq!(w.read(T, 3, |r| r[0]).unwrap(), Some(3));
            assert_eq!(cll(&w), vec![(kb, false)]);
            assert_eq!(w.read(T, 1, |r| r[0]).unwrap(), Some(1));
            if lock == "mql" {
                assert_eq!(cll(&w), vec![(ka, false), (kb, false)], "kept the later lock");
                assert_eq!((held(&db, ra), held(&db, rb)), ((1, false), (1, false)));
            } else {
                assert_eq!(cll(&w), vec![(ka, false)], "released the later lock");
                assert_eq!((held(&db, ra), held(&db, rb)), ((1, false), (0, false)));
            }
            assert_eq!(w.update(T, 1, |r| r[0] = 5).unwrap(), Some(()));
            assert_eq!(cll(&w)[0], (ka, true));
            assert_eq!(held(&db, ra), (0, true));
            w.commit().unwrap();
            assert_eq!((held(&db, ra), held(&db, rb)), ((0, false), (0, false)));
            w.begin();
            assert_eq!(w.read(T, 1, |r| r[0]).unwrap(), Some(5));
            w.commit().unwrap();
        }
    }

    /// With MQL, a hot record needed out of order while another transaction write-locks it: the
    /// bounded request is cancelled (its queue node left behind), the later lock is released,
    /// and the record is then waited for in canonical order; the holder's release passes the
    /// turn through the cancelled node.
    #[test]
    fn a_cancelled_out_of_order_request_falls_back_to_canonical_order() {
        let db = db_with(&[("temperature-threshold", "1"), ("lock", "mql")]);
        for k in [1, 3] {
            heat(&db, k, 1);
        }
        let ((ra, ka), (rb, _)) = (rec(&db, 1), rec(&db, 3));
        // 0: start; 1: t2 holds 1; 2: t1 holds 3 and is about to read 1.
        let step = std::sync::atomic::AtomicU32::new(0);
        let wait_for = |n: u32, what: &str| {
            let t = std::time::Instant::now();
            while step.load(std::sync::atomic::Ordering::SeqCst) < n {
                assert!(t.elapsed() < Duration::from_secs(300), "{what} (deadlock detector)");
                std::thread::yield_now();
            }
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut t2 = db.worker().unwrap();
                t2.begin();
                assert_eq!(t2.update(T, 1, |r| r[0] = 8).unwrap(), Some(()));
                step.store(1, std::sync::atomic::Ordering::SeqCst);
                wait_for(2, "t1 never locked 3");
                // t1 gives its lock on 3 up only once its bounded request for 1 was cancelled.
                let t = std::time::Instant::now();
                while held(&db, rb) != (0, false) {
                    assert!(
                        t.elapsed() < Duration::from_secs(300),
                        "t1 never gave 3 up (deadlock detector)"
                    );
                    std::thread::yield_now();
                }
                t2.commit().unwrap();
            });
            wait_for(1, "t2 never locked 1");
            let mut t1 = db.worker().unwrap();
            t1.begin();
            assert_eq!(t1.read(T, 3, |r| r[0]).unwrap(), Some(3));
            assert_eq!(held(&db, rb), (1, false));
            step.store(2, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(t1.read(T, 1, |r| r[0]).unwrap(), Some(8), "read after t2 committed");
            assert_eq!(cll(&t1), vec![(ka, false)]);
            t1.commit().unwrap();
            assert_eq!((held(&db, ra), held(&db, rb)), ((0, false), (0, false)));
            let mql = t1.local.mql.as_mut().unwrap();
            assert_eq!(mql.abandoned(), 1, "the cancelled request's node");
            mql.reclaim();
            assert_eq!(mql.abandoned(), 0, "t2's release passed through it");
        });
    }

    /// Under `validation-lock=nowait` a hot record locked in a conflicting mode aborts the
    /// access at once (lock-conflict); under the default the reader would wait.
    #[test]
    fn nowait_aborts_on_a_conflicting_hot_lock() {
        for lock in ["mql", "rwlock"] {
            nowait_aborts(lock);
        }
    }

    fn nowait_aborts(lock: &str) {
        let db = db_with(&[
            ("temperature-threshold", "1"),
            ("validation-lock", "nowait"),
            ("lock", lock),
        ]);
        heat(&db, 2, 1);
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.begin();
        assert_eq!(t1.update(T, 2, |r| r[0] = 8).unwrap(), Some(()));
        assert_eq!(held(&db, rec(&db, 2).0), (0, true), "a hot write locks in the read phase");
        t2.begin();
        assert_eq!(t2.read(T, 2, |r| r[0]).map_err(|a| a.reason), Err(AbortReason::LockConflict));
        t2.abort();
        t1.commit().unwrap();
        t2.begin();
        assert_eq!(t2.read(T, 2, |r| r[0]).unwrap(), Some(8));
        t2.commit().unwrap();
    }

    /// A transaction declared read-only reads a snapshot: a hot record gets no MOCC lock from
    /// it (an ordinary reader's read locks it), and a change it does not see neither fails it
    /// nor warms the record up.
    #[test]
    fn snapshot_readers_take_no_lock_and_warm_nothing() {
        for lock in ["mql", "rwlock"] {
            let db = db_with(&[
                ("temperature-threshold", "1"),
                ("snapshot-epochs", "1"),
                ("lock", lock),
            ]);
            let e = db.storage().epochs();
            e.advance();
            e.snapshots.refresh(e);
            heat(&db, 2, 1);
            let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
            r.begin();
            assert_eq!(r.read(T, 2, |x| x[0]).unwrap(), Some(2));
            assert_eq!(held(&db, rec(&db, 2).0), (1, false), "an ordinary read locks a hot record");
            r.commit().unwrap();
            r.begin_read_only();
            assert_ne!(r.ctx.snapshot, 0, "a boundary is published");
            assert_eq!(r.read(T, 2, |x| x[0]).unwrap(), Some(2));
            assert_eq!(held(&db, rec(&db, 2).0), (0, false), "a snapshot read locks nothing");
            assert!(r.local.cll.is_empty());
            w.begin();
            assert_eq!(w.update(T, 2, |x| x[0] = 9).unwrap(), Some(()));
            w.commit().unwrap();
            assert_eq!(r.read(T, 2, |x| x[0]).unwrap(), Some(2), "the snapshot's value");
            r.commit().expect("a snapshot reader validates nothing");
            let period = db.storage().epochs().global();
            assert_eq!(rec(&db, 2).0.temperature(period), 1, "not warmed up");
        }
    }
}
