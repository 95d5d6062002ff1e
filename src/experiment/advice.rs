//! The rules of `txlab advise`: which contenders it measures, how it spends its budget on them,
//! and how it turns their measurements into a recommendation with reasons. Everything here
//! works on measurements already made (the command line runs them), so the verdicts can be
//! tested on recorded results without depending on the machine's speed.
//!
//! # The rules
//!
//! **Contenders.** Every protocol that promises the isolation asked for (serializable by
//! default; `--isolation snapshot` adds `si`), each with the settings its paper and CCBench
//! recommend; the defaults already are those for most (TicToc's NoWait validation lock, its
//! preemptive aborts and timestamp history; MOCC's reader-writer lock word and temperature;
//! ERMIA-SSI's read optimisation; Silo's waiting validation lock; BOHM's quarter of the threads
//! for concurrency control). Two depend on what the user allows and on the workload's shape:
//! - Cicada runs as its paper does, with loosely synchronised clocks and read-only
//!   transactions at the oldest live timestamp (`external-consistency=off`): serializable, not
//!   strictly. `--strict` keeps every transaction ordered after all that committed before it
//!   began (`external-consistency=on`).
//! - When the workload has read-only transaction types (no template of theirs writes) and
//!   `--strict` is not given, Silo and MOCC are also measured with Silo's read-only snapshots
//!   (`snapshot-epochs=25`, Silo §4.9: read-only transactions read a snapshot at most about a
//!   second old, without validation), as separate contenders: the snapshots help the readers
//!   and cost the writers (they keep the old values), so only a measurement says which wins.
//!
//! **Budget.** At each thread count, successive halving with interleaved runs of one length:
//! a screen of one run each, then rounds in which every contender still in runs twice more,
//! taking turns so that they share the machine's noise. After the screen, the better half goes
//! on, and any contender within [`SCREEN_MARGIN`] of the best (one run says little). After each
//! later round, a contender whose every run is below the leader's slowest (the noise separates
//! them) is out, and if more than half of those that ran the round remain, the lower medians
//! are cut to half. It stops when one contender is left, when the leader is separated from
//! every other, after [`MAX_ROUNDS`] rounds, or when the budget is spent.
//!
//! **Verdict.** At each thread count, the leader is the best median among the contenders that
//! ran the last round. Those whose runs' range overlaps the leader's are *within noise*. With
//! none, the leader is the pick. Otherwise the pick is made on secondary evidence among the
//! leader and those within noise that ran the last round (at least three runs): the one whose
//! worst p99 latency is [`LATENCY_MARGIN`] below every other's best, else the one whose worst
//! abort ratio is clearly below every other's best ([`ABORT_MARGIN`]): secondary evidence
//! counts only when it too stands out of the noise. Else the leader, and the advice says it is
//! a coin toss. Across
//! thread counts, a protocol picked at every count is the recommendation; otherwise the one
//! whose worst ratio to each count's leader is highest (the one that loses least anywhere),
//! and the advice names each count's pick.
//!
//! **Check.** The recommendation and up to two runners-up within noise run the workload again
//! with every transaction's reads and writes recorded, and the history is checked against the
//! protocol's promise. A finalist whose check fails is not recommended (it would be a txlab
//! bug, reported as such). `si` is recommended only under `--isolation snapshot`, with the
//! anomalies its check observed named.

use crate::engine::Isolation;
use crate::protocols::ProtocolKind;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// After the screen's single runs, contenders within this fraction of the best go on whatever
/// their place (the spread of one run on a shared machine is often this large).
pub const SCREEN_MARGIN: f64 = 0.15;
/// Rounds after the screen at most.
pub const MAX_ROUNDS: u32 = 3;
/// Runs each contender still in makes per round after the screen.
pub const RUNS_PER_ROUND: u32 = 2;
/// A p99 latency this fraction below every other finalist's decides a tie.
pub const LATENCY_MARGIN: f64 = 0.10;
/// An abort ratio decides a tie when every other finalist's is at least this many times it
/// plus one point (0.01).
pub const ABORT_MARGIN: f64 = 1.25;
/// Silo §4.9's snapshot interval: 25 epochs of 40 ms.
pub const SNAPSHOT_EPOCHS: &str = "25";

/// A protocol with the options advise measures it with.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Contender {
    /// The name in tables: the protocol's, with `+snapshots` for a snapshot variant.
    pub label: String,
    /// The protocol.
    pub protocol: ProtocolKind,
    /// `--opt` pairs (name, value).
    pub options: Vec<(String, String)>,
    /// Why these options, in words (empty for the protocol's defaults).
    pub why: String,
}

/// What advise knows of a workload before measuring it, and what the user allows.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    /// Transaction types whose templates write nothing.
    pub read_only_types: Vec<String>,
    /// `--strict`: no stale read-only snapshots, Cicada externally consistent.
    pub strict: bool,
}

/// Whether advise may recommend `kind` when the user asks for `isolation`.
pub fn eligible(kind: ProtocolKind, isolation: Isolation) -> bool {
    matches!(
        (kind.caps().isolation, isolation),
        (Isolation::Serializable, _) | (Isolation::Snapshot, Isolation::Snapshot)
    )
}

/// The contenders for `candidates` on a workload of `shape`, by the rules in the module doc.
pub fn contenders(candidates: &[ProtocolKind], shape: &Shape) -> Vec<Contender> {
    let mut out = Vec::new();
    let plain = |k: ProtocolKind| Contender {
        label: k.name().to_string(),
        protocol: k,
        options: Vec::new(),
        why: String::new(),
    };
    for &k in candidates {
        match k {
            ProtocolKind::Cicada if !shape.strict => out.push(Contender {
                options: vec![("external-consistency".into(), "off".into())],
                why: "its paper's clocks: loosely synchronised, read-only transactions at the \
                      oldest live timestamp (serializable, not strictly; --strict turns it on)"
                    .into(),
                ..plain(k)
            }),
            ProtocolKind::Silo | ProtocolKind::Mocc => {
                out.push(plain(k));
                if !shape.strict && !shape.read_only_types.is_empty() {
                    out.push(Contender {
                        label: format!("{}+snapshots", k.name()),
                        options: vec![("snapshot-epochs".into(), SNAPSHOT_EPOCHS.into())],
                        why: format!(
                            "read-only types ({}) read a snapshot at most about a second old, \
                             without validation (Silo §4.9)",
                            shape.read_only_types.join(", ")
                        ),
                        ..plain(k)
                    });
                }
            }
            _ => out.push(plain(k)),
        }
    }
    out
}

/// One measured run, as the verdict needs it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Committed transactions per second (durably committed when the run logged).
    pub throughput: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th-percentile latency, microseconds.
    pub p99_us: f64,
    /// Concurrency aborts over attempts.
    pub abort_ratio: f64,
    /// Aborts per reason (the workload's own rollbacks under `user`).
    pub aborts: BTreeMap<String, u64>,
    /// The share of commits whose type is read-only.
    pub read_only_share: f64,
    /// Versions alive at the end (multi-version protocols).
    pub versions_alive: Option<u64>,
}

/// Where a contender stands in the halving.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "detail")]
pub enum Fate {
    /// Still measured.
    Running,
    /// Left after the screen (round 0).
    Screened,
    /// Left after round `n`: the noise separated it from the leader.
    Separated(u32),
    /// Left after round `n` by the halving, its runs' range still overlapping the leader's
    /// or not.
    Halved(u32),
    /// Could not run (the error).
    Failed(String),
}

/// A contender's measurements at one thread count.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Entry {
    /// Its runs, in order.
    pub samples: Vec<Sample>,
    /// Where it stands.
    pub fate: Fate,
    /// Resident memory its database took to load, MiB (the versions a multi-version
    /// protocol adds while running are in [`Sample::versions_alive`]).
    pub memory_mib: Option<f64>,
}

impl Entry {
    /// A contender yet to run.
    pub fn new() -> Entry {
        Entry { samples: Vec::new(), fate: Fate::Running, memory_mib: None }
    }

    /// The runs' throughputs.
    pub fn throughputs(&self) -> Vec<f64> {
        self.samples.iter().map(|s| s.throughput).collect()
    }

    /// The median of `f` over the runs.
    pub fn median_of(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        let v: Vec<f64> = self.samples.iter().map(f).collect();
        if v.is_empty() {
            return f64::NAN;
        }
        super::distinguish::median(&v)
    }

    /// Median throughput.
    pub fn median(&self) -> f64 {
        self.median_of(|s| s.throughput)
    }

    /// The range of the runs' throughputs.
    pub fn range(&self) -> (f64, f64) {
        self.samples
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), s| (lo.min(s.throughput), hi.max(s.throughput)))
    }

    /// (max - min) / median.
    pub fn spread(&self) -> f64 {
        let (lo, hi) = self.range();
        let m = self.median();
        if self.samples.len() < 2 || m <= 0.0 {
            0.0
        } else {
            (hi - lo) / m
        }
    }

    /// Concurrency aborts per reason over all runs (user aborts left out), largest first.
    pub fn abort_reasons(&self) -> Vec<(String, u64)> {
        let mut sum: BTreeMap<&str, u64> = BTreeMap::new();
        for s in &self.samples {
            for (r, n) in &s.aborts {
                if r != "user" {
                    *sum.entry(r).or_default() += n;
                }
            }
        }
        let mut v: Vec<(String, u64)> =
            sum.into_iter().filter(|(_, n)| *n > 0).map(|(r, n)| (r.to_string(), n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    fn running(&self) -> bool {
        self.fate == Fate::Running
    }
}

impl Default for Entry {
    fn default() -> Self {
        Entry::new()
    }
}

/// Whether two ranges of runs overlap.
fn overlap(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// The running entry with the best median.
pub fn leader(entries: &[Entry]) -> Option<usize> {
    (0..entries.len())
        .filter(|&i| entries[i].running() && !entries[i].samples.is_empty())
        .max_by(|&a, &b| entries[a].median().total_cmp(&entries[b].median()))
}

/// Decides, after round `round` (0: the screen), which running entries go on (the module doc's
/// rules). Returns whether measuring should go on: more than one still runs, the leader is not
/// yet separated from every other, and rounds are left.
pub fn cut(entries: &mut [Entry], round: u32) -> bool {
    let running: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].running()).collect();
    let Some(lead) = leader(entries) else {
        return false;
    };
    let by_median = |v: &mut Vec<usize>, entries: &[Entry]| {
        v.sort_by(|&a, &b| entries[b].median().total_cmp(&entries[a].median()));
    };
    let keep = running.len().div_ceil(2).max(if round == 0 { 1 } else { 2 });
    if round == 0 {
        let best = entries[lead].median();
        let mut order = running.clone();
        by_median(&mut order, entries);
        for (place, &i) in order.iter().enumerate() {
            let close = entries[i].median() >= best * (1.0 - SCREEN_MARGIN);
            if place >= keep && !close {
                entries[i].fate = Fate::Screened;
            }
        }
    } else {
        let lr = entries[lead].range();
        for &i in &running {
            if i != lead && entries[i].samples.len() >= 2 && entries[i].range().1 < lr.0 {
                entries[i].fate = Fate::Separated(round);
            }
        }
        let mut left: Vec<usize> =
            running.iter().copied().filter(|&i| entries[i].running()).collect();
        by_median(&mut left, entries);
        for &i in left.iter().skip(keep) {
            entries[i].fate = Fate::Halved(round);
        }
    }
    let left: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].running()).collect();
    let lr = entries[lead].range();
    let contested = left.iter().any(|&i| i != lead && overlap(entries[i].range(), lr));
    left.len() > 1 && round < MAX_ROUNDS && (round == 0 || contested)
}

/// How a pick among contenders within noise was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// The leader's runs are all faster than every other's.
    Clear,
    /// Within noise; decided by the p99 latency.
    Latency,
    /// Within noise; decided by the abort ratio.
    Aborts,
    /// Within noise and no secondary evidence separates them: the leader, by a hair.
    Toss,
    /// The leader ran fewer than three times (the budget allowed no more): the ranking is
    /// of single runs, and those within [`SCREEN_MARGIN`] of it are within noise.
    Screen,
    /// Nothing ran.
    None,
}

/// The verdict at one thread count.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// The thread count.
    pub threads: usize,
    /// Entries in table order: those that ran the last round by median, then the rest by how
    /// late they left and their median; failed ones last.
    pub order: Vec<usize>,
    /// The best median among the last round's.
    pub leader: Option<usize>,
    /// The pick.
    pub pick: Option<usize>,
    /// Entries whose runs' range overlaps the leader's (the leader excluded).
    pub within_noise: Vec<usize>,
    /// How the pick was made.
    pub decided_by: Decision,
}

/// The verdict over `entries` at `threads` threads.
pub fn verdict(threads: usize, entries: &[Entry]) -> Verdict {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    let stage = |e: &Entry| match e.fate {
        Fate::Running => 1000,
        Fate::Separated(r) | Fate::Halved(r) => r,
        Fate::Screened => 0,
        Fate::Failed(_) => 0,
    };
    order.sort_by(|&a, &b| {
        let (ea, eb) = (&entries[a], &entries[b]);
        let failed = |e: &Entry| matches!(e.fate, Fate::Failed(_)) || e.samples.is_empty();
        failed(ea)
            .cmp(&failed(eb))
            .then(stage(eb).cmp(&stage(ea)))
            .then(eb.median().total_cmp(&ea.median()))
    });
    let leader = leader(entries);
    let Some(lead) = leader else {
        return Verdict {
            threads,
            order,
            leader: None,
            pick: None,
            within_noise: Vec::new(),
            decided_by: Decision::None,
        };
    };
    let lr = entries[lead].range();
    let screen_only = entries[lead].samples.len() < 3;
    let best = entries[lead].median();
    let within_noise: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| i != lead && !entries[i].samples.is_empty())
        .filter(|&i| {
            overlap(entries[i].range(), lr)
                || (screen_only && entries[i].median() >= best * (1.0 - SCREEN_MARGIN))
        })
        .collect();
    if screen_only {
        return Verdict {
            threads,
            order,
            leader,
            pick: Some(lead),
            within_noise,
            decided_by: Decision::Screen,
        };
    }
    // The secondary evidence is weighed among the leader and those within noise that ran the
    // last round (a contender the halving cut is not picked over one that ran on), and must
    // itself stand out of the noise: every run of the pick better than every run of the others.
    let mut tied: Vec<usize> = vec![lead];
    tied.extend(
        within_noise
            .iter()
            .copied()
            .filter(|&i| entries[i].running() && entries[i].samples.len() >= 3),
    );
    let range_of = |i: usize, f: &dyn Fn(&Sample) -> f64| {
        entries[i]
            .samples
            .iter()
            .map(f)
            .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)))
    };
    let p99 = |s: &Sample| s.p99_us;
    let ar = |s: &Sample| s.abort_ratio;
    // The member whose worst run beats every other member's best by the margin.
    let clear_best = |f: &dyn Fn(&Sample) -> f64, beats: &dyn Fn(f64, f64) -> bool| {
        tied.iter().copied().find(|&i| {
            let worst = range_of(i, f).1;
            tied.iter().all(|&j| j == i || beats(worst, range_of(j, f).0))
        })
    };
    let (pick, decided_by) = if within_noise.is_empty() {
        (lead, Decision::Clear)
    } else if tied.len() < 2 {
        // Those within noise were cut or ran too few times to be weighed: the leader.
        (lead, Decision::Toss)
    } else if let Some(c) =
        clear_best(&p99, &|mine, theirs| mine <= theirs * (1.0 - LATENCY_MARGIN))
    {
        (c, Decision::Latency)
    } else if let Some(c) = clear_best(&ar, &|mine, theirs| theirs >= mine * ABORT_MARGIN + 0.01) {
        (c, Decision::Aborts)
    } else {
        (lead, Decision::Toss)
    };
    Verdict { threads, order, leader, pick: Some(pick), within_noise, decided_by }
}

/// The recommendation over every thread count.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Overall {
    /// The contender recommended.
    pub pick: Option<usize>,
    /// Whether it was every thread count's pick.
    pub everywhere: bool,
    /// Its lowest ratio to a thread count's leader.
    pub worst_ratio: f64,
}

/// The recommendation across `verdicts` (one per thread count, over `fields[k]`'s entries).
pub fn overall(verdicts: &[Verdict], fields: &[Vec<Entry>]) -> Overall {
    let picks: Vec<Option<usize>> = verdicts.iter().map(|v| v.pick).collect();
    let ratio = |c: usize| -> f64 {
        verdicts
            .iter()
            .zip(fields)
            .map(|(v, entries)| match v.leader {
                Some(l) if !entries[c].samples.is_empty() => {
                    entries[c].median() / entries[l].median()
                }
                _ => 0.0,
            })
            .fold(f64::INFINITY, f64::min)
    };
    if let Some(Some(first)) = picks.first() {
        if picks.iter().all(|p| *p == Some(*first)) {
            return Overall { pick: Some(*first), everywhere: true, worst_ratio: ratio(*first) };
        }
    }
    let n = fields.first().map_or(0, Vec::len);
    let best = (0..n)
        .filter(|&c| fields.iter().all(|f| !f[c].samples.is_empty()))
        .max_by(|&a, &b| ratio(a).total_cmp(&ratio(b)));
    Overall { pick: best, everywhere: false, worst_ratio: best.map_or(0.0, ratio) }
}

/// An abort reason in words.
pub fn reason_words(reason: &str) -> &'static str {
    match reason {
        "read-validation" => "read validations (a record read changed or was locked before commit)",
        "lock-conflict" => "lock conflicts (a lock held elsewhere, no waiting)",
        "wait-die" => "wait-die deaths (a younger transaction met an older lock holder)",
        "bucket-conflict" => "range-lock conflicts (a scan and an insert met)",
        "phantom-validation" => "phantom validations (a range read saw an insert)",
        "insert-conflict" => "insert conflicts",
        "access-set-mismatch" => "declared access sets gone stale",
        "write-conflict" => "write conflicts (first updater wins)",
        "exclusion-window" => "SSN exclusion-window failures",
        "dangerous-structure" => "SSI dangerous structures",
        "cascading-abort" => "cascading aborts (a speculatively read writer aborted)",
        "snapshot-too-old" => "snapshots too old",
        "dependency-busy" => "busy dependencies (re-run later, not aborts of the transaction)",
        "user-retry" => "retries the workload asked for",
        _ => "other aborts",
    }
}

/// How the protocol's mechanism meets conflicts, for the reasons.
fn mechanism(kind: ProtocolKind) -> &'static str {
    use crate::engine::protocol::Reads;
    let c = kind.caps();
    if c.needs_access_set && !c.interactive {
        return "it orders whole transactions before running them, so conflicts never abort";
    }
    if c.needs_access_set {
        return "it takes every lock at begin, in key order, from the declared access set, so \
                conflicts wait and never abort";
    }
    if c.snapshot_reads {
        return "its reads see a snapshot, so they never wait for or abort over a write made \
                after they began";
    }
    match c.reads {
        Reads::VisibleWhenHot => {
            "it locks the records whose validations fail, so their readers wait instead of \
             aborting, and reads the others without writing shared memory"
        }
        Reads::Visible => "its reads lock, so conflicts wait or abort early rather than at commit",
        Reads::Invisible => "its reads write no shared memory (no cache-line transfers)",
        Reads::InvisibleUntilValidation => {
            "its reads write nothing shared until validation, which can move the commit \
             timestamp instead of aborting"
        }
        Reads::Listed => "it orders conflicting pieces of transactions instead of aborting them",
        Reads::Registered => {
            "its reads see a snapshot and register in what they read, to certify serializability"
        }
    }
}

fn pct(x: f64) -> String {
    if x >= 0.1 || x == 0.0 {
        format!("{:.0} %", x * 100.0)
    } else {
        format!("{:.1} %", x * 100.0)
    }
}

/// Microseconds: one decimal below 10.
fn micros(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// Throughput in words: 1.45 M, 812 k, 950.
pub fn rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.0} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// The abort sentence for entry `e` of contender `c`: its ratio and its main reason.
fn aborts_sentence(c: &Contender, e: &Entry) -> String {
    let ar = e.median_of(|s| s.abort_ratio);
    let reasons = e.abort_reasons();
    let total: u64 = reasons.iter().map(|r| r.1).sum();
    match reasons.first() {
        Some((r, n)) if total > 0 => format!(
            "{} aborts {} of its attempts, {} of them {}",
            c.label,
            pct(ar),
            pct(*n as f64 / total as f64),
            reason_words(r)
        ),
        _ => format!("{} aborts {} of its attempts", c.label, pct(ar)),
    }
}

/// The reasons for the verdict at one thread count, in words drawn from the measurements.
pub fn reasons(v: &Verdict, entries: &[Entry], contenders: &[Contender]) -> Vec<String> {
    let mut out = Vec::new();
    let (Some(pick), Some(lead)) = (v.pick, v.leader) else {
        return out;
    };
    let (p, pe) = (&contenders[pick], &entries[pick]);
    let runs = pe.samples.len();
    match v.decided_by {
        Decision::Clear => {
            let next =
                v.order.iter().copied().find(|&i| i != pick && !entries[i].samples.is_empty());
            let mut s = format!(
                "{} has the best median, {} txn/s over {runs} run{}",
                p.label,
                rate(pe.median()),
                if runs == 1 { "" } else { "s" }
            );
            if let Some(n) = next {
                let _ = write!(
                    s,
                    ", {} ahead of {} ({} txn/s); every one of its runs was faster than all of {}'s",
                    pct(pe.median() / entries[n].median() - 1.0),
                    contenders[n].label,
                    rate(entries[n].median()),
                    contenders[n].label
                );
            }
            out.push(s);
        }
        Decision::Screen => {
            let mut s = format!(
                "{} has the best median, {} txn/s, but over {runs} run{} only: the budget \
                 allowed no more, so nothing here measures the noise",
                p.label,
                rate(pe.median()),
                if runs == 1 { "" } else { "s" }
            );
            if !v.within_noise.is_empty() {
                let close: Vec<String> = v
                    .within_noise
                    .iter()
                    .map(|&i| {
                        format!("{} ({} txn/s)", contenders[i].label, rate(entries[i].median()))
                    })
                    .collect();
                let _ = write!(
                    s,
                    "; within {} of it, as close as one run's noise often is: {}",
                    pct(SCREEN_MARGIN),
                    close.join(", ")
                );
            }
            out.push(s);
        }
        Decision::Latency | Decision::Aborts | Decision::Toss => {
            let names: Vec<String> = std::iter::once(lead)
                .chain(v.within_noise.iter().copied())
                .map(|i| format!("{} ({} txn/s)", contenders[i].label, rate(entries[i].median())))
                .collect();
            out.push(format!(
                "the noise does not separate {}: their runs' ranges overlap (spreads {})",
                names.join(", "),
                std::iter::once(lead)
                    .chain(v.within_noise.iter().copied())
                    .map(|i| match entries[i].samples.len() {
                        1 => "one run".to_string(),
                        _ => pct(entries[i].spread()),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let others: Vec<usize> = std::iter::once(lead)
                .chain(v.within_noise.iter().copied())
                .filter(|&i| i != pick && entries[i].running() && entries[i].samples.len() >= 3)
                .collect();
            let list = |f: &dyn Fn(usize) -> String| {
                others.iter().map(|&i| f(i)).collect::<Vec<_>>().join(", ")
            };
            match v.decided_by {
                Decision::Latency => out.push(format!(
                    "so the pick is made on tail latency, which separates them in every run: \
                     {}'s p99 is {} us, against {}",
                    p.label,
                    micros(pe.median_of(|s| s.p99_us)),
                    list(&|i| format!(
                        "{} us for {}",
                        micros(entries[i].median_of(|s| s.p99_us)),
                        contenders[i].label
                    ))
                )),
                Decision::Aborts => out.push(format!(
                    "so the pick is made on aborts, which separate them in every run: {} \
                     aborts {} of its attempts, against {}",
                    p.label,
                    pct(pe.median_of(|s| s.abort_ratio)),
                    list(&|i| format!(
                        "{} for {}",
                        pct(entries[i].median_of(|s| s.abort_ratio)),
                        contenders[i].label
                    ))
                )),
                _ => out.push(format!(
                    "and neither tail latency nor aborts separate them either: {} by the best \
                     median, a coin toss; any of them will do",
                    p.label
                )),
            }
        }
        Decision::None => {}
    }
    // Contention: the pick's aborts against the worst abort ratio among the others that ran
    // more than the screen.
    let ar = |i: usize| entries[i].median_of(|s| s.abort_ratio);
    let worst = v
        .order
        .iter()
        .copied()
        .filter(|&i| i != pick && entries[i].samples.len() > 1)
        .max_by(|&a, &b| ar(a).total_cmp(&ar(b)));
    let most = v.order.iter().map(|&i| ar(i)).filter(|x| x.is_finite()).fold(0.0, f64::max);
    if most < 0.01 {
        out.push(format!(
            "hardly any conflicts (every abort ratio below 1 %): the cost of each operation \
             decides, and {}",
            mechanism(p.protocol)
        ));
    } else {
        let mut s = aborts_sentence(p, pe);
        if let Some(w) = worst.filter(|&w| ar(w) > ar(pick) * 1.5 && ar(w) >= 0.01) {
            let _ = write!(s, "; {}", aborts_sentence(&contenders[w], &entries[w]));
            let _ = write!(s, ". {}: {}", p.label, mechanism(p.protocol));
        }
        out.push(s);
    }
    // Read-only transactions and the snapshot variants.
    let ro = pe.median_of(|s| s.read_only_share);
    if ro >= 0.05 {
        let mut s = format!("{} of the commits are read-only", pct(ro));
        let snap = |c: &Contender| c.options.iter().any(|(n, _)| n == "snapshot-epochs");
        if snap(p) {
            let _ = write!(s, "; {} runs them on snapshots, without validation", p.label);
        } else if let Some(sv) =
            (0..contenders.len()).find(|&i| snap(&contenders[i]) && !entries[i].samples.is_empty())
        {
            let ratio = entries[sv].median() / pe.median();
            let beyond_noise =
                entries[sv].samples.len() > 1 && entries[sv].range().1 < pe.range().0;
            let _ = write!(
                s,
                "; the snapshot variant {} ran at {ratio:.2}x {}{}",
                contenders[sv].label,
                p.label,
                if beyond_noise {
                    ", slower in every run: keeping old values for snapshots cost its writers \
                     more than it saved the readers"
                } else {
                    ", a difference the noise does not confirm"
                }
            );
        }
        out.push(s);
    }
    if let Some(alive) = pe.samples.last().and_then(|s| s.versions_alive) {
        out.push(format!("{} kept {alive} versions alive at the end of its last run", p.label));
    }
    out
}

/// The reasons across thread counts: how the pick fared at each.
pub fn overall_reasons(
    o: &Overall,
    verdicts: &[Verdict],
    fields: &[Vec<Entry>],
    contenders: &[Contender],
) -> Vec<String> {
    let Some(pick) = o.pick else {
        return Vec::new();
    };
    if verdicts.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let at: Vec<String> = verdicts
        .iter()
        .zip(fields)
        .map(|(v, f)| format!("{} txn/s at {} threads", rate(f[pick].median()), v.threads))
        .collect();
    if o.everywhere {
        out.push(format!(
            "{} is the pick at every thread count: {}",
            contenders[pick].label,
            at.join(", ")
        ));
    } else {
        let picks: Vec<String> = verdicts
            .iter()
            .map(|v| {
                format!(
                    "{} at {} threads",
                    v.pick.map_or("nothing", |p| contenders[p].label.as_str()),
                    v.threads
                )
            })
            .collect();
        out.push(format!(
            "the pick depends on the thread count ({}); {} loses least across them: at worst \
             {:.2}x the best ({})",
            picks.join(", "),
            contenders[pick].label,
            o.worst_ratio,
            at.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(tp: f64, p99: f64, ar: f64) -> Sample {
        Sample {
            throughput: tp,
            p50_us: p99 / 4.0,
            p99_us: p99,
            abort_ratio: ar,
            ..Default::default()
        }
    }

    fn entry(tps: &[f64], p99: f64, ar: f64) -> Entry {
        Entry {
            samples: tps.iter().map(|&t| sample(t, p99, ar)).collect(),
            fate: Fate::Running,
            memory_mib: None,
        }
    }

    fn names(ks: &[ProtocolKind], shape: &Shape) -> Vec<String> {
        contenders(ks, shape).into_iter().map(|c| c.label).collect()
    }

    #[test]
    fn the_contenders_follow_the_isolation_asked_and_the_workloads_shape() {
        let serializable: Vec<ProtocolKind> = ProtocolKind::ALL
            .into_iter()
            .filter(|&k| eligible(k, Isolation::Serializable))
            .collect();
        assert!(!serializable.contains(&ProtocolKind::Si));
        assert!(!serializable.contains(&ProtocolKind::Nocc));
        assert_eq!(serializable.len(), 12);
        assert!(eligible(ProtocolKind::Si, Isolation::Snapshot));
        assert!(!eligible(ProtocolKind::Nocc, Isolation::Snapshot));
        // No read-only type: one contender per protocol; Cicada as its paper runs it.
        let plain = Shape::default();
        let c = contenders(&serializable, &plain);
        assert_eq!(c.len(), 12);
        let cicada = c.iter().find(|c| c.protocol == ProtocolKind::Cicada).unwrap();
        assert_eq!(cicada.options, [("external-consistency".into(), "off".into())]);
        // Read-only types add Silo's and MOCC's snapshot variants, after their plain selves.
        let ro = Shape { read_only_types: vec!["report".into()], strict: false };
        let n = names(&[ProtocolKind::Silo, ProtocolKind::TicToc, ProtocolKind::Mocc], &ro);
        assert_eq!(n, ["silo", "silo+snapshots", "tictoc", "mocc", "mocc+snapshots"]);
        let snap = &contenders(&[ProtocolKind::Silo], &ro)[1];
        assert_eq!(snap.options, [("snapshot-epochs".into(), SNAPSHOT_EPOCHS.into())]);
        assert!(snap.why.contains("report"), "{}", snap.why);
        // --strict: neither snapshots nor a relaxed Cicada.
        let strict = Shape { read_only_types: vec!["report".into()], strict: true };
        let c = contenders(&[ProtocolKind::Silo, ProtocolKind::Cicada], &strict);
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|c| c.options.is_empty()));
    }

    #[test]
    fn the_screen_keeps_the_better_half_and_anything_close_to_the_best() {
        let mut e: Vec<Entry> =
            [100.0, 90.0, 87.0, 80.0, 50.0, 40.0].iter().map(|&t| entry(&[t], 10.0, 0.0)).collect();
        assert!(cut(&mut e, 0));
        let fates: Vec<&Fate> = e.iter().map(|e| &e.fate).collect();
        // Half of six is three; 87 is within 15 % of 100 anyway, 80 is not.
        assert_eq!(
            fates,
            [
                &Fate::Running,
                &Fate::Running,
                &Fate::Running,
                &Fate::Screened,
                &Fate::Screened,
                &Fate::Screened
            ]
        );
        // Everything within the margin goes on, however many.
        let mut e: Vec<Entry> =
            [100.0, 99.0, 98.0, 97.0].iter().map(|&t| entry(&[t], 10.0, 0.0)).collect();
        cut(&mut e, 0);
        assert!(e.iter().all(|e| e.fate == Fate::Running));
    }

    #[test]
    fn later_rounds_drop_what_the_noise_separates_and_halve_the_rest() {
        let mut e = vec![
            entry(&[100.0, 104.0, 98.0], 10.0, 0.0),
            entry(&[99.0, 101.0, 95.0], 10.0, 0.0), // overlaps the leader
            entry(&[90.0, 92.0, 91.0], 10.0, 0.0),  // below the leader's slowest
            entry(&[97.0, 99.0, 96.0], 10.0, 0.0),  // overlaps, third median: halved
        ];
        assert!(cut(&mut e, 1), "the leader still overlaps another");
        assert_eq!(e[2].fate, Fate::Separated(1));
        assert_eq!(e[3].fate, Fate::Halved(1));
        assert_eq!(e[0].fate, Fate::Running);
        assert_eq!(e[1].fate, Fate::Running);
        // A leader separated from every other: done.
        let mut e =
            vec![entry(&[100.0, 104.0, 102.0], 10.0, 0.0), entry(&[90.0, 92.0, 91.0], 10.0, 0.0)];
        assert!(!cut(&mut e, 1));
        assert_eq!(e[1].fate, Fate::Separated(1));
        // Rounds run out.
        let mut e =
            vec![entry(&[100.0, 104.0, 98.0], 10.0, 0.0), entry(&[99.0, 101.0, 95.0], 10.0, 0.0)];
        assert!(cut(&mut e, MAX_ROUNDS - 1));
        assert!(!cut(&mut e, MAX_ROUNDS));
    }

    #[test]
    fn a_clear_leader_is_the_pick_and_ties_are_decided_on_latency_then_aborts() {
        let c = contenders(
            &[ProtocolKind::Silo, ProtocolKind::Mocc, ProtocolKind::TwoPlNoWait],
            &Shape::default(),
        );
        // Clear.
        let e = vec![
            entry(&[200.0, 210.0, 205.0], 10.0, 0.01),
            entry(&[100.0, 110.0, 105.0], 10.0, 0.01),
            entry(&[50.0], 10.0, 0.2),
        ];
        let v = verdict(2, &e);
        assert_eq!((v.pick, v.decided_by), (Some(0), Decision::Clear));
        assert_eq!(v.order, [0, 1, 2]);
        let r = reasons(&v, &e, &c);
        assert!(r[0].contains("silo has the best median, 205 txn/s over 3 runs"), "{r:?}");
        assert!(r[0].contains("95 % ahead of mocc"), "{r:?}");
        // Within noise; mocc's p99 is more than 10 % lower: mocc.
        let e = vec![
            entry(&[200.0, 210.0, 205.0], 100.0, 0.05),
            entry(&[195.0, 208.0, 200.0], 80.0, 0.05),
            entry(&[50.0], 10.0, 0.2),
        ];
        let v = verdict(2, &e);
        assert_eq!(v.leader, Some(0));
        assert_eq!(v.within_noise, [1]);
        assert_eq!((v.pick, v.decided_by), (Some(1), Decision::Latency));
        let r = reasons(&v, &e, &c);
        assert!(r[1].contains("mocc's p99 is 80 us, against 100 us for silo"), "{r:?}");
        // A contender the halving cut is not picked over the leader, however fast its tail.
        let mut cut_one = e.clone();
        cut_one[1].fate = Fate::Halved(1);
        let v = verdict(2, &cut_one);
        assert_eq!(
            (v.pick, v.decided_by, v.within_noise.clone()),
            (Some(0), Decision::Toss, vec![1])
        );
        // Tail latencies whose ranges overlap decide nothing, whatever their medians.
        let mut noisy = e.clone();
        noisy[0].samples[0].p99_us = 70.0;
        let v = verdict(2, &noisy);
        assert_eq!((v.pick, v.decided_by), (Some(0), Decision::Toss));
        // Latencies alike, aborts not: the lower abort ratio.
        let e = vec![
            entry(&[200.0, 210.0, 205.0], 100.0, 0.20),
            entry(&[195.0, 208.0, 200.0], 95.0, 0.02),
        ];
        let v = verdict(2, &e);
        assert_eq!((v.pick, v.decided_by), (Some(1), Decision::Aborts));
        // Nothing separates them: the leader, and the advice says it is a toss.
        let e = vec![
            entry(&[200.0, 210.0, 205.0], 100.0, 0.02),
            entry(&[195.0, 208.0, 200.0], 95.0, 0.02),
        ];
        let v = verdict(2, &e);
        assert_eq!((v.pick, v.decided_by), (Some(0), Decision::Toss));
        assert!(reasons(&v, &e, &c)[1].contains("coin toss"));
        // A screened-out entry with one run inside the leader's range is within noise but
        // too little measured to weigh: the leader.
        let e = vec![entry(&[200.0, 210.0, 205.0], 100.0, 0.02), {
            let mut x = entry(&[201.0], 10.0, 0.0);
            x.fate = Fate::Screened;
            x
        }];
        let v = verdict(2, &e);
        assert_eq!(
            (v.pick, v.within_noise.clone(), v.decided_by),
            (Some(0), vec![1], Decision::Toss)
        );
    }

    #[test]
    fn a_leader_with_fewer_than_three_runs_is_a_screen_verdict() {
        let c = contenders(
            &[ProtocolKind::Silo, ProtocolKind::Mocc, ProtocolKind::TicToc],
            &Shape::default(),
        );
        let e = vec![
            entry(&[200.0], 10.0, 0.0),
            entry(&[180.0], 10.0, 0.0), // within 15 %
            entry(&[100.0], 10.0, 0.0),
        ];
        let v = verdict(2, &e);
        assert_eq!(
            (v.pick, v.decided_by, v.within_noise.clone()),
            (Some(0), Decision::Screen, vec![1])
        );
        let r = reasons(&v, &e, &c);
        assert!(r[0].contains("over 1 run only"), "{r:?}");
        assert!(
            r[0].contains("within 15 % of it, as close as one run's noise often is: mocc"),
            "{r:?}"
        );
    }

    #[test]
    fn the_reasons_name_the_aborts_and_the_mechanism() {
        let c = contenders(&[ProtocolKind::Mocc, ProtocolKind::Silo], &Shape::default());
        let mut mocc = entry(&[300.0, 310.0, 305.0], 50.0, 0.02);
        let mut silo = entry(&[100.0, 110.0, 105.0], 500.0, 0.40);
        for s in &mut silo.samples {
            s.aborts =
                [("read-validation".to_string(), 70), ("lock-conflict".to_string(), 30)].into();
        }
        for s in &mut mocc.samples {
            s.aborts = [("lock-conflict".to_string(), 10)].into();
        }
        let e = vec![mocc, silo];
        let v = verdict(2, &e);
        let r = reasons(&v, &e, &c);
        assert!(
            r[1].contains("silo aborts 40 % of its attempts, 70 % of them read validations"),
            "{r:?}"
        );
        assert!(r[1].contains("mocc aborts 2.0 % of its attempts"), "{r:?}");
        assert!(r[1].contains("locks the records whose validations fail"), "{r:?}");
        // No contention: the operation cost decides.
        let e = vec![
            entry(&[300.0, 310.0, 305.0], 50.0, 0.0),
            entry(&[100.0, 110.0, 105.0], 50.0, 0.001),
        ];
        let v = verdict(2, &e);
        assert!(reasons(&v, &e, &c)[1].contains("hardly any conflicts"));
    }

    #[test]
    fn across_thread_counts_the_pick_is_the_one_that_loses_least() {
        let c = contenders(
            &[ProtocolKind::Silo, ProtocolKind::Mocc, ProtocolKind::TicToc],
            &Shape::default(),
        );
        // silo wins at 2 threads, mocc at 8; tictoc is second at both and loses least.
        let at2 = vec![
            entry(&[200.0, 202.0, 201.0], 10.0, 0.0),
            entry(&[120.0, 121.0, 122.0], 10.0, 0.0),
            entry(&[180.0, 181.0, 182.0], 10.0, 0.0),
        ];
        let at8 = vec![
            entry(&[100.0, 101.0, 102.0], 10.0, 0.0),
            entry(&[200.0, 202.0, 201.0], 10.0, 0.0),
            entry(&[180.0, 181.0, 182.0], 10.0, 0.0),
        ];
        let fields = vec![at2, at8];
        let vs: Vec<Verdict> = [2, 8].iter().zip(&fields).map(|(&t, f)| verdict(t, f)).collect();
        assert_eq!(vs[0].pick, Some(0));
        assert_eq!(vs[1].pick, Some(1));
        let o = overall(&vs, &fields);
        assert_eq!(o.pick, Some(2));
        assert!(!o.everywhere);
        assert!((o.worst_ratio - 181.0 / 201.0).abs() < 1e-9);
        let r = overall_reasons(&o, &vs, &fields, &c);
        assert!(r[0].contains("silo at 2 threads, mocc at 8 threads"), "{r:?}");
        // The same pick everywhere.
        let fields = vec![fields[0].clone(), fields[0].clone()];
        let vs: Vec<Verdict> = [2, 8].iter().zip(&fields).map(|(&t, f)| verdict(t, f)).collect();
        let o = overall(&vs, &fields);
        assert_eq!((o.pick, o.everywhere), (Some(0), true));
    }
}
