//! The `txlab` command line: `run`, `sweep`, `plot`, `report`, `reproduce`, `merge`, `compare`,
//! `check`, `analyze`, `recover`, `advise` and `list`.
//!
//! Bad input never panics: every error is one line on stderr that names the flag and the valid
//! range, and the exit status is 2 for usage errors and 1 for failures while running.

mod advise;
mod analyze;
mod check;
mod experiments;
mod interrupt;
mod output;
mod recover;
mod run;
mod slurm;
mod sweep;

use crate::protocols::ProtocolKind;
use crate::workloads::ycsb::{Preset, YcsbArgs};
use crate::workloads::WorkloadKind;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Exit status for bad command-line input.
pub const EXIT_USAGE: i32 = 2;
/// Exit status for a failure while running.
pub const EXIT_FAILURE: i32 = 1;
/// Exit status after Ctrl-C (what a shell reports for SIGINT).
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(Parser, Debug)]
#[command(
    name = "txlab",
    version,
    about = "A multi-core in-memory transaction engine with pluggable concurrency control",
    long_about = "txlab runs one engine with many concurrency-control protocols over the same \
storage, index, workloads and measurement path, so that throughput differences are differences \
in the protocol.\n\nStart with `txlab run` (a short YCSB on every protocol, compared with nocc) \
and `txlab list` (protocols, workloads, presets).",
    after_help = "Examples:\n  txlab run\n  txlab run --protocol silo --threads 2 --duration 5 \
--preset a --theta 0.99 --json out.json\n  txlab run --protocol 2pl-nowait,silo --read-ratio 1 \
--theta 0 --records 1000000 --repeat 5\n  txlab check --quick\n  txlab check --protocol silo \
--workload write-skew --long\n  txlab list"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load a workload and measure one or more protocols on it.
    ///
    /// With no flags: a short YCSB (1 M records, 10 ops/txn, 50 % reads, theta 0.8) on every
    /// protocol, three runs each taking turns, then a comparison table of each protocol's median
    /// with the spread of its runs, its rank (a range where the noise does not separate
    /// protocols) and its throughput as a ratio of nocc's. About two minutes: 14 protocols x 3
    /// runs of 2.5 s plus their loads; the first lines say how long.
    #[command(allow_negative_numbers = true)]
    Run(Box<RunArgs>),
    /// Check protocols for anomalies: contended workloads, recorded histories, the checker.
    ///
    /// Runs workloads built to provoke anomalies (bank transfers with user aborts, write skew on
    /// constraint pairs, Fekete et al.'s read-only anomaly, hot-key read-modify-write, scans
    /// racing inserts and deletes) with more threads than cores and random pauses inside
    /// transactions, records every transaction's reads and writes, builds the direct
    /// serialization graph and checks each workload's invariant. Each protocol is held to the
    /// isolation level it promises (serializable: no anomaly; nocc: anything). Exit status 0 when every protocol showed only anomalies it permits, 1
    /// otherwise; each unpermitted anomaly is printed with a cycle and a command that reruns it.
    Check(CheckArgs),
    /// Rebuild a database from the log directory of a run (`run --log-dir DIR` logs protocol P
    /// into DIR/P): load the last checkpoint, replay the durable log, report what was
    /// recovered; exit status 1 on a corrupt or incomplete log (the files are left as they are).
    Recover(RecoverArgs),
    /// Run a grid of configurations and append every measured run to a JSON-lines file.
    ///
    /// Takes every `run` flag; each `--vary NAME=V1,V2,...` names a run flag and its values,
    /// and several make a cross product (the first outermost). Every point is validated before
    /// the first is measured. Points whose data is the same (YCSB's theta, read ratio, threads,
    /// backoff, ... change only the transactions) share one load per protocol, and protocols
    /// take turns within each point's repeats. Each run is appended (and flushed) as it
    /// finishes, so Ctrl-C, a crash or a kill loses at most the run in progress, and `--resume`
    /// finishes the rest.
    #[command(
        allow_negative_numbers = true,
        after_help = "Examples:\n  txlab sweep -p silo,2pl-nowait --records 100000 --vary \
threads=1,2 --vary theta=0,0.5,0.9,0.99 --repeat 3 --out skew.jsonl\n  txlab sweep -w tpcc --np \
--vary warehouses=1,2,4 --vary threads=1,2 --out tpcc.jsonl --resume\n  txlab sweep ... --emit \
slurm jobs/   (a Slurm job array, one task per point; then txlab merge)"
    )]
    Sweep(Box<SweepArgs>),
    /// Draw SVG (or PNG) figures from results files: a statistic against a varied parameter,
    /// one line per protocol, error bars from the repeats' min and max.
    Plot(experiments::PlotArgs),
    /// Write one self-contained HTML report of results files: every figure, the configuration,
    /// the machine and the git revision.
    Report(experiments::ReportArgs),
    /// Reproduce a paper's figure from a preset shipped with txlab: run its sweep, plot it, and
    /// say whether the paper's claim held here.
    Reproduce(experiments::ReproduceArgs),
    /// Join results files (e.g. one per Slurm array task) into one.
    Merge(experiments::MergeArgs),
    /// Compare two results files point by point: the ratio of B to A with its spread.
    Compare(experiments::CompareArgs),
    /// List the protocols (with what they guarantee), workloads and YCSB presets.
    List,
    /// Which protocol to use for a workload: every protocol measured on it with the settings
    /// its paper recommends for the workload's shape, the budget spent by successive halving
    /// (short interleaved runs first, more only for the contenders still close to the best),
    /// the finalists' recorded histories checked, and a ranked table with the recommendation
    /// and its reasons drawn from the measurements. Writes report.html, advice.json and
    /// results.jsonl (every run) into --out. Takes every `run` flag that describes the
    /// workload, the database and logging (`--log-dir`: throughput counts durable commits).
    /// Ctrl-C stops after the run in progress and still ranks what was measured.
    #[command(
        allow_negative_numbers = true,
        after_help = "Examples:\n  txlab advise -w spec:examples/workloads/inventory-hotspot.toml\n  \
txlab advise -w tpcc --warehouses 1 --threads 2,8 --budget 10m --out tpcc-advice\n  txlab advise \
--preset c --records 100000 --budget 2m -p silo,tictoc,mocc"
    )]
    Advise(Box<AdviseArgs>),
    /// Analyse a workload's transaction templates statically: the SC-graph of transaction
    /// chopping as IC3 builds it (two instances of each type that writes, C-edges between
    /// pieces touching a common column, one of them writing), the pieces merged to remove
    /// deadlock-prone cycles, each piece's C-edges and rendezvous pieces; in words, and with
    /// --dot as a Graphviz graph.
    Analyze(analyze::AnalyzeArgs),
}

#[derive(clap::Args, Debug)]
struct SweepArgs {
    #[command(flatten)]
    run: RunArgs,
    /// A run flag and its values: NAME=V1,V2,... (values with commas: separate them with ';');
    /// repeatable, several make a cross product
    #[arg(long, value_name = "NAME=V1,V2,...", help_heading = "Sweep")]
    vary: Vec<String>,
    /// The results file (JSON lines, one record per measured run)
    #[arg(
        long,
        value_name = "FILE.jsonl",
        help_heading = "Sweep",
        required_unless_present = "emit"
    )]
    out: Option<PathBuf>,
    /// Keep the runs already in --out and measure only the missing ones (they must come from
    /// this revision, build and machine)
    #[arg(long, help_heading = "Sweep")]
    resume: bool,
    /// Start --out again if it holds runs (they are discarded)
    #[arg(long, help_heading = "Sweep", conflicts_with = "resume")]
    fresh: bool,
    /// Instead of running: write a job script for a scheduler (slurm) into DIR, one array task
    /// per point
    #[arg(long, num_args = 2, value_names = ["KIND", "DIR"], help_heading = "Sweep")]
    emit: Option<Vec<String>>,
    /// Run only point I (0-based; what each task of an emitted job array does)
    #[arg(long, value_name = "I", help_heading = "Sweep")]
    point: Option<usize>,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("threads", |a| a
    .value_delimiter(',')
    .action(clap::ArgAction::Append)
    .value_name("LIST")
    .help("Thread counts to advise for, comma separated, each 1 to 1024 [default: the cores, \
and four times as many]")))]
#[command(mut_arg("protocol", |a| a.help("Protocols to consider, comma separated [default: \
every protocol that promises --isolation]")))]
// Run flags advise sets itself (it refuses them, saying why) are left out of its help.
#[command(
    mut_arg("duration", |a| a.hide(true)),
    mut_arg("warmup", |a| a.hide(true)),
    mut_arg("txns", |a| a.hide(true)),
    mut_arg("repeat", |a| a.hide(true)),
    mut_arg("opt", |a| a.hide(true)),
    mut_arg("mix_at", |a| a.hide(true)),
    mut_arg("record_history", |a| a.hide(true)),
    mut_arg("ack_file", |a| a.hide(true)),
    mut_arg("json", |a| a.hide(true)),
    mut_arg("csv", |a| a.hide(true))
)]
struct AdviseArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Time to spend: loads, the halving's runs and the finalists' checks (e.g. 90s, 5m, 1h;
    /// 5s to 24h) [default: 5m]
    #[arg(long, value_name = "DURATION", help_heading = "Advise")]
    budget: Option<String>,
    /// The directory for report.html, advice.json and results.jsonl (created; one that holds
    /// an earlier advice is refused)
    #[arg(long, value_name = "DIR", default_value = "txlab-advise", help_heading = "Advise")]
    out: PathBuf,
    /// The isolation the recommendation must give: serializable, or snapshot (admits si, with
    /// the anomalies it permits named)
    #[arg(long, value_enum, default_value = "serializable", help_heading = "Advise")]
    isolation: crate::engine::Isolation,
    /// Strict serializability: no stale read-only snapshots (Silo's), Cicada externally
    /// consistent
    #[arg(long, help_heading = "Advise")]
    strict: bool,
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// Protocols to check, comma separated (default: every protocol)
    #[arg(long, short = 'p', value_enum, value_delimiter = ',')]
    protocol: Vec<crate::protocols::ProtocolKind>,
    /// Workloads, comma separated (default: all of them): bank, write-skew, read-only, hot-rmw,
    /// scan-insert, tpcc, tpce, or spec:FILE.toml (a declarative workload)
    #[arg(long, short = 'w', value_delimiter = ',', value_parser = crate::checker::suite::CheckWorkload::parse)]
    workload: Vec<crate::checker::suite::CheckWorkload>,
    /// Quick mode: 2000 transactions per thread and workload (seconds per protocol; CI)
    #[arg(long, conflicts_with = "long")]
    quick: bool,
    /// Long mode for release checks: 150 000 transactions per thread and workload (at least 1 M
    /// committed per workload with 8 threads)
    #[arg(long)]
    long: bool,
    /// Transactions per thread and workload (overrides --quick and --long) [default: 20000]
    #[arg(long)]
    txns: Option<u64>,
    /// Worker threads, 1 to 1024 (more than cores makes interleavings likelier)
    #[arg(long, short = 't', default_value_t = 8)]
    threads: u64,
    /// Seed of the workers' random streams (with the same flags, a run replays the same
    /// transaction mix; thread timing still varies)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Longest random pause injected inside a transaction, in microseconds (0 to 1000000)
    #[arg(long, default_value_t = 50)]
    max_pause_us: u64,
    /// Hold every protocol to this isolation level instead of the one it promises
    #[arg(long, value_enum)]
    isolation: Option<crate::engine::Isolation>,
    /// A protocol option, NAME=VALUE, or PROTOCOL:NAME=VALUE for one protocol only (repeatable;
    /// see txlab list)
    #[arg(long = "opt", value_name = "NAME=VALUE")]
    opt: Vec<String>,
    /// Write the verdicts as JSON to this file
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also detail the anomalies a protocol is permitted (nocc's lost updates, ...)
    #[arg(long, short = 'v')]
    verbose: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct RecoverArgs {
    /// A protocol's log directory (DIR/<protocol> of `run --log-dir DIR`)
    #[arg(long, value_name = "DIR")]
    log_dir: PathBuf,
    /// Check the recovered database: the workload's invariants (TPC-C's consistency
    /// conditions, SmallBank's money total, the pieces' counters; YCSB has none) and, when the
    /// run had --ack-file, that every commit acknowledged durable was recovered; exit status 1
    /// if a check fails
    #[arg(long)]
    verify: bool,
    /// Write what was recovered as JSON to this file
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A `--log` value: a log manager, or none (the baseline of a comparison).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogChoice {
    /// No logging (the baseline a list compares the managers with).
    Off,
    /// Each worker its own log.
    PerWorker,
    /// One log, ERMIA's.
    Central,
}

impl LogChoice {
    /// The log manager, `None` for `off`.
    pub fn kind(self) -> Option<crate::durability::log::LogKind> {
        use crate::durability::log::LogKind;
        match self {
            LogChoice::Off => None,
            LogChoice::PerWorker => Some(LogKind::PerWorker),
            LogChoice::Central => Some(LogKind::Central),
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        self.kind().map_or("off", |k| k.name())
    }
}

impl From<crate::durability::log::LogKind> for LogChoice {
    fn from(k: crate::durability::log::LogKind) -> Self {
        match k {
            crate::durability::log::LogKind::PerWorker => LogChoice::PerWorker,
            crate::durability::log::LogKind::Central => LogChoice::Central,
        }
    }
}

/// Backoff policy after an aborted attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackoffArg {
    /// Retry at once.
    None,
    /// Random wait in [0, --backoff-us) microseconds.
    Fixed,
    /// Cicada's globally coordinated hill climbing (§3.9).
    Adaptive,
    /// Each protocol's own: adaptive for cicada (its paper's contention regulation), none for
    /// the others.
    Protocol,
}

/// When a protocol's next run gets a freshly loaded database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReloadArg {
    /// When its previous run inserted rows: every run starts from the loaded data.
    Grown,
    /// Before every run.
    Always,
    /// Never: each run sees what the earlier runs wrote (a table about to fill still gets a
    /// fresh database).
    Never,
}

#[derive(clap::Args, Debug, serde::Serialize)]
pub(crate) struct RunArgs {
    /// Protocols to run, comma separated (default: every protocol)
    #[arg(long, short = 'p', value_enum, value_delimiter = ',')]
    protocol: Vec<ProtocolKind>,
    /// Workload: ycsb, smallbank, tpcc, tpce, pieces, or spec:FILE.toml (a declarative
    /// workload; see examples/workloads/)
    #[arg(long, short = 'w', default_value = "ycsb", value_parser = WorkloadArg::parse)]
    workload: WorkloadArg,
    /// Worker threads, 1 to 1024 [default: the number of cores]
    #[arg(long, short = 't')]
    threads: Option<u64>,
    /// Measured seconds per run, above 0 and at most 86400
    #[arg(long, short = 'd', default_value_t = 2.0)]
    duration: f64,
    /// Warm-up seconds before measuring, 0 to 3600
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Instead of a timed window: every worker runs exactly this many transactions (committed
    /// or rolled back by the workload; retries of concurrency aborts are part of each), all
    /// measured, with no warm-up; 1 to 1000000000000. What such a run does depends on the seed
    /// and the schedule, not on the machine's speed
    #[arg(long, conflicts_with_all = ["duration", "warmup"])]
    txns: Option<u64>,
    /// Measured runs per protocol (the median is reported; with several protocols their runs
    /// take turns), 1 to 100 [default: 3 when several protocols are compared, else 1]
    #[arg(long)]
    repeat: Option<u32>,
    /// When a protocol's next run (a repeat, or a sweep's next point on the same data) gets a
    /// freshly loaded database. A database that grows run after run slows each later run, the
    /// faster protocols' most (they inserted more): by default a run follows one that inserted
    /// rows on a fresh load, so that every run starts from the same data
    #[arg(long, value_enum, default_value = "grown")]
    reload: ReloadArg,
    /// Backoff after an abort
    #[arg(long, value_enum, default_value = "protocol")]
    backoff: BackoffArg,
    /// Maximum backoff for --backoff fixed, in microseconds, 0 to 1000000
    #[arg(long, default_value_t = 100.0)]
    backoff_us: f64,
    /// A protocol option, NAME=VALUE for every protocol run, or PROTOCOL:NAME=VALUE for one
    /// (repeatable; `txlab list` shows each protocol's options, their values and defaults)
    #[arg(long = "opt", value_name = "NAME=VALUE")]
    opt: Vec<String>,
    /// Random seed (every worker derives its own)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Do not pin worker threads to cores
    #[arg(long)]
    no_pin: bool,
    /// Do not fault memory in ahead of inserts: workers take the page faults of growing tables
    /// themselves (by default the leader thread faults in what they will need next, as the C++
    /// engines fault their whole memory in before measuring)
    #[arg(long)]
    no_prefault: bool,
    /// Time each phase of the measured transactions and report where their time went: begin
    /// (timestamps, a multi-version protocol's GC), prefetches, reads, writes, commit
    /// (validation and write phase), abort, backoff and the rest (CCBench Fig. 12's latency
    /// breakdown); costs a little throughput (two clock reads per operation). In a build with
    /// `--features shared-writes`, also counts the writes per commit to cache lines other
    /// workers write or read (counters, the log's tail, read locks and read timestamps,
    /// garbage collection, published slots): what limits scaling on many cores
    #[arg(long)]
    breakdown: bool,
    /// Change the mix of transaction types at SECONDS into the measured window (0: from the
    /// start of the warm-up) to the comma-separated TYPES (names as `txlab list` shows them
    /// for the workload; `all` for every type); repeatable, in time order. The protocol is
    /// told first (ic3 re-analyses the templates while running, its §4.5), then the workers
    /// issue only those types, in the workload's proportions. Timed runs of tpcc only
    #[arg(long, value_name = "SECONDS=TYPES")]
    mix_at: Vec<String>,
    /// Report the throughput per interval of this many seconds over the window (0.01 to 60)
    #[arg(long, value_name = "SECONDS")]
    timeline: Option<f64>,
    /// Epoch length in milliseconds (Silo's epochs; GC grace periods), 1 to 10000
    #[arg(long, default_value_t = 40)]
    epoch_ms: u64,
    /// Log every commit (redo log, group commit, checkpoints) into DIR/<protocol>, which must
    /// not hold a log yet; `txlab recover --log-dir DIR/<protocol>` rebuilds the database
    #[arg(long, value_name = "DIR", help_heading = "Durability")]
    log_dir: Option<PathBuf>,
    /// The log manager: per-worker (each worker its own log: Silo, SiloR, Cicada) or central
    /// (one log, space claimed with one atomic add per commit: ERMIA); both commit in groups.
    /// A list (e.g. off,per-worker,central) measures each protocol with each, their runs
    /// taking turns, logging into DIR/<manager>/<protocol> [default: per-worker]
    #[arg(long, value_enum, value_delimiter = ',', help_heading = "Durability")]
    log: Vec<LogChoice>,
    /// When commits are synced: none (written, never fdatasync'ed), group (fdatasync per
    /// group-commit interval), commit (a commit returns after an fdatasync that covers it)
    /// [default: group]
    #[arg(long, value_enum, help_heading = "Durability")]
    sync: Option<crate::durability::log::SyncPolicy>,
    /// Group-commit interval in milliseconds, 1 to 10000
    #[arg(long, default_value_t = 10, help_heading = "Durability")]
    group_commit_ms: u64,
    /// Log buffer in KiB: each worker's ring (per-worker) or the shared buffer (central), a
    /// power of two from 64 to 1048576
    #[arg(long, default_value_t = 16384, value_name = "KIB", help_heading = "Durability")]
    log_buffer_kb: u64,
    /// Seconds between checkpoints during a run, 0 to 86400 (0: only the checkpoint of the
    /// loaded data, which every logged run writes first)
    #[arg(long, default_value_t = 0.0, help_heading = "Durability")]
    checkpoint_interval: f64,
    /// Prove that no acknowledged commit is lost: every transaction also writes its worker's
    /// commit count into a table of its own, and each count, once durable (acknowledged to the
    /// client), is appended to FILE; after a crash, `txlab recover DIR --verify` checks that
    /// the recovered counts reach every acknowledged one (needs --log-dir)
    #[arg(long, value_name = "FILE", help_heading = "Durability")]
    ack_file: Option<PathBuf>,
    /// Crash tests (with --ack-file and --sync commit): once commits are acknowledged, stop
    /// one worker at PHASE of a commit, take a checkpoint while it is held (0.2 s when the
    /// checkpoint waits for it), let the worker go, and once it has acknowledged that commit,
    /// kill the process with SIGKILL as the worker begins its next transaction (see
    /// `storage::inject`)
    #[arg(long, value_enum, value_name = "PHASE", hide = true)]
    crash_at: Option<crate::storage::inject::CommitPhase>,
    /// SmallBank: customers, 2 to 4294967296 (BOHM uses 50 and 100000) [default: 100000].
    /// TPC-E: customers, a multiple of 1000 up to 1000000 (ERMIA loads 5000) [default: 1000]
    #[arg(long, help_heading = "SmallBank workload")]
    customers: Option<u64>,
    /// SmallBank: busy-wait inside every transaction, microseconds, 0 to 1000000 (BOHM uses
    /// 50) [default: 0]
    #[arg(long, help_heading = "SmallBank workload")]
    spin_us: Option<u64>,
    #[command(flatten)]
    tpcc: TpccArgs,
    #[command(flatten)]
    tpce: TpceArgs,
    #[command(flatten)]
    pieces: PiecesArgs,
    /// Record every transaction's reads and writes and check the history after each run
    /// (warm-up included) against the protocol's isolation level; exit status 1 if it shows an
    /// anomaly the protocol does not permit. Costs memory (about 50 bytes per operation) and
    /// some throughput
    #[arg(long, help_heading = "Checking")]
    record_history: bool,
    /// Check every operation against its transaction's piece template, and fill the bytes of
    /// columns a read did not declare with a marker (on in debug builds)
    #[arg(long, help_heading = "Checking")]
    check_templates: bool,
    /// Declare each transaction's access set before it runs and check it at run time
    #[arg(long, help_heading = "Checking")]
    check_access_sets: bool,
    /// Write the results as JSON to this file (created before anything is loaded)
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    json: Option<PathBuf>,
    /// Write the results as CSV, one row per measured run as it ends, to this file
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    csv: Option<PathBuf>,
    #[command(flatten)]
    ycsb: YcsbArgs,
}

/// TPC-C's command-line parameters.
#[derive(clap::Args, Debug, Default, serde::Serialize)]
#[command(next_help_heading = "TPC-C workload")]
struct TpccArgs {
    /// TPC-C: warehouses, 1 to 65535 [default: 1]
    #[arg(long)]
    warehouses: Option<u64>,
    /// TPC-C: percent of new-order, payment, order-status, delivery, stock-level; must sum to
    /// 100 [default: 45,43,4,4,4]. TPC-E: ten percentages, tenths allowed, of broker-volume,
    /// customer-position, market-feed, market-watch, security-detail, trade-lookup,
    /// trade-order, trade-result, trade-status, trade-update [default: 4.9,13,1,18,14,8,10.1,
    /// 10,19,2]
    #[arg(long, value_name = "NO,P,OS,D,SL")]
    mix: Option<String>,
    /// TPC-C: NewOrder and Payment only, 50/50, each as the specification writes it (NewOrder
    /// inserts its order, new-order and order-line rows, Payment its history row). DBx1000's and
    /// Cicada's published TPC-C-NP runs also turn those inserts off: add `--simplify no-inserts`
    /// to run it as they do
    #[arg(long, conflicts_with = "mix")]
    np: bool,
    /// TPC-C: bind each worker to a home warehouse, or pick one at random per transaction
    /// [default: home]
    #[arg(long, value_enum)]
    warehouse_choice: Option<crate::workloads::tpcc::WarehouseChoice>,
    /// TPC-C: departures from the specification, comma separated (each is printed with the
    /// results) [default: none]
    #[arg(long, value_enum, value_delimiter = ',')]
    simplify: Vec<crate::workloads::tpcc::Simplification>,
    /// TPC-C: percent of transactions that are analytic, 1 to 100 (not in the specification:
    /// ERMIA's read-mostly transaction, a stock scan joined with recent orders that inserts one
    /// analytic_history row; the mix shares the rest) [default: none]
    #[arg(long, value_name = "PCT")]
    analytic: Option<u32>,
    /// TPC-C: percent of a warehouse's stock each analytic transaction scans, more than 0 to 100
    /// (ERMIA's Fig. 5 sweeps 1 to 60) [default: 20]
    #[arg(long, value_name = "PCT")]
    analytic_scan: Option<f64>,
}

/// TPC-E's parameters beyond `--customers` and `--mix` (`--workload tpce`).
#[derive(clap::Args, Debug, Default, serde::Serialize)]
#[command(next_help_heading = "TPC-E workload")]
struct TpceArgs {
    /// TPC-E: customers per trade per second of the initial trade history, 1 to 10000 (the
    /// specification's and ERMIA's 500) [default: 500]
    #[arg(long, value_name = "N")]
    scale_factor: Option<u32>,
    /// TPC-E: days of initial trading, 1 to 300 (the specification's 300, ERMIA's 10)
    /// [default: 1]
    #[arg(long, value_name = "DAYS")]
    trade_days: Option<u32>,
    /// TPC-E: percent of transactions that are analytic, 0 to 100 (not in the specification:
    /// ERMIA's TPCE-hybrid, whose read-mostly transaction values a group of customers'
    /// accounts and inserts one analytic_history row; the other types follow ERMIA's mix
    /// unless --mix is given; 0 is TPCE-original, the specification's mix) [default: 0; ERMIA
    /// uses 20]
    #[arg(long, value_name = "PCT")]
    tpce_analytic: Option<u32>,
    /// TPC-E: percent of the customers whose accounts each analytic transaction values, more
    /// than 0 to 100 (ERMIA's contention degree: its Fig. 5 sweeps 1 to 60) [default: 20]
    #[arg(long, value_name = "PCT")]
    analytic_group: Option<f64>,
    /// TPC-E: the read-write types only (Market-Feed, Trade-Order, Trade-Result,
    /// Trade-Update) in the specification's proportions, as IC3's §6.8 runs it
    #[arg(long, conflicts_with_all = ["mix", "tpce_analytic"])]
    tpce_rw: bool,
    /// TPC-E: transactions choose securities among the first N (IC3 Fig. 21's access range in
    /// the security table; fewer is more contended) [default: all 685 per 1000 customers]
    #[arg(long, value_name = "N")]
    security_range: Option<u32>,
    /// TPC-E: run neither Trade-Cleanup (first) nor Data-Maintenance (once a minute) on the
    /// first worker
    #[arg(long)]
    no_maintenance: bool,
}

impl TpceArgs {
    /// The first TPC-E flag given, for refusing it on another workload.
    fn given_flag(&self) -> Option<&'static str> {
        [
            (self.scale_factor.is_some(), "scale-factor"),
            (self.trade_days.is_some(), "trade-days"),
            (self.tpce_analytic.is_some(), "tpce-analytic"),
            (self.analytic_group.is_some(), "analytic-group"),
            (self.tpce_rw, "tpce-rw"),
            (self.security_range.is_some(), "security-range"),
            (self.no_maintenance, "no-maintenance"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

impl RunArgs {
    /// TPC-E's validated configuration.
    fn tpce_config(&self, seed: u64) -> Result<crate::workloads::tpce::TpceConfig, String> {
        use crate::workloads::tpce::TpceConfig;
        let customers = self.customers.unwrap_or(1_000);
        let mut cfg = TpceConfig::new(u32::try_from(customers).unwrap_or(0));
        if cfg.customers == 0 && customers != 0 {
            return Err(format!(
                "--customers {customers} is not a multiple of 1000 from 1000 to 1000000 (TPC-E \
                 loads customers in units of 1000)"
            ));
        }
        if let Some(m) = &self.tpcc.mix {
            cfg.mix = TpceConfig::parse_mix(m)?;
        }
        use crate::workloads::tpce::{AnalyticConfig, ERMIA_MIX, READ_WRITE_MIX};
        cfg.analytic = match (self.tpce.tpce_analytic, self.tpce.analytic_group) {
            // 0: TPCE-original, as a sweep over the share writes it.
            (Some(0), _) => None,
            (Some(share), group) => {
                if self.tpcc.mix.is_none() {
                    cfg.mix = ERMIA_MIX;
                }
                Some(AnalyticConfig {
                    share,
                    group: group.unwrap_or(AnalyticConfig::DEFAULT_GROUP),
                })
            }
            (None, Some(_)) => return Err("--analytic-group needs --tpce-analytic".into()),
            (None, None) => None,
        };
        if self.tpce.tpce_rw {
            cfg.mix = READ_WRITE_MIX;
        }
        cfg.security_range = self.tpce.security_range;
        cfg.maintenance = !self.tpce.no_maintenance;
        cfg.scale_factor = self.tpce.scale_factor.unwrap_or(cfg.scale_factor);
        cfg.trade_days = self.tpce.trade_days.unwrap_or(cfg.trade_days);
        cfg.seed = seed;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// The parameters of IC3's micro-benchmark (`--workload pieces`).
#[derive(clap::Args, Debug, Default, serde::Serialize)]
#[command(next_help_heading = "IC3 micro-benchmark (pieces workload)")]
struct PiecesArgs {
    /// Pieces: pieces per transaction, each updating 4 rows of its own table, 1 to 64 (IC3
    /// §6.2 uses 2, 10 and 64) [default: 10]
    #[arg(long)]
    pieces: Option<u32>,
    /// Pieces: rows per table, 4 to 4294967296 (IC3 loads 1 M) [default: 1000000]
    #[arg(long, value_name = "ROWS")]
    table_rows: Option<u64>,
    /// Pieces: keys each piece's first update draws from, 1 to --table-rows: its contention
    /// rate is 1/SCOPE (IC3 §6.2 sweeps 10 to 1 M) [default: 100]
    #[arg(long)]
    scope: Option<u64>,
    /// Pieces: percent of transactions that roll back on their own after a random piece, 0 to
    /// 100 (IC3 §6.7: up to 10) [default: 0]
    #[arg(long, value_name = "PCT")]
    user_abort: Option<f64>,
}

impl PiecesArgs {
    /// The first flag of the workload given, for refusing it on another workload.
    fn given_flag(&self) -> Option<&'static str> {
        [
            (self.pieces.is_some(), "pieces"),
            (self.table_rows.is_some(), "table-rows"),
            (self.scope.is_some(), "scope"),
            (self.user_abort.is_some(), "user-abort"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// The validated configuration.
    fn resolve(&self) -> Result<crate::workloads::pieces::PiecesConfig, String> {
        let d = crate::workloads::pieces::PiecesConfig::default();
        let cfg = crate::workloads::pieces::PiecesConfig {
            pieces: self.pieces.unwrap_or(d.pieces),
            rows: self.table_rows.unwrap_or(d.rows),
            scope: self.scope.unwrap_or(d.scope),
            user_abort: self.user_abort.unwrap_or(d.user_abort),
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

impl TpccArgs {
    /// The first TPC-C flag given, for refusing it on another workload.
    fn given_flag(&self) -> Option<&'static str> {
        [
            (self.warehouses.is_some(), "warehouses"),
            (self.mix.is_some(), "mix"),
            (self.np, "np"),
            (self.warehouse_choice.is_some(), "warehouse-choice"),
            (!self.simplify.is_empty(), "simplify"),
            (self.analytic.is_some(), "analytic"),
            (self.analytic_scan.is_some(), "analytic-scan"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// The validated configuration.
    fn resolve(&self, seed: u64) -> Result<crate::workloads::tpcc::TpccConfig, String> {
        use crate::workloads::tpcc::{TpccConfig, NP_MIX};
        let warehouses = self.warehouses.unwrap_or(1);
        let mut cfg = TpccConfig::new(u32::try_from(warehouses).unwrap_or(0));
        if cfg.warehouses == 0 && warehouses != 0 {
            return Err(format!("--warehouses {warehouses} is out of range (1 to 65535)"));
        }
        if let Some(m) = &self.mix {
            cfg.mix = TpccConfig::parse_mix(m)?;
        }
        if self.np {
            cfg.mix = NP_MIX;
        }
        if let Some(c) = self.warehouse_choice {
            cfg.warehouse_choice = c;
        }
        cfg.simplifications = self.simplify.clone();
        cfg.simplifications.sort();
        cfg.simplifications.dedup();
        cfg.seed = seed;
        cfg.analytic = match (self.analytic, self.analytic_scan) {
            (Some(share), scan) => Some(crate::workloads::tpcc::AnalyticConfig {
                share,
                scan: scan.unwrap_or(crate::workloads::tpcc::AnalyticConfig::DEFAULT_SCAN),
            }),
            (None, Some(_)) => return Err("--analytic-scan needs --analytic".into()),
            (None, None) => None,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Parses `--opt` flags and checks each against the protocols in `protocols` it applies to:
/// `NAME=VALUE` applies to every one of them, `PROTOCOL:NAME=VALUE` to that one only (kept as
/// the pair `("PROTOCOL:NAME", VALUE)`; [`crate::engine::options::pairs_for`] selects a
/// protocol's pairs).
fn protocol_options(
    opts: &[String],
    protocols: &[ProtocolKind],
) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for o in opts {
        let (key, value) =
            o.split_once('=').ok_or_else(|| format!("--opt {o}: expected NAME=VALUE"))?;
        let (scope, name) = match key.split_once(':') {
            Some((p, n)) => (Some(p.trim()), n.trim()),
            None => (None, key.trim()),
        };
        let key = scope.map_or_else(|| name.to_string(), |p| format!("{p}:{name}"));
        if pairs.iter().any(|(k, _)| *k == key) {
            return Err(format!("--opt {key} is given twice"));
        }
        let has = |k: &ProtocolKind| k.option_specs().iter().any(|s| s.name == name);
        if let Some(p) = scope {
            let Some(kind) = ProtocolKind::ALL.iter().find(|k| k.name() == p) else {
                return Err(format!("--opt {key}: {p} is not a protocol (txlab list shows them)"));
            };
            if !protocols.contains(kind) {
                return Err(format!(
                    "--opt {key}: {p} is not among the protocols run (choose protocols with -p)"
                ));
            }
            if !has(kind) {
                return Err(format!(
                    "--opt {key}: {p} has no option {name} (txlab list shows each protocol's)"
                ));
            }
            pairs.push((key, value.trim().to_string()));
            continue;
        }
        let takers: Vec<&str> =
            ProtocolKind::ALL.iter().filter(|k| has(k)).map(|k| k.name()).collect();
        if takers.is_empty() {
            return Err(format!(
                "--opt {name}: no protocol has this option (txlab list shows each protocol's)"
            ));
        }
        let without: Vec<&str> = protocols.iter().filter(|k| !has(k)).map(|k| k.name()).collect();
        if !without.is_empty() {
            // A chosen protocol that takes it can be named instead.
            let hint = match protocols.iter().find(|k| has(k)) {
                Some(k) => format!(", or name one: --opt {}:{name}={}", k.name(), value.trim()),
                None => String::new(),
            };
            return Err(format!(
                "--opt {name} applies to {}, not to {} (choose protocols with -p{hint})",
                and_list(&takers),
                and_list(&without),
            ));
        }
        pairs.push((key, value.trim().to_string()));
    }
    for p in protocols {
        p.check_options(&crate::engine::options::pairs_for(&pairs, p.name()))?;
    }
    Ok(pairs)
}

/// `a`, `a and b`, `a, b and c`.
/// `--workload`: a built-in workload, or `spec:FILE` (read and checked as the flag is parsed,
/// so that a bad file is a usage error naming its line and column).
#[derive(Clone, Debug)]
pub(crate) struct WorkloadArg {
    kind: WorkloadKind,
    /// For `spec:FILE`: the file as given, and its spec.
    spec: Option<std::sync::Arc<(String, crate::workloads::spec::Spec)>>,
}

impl WorkloadArg {
    fn parse(s: &str) -> Result<WorkloadArg, String> {
        if let Some(path) = s.strip_prefix("spec:") {
            let spec = crate::workloads::spec::load_file(path)?;
            return Ok(WorkloadArg {
                kind: WorkloadKind::Spec,
                spec: Some(std::sync::Arc::new((path.to_string(), spec))),
            });
        }
        match WorkloadKind::from_str(s, false) {
            Ok(kind) => Ok(WorkloadArg { kind, spec: None }),
            Err(_) => Err("unknown workload (one of ycsb, smallbank, tpcc, tpce, pieces, \
                           spec:FILE.toml)"
                .to_string()),
        }
    }

    /// The name in results: the built-in workload's, or `spec:FILE`.
    fn name(&self) -> String {
        match &self.spec {
            Some(f) => format!("spec:{}", f.0),
            None => self.kind.name().to_string(),
        }
    }
}

impl serde::Serialize for WorkloadArg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Turns a clap error into one line naming the flag and the valid values.
fn usage_error(e: &clap::Error) -> String {
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.split_whitespace().next().unwrap_or(s).to_string(),
        _ => String::new(),
    };
    let value = match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    // clap's guess at what a typo meant, if any: "did you mean '--protocol'? ".
    let guess =
        [ContextKind::SuggestedArg, ContextKind::SuggestedSubcommand, ContextKind::SuggestedValue]
            .into_iter()
            .find_map(|k| match e.get(k) {
                Some(ContextValue::String(s)) => Some(s.clone()),
                Some(ContextValue::Strings(v)) if !v.is_empty() => Some(v.join("' or '")),
                _ => None,
            })
            .map_or(String::new(), |s| format!("did you mean '{s}'? "));
    match e.kind() {
        ErrorKind::InvalidValue => {
            let valid = match e.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(v)) => {
                    format!("{guess}expected one of: {}", v.join(", "))
                }
                _ => format!("{guess}see --help"),
            };
            if value.is_empty() {
                format!("{arg} needs a value ({valid})")
            } else {
                format!("{arg} '{value}' is not valid ({valid})")
            }
        }
        ErrorKind::ValueValidation => {
            let why = source_line(e);
            // A number that does not parse: say what is expected, with the flag's range.
            let kind =
                if ["digit", "integer", "too large", "too small"].iter().any(|w| why.contains(w)) {
                    Some("a whole number")
                } else if why.contains("float") {
                    Some("a number")
                } else {
                    None
                };
            match (kind, flag_range(&arg)) {
                (Some(kind), Some(range)) => {
                    format!("{arg} '{value}' is not valid: expected {kind}, {range}")
                }
                (Some(kind), None) => format!("{arg} '{value}' is not valid: expected {kind}"),
                (None, _) => format!("{arg} '{value}' is not valid: {why}"),
            }
        }
        ErrorKind::MissingRequiredArgument => match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::Strings(v)) => {
                let names: Vec<&str> =
                    v.iter().map(|a| a.split_whitespace().next().unwrap_or(a)).collect();
                format!("{} is required (see txlab --help)", and_list(&names))
            }
            _ => "a required argument is missing (see txlab --help)".into(),
        },
        _ => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            format!("{first} ({guess}see txlab --help)")
        }
    }
}

/// The range of values flag `arg` (`--threads`) accepts, as its help states it ("1 to 1024",
/// "above 0 and at most 86400"), from the first subcommand that has the flag.
fn flag_range(arg: &str) -> Option<String> {
    use clap::CommandFactory;
    let long = arg.strip_prefix("--")?;
    let cmd = Cli::command();
    let help = cmd
        .get_subcommands()
        .flat_map(|c| c.get_arguments())
        .find(|a| a.get_long() == Some(long))?
        .get_help()?
        .to_string();
    range_in(&help)
}

/// The first range in a help text: "above X and at most Y", or "X to Y" where X is a number
/// (a parenthesis between them is skipped: "0 (uniform) to 0.999").
fn range_in(help: &str) -> Option<String> {
    let number = |w: &str| !w.is_empty() && w.trim_start_matches('-').parse::<f64>().is_ok();
    if let Some(at) = help.find("above ") {
        let rest = &help[at..];
        let end = rest.find([',', ';', '[', '(']).unwrap_or(rest.len());
        let phrase = rest[..end].trim();
        if phrase.contains("at most") {
            return Some(phrase.to_string());
        }
    }
    let mut from = 0;
    while let Some(at) = help[from..].find(" to ").map(|i| i + from) {
        from = at + 4;
        let mut left = help[..at].trim_end();
        if left.ends_with(')') {
            left = left[..left.rfind('(')?].trim_end();
        }
        let lo = left.rsplit([' ', '(']).next().unwrap_or("");
        let hi = help[at + 4..].split([' ', ',', ';', ')', '[']).next().unwrap_or("");
        let hi = hi.trim_end_matches(['.', ':']);
        if number(lo) && (number(hi) || hi.starts_with("--")) {
            let power = help[..at].ends_with(&format!("a power of two from {lo}"));
            let prefix = if power { "a power of two from " } else { "" };
            return Some(format!("{prefix}{lo} to {hi}"));
        }
    }
    None
}

fn source_line(e: &clap::Error) -> String {
    use std::error::Error as _;
    e.source().map(|s| s.to_string()).unwrap_or_else(|| "see --help".into())
}

/// Checks a command line (`["run", "-p", "silo"]`, without the program's name) as txlab would
/// take it, without running it: the one-line error it would print, if any. `run`'s flags are
/// also checked together, as a run would before loading (nothing is loaded).
pub fn validate(args: &[&str]) -> Result<(), String> {
    let argv = std::iter::once("txlab").chain(args.iter().copied());
    let cli = Cli::try_parse_from(argv).map_err(|e| usage_error(&e))?;
    if let Command::Run(mut run) = cli.command {
        // Planning opens the acknowledgement file; checking must leave no file behind.
        if run.ack_file.is_some() && run.log_dir.is_none() {
            return Err("--ack-file needs --log-dir".into());
        }
        run.ack_file = None;
        run.crash_at = None;
        run::Plan::new(&run).map_err(|f| match f {
            run::Failure::Usage(m) | run::Failure::Run(m) | run::Failure::Interrupted(m) => m,
        })?;
    }
    Ok(())
}

/// Runs the command line; returns the exit status.
pub fn main() -> i32 {
    main_with(std::env::args_os())
}

/// The `run` subcommand's definition (its flags, for `sweep --vary`).
fn run_command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command().find_subcommand("run").expect("run is a subcommand").clone()
}

/// Parses `tokens` as the flags of `txlab run`; errors are one line.
fn parse_run(tokens: &[String]) -> Result<(RunArgs, clap::ArgMatches), String> {
    use clap::FromArgMatches;
    let argv = ["txlab".to_string(), "run".to_string()].into_iter().chain(tokens.iter().cloned());
    use clap::CommandFactory;
    let matches = Cli::command().try_get_matches_from(argv).map_err(|e| usage_error(&e))?;
    let run = matches.subcommand_matches("run").expect("parsed as run").clone();
    let args = RunArgs::from_arg_matches(&run).map_err(|e| usage_error(&e))?;
    Ok((args, run))
}

/// Validates a sweep of `run` flags over `vary` (`NAME=V1,V2,...` each) without running it:
/// every point must be a valid `run` command line.
#[cfg(test)]
pub(crate) fn validate_sweep(flags: &[String], vary: &[String]) -> Result<(), String> {
    match sweep::Sweep::new(flags.to_vec(), vary) {
        Ok(_) => Ok(()),
        Err(run::Failure::Usage(m) | run::Failure::Run(m) | run::Failure::Interrupted(m)) => Err(m),
    }
}

/// Runs `args` as a command line; returns the exit status.
pub fn main_with<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let raw: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&raw) {
        Ok(c) => c,
        Err(e) => {
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return 0;
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
                return EXIT_USAGE;
            }
            eprintln!("error: {}", usage_error(&e));
            return EXIT_USAGE;
        }
    };
    match cli.command {
        Command::Analyze(args) => exit_status(analyze::analyze(&args).map(|()| 0)),
        Command::List => {
            print!("{}", list());
            0
        }
        Command::Check(args) => {
            exit_status(check::check(&args).map(|passed| if passed { 0 } else { EXIT_FAILURE }))
        }
        Command::Run(args) => {
            let tokens: Vec<String> =
                raw.iter().skip(2).map(|a| a.to_string_lossy().into_owned()).collect();
            exit_status(run::run(&args, &tokens).map(|()| 0))
        }
        Command::Sweep(args) => {
            // The sweep's own command line after `sweep`, to rebuild each point's `run` flags.
            let tokens: Vec<String> =
                raw.iter().skip(2).map(|a| a.to_string_lossy().into_owned()).collect();
            exit_status(sweep::sweep(&args, &tokens).map(|()| 0))
        }
        Command::Advise(args) => {
            let tokens: Vec<String> =
                raw.iter().skip(2).map(|a| a.to_string_lossy().into_owned()).collect();
            exit_status(advise::advise(&args, &tokens))
        }
        Command::Recover(args) => exit_status(recover::run(&args)),
        Command::Plot(args) => exit_status(experiments::plot(&args).map(|()| 0)),
        Command::Report(args) => exit_status(experiments::report(&args).map(|()| 0)),
        Command::Reproduce(args) => exit_status(experiments::reproduce(&args)),
        Command::Merge(args) => exit_status(experiments::merge(&args).map(|()| 0)),
        Command::Compare(args) => exit_status(experiments::compare(&args).map(|()| 0)),
    }
}

/// The exit status of a command's outcome; failures are one line on stderr.
fn exit_status(outcome: Result<i32, run::Failure>) -> i32 {
    match outcome {
        Ok(code) => code,
        Err(run::Failure::Usage(m)) => {
            eprintln!("error: {m}");
            EXIT_USAGE
        }
        Err(run::Failure::Run(m)) => {
            eprintln!("error: {m}");
            EXIT_FAILURE
        }
        Err(run::Failure::Interrupted(m)) => {
            eprintln!("{m}");
            EXIT_INTERRUPTED
        }
    }
}

fn list() -> String {
    use std::fmt::Write as _;
    let mut s = String::from("Protocols (--protocol):\n");
    for p in ProtocolKind::ALL {
        let c = p.caps();
        let _ = writeln!(s, "  {:<13} {}", p.name(), p.description());
        let _ = writeln!(
            s,
            "  {:<13} isolation: {}; reads: {}{}; inserts/deletes: {}; range scans: {}; needs \
             access sets: {}",
            "",
            c.isolation.name(),
            c.reads.describe(),
            if c.snapshot_reads { ", of the begin's snapshot" } else { "" },
            yes(c.inserts),
            yes(c.scans),
            yes(c.needs_access_set)
        );
        for o in p.option_specs() {
            let _ = writeln!(
                s,
                "  {:<13} --opt {}={} (default {}): {}",
                "", o.name, o.values, o.default, o.help
            );
        }
    }
    s += "\nRun options (all protocols):\n";
    s +=
        "  --backoff none|fixed|adaptive|protocol  retry policy after an abort (adaptive: Cicada\n";
    s += "                                  §3.9; protocol, the default: cicada's adaptive, else none)\n";
    s += "  --backoff-us US                 maximum random backoff for --backoff fixed\n";
    s += "  --epoch-ms MS                   epoch length (Silo commit epochs, GC grace periods)\n";
    s += "\nWorkloads (--workload):\n";
    s += "  ycsb          YCSB with CCBench's parameters: --records --ops --read-ratio --theta\n";
    s += "                --payload --rmw --threads, plus --insert-ratio --scan-ratio --max-scan\n";
    s += "                --distribution --index --long-txn-delay-us\n";
    s += "  smallbank     SmallBank (H-Store mix; BOHM §4.3): --customers --spin-us; checks that\n";
    s += "                money changes only by committed deposits and checks\n";
    s += "  tpcc          TPC-C 5.11, full mix: --warehouses --mix --np --warehouse-choice\n";
    s += "                --simplify; checks consistency conditions 1-10 and 12 after each run;\n";
    s += "                --analytic PCT adds ERMIA's read-mostly stock scan (--analytic-scan)\n";
    s += "  tpce          TPC-E 1.14, the ten transactions and the standard mix: --customers\n";
    s += "                --scale-factor --trade-days --mix; checks holdings, settlements,\n";
    s += "                balances, statuses and brokers after each run; --tpce-analytic PCT\n";
    s += "                (--analytic-group) adds ERMIA's TPCE-hybrid, --tpce-rw and\n";
    s += "                --security-range run IC3's read-write TPC-E\n";
    s += "  pieces        IC3's micro-benchmark (§6.2): --pieces --table-rows --scope\n";
    s += "                --user-abort; checks that every committed update, and no other, is\n";
    s += "                counted\n";
    s += "  spec:FILE     a declarative workload: tables and transaction types from a TOML file\n";
    s += "                (examples/workloads/); checks updated and incremented totals when the\n";
    s += "                spec allows it\n";
    s += "\nYCSB presets (--preset, theta 0.99 unless --theta is given):\n";
    for p in Preset::value_variants() {
        let name = p.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
        let _ = writeln!(s, "  {:<13} {}", name, p.describe());
    }
    s
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
