//! Random sequences of operations on a few keys inside one transaction, checked against a model,
//! for every protocol.
//!
//! * **Alone** (every protocol, `nocc` included): one thread runs transactions of 1 to 10
//!   operations (read, read-for-update, blind write, update, insert, delete, scan) on 6 keys,
//!   commits four in five and aborts the rest. Every result must equal the model's (the committed
//!   state plus the transaction's own changes), and after each transaction the database must
//!   equal the committed model. This pins down each protocol's write-set bookkeeping: delete
//!   after insert, insert after delete, write after delete, a revive deleted again...
//! * **Under interference** (serializable protocols): 8 threads on 2 cores run such transactions
//!   at once with history recording on. An attempt that commits must have seen results
//!   consistent with its own changes (the model learns each key's state from the first
//!   operation that reveals it), and the recorded history must have no dependency cycle. This is
//!   how a write-set entry that is rewritten or removed while the read set still leans on it
//!   (the Silo revive-then-delete bug) shows up as a cycle.
//!
//! Fixed seeds; a fixed number of transactions per thread (no time windows).

use crate::common;

use rand::{RngExt, SeedableRng};
use std::ops::ControlFlow;
use std::time::Duration;
use txlab::checker::check;
use txlab::prelude::*;

const T: TableId = TableId(0);
const KEYS: u64 = 6;
type Rand = rand::rngs::Xoshiro256PlusPlus;

fn db<P: Protocol>(index: IndexKind, record: bool) -> Database<P> {
    let opts = DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(1),
        record_history: record,
        // Under interference, commits pause between their phases (a spin of up to 20 µs or a
        // yield), so that another transaction's commit can run inside those windows.
        commit_pause_us: if record { 20 } else { 0 },
        ..Default::default()
    };
    let spec = TableSpec::new("t", 8, KEYS).with_capacity(1 << 16).with_index(index);
    let db = common::database::<P>(&[spec], opts);
    let mut l = db.loader();
    for k in 0..KEYS / 2 {
        l.insert(T, k, &k.to_le_bytes()).unwrap();
    }
    drop(l);
    db
}

fn u(r: &[u8]) -> u64 {
    u64::from_le_bytes(r[..8].try_into().unwrap())
}

/// One operation of a generated transaction.
#[derive(Clone, Copy, Debug)]
enum Op {
    Read(u64),
    ReadForUpdate(u64),
    Write(u64, u64),
    /// Adds 1 to the row.
    Update(u64),
    Insert(u64, u64),
    Delete(u64),
    /// All keys in `lo..=hi`.
    Scan(u64, u64),
}

/// What an operation returned, in one shape for comparison with the model.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Row(Option<u64>),
    Done(bool),
    Rows(Vec<(u64, u64)>),
}

fn gen_op(rng: &mut Rand, next_value: &mut u64, scans: bool) -> Op {
    let k = rng.random_range(0..KEYS);
    *next_value += 1;
    let v = *next_value;
    match rng.random_range(0..if scans { 8 } else { 7 }) {
        0 => Op::Read(k),
        1 => Op::ReadForUpdate(k),
        2 => Op::Write(k, v),
        3 => Op::Update(k),
        4 | 5 => Op::Insert(k, v),
        6 => Op::Delete(k),
        _ => {
            let hi = rng.random_range(k..KEYS);
            Op::Scan(k, hi)
        }
    }
}

fn apply<W: Worker>(w: &mut W, op: Op) -> Result<Out, Abort> {
    Ok(match op {
        Op::Read(k) => Out::Row(w.read(T, k, u)?),
        Op::ReadForUpdate(k) => Out::Row(w.read_for_update(T, k, u)?),
        Op::Write(k, v) => Out::Done(w.write(T, k, &v.to_le_bytes())?),
        Op::Update(k) => Out::Row(w.update(T, k, |r| {
            let old = u(r);
            r.copy_from_slice(&(old + 1).to_le_bytes());
            old
        })?),
        Op::Insert(k, v) => Out::Done(w.insert(T, k, &v.to_le_bytes())?),
        Op::Delete(k) => Out::Done(w.delete(T, k)?),
        Op::Scan(lo, hi) => {
            let mut rows = Vec::new();
            w.scan(T, lo, hi, usize::MAX, |k, r| {
                rows.push((k, u(r)));
                ControlFlow::Continue(())
            })?;
            Out::Rows(rows)
        }
    })
}

/// What a transaction knows of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    /// Nothing yet (only under interference: the key has not been touched).
    Unknown,
    Absent,
    /// Present, with its value when known (a failed insert reveals presence only).
    Present(Option<u64>),
}

/// A transaction's view of the keys: the committed state (alone) or what it has learnt so far
/// (under interference), plus its own changes.
#[derive(Clone, Debug)]
struct Model {
    keys: [Known; KEYS as usize],
}

impl Model {
    /// Checks `out` against the model and learns from it; `Err` describes a contradiction.
    fn step(&mut self, op: Op, out: &Out) -> Result<(), String> {
        let bad =
            |want: &dyn std::fmt::Debug| Err(format!("{op:?} returned {out:?}, model {want:?}"));
        match (op, out) {
            (Op::Read(k) | Op::ReadForUpdate(k), Out::Row(r)) => {
                let k = k as usize;
                if !agrees(self.keys[k], *r) {
                    return bad(&self.keys[k]);
                }
                self.keys[k] = r.map_or(Known::Absent, |v| Known::Present(Some(v)));
            }
            (Op::Update(k), Out::Row(r)) => {
                let k = k as usize;
                if !agrees(self.keys[k], *r) {
                    return bad(&self.keys[k]);
                }
                self.keys[k] = r.map_or(Known::Absent, |v| Known::Present(Some(v + 1)));
            }
            (Op::Write(k, v), Out::Done(ok)) => {
                let k = k as usize;
                if !agrees_presence(self.keys[k], *ok) {
                    return bad(&self.keys[k]);
                }
                self.keys[k] = if *ok { Known::Present(Some(v)) } else { Known::Absent };
            }
            (Op::Insert(k, v), Out::Done(ok)) => {
                let k = k as usize;
                if !agrees_presence(self.keys[k], !ok) {
                    return bad(&self.keys[k]);
                }
                self.keys[k] = match (ok, self.keys[k]) {
                    (true, _) => Known::Present(Some(v)),
                    (false, Known::Present(v)) => Known::Present(v),
                    (false, _) => Known::Present(None),
                };
            }
            (Op::Delete(k), Out::Done(ok)) => {
                let k = k as usize;
                if !agrees_presence(self.keys[k], *ok) {
                    return bad(&self.keys[k]);
                }
                self.keys[k] = Known::Absent;
            }
            (Op::Scan(lo, hi), Out::Rows(rows)) => {
                let mut it = rows.iter().peekable();
                for k in lo..=hi {
                    let r = it.next_if(|(rk, _)| *rk == k).map(|&(_, v)| v);
                    if !agrees(self.keys[k as usize], r) {
                        return bad(&self.keys);
                    }
                    self.keys[k as usize] = r.map_or(Known::Absent, |v| Known::Present(Some(v)));
                }
                if it.next().is_some() {
                    return bad(&"keys out of the range or out of order");
                }
            }
            _ => return bad(&"an output of another operation"),
        }
        Ok(())
    }
}

fn agrees(known: Known, row: Option<u64>) -> bool {
    match (known, row) {
        (Known::Unknown, _) | (Known::Absent, None) | (Known::Present(None), Some(_)) => true,
        (Known::Present(Some(want)), Some(got)) => want == got,
        _ => false,
    }
}

fn agrees_presence(known: Known, present: bool) -> bool {
    match known {
        Known::Unknown => true,
        Known::Absent => !present,
        Known::Present(_) => present,
    }
}

/// Every key's committed state, read in one transaction of a fresh worker.
fn snapshot<P: Protocol>(db: &Database<P>) -> [Known; KEYS as usize] {
    let mut w = db.worker().unwrap();
    w.begin();
    let mut keys = [Known::Absent; KEYS as usize];
    for k in 0..KEYS {
        if let Some(v) = w.read(T, k, u).unwrap() {
            keys[k as usize] = Known::Present(Some(v));
        }
    }
    w.commit().unwrap();
    keys
}

/// One thread, exact results: 3000 transactions per seed.
fn alone<P: Protocol>(index: IndexKind) {
    let scans = index != IndexKind::Hash;
    for seed in 1..=3u64 {
        let db = db::<P>(index, false);
        let mut committed = Model { keys: snapshot(&db) };
        let mut rng = Rand::seed_from_u64(seed);
        let mut w = db.worker().unwrap();
        let mut next_value = 1000;
        let mut ops = Vec::new();
        for txn in 0..3000 {
            ops.clear();
            for _ in 0..rng.random_range(1..=10) {
                ops.push(gen_op(&mut rng, &mut next_value, scans));
            }
            let mut model = committed.clone();
            w.begin();
            for (i, &op) in ops.iter().enumerate() {
                let out = apply(&mut w, op).unwrap_or_else(|a| {
                    panic!("seed {seed}, txn {txn}: {op:?} aborted alone ({a:?}); ops {ops:?}")
                });
                if let Err(e) = model.step(op, &out) {
                    panic!("seed {seed}, txn {txn}, op {i}: {e}; ops {ops:?}");
                }
            }
            if rng.random_range(0..5) == 0 {
                w.abort();
            } else {
                w.commit().unwrap_or_else(|a| panic!("seed {seed}, txn {txn}: commit {a:?}"));
                committed = model;
            }
            let now = snapshot(&db);
            for (k, (want, got)) in committed.keys.iter_mut().zip(now).enumerate() {
                assert!(
                    matches!((*want, got), (Known::Present(None), Known::Present(_)))
                        || *want == got,
                    "seed {seed}, after txn {txn} ({ops:?}): key {k} is {got:?}, model {want:?}",
                );
                // A failed insert left the value unknown; the snapshot tells it.
                *want = got;
            }
        }
    }
}

/// 8 threads, 400 transactions each (2 to 6 operations, yields between them), histories checked.
fn interfered<P: Protocol>(index: IndexKind) {
    const THREADS: u64 = 8;
    let scans = index != IndexKind::Hash;
    for seed in 1..=2u64 {
        let db = db::<P>(index, true);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let db = &db;
                s.spawn(move || {
                    let mut rng = Rand::seed_from_u64(seed * 100 + t);
                    let mut w = db.worker().unwrap();
                    let mut next_value = (t + 1) << 40;
                    let mut ops = Vec::new();
                    for txn in 0..4000 {
                        ops.clear();
                        for _ in 0..rng.random_range(2..=6) {
                            ops.push(gen_op(&mut rng, &mut next_value, scans));
                        }
                        let mut attempt = 0;
                        loop {
                            let mut model = Model { keys: [Known::Unknown; KEYS as usize] };
                            let mut seen = Ok(());
                            w.begin();
                            let r = ops.iter().try_for_each(|&op| {
                                if rng.random_range(0..4) == 0 {
                                    std::thread::yield_now();
                                }
                                let out = apply(&mut w, op)?;
                                if seen.is_ok() {
                                    seen = model.step(op, &out);
                                }
                                Ok(())
                            });
                            match r.and_then(|()| w.commit()) {
                                Ok(()) => {
                                    if let Err(e) = seen {
                                        panic!("seed {seed}, thread {t}, txn {txn} committed having seen {e}; ops {ops:?}");
                                    }
                                    break;
                                }
                                Err(_) => {
                                    w.abort();
                                    attempt += 1;
                                    // Deadlock detector only: a transaction of six operations
                                    // on six keys commits within a few attempts.
                                    assert!(attempt < 1_000_000, "seed {seed}, thread {t}: txn {txn} never commits");
                                    if rng.random_range(0..2) == 0 {
                                        std::thread::yield_now();
                                    }
                                }
                            }
                        }
                    }
                });
            }
        });
        let rep = check(&db.take_history());
        assert!(rep.anomalies.is_empty(), "seed {seed}, {index:?}: {rep}");
        assert_eq!(rep.committed as u64, THREADS * 4000, "seed {seed}: {rep}");
    }
}

macro_rules! alone_suite {
    ($($name:ident => $P:ty $([$($opt:expr),*])?),* $(,)?) => {$(
        mod $name {
            const OPTS: &[(&str, &str)] = &[$($($opt),*)?];
            use super::*;
            #[test] fn alone_ordered() { crate::common::with_options(OPTS, || alone::<$P>(IndexKind::Ordered)) }
            #[test] fn alone_dense() { crate::common::with_options(OPTS, || alone::<$P>(IndexKind::Dense)) }
            #[test] fn alone_hash() { crate::common::with_options(OPTS, || alone::<$P>(IndexKind::Hash)) }
        }
    )*};
}

macro_rules! interfered_suite {
    ($($name:ident => $P:ty $([$($opt:expr),*])?),* $(,)?) => {$(
        mod $name {
            const OPTS: &[(&str, &str)] = &[$($($opt),*)?];
            use super::*;
            #[test] fn interfered_ordered() { crate::common::with_options(OPTS, || interfered::<$P>(IndexKind::Ordered)) }
            #[test] fn interfered_hash() { crate::common::with_options(OPTS, || interfered::<$P>(IndexKind::Hash)) }
        }
    )*};
}

alone_suite! {
    nocc => txlab::protocols::nocc::Nocc,
    si => txlab::protocols::si::Si,
    ermia_ssn => txlab::protocols::ermia_ssn::ErmiaSsn,
    ermia_ssi => txlab::protocols::ermia_ssi::ErmiaSsi,
    hekaton => txlab::protocols::hekaton::Hekaton,
    cicada => txlab::protocols::cicada::Cicada,
    cicada_plain => txlab::protocols::cicada::Cicada [("sort", "off"), ("precheck", "off"), ("adaptive", "off"), ("early-abort", "off"), ("write-latest-only", "off"), ("inlining", "off"), ("deferred-index", "off")],
    cicada_nowait => txlab::protocols::cicada::Cicada [("wait", "off"), ("gc-interval-us", "100000"), ("timestamps", "counter")],
    cicada_sv => txlab::protocols::cicada::Cicada [("single-version", "on")],
    cicada_sv_nowait => txlab::protocols::cicada::Cicada [("single-version", "on"), ("wait", "off"), ("deferred-index", "off"), ("timestamps", "counter")],
    cicada_mv => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "4")],
    cicada_mv_nowait => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "3"), ("wait", "off"), ("timestamps", "counter")],
    two_pl_nowait => txlab::protocols::two_pl::TwoPlNoWait,
    two_pl_waitdie => txlab::protocols::two_pl::TwoPlWaitDie,
    two_pl_ordered => txlab::protocols::two_pl_ordered::TwoPlOrdered [("undeclared", "no-wait")],
    silo => txlab::protocols::silo::Silo,
    silo_nowait => txlab::protocols::silo::Silo [("validation-lock", "nowait")],
    tictoc => txlab::protocols::tictoc::TicToc,
    tictoc_wait_plain => txlab::protocols::tictoc::TicToc [("validation-lock", "wait"), ("preemptive-abort", "off"), ("timestamp-history", "off"), ("read-phase-extension", "2000")],
    tictoc_nowaittt => txlab::protocols::tictoc::TicToc [("validation-lock", "nowaittt")],
    mocc => txlab::protocols::mocc::Mocc,
    mocc_hot => txlab::protocols::mocc::Mocc [("temperature-threshold", "1")],
    mocc_hot_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("validation-lock", "nowait"), ("read-phase-extension", "2000")],
    mocc_hot_mql => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql")],
    mocc_hot_mql_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql"), ("validation-lock", "nowait")],
    ic3 => txlab::protocols::ic3::Ic3,
}

mod serializable {
    use super::*;
    interfered_suite! {
        ermia_ssi => txlab::protocols::ermia_ssi::ErmiaSsi,
        ermia_ssn => txlab::protocols::ermia_ssn::ErmiaSsn,
        hekaton => txlab::protocols::hekaton::Hekaton,
        cicada => txlab::protocols::cicada::Cicada,
        cicada_plain => txlab::protocols::cicada::Cicada [("sort", "off"), ("precheck", "off"), ("adaptive", "off"), ("early-abort", "off"), ("write-latest-only", "off"), ("inlining", "off"), ("deferred-index", "off")],
        cicada_nowait => txlab::protocols::cicada::Cicada [("wait", "off"), ("gc-interval-us", "100000"), ("timestamps", "counter")],
        cicada_sv => txlab::protocols::cicada::Cicada [("single-version", "on")],
        cicada_sv_nowait => txlab::protocols::cicada::Cicada [("single-version", "on"), ("wait", "off"), ("deferred-index", "off"), ("timestamps", "counter")],
        cicada_mv => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "4")],
        cicada_mv_nowait => txlab::protocols::cicada::Cicada [("index", "multi-version"), ("index-fanout", "3"), ("wait", "off"), ("timestamps", "counter")],
        two_pl_nowait => txlab::protocols::two_pl::TwoPlNoWait,
        two_pl_waitdie => txlab::protocols::two_pl::TwoPlWaitDie,
        two_pl_ordered => txlab::protocols::two_pl_ordered::TwoPlOrdered [("undeclared", "no-wait")],
        silo => txlab::protocols::silo::Silo,
        silo_nowait => txlab::protocols::silo::Silo [("validation-lock", "nowait")],
        tictoc => txlab::protocols::tictoc::TicToc,
        tictoc_wait_plain => txlab::protocols::tictoc::TicToc [("validation-lock", "wait"), ("preemptive-abort", "off"), ("timestamp-history", "off"), ("read-phase-extension", "2000")],
        tictoc_nowaittt => txlab::protocols::tictoc::TicToc [("validation-lock", "nowaittt")],
        mocc => txlab::protocols::mocc::Mocc,
        mocc_hot => txlab::protocols::mocc::Mocc [("temperature-threshold", "1")],
        mocc_hot_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("validation-lock", "nowait"), ("read-phase-extension", "2000")],
        mocc_hot_mql => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql")],
        mocc_hot_mql_nowait => txlab::protocols::mocc::Mocc [("temperature-threshold", "1"), ("lock", "mql"), ("validation-lock", "nowait")],
        ic3 => txlab::protocols::ic3::Ic3,
    }
}
