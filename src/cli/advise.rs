//! `txlab advise`: which protocol to use for a workload, measured and checked.
//!
//! The command line around [`crate::experiment::advice`], which holds the rules (contenders,
//! halving, verdicts, reasons): this file builds a `run` plan per contender and thread count
//! from the user's `run` flags (so workload flags and their errors read as `run`'s), loads every
//! contender's database once, spends the budget round by round with the contenders taking
//! turns, checks the finalists' recorded histories, and writes the ranking, the recommendation
//! and its reasons to the terminal, `advice.json`, the results (`results.jsonl`, one record per
//! run, readable by `txlab report`, `plot` and `compare`) and an HTML report.

use super::output::Output;
use super::run::{usage, Bench, Failure, Plan};
use super::sweep::clock;
use super::AdviseArgs;
use crate::engine::{Isolation, RunReport};
use crate::experiment::advice::{self, Contender, Entry, Fate, Overall, Sample, Shape, Verdict};
use crate::experiment::distinguish;
use crate::experiment::report::{self, Extra, Section, Table};
use crate::experiment::results::{self, Axis, SweepDef, SweepPos};
use crate::protocols::ProtocolKind;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// `advise`'s own flags (long name, short name, values taken): removed from the `run` flags.
const OWN: [(&str, Option<&str>, usize); 6] = [
    ("--threads", Some("-t"), 1),
    ("--budget", None, 1),
    ("--out", None, 1),
    ("--isolation", None, 1),
    ("--strict", None, 0),
    ("--protocol", Some("-p"), 1),
];

/// `run` flags that advise sets itself, and why.
const CONTROLLED: [(&str, Option<&str>, &str); 11] = [
    ("--duration", Some("-d"), "advise sets the runs' length from --budget"),
    ("--warmup", None, "advise sets the runs' warm-up from --budget"),
    ("--txns", None, "advise measures timed runs, sized by --budget"),
    ("--repeat", None, "advise decides the repeats (successive halving)"),
    ("--json", None, "advise writes its results into --out"),
    ("--csv", None, "advise writes its results into --out"),
    ("--record-history", None, "advise checks its finalists' recorded histories itself"),
    (
        "--opt",
        None,
        "advise sets each protocol's options by its rules (txlab advise --help); measure \
         options of your own with txlab run --opt",
    ),
    ("--mix-at", None, "advise measures the workload's mix as it is"),
    ("--ack-file", None, "advise does not crash-test"),
    ("--crash-at", None, "advise does not crash-test"),
];

/// Durability flags (left out of the finalists' checks, which record histories instead).
const DURABILITY: [(&str, usize); 6] = [
    ("--log-dir", 1),
    ("--log", 1),
    ("--sync", 1),
    ("--group-commit-ms", 1),
    ("--log-buffer-kb", 1),
    ("--checkpoint-interval", 1),
];

/// The budget when none is given.
const DEFAULT_BUDGET: Duration = Duration::from_secs(300);
/// The shortest budget taken.
const MIN_BUDGET: Duration = Duration::from_secs(5);
/// The shortest run: a window of 0.2 s after 0.1 s of warm-up.
const MIN_WINDOW_S: f64 = 0.2;
const MIN_WARMUP_S: f64 = 0.1;
/// Runs longer than this add little; a budget that would make them longer ends early.
const MAX_WINDOW_S: f64 = 10.0;
/// Transactions per thread of a finalist's check.
const CHECK_TXNS: u64 = 2_000;
/// Finalists checked at most.
const FINALISTS: usize = 3;

/// Whether `token` is `flag` (`--flag`, `--flag=V`, `-f`, `-fV`), and whether it carries its
/// value.
fn is_flag(token: &str, long: &str, short: Option<&str>) -> Option<bool> {
    if token == long || Some(token) == short {
        return Some(false);
    }
    if token.starts_with(&format!("{long}=")) {
        return Some(true);
    }
    match short {
        Some(s) if token.starts_with(s) && token.len() > s.len() && !token.starts_with("--") => {
            Some(true)
        }
        _ => None,
    }
}

/// `tokens` without the flags `drop` (long, short, values) and their values; the values of
/// the last one named `keep` are returned.
fn strip(tokens: &[String], drop: &[(&str, Option<&str>, usize)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match drop.iter().find_map(|&(l, s, n)| is_flag(&tokens[i], l, s).map(|inline| (inline, n)))
        {
            Some((inline, n)) => i += 1 + if inline { 0 } else { n },
            None => {
                out.push(tokens[i].clone());
                i += 1;
            }
        }
    }
    out
}

/// The values given to `long`/`short` in `tokens`, each split at commas.
fn values_of(tokens: &[String], long: &str, short: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if let Some(inline) = is_flag(&tokens[i], long, short) {
            let v = if inline {
                let t = &tokens[i];
                t.strip_prefix(&format!("{long}="))
                    .or_else(|| short.and_then(|s| t.strip_prefix(s)))
                    .unwrap_or_default()
                    .to_string()
            } else {
                i += 1;
                tokens.get(i).cloned().unwrap_or_default()
            };
            out.extend(v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
        }
        i += 1;
    }
    out
}

/// Parses `--budget`.
fn budget(text: Option<&str>) -> Result<Duration, Failure> {
    let Some(text) = text else {
        return Ok(DEFAULT_BUDGET);
    };
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        usage(format!("--budget '{text}' is not a duration ({e}; e.g. 90s, 5m, 1h)"))
    })?;
    if d < MIN_BUDGET || d > Duration::from_secs(24 * 3600) {
        return Err(usage(format!("--budget '{text}' is out of range (5s to 24h)")));
    }
    Ok(d)
}

/// The thread counts: `--threads LIST`, or the cores and four times as many.
fn thread_counts(tokens: &[String], cores: usize) -> Result<Vec<usize>, Failure> {
    let given = values_of(tokens, "--threads", Some("-t"));
    if given.is_empty() {
        return Ok(vec![cores, 4 * cores]);
    }
    let mut out: Vec<usize> = Vec::new();
    for v in given {
        let n: usize = v
            .parse()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| usage(format!("--threads {v} is out of range (1 to 1024)")))?;
        if out.contains(&n) {
            return Err(usage(format!("--threads lists {n} twice")));
        }
        out.push(n);
    }
    Ok(out)
}

/// The process's resident memory in MiB.
fn resident_mib() -> Option<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (page > 0).then(|| pages * page as f64 / (1 << 20) as f64)
}

/// What a finalist's check found.
#[derive(Clone, Debug, serde::Serialize)]
struct Check {
    label: String,
    /// Passed: the history showed nothing the isolation asked for forbids.
    passed: bool,
    committed: usize,
    /// Anomaly classes observed, with counts.
    anomalies: Vec<String>,
    /// Why it failed, when it did.
    error: Option<String>,
}

/// A contender's `run` command line at `threads` threads.
fn argv(base: &[String], c: &Contender, threads: usize, window: (f64, f64)) -> Vec<String> {
    let mut v = base.to_vec();
    // A variant of a protocol logs beside its plain self: DIR/<label>/<protocol>.
    if c.label != c.protocol.name() {
        let mut i = 0;
        while i < v.len() {
            if v[i] == "--log-dir" && i + 1 < v.len() {
                v[i + 1] = Path::new(&v[i + 1]).join(&c.label).display().to_string();
            } else if let Some(dir) = v[i].strip_prefix("--log-dir=") {
                v[i] = format!("--log-dir={}", Path::new(dir).join(&c.label).display());
            }
            i += 1;
        }
    }
    v.extend([
        "-p".to_string(),
        c.protocol.name().to_string(),
        "--threads".into(),
        threads.to_string(),
        "--warmup".into(),
        format!("{:.2}", window.0),
        "--duration".into(),
        format!("{:.2}", window.1),
        "--repeat".into(),
        "1".into(),
    ]);
    for (n, val) in &c.options {
        v.push("--opt".into());
        v.push(format!("{n}={val}"));
    }
    v
}

fn plan_of(argv: &[String]) -> Result<Plan, String> {
    let args = super::parse_run(argv)?.0;
    Plan::new(&args).map_err(|f| match f {
        Failure::Usage(m) | Failure::Run(m) | Failure::Interrupted(m) => m,
    })
}

/// The sample advise keeps of a run.
fn sample_of(r: &RunReport, read_only: &[String]) -> Sample {
    Sample {
        throughput: r.throughput,
        p50_us: r.latency.p50_us,
        p99_us: r.latency.p99_us,
        abort_ratio: r.abort_ratio,
        aborts: r.aborts.clone(),
        read_only_share: r
            .per_type
            .iter()
            .filter(|t| read_only.contains(&t.name))
            .map(|t| t.share)
            .sum(),
        versions_alive: r.versions.as_ref().map(|v| v.alive),
    }
}

/// `txlab advise`; `tokens` is its command line after `advise`. Returns the exit status.
pub(super) fn advise(args: &AdviseArgs, tokens: &[String]) -> Result<i32, Failure> {
    if args.isolation == Isolation::None {
        return Err(usage(
            "--isolation none: advise recommends protocols for serializable or snapshot \
             isolation (nocc, without concurrency control, is a baseline, not a recommendation)",
        ));
    }
    let budget = budget(args.budget.as_deref())?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = thread_counts(tokens, cores)?;
    for &(long, short, why) in &CONTROLLED {
        if tokens.iter().any(|t| is_flag(t, long, short).is_some()) {
            return Err(usage(format!("{long} is not an advise flag: {why}")));
        }
    }
    let candidates: Vec<ProtocolKind> = if args.run.protocol.is_empty() {
        ProtocolKind::ALL.into_iter().filter(|&k| advice::eligible(k, args.isolation)).collect()
    } else {
        let mut v: Vec<ProtocolKind> = Vec::new();
        for &k in &args.run.protocol {
            if !advice::eligible(k, args.isolation) {
                return Err(usage(format!(
                    "--protocol {}: it promises {}, and advise recommends for {} (--isolation \
                     snapshot admits snapshot isolation; nocc is a baseline, never advised)",
                    k.name(),
                    k.caps().isolation.name(),
                    args.isolation.name()
                )));
            }
            if v.contains(&k) {
                return Err(usage(format!("--protocol lists {} twice", k.name())));
            }
            v.push(k);
        }
        v
    };
    let base = strip(tokens, &OWN);
    // The workload's flags, checked once as `run` checks them.
    let probe = plan_of(&argv(
        &base,
        &advice::contenders(&[ProtocolKind::Silo], &Shape::default())[0],
        threads[0],
        (0.5, 2.0),
    ))
    .map_err(usage)?;
    let shape = Shape { read_only_types: probe.read_only_types(), strict: args.strict };
    let contenders = advice::contenders(&candidates, &shape);
    let n = contenders.len();
    // The output directory: an earlier advice in it is never overwritten.
    let out = &args.out;
    if out.exists() && !out.is_dir() {
        return Err(usage(format!("--out {}: not a directory", out.display())));
    }
    let results_path = out.join("results.jsonl");
    if results_path.exists() {
        return Err(usage(format!(
            "--out {}: holds an earlier advice ({}); name another directory or remove it",
            out.display(),
            results_path.display()
        )));
    }
    std::fs::create_dir_all(out).map_err(|e| usage(format!("--out {}: {e}", out.display())))?;
    let mut results_file = std::fs::File::create(&results_path)
        .map_err(|e| usage(format!("--out {}: {e}", results_path.display())))?;
    let report_out = Output::create("--out", &out.join("report.html"))?;
    let json_out = Output::create("--out", &out.join("advice.json"))?;

    // Every contender's plan at every thread count; one that cannot run at a count is out there.
    let most = *threads.iter().max().expect("at least one");
    // Built with a placeholder window, set once the loads have shown what the budget allows.
    let mut plans: Vec<Vec<Result<Plan, String>>> = threads
        .iter()
        .map(|&t| {
            contenders
                .iter()
                .map(|c| {
                    plan_of(&argv(&base, c, t, (0.5, 2.0))).map(|mut p| {
                        p.set_max_workers(most + 8);
                        p
                    })
                })
                .collect()
        })
        .collect();
    let mut fields: Vec<Vec<Entry>> = vec![vec![Entry::new(); n]; threads.len()];
    for (k, row) in plans.iter().enumerate() {
        for (c, p) in row.iter().enumerate() {
            if let Err(e) = p {
                fields[k][c].fate = Fate::Failed(e.clone());
            }
        }
    }
    for line in probe.header() {
        eprintln!("{line}");
    }
    eprintln!(
        "advise: {n} contenders promising {} at {} thread(s), within a budget of {}",
        args.isolation.name(),
        threads.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" and "),
        humantime::format_duration(budget)
    );
    for c in &contenders {
        if !c.options.is_empty() {
            let o: Vec<String> = c.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            eprintln!("  {}: --opt {}: {}", c.label, o.join(" --opt "), c.why);
        }
    }
    let interrupt = super::interrupt::Interrupt::install();
    let started = Instant::now();
    let deadline = started + budget;
    let log = |line: String| eprintln!("{line}");
    // Load each contender's database once (kept for every thread count, when they fit).
    let side_by_side = probe.fits_side_by_side(n);
    let mut bench = Bench::default();
    if side_by_side {
        bench.keep(plans[0].iter().flatten().map(|p| p.data_key.clone()).collect());
    } else {
        eprintln!(
            "note: the {n} contenders' databases do not fit in memory side by side: each run \
             loads its own, and the budget pays for the loads"
        );
    }
    let mut load_s: Vec<f64> = Vec::new();
    let mut memory: Vec<Option<f64>> = vec![None; n];
    for c in 0..n {
        if interrupt.requested() || (!side_by_side && !load_s.is_empty()) {
            break;
        }
        let Some(Ok(plan)) = plans.iter().map(|row| &row[c]).find(|p| p.is_ok()) else {
            continue;
        };
        let before = resident_mib();
        let t = Instant::now();
        match bench.load(plan, contenders[c].protocol, &log) {
            Ok(_) => {
                load_s.push(t.elapsed().as_secs_f64());
                memory[c] = resident_mib().zip(before).map(|(a, b)| (a - b).max(0.0));
            }
            Err(Failure::Usage(e) | Failure::Run(e)) => {
                for f in fields.iter_mut() {
                    f[c].fate = Fate::Failed(e.clone());
                }
            }
            Err(f @ Failure::Interrupted(_)) => return Err(f),
        }
        if !side_by_side {
            bench.release(contenders[c].protocol, &plan.data_key);
        }
    }
    let load_avg =
        if load_s.is_empty() { 1.0 } else { load_s.iter().sum::<f64>() / load_s.len() as f64 };
    // The runs' length: the budget left, less the finalists' checks (a load and about a
    // second each), over the runs the halving plans (a screen and three rounds of two runs
    // for half as many each time).
    let running = |k: usize| fields[k].iter().filter(|e| e.fate == Fate::Running).count();
    let planned: usize = (0..threads.len())
        .map(|k| {
            let m = running(k);
            m + advice::RUNS_PER_ROUND as usize
                * (m.div_ceil(2) + m.div_ceil(4).max(1) + m.div_ceil(8).max(1))
        })
        .sum();
    let per_run_extra = if side_by_side { 0.05 } else { load_avg };
    let left = deadline.saturating_duration_since(Instant::now()).as_secs_f64()
        - FINALISTS as f64 * (load_avg + 1.0);
    let run_s = left / planned.max(1) as f64 - per_run_extra;
    let warmup = (run_s * 0.2).clamp(MIN_WARMUP_S, 1.0);
    let window = (run_s - warmup).clamp(MIN_WINDOW_S, MAX_WINDOW_S);
    if run_s < MIN_WARMUP_S + MIN_WINDOW_S {
        eprintln!(
            "note: --budget {} is short for {} contenders at {} thread count(s): runs are the \
             shortest advise makes ({MIN_WARMUP_S} s warm-up, {MIN_WINDOW_S} s measured), and \
             advise stops when the budget is spent",
            humantime::format_duration(budget),
            n,
            threads.len()
        );
    }
    // Rounded as a user would write them; the plans keep their databases (a plan built
    // afresh would find the log directories its loads created).
    let (warmup, window) = ((warmup * 100.0).round() / 100.0, (window * 100.0).round() / 100.0);
    for p in plans.iter_mut().flatten().flatten() {
        p.set_window(warmup, window);
    }
    eprintln!("runs of {window:.2} s after {warmup:.2} s of warm-up; about {planned} runs planned");
    let def = SweepDef {
        base: base.clone(),
        grid: vec![Axis {
            name: "threads".into(),
            values: threads.iter().map(|t| t.to_string()).collect(),
        }],
    };
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(planned as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("[{bar:20}] {pos}/{len} runs  {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut interrupted = interrupt.requested();
    let mut budget_spent = false;
    let mut runs_done = 0usize;
    let measuring = Instant::now();
    let reserve = Duration::from_secs_f64(FINALISTS as f64 * (load_avg + 1.0));
    'counts: for (k, &t) in threads.iter().enumerate() {
        // This thread count's share of what is left.
        let share = deadline.saturating_duration_since(Instant::now() + reserve)
            / (threads.len() - k) as u32;
        let count_deadline = Instant::now() + share;
        let mut round = 0u32;
        loop {
            let running: Vec<usize> =
                (0..n).filter(|&c| fields[k][c].fate == Fate::Running).collect();
            if running.is_empty() {
                break;
            }
            let reps = if round == 0 { 1 } else { advice::RUNS_PER_ROUND as usize };
            // Later rounds only while the budget left, shared with the thread counts still to
            // come, pays for them.
            if round > 0 {
                let per_run = measuring.elapsed().as_secs_f64() / runs_done.max(1) as f64;
                let left = count_deadline.saturating_duration_since(Instant::now()).as_secs_f64();
                // A tenth over this count's share is let go (the estimate is an average).
                if (running.len() * reps) as f64 * per_run > left + share.as_secs_f64() / 10.0 {
                    budget_spent = true;
                    break;
                }
            }
            for r in 0..reps {
                for j in 0..running.len() {
                    if interrupt.requested() {
                        interrupted = true;
                        break 'counts;
                    }
                    let c = running[(j + r + round as usize + k) % running.len()];
                    let Ok(plan) = &plans[k][c] else { continue };
                    let eta = {
                        let per = measuring.elapsed().as_secs_f64() / runs_done.max(1) as f64;
                        let left = planned.saturating_sub(runs_done) as f64 * per;
                        if runs_done == 0 {
                            String::new()
                        } else {
                            format!("  ETA {}", clock(left))
                        }
                    };
                    bar.set_message(format!(
                        "{t} threads, {}: {}{eta}",
                        if round == 0 { "screen".to_string() } else { format!("round {round}") },
                        contenders[c].label
                    ));
                    let log = |line: String| bar.suspend(|| eprintln!("{line}"));
                    let measured = bench.measure(plan, contenders[c].protocol, &log);
                    let mut report = match measured {
                        Ok(r) => r,
                        Err(Failure::Usage(e) | Failure::Run(e)) => {
                            bar.suspend(|| {
                                eprintln!("{} at {t} threads failed: {e}", contenders[c].label)
                            });
                            fields[k][c].fate = Fate::Failed(e);
                            continue;
                        }
                        Err(f) => return Err(f),
                    };
                    if !side_by_side {
                        bench.release(contenders[c].protocol, &plan.data_key);
                    }
                    fields[k][c].memory_mib = memory[c];
                    runs_done += 1;
                    bar.inc(1);
                    report.repeat = fields[k][c].samples.len() as u32;
                    let sample = sample_of(&report, &shape.read_only_types);
                    bar.suspend(|| {
                        println!(
                            "{t} threads {} {}: {:.0} txn/s, abort ratio {:.4}, p99 {:.1} us{}",
                            if round == 0 {
                                "screen".to_string()
                            } else {
                                format!("round {round}")
                            },
                            contenders[c].label,
                            report.throughput,
                            report.abort_ratio,
                            report.latency.p99_us,
                            if report.warnings.is_empty() {
                                String::new()
                            } else {
                                format!(" (warning: {})", report.warnings.join("; "))
                            }
                        )
                    });
                    report.protocol = contenders[c].label.clone();
                    let pos = SweepPos {
                        def: def.clone(),
                        point: k,
                        values: vec![("threads".into(), t.to_string())],
                    };
                    let mut record = results::record(&report, &pos);
                    record["advise"] = serde_json::json!({
                        "label": contenders[c].label,
                        "protocol": contenders[c].protocol.name(),
                        "round": round,
                    });
                    results::append(&mut results_file, &record).map_err(|e| {
                        Failure::Run(format!("--out {}: {e}", results_path.display()))
                    })?;
                    fields[k][c].samples.push(sample);
                    if report.invariant_violation.is_some() {
                        // Only a protocol that promises less than serializability gets here:
                        // a serializable one breaking the invariant failed the run.
                        fields[k][c].fate = Fate::Failed(format!(
                            "broke the workload's invariant: {}",
                            report.invariant_violation.unwrap_or_default()
                        ));
                    }
                }
            }
            let go_on = advice::cut(&mut fields[k], round);
            bar.set_length((runs_done + remaining_plan(&fields, k, round)) as u64);
            if !go_on {
                break;
            }
            round += 1;
        }
    }
    bar.finish_and_clear();
    drop(bench);

    let verdicts: Vec<Verdict> =
        threads.iter().zip(&fields).map(|(&t, f)| advice::verdict(t, f)).collect();
    let overall = advice::overall(&verdicts, &fields);
    // The finalists' checks: the pick, and those within noise of it or picked elsewhere.
    let mut finalists: Vec<usize> = overall.pick.into_iter().collect();
    for v in &verdicts {
        let close = v.leader.into_iter().chain(v.within_noise.iter().copied());
        for c in v.pick.into_iter().chain(close) {
            if finalists.len() < FINALISTS
                && !finalists.contains(&c)
                && fields.iter().all(|f| !matches!(f[c].fate, Fate::Failed(_)))
                && fields.iter().any(|f| f[c].samples.len() >= 2 || v.pick == Some(c))
            {
                finalists.push(c);
            }
        }
    }
    let mut checks: Vec<Check> = Vec::new();
    if !interrupted {
        let base_check = strip(&base, &DURABILITY.map(|(l, n)| (l, None, n)));
        for &c in &finalists {
            if interrupt.requested() {
                interrupted = true;
                break;
            }
            let ct = most.max(2);
            let mut v = argv(&base_check, &contenders[c], ct, (0.0, 1.0));
            // A fixed number of transactions instead of the timed window.
            let at = v.iter().position(|a| a == "--warmup").expect("argv sets it");
            v.drain(at..at + 4);
            v.extend(["--txns".into(), CHECK_TXNS.to_string(), "--record-history".into()]);
            eprintln!(
                "checking {}: {ct} threads x {CHECK_TXNS} transactions, every read and write \
                 recorded",
                contenders[c].label
            );
            let outcome = plan_of(&v).map_err(Failure::Usage).and_then(|p| {
                let mut b = Bench::default();
                b.measure(&p, contenders[c].protocol, &|l| eprintln!("{l}"))
            });
            checks.push(match outcome {
                Ok(r) => {
                    let h = r.history_check.as_ref();
                    let anomalies: Vec<String> = h
                        .map(|h| {
                            h.anomalies
                                .iter()
                                .map(|a| format!("{} ({})", a.class, a.count))
                                .collect()
                        })
                        .unwrap_or_default();
                    // Held to the protocol's own promise (`run --record-history`'s check).
                    let passed = h.is_some_and(|h| h.permitted) && r.invariant_violation.is_none();
                    Check {
                        label: contenders[c].label.clone(),
                        passed,
                        committed: h.map_or(0, |h| h.committed),
                        anomalies,
                        error: r.invariant_violation.clone(),
                    }
                }
                Err(Failure::Usage(e) | Failure::Run(e)) => Check {
                    label: contenders[c].label.clone(),
                    passed: false,
                    committed: 0,
                    anomalies: Vec::new(),
                    error: Some(e),
                },
                Err(f) => return Err(f),
            });
        }
    }
    // A pick whose check failed gives way to the next finalist that passed.
    let failed_check =
        |c: usize| checks.iter().any(|k| k.label == contenders[c].label && !k.passed);
    let recommended = overall
        .pick
        .filter(|&p| !failed_check(p))
        .or_else(|| finalists.iter().copied().find(|&c| !failed_check(c)));

    let durable = probe.db_opts.log.is_some();
    let rendered = Rendered {
        contenders: &contenders,
        fields: &fields,
        verdicts: &verdicts,
        overall: &overall,
        recommended,
        checks: &checks,
        isolation: args.isolation,
        window: (warmup, window),
        interrupted,
        budget_spent,
        durable,
    };
    let advice_text = render_advice(&rendered);
    let tables_text = render_tables(&rendered);
    let text = format!("{tables_text}\n{advice_text}");
    print!("{text}");
    let spent = started.elapsed();
    let json = serde_json::json!({
        "workload": probe.config["command"]["workload"],
        "isolation": args.isolation,
        "strict": args.strict,
        "threads": threads,
        "budget_s": budget.as_secs_f64(),
        "spent_s": spent.as_secs_f64(),
        "warmup_s": warmup,
        "window_s": window,
        "interrupted": interrupted,
        "budget_spent": budget_spent,
        "read_only_types": shape.read_only_types,
        "contenders": contenders,
        "at": threads.iter().zip(&fields).zip(&verdicts).map(|((t, f), v)| serde_json::json!({
            "threads": t,
            "entries": f.iter().zip(&contenders).map(|(e, c)| serde_json::json!({
                "label": c.label,
                "fate": e.fate,
                "runs": e.samples.len(),
                "median_throughput": if e.samples.is_empty() { None } else { Some(e.median()) },
                "memory_mib": e.memory_mib,
                "samples": e.samples,
            })).collect::<Vec<_>>(),
            "verdict": v,
            "reasons": advice::reasons(v, f, &contenders),
        })).collect::<Vec<_>>(),
        "overall": overall,
        "overall_reasons": advice::overall_reasons(&overall, &verdicts, &fields, &contenders),
        "checks": checks,
        "recommended": recommended.map(|c| &contenders[c]),
    });
    let mut json_out = json_out;
    json_out
        .write_all_bytes((serde_json::to_string_pretty(&json).expect("JSON") + "\n").as_bytes())?;
    json_out.finish()?;
    drop(results_file);
    if runs_done == 0 {
        // Nothing measured: no results file to refuse the next advice with.
        let _ = std::fs::remove_file(&results_path);
    } else {
        let records =
            results::read_all(std::slice::from_ref(&results_path)).map_err(Failure::Run)?;
        let section = Section {
            heading: "Advice".into(),
            // With several thread counts, each one's pick and reasons; then the advice, a
            // paragraph per line.
            paragraphs: tables_text
                .lines()
                .filter(|l| l.starts_with("  pick at") || l.starts_with("    - "))
                .chain(advice_text.lines())
                .map(|l| l.trim().trim_start_matches("- ").to_string())
                .filter(|l| !l.is_empty())
                .collect(),
            tables: threads
                .iter()
                .zip(&fields)
                .zip(&verdicts)
                .map(|((&t, f), v)| table(t, f, v, &contenders, durable))
                .collect(),
        };
        let html = report::html(
            &records,
            &[results_path.display().to_string()],
            &Extra {
                title: Some(format!(
                    "txlab advise: {}",
                    probe.header().first().cloned().unwrap_or_default()
                )),
                intro: Some(format!(
                    "Every contender measured at {} thread(s) within a budget of {} ({} spent), \
                     successive halving with interleaved runs of {window:.2} s after {warmup:.2} s \
                     of warm-up. Command: txlab advise {}",
                    threads.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" and "),
                    humantime::format_duration(budget),
                    clock(spent.as_secs_f64()),
                    tokens.join(" ")
                )),
                sections: vec![section],
                ..Default::default()
            },
        )
        .map_err(Failure::Run)?;
        let mut report_out = report_out;
        report_out.write_all_bytes(html.as_bytes())?;
        report_out.finish()?;
        println!(
            "\nwritten: {} (the report), {} (the advice), {} (every run)",
            out.join("report.html").display(),
            out.join("advice.json").display(),
            results_path.display()
        );
    }
    if interrupted {
        return Err(Failure::Interrupted(format!(
            "interrupted after {runs_done} runs: the ranking above is of what was measured{}",
            if runs_done > 0 { format!(", written to {}", out.display()) } else { String::new() }
        )));
    }
    Ok(if recommended.is_some() { 0 } else { super::EXIT_FAILURE })
}

/// The runs still planned after `round` at thread count `k`: the rounds left here, and the
/// thread counts to come.
fn remaining_plan(fields: &[Vec<Entry>], k: usize, round: u32) -> usize {
    let reps = advice::RUNS_PER_ROUND as usize;
    let mut left = 0;
    let here = fields[k].iter().filter(|e| e.fate == Fate::Running).count();
    let mut m = here;
    for _ in round..advice::MAX_ROUNDS {
        left += m * reps;
        m = m.div_ceil(2).max(2).min(m);
    }
    for f in &fields[k + 1..] {
        let m = f.iter().filter(|e| e.fate == Fate::Running).count();
        left += m + reps * (m.div_ceil(2) + m.div_ceil(4).max(1) + m.div_ceil(8).max(1));
    }
    left
}

/// What the text output says.
struct Rendered<'a> {
    contenders: &'a [Contender],
    fields: &'a [Vec<Entry>],
    verdicts: &'a [Verdict],
    overall: &'a Overall,
    recommended: Option<usize>,
    checks: &'a [Check],
    isolation: Isolation,
    window: (f64, f64),
    interrupted: bool,
    budget_spent: bool,
    /// The runs logged: throughput counts durable commits.
    durable: bool,
}

/// An entry's outcome in words.
fn outcome(e: &Entry, c: usize, v: &Verdict) -> String {
    match &e.fate {
        _ if v.pick == Some(c) => "pick".into(),
        _ if v.within_noise.contains(&c) && e.fate == Fate::Running => {
            "within noise of the leader".into()
        }
        Fate::Running if v.leader == Some(c) => "leader".into(),
        Fate::Running => "finalist".into(),
        Fate::Screened if v.within_noise.contains(&c) => {
            "screened out (one run, within the leader's range)".into()
        }
        Fate::Screened => "screened out".into(),
        Fate::Separated(r) if v.within_noise.contains(&c) => format!(
            "left after round {r}, behind that round's leader (its range overlaps this leader's)"
        ),
        Fate::Separated(r) => format!("slower beyond noise after round {r}"),
        Fate::Halved(r) if v.within_noise.contains(&c) => {
            format!("halved after round {r} (still within noise)")
        }
        Fate::Halved(r) => format!("halved after round {r}"),
        Fate::Failed(e) => format!("could not run: {e}"),
    }
}

/// The ranked table at one thread count, for the report.
fn table(t: usize, f: &[Entry], v: &Verdict, contenders: &[Contender], durable: bool) -> Table {
    let standing = distinguish::standings(&f.iter().map(|e| e.throughputs()).collect::<Vec<_>>());
    Table {
        title: format!("At {t} threads"),
        head: [
            "contender",
            "runs",
            if durable { "durable txn/s" } else { "txn/s" },
            "spread",
            "rank",
            "abort ratio",
            "main abort reason",
            "p50 µs",
            "p99 µs",
            "loaded MiB",
            "outcome",
        ]
        .map(String::from)
        .to_vec(),
        rows: v.order.iter().map(|&c| row(c, f, v, contenders, &standing)).collect(),
    }
}

fn row(
    c: usize,
    f: &[Entry],
    v: &Verdict,
    contenders: &[Contender],
    standing: &[Option<distinguish::Standing>],
) -> Vec<String> {
    let e = &f[c];
    let ran = !e.samples.is_empty();
    let num = |x: f64, d: usize| if ran { format!("{x:.d$}") } else { "-".into() };
    let reason = e.abort_reasons();
    let total: u64 = reason.iter().map(|r| r.1).sum();
    vec![
        contenders[c].label.clone(),
        e.samples.len().to_string(),
        if ran { format!("{:.0}", e.median()) } else { "-".into() },
        if e.samples.len() > 1 { format!("{:.1} %", e.spread() * 100.0) } else { "-".into() },
        standing[c].as_ref().map_or("-".into(), |s| s.rank_text()),
        num(e.median_of(|s| s.abort_ratio), 4),
        match reason.first() {
            Some((r, k)) => format!("{r} ({:.0} %)", *k as f64 * 100.0 / total as f64),
            None => "-".into(),
        },
        num(e.median_of(|s| s.p50_us), 1),
        num(e.median_of(|s| s.p99_us), 1),
        e.memory_mib.map_or("-".into(), |m| format!("{m:.0}")),
        outcome(e, c, v),
    ]
}

/// The ranked table of each thread count (with its pick's reasons when there are several), as
/// text.
fn render_tables(r: &Rendered<'_>) -> String {
    let mut s = String::new();
    for (f, v) in r.fields.iter().zip(r.verdicts) {
        let t = table(v.threads, f, v, r.contenders, r.durable);
        let _ = writeln!(
            s,
            "\nAt {} threads (median of each contender's runs of {:.2} s; spread = (max - min) / \
             median; rank: where the noise leaves it):",
            v.threads, r.window.1
        );
        let widths: Vec<usize> = (0..t.head.len())
            .map(|i| {
                t.rows
                    .iter()
                    .map(|row| row[i].chars().count())
                    .chain([t.head[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut l = String::from(" ");
            for (i, c) in cells.iter().enumerate() {
                let w = widths[i];
                if i == 0 || i == 6 || i == cells.len() - 1 {
                    let _ = write!(l, " {c:<w$}");
                } else {
                    let _ = write!(l, " {c:>w$}");
                }
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(s, "{}", line(&t.head));
        for row in &t.rows {
            let _ = writeln!(s, "{}", line(row));
        }
        if r.verdicts.len() > 1 {
            if let Some(p) = v.pick {
                let _ = writeln!(s, "\n  pick at {} threads: {}", v.threads, r.contenders[p].label);
                for reason in advice::reasons(v, f, r.contenders) {
                    let _ = writeln!(s, "    - {reason}");
                }
            }
        }
    }
    s
}

/// The recommendation, its reasons, the runners-up and the checks, as text.
fn render_advice(r: &Rendered<'_>) -> String {
    let mut s = String::new();
    match r.recommended {
        None => {
            let _ = writeln!(
                s,
                "No recommendation: {}",
                if r.fields.iter().flatten().all(|e| e.samples.is_empty()) {
                    "nothing was measured"
                } else {
                    "no finalist passed its check"
                }
            );
        }
        Some(p) => {
            let c = &r.contenders[p];
            let opts = if c.options.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    c.options
                        .iter()
                        .map(|(k, v)| format!("--opt {k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            };
            let _ = writeln!(
                s,
                "Recommendation{}: {}{opts}",
                if r.interrupted { " from what was measured before the interrupt" } else { "" },
                c.label
            );
            if r.overall.pick != Some(p) {
                let _ = writeln!(
                    s,
                    "  - {} was measured best, but failed its check (a txlab bug: please report \
                     it); {} is the next finalist that passed",
                    r.overall.pick.map_or("nothing", |o| r.contenders[o].label.as_str()),
                    c.label
                );
            }
            if r.verdicts.len() == 1 {
                for reason in advice::reasons(&r.verdicts[0], &r.fields[0], r.contenders) {
                    let _ = writeln!(s, "  - {reason}");
                }
            } else {
                for reason in advice::overall_reasons(r.overall, r.verdicts, r.fields, r.contenders)
                {
                    let _ = writeln!(s, "  - {reason}");
                }
            }
            if !c.why.is_empty() {
                let _ = writeln!(s, "  - its options: {}", c.why);
            }
            if c.protocol.caps().isolation == Isolation::Snapshot {
                let seen = r.checks.iter().find(|k| k.label == c.label).map(|k| {
                    if k.anomalies.is_empty() {
                        "its check showed none of them on this workload".to_string()
                    } else {
                        format!("its check showed: {}", k.anomalies.join(", "))
                    }
                });
                let _ = writeln!(
                    s,
                    "  - {} is not serializable: snapshot isolation permits write skew and the                      read-only anomaly (G2-item){}",
                    c.label,
                    seen.map(|x| format!("; {x}")).unwrap_or_default()
                );
            }
            // The leader where it was not the pick, and those within noise of it.
            let runners: Vec<String> = r
                .verdicts
                .iter()
                .flat_map(|v| {
                    v.leader
                        .into_iter()
                        .chain(v.within_noise.iter().copied())
                        .map(move |i| (v.threads, i))
                })
                .filter(|&(_, i)| i != p)
                .map(|(t, i)| format!("{} (at {t} threads)", r.contenders[i].label))
                .collect();
            if !runners.is_empty() {
                let _ = writeln!(s, "  Runners-up within noise: {}", runners.join(", "));
            }
        }
    }
    for ch in r.checks {
        let _ = writeln!(
            s,
            "  check of {}: {}",
            ch.label,
            match (&ch.error, ch.passed) {
                (Some(e), _) => format!("FAILED: {e}"),
                (None, true) if ch.anomalies.is_empty() =>
                    format!("{} committed transactions, history serializable", ch.committed),
                (None, true) => format!(
                    "{} committed transactions; {} permits what it showed: {}",
                    ch.committed,
                    r.isolation.name(),
                    ch.anomalies.join(", ")
                ),
                (None, false) => format!(
                    "FAILED: {} committed transactions, anomalies {} forbids: {}",
                    ch.committed,
                    r.isolation.name(),
                    ch.anomalies.join(", ")
                ),
            }
        );
    }
    if r.checks.is_empty() && r.recommended.is_some() {
        let _ = writeln!(s, "  not checked: interrupted before the finalists' checks");
    }
    if r.budget_spent {
        let _ = writeln!(
            s,
            "  note: the budget ran out before the halving finished; a larger --budget \
             separates the finalists further"
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn advise_flags_are_taken_out_of_the_run_flags_in_every_spelling() {
        let t = strings(&[
            "-w",
            "tpcc",
            "--threads",
            "2,8",
            "-t4",
            "--budget=5m",
            "--strict",
            "-psilo",
            "--protocol",
            "mocc",
            "--warehouses",
            "2",
            "--out",
            "d",
            "--isolation",
            "snapshot",
        ]);
        assert_eq!(strip(&t, &OWN), strings(&["-w", "tpcc", "--warehouses", "2"]));
        assert_eq!(values_of(&t, "--threads", Some("-t")), strings(&["2", "8", "4"]));
        assert_eq!(thread_counts(&t, 2).unwrap(), [2, 8, 4]);
        assert_eq!(thread_counts(&strings(&["-w", "ycsb"]), 2).unwrap(), [2, 8]);
        assert!(is_flag("--threads", "--threads", Some("-t")) == Some(false));
        assert!(is_flag("--threadsx", "--threads", Some("-t")).is_none());
        assert!(is_flag("--txns", "--threads", Some("-t")).is_none());
    }

    #[test]
    fn budgets_parse_as_durations_within_range() {
        assert_eq!(budget(None).unwrap(), DEFAULT_BUDGET);
        assert_eq!(budget(Some("90s")).unwrap(), Duration::from_secs(90));
        assert_eq!(budget(Some("1h")).unwrap(), Duration::from_secs(3600));
        let m = |r: Result<Duration, Failure>| match r {
            Err(Failure::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(m(budget(Some("4s"))).contains("out of range (5s to 24h)"));
        assert!(m(budget(Some("25h"))).contains("out of range"));
        assert!(m(budget(Some("soon"))).starts_with("--budget 'soon' is not a duration"));
    }

    #[test]
    fn a_variant_logs_beside_its_plain_protocol() {
        let shape = Shape { read_only_types: vec!["r".into()], strict: false };
        let c = advice::contenders(&[ProtocolKind::Silo], &shape);
        let base = strings(&["--log-dir", "logs", "-w", "ycsb"]);
        let plain = argv(&base, &c[0], 2, (0.5, 1.0));
        let variant = argv(&base, &c[1], 2, (0.5, 1.0));
        assert_eq!(plain[1], "logs");
        assert_eq!(variant[1], "logs/silo+snapshots");
        assert!(variant.ends_with(&strings(&["--opt", "snapshot-epochs=25"])));
        assert!(plain.windows(2).any(|w| w == ["--duration", "1.00"]));
    }
}
