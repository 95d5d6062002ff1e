//! The workloads of `txlab check`: small and contended, each designed to provoke one family of
//! anomalies, run with more threads than cores and random pauses inside transactions, with
//! history recording on. After a run the history goes through [`check`](super::check()) and the
//! workload's own invariant is verified; both are mapped to anomaly classes, and a protocol fails
//! when it shows a class its isolation level does not permit.

use super::micro::Micro;
use super::{check, AnomalyClass, Report};
use crate::engine::{
    AccessSet, Backoff, Checks, Database, DbOptions, Generator, Intent, Isolation, Procedure,
    Protocol, RunConfig, RunLength, Tx, Worker, Workload,
};
use crate::error::{Abort, AbortReason, Error};
use crate::storage::TableId;
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

/// A declarative workload for the checker (`spec:FILE`), kept for the rest of the process (a
/// [`CheckWorkload`] is a plain copyable name).
#[derive(Debug)]
pub struct CheckSpec {
    /// `spec:FILE`, as given.
    pub name: &'static str,
    /// The spec.
    pub spec: crate::workloads::spec::Spec,
}

impl CheckSpec {
    /// Keeps `spec`, read from `file`, for the process.
    pub fn leak(file: &str, spec: crate::workloads::spec::Spec) -> &'static CheckSpec {
        let name = Box::leak(format!("spec:{file}").into_boxed_str());
        Box::leak(Box::new(CheckSpec { name, spec }))
    }
}

/// A `txlab check` workload.
#[derive(Clone, Copy, Debug)]
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
    /// TPC-E's specification mix on its smallest population (1000 customers), then its
    /// consistency checks (holdings, settlements, balances, statuses, brokers, indexes). Its
    /// procedures pause as TPC-C's do. A quarter of the transactions per thread: each reads
    /// and writes several times what a TPC-C transaction does.
    Tpce,
    /// A declarative workload (`spec:FILE`), then its ledger check when it has one.
    Spec(&'static CheckSpec),
}

impl PartialEq for CheckWorkload {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for CheckWorkload {}

impl std::hash::Hash for CheckWorkload {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.name().hash(h);
    }
}

impl serde::Serialize for CheckWorkload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl CheckWorkload {
    /// Every workload.
    pub const ALL: [CheckWorkload; 7] = [
        CheckWorkload::Bank,
        CheckWorkload::WriteSkew,
        CheckWorkload::ReadOnly,
        CheckWorkload::HotRmw,
        CheckWorkload::ScanInsert,
        CheckWorkload::Tpcc,
        CheckWorkload::Tpce,
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
            CheckWorkload::Tpce => "tpce",
            CheckWorkload::Spec(s) => s.name,
        }
    }

    /// The workload named `s` on the command line: a built-in one, or `spec:FILE` (read and
    /// checked now).
    #[cfg(feature = "cli")]
    pub fn parse(s: &str) -> Result<CheckWorkload, String> {
        if let Some(file) = s.strip_prefix("spec:") {
            let spec = crate::workloads::spec::load_file(file)?;
            return Ok(CheckWorkload::Spec(CheckSpec::leak(file, spec)));
        }
        CheckWorkload::ALL.into_iter().find(|w| w.name() == s).ok_or_else(|| {
            let names: Vec<&str> = CheckWorkload::ALL.iter().map(|w| w.name()).collect();
            format!("unknown workload (one of {}, spec:FILE.toml)", names.join(", "))
        })
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

type Rng = crate::storage::pause::PauseRng;
use crate::storage::pause::pause;

/// A worker that pauses at random (see [`pause`]) before every operation and before each row a
/// scan hands over, so that benchmark procedures written without pauses (TPC-C) interleave as
/// finely as the hand-written check workloads do: in mid-transaction, with locks held, between
/// a scan's rows. Hints (`prefetch`, the type, piece boundaries) and the transaction's own
/// boundaries pass through.
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

    fn accumulate(
        &mut self,
        table: TableId,
        key: u64,
        acc: crate::engine::Accumulation,
    ) -> Result<bool, Abort> {
        self.pause();
        self.inner.accumulate(table, key, acc)
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

    fn typed(&mut self, ty: usize) {
        self.inner.typed(ty);
    }

    fn piece_begin(&mut self, piece: usize) -> Result<(), Abort> {
        self.inner.piece_begin(piece)
    }

    fn piece_end(
        &mut self,
        piece: usize,
        body: Result<(), Abort>,
    ) -> Result<crate::engine::PieceEnd, Abort> {
        self.inner.piece_end(piece, body)
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

/// Runs `workload` under protocol `P` and checks it.
pub fn run<P: Protocol>(
    workload: CheckWorkload,
    cfg: &CheckConfig,
) -> Result<WorkloadOutcome, Error> {
    match Micro::new(workload) {
        Some(micro) => run_workload::<P, _>(workload, &micro, cfg, |db| micro.verdict(db)),
        None if matches!(workload, CheckWorkload::Spec(_)) => {
            let CheckWorkload::Spec(file) = workload else { unreachable!() };
            let spec = crate::workloads::spec::SpecWorkload::new(file.spec.clone(), 2)?;
            // A lost update shows in the updated and incremented columns' total.
            run_workload::<P, _>(workload, &spec, cfg, |db| match spec.check(db) {
                Ok(()) => Vec::new(),
                Err(m) => vec![(AnomalyClass::LostUpdate, m)],
            })
        }
        None if workload == CheckWorkload::Tpce => {
            let tpce = crate::workloads::tpce::Tpce::new(crate::workloads::tpce::TpceConfig {
                seed: cfg.seed,
                ..crate::workloads::tpce::TpceConfig::new(crate::workloads::tpce::schema::LOAD_UNIT)
            });
            let cfg =
                &CheckConfig { txns_per_thread: cfg.txns_per_thread.div_ceil(4), ..cfg.clone() };
            // As for TPC-C: a broken check is a state no serial execution reaches.
            run_workload::<P, _>(workload, &tpce, cfg, |db| match tpce.check(db) {
                Ok(()) => Vec::new(),
                Err(m) => vec![(AnomalyClass::G2, m)],
            })
        }
        None => {
            let tpcc = crate::workloads::tpcc::Tpcc::new(crate::workloads::tpcc::TpccConfig {
                seed: cfg.seed,
                ..crate::workloads::tpcc::TpccConfig::new(1)
            });
            // TPC-C's consistency conditions failing is a state no serial execution reaches.
            run_workload::<P, _>(workload, &tpcc, cfg, |db| match tpcc.check(db) {
                Ok(()) => Vec::new(),
                Err(m) => vec![(AnomalyClass::G2, m)],
            })
        }
    }
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

/// Runs a workload's generator and procedures: `txns_per_thread` transactions per thread
/// (each retried until it commits or ends for good), history recorded; then `verdict` (the
/// workload's invariants, each with the anomaly class it reveals) and the checker.
///
/// An interactive protocol runs them on the checker's own workers, paused at random before
/// every operation; a protocol that runs no interactive transactions (BOHM) runs them through
/// its [`Protocol::drive`], on its own threads and without pauses, the same number of them.
fn run_workload<P: Protocol, W: Workload>(
    which: CheckWorkload,
    workload: &W,
    cfg: &CheckConfig,
    verdict: impl FnOnce(&Database<P>) -> Vec<(AnomalyClass, String)>,
) -> Result<WorkloadOutcome, Error> {
    let opts = DbOptions {
        max_workers: cfg.threads + 2,
        epoch_interval: Duration::from_millis(2),
        record_history: true,
        // A procedure using a column it did not declare computes with marker bytes, which the
        // workload's consistency check then reports.
        poison_unprojected: true,
        commit_pause_us: cfg.max_pause_us,
        ..Default::default()
    };
    let db = Database::<P>::builder(&workload.tables())
        .options(opts)
        .protocol_options(protocol_options::<P>(cfg)?)
        .txn_types(workload.txn_types())
        .build()?;
    workload.load(&db, 2)?;
    // Loading records nothing; start from an empty history all the same.
    drop(db.take_history());
    if !P::CAPS.interactive {
        let run = RunConfig {
            threads: cfg.threads,
            length: RunLength::transactions(cfg.txns_per_thread),
            backoff: Backoff::None,
            pin: false,
            seed: cfg.seed,
            check_templates: true,
            check_access_sets: true,
            prefault: false,
            breakdown: false,
            acks: None,
            ..RunConfig::default()
        };
        let started = Instant::now();
        let stats = P::drive(&db, workload, &run)?;
        let seconds = started.elapsed().as_secs_f64();
        let violations = verdict(&db);
        return Ok(WorkloadOutcome {
            workload: which,
            committed: stats.iter().map(|s| s.total_commits()).sum(),
            aborted: stats.iter().map(|s| s.total_cc_aborts() + s.total_user_aborts()).sum(),
            seconds,
            report: check(&db.take_history()),
            violations,
        });
    }
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
                        w.typed(proc.txn_type());
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
                                writes_only: false,
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
    let violations = verdict(&db);
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
