//! The multi-version substrate and the protocols on it: snapshot reads, first updater wins, write
//! skew (what snapshot isolation permits, and what the serial safety net catches), aborted
//! versions, and garbage collection. Scripted interleavings: two workers stepped by the test, so
//! every outcome is exact.

use crate::common;

use std::time::Duration;
use txlab::prelude::*;
use txlab::protocols::ermia_ssi::ErmiaSsi;
use txlab::protocols::ermia_ssn::ErmiaSsn;
use txlab::protocols::hekaton::{Hekaton, HekatonWorker};
use txlab::protocols::si::{Si, SiWorker};

const T: TableId = TableId(0);

fn db() -> Database<Si> {
    db_of::<Si>()
}

fn db_of<P: Protocol>() -> Database<P> {
    let opts = DbOptions {
        max_workers: 8,
        epoch_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let db = common::database::<P>(&[TableSpec::new("t", 16, 1000)], opts);
    let mut l = db.loader();
    for k in 0..10 {
        l.insert(T, k, &row(k)).unwrap();
    }
    db
}

fn row(v: u64) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&v.to_le_bytes());
    r[8..].copy_from_slice(&(!v).to_le_bytes());
    r
}

/// The row's value, checking that its two halves belong together (a torn or recycled version
/// shows up here).
/// `N` workers of `db`, each in its own slot.
fn workers<const N: usize, P: Protocol>(db: &Database<P>) -> [P::Worker<'_>; N] {
    std::array::from_fn(|_| db.worker().unwrap())
}

fn val(r: &[u8]) -> u64 {
    let v = u64::from_le_bytes(r[..8].try_into().unwrap());
    assert_eq!(u64::from_le_bytes(r[8..].try_into().unwrap()), !v, "a row's halves disagree");
    v
}

fn txn<W: Worker, T>(w: &mut W, f: impl FnOnce(&mut W) -> Result<T, Abort>) -> T {
    w.begin();
    let out = f(w).expect("operation");
    w.commit().expect("commit");
    out
}

fn set<W: Worker>(w: &mut W, k: u64, v: u64) -> Result<Option<()>, Abort> {
    w.update(T, k, |r| r.copy_from_slice(&row(v)))
}

#[test]
fn a_snapshot_ignores_what_commits_after_it() {
    let db = db();
    let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
    r.begin();
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1));
    txn(&mut w, |w| {
        set(w, 1, 100)?;
        assert!(w.insert(T, 50, &row(50))?);
        assert!(w.delete(T, 2)?);
        Ok(())
    });
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1), "an update after the snapshot");
    assert_eq!(r.read(T, 50, val).unwrap(), None, "an insert after the snapshot");
    assert_eq!(r.read(T, 2, val).unwrap(), Some(2), "a delete after the snapshot");
    let mut keys = Vec::new();
    r.scan(T, 0, 100, 100, |k, v| {
        keys.push((k, val(v)));
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(keys, (0..10).map(|k| (k, k)).collect::<Vec<_>>(), "a scan reads the snapshot");
    r.commit().expect("a read-only transaction commits");
    // A new snapshot sees all of it.
    let now = txn(&mut r, |r| Ok((r.read(T, 1, val)?, r.read(T, 50, val)?, r.read(T, 2, val)?)));
    assert_eq!(now, (Some(100), Some(50), None));
}

#[test]
fn the_first_updater_wins() {
    let db = db();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    // Concurrent writers of one row: the second aborts at once.
    a.begin();
    b.begin();
    set(&mut a, 3, 30).unwrap();
    let e = set(&mut b, 3, 31).unwrap_err();
    assert_eq!(e.reason, AbortReason::WriteConflict);
    assert_eq!(b.delete(T, 3).unwrap_err().reason, AbortReason::WriteConflict);
    b.abort();
    a.commit().unwrap();
    // A writer whose snapshot predates a committed write of the row aborts too.
    b.begin();
    txn(&mut a, |a| set(a, 4, 40));
    assert_eq!(set(&mut b, 4, 41).unwrap_err().reason, AbortReason::WriteConflict);
    b.abort();
    // Other rows are independent.
    a.begin();
    b.begin();
    set(&mut a, 5, 50).unwrap();
    set(&mut b, 6, 60).unwrap();
    a.commit().unwrap();
    b.commit().unwrap();
    let got = txn(&mut a, |a| Ok([3, 4, 5, 6].map(|k| a.read(T, k, val).unwrap().unwrap())));
    assert_eq!(got, [30, 40, 50, 60]);
}

/// Write skew: each of two transactions reads both rows and writes the one the other does not;
/// snapshot isolation commits both, so "at least one of the two is 1" breaks.
#[test]
fn write_skew_commits() {
    let db = db();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    b.begin();
    let sum = |w: &mut SiWorker<'_>| {
        w.read(T, 1, val).unwrap().unwrap() + w.read(T, 2, val).unwrap().unwrap()
    };
    assert_eq!(sum(&mut a), 3);
    assert_eq!(sum(&mut b), 3);
    set(&mut a, 1, 0).unwrap();
    set(&mut b, 2, 0).unwrap();
    a.commit().expect("snapshot isolation does not see the skew");
    b.commit().expect("snapshot isolation does not see the skew");
    let after = txn(&mut a, |a| Ok((a.read(T, 1, val)?, a.read(T, 2, val)?)));
    assert_eq!(after, (Some(0), Some(0)));
}

/// The same write skew under SSN: the second committer's successor (the first, which
/// overwrote what it read) committed no later than its predecessor (the first again, which
/// read what it overwrites): its exclusion window is empty at pre-commit.
#[test]
fn ssn_aborts_write_skew_at_pre_commit() {
    let db = db_of::<ErmiaSsn>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    b.begin();
    for w in [&mut a, &mut b] {
        assert_eq!(w.read(T, 1, val).unwrap(), Some(1));
        assert_eq!(w.read(T, 2, val).unwrap(), Some(2));
    }
    set(&mut a, 1, 0).unwrap();
    set(&mut b, 2, 0).unwrap();
    a.commit().expect("the first committer has no successor yet");
    assert_eq!(b.commit().unwrap_err().reason, AbortReason::ExclusionWindow);
    let after = txn(&mut a, |a| Ok((a.read(T, 1, val)?, a.read(T, 2, val)?)));
    assert_eq!(after, (Some(0), Some(2)));
}

/// When the first committer is done before the second reads, the second learns both stamps
/// during its run and aborts at the write that closes the window, before pre-commit.
#[test]
fn ssn_aborts_write_skew_early() {
    let db = db_of::<ErmiaSsn>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    b.begin();
    txn(&mut a, |a| {
        assert_eq!(a.read(T, 2, val)?, Some(2));
        set(a, 1, 0)
    });
    // b's snapshot predates a: it reads the old row 1, whose overwriter committed.
    assert_eq!(b.read(T, 1, val).unwrap(), Some(1));
    // Row 2 was read by a, so overwriting it makes a a predecessor too.
    assert_eq!(set(&mut b, 2, 0).unwrap_err().reason, AbortReason::ExclusionWindow);
    b.abort();
}

/// A stale read is not an anomaly by itself: a transaction that read a row another then
/// overwrote and committed serializes before it, and commits.
#[test]
fn ssn_commits_a_stale_reader_that_closes_no_cycle() {
    let db = db_of::<ErmiaSsn>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    assert_eq!(a.read(T, 1, val).unwrap(), Some(1));
    txn(&mut b, |b| set(b, 1, 10));
    assert_eq!(a.read(T, 1, val).unwrap(), Some(1), "a reads its snapshot");
    set(&mut a, 2, 20).unwrap();
    a.commit().expect("a serializes before b");
    // And a read-only transaction with such a stale read commits too.
    a.begin();
    assert_eq!(a.read(T, 3, val).unwrap(), Some(3));
    txn(&mut b, |b| set(b, 3, 30));
    assert_eq!(a.read(T, 3, val).unwrap(), Some(3));
    a.commit().expect("a read-only transaction before b");
    let after = txn(&mut a, |a| Ok([1, 2, 3].map(|k| a.read(T, k, val).unwrap().unwrap())));
    assert_eq!(after, [10, 20, 30]);
}

/// Write skew through absence: each transaction checks that a key is absent and inserts
/// another. The phantom buckets make the second committer abort.
#[test]
fn ssn_aborts_write_skew_through_absent_keys() {
    let db = db_of::<ErmiaSsn>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    b.begin();
    assert_eq!(a.read(T, 20, val).unwrap(), None);
    assert_eq!(b.read(T, 21, val).unwrap(), None);
    assert!(a.insert(T, 21, &row(21)).unwrap());
    assert!(b.insert(T, 20, &row(20)).unwrap());
    a.commit().expect("the first committer");
    assert_eq!(b.commit().unwrap_err().reason, AbortReason::PhantomValidation);
}

/// A read of an absence whose row the GC has unlinked still learns who made it absent. `t3`
/// reads key 5 and overwrites key 3; `d` deletes key 5 and commits first (`t3 -rw-> d`); `r`
/// begins after `d`, and finds key 5 absent once `d`'s GC has unlinked the row (`d -wr-> r`),
/// then reads key 3's version from before `t3` (`r -rw-> t3`): a cycle. `r`'s successor stamp
/// is `d`'s commit timestamp (through `t3`); without the deletion's timestamp handed to the
/// bucket, nothing `r` read would name `d` as its predecessor and it would commit.
#[test]
fn ssn_learns_the_deleter_of_an_unlinked_row() {
    let db = db_of::<ErmiaSsn>();
    let [mut t3, mut d, mut r] = workers(&db);
    t3.begin();
    assert_eq!(t3.read(T, 5, val).unwrap(), Some(5));
    assert!(txn(&mut d, |w| w.delete(T, 5)));
    // `r` begins in a later storage epoch than the deletion's, so that its own epoch does not
    // hold the unlinking back.
    let epochs = db.storage().epochs();
    let (start, e) = (std::time::Instant::now(), epochs.global());
    while epochs.global() < e + 2 {
        assert!(start.elapsed() < LIVENESS, "the epoch never advanced (deadlock detector)");
        std::thread::sleep(Duration::from_millis(1));
    }
    r.begin();
    set(&mut t3, 3, 30).unwrap();
    t3.commit().expect("t3's only successor committed, and no predecessor after it");
    // `d`'s worker collects its garbage at the begin of its transactions.
    let g = txlab::storage::index::pin();
    while db.storage().try_table(T).unwrap().index.get(5, &g).is_some() {
        assert!(
            start.elapsed() < LIVENESS,
            "the deleted row is never unlinked (deadlock detector)"
        );
        txn(&mut d, |_| Ok(()));
        std::thread::sleep(Duration::from_micros(100));
    }
    assert_eq!(r.read(T, 5, val).unwrap(), None);
    assert_eq!(r.read(T, 3, val).unwrap(), Some(3), "r's snapshot predates t3");
    assert_eq!(r.commit().unwrap_err().reason, AbortReason::ExclusionWindow);
}

/// Fekete's read-only anomaly with the report declared read-only: it reads at the watermark,
/// which the withdrawal `t2` (still running, snapshot before the deposit `t1`) holds below the
/// deposit, so it sees neither and every transaction commits in the serial order report, t2,
/// t1. Then `t2` has committed after its successor `t1` (a back edge) above a watermark held
/// down by `old`: a read-only transaction falls back to the newest snapshot (and certification),
/// and sees both.
fn read_only_reads_a_safe_snapshot<P: Protocol>() {
    let db = db_of::<P>();
    let mut ws: Vec<_> = (0..5).map(|_| db.worker().unwrap()).collect();
    let [old, t1, t2, r, r2] = &mut ws[..] else { unreachable!() };
    old.begin();
    assert_eq!(old.read(T, 5, val).unwrap(), Some(5));
    t2.begin();
    assert_eq!((t2.read(T, 1, val).unwrap(), t2.read(T, 2, val).unwrap()), (Some(1), Some(2)));
    txn(t1, |w| set(w, 1, 100));
    r.begin_read_only();
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1), "the safe snapshot predates t1");
    assert_eq!(r.read(T, 2, val).unwrap(), Some(2));
    set(t2, 2, 200).unwrap();
    t2.commit().expect("t2 has no predecessor after its successor t1");
    r.commit().expect("a read-only transaction at a safe snapshot is not certified");
    r2.begin_read_only();
    assert_eq!(r2.read(T, 1, val).unwrap(), Some(100), "t2's back edge is above the watermark");
    assert_eq!(r2.read(T, 2, val).unwrap(), Some(200));
    assert_eq!(set(r2, 3, 30).unwrap_err().reason, AbortReason::ReadOnlyWrite);
    r2.commit().unwrap();
    old.commit().unwrap();
}

#[test]
fn ssn_read_only_reads_a_safe_snapshot() {
    read_only_reads_a_safe_snapshot::<ErmiaSsn>();
}

#[test]
fn ssi_read_only_reads_a_safe_snapshot() {
    read_only_reads_a_safe_snapshot::<ErmiaSsi>();
}

/// A read-only transaction at a safe snapshot sees its own worker's last commit, and a worker
/// that runs nothing but read-only transactions sees the watermark move past what another
/// committed (its own published snapshot does not hold the refresh back). Without either, a
/// TPC-C worker whose reconnaissance reads the latest data retried a Stock-Level forever once
/// the other workers had finished.
fn read_only_snapshots_keep_up<P: Protocol>() {
    let db = db_of::<P>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    txn(&mut a, |w| set(w, 1, 100));
    a.begin_read_only();
    assert_eq!(a.read(T, 1, val).unwrap(), Some(100), "a worker reads its own last commit");
    a.commit().unwrap();
    txn(&mut b, |w| set(w, 2, 200));
    // Longer than the GC interval: the next begin refreshes the watermark.
    std::thread::sleep(Duration::from_millis(2));
    a.begin_read_only();
    assert_eq!(a.read(T, 2, val).unwrap(), Some(200), "the watermark passed b's commit");
    a.commit().unwrap();
}

#[test]
fn ssn_read_only_snapshots_keep_up() {
    read_only_snapshots_keep_up::<ErmiaSsn>();
}

#[test]
fn ssi_read_only_snapshots_keep_up() {
    read_only_snapshots_keep_up::<ErmiaSsi>();
}

/// A transaction declared read-only cannot write, under any protocol: the worker of a
/// multi-version protocol refuses, and so does the procedure layer for the others.
#[test]
fn read_only_transactions_refuse_writes() {
    let db = db();
    let mut w = db.worker().unwrap();
    w.begin_read_only();
    assert_eq!(w.read(T, 1, val).unwrap(), Some(1), "si reads the newest snapshot");
    assert_eq!(set(&mut w, 1, 10).unwrap_err().reason, AbortReason::ReadOnlyWrite);
    assert_eq!(w.delete(T, 1).unwrap_err().reason, AbortReason::ReadOnlyWrite);
    assert_eq!(w.insert(T, 50, &row(50)).unwrap_err().reason, AbortReason::ReadOnlyWrite);
    w.abort();
    txn(&mut w, |w| set(w, 1, 10)).expect("the next transaction writes");
    let silo = db_of::<txlab::protocols::silo::Silo>();
    let mut s = silo.worker().unwrap();
    let ty = TxnType { name: "report", pieces: &[] };
    s.begin_read_only();
    let checks = txlab::engine::Checks { read_only: true, ..Default::default() };
    let mut tx = Tx::new(&mut s, &ty, checks);
    assert_eq!(tx.read(T, 1, val).unwrap(), Some(1));
    assert_eq!(tx.write(T, 1, &row(2)).unwrap_err().reason, AbortReason::ReadOnlyWrite);
    assert_eq!(tx.read_for_update(T, 1, val).unwrap_err().reason, AbortReason::ReadOnlyWrite);
    s.abort();
}

/// Write skew under SSI: the second committer is the pivot of a cycle of two (its successor,
/// the first committer, read what it overwrites).
#[test]
fn ssi_aborts_write_skew_as_a_dangerous_structure() {
    let db = db_of::<ErmiaSsi>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    b.begin();
    for w in [&mut a, &mut b] {
        assert_eq!(w.read(T, 1, val).unwrap(), Some(1));
        assert_eq!(w.read(T, 2, val).unwrap(), Some(2));
    }
    set(&mut a, 1, 0).unwrap();
    set(&mut b, 2, 0).unwrap();
    a.commit().expect("the first committer");
    assert_eq!(b.commit().unwrap_err().reason, AbortReason::DangerousStructure);
    let after = txn(&mut a, |a| Ok((a.read(T, 1, val)?, a.read(T, 2, val)?)));
    assert_eq!(after, (Some(0), Some(2)));
}

/// The structure `t1 -rw-> t2 -rw-> t3` with `t3` first, closed by `t3 -wr-> t1`: `t2` commits
/// (no reader of what it overwrote is known yet), and `t1` aborts at the read of `t2`'s old
/// version, whose overwriter committed with a successor stamp.
#[test]
fn ssi_aborts_the_reader_of_a_committed_pivot() {
    let db = db_of::<ErmiaSsi>();
    let [mut t1, mut t2, mut t3] = workers(&db);
    t2.begin();
    assert_eq!(t2.read(T, 1, val).unwrap(), Some(1));
    txn(&mut t3, |w| set(w, 1, 10));
    t1.begin();
    assert_eq!(t1.read(T, 1, val).unwrap(), Some(10), "t1 sees t3");
    set(&mut t2, 2, 20).unwrap();
    t2.commit().expect("the pivot has no known reader");
    assert_eq!(t1.read(T, 2, val).unwrap_err().reason, AbortReason::DangerousStructure);
    t1.abort();
}

/// A pivot whose successor committed first aborts while a reader of what it overwrites is still
/// running (ERMIA keeps the reader's work), and the reader then commits.
#[test]
fn ssi_aborts_a_pivot_with_a_running_reader() {
    let db = db_of::<ErmiaSsi>();
    let [mut r, mut p, mut s] = workers(&db);
    r.begin();
    assert_eq!(r.read(T, 2, val).unwrap(), Some(2));
    p.begin();
    assert_eq!(p.read(T, 1, val).unwrap(), Some(1));
    txn(&mut s, |w| set(w, 1, 10));
    set(&mut p, 2, 20).unwrap();
    assert_eq!(p.commit().unwrap_err().reason, AbortReason::DangerousStructure);
    r.commit().expect("the reader survives");
}

/// ERMIA's read optimisation with every unoverwritten version old (`old-version-age=0`): the
/// reads of transactions declared read-mostly leave no reader mark.
const UNMARKED: &[(&str, &str)] = &[("old-version-age", "0")];

/// Without the read optimisation: every read is marked.
const MARKED: &[(&str, &str)] = &[("old-version-age", "off")];

/// A read-mostly transaction: begun with `begin_read_mostly`, reads `keys`, commits.
fn read_mostly<W: Worker>(w: &mut W, keys: &[u64]) -> Vec<Option<u64>> {
    w.begin_read_mostly();
    let seen = keys.iter().map(|&k| w.read(T, k, val).unwrap()).collect();
    w.commit().expect("the read-mostly transaction commits");
    seen
}

/// Write skew between two read-mostly transactions reading unmarked: the second committer
/// learns its successor from its unmarked read of the first committer's row at pre-commit, and
/// finds the first committer's worker's last unmarked-reading commit at that successor's
/// timestamp.
#[test]
fn ssi_aborts_write_skew_between_unmarked_readers() {
    common::with_options(UNMARKED, || {
        let db = db_of::<ErmiaSsi>();
        let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
        a.begin_read_mostly();
        b.begin_read_mostly();
        for w in [&mut a, &mut b] {
            assert_eq!(w.read(T, 1, val).unwrap(), Some(1));
            assert_eq!(w.read(T, 2, val).unwrap(), Some(2));
        }
        set(&mut a, 1, 0).unwrap();
        set(&mut b, 2, 0).unwrap();
        a.commit().expect("the first committer");
        assert_eq!(b.commit().unwrap_err().reason, AbortReason::DangerousStructure);
    });
}

/// A pivot whose successor committed first aborts while an unmarked reader of what it
/// overwrites is running (the reader's snapshot is at or below the version's `bstamp`); the
/// reader then commits.
#[test]
fn ssi_aborts_a_pivot_with_a_running_unmarked_reader() {
    common::with_options(UNMARKED, || {
        let db = db_of::<ErmiaSsi>();
        let [mut r, mut p, mut s] = workers(&db);
        r.begin_read_mostly();
        assert_eq!(r.read(T, 2, val).unwrap(), Some(2));
        p.begin();
        assert_eq!(p.read(T, 1, val).unwrap(), Some(1));
        txn(&mut s, |w| set(w, 1, 10));
        set(&mut p, 2, 20).unwrap();
        assert_eq!(p.commit().unwrap_err().reason, AbortReason::DangerousStructure);
        r.commit().expect("the reader survives");
    });
}

/// An unmarked reader whose snapshot is a few commits above a version's `bstamp` leaves the
/// stamp as it is (`BSTAMP_SLACK`): a pivot still counts it as a reader while it runs.
#[test]
fn ssi_aborts_a_pivot_with_a_running_reader_that_left_bstamp_alone() {
    common::with_options(UNMARKED, || {
        let db = db_of::<ErmiaSsi>();
        let [mut r1, mut r2, mut p, mut s] = workers(&db);
        let (r1, r2, p, s) = (&mut r1, &mut r2, &mut p, &mut s);
        assert_eq!(read_mostly(r1, &[2]), [Some(2)], "bstamp: r1's snapshot");
        for v in 0..3 {
            txn(s, |w| set(w, 3, 30 + v));
        }
        r2.begin_read_mostly();
        assert_eq!(r2.read(T, 2, val).unwrap(), Some(2), "three commits above bstamp");
        p.begin();
        assert_eq!(p.read(T, 1, val).unwrap(), Some(1));
        txn(s, |w| set(w, 1, 10));
        set(p, 2, 20).unwrap();
        assert_eq!(p.commit().unwrap_err().reason, AbortReason::DangerousStructure);
        r2.commit().expect("the reader survives");
    });
}

/// The read-only anomaly with unmarked reads: `r` sees the successor `s` and reads, unmarked,
/// the old version the pivot `p` then overwrites, and commits at its snapshot before `p`
/// certifies. `p` finds `r`'s worker's last unmarked-reading commit at or above its
/// successor's timestamp and aborts: the cycle `r -rw-> p -rw-> s -wr-> r` would close.
#[test]
fn ssi_aborts_a_pivot_whose_unmarked_reader_committed_after_its_successor() {
    common::with_options(UNMARKED, || {
        let db = db_of::<ErmiaSsi>();
        let [mut r, mut p, mut s] = workers(&db);
        p.begin();
        assert_eq!(p.read(T, 1, val).unwrap(), Some(1));
        txn(&mut s, |w| set(w, 1, 10));
        assert_eq!(read_mostly(&mut r, &[1, 2]), [Some(10), Some(2)], "r sees s, not p");
        set(&mut p, 2, 20).unwrap();
        assert_eq!(p.commit().unwrap_err().reason, AbortReason::DangerousStructure);
    });
}

/// The structure `t1 -rw-> t2 -rw-> t3` with `t3` first: the pivot `t2` commits (no reader of
/// what it overwrote is known yet), and `t1`, reading unmarked, aborts at its read of `t2`'s
/// old version, whose overwriter committed with a successor stamp.
#[test]
fn ssi_aborts_the_unmarked_reader_of_a_committed_pivot() {
    common::with_options(UNMARKED, || {
        let db = db_of::<ErmiaSsi>();
        let [mut t1, mut t2, mut t3] = workers(&db);
        t2.begin();
        assert_eq!(t2.read(T, 1, val).unwrap(), Some(1));
        txn(&mut t3, |w| set(w, 1, 10));
        t1.begin_read_mostly();
        assert_eq!(t1.read(T, 1, val).unwrap(), Some(10), "t1 sees t3");
        set(&mut t2, 2, 20).unwrap();
        t2.commit().expect("the pivot has no known reader");
        assert_eq!(t1.read(T, 2, val).unwrap_err().reason, AbortReason::DangerousStructure);
        t1.abort();
    });
}

/// An unmarked reader that committed before the pivot's successor closes no cycle: the pivot
/// commits, as it does when the read is marked (through `rstamp`).
fn ssi_commits_a_pivot_whose_reader_finished_before_its_successor() {
    let db = db_of::<ErmiaSsi>();
    let [mut r, mut p, mut s] = workers(&db);
    p.begin();
    assert_eq!(p.read(T, 1, val).unwrap(), Some(1));
    assert_eq!(read_mostly(&mut r, &[2]), [Some(2)]);
    txn(&mut s, |w| set(w, 1, 10));
    set(&mut p, 2, 20).unwrap();
    p.commit().expect("r -rw-> p -rw-> s is serial in that order");
    assert_eq!(read_mostly(&mut r, &[1, 2]), [Some(10), Some(20)]);
}

#[test]
fn ssi_commits_a_pivot_whose_marked_reader_finished_before_its_successor() {
    common::with_options(MARKED, ssi_commits_a_pivot_whose_reader_finished_before_its_successor);
}

#[test]
fn ssi_commits_a_pivot_whose_unmarked_reader_finished_before_its_successor() {
    common::with_options(UNMARKED, ssi_commits_a_pivot_whose_reader_finished_before_its_successor);
}

/// What unmarked reads give up: a pivot knows of an unmarked reader only its snapshot bound
/// (`bstamp`) and what its worker published about its last unmarked-reading commit. Here `r1`
/// read row 2 and committed before the pivot's successor, and the same worker's `r2`, which
/// never read row 2, committed after it: marked, the pivot learns `r1`'s commit timestamp from
/// row 2 and commits; unmarked, it cannot tell `r1` from `r2` and aborts.
fn pivot_after_a_workers_two_readers() -> Result<(), Abort> {
    let db = db_of::<ErmiaSsi>();
    let [mut r, mut p, mut s] = workers(&db);
    p.begin();
    assert_eq!(p.read(T, 1, val).unwrap(), Some(1));
    assert_eq!(read_mostly(&mut r, &[2]), [Some(2)]);
    txn(&mut s, |w| set(w, 1, 10));
    assert_eq!(read_mostly(&mut r, &[3]), [Some(3)]);
    set(&mut p, 2, 20).unwrap();
    p.commit()
}

#[test]
fn ssi_tells_unmarked_readers_apart_per_worker_only() {
    let marked = common::with_options(MARKED, pivot_after_a_workers_two_readers);
    marked.expect("marked: r1's commit is on row 2");
    let unmarked = common::with_options(UNMARKED, pivot_after_a_workers_two_readers);
    assert_eq!(unmarked.unwrap_err().reason, AbortReason::DangerousStructure);
}

/// Only versions at least `old-version-age` commits old are read unmarked, and only by
/// transactions declared read-mostly: the pivot commits with a threshold above every version's
/// age, and with every version old when the readers are not declared read-mostly.
#[test]
fn ssi_marks_young_versions_and_the_reads_of_other_transactions() {
    let young = common::with_options(&[("old-version-age", "1000000")], || {
        pivot_after_a_workers_two_readers()
    });
    young.expect("every version is young: marked");
    common::with_options(UNMARKED, || {
        let db = db_of::<ErmiaSsi>();
        let [mut r, mut p, mut s] = workers(&db);
        p.begin();
        assert_eq!(p.read(T, 1, val).unwrap(), Some(1));
        assert_eq!(txn(&mut r, |w| w.read(T, 2, val)), Some(2));
        txn(&mut s, |w| set(w, 1, 10));
        assert_eq!(txn(&mut r, |w| w.read(T, 3, val)), Some(3));
        set(&mut p, 2, 20).unwrap();
        p.commit().expect("r's reads are marked: not read-mostly");
    });
}

/// Hekaton validates its reads at its commit timestamp: a version read and replaced by a
/// transaction that committed first aborts the reader; one replaced after it commits does not.
#[test]
fn hekaton_aborts_a_reader_whose_version_was_replaced() {
    let db = db_of::<Hekaton>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    assert_eq!(a.read(T, 1, val).unwrap(), Some(1));
    set(&mut a, 2, 20).unwrap();
    txn(&mut b, |w| set(w, 1, 10));
    assert_eq!(a.commit().unwrap_err().reason, AbortReason::ReadValidation);
    // The same with the replacement after the reader's commit.
    a.begin();
    b.begin();
    assert_eq!(a.read(T, 1, val).unwrap(), Some(10));
    set(&mut a, 2, 20).unwrap();
    set(&mut b, 1, 11).unwrap();
    a.commit().expect("the replacement is not committed");
    b.commit().expect("b serializes after a");
    // A transaction that writes nothing commits at its snapshot, replaced reads or not.
    a.begin();
    assert_eq!(a.read(T, 1, val).unwrap(), Some(11));
    txn(&mut b, |w| set(w, 1, 12));
    a.commit().expect("a read-only transaction is not validated");
}

/// Hekaton repeats its scans at its commit timestamp: a key inserted into a scanned range, or
/// a key that a point read found absent, by a transaction that committed first, aborts the
/// scanner; a transaction that writes nothing commits at its snapshot.
#[test]
fn hekaton_repeats_its_scans() {
    let db = db_of::<Hekaton>();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    let scan = |w: &mut HekatonWorker<'_>| {
        w.scan(T, 0, 99, 100, |_, _| std::ops::ControlFlow::Continue(())).unwrap()
    };
    a.begin();
    assert_eq!(scan(&mut a), 10);
    set(&mut a, 1, 10).unwrap();
    txn(&mut b, |w| w.insert(T, 50, &row(50)));
    assert_eq!(a.commit().unwrap_err().reason, AbortReason::PhantomValidation);
    a.begin();
    assert_eq!(a.read(T, 60, val).unwrap(), None);
    set(&mut a, 1, 10).unwrap();
    txn(&mut b, |w| w.insert(T, 60, &row(60)));
    assert_eq!(a.commit().unwrap_err().reason, AbortReason::PhantomValidation);
    // A limit ends the range at the last key handed out: inserts beyond it are no phantom.
    a.begin();
    let n = a.scan(T, 0, 99, 3, |_, _| std::ops::ControlFlow::Continue(())).unwrap();
    assert_eq!(n, 3);
    set(&mut a, 1, 10).unwrap();
    txn(&mut b, |w| w.insert(T, 70, &row(70)));
    a.commit().expect("the scan covered keys 0 to 2");
    a.begin();
    assert_eq!(scan(&mut a), 13);
    txn(&mut b, |w| w.insert(T, 80, &row(80)));
    a.commit().expect("a read-only transaction is not validated");
}

/// Runs a transaction (`body`, then its commit) on a worker of its own thread, and returns once
/// the transaction is preparing (its commit timestamp drawn): it stays there until the returned
/// sender lets it go on.
fn preparing<'s, 'db: 's>(
    s: &'s std::thread::Scope<'s, '_>,
    db: &'db Database<Hekaton>,
    body: impl FnOnce(&mut HekatonWorker<'db>) -> Result<(), Abort> + Send + 's,
) -> (std::thread::ScopedJoinHandle<'s, Result<(), Abort>>, std::sync::mpsc::SyncSender<()>) {
    let (prepared_tx, prepared) = std::sync::mpsc::sync_channel(1);
    let (go, go_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let t = s.spawn(move || {
        let mut w = db.worker().unwrap();
        w.on_prepared(move |_| {
            prepared_tx.send(()).unwrap();
            go_rx
                .recv_timeout(LIVENESS)
                .expect("the test never let the commit go on (deadlock detector)");
        });
        w.begin();
        body(&mut w).unwrap();
        w.commit()
    });
    prepared.recv_timeout(LIVENESS).expect("the transaction never prepared (deadlock detector)");
    (t, go)
}

/// Runs a transaction on a worker of its own thread: `body` (whose result is sent back at
/// once), then its commit (the thread's result). `read_only` declares it.
fn reading<'s, 'db: 's, T: Send + 's>(
    s: &'s std::thread::Scope<'s, '_>,
    db: &'db Database<Hekaton>,
    read_only: bool,
    body: impl FnOnce(&mut HekatonWorker<'db>) -> T + Send + 's,
) -> (std::thread::ScopedJoinHandle<'s, Result<(), Abort>>, T) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = s.spawn(move || {
        let mut w = db.worker().unwrap();
        if read_only {
            w.begin_read_only();
        } else {
            w.begin();
        }
        tx.send(body(&mut w)).unwrap();
        w.commit()
    });
    (t, rx.recv_timeout(LIVENESS).expect("the transaction never ran (deadlock detector)"))
}

/// A transaction that read a preparing transaction's version waits at its commit for that
/// transaction, and commits after it; meanwhile it has not committed.
#[test]
fn hekaton_waits_for_its_commit_dependency() {
    let db = db_of::<Hekaton>();
    std::thread::scope(|s| {
        let (ta, go) = preparing(s, &db, |a| set(a, 1, 100).map(drop));
        let (tb, seen) = reading(s, &db, false, |b| {
            let seen = b.read(T, 1, val).unwrap();
            set(b, 2, 200).unwrap();
            seen
        });
        assert_eq!(seen, Some(100), "a speculative read");
        std::thread::sleep(Duration::from_millis(20));
        assert!(!tb.is_finished(), "b committed before the transaction it read from");
        go.send(()).unwrap();
        ta.join().unwrap().expect("a commits");
        tb.join().unwrap().expect("b commits after a");
    });
    let mut w = db.worker().unwrap();
    let now = txn(&mut w, |w| Ok((w.read(T, 1, val)?, w.read(T, 2, val)?)));
    assert_eq!(now, (Some(100), Some(200)));
}

/// A preparing transaction that fails its validation takes down whoever read its versions,
/// writer or declared read-only (`cascading-abort`), and its versions vanish.
#[test]
fn hekaton_cascades_an_abort_to_its_dependents() {
    let db = db_of::<Hekaton>();
    std::thread::scope(|s| {
        let dbr = &db;
        let (ta, go) = preparing(s, &db, move |a| {
            assert_eq!(a.read(T, 3, val)?, Some(3));
            set(a, 1, 100)?;
            // Replaced before `a` draws its commit timestamp: `a`'s validation fails.
            txn(&mut dbr.worker().unwrap(), |w| set(w, 3, 30));
            Ok(())
        });
        let (tb, seen) = reading(s, &db, false, |b| {
            let seen = b.read(T, 1, val).unwrap();
            set(b, 2, 200).unwrap();
            seen
        });
        assert_eq!(seen, Some(100), "a speculative read");
        let (tr, seen) = reading(s, &db, true, |r| r.read(T, 1, val).unwrap());
        assert_eq!(seen, Some(100), "a speculative read");
        go.send(()).unwrap();
        assert_eq!(ta.join().unwrap().unwrap_err().reason, AbortReason::ReadValidation);
        assert_eq!(tb.join().unwrap().unwrap_err().reason, AbortReason::CascadingAbort);
        assert_eq!(tr.join().unwrap().unwrap_err().reason, AbortReason::CascadingAbort);
    });
    let mut w = db.worker().unwrap();
    let now = txn(&mut w, |w| Ok((w.read(T, 1, val)?, w.read(T, 2, val)?, w.read(T, 3, val)?)));
    assert_eq!(now, (Some(1), Some(2), Some(30)));
}

#[test]
fn aborted_versions_vanish_and_free_the_row() {
    let db = db();
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    set(&mut a, 7, 70).unwrap();
    assert!(a.insert(T, 60, &row(60)).unwrap());
    assert!(a.delete(T, 8).unwrap());
    assert_eq!(a.read(T, 7, val).unwrap(), Some(70), "a transaction reads its own writes");
    b.begin();
    assert_eq!(b.read(T, 7, val).unwrap(), Some(7), "a pending version is invisible");
    assert_eq!(b.read(T, 60, val).unwrap(), None);
    assert_eq!(b.read(T, 8, val).unwrap(), Some(8));
    a.abort();
    // The rows are free for writers whose snapshot predates the abort.
    set(&mut b, 7, 71).unwrap();
    assert!(b.insert(T, 60, &row(61)).unwrap());
    assert!(b.delete(T, 8).unwrap());
    b.commit().unwrap();
    let got = txn(&mut a, |a| Ok((a.read(T, 7, val)?, a.read(T, 60, val)?, a.read(T, 8, val)?)));
    assert_eq!(got, (Some(71), Some(61), None));
}

/// How long a test waits for the GC before it reports a deadlock: minutes, far beyond what a
/// loaded machine needs.
const LIVENESS: Duration = Duration::from_secs(300);

/// Updates the loaded rows `n` times from one worker.
fn churn(w: &mut SiWorker<'_>, n: u64) {
    for i in 0..n {
        txn(w, |w| set(w, i % 10, i + 1000));
    }
}

/// `rounds` rounds of 10 000 updates, each followed by a wait for three epoch advances (and so
/// for the GC's watermark interval): freed versions wait two epoch grace periods, and the epoch
/// thread's pace relative to the worker's is the machine's business. With the waits, what the
/// GC keeps is bounded by a round or two whatever the speeds.
fn churn_rounds(db: &Database<Si>, w: &mut SiWorker<'_>, rounds: u64) {
    let epochs = db.storage().epochs();
    for _ in 0..rounds {
        churn(w, 10_000);
        let (start, e) = (std::time::Instant::now(), epochs.global());
        while epochs.global() < e + 3 {
            assert!(start.elapsed() < LIVENESS, "the epoch never advanced (deadlock detector)");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Versions cut so far.
fn carved(db: &Database<Si>) -> u64 {
    db.protocol().substrate().carved_versions()
}

fn versions_are_reclaimed_and_reused() {
    let db = db();
    let mut w = db.worker().unwrap();
    // 200 000 updates of 10 rows: without reclamation, 200 000 versions.
    churn_rounds(&db, &mut w, 20);
    let n = carved(&db);
    assert!(n < 50_000, "{n} versions cut for 10 rows: versions are not reused");
}

/// The version report counts every chain exactly, and measures the GC lag of versions cut.
#[test]
fn the_version_report_counts_chains_and_gc_lag() {
    let db = db();
    let versions = || db.protocol().versions(&db).expect("si keeps versions");
    let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
    let size = versions().alive_bytes / 10;
    let first = versions();
    assert_eq!((first.rows, first.alive, first.longest_chain), (10, 10, 1));
    assert!(size >= 16, "a version holds at least its 16-byte payload ({size} bytes)");
    // A running reader keeps every version it may read.
    r.begin();
    for i in 0..3 {
        txn(&mut w, |w| set(w, 1, 100 + i));
    }
    let held = versions();
    assert_eq!((held.rows, held.alive, held.longest_chain), (10, 13, 4));
    assert_eq!(held.alive_bytes, 13 * size);
    assert!(held.carved >= 13 && held.carved_bytes == held.carved * size);
    r.commit().unwrap();
    // Once the reader is gone, the writer's GC cuts the chain back to one version, at the
    // begin of a transaction at least a millisecond after the writes.
    std::thread::sleep(Duration::from_millis(1));
    let start = std::time::Instant::now();
    while versions().alive > 10 {
        assert!(start.elapsed() < LIVENESS, "the chain is never pruned (deadlock detector)");
        txn(&mut w, |w| w.read(T, 2, val));
        std::thread::sleep(Duration::from_micros(100));
    }
    drop((r, w));
    let after = versions();
    assert_eq!((after.alive, after.longest_chain), (10, 1));
    assert!(after.gc_lag_max_us >= 1000.0, "{after:?}");
    assert!(after.gc_lag_mean_us > 0.0 && after.gc_lag_mean_us <= after.gc_lag_max_us);
    assert_eq!(versions().gc_lag_max_us, 0.0, "each report covers the cuts since the last one");
}

/// Versions a departed worker left queued are pruned by a later one without counting the time
/// in between as GC lag (between the repeats of `txlab run`, other protocols take their turn).
#[test]
fn versions_left_by_departed_workers_add_no_gc_lag() {
    let db = db();
    let versions = || db.protocol().versions(&db).expect("si keeps versions");
    let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
    r.begin();
    for i in 0..3 {
        txn(&mut w, |w| set(w, 1, 100 + i));
    }
    // The writer leaves with its queue; the reader holds the versions until it goes too.
    drop(w);
    r.commit().unwrap();
    drop(r);
    assert_eq!(versions().longest_chain, 4);
    std::thread::sleep(Duration::from_millis(20));
    let mut late = db.worker().unwrap();
    let start = std::time::Instant::now();
    while versions().alive > 10 {
        assert!(start.elapsed() < LIVENESS, "the chain is never pruned (deadlock detector)");
        txn(&mut late, |w| w.read(T, 2, val));
    }
    drop(late);
    let after = versions();
    assert_eq!((after.alive, after.longest_chain), (10, 1), "the late worker pruned them");
    assert_eq!((after.gc_lag_mean_us, after.gc_lag_max_us), (0.0, 0.0), "{after:?}");
}

#[test]
fn versions_are_reclaimed_with_rapid_gc() {
    versions_are_reclaimed_and_reused();
}

/// A watermark refreshed every millisecond: more versions wait, still a bounded number.
#[test]
fn versions_are_reclaimed_with_a_slow_gc() {
    common::with_options(&[("gc-interval-us", "1000")], versions_are_reclaimed_and_reused);
}

/// A reader whose snapshot is older than every version but one of a row keeps that version
/// alive: the GC may cut only below it. Meanwhile the writer's pool recycles versions as fast as
/// the GC frees them, so a version freed too early would be overwritten and read torn or wrong.
#[test]
fn a_slow_reader_keeps_its_versions() {
    slow_reader_keeps_its_versions();
}

/// The same with freed versions poisoned (stamp 0, which every snapshot sees, and a payload no
/// writer wrote): a version freed while the reader can still reach it reads as poison at once.
#[test]
fn a_slow_reader_keeps_its_versions_poisoned() {
    common::with_options(&[("version-poison", "on")], slow_reader_keeps_its_versions);
}

fn slow_reader_keeps_its_versions() {
    let db = db();
    let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
    txn(&mut w, |w| set(w, 9, 900));
    r.begin();
    assert_eq!(r.read(T, 9, val).unwrap(), Some(900));
    for i in 0..20 {
        churn(&mut w, 2_000);
        txn(&mut w, |w| set(w, 9, i));
        assert_eq!(r.read(T, 9, val).unwrap(), Some(900), "round {i}: the snapshot's version");
        assert_eq!(r.read(T, 1, val).unwrap(), Some(1), "round {i}: a loaded version");
    }
    r.commit().unwrap();
    // Once the reader is gone, its versions go too: 100 000 more updates reuse them.
    let held = carved(&db);
    assert!(held > 20_000, "{held}: the reader held nothing back, so the test proved nothing");
    churn_rounds(&db, &mut w, 10);
    let after = carved(&db);
    assert!(
        after < held + 30_000,
        "{held} -> {after}: versions are not reclaimed after the reader"
    );
}

#[test]
fn too_many_workers_for_a_reader_bitmap_are_refused() {
    let opts = DbOptions { max_workers: 257, ..Default::default() };
    let err =
        Database::<ErmiaSsn>::with_options(&[TableSpec::new("t", 16, 10)], opts).err().unwrap();
    assert_eq!(
        err.to_string(),
        "ermia-ssn takes at most 256 workers (a version's reader bitmap has a bit per worker); \
         this database was asked for 257"
    );
}

#[test]
fn too_many_workers_for_a_pending_stamp_are_refused() {
    let opts = DbOptions { max_workers: 20_000, ..Default::default() };
    let err = Database::<Si>::with_options(&[TableSpec::new("t", 16, 10)], opts).err().unwrap();
    assert_eq!(
        err.to_string(),
        "si takes at most 16384 workers (a pending version's stamp names \
         its writer's slot in 14 bits); this database was asked for 20000"
    );
}

/// AggressiveGC's age bound in these tests, and a sleep safely past it.
const AGGRESSIVE_US: &str = "2000";
const PAST_THE_BOUND: Duration = Duration::from_millis(5);

/// `w` sets `k` to `v`, then lets the aggressive GC's clock samples pass the commit: a
/// refresh samples the clock after it, the bound passes, and the next begin refreshes and
/// prunes at the new mark (unless a protected snapshot holds it back).
fn commit_and_age<W: Worker>(w: &mut W, k: u64, v: u64) {
    txn(w, |w| set(w, k, v));
    // A sample is taken at most every 1/32 of the bound (62.5 us).
    std::thread::sleep(Duration::from_micros(200));
    txn(w, |w| w.read(T, 9, val));
    std::thread::sleep(PAST_THE_BOUND);
    txn(w, |w| w.read(T, 9, val));
}

/// AggressiveGC collects a version a running snapshot needs; the reader aborts with
/// `snapshot-too-old` instead of reading something else, only when its walk reaches the cut
/// and the row existed at its snapshot.
/// Its retry is protected: the GC then spares its snapshot's versions until it commits, and
/// only until then.
fn aggressive_gc_aborts_a_too_old_reader_once<P: Protocol>() {
    common::with_options(&[("aggressive-gc-us", AGGRESSIVE_US)], || {
        let db = db_of::<P>();
        let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
        r.begin();
        assert_eq!(r.read(T, 1, val).unwrap(), Some(1));
        // A row born after r's snapshot, whose first version the GC then cuts off.
        txn(&mut w, |w| w.insert(T, 50, &row(50)));
        txn(&mut w, |w| set(w, 50, 51));
        commit_and_age(&mut w, 1, 100);
        assert_eq!(r.read(T, 2, val).unwrap(), Some(2), "an unpruned row reads as before");
        assert_eq!(r.read(T, 50, val).unwrap(), None, "born after the snapshot: absent");
        let e = r.read(T, 1, val).unwrap_err();
        assert_eq!(e.reason, AbortReason::SnapshotTooOld);
        assert_eq!(e.to_string(), "transaction aborted: snapshot-too-old");
        r.abort();
        // The retry is protected: versions its snapshot sees outlive the bound.
        r.begin();
        assert_eq!(r.read(T, 1, val).unwrap(), Some(100));
        commit_and_age(&mut w, 1, 200);
        commit_and_age(&mut w, 1, 300);
        assert_eq!(r.read(T, 1, val).unwrap(), Some(100), "a protected snapshot was collected");
        r.commit().unwrap();
        // Committed: the next transaction is not protected any more.
        r.begin();
        assert_eq!(r.read(T, 1, val).unwrap(), Some(300));
        commit_and_age(&mut w, 1, 400);
        assert_eq!(r.read(T, 1, val).unwrap_err().reason, AbortReason::SnapshotTooOld);
        r.abort();
        // Without a running reader every chain is back to one version (key 50 is a row now).
        txn(&mut r, |r| r.read(T, 2, val));
        commit_and_age(&mut w, 1, 500);
        let v = db.protocol().versions(&db).unwrap();
        assert_eq!((v.alive, v.longest_chain), (11, 1), "{v:?}");
    });
}

#[test]
fn si_aggressive_gc_aborts_a_too_old_reader_once() {
    aggressive_gc_aborts_a_too_old_reader_once::<Si>();
}

#[test]
fn ssn_aggressive_gc_aborts_a_too_old_reader_once() {
    aggressive_gc_aborts_a_too_old_reader_once::<ErmiaSsn>();
}

#[test]
fn ssi_aggressive_gc_aborts_a_too_old_reader_once() {
    aggressive_gc_aborts_a_too_old_reader_once::<ErmiaSsi>();
}

#[test]
fn hekaton_aggressive_gc_aborts_a_too_old_reader_once() {
    aggressive_gc_aborts_a_too_old_reader_once::<Hekaton>();
}

/// Without AggressiveGC (the default) the same reader keeps its versions past any age.
#[test]
fn without_aggressive_gc_an_old_reader_keeps_its_versions() {
    let db = db();
    let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
    r.begin();
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1));
    commit_and_age(&mut w, 1, 100);
    commit_and_age(&mut w, 1, 200);
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1));
    r.commit().unwrap();
}

/// A worker that leaves hands its GC queues over: the rows it wrote while a reader held the
/// watermark back are pruned by whoever runs next, and the versions it had cut are freed.
#[test]
fn a_departed_workers_garbage_is_collected_by_the_others() {
    let db = db();
    let versions = || db.protocol().versions(&db).expect("si keeps versions");
    let mut r = db.worker().unwrap();
    r.begin();
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1));
    {
        let mut w = db.worker().unwrap();
        for i in 0..5 {
            txn(&mut w, |w| set(w, 1, 100 + i));
        }
    }
    assert_eq!(versions().longest_chain, 6, "the reader holds row 1's versions");
    r.commit().unwrap();
    // Longer than the GC interval: r's next begin refreshes the watermark, adopts the departed
    // worker's queue and prunes row 1.
    std::thread::sleep(Duration::from_millis(1));
    txn(&mut r, |r| r.read(T, 2, val));
    let v = versions();
    assert_eq!((v.alive, v.longest_chain), (10, 1), "{v:?}");
    let freed_before = db.protocol().substrate().carved_versions();
    // The cut versions are reused once their grace periods pass: more updates carve no more.
    let epochs = db.storage().epochs();
    let (start, e) = (std::time::Instant::now(), epochs.global());
    while epochs.global() < e + 3 {
        assert!(start.elapsed() < LIVENESS, "the epoch never advanced (deadlock detector)");
        std::thread::sleep(Duration::from_millis(1));
    }
    for i in 0..5 {
        txn(&mut r, |r| set(r, 3, i));
    }
    assert_eq!(db.protocol().substrate().carved_versions(), freed_before, "nothing was reused");
}

/// The version report counts declared read-only transactions at safe snapshots and at fresh
/// ones, and how stale the safe ones were: a safe snapshot held at a running transaction's
/// snapshot is as old as that transaction. (Whether x's second read-only transaction gets a
/// safe snapshot depends on whether a refresh ran after its write: either way it is counted.)
#[test]
fn read_only_staleness_is_reported() {
    let db = db_of::<ErmiaSsn>();
    let versions = || db.protocol().versions(&db).expect("ermia-ssn keeps versions");
    let [mut r, mut x, mut w] = workers(&db);
    r.begin();
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1));
    // r's snapshot holds the watermark, and is no longer the newest state once w commits: it
    // was last seen to be the newest before w's commit, and x reads at it 3 ms later.
    txn(&mut w, |w| set(w, 3, 30));
    std::thread::sleep(Duration::from_millis(3));
    x.begin_read_only();
    assert_eq!(x.read(T, 1, val).unwrap(), Some(1));
    x.commit().unwrap();
    r.commit().unwrap();
    txn(&mut x, |x| set(x, 2, 20));
    x.begin_read_only();
    assert_eq!(x.read(T, 2, val).unwrap(), Some(20));
    x.commit().unwrap();
    drop((r, x, w));
    let v = versions();
    assert_eq!(v.read_only_safe + v.read_only_fresh, 2, "{v:?}");
    let (mean, max) =
        (v.read_only_staleness_mean_us.unwrap(), v.read_only_staleness_max_us.unwrap());
    assert!(v.read_only_safe >= 1 && max >= 3000.0, "{v:?}");
    assert!(mean <= max, "{v:?}");
}
