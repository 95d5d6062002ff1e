use super::super::Ic3;
use super::Ic3Worker;
use crate::engine::{
    AccessMode, Checks, Database, DbOptions, Piece, PieceEnd, TableAccess, Tx, TxnType, Worker,
    ALL_COLUMNS,
};
use crate::error::{Abort, AbortReason};
use crate::storage::{TableId, TableSpec};

const A: TableId = TableId(0);
const B: TableId = TableId(1);
const fn w(t: TableId) -> TableAccess {
    TableAccess { table: t, mode: AccessMode::Write, columns: ALL_COLUMNS }
}
const fn r(t: TableId) -> TableAccess {
    TableAccess { table: t, mode: AccessMode::Read, columns: ALL_COLUMNS }
}
/// `AB`: writes table A, then table B (each piece conflicts with its twin only: case 2).
static AB: [Piece; 2] =
    [Piece { name: "a", accesses: &[w(A)] }, Piece { name: "b", accesses: &[w(B)] }];
/// `RA`: reads table A only (left out of the analysis: it runs directly).
static RA: [Piece; 1] = [Piece { name: "a", accesses: &[r(A)] }];
static TYPES: [TxnType; 2] =
    [TxnType { name: "AB", pieces: &AB }, TxnType { name: "RA", pieces: &RA }];
const K: u64 = 1;
/// A table no template names.
const C: TableId = TableId(2);
fn c_table() -> TableSpec {
    TableSpec::new("c", 8, 16)
}

fn db(opts: &[(&str, &str)]) -> Database<Ic3> {
    db_of(opts, &TYPES)
}

fn db_of(opts: &[(&str, &str)], types: &'static [TxnType]) -> Database<Ic3> {
    use crate::engine::ProtocolOptions;
    let pairs: Vec<(String, String)> =
        opts.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    let tables = [TableSpec::new("a", 8, 16), TableSpec::new("b", 8, 16)];
    let db = Database::<Ic3>::builder(&[tables[0].clone(), tables[1].clone(), c_table()])
        .options(DbOptions { max_workers: 4, ..Default::default() })
        .protocol_options(super::super::Ic3Options::from_pairs(&pairs).unwrap())
        .txn_types(types)
        .build()
        .unwrap();
    {
        let mut l = db.worker().unwrap();
        l.begin();
        for t in [A, B, C] {
            assert!(l.insert(t, K, &0u64.to_le_bytes()).unwrap());
        }
        l.commit().unwrap();
    }
    db
}

fn value(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().unwrap())
}

/// Adds `by` to `key` of `t`, returning the value it found.
fn add<W: Worker>(tx: &mut Tx<'_, W>, t: TableId, by: u64) -> Result<u64, Abort> {
    let seen = tx.read(t, K, value)?.expect("loaded");
    assert!(tx.write(t, K, &(seen + by).to_le_bytes())?);
    Ok(seen)
}

fn committed(db: &Database<Ic3>, t: TableId) -> u64 {
    let mut w = db.worker().unwrap();
    w.begin();
    let v = w.read(t, K, value).unwrap().unwrap();
    w.commit().unwrap();
    v
}

/// Case 2: T2 overwrites T1's piece on A, so it depends on T1; its piece on B conflicts
/// with T1's piece on B, so it waits for T1's to commit, and always builds on it (T2's
/// piece on B sees 1), whatever the interleaving of the threads. Both wait settings, with
/// and without optimistic constraining.
#[test]
fn case_2_a_dependent_piece_waits_for_its_partner() {
    for opts in [&[][..], &[("optimistic", "off"), ("wait", "yield")][..]] {
        let db = db(opts);
        let (tx2, rx2) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let mut t1 = db.worker().unwrap();
            t1.typed(0);
            t1.begin();
            let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
            assert_eq!(tx.piece(0, |tx| add(tx, A, 1)).unwrap(), 0);
            let db = &db;
            let t2 = s.spawn(move || {
                let mut t2 = db.worker().unwrap();
                t2.typed(0);
                t2.begin();
                let mut tx = Tx::new(&mut t2, &TYPES[0], Checks::default());
                let a = tx.piece(0, |tx| add(tx, A, 10)).unwrap();
                tx2.send(()).unwrap();
                let b = tx.piece(1, |tx| add(tx, B, 10)).unwrap();
                t2.commit().unwrap();
                (a, b)
            });
            // T2 has committed its piece on A after T1's: it depends on T1.
            rx2.recv().unwrap();
            assert_eq!(tx.piece(1, |tx| add(tx, B, 1)).unwrap(), 0);
            t1.commit().unwrap();
            assert_eq!(t2.join().unwrap(), (1, 1), "T2 read T1's A and waited for its B");
        });
        assert_eq!((committed(&db, A), committed(&db, B)), (11, 11));
    }
}

/// `BA`: writes table B, then table A (with `AB`, IC3's Figure 9: each merges into one
/// piece).
static BA: [Piece; 2] =
    [Piece { name: "b", accesses: &[w(B)] }, Piece { name: "a", accesses: &[w(A)] }];
static FIG9: [TxnType; 3] = [
    TxnType { name: "AB", pieces: &AB },
    TxnType { name: "RA", pieces: &RA },
    TxnType { name: "BA", pieces: &BA },
];

/// Online analysis (§4.5, Figs. 9-11): T1 runs `AB` as two pieces on the graph of the mix
/// without `BA`; adding `BA` publishes the transitional graph, on which T2 (`AB` too) runs
/// one merged piece of two sub-pieces. T2's first sub-piece overwrites T1's piece on A;
/// before its second sub-piece it learns that dependency and waits for T1's piece on B,
/// so it builds on it and commits at its first attempt (without the wait it would commit
/// its B first and depend on T1 while T1 came to depend on it: a deadlock at both commits,
/// here refused by T2's commit instead). The change waits for T1 to end before it
/// publishes the new graph.
#[test]
#[allow(clippy::single_range_in_vec_init)] // vectors of sub-pieces
fn a_transitional_sub_piece_waits_for_the_old_graphs_partner() {
    let db = db_of(&[], &FIG9);
    let bad = db.set_mix(&[0, 3]).unwrap_err().to_string();
    assert_eq!(bad, "set_mix: no transaction type 3 (the workload has 3)");
    db.set_mix(&[0, 1]).unwrap();
    let version = || db.protocol().shared.graphs.current().version;
    let shape = || super::super::graph::shape(db.protocol().shared.graphs.current());
    assert_eq!(version(), 2, "the transitional graph, then the mix's");
    assert_eq!(shape()[0], Some(vec![(0..1, vec![0..1]), (1..2, vec![1..2])]));
    let (tx2, rx2) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let mut t1 = db.worker().unwrap();
        t1.typed(0);
        t1.begin();
        let mut tx = Tx::new(&mut t1, &FIG9[0], Checks::default());
        assert_eq!(tx.piece(0, |tx| add(tx, A, 1)).unwrap(), 0);
        let db = &db;
        let change = s.spawn(move || db.set_mix(&[0, 1, 2]).unwrap());
        let start = std::time::Instant::now();
        while version() != 3 {
            assert!(start.elapsed().as_secs() < 60, "no transitional graph (deadlock detector)");
            std::thread::yield_now();
        }
        assert_eq!(shape()[0], Some(vec![(0..2, vec![0..1, 1..2])]), "nested");
        assert_eq!(shape()[2], None, "the added type runs directly until the new graph");
        let t2 = s.spawn(move || {
            let mut t2 = db.worker().unwrap();
            t2.typed(0);
            t2.begin();
            let mut tx = Tx::new(&mut t2, &FIG9[0], Checks::default());
            let a = tx.piece(0, |tx| add(tx, A, 10)).unwrap();
            tx2.send(()).unwrap();
            let b = tx.piece(1, |tx| add(tx, B, 10)).unwrap();
            (a, b, t2.commit().map_err(|a| a.reason))
        });
        rx2.recv().unwrap();
        // (Time for T2 to reach its second sub-piece: how likely a missing wait shows.)
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(version(), 3, "T1 runs on the old graph: the change waits for it");
        assert_eq!(tx.piece(1, |tx| add(tx, B, 1)).unwrap(), 0);
        t1.commit().unwrap();
        assert_eq!(t2.join().unwrap(), (1, 1, Ok(())), "T2 read T1's A, waited for its B");
        change.join().unwrap();
    });
    assert_eq!(version(), 4);
    assert_eq!(shape()[0], Some(vec![(0..2, vec![0..2])]), "merged on the new graph");
    assert_eq!(shape()[2], Some(vec![(0..2, vec![0..2])]));
    assert_eq!((committed(&db, A), committed(&db, B)), (11, 11));
}

/// §4.4: T2 builds on T1's committed piece, T1 rolls back: T2's commit is a cascading
/// abort and the value T1 overwrote is back.
#[test]
fn a_rollback_cascades_to_the_transactions_that_saw_it() {
    let db = db(&[]);
    let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
    t1.typed(0);
    t1.begin();
    Tx::new(&mut t1, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 5)).unwrap();
    t2.typed(0);
    t2.begin();
    let mut tx = Tx::new(&mut t2, &TYPES[0], Checks::default());
    assert_eq!(tx.piece(0, |tx| add(tx, A, 1)).unwrap(), 5, "T1's piece is visible");
    t1.abort();
    assert_eq!(t2.commit().map_err(|a| a.reason), Err(AbortReason::CascadingAbort));
    assert_eq!(committed(&db, A), 0, "both writes undone");
}

/// An untyped transaction reads committed data only: while a piece's write is pending it
/// reads the value before it and commits (it serializes before the writer), but cannot
/// overwrite it; once the writer has committed it reads and overwrites the writer's value.
#[test]
fn untyped_transactions_read_and_write_committed_data_only() {
    let db = db(&[]);
    let (mut t1, mut u) = (db.worker().unwrap(), db.worker().unwrap());
    t1.typed(0);
    t1.begin();
    Tx::new(&mut t1, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 5)).unwrap();
    u.begin();
    assert_eq!(u.read(A, K, value).unwrap(), Some(0), "the committed value");
    u.commit().unwrap();
    u.begin();
    assert_eq!(u.read(A, K, value).unwrap(), Some(0));
    assert!(u.write(A, K, &6u64.to_le_bytes()).unwrap());
    assert_eq!(u.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
    t1.commit().unwrap();
    u.begin();
    assert_eq!(u.read(A, K, value).unwrap(), Some(5));
    assert!(u.write(A, K, &6u64.to_le_bytes()).unwrap());
    u.commit().unwrap();
    assert_eq!(committed(&db, A), 6);
}

/// Operations after a typed transaction's last piece commit with it, directly, when they
/// touch only tables no analysed template names (a crash test's acknowledgement row), and
/// are refused on an analysed table.
#[test]
fn operations_after_the_last_piece_are_allowed_only_outside_the_analysis() {
    let db = db(&[]);
    let mut t = db.worker().unwrap();
    t.typed(0);
    t.begin();
    Tx::new(&mut t, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 1)).unwrap();
    assert!(t.write(C, K, &7u64.to_le_bytes()).unwrap());
    t.commit().unwrap();
    assert_eq!((committed(&db, A), committed(&db, C)), (1, 7));
    t.typed(0);
    t.begin();
    Tx::new(&mut t, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 1)).unwrap();
    assert!(t.write(B, K, &7u64.to_le_bytes()).unwrap());
    assert_eq!(t.commit().map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
    assert_eq!((committed(&db, A), committed(&db, B)), (1, 0), "rolled back whole");
}

/// A piece that touches a table its template does not declare cannot commit, whatever the
/// caller's checks (here none): the analysis does not cover it.
#[test]
fn an_undeclared_table_is_refused_at_the_piece_commit() {
    let db = db(&[]);
    let mut t = db.worker().unwrap();
    t.typed(0);
    t.begin();
    let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
    let wrote_b = tx.piece(0, |tx| add(tx, B, 1)).map_err(|a| a.reason);
    assert_eq!(wrote_b, Err(AbortReason::TemplateViolation), "piece 0 declares A only");
    t.abort();
    assert_eq!((committed(&db, A), committed(&db, B)), (0, 0));
}

/// The word of key `K`'s record in table `t`.
fn word(db: &Database<Ic3>, t: TableId) -> u64 {
    let tbl = db.storage().table(t);
    let rid = tbl.index.get(K, &crate::storage::index::pin()).expect("loaded");
    tbl.rows.get(rid).header.load()
}

/// A last piece that meets nobody is held to commit with the transaction: it installs
/// nothing and appends no entry when it ends, and the commit installs its writes under its
/// locks (the earlier piece's entry leaves as usual). A held piece validates at the
/// commit: a direct writer that changed what it read fails the whole attempt, and the
/// earlier piece rolls back with it.
#[test]
fn an_uncontended_last_piece_commits_with_the_transaction() {
    use super::super::record::{same_version, LISTED, LOCK, PENDING};
    let db = db(&[]);
    let (mut t1, mut d) = (db.worker().unwrap(), db.worker().unwrap());
    t1.typed(0);
    t1.begin();
    let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
    tx.piece(0, |tx| add(tx, A, 1)).unwrap();
    assert_ne!(word(&db, A) & (LISTED | PENDING), 0, "an earlier piece leaves its entry");
    let b = word(&db, B);
    tx.piece(1, |tx| add(tx, B, 1)).unwrap();
    assert_eq!(word(&db, B), b, "held: nothing installed, no entry, no lock");
    t1.commit().unwrap();
    let now = word(&db, B);
    assert!(!same_version(now, b) && now & (LISTED | PENDING | LOCK) == 0, "{now:#x}");
    assert_eq!(word(&db, A) & (LISTED | PENDING | LOCK), 0, "the entry on A left");
    assert_eq!((committed(&db, A), committed(&db, B)), (1, 1));

    t1.typed(0);
    t1.begin();
    let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
    tx.piece(0, |tx| add(tx, A, 1)).unwrap();
    tx.piece(1, |tx| add(tx, B, 1)).unwrap();
    d.begin(); // untyped: writes committed data where no entry is
    assert!(d.write(B, K, &100u64.to_le_bytes()).unwrap());
    d.commit().expect("the held piece left no entry on B");
    assert_eq!(t1.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
    assert_eq!((committed(&db, A), committed(&db, B)), (1, 100), "rolled back whole");
}

/// Operations after a held last piece commit with it when no analysed template touches
/// their tables, and fail the attempt otherwise; a piece after the held one is refused.
#[test]
fn trailing_operations_commit_with_a_held_last_piece() {
    let db = db(&[]);
    let mut t = db.worker().unwrap();
    let run = |t: &mut Ic3Worker<'_>, then: TableId| {
        t.typed(0);
        t.begin();
        let mut tx = Tx::new(t, &TYPES[0], Checks::default());
        tx.piece(0, |tx| add(tx, A, 1)).unwrap();
        tx.piece(1, |tx| add(tx, B, 1)).unwrap();
        assert!(t.write(then, K, &7u64.to_le_bytes()).unwrap());
        t.commit().map_err(|a| a.reason)
    };
    run(&mut t, C).unwrap();
    assert_eq!((committed(&db, A), committed(&db, B), committed(&db, C)), (1, 1, 7));
    assert_eq!(run(&mut t, A), Err(AbortReason::TemplateViolation));
    assert_eq!((committed(&db, A), committed(&db, B)), (1, 1), "rolled back whole");
    t.typed(0);
    t.begin();
    let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
    tx.piece(0, |tx| add(tx, A, 1)).unwrap();
    tx.piece(1, |tx| add(tx, B, 1)).unwrap();
    let again = tx.piece(1, |tx| add(tx, B, 1)).map_err(|a| a.reason);
    assert_eq!(again, Err(AbortReason::TemplateViolation));
    t.rollback();
}

/// A piece that has committed cannot run again (a loop over a piece): a dependent that
/// waited for it would meet it again. Going back to an earlier piece is refused too.
#[test]
fn a_committed_piece_cannot_run_again() {
    let db = db(&[]);
    let mut t = db.worker().unwrap();
    t.typed(0);
    t.begin();
    let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
    tx.piece(0, |tx| add(tx, A, 1)).unwrap();
    let again = tx.piece(0, |tx| add(tx, A, 1)).map_err(|a| a.reason);
    assert_eq!(again, Err(AbortReason::TemplateViolation), "a loop over a piece");
    t.abort();
    t.typed(0);
    t.begin();
    let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
    tx.piece(0, |tx| add(tx, A, 1)).unwrap();
    tx.piece(1, |tx| add(tx, B, 1)).unwrap();
    let back = tx.piece(0, |tx| add(tx, A, 1)).map_err(|a| a.reason);
    assert_eq!(back, Err(AbortReason::TemplateViolation), "back to an earlier piece");
    t.abort();
    assert_eq!((committed(&db, A), committed(&db, B)), (0, 0));
}

/// A read-only type is left out of the analysis and runs directly, like an untyped one: it
/// reads the committed values past a pending writer without waiting, and fails validation
/// when the writer commits before it does (what it read is no longer committed).
/// A commit's lock order packs the table and row id into one word: a table too large for
/// it is refused at set-up, with a message naming it.
#[test]
fn a_table_too_large_for_the_lock_order_is_refused() {
    let big = TableSpec::new("huge", 8, 16).with_capacity(super::MAX_ROWS + 1);
    let err = Database::<Ic3>::builder(&[big]).build().err().expect("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "ic3: table huge holds up to {} rows, more than the {} a commit's lock order \
             can name",
            super::MAX_ROWS + 1,
            super::MAX_ROWS
        )
    );
}

/// More workers than a version can name the context of are refused at set-up.
#[test]
fn more_workers_than_contexts_a_version_names_are_refused() {
    let max = super::super::txn::MAX_CONTEXTS;
    let opts = DbOptions { max_workers: max + 1, ..Default::default() };
    let err = Database::<Ic3>::builder(&[c_table()]).options(opts).build().err();
    assert_eq!(
        err.expect("refused").to_string(),
        format!(
            "ic3: at most {max} workers, one transaction context each (max_workers is {})",
            max + 1
        )
    );
    let opts = DbOptions { max_workers: max, ..Default::default() };
    assert!(Database::<Ic3>::builder(&[c_table()]).options(opts).build().is_ok());
}

/// A read-only direct attempt validates record by record without locks: a record another
/// transaction is inserting (its lock held until its piece commits) is judged by its word,
/// absent in committed data; once the insert is committed, the absence read is stale.
#[test]
fn a_read_only_direct_attempt_validates_without_locking() {
    let db = db(&[]);
    let (mut t1, mut ro) = (db.worker().unwrap(), db.worker().unwrap());
    const K2: u64 = 2;
    t1.typed(0);
    t1.begin();
    t1.piece_begin(0).unwrap();
    assert!(t1.insert(A, K2, &7u64.to_le_bytes()).unwrap());
    let read_k2 = |ro: &mut Ic3Worker<'_>| {
        ro.begin();
        ro.read(A, K2, value).unwrap()
    };
    assert_eq!(read_k2(&mut ro), None, "being inserted: absent");
    ro.commit().expect("the insert's lock does not fail nor block the validation");
    assert_eq!(t1.piece_end(0, Ok(())).unwrap(), PieceEnd::Done);
    assert_eq!(read_k2(&mut ro), None, "inserted by a pending transaction: absent");
    ro.commit().expect("a pending insert is not committed data");
    assert_eq!(read_k2(&mut ro), None);
    t1.commit().unwrap();
    assert_eq!(ro.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
    assert_eq!(read_k2(&mut ro), Some(7));
    ro.commit().unwrap();
}

/// [`db`] keeping snapshots every 2 epochs, the epochs advanced by the test ([`tick`]).
fn db_snapshots() -> Database<Ic3> {
    use crate::engine::ProtocolOptions;
    let pairs = [("snapshot-epochs".to_string(), "2".to_string())];
    let tables = [TableSpec::new("a", 8, 16), TableSpec::new("b", 8, 16), c_table()];
    let epoch_interval = std::time::Duration::from_secs(3600);
    let db = Database::<Ic3>::builder(&tables)
        .options(DbOptions { max_workers: 4, epoch_interval, ..Default::default() })
        .protocol_options(super::super::Ic3Options::from_pairs(&pairs).unwrap())
        .txn_types(&TYPES)
        .build()
        .unwrap();
    let mut l = db.worker().unwrap();
    l.begin();
    for t in [A, B] {
        assert!(l.insert(t, K, &0u64.to_le_bytes()).unwrap());
    }
    l.commit().unwrap();
    drop(l);
    db
}

/// Advances the global epoch `n` times and publishes the snapshot boundary, as the epoch
/// thread does.
fn tick(db: &Database<Ic3>, n: usize) {
    let e = db.storage().epochs();
    for _ in 0..n {
        e.advance();
    }
    e.snapshots.refresh(e);
}

/// What a snapshot reader (typed `RA`: it runs directly all the same) finds of `keys` of
/// `t`, with its boundary.
fn snapshot(db: &Database<Ic3>, keys: &[(TableId, u64)]) -> (u64, Vec<Option<u64>>) {
    let mut r = db.worker().unwrap();
    r.typed(1);
    r.begin_read_only();
    let seen = keys.iter().map(|&(t, k)| r.read(t, k, value).unwrap()).collect();
    let b = r.ctx.snapshot;
    assert_eq!(r.write(A, K, &[0; 8]).map_err(|a| a.reason), Err(AbortReason::ReadOnlyWrite));
    r.abort();
    (b, seen)
}

/// Snapshot readers (the paper's footnote: as Silo does) read the state of every commit
/// below their boundary: not a pending piece's writes (the before-image of the first
/// writer listed), not a transaction that committed at the boundary or later (the values
/// its first writes replaced, kept as its entries left; and those its held last piece
/// installed, kept as it wrote them), not a direct commit's (kept as it wrote); a later
/// boundary shows them all. An insert and a delete of a pending transaction, likewise.
#[test]
fn snapshot_readers_read_below_pending_and_later_writers() {
    let db = db_snapshots();
    const K2: u64 = 2;
    let keys = [(A, K), (B, K), (A, K2)];
    tick(&db, 1);
    assert_eq!(snapshot(&db, &keys), (2, vec![Some(0), Some(0), None]));
    // T1 (epoch 2): A += 1 and an insert of K2 in its first piece, which commits and
    // lists it; B += 1 in its last piece, held and committed with the transaction.
    let mut t1 = db.worker().unwrap();
    t1.typed(0);
    t1.begin();
    t1.piece_begin(0).unwrap();
    assert!(t1.write(A, K, &1u64.to_le_bytes()).unwrap());
    assert!(t1.insert(A, K2, &5u64.to_le_bytes()).unwrap());
    assert_eq!(t1.piece_end(0, Ok(())).unwrap(), PieceEnd::Done);
    assert_eq!(snapshot(&db, &keys), (2, vec![Some(0), Some(0), None]), "pending");
    t1.piece_begin(1).unwrap();
    assert!(t1.write(B, K, &1u64.to_le_bytes()).unwrap());
    assert_eq!(t1.piece_end(1, Ok(())).unwrap(), PieceEnd::Done);
    t1.commit().unwrap();
    assert_eq!(snapshot(&db, &keys), (2, vec![Some(0), Some(0), None]), "committed at 2");
    tick(&db, 2);
    assert_eq!(snapshot(&db, &keys), (4, vec![Some(1), Some(1), Some(5)]));
    // A direct commit (epoch 4) writes A in place, and deletes K2.
    let mut d = db.worker().unwrap();
    d.begin();
    assert!(d.write(A, K, &7u64.to_le_bytes()).unwrap());
    assert!(d.delete(A, K2).unwrap());
    d.commit().unwrap();
    assert_eq!(snapshot(&db, &keys), (4, vec![Some(1), Some(1), Some(5)]), "direct at 4");
    tick(&db, 2);
    assert_eq!(snapshot(&db, &keys), (6, vec![Some(7), Some(1), None]));
}

#[test]
fn a_type_the_analysis_leaves_out_runs_directly_over_committed_data() {
    let db = db(&[]);
    let (mut t1, mut ro) = (db.worker().unwrap(), db.worker().unwrap());
    let read_a = |ro: &mut Ic3Worker<'_>| {
        ro.typed(1);
        ro.begin();
        Tx::new(ro, &TYPES[1], Checks::default())
            .piece(0, |tx| Ok(tx.read(A, K, value)?.unwrap()))
            .unwrap()
    };
    t1.typed(0);
    t1.begin();
    Tx::new(&mut t1, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 5)).unwrap();
    assert_eq!(read_a(&mut ro), 0, "the value before the pending piece");
    ro.commit().unwrap();
    assert_eq!(read_a(&mut ro), 0);
    t1.commit().unwrap();
    assert_eq!(ro.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
    assert_eq!(read_a(&mut ro), 5, "the writer's value once it committed");
    ro.commit().unwrap();
}

/// §4.3: an accumulation into a table no analysed template writes (or reads the column
/// of) is deferred to the transaction's commit: readers see the old value until then, a
/// piece that runs again (its validation failed) keeps it once, and a rolled-back
/// transaction leaves nothing.
#[test]
fn accumulations_are_deferred_to_commit() {
    use crate::engine::Accumulation;
    static ACC: [Piece; 2] = [
        Piece {
            name: "acc",
            accesses: &[r(B), TableAccess { table: A, mode: AccessMode::Accumulate, columns: 1 }],
        },
        Piece { name: "c", accesses: &[w(C)] },
    ];
    // A type that writes B, so that the read of B is tracked (and its validation can fail).
    static WB: [Piece; 1] = [Piece { name: "b", accesses: &[w(B)] }];
    static ACC_TYPES: [TxnType; 2] =
        [TxnType { name: "acc", pieces: &ACC }, TxnType { name: "wb", pieces: &WB }];
    let tables = [
        TableSpec::new("a", 8, 16).with_columns(&[("v", 0, 8)]),
        TableSpec::new("b", 8, 16),
        c_table(),
    ];
    let db = Database::<Ic3>::builder(&tables)
        .options(DbOptions { max_workers: 4, ..Default::default() })
        .txn_types(&ACC_TYPES)
        .build()
        .unwrap();
    let analysis = &db.protocol().shared.templates.as_ref().unwrap().full;
    assert_eq!(analysis.deferred, vec![A]);
    let mut other = db.worker().unwrap();
    other.begin();
    for t in [A, B, C] {
        assert!(other.insert(t, K, &0u64.to_le_bytes()).unwrap());
    }
    other.commit().unwrap();
    let read_a = |w: &mut Ic3Worker<'_>| {
        w.begin();
        let v = w.read(A, K, value).unwrap().unwrap();
        w.commit().unwrap();
        v
    };
    let checks = Checks { templates: true, ..Checks::default() };
    for commit in [true, false] {
        let mut t1 = db.worker().unwrap();
        t1.typed(0);
        t1.begin();
        let mut tx = Tx::new(&mut t1, &ACC_TYPES[0], checks);
        let mut runs = 0;
        tx.piece(0, |tx| {
            runs += 1;
            tx.read(B, K, value)?;
            assert!(tx.accumulate(A, K, Accumulation::add_i64(0, 0, 5))?);
            if runs == 1 {
                // Overwrite what the piece read: its validation fails, it runs again.
                other.begin();
                assert!(other.write(B, K, &7u64.to_le_bytes()).unwrap());
                other.commit().unwrap();
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(runs, 2, "the piece ran again");
        assert_eq!(read_a(&mut other), if commit { 0 } else { 5 }, "not applied yet");
        tx.piece(1, |tx| add(tx, C, 1)).unwrap();
        if commit {
            t1.commit().unwrap();
        } else {
            t1.abort();
        }
        assert_eq!(read_a(&mut other), 5, "applied once, at commit, and never rolled back");
    }
}

/// The accumulated column of `u` in the tests of accumulations under pending writers.
const Y: u64 = 0b10;
static UPD_N: [Piece; 2] = [
    Piece { name: "n", accesses: &[TableAccess { table: U, mode: AccessMode::Write, columns: N }] },
    Piece { name: "v", accesses: &[w(V)] },
];
static PAY: [Piece; 1] = [Piece {
    name: "y",
    accesses: &[TableAccess { table: U, mode: AccessMode::Accumulate, columns: Y }],
}];
/// Writers of `u.n` (then of `v`) and accumulators into `u.y`: the accumulations are
/// deferred under pending writers of `n` (§4.3).
static N_AND_Y: [TxnType; 2] =
    [TxnType { name: "upd", pieces: &UPD_N }, TxnType { name: "pay", pieces: &PAY }];

/// The tables of [`N_AND_Y`]: `u` is `[n | y]`, 16 bytes.
fn n_and_y_tables() -> [TableSpec; 2] {
    [
        TableSpec::new("u", 16, 16).with_columns(&[("n", 0, 8), ("y", 8, 8)]),
        TableSpec::new("v", 8, 16),
    ]
}

/// A database of [`N_AND_Y`] with `options`: `u` is `[n | y]`, 16 bytes, `y` deferred
/// under writers of `n`; key `K` loaded as `u = [0 | 7]`, `v = 0`.
fn n_and_y_db(options: DbOptions) -> Database<Ic3> {
    let tables = n_and_y_tables();
    let db =
        Database::<Ic3>::builder(&tables).options(options).txn_types(&N_AND_Y).build().unwrap();
    assert_eq!(db.protocol().shared.deferred(U), Y, "deferred under writers of n");
    let mut l = db.loader();
    l.insert(U, K, &[0u64.to_le_bytes(), 7u64.to_le_bytes()].concat()).unwrap();
    l.insert(V, K, &0u64.to_le_bytes()).unwrap();
    drop(l);
    db
}

/// §4.3 under pending writers: an accumulation into a column that no template reads or
/// writes otherwise goes in at its transaction's commit under another transaction's
/// uncommitted write of the row's other column, without waiting for it or depending on
/// it; readers of committed data see it at once, and the writer's commit or rollback keeps
/// it. The history rebases the writer's write on the accumulation, and the checker finds
/// both outcomes serializable. A typed read or write of the accumulated column is refused.
#[test]
fn accumulations_go_in_under_pending_writers_of_other_columns() {
    use crate::checker;
    use crate::engine::Accumulation;
    const TYPES: &[TxnType; 2] = &N_AND_Y;
    let y = |r: &[u8]| u64::from_le_bytes(r[8..16].try_into().unwrap());
    for commit in [true, false] {
        let db =
            n_and_y_db(DbOptions { max_workers: 4, record_history: true, ..Default::default() });
        let (mut t1, mut t2, mut d) =
            (db.worker().unwrap(), db.worker().unwrap(), db.worker().unwrap());
        let read_u = |d: &mut Ic3Worker<'_>| {
            d.begin();
            let r = d.read(U, K, |r| (value(&r[..8]), y(r))).unwrap().unwrap();
            d.commit().unwrap();
            r
        };
        t1.typed(0);
        t1.begin();
        let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
        tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] = 5).map(|_| ())).unwrap();
        assert_ne!(word(&db, U) & super::super::record::PENDING, 0, "t1's write is pending");
        for _ in 0..2 {
            t2.typed(1);
            t2.begin();
            let mut tx = Tx::new(&mut t2, &TYPES[1], Checks::default());
            tx.piece(0, |tx| tx.accumulate(U, K, Accumulation::add_i64(1, 8, 3)).map(|_| ()))
                .unwrap();
            assert!(t2.local.deps.is_empty(), "no dependency on the pending writer");
            t2.commit().unwrap();
        }
        assert_eq!(read_u(&mut d), (0, 13), "committed at once, under the pending n");
        let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
        tx.piece(1, |tx| add(tx, V, 1)).unwrap();
        if commit {
            t1.commit().unwrap();
        } else {
            t1.abort();
        }
        let n = if commit { 5 } else { 0 };
        assert_eq!(read_u(&mut d), (n, 13), "the writer's outcome keeps the accumulations");
        // A typed read or write of the accumulated column is refused at the piece commit.
        for write in [false, true] {
            t1.typed(0);
            t1.begin();
            let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
            let r = tx.piece(0, |tx| {
                if write {
                    tx.update_cols(U, K, N | Y, N | Y, |r| r[8] = 1).map(|_| ())
                } else {
                    tx.read_cols(U, K, Y, |_| ()).map(|_| ())
                }
            });
            assert_eq!(r.map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
            t1.abort();
        }
        assert_eq!(read_u(&mut d), (n, 13));
        drop((t1, t2, d));
        let report = checker::check(&db.take_history());
        assert!(report.anomalies.is_empty(), "{commit}: {report:?}");
    }
}

/// Logging accumulations under pending writers: a 16-byte row `[n | y]` (a column record
/// of one word is no smaller than the row), a piece writes `n`, two deferred accumulations
/// of `y` commit under it, then the writer commits or rolls back; the log recovers `n` as
/// committed and `y` with both accumulations. Logging whole images instead put the
/// pending `n` into the accumulations' records (recovered after a rollback), and the
/// writer's image, taken at its piece commit, put the stale `y` above them.
#[test]
fn accumulations_under_pending_writers_log_only_their_columns() {
    use crate::durability::log::LogOptions;
    use crate::durability::recovery::recover;
    use crate::engine::Accumulation;
    const TYPES: &[TxnType; 2] = &N_AND_Y;
    let read_u = |db: &Database<Ic3>| {
        let mut d = db.worker().unwrap();
        d.begin();
        let r = d.read(U, K, |r| (value(&r[..8]), value(&r[8..]))).unwrap().unwrap();
        d.commit().unwrap();
        r
    };
    for commit in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = n_and_y_db(DbOptions {
            max_workers: 4,
            log: Some(LogOptions::new(dir.path())),
            ..Default::default()
        });
        db.checkpoint().unwrap();
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.typed(0);
        t1.begin();
        let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
        tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] = 5).map(|_| ())).unwrap();
        for _ in 0..2 {
            t2.typed(1);
            t2.begin();
            let mut tx = Tx::new(&mut t2, &TYPES[1], Checks::default());
            tx.piece(0, |tx| tx.accumulate(U, K, Accumulation::add_i64(1, 8, 3)).map(|_| ()))
                .unwrap();
            t2.commit().unwrap();
        }
        let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
        tx.piece(1, |tx| add(tx, V, 1)).unwrap();
        if commit {
            t1.commit().unwrap();
        } else {
            t1.abort();
        }
        drop((t1, t2));
        let n = if commit { 5 } else { 0 };
        assert_eq!(read_u(&db), (n, 13), "live");
        let mut db = db;
        db.close_log().unwrap();
        let fresh = Database::<Ic3>::builder(&n_and_y_tables()).txn_types(TYPES).build().unwrap();
        let report = recover(&fresh, dir.path()).unwrap();
        assert_eq!(
            read_u(&fresh),
            (n, 13),
            "recovered, the writer committed: {commit} ({report:?})"
        );
    }
}

/// A transaction that writes one column of a row in a piece and accumulates into another
/// column of the same row applies the accumulation at its commit under its own listed
/// write (it is then passing its commit point itself: the accumulation must not wait for
/// that), and the history stays serializable.
#[test]
fn an_accumulation_under_the_transactions_own_write_commits() {
    use crate::checker;
    use crate::engine::Accumulation;
    use std::sync::mpsc;
    const Y: u64 = 0b10;
    static BOTH: [Piece; 2] = [
        Piece {
            name: "n",
            accesses: &[TableAccess { table: U, mode: AccessMode::Write, columns: N }],
        },
        Piece {
            name: "y",
            accesses: &[TableAccess { table: U, mode: AccessMode::Accumulate, columns: Y }],
        },
    ];
    static TYPES: [TxnType; 1] = [TxnType { name: "both", pieces: &BOTH }];
    let tables = [TableSpec::new("u", 16, 16).with_columns(&[("n", 0, 8), ("y", 8, 8)])];
    let db = Database::<Ic3>::builder(&tables)
        .options(DbOptions { max_workers: 4, record_history: true, ..Default::default() })
        .txn_types(&TYPES)
        .build()
        .unwrap();
    assert_eq!(db.protocol().shared.deferred(U), Y);
    let mut l = db.loader();
    l.insert(U, K, &[0u64.to_le_bytes(), 7u64.to_le_bytes()].concat()).unwrap();
    drop(l);
    let db = std::sync::Arc::new(db);
    let (done, wait) = mpsc::channel();
    let d = db.clone();
    // On a thread of its own, so that a commit waiting for itself fails the test instead
    // of hanging it.
    let h = std::thread::spawn(move || {
        let mut t = d.worker().unwrap();
        for _ in 0..2 {
            t.typed(0);
            t.begin();
            let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
            tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] += 1).map(|_| ())).unwrap();
            tx.piece(1, |tx| tx.accumulate(U, K, Accumulation::add_i64(1, 8, 3)).map(|_| ()))
                .unwrap();
            t.commit().unwrap();
        }
        t.begin();
        let r = t.read(U, K, |r| (value(&r[..8]), value(&r[8..]))).unwrap().unwrap();
        t.commit().unwrap();
        done.send(r).unwrap();
    });
    let r = wait.recv_timeout(std::time::Duration::from_secs(60));
    assert_eq!(r, Ok((2, 13)), "both commits applied (a timeout: the commit waited for itself)");
    h.join().unwrap();
    let db = std::sync::Arc::into_inner(db).expect("the thread has ended");
    let report = checker::check(&db.take_history());
    assert!(report.anomalies.is_empty(), "{report:?}");
}

/// Table U: column `n` (0), which a template writes, and `tax` (1), which none does.
const U: TableId = TableId(0);
const V: TableId = TableId(1);
const N: u64 = 0b01;
const TAX: u64 = 0b10;
/// `upd` writes U's `n`, then V; `tax` reads U's `tax` (untracked), then writes V.
static UPD: [Piece; 2] = [
    Piece { name: "n", accesses: &[TableAccess { table: U, mode: AccessMode::Write, columns: N }] },
    Piece { name: "v", accesses: &[w(V)] },
];
static TAXED: [Piece; 2] = [
    Piece {
        name: "tax",
        accesses: &[TableAccess { table: U, mode: AccessMode::Read, columns: TAX }],
    },
    Piece { name: "v", accesses: &[w(V)] },
];
static UNTRACKED: [TxnType; 2] =
    [TxnType { name: "upd", pieces: &UPD }, TxnType { name: "tax", pieces: &TAXED }];

/// A database of U (`n` = 0, `tax` = 7 at key `K`) and V (0), analysing [`UNTRACKED`].
fn db_untracked() -> Database<Ic3> {
    let tables = [
        TableSpec::new("u", 16, 16).with_columns(&[("n", 0, 8), ("tax", 8, 8)]),
        TableSpec::new("v", 8, 16),
    ];
    let db = Database::<Ic3>::builder(&tables)
        .options(DbOptions { max_workers: 4, ..Default::default() })
        .txn_types(&UNTRACKED)
        .build()
        .unwrap();
    let mut l = db.loader();
    l.insert(U, K, &[0u64.to_le_bytes(), 7u64.to_le_bytes()].concat()).unwrap();
    l.insert(V, K, &0u64.to_le_bytes()).unwrap();
    drop(l);
    db
}

fn tax(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[8..16].try_into().unwrap())
}

/// Runs a `tax` transaction's first piece on `t`: reads U's `tax`.
fn read_tax(t: &mut Ic3Worker<'_>) -> u64 {
    t.typed(1);
    t.begin();
    let mut tx = Tx::new(t, &UNTRACKED[1], Checks { templates: true, ..Checks::default() });
    tx.piece(0, |tx| Ok(tx.read_cols(U, K, TAX, tax)?.unwrap())).unwrap()
}

/// A typed read of a column no template writes leaves no entry and makes no dependency:
/// the reader neither waits for a pending writer of another column of the row nor is
/// ordered after it, and commits first.
#[test]
fn untracked_reads_leave_no_entry_and_make_no_dependency() {
    let db = db_untracked();
    let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
    t1.typed(0);
    t1.begin();
    let mut tx = Tx::new(&mut t1, &UNTRACKED[0], Checks::default());
    tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] = 5).map(|_| ())).unwrap();
    assert_ne!(word(&db, U) & super::super::record::PENDING, 0, "t1's write is pending");
    assert_eq!(read_tax(&mut t2), 7);
    assert!(t2.local.deps.is_empty() && t2.reads.is_empty(), "no dependency, no read set");
    assert!(t2.local.untracked_reads);
    let mut tx = Tx::new(&mut t2, &UNTRACKED[1], Checks::default());
    tx.piece(1, |tx| add(tx, V, 1)).unwrap();
    t2.commit().unwrap();
    assert_eq!(t2.local.shared().contexts.states().filter(|s| s.runs()).count(), 1);
    let mut tx = Tx::new(&mut t1, &UNTRACKED[0], Checks::default());
    tx.piece(1, |tx| add(tx, V, 1)).unwrap();
    t1.commit().unwrap();
    assert_eq!(committed(&db, V), 2);
}

/// A direct writer of an untracked column that overlaps a typed reader of it fails the
/// reader at its commit (the reader does not wait for it, nor it for the reader); one that
/// finished before the reader began does not, nor does a direct write of a written column.
#[test]
fn a_direct_writer_of_an_untracked_column_fails_the_readers_it_overlaps() {
    let db = db_untracked();
    let (mut t, mut d) = (db.worker().unwrap(), db.worker().unwrap());
    let direct = |d: &mut Ic3Worker<'_>, cols: u64, v: u8| {
        d.begin();
        assert!(d.update_cols(U, K, cols, cols, |r| r[8] = v).unwrap().is_some());
        d.commit().unwrap();
    };
    assert_eq!(read_tax(&mut t), 7);
    direct(&mut d, TAX, 8);
    let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
    tx.piece(1, |tx| add(tx, V, 1)).unwrap();
    assert_eq!(t.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
    assert_eq!(committed(&db, V), 0, "rolled back");
    assert_eq!(read_tax(&mut t), 8, "the writer finished before this attempt began");
    direct(&mut d, N | TAX, 8); // `n` and `tax` (unchanged): a write of `tax` all the same
    let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
    tx.piece(1, |tx| add(tx, V, 1)).unwrap();
    assert_eq!(t.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
    assert_eq!(read_tax(&mut t), 8);
    d.begin();
    assert!(d.update_cols(U, K, N, N, |r| r[0] = 9).unwrap().is_some());
    d.commit().unwrap();
    let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
    tx.piece(1, |tx| add(tx, V, 1)).unwrap();
    t.commit().unwrap();
    assert_eq!(committed(&db, V), 1);
}

/// What the untracked reads rely on is checked at the piece commit whatever the caller's
/// checks (here none): a typed write of a column no template declares written, and a
/// tracked read where the template declares only untracked ones (the analysis gave it no
/// C-edge), are refused.
#[test]
fn writes_of_untracked_columns_and_undeclared_tracked_reads_are_refused() {
    let db = db_untracked();
    let mut t = db.worker().unwrap();
    t.typed(0);
    t.begin();
    let mut tx = Tx::new(&mut t, &UNTRACKED[0], Checks::default());
    let wrote = tx.piece(0, |tx| tx.update_cols(U, K, TAX, TAX, |r| r[8] = 1).map(|_| ()));
    assert_eq!(wrote.map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
    t.abort();
    t.typed(1);
    t.begin();
    let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
    let read = tx.piece(0, |tx| Ok(tx.read_cols(U, K, N | TAX, tax)?.unwrap()));
    assert_eq!(read.map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
    t.abort();
    assert_eq!(read_tax(&mut t), 7, "nothing was written");
    t.abort();
}
