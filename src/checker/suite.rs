//! The workloads of `txlab check`: small and contended, each designed to provoke one family of
//! anomalies, run with more threads than cores and random pauses inside transactions, with
//! history recording on. After a run the history goes through [`check`](super::check()) and the
//! workload's own invariant is verified; both are mapped to anomaly classes, and a protocol fails
//! when it shows a class its isolation level does not permit.

use super::{check, AnomalyClass, Report};
use crate::engine::{
    AccessSet, Checks, Database, DbOptions, Generator, Intent, Isolation, Procedure, Protocol, Tx,
    Worker, Workload,
};
use crate::error::{Abort, AbortReason, Error};
use crate::storage::TableId;
use crate::storage::TableSpec;
use rand::{RngExt, SeedableRng};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The anomaly classes an isolation level permits.
pub fn permitted(isolation: Isolation) -> &'static [AnomalyClass] {
    match isolation {
        Isolation::Serializable => &[],
        // Write skew and the read-only anomaly are cycles with two anti-dependencies: G2-item
        // over items, G2 when one is over a predicate (a scan's snapshot missed an insert).
        Isolation::Snapshot => &[AnomalyClass::G2Item, AnomalyClass::G2],
        Isolation::None => &AnomalyClass::ALL,
    }
}

/// A `txlab check` workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CheckWorkload {
    /// Transfers between 16 accounts (1 in 10 rolled back by the user after writing) and
    /// read-only audits: money is conserved and every committed audit sees the full total.
    Bank,
    /// Doctors on call (Cahill et al.): pairs that must keep one of two on call; a transaction
    /// goes off call only if both are on. Write skew breaks the constraint.
    WriteSkew,
    /// Fekete et al.'s read-only anomaly: deposits to savings, withdrawals from checking with an
    /// overdraft penalty judged on both balances, and read-only reports of both.
    ReadOnly,
    /// Read-modify-write increments of 4 hot counters: the final sum equals the committed
    /// increments unless an update is lost.
    HotRmw,
    /// Scans of 8-key blocks racing inserts and deletes: a transaction inserts into a block only
    /// if its scan saw fewer than 2 keys, so no block may ever hold 3.
    ScanInsert,
    /// TPC-C's full mix on one warehouse (every thread on it), then its consistency conditions
    /// 1-10 and 12. Its procedures pause as the hand-written workloads do: before any operation
    /// and between the rows of a scan.
    Tpcc,
}

impl CheckWorkload {
    /// Every workload.
    pub const ALL: [CheckWorkload; 6] = [
        CheckWorkload::Bank,
        CheckWorkload::WriteSkew,
        CheckWorkload::ReadOnly,
        CheckWorkload::HotRmw,
        CheckWorkload::ScanInsert,
        CheckWorkload::Tpcc,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            CheckWorkload::Bank => "bank",
            CheckWorkload::WriteSkew => "write-skew",
            CheckWorkload::ReadOnly => "read-only",
            CheckWorkload::HotRmw => "hot-rmw",
            CheckWorkload::ScanInsert => "scan-insert",
            CheckWorkload::Tpcc => "tpcc",
        }
    }
}

/// How hard to check.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckConfig {
    /// Worker threads (more than cores, so that transactions interleave at any point).
    pub threads: usize,
    /// Transactions each thread completes (commits, or ends by a user abort).
    pub txns_per_thread: u64,
    /// Seed of every worker's random stream.
    pub seed: u64,
    /// Longest injected pause inside a transaction, in microseconds.
    pub max_pause_us: u64,
    /// Protocol options (`--opt NAME=VALUE`), already checked against the protocols run.
    pub options: Vec<(String, String)>,
}

/// `P`'s options as `cfg` sets them.
fn protocol_options<P: Protocol>(cfg: &CheckConfig) -> Result<P::Options, Error> {
    use crate::engine::ProtocolOptions;
    P::Options::from_pairs(&crate::engine::options::pairs_for(&cfg.options, P::NAME))
        .map_err(Error::Config)
}

/// What one workload run showed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkloadOutcome {
    /// The workload.
    pub workload: CheckWorkload,
    /// Committed transactions.
    pub committed: u64,
    /// Aborted attempts (conflicts and user aborts).
    pub aborted: u64,
    /// Seconds the run took (without the check).
    pub seconds: f64,
    /// The checker's report on the recorded history.
    pub report: Report,
    /// Invariant violations: the class each maps to and what was seen.
    pub violations: Vec<(AnomalyClass, String)>,
}

impl WorkloadOutcome {
    /// Every class seen, by the checker or by an invariant.
    pub fn classes(&self) -> Vec<AnomalyClass> {
        let mut c = self.report.classes();
        c.extend(self.violations.iter().map(|v| v.0));
        c.sort();
        c.dedup();
        c
    }
}

const T: TableId = TableId(0);
type Rng = crate::storage::pause::PauseRng;
use crate::storage::pause::pause;

fn get(r: &[u8]) -> i64 {
    i64::from_le_bytes(r[..8].try_into().expect("8-byte rows"))
}

fn put(r: &mut [u8], v: i64) {
    r[..8].copy_from_slice(&v.to_le_bytes());
}

/// A worker that pauses at random (see [`pause`]) before every operation and before each row a
/// scan hands over, so that benchmark procedures written without pauses (TPC-C) interleave as
/// finely as the hand-written check workloads do: in mid-transaction, with locks held, between
/// a scan's rows. Hints (`prefetch`, `piece`) and the transaction's own boundaries pass through.
struct Pausing<'a, W> {
    inner: &'a mut W,
    rng: &'a mut Rng,
    max_us: u64,
}

impl<W: Worker> Pausing<'_, W> {
    fn pause(&mut self) {
        pause(self.rng, self.max_us);
    }
}

impl<W: Worker> Worker for Pausing<'_, W> {
    fn begin(&mut self) {
        self.inner.begin();
    }

    fn begin_read_only(&mut self) {
        self.inner.begin_read_only();
    }

    fn begin_read_mostly(&mut self) {
        self.inner.begin_read_mostly();
    }

    fn read_for_update<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.pause();
        self.inner.read_for_update(table, key, f)
    }

    fn write(&mut self, table: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.pause();
        self.inner.write(table, key, value)
    }

    fn read_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        cols: crate::engine::Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.pause();
        self.inner.read_cols(table, key, cols, f)
    }

    fn update_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        reads: crate::engine::Columns,
        writes: crate::engine::Columns,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.pause();
        self.inner.update_cols(table, key, reads, writes, f)
    }

    fn insert(&mut self, table: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.pause();
        self.inner.insert(table, key, value)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool, Abort> {
        self.pause();
        self.inner.delete(table, key)
    }

    fn scan(
        &mut self,
        table: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        mut f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        self.pause();
        let (rng, max_us) = (&mut *self.rng, self.max_us);
        self.inner.scan(table, lo, hi, limit, |k, row| {
            pause(rng, max_us);
            f(k, row)
        })
    }

    fn prefetch(&mut self, table: TableId, key: u64) {
        self.inner.prefetch(table, key);
    }

    fn prefetch_many(&mut self, keys: &[(TableId, u64, crate::engine::Columns)]) {
        self.inner.prefetch_many(keys);
    }

    fn piece(&mut self, piece: usize) -> Result<(), Abort> {
        self.inner.piece(piece)
    }

    fn reads_still_valid(&mut self) -> bool {
        self.inner.reads_still_valid()
    }

    fn commit(&mut self) -> Result<(), Abort> {
        self.pause();
        self.inner.commit()
    }

    fn abort(&mut self) {
        self.inner.abort();
    }
}

/// What a committed transaction reports: nothing, a counted increment, or an invariant
/// violation it observed (counted only if it commits).
enum Seen {
    Nothing,
    Increments(u64),
    Violation(AnomalyClass, String),
}

const ACCOUNTS: u64 = 16;
const INITIAL: i64 = 1000;
const PAIRS: u64 = 8;
const CUSTOMERS: u64 = 4;
const COUNTERS: u64 = 4;
const BLOCKS: u64 = 8;
const BLOCK: u64 = 8;

/// Runs `workload` under protocol `P` and checks it.
pub fn run<P: Protocol>(
    workload: CheckWorkload,
    cfg: &CheckConfig,
) -> Result<WorkloadOutcome, Error> {
    if workload == CheckWorkload::Tpcc {
        let tpcc = crate::workloads::tpcc::Tpcc::new(crate::workloads::tpcc::TpccConfig {
            seed: cfg.seed,
            ..crate::workloads::tpcc::TpccConfig::new(1)
        });
        return run_workload::<P, _>(workload, &tpcc, cfg);
    }
    let rows = match workload {
        CheckWorkload::Bank => ACCOUNTS,
        CheckWorkload::WriteSkew => 2 * PAIRS,
        CheckWorkload::ReadOnly => 2 * CUSTOMERS,
        CheckWorkload::HotRmw => COUNTERS,
        CheckWorkload::ScanInsert | CheckWorkload::Tpcc => 0,
    };
    let opts = DbOptions {
        max_workers: cfg.threads + 2,
        epoch_interval: Duration::from_millis(2),
        record_history: true,
        commit_pause_us: cfg.max_pause_us,
        ..Default::default()
    };
    let spec = TableSpec::new("check", 8, rows).with_capacity(1 << 20);
    let db = Database::<P>::builder(&[spec])
        .options(opts)
        .protocol_options(protocol_options::<P>(cfg)?)
        .build()?;
    let mut loader = db.loader();
    for k in 0..rows {
        let v = match workload {
            CheckWorkload::Bank => INITIAL,
            CheckWorkload::WriteSkew => 1,
            CheckWorkload::ReadOnly => 0,
            CheckWorkload::HotRmw => 0,
            CheckWorkload::ScanInsert | CheckWorkload::Tpcc => 0,
        };
        loader.insert(T, k, &v.to_le_bytes())?;
    }
    drop(loader);
    let max_us = cfg.max_pause_us;
    let body = move |w: &mut P::Worker<'_>, rng: &mut Rng, kind: u32| -> Result<Seen, Abort> {
        match workload {
            CheckWorkload::Bank => bank(w, rng, max_us),
            CheckWorkload::WriteSkew => write_skew(w, rng, max_us),
            CheckWorkload::ReadOnly => read_only(w, rng, max_us, kind),
            CheckWorkload::HotRmw => hot_rmw(w, rng, max_us),
            CheckWorkload::ScanInsert => scan_insert(w, rng, max_us),
            CheckWorkload::Tpcc => unreachable!("TPC-C runs through run_workload"),
        }
    };
    let committed = AtomicU64::new(0);
    let aborted = AtomicU64::new(0);
    let increments = AtomicU64::new(0);
    let violations = Mutex::new(Vec::new());
    let started = Instant::now();
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..cfg.threads as u64 {
            let (db, body, committed, aborted, increments, violations, failure) =
                (&db, &body, &committed, &aborted, &increments, &violations, &failure);
            s.spawn(move || {
                let mut w = match db.worker() {
                    Ok(w) => w,
                    Err(e) => {
                        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        return;
                    }
                };
                let mut rng = Rng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t);
                for i in 0..cfg.txns_per_thread {
                    // The read-only workload picks each transaction's kind before it begins:
                    // every other report declares itself read-only. The others, and every
                    // other transaction of each workload, declare themselves read-mostly (a
                    // protocol may read for them differently: ERMIA SSI's read optimisation).
                    let kind = rng.random_range(0..3u32);
                    let report = workload == CheckWorkload::ReadOnly && kind == REPORT;
                    let intent = match (report, i % 2) {
                        (true, 0) => Intent::ReadOnly,
                        (_, 1) => Intent::ReadMostly,
                        _ => Intent::ReadWrite,
                    };
                    let outcome = until_done(
                        &mut w,
                        &mut rng,
                        aborted,
                        |w| intent.begin(w),
                        |w, rng| body(w, rng, kind),
                    );
                    let seen = match outcome {
                        Ok(Some(seen)) => seen,
                        Ok(None) => continue,
                        Err(reason) => {
                            let txn = workload.name().into();
                            let e = Error::Fatal { txn, reason };
                            *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            return;
                        }
                    };
                    committed.fetch_add(1, Ordering::Relaxed);
                    match seen {
                        Seen::Nothing => {}
                        Seen::Increments(n) => {
                            increments.fetch_add(n, Ordering::Relaxed);
                        }
                        Seen::Violation(c, m) => {
                            violations.lock().unwrap_or_else(|p| p.into_inner()).push((c, m))
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut violations = violations.into_inner().unwrap_or_else(|p| p.into_inner());
    final_invariant(&db, workload, increments.load(Ordering::Relaxed), &mut violations)?;
    let report = check(&db.take_history());
    Ok(WorkloadOutcome {
        workload,
        committed: committed.into_inner(),
        aborted: aborted.into_inner(),
        seconds,
        report,
        violations,
    })
}

/// Runs one transaction to its end: begin, `body`, commit, retried after randomized exponential
/// backoff (no-wait protocols need it to make progress) until it commits (`Ok(Some(out))`) or
/// ends for good (`Ok(None)`: a user abort or another final outcome). A fatal abort (a procedure
/// bug) is `Err(reason)`. Every failed attempt counts in `aborted`.
fn until_done<W: Worker, T>(
    w: &mut W,
    rng: &mut Rng,
    aborted: &AtomicU64,
    mut begin: impl FnMut(&mut W),
    mut body: impl FnMut(&mut W, &mut Rng) -> Result<T, Abort>,
) -> Result<Option<T>, AbortReason> {
    let mut attempt = 0u32;
    loop {
        begin(w);
        let r = body(w, rng).and_then(|out| w.commit().map(|()| out));
        let abort = match r {
            Ok(out) => return Ok(Some(out)),
            Err(a) => a,
        };
        let reason = crate::engine::driver::classify(w, abort);
        w.abort();
        aborted.fetch_add(1, Ordering::Relaxed);
        if reason.is_fatal() {
            return Err(reason);
        }
        if reason.is_final() {
            return Ok(None);
        }
        attempt += 1;
        let cap = 1u64 << attempt.min(8);
        std::thread::sleep(Duration::from_micros(rng.random_range(0..cap)));
    }
}

/// Runs a benchmark workload's own generator and procedures: `txns_per_thread` transactions per
/// thread (each retried until it commits or ends for good), history recorded; then the
/// workload's invariants (mapped to G2: a state no serial execution reaches) and the checker.
fn run_workload<P: Protocol, W: Workload>(
    which: CheckWorkload,
    workload: &W,
    cfg: &CheckConfig,
) -> Result<WorkloadOutcome, Error> {
    let opts = DbOptions {
        max_workers: cfg.threads + 2,
        epoch_interval: Duration::from_millis(2),
        record_history: true,
        // A procedure using a column it did not declare computes with marker bytes, which the
        // workload's consistency check then reports.
        poison_unprojected: true,
        commit_pause_us: cfg.max_pause_us,
        log: None,
    };
    let db = Database::<P>::builder(&workload.tables())
        .options(opts)
        .protocol_options(protocol_options::<P>(cfg)?)
        .txn_types(workload.txn_types())
        .build()?;
    workload.load(&db, 2)?;
    // Loading records nothing; start from an empty history all the same.
    drop(db.take_history());
    let committed = AtomicU64::new(0);
    let aborted = AtomicU64::new(0);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let types = workload.txn_types();
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..cfg.threads {
            let (db, committed, aborted, failure) = (&db, &committed, &aborted, &failure);
            s.spawn(move || {
                let fail = |e: Error| {
                    failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                };
                let mut w = match db.worker() {
                    Ok(w) => w,
                    Err(e) => return fail(e),
                };
                let seed = cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t as u64;
                let mut gen = workload.generator(t, cfg.threads, seed);
                let mut slot = gen.blank();
                let mut rng = Rng::seed_from_u64(seed ^ 0xB0FF);
                // A protocol that needs declared sets gets each attempt's, declared just
                // before it begins (as the driver does: reconnaissance may go stale, and the
                // run-time check then ends the attempt for another declaration).
                let set = std::cell::RefCell::new(AccessSet::default());
                for _ in 0..cfg.txns_per_thread {
                    gen.fill(&mut slot);
                    let proc = &slot;
                    let ty = &types[proc.txn_type()];
                    let begin = |w: &mut P::Worker<'_>| {
                        if !P::CAPS.needs_access_set {
                            return Intent::of(proc).begin(w);
                        }
                        let mut set = set.borrow_mut();
                        set.clear();
                        let declared = w.pinned(|| proc.declare(db, &mut set));
                        set.seal();
                        if declared {
                            w.begin_declared(&set);
                        } else {
                            Intent::of(proc).begin(w);
                        }
                    };
                    let body = |w: &mut _, rng: &mut Rng| {
                        let set = set.borrow();
                        let declared = P::CAPS.needs_access_set && !set.is_empty();
                        let mut w = Pausing { inner: w, rng, max_us: cfg.max_pause_us };
                        proc.run(&mut Tx::new(
                            &mut w,
                            ty,
                            Checks {
                                templates: true,
                                access_set: declared.then_some(&*set),
                                read_only: proc.read_only(),
                            },
                        ))
                    };
                    match until_done(&mut w, &mut rng, aborted, begin, body) {
                        Ok(Some(())) => {
                            committed.fetch_add(1, Ordering::Relaxed);
                            gen.committed(proc);
                        }
                        Ok(None) => {}
                        Err(reason) => return fail(Error::Fatal { txn: ty.name.into(), reason }),
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let seconds = started.elapsed().as_secs_f64();
    let violations = match workload.check(&db) {
        Ok(()) => Vec::new(),
        Err(m) => vec![(AnomalyClass::G2, m)],
    };
    let report = check(&db.take_history());
    Ok(WorkloadOutcome {
        workload: which,
        committed: committed.into_inner(),
        aborted: aborted.into_inner(),
        seconds,
        report,
        violations,
    })
}

fn bank<W: Worker>(w: &mut W, rng: &mut Rng, max_us: u64) -> Result<Seen, Abort> {
    if rng.random_range(0..5u32) == 0 {
        let mut total = 0;
        for k in 0..ACCOUNTS {
            total += w.read(T, k, get)?.unwrap_or(0);
            pause(rng, max_us);
        }
        let want = ACCOUNTS as i64 * INITIAL;
        return Ok(if total == want {
            Seen::Nothing
        } else {
            Seen::Violation(
                AnomalyClass::GSingle,
                format!("an audit saw a total of {total}, not {want}"),
            )
        });
    }
    let a = rng.random_range(0..ACCOUNTS);
    let b = (a + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
    let amount = rng.random_range(1..50);
    let from = w.read(T, a, get)?.unwrap_or(0);
    pause(rng, max_us);
    w.update(T, a, |r| put(r, from - amount))?;
    w.update(T, b, |r| put(r, get(r) + amount))?;
    if rng.random_range(0..10u32) == 0 {
        pause(rng, max_us);
        return Err(Abort::new(AbortReason::User));
    }
    Ok(Seen::Nothing)
}

fn write_skew<W: Worker>(w: &mut W, rng: &mut Rng, max_us: u64) -> Result<Seen, Abort> {
    let p = rng.random_range(0..PAIRS);
    let (x, y) = (2 * p, 2 * p + 1);
    let vx = w.read(T, x, get)?.unwrap_or(0);
    let vy = w.read(T, y, get)?.unwrap_or(0);
    pause(rng, max_us);
    let mine = if rng.random_range(0..2u32) == 0 { x } else { y };
    if vx + vy >= 2 {
        w.write(T, mine, &0i64.to_le_bytes())?;
    } else {
        w.write(T, mine, &1i64.to_le_bytes())?;
    }
    Ok(if vx + vy < 1 {
        Seen::Violation(AnomalyClass::G2Item, format!("pair {p} had nobody on call"))
    } else {
        Seen::Nothing
    })
}

/// The read-only workload's kind of transaction that reports (reads both balances).
const REPORT: u32 = 2;

/// One transaction of the read-only workload, of kind `kind` (0: deposit, 1: withdrawal,
/// [`REPORT`]: a report, declared read-only).
fn read_only<W: Worker>(w: &mut W, rng: &mut Rng, max_us: u64, kind: u32) -> Result<Seen, Abort> {
    let c = rng.random_range(0..CUSTOMERS);
    let (checking, savings) = (2 * c, 2 * c + 1);
    match kind {
        0 => {
            pause(rng, max_us);
            w.update(T, savings, |r| put(r, get(r) + 20))?;
        }
        1 => {
            let x = w.read(T, checking, get)?.unwrap_or(0);
            let y = w.read(T, savings, get)?.unwrap_or(0);
            pause(rng, max_us);
            let penalty = if x + y < 10 { 1 } else { 0 };
            w.write(T, checking, &(x - 10 - penalty).to_le_bytes())?;
        }
        _ => {
            w.read(T, checking, get)?;
            pause(rng, max_us);
            w.read(T, savings, get)?;
        }
    }
    Ok(Seen::Nothing)
}

fn hot_rmw<W: Worker>(w: &mut W, rng: &mut Rng, max_us: u64) -> Result<Seen, Abort> {
    let n = rng.random_range(1..=2u64);
    let first = rng.random_range(0..COUNTERS);
    for i in 0..n {
        let k = (first + i) % COUNTERS;
        let v = w.read(T, k, get)?.unwrap_or(0);
        pause(rng, max_us);
        w.write(T, k, &(v + 1).to_le_bytes())?;
    }
    Ok(Seen::Increments(n))
}

fn scan_insert<W: Worker>(w: &mut W, rng: &mut Rng, max_us: u64) -> Result<Seen, Abort> {
    let b = rng.random_range(0..BLOCKS);
    let (lo, hi) = (b * BLOCK, b * BLOCK + BLOCK - 1);
    let mut seen = [false; BLOCK as usize];
    let mut n = 0;
    w.scan(T, lo, hi, BLOCK as usize, |k, _| {
        seen[(k - lo) as usize] = true;
        n += 1;
        ControlFlow::Continue(())
    })?;
    pause(rng, max_us);
    let pick = rng.random_range(0..BLOCK);
    if n < 2 {
        let k = (0..BLOCK).map(|i| (pick + i) % BLOCK).find(|&i| !seen[i as usize]).unwrap_or(0);
        w.insert(T, lo + k, &0i64.to_le_bytes())?;
    } else {
        let k = (0..BLOCK).map(|i| (pick + i) % BLOCK).find(|&i| seen[i as usize]).unwrap_or(0);
        w.delete(T, lo + k)?;
    }
    Ok(if n > 2 {
        Seen::Violation(
            AnomalyClass::G2,
            format!("a scan saw {n} keys in block {b} (at most 2 allowed)"),
        )
    } else {
        Seen::Nothing
    })
}

/// The workload's invariant over the final state, read in one transaction.
fn final_invariant<P: Protocol>(
    db: &Database<P>,
    workload: CheckWorkload,
    increments: u64,
    out: &mut Vec<(AnomalyClass, String)>,
) -> Result<(), Error> {
    let mut w = db.worker()?;
    let mut attempt = 0;
    let values = loop {
        w.begin();
        let r: Result<Vec<Option<i64>>, Abort> =
            (0..BLOCKS * BLOCK).map(|k| w.read(T, k, get)).collect();
        match r.and_then(|v| w.commit().map(|()| v)) {
            Ok(v) => break v,
            Err(_) => {
                w.abort();
                attempt += 1;
                if attempt > 1000 {
                    return Err(Error::Config("could not read the final state".into()));
                }
            }
        }
    };
    let v = |k: u64| values[k as usize].unwrap_or(0);
    match workload {
        CheckWorkload::Bank => {
            let total: i64 = (0..ACCOUNTS).map(v).sum();
            if total != ACCOUNTS as i64 * INITIAL {
                out.push((
                    AnomalyClass::LostUpdate,
                    format!(
                        "money not conserved: {total} at the end, {} at the start",
                        ACCOUNTS as i64 * INITIAL
                    ),
                ));
            }
        }
        CheckWorkload::WriteSkew => {
            for p in 0..PAIRS {
                if v(2 * p) + v(2 * p + 1) < 1 {
                    out.push((AnomalyClass::G2Item, format!("pair {p} ends with nobody on call")));
                }
            }
        }
        CheckWorkload::ReadOnly | CheckWorkload::Tpcc => {}
        CheckWorkload::HotRmw => {
            let total: i64 = (0..COUNTERS).map(v).sum();
            if total != increments as i64 {
                out.push((
                    AnomalyClass::LostUpdate,
                    format!("counters sum to {total} after {increments} committed increments"),
                ));
            }
        }
        CheckWorkload::ScanInsert => {
            for b in 0..BLOCKS {
                let n =
                    (b * BLOCK..(b + 1) * BLOCK).filter(|&k| values[k as usize].is_some()).count();
                if n > 2 {
                    out.push((
                        AnomalyClass::G2,
                        format!("block {b} ends with {n} keys (at most 2 allowed)"),
                    ));
                }
            }
        }
    }
    Ok(())
}
