//! Recorded histories under contention, checked by the serializability checker: every
//! serializable protocol's history is clean, and `nocc`'s shows the anomalies it permits (the
//! positive control that proves the recording and the checker can see). 8 threads on 2 cores,
//! fixed seeds.

use rand::{RngExt, SeedableRng};
use std::ops::ControlFlow;
use std::time::Duration;
use txlab::checker::{check, AnomalyClass, Report};
use txlab::prelude::*;

const THREADS: u64 = 8;
const T: TableId = TableId(0);
type Rng = rand::rngs::Xoshiro256PlusPlus;

fn db<P: Protocol>(rows: u64, index: IndexKind) -> Database<P> {
    db_with::<P>(rows, index, crate::common::options::<P>())
}

/// [`db`] with protocol options.
fn db_with<P: Protocol>(rows: u64, index: IndexKind, options: P::Options) -> Database<P> {
    let opts = DbOptions {
        max_workers: 32,
        epoch_interval: Duration::from_millis(1),
        record_history: true,
        ..Default::default()
    };
    let db = Database::<P>::builder(&[TableSpec::new("t", 8, rows)
        .with_capacity(1 << 16)
        .with_index(index)])
    .options(opts)
    .protocol_options(options)
    .build()
    .unwrap();
    let mut l = db.loader();
    for k in 0..rows {
        l.insert(T, k, &100u64.to_le_bytes()).unwrap();
    }
    drop(l);
    db
}

fn u(r: &[u8]) -> u64 {
    u64::from_le_bytes(r[..8].try_into().unwrap())
}

/// Runs `body` on 8 threads; each attempt that fails is retried after a short random pause.
fn run<P: Protocol>(
    db: &Database<P>,
    seed: u64,
    per_thread: u64,
    body: impl Fn(&mut P::Worker<'_>, &mut Rng) -> Result<(), Abort> + Sync,
) {
    run_mixed(db, seed, per_thread, 0, |w, rng, _| body(w, rng));
}

/// [`run`], with one transaction in `read_only` (out of 4) declared read-only
/// ([`Worker::begin_read_only`]); `body` is told which it runs.
fn run_mixed<P: Protocol>(
    db: &Database<P>,
    seed: u64,
    per_thread: u64,
    read_only: u32,
    body: impl Fn(&mut P::Worker<'_>, &mut Rng, bool) -> Result<(), Abort> + Sync,
) {
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let body = &body;
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = Rng::seed_from_u64(seed * 1000 + t);
                for _ in 0..per_thread {
                    let ro = rng.random_range(0..4) < read_only;
                    for _ in 0..10_000u32 {
                        if ro {
                            w.begin_read_only();
                        } else {
                            w.begin();
                        }
                        match body(&mut w, &mut rng, ro).and_then(|()| w.commit()) {
                            Ok(()) => break,
                            Err(a) => {
                                w.abort();
                                if a.reason == AbortReason::User {
                                    break;
                                }
                                std::thread::sleep(Duration::from_micros(rng.random_range(0..20)));
                            }
                        }
                    }
                }
            });
        }
    });
}

/// Transfers between 8 accounts with a yield between reads and writes, 1 in 10 rolled back by
/// a user abort after writing, plus read-only audits.
fn bank<P: Protocol>(seed: u64, index: IndexKind) -> Report {
    check(&bank_history::<P>(seed, index))
}

fn bank_history<P: Protocol>(seed: u64, index: IndexKind) -> txlab::history::History {
    let db = db::<P>(8, index);
    run(&db, seed, 300, |w, rng| {
        if rng.random_range(0..4) == 0 {
            for k in 0..8 {
                w.read(T, k, u)?;
            }
            return Ok(());
        }
        if !transfer(w, rng)? {
            return Ok(());
        }
        if rng.random_range(0..10) == 0 {
            // Others may read the doomed writes meanwhile (in-place writers without locks).
            std::thread::yield_now();
            return Err(Abort::user());
        }
        Ok(())
    });
    let h = db.take_history();
    assert!(h.len() as u64 >= THREADS * 300, "every attempt was recorded: {}", h.len());
    h
}

/// Scans of 8-key ranges racing inserts and deletes of keys in them; every transaction scans and
/// then changes one key of what it scanned.
fn scans<P: Protocol>(seed: u64) -> Report {
    check(&scans_history::<P>(seed))
}

fn scans_history<P: Protocol>(seed: u64) -> txlab::history::History {
    let db = db::<P>(0, IndexKind::Ordered);
    run(&db, seed, 300, |w, rng| scan_and_change(w, rng, true));
    db.take_history()
}

/// Moves 1 between two random accounts of 8, with a yield between the first read and the
/// writes; `Ok(false)` when it drew the same account twice and did nothing.
fn transfer<W: Worker>(w: &mut W, rng: &mut Rng) -> Result<bool, Abort> {
    let (a, b) = (rng.random_range(0..8u64), rng.random_range(0..8u64));
    if a == b {
        return Ok(false);
    }
    let x = w.read(T, a, u)?.unwrap();
    std::thread::yield_now();
    w.update(T, a, |r| r.copy_from_slice(&(x.wrapping_sub(1)).to_le_bytes()))?;
    w.update(T, b, |r| {
        let v = u(r).wrapping_add(1);
        r.copy_from_slice(&v.to_le_bytes())
    })?;
    Ok(true)
}

/// Scans a random 8-key range and, with `change`, then inserts a key of it (when it held fewer
/// than 3) or deletes one.
fn scan_and_change<W: Worker>(w: &mut W, rng: &mut Rng, change: bool) -> Result<(), Abort> {
    let lo = rng.random_range(0..56u64);
    let mut seen = 0;
    w.scan(T, lo, lo + 7, 100, |_, _| {
        seen += 1;
        ControlFlow::Continue(())
    })?;
    if !change {
        return Ok(());
    }
    std::thread::yield_now();
    let k = lo + rng.random_range(0..8u64);
    if seen < 3 {
        w.insert(T, k, &k.to_le_bytes())?;
    } else {
        w.delete(T, k)?;
    }
    Ok(())
}

#[track_caller]
fn clean(rep: &Report, what: &str) {
    assert!(rep.anomalies.is_empty(), "{what}: {rep}");
    assert!(
        rep.committed > 1000 && rep.edges.iter().sum::<u64>() > 1000,
        "{what}: too little to check: {rep}"
    );
}

fn serializable<P: Protocol>() {
    for seed in 1..=2 {
        clean(&bank::<P>(seed, IndexKind::Ordered), &format!("bank, seed {seed}"));
        clean(&bank::<P>(seed, IndexKind::Hash), &format!("bank on a hash index, seed {seed}"));
        let rep = scans::<P>(seed);
        clean(&rep, &format!("scans, seed {seed}"));
        assert!(rep.edges[3] + rep.edges[4] > 0, "predicate edges were built: {rep}");
    }
}

#[test]
fn two_pl_nowait_histories_are_serializable() {
    serializable::<txlab::protocols::two_pl::TwoPlNoWait>();
}

#[test]
fn two_pl_waitdie_histories_are_serializable() {
    serializable::<txlab::protocols::two_pl::TwoPlWaitDie>();
}

#[test]
fn two_pl_ordered_histories_are_serializable() {
    // Undeclared transactions, locked as they go without waiting.
    crate::common::with_options(&[("undeclared", "no-wait")], || {
        serializable::<txlab::protocols::two_pl_ordered::TwoPlOrdered>()
    });
}

#[test]
fn silo_histories_are_serializable() {
    serializable::<txlab::protocols::silo::Silo>();
}

/// TicToc's histories carry commit timestamps, not clock readings, as serialization points.
#[test]
fn tictoc_histories_are_serializable() {
    serializable::<txlab::protocols::tictoc::TicToc>();
}

#[test]
fn mocc_histories_are_serializable() {
    serializable::<txlab::protocols::mocc::Mocc>();
}

/// The positive control: `nocc` loses updates and reads data of transactions that later abort,
/// and the checker says so.
#[test]
fn nocc_is_caught_losing_updates_and_reading_aborted_data() {
    let rep = bank::<txlab::protocols::nocc::Nocc>(1, IndexKind::Ordered);
    assert!(rep.has(AnomalyClass::LostUpdate), "{rep}");
    assert!(rep.has(AnomalyClass::G1a), "{rep}");
    let text = rep.to_string();
    assert!(text.contains("cycle: w") && text.contains("-rw["), "a cycle is printed: {text}");
}

/// The positive control for predicates: `nocc`'s scans racing inserts show cycles.
#[test]
fn nocc_is_caught_with_phantoms() {
    let rep = scans::<txlab::protocols::nocc::Nocc>(1);
    assert!(!rep.anomalies.is_empty(), "{rep}");
}

/// Snapshots (Silo §4.9), a boundary every epoch of 1 ms: half the transactions are declared
/// read-only and read snapshots (audits of the 8 accounts, scans) while transfers, inserts and
/// deletes commit. Every committed audit sees the total the transfers keep, and the histories,
/// where the snapshot readers sit at their boundaries on the epochs' time line, are clean.
/// (`taken` tells whether an attempt reads a snapshot.)
fn snapshot_histories_are_serializable<P: Protocol>(taken: impl Fn(&P::Worker<'_>) -> bool + Sync) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use txlab::engine::ProtocolOptions;
    let options = || P::Options::from_pairs(&[("snapshot-epochs".into(), "1".into())]).unwrap();
    for seed in 1..=2 {
        let db = db_with::<P>(8, IndexKind::Ordered, options());
        let (audits, snapshots) = (AtomicU64::new(0), AtomicU64::new(0));
        run_mixed(&db, seed, 300, 2, |w, rng, ro| {
            if ro {
                if taken(w) {
                    snapshots.fetch_add(1, Ordering::Relaxed);
                }
                let mut sum = 0u64;
                for k in 0..8 {
                    sum = sum.wrapping_add(w.read(T, k, u)?.unwrap());
                }
                // A snapshot is consistent; an ordinary attempt (no boundary yet) may not be,
                // and fails its validation.
                if w.reads_still_valid() {
                    assert_eq!(sum, 800, "an audit saw a partial transfer");
                    audits.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(());
            }
            transfer(w, rng).map(drop)
        });
        assert!(audits.load(Ordering::Relaxed) > 300, "audits ran");
        assert!(snapshots.load(Ordering::Relaxed) > 300, "most audits read snapshots");
        clean(&check(&db.take_history()), &format!("bank with snapshots, seed {seed}"));

        let db = db_with::<P>(0, IndexKind::Ordered, options());
        run_mixed(&db, seed, 300, 2, |w, rng, ro| scan_and_change(w, rng, !ro));
        let rep = check(&db.take_history());
        clean(&rep, &format!("scans with snapshots, seed {seed}"));
        assert!(rep.edges[3] + rep.edges[4] > 0, "predicate edges were built: {rep}");
    }
}

#[test]
fn silo_snapshot_histories_are_serializable() {
    snapshot_histories_are_serializable::<txlab::protocols::silo::Silo>(|w| w.ctx.snapshot != 0);
}

#[test]
fn mocc_snapshot_histories_are_serializable() {
    snapshot_histories_are_serializable::<txlab::protocols::mocc::Mocc>(|w| w.ctx.snapshot != 0);
}

/// IC3's untyped transactions commit directly (in place, under their locks), as the snapshot
/// readers read (the typed ones race snapshot readers in `txlab check`'s TPC-C).
#[test]
fn ic3_snapshot_histories_are_serializable() {
    snapshot_histories_are_serializable::<txlab::protocols::ic3::Ic3>(|w| w.ctx.snapshot != 0);
}

/// An IC3 database of `tables` analysing `types`, recording its history, for 8 threads.
fn ic3_recording(
    tables: &[TableSpec],
    types: &'static [TxnType],
) -> Database<txlab::protocols::ic3::Ic3> {
    let opts = DbOptions {
        max_workers: 32,
        epoch_interval: Duration::from_millis(1),
        record_history: true,
        ..Default::default()
    };
    Database::builder(tables).options(opts).txn_types(types).build().unwrap()
}

/// Table V of the IC3 tests: one 8-byte counter per key.
fn v_table() -> TableSpec {
    TableSpec::new("v", 8, 8)
}

/// IC3's typed transactions read a column no template writes (`tax`) untracked, racing typed
/// writers of another column of the same rows (`n`) and untyped direct writers of `tax` that
/// read what the typed readers write (V): without the guard against those writers, a reader
/// that saw a `tax` before a writer and wrote a V the writer read before it would close a
/// cycle. 8 threads, fixed seeds.
#[test]
fn ic3_untracked_reads_racing_direct_writers_are_serializable() {
    use txlab::engine::{Checks, Piece, TableAccess, ALL_COLUMNS};
    const U: TableId = TableId(0);
    const V: TableId = TableId(1);
    const N: u64 = 0b01;
    const TAX: u64 = 0b10;
    const fn access(table: TableId, mode: AccessMode, columns: u64) -> TableAccess {
        TableAccess { table, mode, columns }
    }
    static UPD: [Piece; 1] = [Piece { name: "n", accesses: &[access(U, AccessMode::Write, N)] }];
    static READ_TAX: [Piece; 2] = [
        Piece { name: "tax", accesses: &[access(U, AccessMode::Read, TAX)] },
        Piece { name: "v", accesses: &[access(V, AccessMode::Write, ALL_COLUMNS)] },
    ];
    static TYPES: [TxnType; 2] =
        [TxnType { name: "upd", pieces: &UPD }, TxnType { name: "tax", pieces: &READ_TAX }];
    let db = ic3_recording(
        &[TableSpec::new("u", 16, 8).with_columns(&[("n", 0, 8), ("tax", 8, 8)]), v_table()],
        &TYPES,
    );
    let mut l = db.loader();
    for k in 0..8u64 {
        l.insert(U, k, &[0u64.to_le_bytes(), 1u64.to_le_bytes()].concat()).unwrap();
        l.insert(V, k, &0u64.to_le_bytes()).unwrap();
    }
    drop(l);
    let tax = |r: &[u8]| u(&r[8..16]);
    let checks = Checks { templates: true, ..Checks::default() };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let db = &db;
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = Rng::seed_from_u64(7000 + t);
                for _ in 0..300 {
                    let kind = rng.random_range(0..4u32);
                    let (a, b, c) =
                        (rng.random_range(0..8), rng.random_range(0..8), rng.random_range(0..8));
                    for attempt in 0..10_000u32 {
                        assert!(attempt < 9_999, "no progress: a deadlock?");
                        let done = match kind {
                            0 | 1 => {
                                w.typed(1);
                                w.begin();
                                let mut tx = Tx::new(&mut w, &TYPES[1], checks);
                                tx.piece(0, |tx| {
                                    let x = tx.read_cols(U, a, TAX, tax)?.unwrap();
                                    std::thread::yield_now();
                                    Ok(x + tx.read_cols(U, b, TAX, tax)?.unwrap())
                                })
                                .and_then(|sum| {
                                    tx.piece(1, |tx| {
                                        tx.update(V, c, |r| r.copy_from_slice(&sum.to_le_bytes()))
                                            .map(|_| ())
                                    })
                                })
                            }
                            2 => {
                                w.typed(0);
                                w.begin();
                                let mut tx = Tx::new(&mut w, &TYPES[0], checks);
                                tx.piece(0, |tx| {
                                    tx.update_cols(U, a, N, N, |r| {
                                        let n = u(&r[..8]) + 1;
                                        r[..8].copy_from_slice(&n.to_le_bytes());
                                    })
                                    .map(|_| ())
                                })
                            }
                            _ => {
                                w.begin();
                                (|| {
                                    let v = w.read(V, c, u)?.unwrap();
                                    std::thread::yield_now();
                                    w.update_cols(U, a, TAX, TAX, |r| {
                                        r[8..16].copy_from_slice(&(v + 1).to_le_bytes())
                                    })?;
                                    Ok(())
                                })()
                            }
                        };
                        match done.and_then(|()| w.commit()) {
                            Ok(()) => break,
                            Err(_) => w.abort(),
                        }
                    }
                }
            });
        }
    });
    let rep = check(&db.take_history());
    clean(&rep, "untracked reads and direct writers");
}

/// IC3's accumulations into a column no template reads or writes otherwise (`y`) go in at
/// their transactions' commits under other transactions' uncommitted writes of the same rows'
/// other column (`n`), some of which roll back (a user abort after the write's piece), while
/// direct transactions read whole rows: the history (the writes rebased on the accumulations
/// they went in under) is serializable, and every committed accumulation and write is counted
/// exactly once. 8 threads, fixed seeds.
#[test]
fn ic3_accumulations_under_pending_writers_are_serializable() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use txlab::engine::{Accumulation, Checks, Piece, TableAccess, ALL_COLUMNS};
    const U: TableId = TableId(0);
    const V: TableId = TableId(1);
    const W: TableId = TableId(2);
    const N: u64 = 0b01;
    const Y: u64 = 0b10;
    const KEYS: u64 = 4;
    const fn access(table: TableId, mode: AccessMode, columns: u64) -> TableAccess {
        TableAccess { table, mode, columns }
    }
    static UPD: [Piece; 2] = [
        Piece { name: "n", accesses: &[access(U, AccessMode::Write, N)] },
        Piece { name: "v", accesses: &[access(V, AccessMode::Write, ALL_COLUMNS)] },
    ];
    static PAY: [Piece; 2] = [
        Piece { name: "y", accesses: &[access(U, AccessMode::Accumulate, Y)] },
        Piece { name: "v", accesses: &[access(V, AccessMode::Write, ALL_COLUMNS)] },
    ];
    static TYPES: [TxnType; 2] =
        [TxnType { name: "upd", pieces: &UPD }, TxnType { name: "pay", pieces: &PAY }];
    let db = ic3_recording(
        &[
            TableSpec::new("u", 16, 8).with_columns(&[("n", 0, 8), ("y", 8, 8)]),
            v_table(),
            TableSpec::new("w", 8, 8),
        ],
        &TYPES,
    );
    let mut l = db.loader();
    for k in 0..KEYS {
        l.insert(U, k, &[0u64.to_le_bytes(), 0u64.to_le_bytes()].concat()).unwrap();
        l.insert(V, k, &0u64.to_le_bytes()).unwrap();
        l.insert(W, k, &0u64.to_le_bytes()).unwrap();
    }
    drop(l);
    let (upds, pays) = (AtomicU64::new(0), AtomicU64::new(0));
    let checks = Checks { templates: true, ..Checks::default() };
    let bump = |r: &mut [u8]| r.copy_from_slice(&(u(r) + 1).to_le_bytes());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (db, upds, pays) = (&db, &upds, &pays);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = Rng::seed_from_u64(8000 + t);
                for _ in 0..300 {
                    let kind = rng.random_range(0..4u32);
                    let (a, b, c) = (
                        rng.random_range(0..KEYS),
                        rng.random_range(0..KEYS),
                        rng.random_range(0..KEYS),
                    );
                    let give_up = rng.random_range(0..4u32) == 0;
                    let mut last = None;
                    for attempt in 0..10_000u32 {
                        assert!(attempt < 9_999, "no progress: a deadlock? kind {kind}, {last:?}");
                        let done = match kind {
                            0 => {
                                w.typed(0);
                                w.begin();
                                let mut tx = Tx::new(&mut w, &TYPES[0], checks);
                                tx.piece(0, |tx| {
                                    tx.update_cols(U, a, N, N, |r| bump(&mut r[..8])).map(|_| ())
                                })
                                .and_then(|()| {
                                    std::thread::yield_now();
                                    if give_up {
                                        return Err(Abort::user());
                                    }
                                    tx.piece(1, |tx| tx.update(V, c, bump).map(|_| ()))
                                })
                            }
                            1 => {
                                w.typed(1);
                                w.begin();
                                let mut tx = Tx::new(&mut w, &TYPES[1], checks);
                                let acc = Accumulation::add_i64(1, 8, 1);
                                tx.piece(0, |tx| tx.accumulate(U, a, acc).map(|_| ())).and_then(
                                    |()| tx.piece(1, |tx| tx.update(V, c, bump).map(|_| ())),
                                )
                            }
                            _ => {
                                w.begin();
                                (|| {
                                    let x = w.read(U, a, |r| u(&r[..8]) + u(&r[8..]))?.unwrap();
                                    std::thread::yield_now();
                                    let y = w.read(U, b, |r| u(&r[..8]) + u(&r[8..]))?.unwrap();
                                    w.update(W, c, |r| r.copy_from_slice(&(x + y).to_le_bytes()))?;
                                    Ok(())
                                })()
                            }
                        };
                        match done.and_then(|()| w.commit()) {
                            Ok(()) => {
                                match kind {
                                    0 => upds.fetch_add(1, Ordering::Relaxed),
                                    1 => pays.fetch_add(1, Ordering::Relaxed),
                                    _ => 0,
                                };
                                break;
                            }
                            Err(a) => {
                                w.abort();
                                if a.reason == AbortReason::User {
                                    break;
                                }
                                last = Some(a.reason);
                            }
                        }
                    }
                }
            });
        }
    });
    let mut r = db.worker().unwrap();
    r.begin();
    let (mut n, mut y, mut v) = (0, 0, 0);
    for k in 0..KEYS {
        r.read(U, k, |row| {
            n += u(&row[..8]);
            y += u(&row[8..]);
        })
        .unwrap()
        .unwrap();
        v += r.read(V, k, u).unwrap().unwrap();
    }
    r.commit().unwrap();
    drop(r);
    let (upds, pays) = (upds.into_inner(), pays.into_inner());
    assert!(upds > 0 && pays > 0);
    assert_eq!((n, y, v), (upds, pays, upds + pays), "every committed write, exactly once");
    let rep = check(&db.take_history());
    clean(&rep, "accumulations under pending writers");
}
