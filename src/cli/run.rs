//! `txlab run`: validate, load, measure, report.

use super::{BackoffArg, RunArgs};
use crate::engine::report::{HistoryCheck, RunReport};
use crate::engine::{
    Backoff, Database, DbOptions, Isolation, Protocol, RunConfig, RunLength, WorkerStats, Workload,
};
use crate::error::{AbortReason, Error};
use crate::protocols::ProtocolKind;
use crate::storage::check_memory;
use crate::workloads::smallbank::{SmallBank, SmallBankConfig};
use crate::workloads::tpcc::{Tpcc, WarehouseChoice};
use crate::workloads::ycsb::Ycsb;
use crate::workloads::WorkloadKind;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Why `run` failed.
pub(super) enum Failure {
    /// Bad input (exit 2).
    Usage(String),
    /// A failure while running (exit 1).
    Run(String),
}

fn usage(m: impl Into<String>) -> Failure {
    Failure::Usage(m.into())
}

fn check_range(flag: &str, v: f64, lo: f64, hi: f64, lo_open: bool) -> Result<(), Failure> {
    let ok = v.is_finite() && (if lo_open { v > lo } else { v >= lo }) && v <= hi;
    if ok {
        Ok(())
    } else {
        let low = if lo_open { format!("above {lo}") } else { format!("{lo}") };
        Err(usage(format!("--{flag} {v} is out of range ({low} to {hi})")))
    }
}

pub(super) fn run(args: &RunArgs) -> Result<(), Failure> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = args.threads.unwrap_or(cores as u64);
    if !(1..=1024).contains(&threads) {
        return Err(usage(format!("--threads {threads} is out of range (1 to 1024)")));
    }
    let threads = threads as usize;
    check_range("duration", args.duration, 0.0, 86_400.0, true)?;
    check_range("warmup", args.warmup, 0.0, 3_600.0, false)?;
    check_range("backoff-us", args.backoff_us, 0.0, 1_000_000.0, false)?;
    if !(1..=100).contains(&args.repeat) {
        return Err(usage(format!("--repeat {} is out of range (1 to 100)", args.repeat)));
    }
    if !(1..=10_000).contains(&args.epoch_ms) {
        return Err(usage(format!("--epoch-ms {} is out of range (1 to 10000)", args.epoch_ms)));
    }
    let protocols =
        if args.protocol.is_empty() { ProtocolKind::ALL.to_vec() } else { args.protocol.clone() };
    let length = match args.txns {
        Some(n) if !(1..=1_000_000_000_000).contains(&n) => {
            return Err(usage(format!("--txns {n} is out of range (1 to 1000000000000)")));
        }
        Some(n) => RunLength::transactions(n),
        None => RunLength::timed(
            Duration::from_secs_f64(args.warmup),
            Duration::from_secs_f64(args.duration),
        ),
    };
    let run_cfg = RunConfig {
        threads,
        length,
        backoff: match args.backoff {
            BackoffArg::None => Backoff::None,
            BackoffArg::Fixed => Backoff::Fixed { max_us: args.backoff_us },
            BackoffArg::Adaptive => Backoff::Adaptive,
        },
        pin: !args.no_pin,
        seed: args.seed,
        check_templates: args.check_templates || cfg!(debug_assertions),
        check_access_sets: args.check_access_sets,
        prefault: !args.no_prefault,
    };
    let db_opts = DbOptions {
        max_workers: threads + 8,
        epoch_interval: Duration::from_millis(args.epoch_ms),
        record_history: args.record_history,
        poison_unprojected: args.check_templates || cfg!(debug_assertions),
        commit_pause_us: 0,
    };
    let common = Common { protocols, run_cfg, db_opts, cores };
    match args.workload {
        WorkloadKind::Ycsb => {
            if let Some(flag) = args.tpcc.given_flag() {
                return Err(usage(format!("--{flag} applies to --workload tpcc")));
            }
            if args.customers.is_some() || args.spin_us.is_some() {
                return Err(usage(
                    "--customers and --spin-us apply to --workload smallbank".to_string(),
                ));
            }
            let ycsb_cfg = args.ycsb.resolve().map_err(|e| usage(e.to_string()))?;
            // Refuse a load that cannot fit before spending time on it (the largest header
            // decides).
            let probe = Ycsb::tables_for(&ycsb_cfg);
            check_memory::<[u64; 2]>(&probe).map_err(|e| {
                usage(format!(
                    "--records {} with --payload {}: {e}",
                    ycsb_cfg.records, ycsb_cfg.payload
                ))
            })?;
            eprintln!("{}", ycsb_cfg.summary());
            let t = Instant::now();
            let first = Ycsb::new(ycsb_cfg.clone(), cores);
            if t.elapsed() > Duration::from_millis(200) {
                eprintln!("computed the Zipf constant in {:.1} s", t.elapsed().as_secs_f64());
            }
            // ζ is cached, so each database's own instance costs nothing more.
            measure(args, &common, first.config(), &probe, || Ycsb::new(ycsb_cfg.clone(), cores))
        }
        WorkloadKind::Smallbank => {
            if let Some(flag) = args.ycsb.given_flag() {
                return Err(usage(format!("--{flag} applies to --workload ycsb")));
            }
            if let Some(flag) = args.tpcc.given_flag() {
                return Err(usage(format!("--{flag} applies to --workload tpcc")));
            }
            let cfg = SmallBankConfig {
                customers: args.customers.unwrap_or(100_000),
                spin_us: args.spin_us.unwrap_or(0),
            };
            cfg.validate().map_err(usage)?;
            let probe = SmallBank::tables_for(&cfg);
            check_memory::<[u64; 2]>(&probe)
                .map_err(|e| usage(format!("--customers {}: {e}", cfg.customers)))?;
            eprintln!(
                "SmallBank: {} customers, H-Store mix, spin {} us per transaction",
                cfg.customers, cfg.spin_us
            );
            let config = SmallBank::new(cfg.clone()).config();
            measure(args, &common, config, &probe, || SmallBank::new(cfg.clone()))
        }
        WorkloadKind::Tpcc => {
            if let Some(flag) = args.ycsb.given_flag() {
                return Err(usage(format!("--{flag} applies to --workload ycsb")));
            }
            if args.customers.is_some() || args.spin_us.is_some() {
                return Err(usage(
                    "--customers and --spin-us apply to --workload smallbank".to_string(),
                ));
            }
            let cfg = args.tpcc.resolve(args.seed).map_err(usage)?;
            let probe = Tpcc::tables_for(&cfg);
            check_memory::<[u64; 2]>(&probe)
                .map_err(|e| usage(format!("--warehouses {}: {e}", cfg.warehouses)))?;
            eprintln!("{}", cfg.summary());
            if cfg.warehouse_choice == WarehouseChoice::Home
                && (common.run_cfg.threads as u64) < u64::from(cfg.warehouses)
            {
                eprintln!(
                    "note: {} threads bound to home warehouses: warehouses {} to {} have no \
                     terminal of their own (they are still reached remotely)",
                    common.run_cfg.threads,
                    common.run_cfg.threads + 1,
                    cfg.warehouses
                );
            }
            let config = Tpcc::new(cfg.clone()).config();
            measure(args, &common, config, &probe, || Tpcc::new(cfg.clone()))
        }
    }
}

/// What every workload's run shares.
struct Common {
    protocols: Vec<ProtocolKind>,
    run_cfg: RunConfig,
    db_opts: DbOptions,
    cores: usize,
}

/// Loads a workload from `make` for each protocol, measures, reports. Each database gets its own
/// workload instance: state such as YCSB's insert counter or SmallBank's money ledger belongs to
/// one database.
fn measure<W: Workload + 'static>(
    args: &RunArgs,
    common: &Common,
    workload_config: serde_json::Value,
    probe: &[crate::storage::TableSpec],
    make: impl Fn() -> W,
) -> Result<(), Failure> {
    let Common { protocols, run_cfg, db_opts, cores } = common;
    let (protocols, run_cfg, db_opts, cores) = (protocols.clone(), run_cfg, db_opts, *cores);
    let length = match run_cfg.length {
        RunLength::Timed { .. } => {
            format!("{} s measured after {} s warm-up", args.duration, args.warmup)
        }
        RunLength::Transactions { per_worker } => {
            format!("{per_worker} transactions per worker, all measured")
        }
    };
    eprintln!(
        "{} thread(s), {length}, {} run(s) per protocol, backoff {:?}, {}",
        run_cfg.threads,
        args.repeat,
        args.backoff,
        match (run_cfg.prefault, run_cfg.length) {
            (false, _) => "no pre-faulting",
            (true, RunLength::Timed { warmup, .. }) if !warmup.is_zero() => {
                "memory for the window's inserts faulted in before measuring (warm-up growth \
                 scaled to the window, +25 %), then ahead of inserts"
            }
            (true, _) => "memory faulted in ahead of inserts",
        }
    );
    let config = serde_json::json!({
        "run": &run_cfg,
        "database": &db_opts,
        "workload": workload_config,
        "command": args,
    });
    let fail = |e: Error| match e {
        Error::OutOfMemory(m) | Error::Config(m) => usage(m),
        e => Failure::Run(e.to_string()),
    };
    // Interleave the protocols' runs when every database fits in memory at once, so that each
    // protocol's median samples the same stretches of machine noise (ratios side by side).
    let need = check_memory::<[u64; 2]>(probe).unwrap_or(0);
    let interleave = protocols.len() > 1
        && args.repeat > 1
        && crate::storage::available_memory()
            .is_none_or(|avail| need.saturating_mul(protocols.len() as u64) <= avail / 10 * 9);
    let mut all: Vec<Vec<RunReport>> = vec![Vec::new(); protocols.len()];
    if interleave {
        let mut sessions = Vec::new();
        for kind in &protocols {
            sessions.push(
                crate::with_protocol!(*kind, P => prepare::<P, _>(make(), run_cfg, db_opts, cores, &config))
                    .map_err(fail)?,
            );
        }
        for round in 0..args.repeat as usize {
            for i in 0..sessions.len() {
                let at = (round + i) % sessions.len();
                let report = (sessions[at])().map_err(fail)?;
                print!("run {}/{}: {}", round + 1, args.repeat, report.to_text());
                all[at].push(report);
            }
        }
    } else {
        for (at, kind) in protocols.iter().enumerate() {
            let mut session =
                crate::with_protocol!(*kind, P => prepare::<P, _>(make(), run_cfg, db_opts, cores, &config))
                    .map_err(fail)?;
            for round in 0..args.repeat {
                let report = session().map_err(fail)?;
                if args.repeat > 1 {
                    print!("run {}/{}: ", round + 1, args.repeat);
                }
                print!("{}", report.to_text());
                all[at].push(report);
            }
        }
    }
    let medians: Vec<&RunReport> = all.iter().map(|r| median(r)).collect();
    if medians.len() > 1 {
        println!("{}", comparison(&medians));
    }
    if let Some(path) = &args.json {
        let value = json_output(&all, &medians);
        let text = serde_json::to_string_pretty(&value).expect("serializable");
        std::fs::write(path, text + "\n")
            .map_err(|e| Failure::Run(format!("--json {}: {e}", path.display())))?;
    }
    if let Some(path) = &args.csv {
        write_csv(path, &all)
            .map_err(|e| Failure::Run(format!("--csv {}: {e}", path.display())))?;
    }
    let unpermitted: Vec<&str> = all
        .iter()
        .flatten()
        .filter(|r| r.history_check.as_ref().is_some_and(|h| !h.permitted))
        .map(|r| r.protocol.as_str())
        .collect();
    if !unpermitted.is_empty() {
        return Err(Failure::Run(format!(
            "recorded histories show anomalies their protocol does not permit: {}",
            unpermitted.join(", ")
        )));
    }
    Ok(())
}

/// One measured window of a loaded database.
type Session<'a> = Box<dyn FnMut() -> Result<RunReport, Error> + 'a>;

/// Creates and loads a database for protocol `P`; returns a closure that measures one window.
/// (The closure is boxed so that protocols of different types can take turns; the call happens
/// once per window, never per transaction.)
fn prepare<'a, P: Protocol + Default, W: Workload + 'a>(
    workload: W,
    cfg: &'a RunConfig,
    db_opts: &DbOptions,
    load_threads: usize,
    config: &'a serde_json::Value,
) -> Result<Session<'a>, Error> {
    let db = Database::with_options(P::default(), &workload.tables(), db_opts.clone())?;
    let record = db_opts.record_history;
    let t = Instant::now();
    workload.load(&db, load_threads)?;
    eprintln!("[{}] loaded in {:.2} s", P::NAME, t.elapsed().as_secs_f64());
    let names: Vec<&'static str> = workload.txn_types().iter().map(|t| t.name).collect();
    Ok(Box::new(move || {
        let per_worker = P::drive(&db, &workload, cfg)?;
        // A serializable protocol must keep the workload's invariant; others are only reported.
        let broken = workload.check(&db).err();
        if let (Some(m), Isolation::Serializable) = (&broken, P::CAPS.isolation) {
            return Err(Error::Invariant(format!("{} on {}: {m}", P::NAME, workload.name())));
        }
        let mut total = WorkerStats::new(names.len());
        for s in &per_worker {
            total.merge(s);
        }
        // Rates over the window the workers timed (about the planned duration).
        let seconds = total.window_seconds(match cfg.length {
            RunLength::Timed { duration, .. } => duration.as_secs_f64(),
            RunLength::Transactions { .. } => f64::MIN_POSITIVE,
        });
        let mut report = RunReport::new(
            P::NAME,
            workload.name(),
            &names,
            &total,
            cfg.threads,
            seconds,
            config.clone(),
        );
        report.invariant_violation = broken;
        report.set_headline(workload.headline(), &total, seconds);
        report.notes = workload.notes();
        let missing = total.aborts[crate::error::AbortReason::MissingRow as usize];
        if missing > 0 && P::CAPS.isolation == Isolation::Serializable {
            return Err(Error::Invariant(format!(
                "{} on {}: {missing} transactions found a row missing that the database's \
                 invariants guarantee",
                P::NAME,
                workload.name()
            )));
        }
        if record {
            let history = db.take_history();
            let checked = crate::checker::check(&history);
            let allowed = crate::checker::suite::permitted(P::CAPS.isolation);
            report.history_check = Some(HistoryCheck {
                txns: checked.txns,
                committed: checked.committed,
                permitted: checked.anomalies.iter().all(|a| allowed.contains(&a.class)),
                anomalies: checked.anomalies,
            });
        }
        Ok(report)
    }))
}

/// The run with the median throughput.
fn median(runs: &[RunReport]) -> &RunReport {
    let mut idx: Vec<usize> = (0..runs.len()).collect();
    idx.sort_by(|&a, &b| runs[a].throughput.total_cmp(&runs[b].throughput));
    &runs[idx[idx.len() / 2]]
}

fn comparison(medians: &[&RunReport]) -> String {
    let base = medians.iter().find(|r| r.protocol == "nocc").map(|r| r.throughput);
    let mut s = String::from("\nComparison (median run per protocol):\n");
    let headline = medians.iter().find_map(|r| r.headline.as_ref()).map(|h| h.name.clone());
    // The headline column (TPC-C: new orders per second) only for workloads that have one.
    let head_col =
        headline.as_ref().map(|n| format!("{:>14}", format!("{n}/s"))).unwrap_or_default();
    let _ = writeln!(
        s,
        "  {:<13}{:>14}{head_col}{:>10}{:>13}{:>11}{:>11}",
        "protocol", "txn/s", "vs nocc", "abort ratio", "p50 us", "p99 us"
    );
    for r in medians {
        let ratio = base.map(|b| format!("{:.3}", r.throughput / b)).unwrap_or_else(|| "-".into());
        let head = match (&headline, &r.headline) {
            (Some(_), Some(h)) => format!("{:>14.0}", h.throughput),
            (Some(_), None) => format!("{:>14}", "-"),
            (None, _) => String::new(),
        };
        let _ = writeln!(
            s,
            "  {:<13}{:>14.0}{head}{:>10}{:>13.4}{:>11.1}{:>11.1}",
            r.protocol, r.throughput, ratio, r.abort_ratio, r.latency.p50_us, r.latency.p99_us
        );
    }
    if let Some(note) = medians.iter().find(|r| r.protocol == "nocc").and_then(|r| lost_work(r)) {
        s.push_str(&note);
    }
    s
}

/// A warning when nocc, the baseline, ended at least 1 % of its transactions for good with a
/// missing row: without concurrency control its concurrent transactions lost updates (TPC-C's
/// NewOrder gets an order id another one already used), so its throughput counts work a
/// correct engine would have done, or dropped work a correct engine must do.
fn lost_work(nocc: &RunReport) -> Option<String> {
    let dropped = nocc.aborts.get(AbortReason::MissingRow.name()).copied().unwrap_or(0);
    let ended = nocc.commits + dropped;
    (ended > 0 && dropped * 100 >= ended).then(|| {
        format!(
            "  note: nocc ended {dropped} transactions ({:.1} % of those measured) with a missing \
             row:\n        without concurrency control, concurrent transactions lost updates, so \
             'vs nocc' is not a baseline for this run\n",
            dropped as f64 * 100.0 / ended as f64
        )
    })
}

fn json_output(all: &[Vec<RunReport>], medians: &[&RunReport]) -> serde_json::Value {
    if all.len() == 1 {
        let mut v = serde_json::to_value(medians[0]).expect("serializable");
        if all[0].len() > 1 {
            v["runs"] = serde_json::to_value(&all[0]).expect("serializable");
            v["median_of"] = all[0].len().into();
        }
        v
    } else {
        serde_json::json!({
            "comparison": medians,
            "runs": all.iter().flatten().collect::<Vec<_>>(),
        })
    }
}

fn write_csv(
    path: &std::path::Path,
    all: &[Vec<RunReport>],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut w = csv::Writer::from_path(path)?;
    w.write_record(RunReport::csv_header())?;
    for r in all.iter().flatten() {
        w.write_record(r.csv_row())?;
    }
    w.flush()?;
    Ok(())
}
