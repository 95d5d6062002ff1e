//! Cicada's own rules, in scripted interleavings: workers stepped by the test (with external
//! consistency on, the default, a transaction that begins later has the larger timestamp), so
//! every outcome is exact. The version consistency check with CCBench's fix, waiting for pending
//! versions (and aborting instead with `wait=off`), early aborts and write-latest-version-only,
//! best-effort inlining and promotion, garbage collection, and read-only transactions at
//! `min_wts - 1`.

use crate::common;

use std::time::Duration;
use txlab::engine::ProtocolOptions;
use txlab::prelude::*;
use txlab::protocols::cicada::{Cicada, CicadaWorker};

const T: TableId = TableId(0);
/// A deadlock detector's bound, not a performance expectation.
const LIVENESS: Duration = Duration::from_secs(300);

fn fresh() -> Database<Cicada> {
    let opts = DbOptions {
        max_workers: 8,
        epoch_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let db = common::database::<Cicada>(&[TableSpec::new("t", 16, 100_000)], opts);
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

/// The row's value, checking that its two halves belong together.
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

fn reason(r: Result<(), Abort>) -> AbortReason {
    r.expect_err("the transaction must abort").reason
}

/// A writer with a smaller timestamp commits a version of a row between the version a reader
/// read and the reader's timestamp: the reader's validation finds a different version visible
/// and aborts. (The paper's check only looked at the version read, which is still committed;
/// CCBench §3.3 found the hole.) In the other order the writer aborts: the reader raised the
/// read timestamp of the version the writer would go in above.
#[test]
fn a_version_committed_below_a_readers_timestamp_fails_its_validation() {
    let db = fresh();
    let (mut w, mut r) = (db.worker().unwrap(), db.worker().unwrap());
    w.begin();
    r.begin();
    assert!(w.timestamp() < r.timestamp(), "external consistency orders the begins");
    assert_eq!(r.read(T, 1, val).unwrap(), Some(1));
    set(&mut r, 5, 50).unwrap();
    set(&mut w, 1, 100).unwrap();
    w.commit().expect("the writer commits: nobody read above it yet");
    assert_eq!(reason(r.commit()), AbortReason::ReadValidation);
    // The other order: the reader commits first, and the writer may not slip in below it.
    w.begin();
    r.begin();
    assert_eq!(r.read(T, 2, val).unwrap(), Some(2));
    set(&mut r, 6, 60).unwrap();
    r.commit().expect("the reader commits first");
    assert_eq!(set(&mut w, 2, 200).unwrap_err().reason, AbortReason::WriteConflict);
    w.abort();
    let mut c = db.worker().unwrap();
    let now = txn(&mut c, |c| Ok((c.read(T, 1, val)?, c.read(T, 2, val)?, c.read(T, 5, val)?)));
    assert_eq!(now, (Some(100), Some(2), Some(5)));
}

/// Runs a transaction that updates key 1 to 100 on a worker of its own thread, begun before the
/// caller goes on, and holds it after its validation (its version pending) until the returned
/// sender lets it commit.
fn pending<'s, 'db: 's>(
    s: &'s std::thread::Scope<'s, '_>,
    db: &'db Database<Cicada>,
) -> (std::thread::ScopedJoinHandle<'s, Result<(), Abort>>, std::sync::mpsc::SyncSender<()>) {
    let (validated_tx, validated) = std::sync::mpsc::sync_channel(1);
    let (go, go_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let t = s.spawn(move || {
        let mut w: CicadaWorker<'_> = db.worker().unwrap();
        w.on_validated(move |_| {
            validated_tx.send(()).unwrap();
            go_rx
                .recv_timeout(LIVENESS)
                .expect("the test never let the commit go on (deadlock detector)");
        });
        w.begin();
        set(&mut w, 1, 100).unwrap();
        w.commit()
    });
    validated.recv_timeout(LIVENESS).expect("the writer never validated (deadlock detector)");
    (t, go)
}

/// A reader above a pending version waits for it (it is likely to commit, §3.2) and reads what
/// it committed; with `wait=off` it aborts instead and the writer is unaffected.
#[test]
fn a_pending_version_below_the_timestamp_is_waited_for() {
    waited_for_or_aborted(&[]);
}

/// The writer of [`pending`], validated and held before its write phase, and a reader that
/// begins after it (a larger timestamp) on a database with options `opts`: the reader waits and
/// reads 100; with `wait=off` added it aborts with `write-conflict` and the writer commits.
fn waited_for_or_aborted(opts: &[(&str, &str)]) {
    let db = common::with_options(opts, fresh);
    std::thread::scope(|s| {
        let (tw, go) = pending(s, &db);
        let reader = s.spawn(|| {
            let mut r = db.worker().unwrap();
            r.begin();
            let seen = r.read(T, 1, val);
            r.commit().map(|()| seen)
        });
        // Whether or not the reader reached the pending write yet, it can only see 100.
        std::thread::sleep(Duration::from_millis(20));
        go.send(()).unwrap();
        tw.join().unwrap().expect("the writer commits");
        let seen = reader.join().unwrap().expect("the reader commits");
        assert_eq!(seen.unwrap(), Some(100), "the reader saw the pending write's outcome");
    });
    let no_wait: Vec<(&str, &str)> = opts.iter().copied().chain([("wait", "off")]).collect();
    let db = common::with_options(&no_wait, fresh);
    std::thread::scope(|s| {
        let (tw, go) = pending(s, &db);
        let mut r = db.worker().unwrap();
        r.begin();
        let seen = r.read(T, 1, val);
        assert_eq!(seen.unwrap_err().reason, AbortReason::WriteConflict);
        r.abort();
        go.send(()).unwrap();
        tw.join().unwrap().expect("the writer commits");
    });
}

/// On a fresh database with options `opts`: transaction `a` begins, then `b` (a larger
/// timestamp) sets row 3 to 30 and commits; `f` goes on with `a`, which is then rolled back if
/// still open.
fn after_a_later_commit<R>(opts: &[(&str, &str)], f: impl FnOnce(&mut CicadaWorker<'_>) -> R) -> R {
    let db = common::with_options(opts, fresh);
    let (mut a, mut b) = (db.worker().unwrap(), db.worker().unwrap());
    a.begin();
    b.begin();
    set(&mut b, 3, 30).unwrap();
    b.commit().unwrap();
    let out = f(&mut a);
    a.abort();
    out
}

/// Early abort (§3.2): a write whose visible version was read by a later transaction fails at
/// the write, not at commit; with `early-abort=off` it fails at commit. Write-latest-only: a
/// read-modify-write of a row with a newer committed version fails at once (with early aborts
/// off, so that the read timestamp does not decide first).
#[test]
fn early_aborts_happen_in_the_read_phase() {
    let scenario = |opts: &[(&str, &str)]| {
        after_a_later_commit(opts, |a| {
            let at_write = set(a, 3, 300).map(drop);
            let at_commit = if at_write.is_ok() { a.commit() } else { Ok(()) };
            (at_write.map_err(|e| e.reason), at_commit.map_err(|e| e.reason))
        })
    };
    let conflict = Err(AbortReason::WriteConflict);
    assert_eq!(scenario(&[]), (conflict, Ok(())), "early abort on the read timestamp");
    assert_eq!(scenario(&[("early-abort", "off")]), (conflict, Ok(())), "write-latest-only");
    let late = scenario(&[("early-abort", "off"), ("write-latest-only", "off")]);
    assert_eq!(late, (Ok(()), conflict), "validation catches it at commit");
}

/// Best-effort inlining (§3.3): loaded rows and new rows of a small table live in their heads,
/// so inserting takes no pooled version; with `inlining=off` every insert takes one. An update
/// of a row whose inlined version is in use takes a pooled one either way.
#[test]
fn small_rows_are_inlined_in_their_heads() {
    let carved = |opts: &[(&str, &str)]| {
        let db = common::with_options(opts, fresh);
        let mut w = db.worker().unwrap();
        for k in 100..200 {
            txn(&mut w, |w| w.insert(T, k, &row(k)).map(|ok| assert!(ok)));
        }
        let inserted = db.protocol().versions(&db).unwrap().carved;
        txn(&mut w, |w| set(w, 1, 11));
        drop(w);
        let updated = db.protocol().versions(&db).unwrap().carved;
        (inserted, updated)
    };
    let (inserted, updated) = carved(&[]);
    assert_eq!(inserted, 0, "inlined inserts take no pooled version");
    assert!(updated > 0, "the update of a loaded row needs a pooled version");
    let (inserted, _) = carved(&[("inlining", "off")]);
    assert!(inserted >= 100, "without inlining every insert takes a version: {inserted}");
}

/// Rapid GC (§3.8): one row updated 50 000 times keeps a short chain (a GC that never cut
/// would leave 50 001 versions); once the storage epochs have passed, the cut versions are in
/// the worker's pool and are reused: as many updates as the pool holds take no new memory.
#[test]
fn a_hot_row_keeps_a_short_chain_and_reuses_its_versions() {
    let db = fresh();
    let mut w = db.worker().unwrap();
    let round = |w: &mut CicadaWorker<'_>, from: u64, n: u64| {
        for i in from..from + n {
            txn(w, |w| set(w, 4, i));
        }
    };
    round(&mut w, 0, 50_000);
    // The cut versions' grace periods are over and the worker's begins have freed them.
    pass_grace_periods(&db, &mut w);
    // Measured with the worker still there (its departure hands the rest of its chunk over,
    // which counts as carved).
    let first = db.protocol().versions(&db).unwrap();
    assert!(first.longest_chain < 2_000, "the GC cut the chain: {first:?}");
    let pooled = (first.carved - first.alive) / 2;
    round(&mut w, 50_000, pooled);
    let second = db.protocol().versions(&db).unwrap();
    assert_eq!(second.carved, first.carved, "{pooled} updates from the pool: {second:?}");
    drop(w);
    let mut r = db.worker().unwrap();
    assert_eq!(txn(&mut r, |r| r.read(T, 4, val)), Some(50_000 + pooled - 1));
}

/// Deleted rows are unlinked once their deletion is below `min_rts`, and their keys inserted
/// again as new rows; an aborted insert's row reads as absent and takes the key's next insert.
#[test]
fn deleted_and_aborted_rows_come_back_as_new_ones() {
    let db = fresh();
    let mut w = db.worker().unwrap();
    for round in 0..50u64 {
        txn(&mut w, |w| {
            for k in 0..10 {
                assert!(w.delete(T, k)?);
            }
            Ok(())
        });
        txn(&mut w, |w| {
            for k in 0..10 {
                assert_eq!(w.read(T, k, val)?, None);
                assert!(w.insert(T, k, &row(k + round))?);
            }
            Ok(())
        });
    }
    w.begin();
    assert!(w.insert(T, 500, &row(500)).unwrap());
    w.abort();
    assert_eq!(txn(&mut w, |w| w.read(T, 500, val)), None);
    txn(&mut w, |w| w.insert(T, 500, &row(501)).map(|ok| assert!(ok)));
    let seen = txn(&mut w, |w| (0..10).map(|k| w.read(T, k, val)).collect::<Result<Vec<_>, _>>());
    assert_eq!(seen, (0..10).map(|k| Some(k + 49)).collect::<Vec<_>>());
    assert_eq!(txn(&mut w, |w| w.read(T, 500, val)), Some(501));
}

/// Runs empty transactions on `w` until the storage epoch has moved on by three (deleted rows
/// unlinked) and then twenty more, each begun 200 µs after the last, far more than the
/// `gc-interval-us` of 10 µs: each begin refreshes `min_rts` and, the other workers being
/// between transactions, advances the quiescence generation, so every version superseded
/// before has been cut (two begins) and freed (two generations later): an inlined one is free
/// for a claim again. (Counted begins, not elapsed time: the sleeps only space them out.)
fn pass_grace_periods(db: &Database<Cicada>, w: &mut CicadaWorker<'_>) {
    let epochs = db.storage().epochs();
    let (start, e0) = (std::time::Instant::now(), epochs.global());
    while epochs.global() < e0 + 3 {
        assert!(start.elapsed() < LIVENESS, "the epoch never advanced (deadlock detector)");
        txn(w, |_| Ok(()));
        std::thread::sleep(Duration::from_micros(200));
    }
    for _ in 0..20 {
        std::thread::sleep(Duration::from_micros(200));
        txn(w, |_| Ok(()));
    }
}

/// Promotion (§3.3): an update puts a row's newest version in the pool (its inlined version
/// holds the loaded one); once the GC has cut and freed that, a read of the old pooled version
/// copies it into the inlined one, which is then the newest; a second read changes nothing.
/// With `promotion=off` the newest version stays pooled.
#[test]
fn a_read_promotes_an_old_version_into_the_free_inlined_one() {
    for promotion in ["on", "off"] {
        let db = common::with_options(&[("promotion", promotion)], fresh);
        let mut w = db.worker().unwrap();
        txn(&mut w, |w| set(w, 3, 33));
        let inlined = || db.protocol().newest_inlined(&db, T, 3);
        assert_eq!(inlined(), Some(false), "the update took a pooled version");
        pass_grace_periods(&db, &mut w);
        assert_eq!(inlined(), Some(false), "the GC alone moves nothing");
        assert_eq!(txn(&mut w, |w| w.read(T, 3, val)), Some(33));
        assert_eq!(inlined(), Some(promotion == "on"), "promotion={promotion}");
        assert_eq!(txn(&mut w, |w| w.read(T, 3, val)), Some(33));
        assert_eq!(inlined(), Some(promotion == "on"));
        drop(w);
        let report = db.protocol().versions(&db).unwrap();
        let longest = report.longest_chain;
        assert!(longest <= 2, "a promotion is one more version at most: {longest}");
        let promoted = u64::from(promotion == "on");
        assert_eq!((report.promoted, report.promotions_dropped), (promoted, 0), "{promotion}");
    }
}

/// A promotion that cannot be installed is dropped, not its transaction: a reader promotes a
/// row's old version, a writer with a larger timestamp updates the row and commits first
/// (raising the old version's read timestamp above the reader's), and the reader still commits
/// what it read; the row keeps the writer's value, in a pooled version (the reader held the
/// inlined one), and the inlined version is free again: the next read promotes the writer's.
#[test]
fn a_failed_promotion_does_not_abort_its_reader() {
    let db = fresh();
    let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
    txn(&mut w, |w| set(w, 3, 33));
    // The reader's clock first (an idle worker holds `min_rts` back), then the writer's GC
    // cuts and frees the loaded version.
    pass_grace_periods(&db, &mut r);
    pass_grace_periods(&db, &mut w);
    r.begin();
    assert_eq!(r.read(T, 3, val).unwrap(), Some(33));
    txn(&mut w, |w| set(w, 3, 44));
    r.commit().expect("the promotion is dropped, the read is still valid");
    let inlined = || db.protocol().newest_inlined(&db, T, 3);
    assert_eq!(inlined(), Some(false), "the writer's version is pooled");
    pass_grace_periods(&db, &mut w);
    pass_grace_periods(&db, &mut r);
    assert_eq!(txn(&mut r, |r| r.read(T, 3, val)), Some(44));
    assert_eq!(inlined(), Some(true), "the inlined version was given back and promoted into");
    drop((r, w));
    let report = db.protocol().versions(&db).unwrap();
    assert_eq!((report.promoted, report.promotions_dropped), (1, 1), "one given up, one made");
}

/// With external consistency off (the paper's default), a read-only transaction reads at
/// `min_wts - 1` without validation: what it read may be overwritten before it commits, and it
/// still commits, having seen one consistent state (the two rows updated together agree).
#[test]
fn read_only_transactions_at_min_wts_are_not_validated() {
    let db = common::with_options(&[("external-consistency", "off")], fresh);
    let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
    for i in 1..=50u64 {
        r.begin_read_only();
        let a = r.read(T, 7, val).unwrap().unwrap();
        txn(&mut w, |w| {
            set(w, 7, 1000 + i)?;
            set(w, 8, 1000 + i)
        });
        let b = r.read(T, 8, val).unwrap().unwrap();
        r.commit().expect("read-only transactions at min_wts - 1 commit");
        assert!(a == b || (a == 7 && b == 8), "one consistent state: {a} and {b}");
    }
    r.begin_read_only();
    assert_eq!(r.write(T, 7, &row(0)).unwrap_err().reason, AbortReason::ReadOnlyWrite);
    r.abort();
}

/// The keys (and values) a scan of `[lo, hi]` hands over, in order.
fn scan_all<W: Worker>(w: &mut W, lo: u64, hi: u64) -> Result<Vec<(u64, u64)>, Abort> {
    let mut out = Vec::new();
    w.scan(T, lo, hi, 100, |k, r| {
        out.push((k, val(r)));
        std::ops::ControlFlow::Continue(())
    })?;
    Ok(out)
}

/// Deferred index updates (§3.6): an insert's new record enters the index only when its
/// transaction validates. Until then its inserter reads, scans (merged in key order with the
/// index's rows), updates, deletes and inserts it again through its write set; another
/// transaction finds the key absent without meeting the record; an aborted insert leaves the
/// index untouched; and of two inserts of one key the one that validates second aborts. With
/// `deferred-index=off` the record is in the index from the insert on, and the second insert
/// aborts at once.
#[test]
fn inserts_enter_the_index_when_their_transaction_validates() {
    for deferred in [true, false] {
        let db =
            common::with_options(&[("deferred-index", if deferred { "on" } else { "off" })], fresh);
        let indexed =
            |k| db.storage().tables()[0].index.get(k, &txlab::storage::index::pin()).is_some();
        let (mut r, mut w) = (db.worker().unwrap(), db.worker().unwrap());
        r.begin();
        w.begin();
        assert!(w.insert(T, 12, &row(12)).unwrap());
        assert!(w.insert(T, 11, &row(11)).unwrap());
        assert!(!w.insert(T, 12, &row(0)).unwrap(), "the key is present for its inserter");
        assert_eq!(indexed(12), !deferred, "deferred={deferred}");
        assert_eq!(r.read(T, 12, val).unwrap(), None, "another transaction finds it absent");
        r.commit().expect("the reader's smaller timestamp orders it first");
        assert_eq!(
            scan_all(&mut w, 8, 14).unwrap(),
            [(8, 8), (9, 9), (11, 11), (12, 12)],
            "own inserts among the index's rows, in key order"
        );
        set(&mut w, 12, 120).unwrap().expect("present");
        assert!(w.delete(T, 11).unwrap());
        assert_eq!(w.read(T, 11, val).unwrap(), None);
        assert_eq!(scan_all(&mut w, 8, 14).unwrap(), [(8, 8), (9, 9), (12, 120)]);
        assert!(w.insert(T, 11, &row(111)).unwrap(), "deleted by us: present again");
        assert_eq!(w.scan(T, 10, 20, 1, |_, _| std::ops::ControlFlow::Continue(())).unwrap(), 1);
        w.commit().expect("nothing conflicts");
        assert!(indexed(11) && indexed(12));
        let mut c = db.worker().unwrap();
        assert_eq!(
            txn(&mut c, |c| scan_all(c, 10, 14)),
            [(11, 111), (12, 120)],
            "deferred={deferred}"
        );
        w.begin();
        assert!(w.insert(T, 13, &row(13)).unwrap());
        w.abort();
        if deferred {
            assert!(!indexed(13), "an aborted insert never reached the index");
        }
        assert_eq!(txn(&mut c, |c| c.read(T, 13, val)), None);
        // Two inserts of one key: the second to reach the index loses.
        w.begin();
        assert!(w.insert(T, 14, &row(14)).unwrap());
        r.begin();
        match r.insert(T, 14, &row(41)) {
            Ok(inserted) => {
                assert!(deferred && inserted, "deferred={deferred}");
                r.commit().expect("the first to validate inserts");
                assert_eq!(reason(w.commit()), AbortReason::InsertConflict);
            }
            Err(a) => {
                assert!(!deferred, "only an insert in flight in the index is seen");
                assert_eq!(a.reason, AbortReason::InsertConflict);
                r.abort();
                w.commit().expect("the first inserter commits");
            }
        }
        let expect = if deferred { 41 } else { 14 };
        assert_eq!(txn(&mut c, |c| c.read(T, 14, val)), Some(expect));
    }
}

/// Cicada-SV (CCBench §7.1, `single-version=on`): each record keeps one version, its inlined
/// one, which commits overwrite in place. A thousand updates of one row, a deletion and its
/// re-insert, and new rows leave one version per row. A transaction whose version was
/// overwritten by a later timestamp's commit aborts (`snapshot-too-old`: there is no older
/// version), where multi-version Cicada reads the old version and commits.
#[test]
fn single_version_overwrites_the_inlined_version_in_place() {
    let sv = [("single-version", "on")];
    let db = common::with_options(&sv, fresh);
    let mut w = db.worker().unwrap();
    for i in 0..1_000 {
        txn(&mut w, |w| set(w, 4, i));
    }
    txn(&mut w, |w| w.delete(T, 5).map(|ok| assert!(ok)));
    txn(&mut w, |w| w.insert(T, 5, &row(55)).map(|ok| assert!(ok)));
    for k in 100..110 {
        txn(&mut w, |w| w.insert(T, k, &row(k)).map(|ok| assert!(ok)));
    }
    let r = db.protocol().versions(&db).unwrap();
    assert_eq!((r.longest_chain, r.alive), (1, r.rows), "one version per row: {r:?}");
    assert_eq!(r.rows, 20, "{r:?}");
    for k in [4, 5, 100] {
        assert_eq!(db.protocol().newest_inlined(&db, T, k), Some(true), "key {k}");
    }
    assert_eq!(txn(&mut w, |w| w.read(T, 4, val)), Some(999));
    assert_eq!(txn(&mut w, |w| w.read(T, 5, val)), Some(55));
    drop(w);
    let overwritten = |opts: &[(&str, &str)]| {
        after_a_later_commit(opts, |a| {
            let seen = a.read(T, 3, val).map_err(|e| e.reason);
            seen.and_then(|s| a.commit().map(|()| s).map_err(|e| e.reason))
        })
    };
    assert_eq!(overwritten(&sv), Err(AbortReason::SnapshotTooOld));
    assert_eq!(overwritten(&[]), Ok(Some(3)), "multi-version: the old version");
}

/// Cicada-SV: a transaction holding a record's write lock (validated, not yet written) is about
/// to overwrite the version a reader with a larger timestamp should see: the reader waits and
/// reads what it wrote; with `wait=off` it aborts instead and the writer is unaffected.
#[test]
fn single_version_readers_wait_for_a_smaller_lock_holder() {
    waited_for_or_aborted(&[("single-version", "on")]);
}

/// Cicada-SV keeps rows in their heads: it needs inlining, and rows that fit (216 bytes).
#[test]
fn single_version_refuses_what_it_cannot_hold() {
    let build = |opts: &[(&str, &str)], row_size: usize| {
        let pairs: Vec<(String, String)> =
            opts.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let options = <Cicada as Protocol>::Options::from_pairs(&pairs).unwrap();
        let tables = [TableSpec::new("narrow", 16, 100), TableSpec::new("wide", row_size, 100)];
        Database::<Cicada>::builder(&tables).protocol_options(options).build().map(drop)
    };
    let e = build(&[("single-version", "on")], 217).unwrap_err().to_string();
    assert!(
        e.contains("at most 216 bytes; table `wide` has rows of 217 bytes"),
        "the message names the table and its size: {e}"
    );
    build(&[("single-version", "on")], 216).expect("216-byte rows fit");
    let e = build(&[("single-version", "on"), ("inlining", "off")], 16).unwrap_err().to_string();
    assert!(e.contains("single-version=on") && e.contains("inlining=on"), "{e}");
}

/// An idle worker (between transactions, as an embedding application's thread may be for
/// long) holds the GC back no more: while it sits idle after a transaction of its own, another
/// worker's 20 000 updates of one row keep a short chain (with the idle worker's last timestamp
/// counted in `min_wts`, none would be cut). Its next transaction takes a timestamp above
/// `min_wts`, reads the latest value and writes.
#[test]
fn an_idle_worker_does_not_stop_the_gc() {
    let db = fresh();
    let mut idle = db.worker().unwrap();
    assert_eq!(txn(&mut idle, |w| w.read(T, 1, val)), Some(1));
    let mut w = db.worker().unwrap();
    for i in 0..20_000 {
        txn(&mut w, |w| set(w, 4, i));
    }
    let r = db.protocol().versions(&db).unwrap();
    assert!(r.longest_chain < 2_000, "the GC cut the chain: {r:?}");
    idle.begin();
    assert!(idle.timestamp() > w.timestamp(), "the idle worker resumes above the busy one");
    assert_eq!(idle.read(T, 4, val).unwrap(), Some(19_999));
    set(&mut idle, 4, 7).unwrap();
    idle.commit().unwrap();
    assert_eq!(txn(&mut w, |w| w.read(T, 4, val)), Some(7));
}

/// A database with the multi-version index (§3.6) at `fanout` and `extra` options, `keys`
/// loaded; commits pause `pause_us` between their phases.
fn tree_db(
    fanout: u64,
    extra: &[(&str, &str)],
    pause_us: u64,
    keys: impl Iterator<Item = u64>,
) -> Database<Cicada> {
    let fanout = fanout.to_string();
    let mut opts = vec![("index", "multi-version"), ("index-fanout", fanout.as_str())];
    opts.extend_from_slice(extra);
    common::with_options(&opts, || {
        let opts = DbOptions {
            max_workers: 16,
            epoch_interval: Duration::from_millis(1),
            commit_pause_us: pause_us,
            ..Default::default()
        };
        let db = common::database::<Cicada>(&[TableSpec::new("t", 16, 100_000)], opts);
        let mut l = db.loader();
        for k in keys {
            l.insert(T, k, &row(k)).unwrap();
        }
        db
    })
}

/// The multi-version index protects absences through the leaves a transaction read (§3.6):
/// an insert committed into the range a reader found empty, below the reader's timestamp,
/// fails the reader's validation; one into another leaf does not; one next to the absent key
/// (in its leaf, outside what was read) does too, since conflicts are per node; an insert
/// above the reader's timestamp goes in above the leaf version read, and both commit; and an
/// insert below the timestamp of a reader that validated first aborts, as a row write would.
#[test]
fn the_multi_version_index_protects_absences_by_leaf() {
    let db = tree_db(4, &[], 0, (0..1000).step_by(10));
    let (mut r, mut i, mut c) = (db.worker().unwrap(), db.worker().unwrap(), db.worker().unwrap());
    // (The inserter begins first: its timestamp is the smaller one.)
    let mut race = |read: &dyn Fn(&mut CicadaWorker<'_>) -> usize, insert: u64| {
        i.begin();
        r.begin();
        assert_eq!(read(&mut r), 0, "nothing there");
        set(&mut r, 0, 1).unwrap().expect("present");
        assert!(i.insert(T, insert, &row(insert)).unwrap());
        i.commit().expect("nothing conflicts with the insert");
        let out = r.commit().map_err(|a| a.reason);
        txn(&mut c, |c| c.delete(T, insert));
        out
    };
    let scan = |w: &mut CicadaWorker<'_>| scan_all(w, 501, 509).unwrap().len();
    let point = |w: &mut CicadaWorker<'_>| usize::from(w.read(T, 505, val).unwrap().is_some());
    assert_eq!(race(&scan, 505), Err(AbortReason::ReadValidation), "a phantom in the range");
    assert_eq!(race(&point, 505), Err(AbortReason::ReadValidation), "the absent key inserted");
    assert_eq!(race(&scan, 5), Ok(()), "an insert into another leaf");
    assert_eq!(race(&point, 506), Err(AbortReason::ReadValidation), "same leaf, another key");
    // Above the reader's timestamp: the reader is ordered first.
    r.begin();
    i.begin();
    assert_eq!(point(&mut r), 0);
    assert!(i.insert(T, 505, &row(505)).unwrap());
    i.commit().expect("the insert goes in above the leaf version read");
    r.commit().expect("the reader is ordered before the insert");
    txn(&mut c, |c| c.delete(T, 505));
    // Below the timestamp of a reader that validated first: the leaf's read timestamp is
    // above the inserter's, whose write of the leaf aborts early (§3.5).
    i.begin();
    r.begin();
    assert_eq!(point(&mut r), 0);
    r.commit().expect("nothing conflicts with the reader");
    assert_eq!(i.insert(T, 505, &row(505)).unwrap_err().reason, AbortReason::WriteConflict);
    i.abort();
    assert_eq!(db.protocol().check_index(&db, T, 0, 1000), Ok(100));
}

/// The multi-version index agrees with the rows after contention: 8 workers on 2 cores run
/// 2 000 transactions each of inserts, deletions, updates, reads and scans on 16 keys, yielding
/// between operations, their commits pausing between phases so that others' commits land
/// inside them (small fanouts, so nodes split and leave the tree all the time); then every key with a row has an
/// entry mapping it to the row's record and no entry lacks a row, and each worker's scan of
/// the whole range agrees with its reads. With waiting and without.
#[test]
fn the_multi_version_index_agrees_with_its_rows_under_contention() {
    use rand::{RngExt, SeedableRng};
    const KEYS: u64 = 16;
    for (fanout, extra) in [(3, &[][..]), (4, &[("wait", "off"), ("timestamps", "counter")][..])] {
        let db = tree_db(fanout, extra, 20, 0..KEYS / 2);
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let db = &db;
                s.spawn(move || {
                    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(fanout * 10 + t);
                    let mut w = db.worker().unwrap();
                    let start = std::time::Instant::now();
                    for _ in 0..2000 {
                        loop {
                            assert!(start.elapsed() < LIVENESS, "deadlock detector");
                            w.begin();
                            let r = (0..rng.random_range(1..6)).try_for_each(|_| {
                                // Yields let commits land between a transaction's operations.
                                if rng.random_range(0..4) == 0 {
                                    std::thread::yield_now();
                                }
                                let k = rng.random_range(0..KEYS);
                                match rng.random_range(0..5) {
                                    0 => w.insert(T, k, &row(k)).map(drop),
                                    1 => w.delete(T, k).map(drop),
                                    2 => set(&mut w, k, k).map(drop),
                                    3 => {
                                        w.read(T, k, val).map(|v| assert!(v.is_none_or(|v| v == k)))
                                    }
                                    _ => {
                                        let rows = scan_all(&mut w, k, k + 4)?;
                                        assert!(rows.iter().all(|&(k, v)| k == v));
                                        Ok(())
                                    }
                                }
                            });
                            match r.and_then(|()| w.commit()) {
                                Ok(()) => break,
                                Err(_) => w.abort(),
                            }
                        }
                    }
                });
            }
        });
        let mut w = db.worker().unwrap();
        let present: Vec<u64> = txn(&mut w, |w| {
            let mut keys = Vec::new();
            for k in 0..KEYS {
                if w.read(T, k, val)?.is_some() {
                    keys.push(k);
                }
            }
            Ok(keys)
        });
        let scanned: Vec<u64> = txn(&mut w, |w| scan_all(w, 0, KEYS)).iter().map(|e| e.0).collect();
        assert_eq!(scanned, present, "fanout {fanout}: a scan agrees with the reads");
        assert_eq!(
            db.protocol().check_index(&db, T, 0, KEYS),
            Ok(present.len()),
            "fanout {fanout}"
        );
    }
}
