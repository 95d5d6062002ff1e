//! `txlab run`: validate, load, measure, report; and the measuring core that `sweep` shares:
//! [`Plan`] (one validated run configuration, nothing loaded) and [`Bench`] (loaded databases,
//! kept across runs while the data they hold is what the next run needs). A loaded pair of
//! protocol and workload is in `run/session.rs`, the comparison table in `run/compare.rs`.

use super::output::Output;
use super::{BackoffArg, LogChoice, ReloadArg, RunArgs};
use crate::durability::log::SyncPolicy;
use crate::engine::driver::MixStep;
use crate::engine::report::{DurabilityReport, HistoryCheck, RunReport};
use crate::engine::{
    AccessMode, Backoff, Database, DbOptions, Isolation, Protocol, RunConfig, RunLength,
    WorkerStats, Workload,
};
use crate::error::{AbortReason, Error};
use crate::protocols::ProtocolKind;
use crate::storage::inject::{CommitPhase, Gate, Who};
use crate::storage::{check_memory, TableSpec};
use crate::workloads::pieces::{Pieces, PiecesConfig};
use crate::workloads::smallbank::{SmallBank, SmallBankConfig};
use crate::workloads::spec::SpecWorkload;
use crate::workloads::tpcc::{Tpcc, TpccConfig, WarehouseChoice};
use crate::workloads::tpce::{Tpce, TpceConfig};
use crate::workloads::ycsb::{Ycsb, YcsbConfig};
use crate::workloads::WorkloadKind;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod compare;
mod session;

use compare::*;
pub(super) use session::FromSpec;
use session::*;

/// Why a command failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// Bad input (exit 2).
    Usage(String),
    /// A failure while running (exit 1).
    Run(String),
    /// Stopped by Ctrl-C after writing what was measured (exit 130).
    Interrupted(String),
}

pub(super) fn usage(m: impl Into<String>) -> Failure {
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

/// The steps of `--mix-at` (see `RunArgs::mix_at`), checked against the workload.
fn mix_steps(args: &RunArgs, spec: &Spec, cores: usize) -> Result<Vec<MixStep>, Failure> {
    if args.mix_at.is_empty() {
        return Ok(Vec::new());
    }
    let duration = match args.txns {
        Some(_) => {
            return Err(usage(
                "--mix-at changes the mix at times: it needs a timed run, not --txns",
            ))
        }
        None => args.duration,
    };
    fn steps<W: Workload>(w: &W, args: &RunArgs, duration: f64) -> Result<Vec<MixStep>, Failure> {
        let names: Vec<&str> = w.txn_types().iter().map(|t| t.name).collect();
        let mut out: Vec<MixStep> = Vec::new();
        for text in &args.mix_at {
            let bad = |why: String| usage(format!("--mix-at '{text}': {why}"));
            let (at, list) =
                text.split_once('=').ok_or_else(|| bad("needs SECONDS=TYPE,TYPE,...".into()))?;
            let at: f64 =
                at.trim().parse().ok().filter(|t: &f64| (0.0..duration).contains(t)).ok_or_else(
                    || bad(format!("'{at}' is not a time within the {duration} s window")),
                )?;
            let mut types = Vec::new();
            for name in list.split(',').map(str::trim) {
                if name == "all" {
                    types.extend(0..names.len());
                    continue;
                }
                let i = names.iter().position(|n| *n == name).ok_or_else(|| {
                    bad(format!(
                        "workload {} has no transaction type '{name}' (it has: {})",
                        w.name(),
                        names.join(", ")
                    ))
                })?;
                types.push(i);
            }
            types.sort_unstable();
            types.dedup();
            w.check_mix(&types).map_err(&bad)?;
            let at = Duration::from_secs_f64(at);
            if out.last().is_some_and(|s| s.at >= at) {
                return Err(bad("the steps must be given in time order, each later".into()));
            }
            out.push(MixStep { at, types });
        }
        Ok(out)
    }
    match spec {
        Spec::Ycsb(c) => steps(&Ycsb::new(c.clone(), cores), args, duration),
        Spec::SmallBank(c) => steps(&SmallBank::new(c.clone()), args, duration),
        Spec::Tpcc(c) => steps(&Tpcc::new(c.clone()), args, duration),
        Spec::Tpce(c) => steps(&Tpce::new(c.clone()), args, duration),
        Spec::Pieces(c) => steps(&Pieces::new(c.clone()), args, duration),
        Spec::Declared(f) => steps(
            &SpecWorkload::new(f.1.clone(), cores).map_err(|e| usage(e.to_string()))?,
            args,
            duration,
        ),
    }
}

/// A workload's validated configuration.
#[derive(Clone, Debug)]
pub(super) enum Spec {
    Ycsb(YcsbConfig),
    SmallBank(SmallBankConfig),
    Tpcc(TpccConfig),
    Tpce(TpceConfig),
    Pieces(PiecesConfig),
    /// A declarative workload: the file as given, and its spec.
    Declared(std::sync::Arc<(String, crate::workloads::spec::Spec)>),
}

/// One validated `run` configuration: what to load and how to measure it. Building one loads
/// nothing, so a sweep validates all of its points before it measures the first.
#[derive(Clone)]
pub(super) struct Plan {
    pub protocols: Vec<ProtocolKind>,
    /// The `--log` choices: one (`off` when nothing logs), or several to compare
    /// ([`Plan::variant`]).
    pub logs: Vec<LogChoice>,
    /// `--log-dir`.
    log_root: Option<std::path::PathBuf>,
    pub run_cfg: RunConfig,
    pub db_opts: DbOptions,
    pub spec: Spec,
    pub repeat: u32,
    /// `--reload`.
    pub reload: ReloadArg,
    pub cores: usize,
    /// The requested window in seconds (timed runs).
    pub requested_s: Option<f64>,
    /// Protocol options (`--opt`), checked against every protocol of the plan.
    pub opts: Vec<(String, String)>,
    /// The configuration recorded with each result (`run`, `database`, `command`; each
    /// session adds `workload`).
    pub config: serde_json::Value,
    /// Equal for plans whose databases hold the same data (same workload data configuration
    /// and database options), so that one loaded database serves them all.
    pub data_key: String,
    /// Tables, for the memory check.
    probe: Vec<TableSpec>,
    /// `--checkpoint-interval` (zero: none during runs).
    pub checkpoint_interval: Duration,
    /// `--crash-at`: the phase, and the gate the databases' workers pass (their commit hook).
    crash: Option<(CommitPhase, Arc<Gate>)>,
    /// The `run` command line after `run`, for the log's manifest (`txlab recover` rebuilds
    /// the workload from it).
    pub argv: Vec<String>,
    /// What to print before loading (the workload's summary and notes).
    header: Vec<String>,
}

impl Plan {
    /// Validates `args`; loads nothing.
    pub fn new(args: &RunArgs) -> Result<Plan, Failure> {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let threads = args.threads.unwrap_or(cores as u64);
        if !(1..=1024).contains(&threads) {
            return Err(usage(format!("--threads {threads} is out of range (1 to 1024)")));
        }
        let threads = threads as usize;
        check_range("duration", args.duration, 0.0, 86_400.0, true)?;
        check_range("warmup", args.warmup, 0.0, 3_600.0, false)?;
        check_range("backoff-us", args.backoff_us, 0.0, 1_000_000.0, false)?;
        if !(1..=10_000).contains(&args.epoch_ms) {
            return Err(usage(format!(
                "--epoch-ms {} is out of range (1 to 10000)",
                args.epoch_ms
            )));
        }
        let protocols = if args.protocol.is_empty() {
            ProtocolKind::ALL.to_vec()
        } else {
            args.protocol.clone()
        };
        // Several protocols, or log managers, are compared.
        let compared = protocols.len() * args.log.len().max(1);
        let repeat = args.repeat.unwrap_or(if compared > 1 { 3 } else { 1 });
        if !(1..=100).contains(&repeat) {
            return Err(usage(format!("--repeat {repeat} is out of range (1 to 100)")));
        }
        for (i, p) in protocols.iter().enumerate() {
            if protocols[..i].contains(p) {
                return Err(usage(format!(
                    "--protocol lists {} twice (use --repeat to run a protocol several times)",
                    p.name()
                )));
            }
        }
        let opts = super::protocol_options(&args.opt, &protocols).map_err(usage)?;
        for p in &protocols {
            let pairs = crate::engine::options::pairs_for(&opts, p.name());
            p.check_threads(&pairs, threads).map_err(usage)?;
        }
        let (length, requested_s) = match args.txns {
            Some(n) if !(1..=1_000_000_000_000).contains(&n) => {
                return Err(usage(format!("--txns {n} is out of range (1 to 1000000000000)")));
            }
            Some(n) => (RunLength::transactions(n), None),
            None => (
                RunLength::timed(
                    Duration::from_secs_f64(args.warmup),
                    Duration::from_secs_f64(args.duration),
                ),
                Some(args.duration),
            ),
        };
        let run_cfg = RunConfig {
            threads,
            length,
            backoff: match args.backoff {
                BackoffArg::None => Backoff::None,
                BackoffArg::Fixed => Backoff::Fixed { max_us: args.backoff_us },
                BackoffArg::Adaptive => Backoff::Adaptive,
                BackoffArg::Protocol => Backoff::Protocol,
            },
            pin: !args.no_pin,
            seed: args.seed,
            check_templates: args.check_templates || cfg!(debug_assertions),
            check_access_sets: args.check_access_sets,
            prefault: !args.no_prefault,
            breakdown: args.breakdown,
            acks: None,
            mix_at: Vec::new(),
            timeline: match args.timeline {
                Some(t) => {
                    check_range("timeline", t, 0.01, 60.0, false)?;
                    Some(Duration::from_secs_f64(t))
                }
                None => None,
            },
        };
        let (log, logs) = log_options(args, &protocols)?;
        let mut db_opts = DbOptions {
            max_workers: threads + 8,
            epoch_interval: Duration::from_millis(args.epoch_ms),
            record_history: args.record_history,
            poison_unprojected: args.check_templates || cfg!(debug_assertions),
            log,
            ..Default::default()
        };
        let mut header = Vec::new();
        let (spec, probe) = match args.workload.kind {
            WorkloadKind::Ycsb => {
                refuse_others(args, WorkloadKind::Ycsb)?;
                let cfg = args.ycsb.resolve().map_err(|e| usage(e.to_string()))?;
                if cfg.partitioned && cfg.records < threads as u64 {
                    return Err(usage(format!(
                        "--partitioned gives each thread its own records: --records {} is fewer \
                         than --threads {threads}",
                        cfg.records
                    )));
                }
                let probe = Ycsb::tables_for(&cfg);
                check_memory::<[u64; 2]>(&probe).map_err(|e| {
                    usage(format!("--records {} with --payload {}: {e}", cfg.records, cfg.payload))
                })?;
                header.push(cfg.summary());
                (Spec::Ycsb(cfg), probe)
            }
            WorkloadKind::Smallbank => {
                refuse_others(args, WorkloadKind::Smallbank)?;
                let cfg = SmallBankConfig {
                    customers: args.customers.unwrap_or(100_000),
                    spin_us: args.spin_us.unwrap_or(0),
                };
                cfg.validate().map_err(usage)?;
                let probe = SmallBank::tables_for(&cfg);
                check_memory::<[u64; 2]>(&probe)
                    .map_err(|e| usage(format!("--customers {}: {e}", cfg.customers)))?;
                header.push(format!(
                    "SmallBank: {} customers, H-Store mix, spin {} us per transaction",
                    cfg.customers, cfg.spin_us
                ));
                (Spec::SmallBank(cfg), probe)
            }
            WorkloadKind::Tpcc => {
                refuse_others(args, WorkloadKind::Tpcc)?;
                let cfg = args.tpcc.resolve(args.seed).map_err(usage)?;
                let probe = Tpcc::tables_for(&cfg);
                check_memory::<[u64; 2]>(&probe)
                    .map_err(|e| usage(format!("--warehouses {}: {e}", cfg.warehouses)))?;
                header.push(cfg.summary());
                if cfg.warehouse_choice == WarehouseChoice::Home
                    && (threads as u64) < u64::from(cfg.warehouses)
                {
                    header.push(format!(
                        "note: {threads} threads bound to home warehouses: warehouses {} to {} \
                         have no terminal of their own (they are still reached remotely)",
                        threads + 1,
                        cfg.warehouses
                    ));
                }
                (Spec::Tpcc(cfg), probe)
            }
            WorkloadKind::Tpce => {
                refuse_others(args, WorkloadKind::Tpce)?;
                let cfg = args.tpce_config(args.seed).map_err(usage)?;
                let probe = Tpce::tables_for(&cfg);
                check_memory::<[u64; 2]>(&probe)
                    .map_err(|e| usage(format!("--customers {}: {e}", cfg.customers)))?;
                header.push(cfg.summary());
                (Spec::Tpce(cfg), probe)
            }
            WorkloadKind::Pieces => {
                refuse_others(args, WorkloadKind::Pieces)?;
                let cfg = args.pieces.resolve().map_err(usage)?;
                let probe = Pieces::tables_for(&cfg);
                check_memory::<[u64; 2]>(&probe).map_err(|e| {
                    usage(format!("--pieces {} with --table-rows {}: {e}", cfg.pieces, cfg.rows))
                })?;
                header.push(cfg.summary());
                (Spec::Pieces(cfg), probe)
            }
            WorkloadKind::Spec => {
                refuse_others(args, WorkloadKind::Spec)?;
                let file = args.workload.spec.clone().expect("spec:FILE carries its spec");
                let probe = SpecWorkload::tables_for(&file.1);
                check_memory::<[u64; 2]>(&probe)
                    .map_err(|e| usage(format!("--workload spec:{}: {e}", file.0)))?;
                header.push(file.1.summary());
                (Spec::Declared(file), probe)
            }
        };
        let mut run_cfg = run_cfg;
        let mut probe = probe;
        let crash = match args.crash_at {
            None => None,
            Some(_) if args.ack_file.is_none() => {
                return Err(usage("--crash-at needs --ack-file (and so --log-dir)"))
            }
            Some(_) if protocols.len() > 1 || repeat > 1 => {
                return Err(usage("--crash-at ends the process: one protocol, one run"))
            }
            Some(_) if args.sync != Some(SyncPolicy::Commit) => {
                return Err(usage(
                    "--crash-at needs --sync commit (an acknowledged commit is then durable)",
                ))
            }
            Some(phase) => {
                let gate = Arc::new(Gate::default());
                db_opts.commit_hook = Some(gate.hook());
                Some((phase, gate))
            }
        };
        if let Some(path) = &args.ack_file {
            if args.log_dir.is_none() {
                return Err(usage("--ack-file needs --log-dir"));
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| usage(format!("--ack-file {}: {e}", path.display())))?;
            let table = crate::storage::TableId(probe.len() as u32);
            probe.push(ack_table());
            run_cfg.acks =
                Some(crate::engine::driver::Acks { table, file: std::sync::Arc::new(file) });
        }
        if threads > cores {
            header.push(format!(
                "warning: {threads} threads on {cores} cores share them; results measure the \
                 scheduler as much as the protocol"
            ));
        }
        run_cfg.mix_at = mix_steps(args, &spec, cores)?;
        let data = match &spec {
            Spec::Ycsb(c) => Ycsb::new(c.clone(), cores).data_config(),
            Spec::SmallBank(c) => SmallBank::new(c.clone()).data_config(),
            Spec::Tpcc(c) => Tpcc::new(c.clone()).data_config(),
            Spec::Tpce(c) => Tpce::new(c.clone()).data_config(),
            Spec::Pieces(c) => Pieces::new(c.clone()).data_config(),
            Spec::Declared(f) => SpecWorkload::new(f.1.clone(), cores)
                .map_err(|e| usage(e.to_string()))?
                .data_config(),
        };
        let mut db_key = serde_json::to_value(&db_opts).expect("serializable");
        db_key["max_workers"] = serde_json::Value::Null;
        let data_key = serde_json::json!({
            "workload": args.workload,
            "data": data,
            "database": db_key,
            "protocol_options": &opts,
        })
        .to_string();
        let config = serde_json::json!({
            "run": &run_cfg,
            "database": &db_opts,
            "command": args,
        });
        Ok(Plan {
            protocols,
            logs,
            log_root: args.log_dir.clone(),
            run_cfg,
            db_opts,
            spec,
            repeat,
            reload: args.reload,
            cores,
            requested_s,
            opts,
            config,
            data_key,
            probe,
            header,
            checkpoint_interval: Duration::from_secs_f64(args.checkpoint_interval),
            crash,
            argv: Vec::new(),
        })
    }

    /// Lines describing the workload and the run, printed before loading.
    /// The seconds its timed runs take: every protocol's repeats, warm-up and window (zero
    /// for runs of a fixed number of transactions, whose time is the machine's).
    pub fn window_s(&self) -> f64 {
        match self.run_cfg.length {
            RunLength::Timed { warmup, duration } => {
                (warmup + duration).as_secs_f64() * self.repeat as f64 * self.protocols.len() as f64
            }
            RunLength::Transactions { .. } => 0.0,
        }
    }

    pub fn announce(&self) -> Vec<String> {
        let mut lines = self.header.clone();
        let length = match self.run_cfg.length {
            RunLength::Timed { warmup, duration } => format!(
                "{} s measured after {} s warm-up",
                duration.as_secs_f64(),
                warmup.as_secs_f64()
            ),
            RunLength::Transactions { per_worker } => {
                format!("{per_worker} transactions per worker, all measured")
            }
        };
        let backoff = match self.run_cfg.backoff {
            Backoff::None => "no backoff".to_string(),
            Backoff::Fixed { max_us } => format!("random backoff up to {max_us} us"),
            Backoff::Adaptive => "adaptive backoff".to_string(),
            Backoff::Protocol => {
                let adaptive: Vec<&str> = (self.protocols.iter())
                    .filter(|p| p.default_backoff() == Backoff::Adaptive)
                    .map(|p| p.name())
                    .collect();
                if adaptive.is_empty() {
                    "no backoff".to_string()
                } else {
                    format!("adaptive backoff for {}, none for the others", adaptive.join(", "))
                }
            }
        };
        if !self.opts.is_empty() {
            let o: Vec<String> = self.opts.iter().map(|(n, v)| format!("{n}={v}")).collect();
            lines.push(format!("protocol options: {}", o.join(" ")));
        }
        lines.push(format!(
            "{} thread(s), {length}, {} run(s) per protocol ({}), {backoff}, {}",
            self.run_cfg.threads,
            self.repeat,
            match self.run_cfg.length {
                RunLength::Timed { .. } => format!(
                    "about {} in all",
                    minutes(self.window_s() + self.protocols.len() as f64 * LOAD_S)
                ),
                RunLength::Transactions { .. } => "as long as the machine takes".into(),
            },
            match (self.run_cfg.prefault, self.run_cfg.length) {
                (false, _) => "no pre-faulting",
                (true, RunLength::Timed { warmup, .. }) if !warmup.is_zero() => {
                    "memory for the window's inserts faulted in before measuring (warm-up \
                     growth scaled to the window, +25 %), then ahead of inserts"
                }
                (true, _) => "memory faulted in ahead of inserts",
            }
        ));
        lines
    }

    /// This plan with the `--log` choice `c` alone: its databases log as `c` says (into
    /// `DIR/<manager>` when several managers are compared), or not at all for `off`.
    pub fn variant(&self, c: LogChoice) -> Plan {
        let mut p = self.clone();
        p.logs = vec![c];
        p.db_opts.log = match (c.kind(), &self.db_opts.log, &self.log_root) {
            (Some(kind), Some(base), Some(root)) => {
                let mut o = base.clone();
                o.kind = kind;
                o.dir = log_dir_of(root, &self.logs, c).expect("a manager logs");
                Some(o)
            }
            _ => None,
        };
        p.config["database"] = serde_json::to_value(&p.db_opts).expect("serializable");
        let mut key: serde_json::Value =
            serde_json::from_str(&self.data_key).expect("a data key is JSON");
        key["database"] = p.config["database"].clone();
        key["database"]["max_workers"] = serde_json::Value::Null;
        p.data_key = key.to_string();
        p
    }

    /// The lines describing the workload (its summary and notes), without the run's.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// Sets the timed window of its runs (the plan is otherwise unchanged: its databases serve).
    pub fn set_window(&mut self, warmup: f64, duration: f64) {
        self.run_cfg.length =
            RunLength::timed(Duration::from_secs_f64(warmup), Duration::from_secs_f64(duration));
        self.requested_s = Some(duration);
        self.config["run"] = serde_json::to_value(&self.run_cfg).expect("serializable");
        self.config["command"]["warmup"] = warmup.into();
        self.config["command"]["duration"] = duration.into();
    }

    /// Sets the most workers its database makes room for (plans that share databases need
    /// room for the most threads any of them runs).
    pub fn set_max_workers(&mut self, n: usize) {
        self.db_opts.max_workers = n;
        self.config["database"] = serde_json::to_value(&self.db_opts).expect("serializable");
    }

    /// The workload's transaction types whose templates write nothing (none when a type has
    /// no template: what it does is not known before it runs).
    pub fn read_only_types(&self) -> Vec<String> {
        fn of<W: FromSpec>(spec: &Spec, cores: usize) -> Vec<String> {
            let Some(w) = W::from_spec(spec, cores) else {
                return Vec::new();
            };
            let types = w.txn_types();
            if types.iter().any(|t| t.pieces.is_empty()) {
                return Vec::new();
            }
            types
                .iter()
                .filter(|t| {
                    t.pieces.iter().flat_map(|p| p.accesses).all(|a| a.mode == AccessMode::Read)
                })
                .map(|t| t.name.to_string())
                .collect()
        }
        let (spec, cores) = (&self.spec, self.cores);
        match spec {
            Spec::Ycsb(_) => of::<Ycsb>(spec, cores),
            Spec::SmallBank(_) => of::<SmallBank>(spec, cores),
            Spec::Tpcc(_) => of::<Tpcc>(spec, cores),
            Spec::Tpce(_) => of::<Tpce>(spec, cores),
            Spec::Pieces(_) => of::<Pieces>(spec, cores),
            Spec::Declared(_) => of::<SpecWorkload>(spec, cores),
        }
    }

    /// Whether every protocol's database fits in memory at once, so that their runs can take
    /// turns (each protocol's median then samples the same stretches of machine noise).
    pub fn fits_side_by_side(&self, protocols: usize) -> bool {
        let need = check_memory::<[u64; 2]>(&self.probe).unwrap_or(0);
        crate::storage::available_memory()
            .is_none_or(|avail| need.saturating_mul(protocols as u64) <= avail / 10 * 9)
    }
}

/// The logging configuration of `--log-dir` and its flags (`None` without `--log-dir`), with
/// the `--log` choices (one, or a list to compare). Each protocol logs into its own
/// subdirectory (under one per manager when several are compared), which must not hold a log
/// yet.
fn log_options(
    args: &RunArgs,
    protocols: &[ProtocolKind],
) -> Result<(Option<crate::durability::log::LogOptions>, Vec<LogChoice>), Failure> {
    let Some(dir) = &args.log_dir else {
        if args.group_commit_ms != 10
            || args.log_buffer_kb != 16384
            || args.checkpoint_interval != 0.0
            || !args.log.is_empty()
            || args.sync.is_some()
        {
            return Err(usage(
                "--log, --sync, --group-commit-ms, --log-buffer-kb and --checkpoint-interval need --log-dir",
            ));
        }
        return Ok((None, vec![LogChoice::Off]));
    };
    if !(1..=10_000).contains(&args.group_commit_ms) {
        return Err(usage(format!(
            "--group-commit-ms {} is out of range (1 to 10000)",
            args.group_commit_ms
        )));
    }
    check_range("checkpoint-interval", args.checkpoint_interval, 0.0, 86_400.0, false)?;
    if !(64..=1 << 20).contains(&args.log_buffer_kb) || !args.log_buffer_kb.is_power_of_two() {
        return Err(usage(format!(
            "--log-buffer-kb {} is not a power of two from 64 to 1048576",
            args.log_buffer_kb
        )));
    }
    if args.record_history {
        return Err(usage(
            "--record-history and --log-dir cannot be combined: the in-place protocols keep one \
             stamp per record for either",
        ));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!("--log-dir {}: not a directory", dir.display())));
    }
    let choices = if args.log.is_empty() { vec![LogChoice::PerWorker] } else { args.log.clone() };
    for (i, c) in choices.iter().enumerate() {
        if choices[..i].contains(c) {
            return Err(usage(format!("--log lists {} twice", c.name())));
        }
    }
    if choices == [LogChoice::Off] {
        return Err(usage("--log off logs nothing: leave out --log-dir, or compare it with a log manager (--log off,per-worker)"));
    }
    if choices.len() > 1 && args.ack_file.is_some() {
        return Err(usage("--ack-file takes one log manager, not a list"));
    }
    for &c in &choices {
        for p in protocols {
            let Some(sub) = log_dir_of(dir, &choices, c).map(|d| d.join(p.name())) else {
                continue;
            };
            if std::fs::read_dir(&sub).is_ok_and(|mut d| d.next().is_some()) {
                return Err(usage(format!(
                    "--log-dir {}: {} holds a log already (recover it with txlab recover --log-dir {}, \
                     or remove it)",
                    dir.display(),
                    sub.display(),
                    sub.display()
                )));
            }
        }
    }
    let first = choices.iter().find_map(|c| c.kind()).expect("a choice logs");
    let mut o = crate::durability::log::LogOptions::new(
        log_dir_of(dir, &choices, LogChoice::from(first)).expect("it logs"),
    );
    o.kind = first;
    if let Some(sync) = args.sync {
        o.sync = sync;
    }
    o.group_interval = Duration::from_millis(args.group_commit_ms);
    o.buffer_bytes = (args.log_buffer_kb as usize) << 10;
    Ok((Some(o), choices))
}

/// Where the protocols of `--log` choice `c` log (under `--log-dir DIR`): `DIR` when one
/// manager is used, `DIR/<manager>` when several are compared; `None` for `off`.
fn log_dir_of(dir: &Path, choices: &[LogChoice], c: LogChoice) -> Option<std::path::PathBuf> {
    let kind = c.kind()?;
    let logged = choices.iter().filter(|c| c.kind().is_some()).count();
    Some(if logged > 1 { dir.join(kind.name()) } else { dir.to_path_buf() })
}

/// The acknowledgement table of `--ack-file` ([`crate::engine::driver::Acks`]): a commit count
/// and a ledger per worker.
pub(super) fn ack_table() -> TableSpec {
    use crate::engine::driver::{ACK_ROW, ACK_TABLE, ACK_WORKERS};
    TableSpec::new(ACK_TABLE, ACK_ROW, ACK_WORKERS)
        .with_index(crate::storage::index::IndexKind::Hash)
}

/// Refuses flags of workloads other than `kind`.
fn refuse_others(args: &RunArgs, kind: WorkloadKind) -> Result<(), Failure> {
    if kind != WorkloadKind::Ycsb {
        if let Some(flag) = args.ycsb.given_flag() {
            return Err(usage(format!("--{flag} applies to --workload ycsb")));
        }
    }
    if kind != WorkloadKind::Tpce {
        if let Some(flag) = args.tpce.given_flag() {
            return Err(usage(format!("--{flag} applies to --workload tpce")));
        }
    }
    if kind != WorkloadKind::Tpcc {
        if let Some(flag) =
            args.tpcc.given_flag().filter(|&f| !(kind == WorkloadKind::Tpce && f == "mix"))
        {
            return Err(usage(format!("--{flag} applies to --workload tpcc")));
        }
    }
    if kind != WorkloadKind::Pieces {
        if let Some(flag) = args.pieces.given_flag() {
            return Err(usage(format!("--{flag} applies to --workload pieces")));
        }
    }
    if kind != WorkloadKind::Smallbank && args.spin_us.is_some() {
        return Err(usage("--spin-us applies to --workload smallbank"));
    }
    if !matches!(kind, WorkloadKind::Smallbank | WorkloadKind::Tpce) && args.customers.is_some() {
        return Err(usage("--customers applies to --workload smallbank and tpce"));
    }
    Ok(())
}

/// Creates a file for results before anything is loaded, so that a bad path fails at once
/// instead of after the whole run.
pub(super) fn create_output(flag: &str, path: &Path) -> Result<std::fs::File, Failure> {
    if path.is_dir() {
        return Err(usage(format!("{flag} {}: is a directory", path.display())));
    }
    std::fs::File::create(path).map_err(|e| usage(format!("{flag} {}: {e}", path.display())))
}

/// `txlab run`; `tokens` is its command line after `run` (recorded with a log, so that
/// `txlab recover` can rebuild the workload).
pub(super) fn run(args: &RunArgs, tokens: &[String]) -> Result<(), Failure> {
    let mut plan = Plan::new(args)?;
    plan.argv = tokens.to_vec();
    let json_file = args.json.as_deref().map(|p| Output::create("--json", p)).transpose()?;
    let mut csv = match &args.csv {
        Some(p) => Some(csv::Writer::from_writer(Output::create("--csv", p)?)),
        None => None,
    };
    for line in plan.announce() {
        eprintln!("{line}");
    }
    let interrupt = super::interrupt::Interrupt::install();
    // One contender per log choice and protocol.
    let variants: Vec<Plan> = plan.logs.iter().map(|&c| plan.variant(c)).collect();
    let contenders: Vec<(usize, ProtocolKind)> = variants
        .iter()
        .enumerate()
        .flat_map(|(v, p)| p.protocols.iter().map(move |&k| (v, k)))
        .collect();
    let label = |&(v, k): &(usize, ProtocolKind)| {
        if variants.len() > 1 {
            format!("{} log={}", k.name(), variants[v].logs[0].name())
        } else {
            k.name().to_string()
        }
    };
    let mut all: Vec<Vec<RunReport>> = vec![Vec::new(); contenders.len()];
    let mut bench = Bench::default();
    bench.keep(variants.iter().map(|p| p.data_key.clone()).collect());
    let log = |line: String| eprintln!("{line}");
    // The order of runs: with several contenders and repeats, rounds in which they take turns
    // (rotating who goes first); otherwise each contender's repeats back to back.
    let n = contenders.len();
    let interleave = n > 1 && plan.repeat > 1 && plan.fits_side_by_side(n);
    let mut order = Vec::new();
    if interleave {
        for round in 0..plan.repeat as usize {
            for i in 0..n {
                order.push(((round + i) % n, round as u32));
            }
        }
    } else {
        for at in 0..n {
            order.extend((0..plan.repeat).map(|round| (at, round)));
        }
    }
    let mut csv_header = false;
    for (i, &(at, round)) in order.iter().enumerate() {
        if interrupt.requested() {
            break;
        }
        let (v, kind) = contenders[at];
        let mut report = bench.measure(&variants[v], kind, &log)?;
        report.repeat = round;
        if plan.repeat > 1 {
            print!("run {}/{}: ", round + 1, plan.repeat);
        }
        print!("{}", report.to_text());
        if let Some(w) = &mut csv {
            let written = (|| -> Result<(), csv::Error> {
                if !csv_header {
                    w.write_record(RunReport::csv_header(&report.config))?;
                    csv_header = true;
                }
                w.write_record(report.csv_row())?;
                w.flush()?;
                Ok(())
            })();
            written.map_err(|e| Failure::Run(format!("--csv: {e}")))?;
        }
        all[at].push(report);
        // The database is kept for the contender's next run; after its last one it goes.
        if !order[i + 1..].iter().any(|&(a, _)| a == at) {
            bench.release(kind, &variants[v].data_key);
        }
    }
    // The rows of the comparison: each contender that ran, with its baselines (nocc under the
    // same log choice; the same protocol without logging).
    let median_of = |at: usize| (!all[at].is_empty()).then(|| median(&all[at]).throughput);
    let find = |f: &dyn Fn(usize, ProtocolKind) -> bool| {
        contenders.iter().position(|&(v, k)| f(v, k)).and_then(median_of)
    };
    let rows: Vec<Row<'_>> = contenders
        .iter()
        .enumerate()
        .filter(|(at, _)| !all[*at].is_empty())
        .map(|(at, c)| {
            let (v, k) = *c;
            Row {
                label: label(c),
                runs: &all[at],
                vs_nocc: find(&|v2, k2| v2 == v && k2 == ProtocolKind::Nocc),
                vs_off: (variants.len() > 1)
                    .then(|| find(&|v2, k2| k2 == k && variants[v2].logs[0] == LogChoice::Off))
                    .flatten(),
            }
        })
        .collect();
    if rows.len() > 1 {
        println!("{}", comparison(&rows));
    }
    // The files are put in place once every run asked for has run, or was interrupted (the
    // finished runs are reported).
    if let Some(mut file) = json_file {
        let value = json_output(&rows);
        let text = serde_json::to_string_pretty(&value).expect("serializable") + "\n";
        file.write_all_bytes(text.as_bytes())?;
        file.finish()?;
    }
    if let Some(w) = csv {
        let file = w.into_inner().map_err(|e| Failure::Run(format!("--csv: {}", e.error())))?;
        file.finish()?;
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
    if interrupt.requested() {
        let runs: usize = all.iter().map(Vec::len).sum();
        return Err(Failure::Interrupted(format!(
            "interrupted after {runs} of {} runs; the finished ones are reported above{}",
            order.len(),
            if args.json.is_some() || args.csv.is_some() { " and written" } else { "" }
        )));
    }
    Ok(())
}

/// Loaded databases, one per protocol, kept while the runs asked for need the data they hold.
#[derive(Default)]
pub(super) struct Bench {
    slots: Vec<Slot>,
    /// The log directories databases of this invocation logged into.
    logged: Vec<std::path::PathBuf>,
    /// Data keys whose databases stay while others are measured (the log choices `run`
    /// compares: each its own database).
    keep: Vec<String>,
}

struct Slot {
    kind: ProtocolKind,
    data_key: String,
    session: Box<dyn Session>,
}

impl Bench {
    /// Measures one run of `kind` as `plan` says. Loads the protocol's database first unless
    /// the one it has holds the same data (`Plan::data_key`); databases with other data are
    /// dropped before anything is loaded. `log` prints what loading did.
    pub fn measure(
        &mut self,
        plan: &Plan,
        kind: ProtocolKind,
        log: &dyn Fn(String),
    ) -> Result<RunReport, Failure> {
        let at = self.load(plan, kind, log)?;
        let mut report = self.slots[at].session.measure(plan).map_err(load_failure)?;
        report.check_conditions(plan.requested_s, plan.cores);
        if plan.db_opts.record_history {
            // A recorded history is checked from the loaded state: the next run's history
            // would read versions this run wrote and this history holds, so it gets a fresh
            // database.
            self.slots.remove(at);
        }
        Ok(report)
    }

    /// Loads `kind`'s database for `plan` unless the one it has serves (see
    /// [`Bench::measure`]); returns its slot.
    pub fn load(
        &mut self,
        plan: &Plan,
        kind: ProtocolKind,
        log: &dyn Fn(String),
    ) -> Result<usize, Failure> {
        let fail = load_failure;
        self.slots.retain(|s| s.data_key == plan.data_key || self.keep.contains(&s.data_key));
        let mut at = self.slots.iter().position(|s| s.kind == kind && s.data_key == plan.data_key);
        if let Some(i) = at {
            let session = &self.slots[i].session;
            let why = match plan.reload {
                ReloadArg::Always => Some("--reload always"),
                ReloadArg::Grown if session.grew() => Some("the last run inserted rows"),
                // Another run like the last could fill a table.
                _ if !session.room_for_another() => Some("tables nearly full"),
                _ => None,
            };
            if let Some(why) = why {
                log(format!("[{}] {why}: loading afresh", kind.name()));
                self.slots.remove(i);
                at = None;
            }
        }
        let at = match at {
            Some(at) => at,
            None => {
                if let Some(log) = &plan.db_opts.log {
                    let dir = log.dir.join(kind.name());
                    if self.logged.contains(&dir) {
                        // A sweep's next point (other data): the log of this invocation's
                        // previous database of the protocol, closed when it was dropped, gives
                        // way; the last one stays for `txlab recover`.
                        std::fs::remove_dir_all(&dir).map_err(|e| {
                            Failure::Run(format!(
                                "{}: cannot remove the previous log: {e}",
                                dir.display()
                            ))
                        })?;
                    }
                    self.logged.push(dir);
                }
                let t = Instant::now();
                let session = load(plan, kind).map_err(fail)?;
                log(format!("[{}] loaded in {:.2} s", kind.name(), t.elapsed().as_secs_f64()));
                self.slots.push(Slot { kind, data_key: plan.data_key.clone(), session });
                self.slots.len() - 1
            }
        };
        Ok(at)
    }

    /// Keeps the databases of the data keys `keys` while others are measured.
    pub fn keep(&mut self, keys: Vec<String>) {
        self.keep = keys;
    }

    /// Drops `kind`'s database holding the data of `data_key`.
    pub fn release(&mut self, kind: ProtocolKind, data_key: &str) {
        self.slots.retain(|s| s.kind != kind || s.data_key != data_key);
    }
}

/// A failure to load or run: bad configuration and exhausted memory are the user's to fix.
fn load_failure(e: Error) -> Failure {
    match e {
        Error::OutOfMemory(m) | Error::Config(m) => usage(m),
        e => Failure::Run(e.to_string()),
    }
}

/// The file in a protocol's log directory that says how the run was started.
pub(super) const RUN_MANIFEST: &str = "run.json";

/// What an estimate counts for loading a protocol's database (1 M YCSB records take about a
/// second on a 2-core machine; TPC-C's warehouse half of it).
pub(super) const LOAD_S: f64 = 1.0;

/// A duration in whole minutes, rounded up ("1 minute", "3 minutes").
pub(super) fn minutes(secs: f64) -> String {
    let m = (secs / 60.0).ceil() as u64;
    if m <= 1 {
        "1 minute".into()
    } else {
        format!("{m} minutes")
    }
}
