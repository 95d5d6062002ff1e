//! Changing the mix of transaction types while workers run (`Database::set_mix`; IC3's online
//! analysis, §4.5): the workers keep running across each change, on the old graph, the
//! transitional one and the new one side by side, and the outcome is exact and serializable.
//!
//! The types of IC3's Figure 9: `T1` writes table A, then table B; `T2` writes B, then A. On
//! `T1`'s graph alone `T1` runs as two pieces; with `T2` the analysis merges each into one
//! piece (their conflicts reach the tables in opposite orders). Transactions of the two graphs
//! of `T1` side by side could each come to depend on the other: a deadlock at their commits.
//! A control thread switches between the two mixes many times while 8 workers on 2 cores run
//! both types (a type outside the mix runs directly); then each table's sum must be the
//! committed count, and the recorded history serializable. The same with the paper's
//! stop-the-world baseline, and over TPC-C with the mixes of the paper's §6.9.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common;
use txlab::checker;
use txlab::engine::{
    AccessMode, Checks, Generator, Piece, Procedure, Retry, TableAccess, Tx, TxnType, Workload,
    ALL_COLUMNS,
};
use txlab::prelude::*;
use txlab::protocols::ic3::Ic3;
use txlab::workloads::tpcc::{Tpcc, TpccConfig};

const A: TableId = TableId(0);
const B: TableId = TableId(1);
/// Keys per table: few, so that the two types conflict often.
const KEYS: u64 = 4;
const THREADS: u64 = 8;
/// Mix changes made while the workers run.
const CHANGES: usize = 24;
/// A deadlock detector's bound, not a performance expectation.
const LIVENESS: Duration = Duration::from_secs(20);

const fn w(t: TableId) -> TableAccess {
    TableAccess { table: t, mode: AccessMode::Write, columns: ALL_COLUMNS }
}

static T1: [Piece; 2] =
    [Piece { name: "A", accesses: &[w(A)] }, Piece { name: "B", accesses: &[w(B)] }];
static T2: [Piece; 2] =
    [Piece { name: "B", accesses: &[w(B)] }, Piece { name: "A", accesses: &[w(A)] }];
static TYPES: [TxnType; 2] =
    [TxnType { name: "T1", pieces: &T1 }, TxnType { name: "T2", pieces: &T2 }];

fn get(r: &[u8]) -> u64 {
    u64::from_le_bytes(r[..8].try_into().unwrap())
}

/// Adds one to `first`'s key of the type's first table, then to `second`'s of its second.
struct Bump {
    ty: usize,
    first: u64,
    second: u64,
}

impl Procedure for Bump {
    fn txn_type(&self) -> usize {
        self.ty
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let (x, y) = if self.ty == 0 { (A, B) } else { (B, A) };
        for (p, (t, k)) in [(x, self.first), (y, self.second)].into_iter().enumerate() {
            tx.piece(p, |tx| {
                let bumped = tx.update(t, k, |r| {
                    let v = get(r) + 1;
                    r[..8].copy_from_slice(&v.to_le_bytes());
                })?;
                assert!(bumped.is_some(), "loaded");
                Ok(())
            })?;
        }
        Ok(())
    }
}

fn figure_9_db(pairs: &[(&str, &str)]) -> Database<Ic3> {
    let opts = DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(2),
        record_history: true,
        ..Default::default()
    };
    let tables = [TableSpec::new("a", 8, 16), TableSpec::new("b", 8, 16)];
    let db = common::with_options(pairs, || {
        Database::<Ic3>::builder(&tables)
            .options(opts)
            .protocol_options(common::options::<Ic3>())
            .txn_types(&TYPES)
            .build()
            .unwrap()
    });
    let mut wk = db.worker().unwrap();
    wk.begin();
    for t in [A, B] {
        for k in 0..KEYS {
            assert!(wk.insert(t, k, &0u64.to_le_bytes()).unwrap());
        }
    }
    wk.commit().unwrap();
    drop(wk);
    db
}

/// Runs `work(worker index, transaction index)` on 8 threads: each at least `per_worker`
/// transactions and until a control thread has made `CHANGES` mix changes, alternating
/// `mixes`, all while every worker runs (it begins once each worker has committed one).
/// Returns the transactions each ran.
fn run_while_changing<P: Protocol>(
    db: &Database<P>,
    per_worker: u64,
    mixes: &[&[usize]],
    work: impl Fn(&mut P::Worker<'_>, u64, u64) + Sync,
) -> Vec<u64> {
    let started = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let changed = AtomicBool::new(false);
    let start = Instant::now();
    // Deadlocked workers never return to a check of their own: the whole test binary stops.
    let deadline = || {
        if start.elapsed() > LIVENESS {
            eprintln!("deadlock detector: the run did not end within {LIVENESS:?}");
            std::process::exit(101);
        }
    };
    std::thread::scope(|s| {
        let control = s.spawn(|| {
            while started.load(Ordering::Acquire) < THREADS as usize {
                std::thread::sleep(Duration::from_micros(100));
            }
            for i in 0..CHANGES {
                db.set_mix(mixes[i % mixes.len()]).unwrap();
            }
            changed.store(true, Ordering::Release);
        });
        // A mix change waits for attempts on the old graph to end, a worker for the others:
        // the watchdog looks at the clock apart from both.
        s.spawn(|| {
            while finished.load(Ordering::Acquire) < THREADS as usize {
                deadline();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (started, changed, finished, work) = (&started, &changed, &finished, &work);
                s.spawn(move || {
                    // Counts the worker finished even when it panics (the watchdog then stops).
                    struct Finished<'a>(&'a AtomicUsize);
                    impl Drop for Finished<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_add(1, Ordering::Release);
                        }
                    }
                    let _finished = Finished(finished);
                    let mut wk = db.worker().unwrap();
                    let mut n = 0;
                    while n < per_worker || !changed.load(Ordering::Acquire) {
                        work(&mut wk, t, n);
                        n += 1;
                        if n == 1 {
                            started.fetch_add(1, Ordering::Release);
                        }
                    }
                    n
                })
            })
            .collect();
        control.join().unwrap();
        workers.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn figure_9_changes(pairs: &[(&str, &str)]) {
    let db = figure_9_db(pairs);
    let checks = Checks { templates: true, ..Checks::default() };
    let ran = run_while_changing(&db, 300, &[&[0, 1], &[0]], |wk, t, n| {
        let mut retry = Retry::new().seed(t << 32 | n).max_backoff(Duration::from_micros(20));
        let x = (t * 7 + n * 13) % 10;
        let bump = Bump { ty: usize::from(x < 3), first: (t + n) % KEYS, second: (n / 3) % KEYS };
        retry.run_procedure(wk, &TYPES[bump.ty], &bump, checks).unwrap();
    });
    let committed: u64 = ran.iter().sum();
    let mut wk = db.worker().unwrap();
    wk.begin();
    for t in [A, B] {
        let sum: u64 = (0..KEYS).map(|k| wk.read(t, k, get).unwrap().unwrap()).sum();
        assert_eq!(sum, committed, "table {t:?}: every committed transaction added one");
    }
    wk.commit().unwrap();
    drop(wk);
    let report = checker::check(&db.take_history());
    assert!(report.anomalies.is_empty(), "{report:#?}");
    assert!(report.committed as u64 > committed, "{} of {committed}", report.committed);
}

#[test]
fn figure_9_mix_changes_keep_every_transaction_and_serializability() {
    figure_9_changes(&[]);
}

#[test]
fn figure_9_mix_changes_with_pessimistic_waits_and_yielding() {
    figure_9_changes(&[("optimistic", "off"), ("wait", "yield"), ("rendezvous", "off")]);
}

/// The paper's baseline: each change stops the world (no attempt begins until every running
/// one has ended and the new graph is published); the outcome is as exact.
#[test]
fn figure_9_mix_changes_stopping_the_world() {
    figure_9_changes(&[("online", "stop")]);
}

/// TPC-C at 1 warehouse while the mix goes through the paper's §6.9 steps and back:
/// New-Order, Order-Status and Stock-Level; then Payment; then Delivery. The driver's full mix
/// keeps running every type (those outside the mix directly); the consistency conditions and
/// the checker judge the outcome.
#[test]
fn tpcc_mix_changes_keep_the_consistency_conditions() {
    let tpcc = Tpcc::new(TpccConfig::new(1));
    let opts = DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(2),
        record_history: true,
        ..Default::default()
    };
    let db = common::database_for::<Ic3, _>(&tpcc, opts);
    tpcc.load(&db, 2).unwrap();
    let names: Vec<&str> = tpcc.txn_types().iter().map(|t| t.name).collect();
    let ty = |n: &str| names.iter().position(|&x| x == n).unwrap();
    let base = [ty("new-order"), ty("order-status"), ty("stock-level")];
    let with_payment = [base[0], base[1], base[2], ty("payment")];
    let all: Vec<usize> = (0..names.len()).collect();
    let mixes: [&[usize]; 4] = [&base, &with_payment, &all, &with_payment];
    let gens: Vec<_> =
        (0..THREADS as usize).map(|i| std::sync::Mutex::new(tpcc.generator(i, 8, 77))).collect();
    let checks = Checks { templates: true, ..Checks::default() };
    let user_aborts = AtomicU64::new(0);
    run_while_changing(&db, 60, &mixes, |wk, t, n| {
        let mut gen = gens[t as usize].lock().unwrap();
        let mut proc = gen.blank();
        gen.fill(&mut proc);
        let mut retry = Retry::new().seed(t << 32 | n).max_backoff(Duration::from_micros(20));
        let ty = &tpcc.txn_types()[proc.txn_type()];
        match retry.run_procedure(wk, ty, &proc, checks) {
            Ok(()) => gen.committed(&proc),
            Err(a) if a.reason == txlab::error::AbortReason::User => {
                user_aborts.fetch_add(1, Ordering::Relaxed);
            }
            Err(a) => panic!("{a:?}"),
        }
    });
    assert_eq!(tpcc.check(&db), Ok(()));
    let report = checker::check(&db.take_history());
    assert!(report.anomalies.is_empty(), "{report:#?}");
}
