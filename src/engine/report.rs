//! Results: a readable table, JSON and CSV, carrying the configuration, the txlab version and
//! git revision, and the machine, so that any result can be reproduced.

use super::stats::{Phase, WorkerStats};
use crate::error::AbortReason;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// This binary's build kind, recorded with every run: `release` or `debug` (debug assertions
/// on), `+shared-writes` when shared-write counting is compiled in.
pub const fn build_name() -> &'static str {
    match (cfg!(debug_assertions), cfg!(feature = "shared-writes")) {
        (false, false) => "release",
        (false, true) => "release+shared-writes",
        (true, false) => "debug",
        (true, true) => "debug+shared-writes",
    }
}

/// Facts about the machine a run was measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// Total memory in GiB.
    pub memory_gib: f64,
    /// Operating system and architecture.
    pub os: String,
    /// Kernel release.
    pub kernel: String,
}

impl Machine {
    /// Reads the facts of the current machine.
    pub fn current() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|k| k.parse::<f64>().ok())
            })
            .map(|kib| (kib / 1024.0 / 1024.0 * 10.0).round() / 10.0)
            .unwrap_or(0.0);
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            memory_gib,
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
        }
    }
}

/// Per-transaction-type results.
#[derive(Clone, Debug, Serialize)]
pub struct TypeReport {
    /// Type name.
    pub name: String,
    /// Commits in the window.
    pub commits: u64,
    /// Commits per second.
    pub throughput: f64,
    /// User aborts in the window.
    pub user_aborts: u64,
    /// Concurrency-control aborts in the window.
    pub aborts: u64,
    /// This type's share of all commits (the measured mix), 0 to 1.
    pub share: f64,
    /// This type's latency.
    pub latency: Latency,
}

/// The workload's headline figure: one transaction type's commit rate (TPC-C: NewOrder).
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    /// Transaction type name.
    pub name: String,
    /// Its commits per second.
    pub throughput: f64,
    /// Its commits per minute (TPC-C's tpmC unit; not an audited tpmC).
    pub per_minute: f64,
}

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

impl Latency {
    /// The percentiles of a histogram of nanoseconds.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// The result of one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// txlab version.
    pub txlab_version: String,
    /// Git revision of the build (with `-dirty` when the tree had uncommitted changes).
    pub git_revision: String,
    /// Whether the build's tree had uncommitted changes.
    pub git_dirty: bool,
    /// The compiler that built txlab.
    pub rustc: String,
    /// The build's kind: `release` (optimised, debug assertions off) or `debug`, with the
    /// cargo features that change what runs (`release+shared-writes`). See [`build_name`].
    pub build: String,
    /// When the run ended (RFC 3339, UTC).
    pub timestamp: String,
    /// When the run ended, in seconds since the Unix epoch.
    pub unix_time: f64,
    /// The machine.
    pub machine: Machine,
    /// Protocol name.
    pub protocol: String,
    /// The protocol's options, by their `--opt` names (an empty object when it has none).
    pub options: serde_json::Value,
    /// Workload name.
    pub workload: String,
    /// Worker threads.
    pub threads: usize,
    /// Which of a configuration's repeated runs this is (0 for the first).
    pub repeat: u32,
    /// Measured seconds.
    pub duration_s: f64,
    /// The window asked for, in seconds (timed runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_s: Option<f64>,
    /// Why this run's figures may mislead: more threads than cores, a measured window far from
    /// the requested one. Empty when nothing looked wrong.
    pub warnings: Vec<String>,
    /// Committed transactions in the window.
    pub commits: u64,
    /// Committed transactions per second (all types).
    pub throughput: f64,
    /// CC aborts / (CC aborts + finished transactions).
    pub abort_ratio: f64,
    /// User aborts in the window (final outcomes, not retried).
    pub user_aborts: u64,
    /// Aborts per reason (user aborts included under "user").
    pub aborts: BTreeMap<String, u64>,
    /// Per transaction type.
    pub per_type: Vec<TypeReport>,
    /// Latency of finished transactions including retries and backoff.
    pub latency: Latency,
    /// Share of worker time spent in backoff.
    pub backoff_share: f64,
    /// The longest stretch of the window in which no transaction committed, in seconds (seen
    /// by the leader thread every few milliseconds).
    pub longest_stall_s: f64,
    /// The full configuration: run, workload and protocol settings.
    pub config: serde_json::Value,
    /// The workload's invariant, when it did not hold (reported for protocols that do not promise
    /// serializability; a serializable protocol breaking it fails the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invariant_violation: Option<String>,
    /// The serializability check of the run's recorded history (`--record-history`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_check: Option<HistoryCheck>,
    /// The workload's headline figure, if it has one (TPC-C: new orders per second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headline: Option<Headline>,
    /// Departures from the workload's specification in use (printed in the header).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Logging, when the database logged: then `throughput` and `commits` count durably
    /// committed transactions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durability: Option<DurabilityReport>,
    /// The versions a multi-version protocol keeps, at the end of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<VersionReport>,
    /// Where the transactions' time went, when the run timed its phases (`--breakdown`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Breakdown>,
    /// Throughput per interval of the window, when the run sampled it (`--timeline`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<crate::engine::stats::TimelinePoint>,
}

/// Where the measured transactions' time went (`RunConfig::breakdown`), in microseconds per
/// committed transaction: every attempt's time counts, so the time of aborted attempts is
/// charged to the commits that followed them (CCBench Fig. 12-13 break latency down so).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Breakdown {
    /// In `Worker::begin`: timestamps, and the maintenance a protocol does there (Cicada's and
    /// the multi-version protocols' garbage collection).
    pub begin_us: f64,
    /// In prefetching: the index lookups and cache-line prefetches issued ahead of the
    /// operations (which then find their lines closer).
    pub prefetch_us: f64,
    /// In reads and scans.
    pub read_us: f64,
    /// In writes, updates (read-modify-writes), inserts and deletes.
    pub write_us: f64,
    /// In `Worker::commit`: validation, the write phase and logging, committed or not.
    pub commit_us: f64,
    /// In rolling aborted attempts back.
    pub abort_us: f64,
    /// In backoff after aborts.
    pub backoff_us: f64,
    /// The rest: generating transactions, the procedures' own code, the driver, and timing
    /// itself.
    pub other_us: f64,
    /// All of it: the workers' measured time over the commits.
    pub total_us: f64,
    /// Writes to cache lines that other workers write or poll, per committed transaction, in
    /// a build that counts them (`--features shared-writes`; see
    /// [`crate::util::shared_writes`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_writes: Option<SharedWrites>,
}

/// Writes per committed transaction to lines that other workers also write (`contended`) or
/// read on their hot path (`published`), and per site.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SharedWrites {
    /// To lines other workers write too.
    pub contended: f64,
    /// To this worker's own lines that others read.
    pub published: f64,
    /// Per site with any, by its name ([`crate::util::shared_writes::Site::name`]).
    pub sites: std::collections::BTreeMap<&'static str, f64>,
}

impl SharedWrites {
    /// The counts `n` (in `Site` order) over `commits` committed transactions.
    pub fn of(n: &[u64], commits: u64) -> Self {
        use crate::util::shared_writes::Site;
        let mut s = SharedWrites::default();
        for (site, &count) in Site::ALL.iter().zip(n) {
            let per = count as f64 / commits.max(1) as f64;
            if count > 0 {
                s.sites.insert(site.name(), per);
            }
            if site.contended() {
                s.contended += per;
            } else {
                s.published += per;
            }
        }
        s
    }
}

impl Breakdown {
    /// The breakdown of merged statistics (`None` without commits).
    pub fn of(stats: &WorkerStats) -> Option<Self> {
        let commits = stats.total_commits();
        if commits == 0 {
            return None;
        }
        let per = |ns: u64| ns as f64 / commits as f64 / 1e3;
        let phase = |p: Phase| per(stats.phase_ns[p as usize]);
        let total = per(stats.window_ns);
        let mut b = Breakdown {
            begin_us: phase(Phase::Begin),
            prefetch_us: phase(Phase::Prefetch),
            read_us: phase(Phase::Read),
            write_us: phase(Phase::Write),
            commit_us: phase(Phase::Commit),
            abort_us: phase(Phase::Abort),
            backoff_us: per(stats.backoff_ns),
            other_us: 0.0,
            total_us: total,
            shared_writes: crate::util::shared_writes::COUNTING
                .then(|| SharedWrites::of(&stats.shared_writes, commits)),
        };
        let timed = b.begin_us
            + b.prefetch_us
            + b.read_us
            + b.write_us
            + b.commit_us
            + b.abort_us
            + b.backoff_us;
        b.other_us = (total - timed).max(0.0);
        Some(b)
    }

    /// The parts in report order, with their names.
    pub fn parts(&self) -> [(&'static str, f64); 8] {
        [
            ("begin", self.begin_us),
            ("prefetch", self.prefetch_us),
            ("read", self.read_us),
            ("write", self.write_us),
            ("commit", self.commit_us),
            ("abort", self.abort_us),
            ("backoff", self.backoff_us),
            ("other", self.other_us),
        ]
    }
}

/// What a multi-version protocol's versions hold at the end of a run, and how far its garbage
/// collection lagged during it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct VersionReport {
    /// Versions on the rows' chains (the rows' current images included).
    pub alive: u64,
    /// Their bytes (header, protocol fields and payload).
    pub alive_bytes: u64,
    /// Versions cut from memory so far: alive, pooled for reuse or waiting for their grace
    /// periods (the version memory's footprint).
    pub carved: u64,
    /// Their bytes.
    pub carved_bytes: u64,
    /// Rows walked.
    pub rows: u64,
    /// Versions beyond one per row, as a fraction of the rows (Cicada §4.6's space overhead:
    /// the version count over the record count, minus one); set by [`VersionReport::finish`].
    pub space_overhead: f64,
    /// The longest chain.
    pub longest_chain: u64,
    /// From the begin of a transaction that superseded versions until the GC cut them off
    /// their chain, over the versions superseded and cut during the run (warm-up included;
    /// not those a previous run left queued): the mean and the largest, in microseconds (they
    /// are freed for reuse two storage-epoch grace periods later).
    pub gc_lag_mean_us: f64,
    /// See `gc_lag_mean_us`.
    pub gc_lag_max_us: f64,
    /// Declared read-only transactions that ran at a safe snapshot without certification
    /// (ERMIA's SSN and SSI), and those that took a fresh snapshot instead.
    pub read_only_safe: u64,
    /// See `read_only_safe`.
    pub read_only_fresh: u64,
    /// How old the safe snapshots were at begin: from when their state was the newest (the
    /// refresh that set the watermark, or the begin of the transaction whose snapshot it is) to
    /// the begin, in microseconds, mean and largest (Cicada §4 reports this staleness); `None`
    /// where timestamps do not tell time (Cicada's central counter).
    pub read_only_staleness_mean_us: Option<f64>,
    /// See `read_only_staleness_mean_us`.
    pub read_only_staleness_max_us: Option<f64>,
    /// Versions a read copied into its record's inlined version and committed (Cicada's
    /// promotion, §3.3).
    pub promoted: u64,
    /// Promotions given up at validation (a concurrent write), their transactions unharmed.
    pub promotions_dropped: u64,
}

impl VersionReport {
    /// Derives what the counts imply ([`VersionReport::space_overhead`]); a protocol's
    /// `versions` calls it last.
    pub fn finish(mut self) -> Self {
        self.space_overhead =
            if self.rows == 0 { 0.0 } else { self.alive as f64 / self.rows as f64 - 1.0 };
        self
    }
}

/// What logging cost and did during a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DurabilityReport {
    /// The log manager (`per-worker` or `central`).
    pub log: String,
    /// The sync policy.
    pub sync: String,
    /// The group-commit interval, seconds.
    pub group_commit_s: f64,
    /// Seconds between checkpoints (0: only the one after loading).
    pub checkpoint_interval_s: f64,
    /// Commits of the window that became durable.
    pub durable_commits: u64,
    /// Commits of the window that had not become durable (the log failed).
    pub not_durable: u64,
    /// From a transaction's first attempt until its worker saw it durable.
    pub durable_latency: Latency,
    /// Log bytes written per second of the run (warm-up included).
    pub log_mb_per_s: f64,
    /// `fdatasync`/`fsync` calls per second.
    pub syncs_per_s: f64,
    /// Groups made durable per second.
    pub groups_per_s: f64,
    /// Checkpoints written during the run.
    pub checkpoints: u64,
}

/// The result of checking a run's recorded history (warm-up included).
#[derive(Clone, Debug, Serialize)]
pub struct HistoryCheck {
    /// Recorded transactions (attempts).
    pub txns: usize,
    /// Committed ones.
    pub committed: usize,
    /// Every anomaly class seen, with counts and examples.
    pub anomalies: Vec<crate::history::check::Anomaly>,
    /// Whether every class seen is permitted by the protocol's isolation level.
    pub permitted: bool,
}

/// The CSV columns of a [`VersionReport`] (`versions.NAME`; empty for a protocol without
/// versions), in its fields' order.
const VERSION_COLUMNS: [&str; 14] = [
    "alive",
    "alive_bytes",
    "space_overhead",
    "carved",
    "carved_bytes",
    "longest_chain",
    "gc_lag_mean_us",
    "gc_lag_max_us",
    "read_only_safe",
    "read_only_fresh",
    "read_only_staleness_mean_us",
    "read_only_staleness_max_us",
    "promoted",
    "promotions_dropped",
];

/// The breakdown's CSV columns (after `breakdown.`), in [`Breakdown::parts`] order and the total.
const BREAKDOWN_COLUMNS: &[&str] = &[
    "begin_us",
    "prefetch_us",
    "read_us",
    "write_us",
    "commit_us",
    "abort_us",
    "backoff_us",
    "other_us",
    "total_us",
    "shared_contended",
    "shared_published",
];

impl RunReport {
    /// Builds the report from merged statistics.
    pub fn new(
        protocol: &str,
        workload: &str,
        type_names: &[&str],
        stats: &WorkerStats,
        threads: usize,
        duration_s: f64,
        config: serde_json::Value,
    ) -> Self {
        let h = &stats.total_latency();
        let commits = stats.total_commits();
        RunReport {
            txlab_version: env!("CARGO_PKG_VERSION").into(),
            git_revision: env!("TXLAB_GIT_REVISION").into(),
            git_dirty: env!("TXLAB_GIT_DIRTY") == "true",
            rustc: env!("TXLAB_RUSTC").into(),
            build: build_name().into(),
            timestamp: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            machine: Machine::current(),
            protocol: protocol.into(),
            options: serde_json::json!({}),
            workload: workload.into(),
            threads,
            repeat: 0,
            duration_s,
            requested_s: None,
            warnings: Vec::new(),
            commits,
            throughput: commits as f64 / duration_s,
            abort_ratio: stats.abort_ratio(),
            user_aborts: stats.total_user_aborts(),
            aborts: AbortReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), stats.aborts[*r as usize]))
                .filter(|(_, n)| *n > 0)
                .collect(),
            per_type: type_names
                .iter()
                .enumerate()
                .map(|(i, n)| TypeReport {
                    name: n.to_string(),
                    commits: stats.commits[i],
                    throughput: stats.commits[i] as f64 / duration_s,
                    user_aborts: stats.user_aborts[i],
                    aborts: stats.aborts_by_type[i],
                    share: if commits == 0 {
                        0.0
                    } else {
                        stats.commits[i] as f64 / commits as f64
                    },
                    latency: Latency::of(&stats.latency[i]),
                })
                .collect(),
            latency: Latency::of(h),
            backoff_share: stats.backoff_ns as f64 / (duration_s * 1e9 * threads as f64),
            longest_stall_s: stats.stall_ns as f64 / 1e9,
            config,
            invariant_violation: None,
            history_check: None,
            headline: None,
            notes: Vec::new(),
            durability: None,
            versions: None,
            breakdown: None,
            timeline: stats.timeline.clone(),
        }
    }

    /// Records what logging did; `throughput` and `commits` then count durable commits.
    pub fn set_durability(&mut self, mut d: DurabilityReport, stats: &WorkerStats) {
        d.durable_commits = stats.durable_commits;
        d.not_durable = self.commits.saturating_sub(stats.durable_commits);
        d.durable_latency = Latency::of(&stats.durable_latency);
        self.commits = stats.durable_commits;
        self.throughput = stats.durable_commits as f64 / self.duration_s;
        self.durability = Some(d);
    }

    /// Sets the headline figure to transaction type `ty`'s commit rate.
    pub fn set_headline(&mut self, ty: Option<usize>, stats: &WorkerStats, duration_s: f64) {
        self.headline = ty.and_then(|i| {
            let name = self.per_type.get(i)?.name.clone();
            let rate = stats.commits[i] as f64 / duration_s;
            Some(Headline { name, throughput: rate, per_minute: rate * 60.0 })
        });
    }

    /// A human-readable summary.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let options = match &self.options {
            serde_json::Value::Object(m) if !m.is_empty() => {
                let o: Vec<String> =
                    m.iter().map(|(k, v)| format!("{k}={}", scalar_text(v))).collect();
                format!(" | {}", o.join(" "))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{} on {} | {} threads | {:.2} s measured{options}",
            self.protocol, self.workload, self.threads, self.duration_s
        );
        for n in &self.notes {
            let _ = writeln!(s, "  note        {n}");
        }
        let _ = writeln!(
            s,
            "  throughput  {:>12.0} txn/s   commits {}   abort ratio {:.4}",
            self.throughput, self.commits, self.abort_ratio
        );
        if let Some(h) = &self.headline {
            let _ = writeln!(
                s,
                "  {:<12}{:>12.0} txn/s   ({:.0} per minute, tpmC-style, not audited)",
                h.name, h.throughput, h.per_minute
            );
        }
        let _ = writeln!(
            s,
            "  latency     p50 {:.1} us   p99 {:.1} us   p99.9 {:.1} us   max {:.1} us",
            self.latency.p50_us, self.latency.p99_us, self.latency.p999_us, self.latency.max_us
        );
        if !self.aborts.is_empty() {
            let list: Vec<_> = self.aborts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "  aborts      {}", list.join(", "));
        }
        if let Some(b) = &self.breakdown {
            let share = |x: f64| if b.total_us > 0.0 { x / b.total_us * 100.0 } else { 0.0 };
            let parts: Vec<_> =
                b.parts().iter().map(|(n, x)| format!("{n} {x:.2} ({:.0} %)", share(*x))).collect();
            let _ = writeln!(
                s,
                "  breakdown   us per commit: {}   total {:.2}",
                parts.join(", "),
                b.total_us
            );
            if let Some(w) = &b.shared_writes {
                let sites: Vec<_> = w.sites.iter().map(|(n, x)| format!("{n} {x:.2}")).collect();
                let _ =
                    writeln!(
                    s,
                    "  shared      writes per commit to lines others write {:.2}, to own lines \
                     others read {:.2}{}",
                    w.contended,
                    w.published,
                    if sites.is_empty() { String::new() } else { format!(": {}", sites.join(", ")) }
                );
            }
        }
        if let Some(d) = &self.durability {
            let _ = writeln!(
                s,
                "  durability  {} log, sync {} every {:.0} ms: durable p50 {:.1} us   p99 {:.1} us   \
                 {:.1} MB/s   {:.0} syncs/s   {} checkpoint(s){}",
                d.log,
                d.sync,
                d.group_commit_s * 1e3,
                d.durable_latency.p50_us,
                d.durable_latency.p99_us,
                d.log_mb_per_s,
                d.syncs_per_s,
                d.checkpoints,
                if d.not_durable > 0 {
                    format!("   {} commits NOT durable", d.not_durable)
                } else {
                    String::new()
                }
            );
        }
        if let Some(v) = &self.versions {
            let _ = writeln!(
                s,
                "  versions    {} alive ({:.1} MB) on {} rows ({:+.2} %), longest chain {}   {} carved \
                 ({:.1} MB)   GC lag mean {:.0} us, max {:.0} us",
                v.alive,
                v.alive_bytes as f64 / 1e6,
                v.rows,
                v.space_overhead * 100.0,
                v.longest_chain,
                v.carved,
                v.carved_bytes as f64 / 1e6,
                v.gc_lag_mean_us,
                v.gc_lag_max_us
            );
            if v.read_only_safe > 0 {
                let staleness = match (v.read_only_staleness_mean_us, v.read_only_staleness_max_us)
                {
                    (Some(mean), Some(max)) => {
                        format!("staleness mean {mean:.0} us, max {max:.0} us")
                    }
                    _ => "staleness not measured: the timestamps do not tell time".into(),
                };
                let _ = writeln!(
                    s,
                    "  read-only   {} at safe snapshots ({staleness}), {} at fresh ones",
                    v.read_only_safe, v.read_only_fresh
                );
            }
            if v.promoted + v.promotions_dropped > 0 {
                let _ = writeln!(
                    s,
                    "  promotion   {} versions promoted into their heads, {} given up",
                    v.promoted, v.promotions_dropped
                );
            }
        }
        for w in &self.warnings {
            let _ = writeln!(s, "  warning     {w}");
        }
        if let Some(m) = &self.invariant_violation {
            let _ = writeln!(s, "  invariant   broken (the protocol does not promise it): {m}");
        }
        if let Some(h) = &self.history_check {
            let classes: Vec<_> = h.anomalies.iter().map(|a| a.class.name()).collect();
            let _ = writeln!(
                s,
                "  history     {} transactions ({} committed): {}{}",
                h.txns,
                h.committed,
                if classes.is_empty() { "no anomaly".to_string() } else { classes.join(", ") },
                if h.permitted {
                    ""
                } else {
                    " -- NOT PERMITTED by the protocol's isolation level"
                }
            );
            for a in h.anomalies.iter().filter(|_| !h.permitted) {
                let _ = writeln!(s, "    {}: e.g. {}", a.class, a.example);
                if !a.cycle.is_empty() {
                    let _ =
                        writeln!(s, "      cycle: {}", crate::history::check::cycle_text(&a.cycle));
                }
            }
        }
        if !self.timeline.is_empty() {
            let points: Vec<String> =
                self.timeline.iter().map(|p| format!("{:.2}s {:.0}", p.t, p.throughput)).collect();
            let _ = writeln!(
                s,
                "  timeline    txn/s by the end of each interval: {}",
                points.join(", ")
            );
        }
        if self.per_type.len() > 1 {
            for t in &self.per_type {
                let _ = writeln!(
                    s,
                    "  {:<12}{:>12.0} txn/s   {:>5.1} % of commits   commits {}   aborts {}   user aborts {}   p99 {:.1} us",
                    t.name, t.throughput, t.share * 100.0, t.commits, t.aborts, t.user_aborts, t.latency.p99_us
                );
            }
        }
        s
    }

    /// Notes what may make this run's figures mislead: more threads than `cores` (they share
    /// cores, so the scheduler is measured as much as the protocol), a measured window more
    /// than 10 % away from the requested one (`requested_s`, timed runs), no commit at all, or
    /// a stretch without commits of a tenth of the window (at least 0.1 s).
    pub fn check_conditions(&mut self, requested_s: Option<f64>, cores: usize) {
        self.requested_s = requested_s;
        if self.threads > cores {
            self.warnings.push(format!(
                "{} threads on {cores} cores: threads share cores, so descheduled transactions \
                 hold what others wait for",
                self.threads
            ));
        }
        if let Some(req) = requested_s.filter(|r| *r > 0.0) {
            let off = (self.duration_s - req) / req;
            if off.abs() > 0.10 {
                self.warnings.push(format!(
                    "measured window {:.2} s is {:.0} % {} than the requested {req} s \
                     (an overloaded machine or stalled workers)",
                    self.duration_s,
                    off.abs() * 100.0,
                    if off > 0.0 { "longer" } else { "shorter" }
                ));
            }
        }
        if self.commits == 0 {
            self.warnings.push("no transaction committed in the window".into());
        } else if self.longest_stall_s >= 0.1_f64.max(self.duration_s * 0.1) {
            self.warnings.push(format!(
                "progress stalled: no transaction committed for {:.2} s of the {:.2} s window",
                self.longest_stall_s, self.duration_s
            ));
        }
    }

    /// The CSV header matching [`RunReport::csv_row`] for runs with `config` (its workload
    /// parameters become columns named `workload.NAME`).
    pub fn csv_header(config: &serde_json::Value) -> Vec<String> {
        let mut h: Vec<String> = [
            "timestamp",
            "protocol",
            "options",
            "workload",
            "threads",
            "repeat",
            "duration_s",
            "requested_s",
            "commits",
            "throughput",
            "headline",
            "headline_throughput",
            "abort_ratio",
            "user_aborts",
            "p50_us",
            "p99_us",
            "p999_us",
            "max_us",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        h.extend(AbortReason::ALL.iter().map(|r| format!("aborts.{}", r.name())));
        h.extend(VERSION_COLUMNS.iter().map(|c| format!("versions.{c}")));
        h.extend(BREAKDOWN_COLUMNS.iter().map(|c| format!("breakdown.{c}")));
        h.extend(["invariant", "backoff", "seed", "length"].iter().map(|s| s.to_string()));
        h.extend(flatten(&config["workload"]).into_iter().map(|(k, _)| format!("workload.{k}")));
        h.extend(
            [
                "warnings",
                "txlab_version",
                "git_revision",
                "git_dirty",
                "rustc",
                "build",
                "cpu",
                "cores",
                "kernel",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        h
    }

    /// One CSV row, in the order of [`RunReport::csv_header`] for this run's configuration.
    pub fn csv_row(&self) -> Vec<String> {
        let run = &self.config["run"];
        let mut r = vec![
            self.timestamp.clone(),
            self.protocol.clone(),
            match &self.options {
                serde_json::Value::Object(m) => m
                    .iter()
                    .map(|(k, v)| format!("{k}={}", scalar_text(v)))
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => String::new(),
            },
            self.workload.clone(),
            self.threads.to_string(),
            self.repeat.to_string(),
            format!("{:.3}", self.duration_s),
            self.requested_s.map(|s| s.to_string()).unwrap_or_default(),
            self.commits.to_string(),
            format!("{:.1}", self.throughput),
            self.headline.as_ref().map(|h| h.name.clone()).unwrap_or_default(),
            self.headline.as_ref().map(|h| format!("{:.1}", h.throughput)).unwrap_or_default(),
            format!("{:.6}", self.abort_ratio),
            self.user_aborts.to_string(),
            format!("{:.2}", self.latency.p50_us),
            format!("{:.2}", self.latency.p99_us),
            format!("{:.2}", self.latency.p999_us),
            format!("{:.2}", self.latency.max_us),
        ];
        r.extend(
            AbortReason::ALL
                .iter()
                .map(|a| self.aborts.get(a.name()).copied().unwrap_or(0).to_string()),
        );
        match &self.versions {
            Some(v) => r.extend([
                v.alive.to_string(),
                v.alive_bytes.to_string(),
                format!("{:.4}", v.space_overhead),
                v.carved.to_string(),
                v.carved_bytes.to_string(),
                v.longest_chain.to_string(),
                format!("{:.1}", v.gc_lag_mean_us),
                format!("{:.1}", v.gc_lag_max_us),
                v.read_only_safe.to_string(),
                v.read_only_fresh.to_string(),
                v.read_only_staleness_mean_us.map_or(String::new(), |x| format!("{x:.1}")),
                v.read_only_staleness_max_us.map_or(String::new(), |x| format!("{x:.1}")),
                v.promoted.to_string(),
                v.promotions_dropped.to_string(),
            ]),
            // A protocol without versions.
            None => r.extend(VERSION_COLUMNS.iter().map(|_| String::new())),
        }
        match &self.breakdown {
            Some(b) => {
                r.extend(b.parts().iter().map(|(_, x)| format!("{x:.3}")));
                r.push(format!("{:.3}", b.total_us));
                match &b.shared_writes {
                    Some(w) => {
                        r.push(format!("{:.3}", w.contended));
                        r.push(format!("{:.3}", w.published));
                    }
                    None => r.extend([String::new(), String::new()]),
                }
            }
            // Phases not timed.
            None => r.extend(BREAKDOWN_COLUMNS.iter().map(|_| String::new())),
        }
        r.push(match &self.invariant_violation {
            None => "held".into(),
            Some(m) => format!("broken: {m}"),
        });
        r.push(scalar_text(&run["backoff"]));
        r.push(scalar_text(&run["seed"]));
        r.push(scalar_text(&run["length"]));
        r.extend(flatten(&self.config["workload"]).into_iter().map(|(_, v)| v));
        r.extend([
            self.warnings.join("; "),
            self.txlab_version.clone(),
            self.git_revision.clone(),
            self.git_dirty.to_string(),
            self.rustc.clone(),
            self.build.clone(),
            self.machine.cpu.clone(),
            self.machine.cores.to_string(),
            self.machine.kernel.clone(),
        ]);
        r
    }
}

/// A JSON value as one CSV cell: strings bare, other scalars as JSON, objects and arrays as JSON.
fn scalar_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The leaves of a JSON object as (dotted path, cell text), in key order; arrays stay whole.
fn flatten(v: &serde_json::Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&path, x, out);
                }
            }
            other => out.push((prefix.to_string(), scalar_text(other))),
        }
    }
    let mut out = Vec::new();
    if v.is_object() {
        walk("", v, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The breakdown divides each phase's time by the commits; `other` is what the phases and
    /// backoff leave of the workers' window; without commits there is none.
    #[test]
    fn a_breakdown_is_time_per_commit_and_other_is_the_rest() {
        let mut s = WorkerStats::new(2);
        assert_eq!(Breakdown::of(&s), None);
        s.commits = vec![3, 1];
        s.window_ns = 40_000;
        s.backoff_ns = 2_000;
        s.phase_ns = [1_000, 2_000, 6_000, 4_000, 12_000, 1_000];
        let b = Breakdown::of(&s).unwrap();
        let expect = Breakdown {
            begin_us: 0.25,
            prefetch_us: 0.5,
            read_us: 1.5,
            write_us: 1.0,
            commit_us: 3.0,
            abort_us: 0.25,
            backoff_us: 0.5,
            other_us: 3.0,
            total_us: 10.0,
            // Unit tests count shared writes; none were noted here.
            shared_writes: Some(SharedWrites::default()),
        };
        assert_eq!(b, expect);
        // Phases timed beyond the window (clock skew between cores): `other` is 0, not negative.
        s.window_ns = 20_000;
        assert_eq!(Breakdown::of(&s).unwrap().other_us, 0.0);
    }

    /// Shared writes are per commit, split by kind, and listed per site that had any.
    #[test]
    fn shared_writes_are_per_commit_by_kind_and_site() {
        use crate::util::shared_writes::Site;
        let mut n = [0u64; Site::COUNT];
        n[Site::Counter as usize] = 8;
        n[Site::ReadMark as usize] = 4;
        n[Site::Slot as usize] = 12;
        let w = SharedWrites::of(&n, 4);
        assert_eq!((w.contended, w.published), (3.0, 3.0));
        let sites: Vec<_> = w.sites.into_iter().collect();
        assert_eq!(sites, [("counter", 2.0), ("read-mark", 1.0), ("slot", 3.0)]);
    }
}
