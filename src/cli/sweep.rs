//! `txlab sweep`: `run` over a grid of flag values, appending one JSON line per measured run.
//!
//! Each point is a `run` command line: the sweep's own run flags plus one value of each
//! `--vary` parameter, parsed and validated by `run`'s own rules (so errors read the same), all
//! before anything is measured. Points whose databases hold the same data (YCSB's θ, read
//! ratio, threads, ... change only the transactions) share one load per protocol; protocols
//! take turns within each point's repeats, as `run --repeat` does.

use super::run::{create_output, usage, Bench, Failure, Plan};
use super::SweepArgs;
use crate::experiment::results::{self, Axis, SweepDef, SweepPos};
use crate::protocols::ProtocolKind;
use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

/// Flags that belong to `sweep` itself, with the number of values each takes; everything else
/// on its command line is a `run` flag shared by every point.
const OWN_FLAGS: [(&str, usize); 6] =
    [("--vary", 1), ("--out", 1), ("--resume", 0), ("--fresh", 0), ("--emit", 2), ("--point", 1)];

/// `run` flags a sweep cannot vary, and why.
const FIXED: [(&str, &str); 4] = [
    ("protocol", "list protocols with -p; every point runs each of them"),
    ("repeat", "--repeat applies to every point"),
    ("json", "a sweep writes its results to --out"),
    ("csv", "a sweep writes its results to --out"),
];

/// The `run` flags among a sweep's arguments (its own flags and their values removed).
pub(super) fn base_flags(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let own = OWN_FLAGS.iter().find(|(f, _)| a == f || a.starts_with(&format!("{f}=")));
        match own {
            Some((f, n)) => i += 1 + if a.len() > f.len() { n.saturating_sub(1) } else { *n },
            None => {
                out.push(a.clone());
                i += 1;
            }
        }
    }
    out
}

/// Parses `--vary NAME=V1,V2,...` into an axis. Values are separated by commas, or by
/// semicolons when a value itself holds commas (`mix=50,50,0,0,0;45,43,4,4,4`).
fn axis(spec: &str) -> Result<Axis, Failure> {
    let (name, list) = spec
        .split_once('=')
        .ok_or_else(|| usage(format!("--vary {spec}: expected NAME=V1,V2,...")))?;
    let name = name.trim().trim_start_matches('-').replace('_', "-");
    let sep = if list.contains(';') { ';' } else { ',' };
    let values: Vec<String> = list.split(sep).map(|v| v.trim().to_string()).collect();
    if list.trim().is_empty() || values.iter().any(String::is_empty) {
        return Err(usage(format!("--vary {spec}: a value is empty (expected NAME=V1,V2,...)")));
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(usage(format!("--vary {spec}: {v} is listed twice")));
        }
    }
    if let Some((_, why)) = FIXED.iter().find(|(f, _)| *f == name) {
        return Err(usage(format!("--vary {name}: cannot be varied ({why})")));
    }
    Ok(Axis { name, values })
}

/// The command-line tokens that set `name` to `value` for `run`: a switch (`--np`, `--rmw`) is
/// given or left out for `true`/`false`.
fn tokens(name: &str, value: &str) -> Result<Vec<String>, Failure> {
    let run = super::run_command();
    let arg = run.get_arguments().find(|a| a.get_long() == Some(name)).ok_or_else(|| {
        usage(format!("--vary {name}: txlab run has no flag --{name} (see txlab run --help)"))
    })?;
    if matches!(arg.get_action(), clap::ArgAction::SetTrue) {
        return match value {
            "true" | "yes" | "on" => Ok(vec![format!("--{name}")]),
            "false" | "no" | "off" => Ok(Vec::new()),
            _ => Err(usage(format!(
                "--vary {name}={value}: --{name} is a switch (values: true, false)"
            ))),
        };
    }
    Ok(vec![format!("--{name}"), value.to_string()])
}

/// A validated sweep: its definition and every point's plan.
pub(super) struct Sweep {
    pub def: SweepDef,
    pub plans: Vec<Plan>,
}

impl Sweep {
    /// Validates the sweep defined by `base` run flags and `vary` specs: every point's `run`
    /// command must be valid.
    pub fn new(base: Vec<String>, vary: &[String]) -> Result<Sweep, Failure> {
        if vary.is_empty() {
            return Err(usage("sweep needs at least one --vary NAME=V1,V2,..."));
        }
        let grid = vary.iter().map(|v| axis(v)).collect::<Result<Vec<_>, _>>()?;
        for (i, a) in grid.iter().enumerate() {
            if grid[..i].iter().any(|b| b.name == a.name) {
                return Err(usage(format!("--vary {}: varied twice", a.name)));
            }
            tokens(&a.name, &a.values[0])?;
        }
        let given = super::parse_run(&base).map_err(usage)?.1;
        let run = super::run_command();
        for a in &grid {
            let id = a.name.replace('-', "_");
            // A repeatable flag (`--opt`) adds the varied value to those given.
            let repeatable = run.get_arguments().any(|r| {
                r.get_long() == Some(a.name.as_str())
                    && matches!(r.get_action(), clap::ArgAction::Append)
            });
            if !repeatable
                && given.value_source(&id) == Some(clap::parser::ValueSource::CommandLine)
            {
                return Err(usage(format!(
                    "--{} is given both as a flag and in --vary; give it once",
                    a.name
                )));
            }
        }
        let def = SweepDef { base, grid };
        let mut plans = Vec::with_capacity(def.points());
        for i in 0..def.points() {
            let values = def.point(i);
            let mut argv = def.base.clone();
            for (name, value) in &values {
                argv.extend(tokens(name, value)?);
            }
            let here =
                || values.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ");
            let args =
                super::parse_run(&argv).map_err(|e| usage(format!("--vary {}: {e}", here())))?.0;
            let mut plan = Plan::new(&args).map_err(|f| match f {
                Failure::Usage(m) => usage(format!("--vary {}: {m}", here())),
                other => other,
            })?;
            if plan.logs.len() > 1 {
                return Err(usage(
                    "a sweep takes one --log manager; compare managers with txlab run --log off,per-worker,central",
                ));
            }
            plan.argv = argv.clone();
            plans.push(plan);
        }
        // One database serves all points with its data, so it gets room for the most workers.
        let most = plans.iter().map(|p| p.run_cfg.threads).max().unwrap_or(1);
        for p in &mut plans {
            p.db_opts.max_workers = most + 8;
            p.config["database"] = serde_json::to_value(&p.db_opts).expect("serializable");
        }
        Ok(Sweep { def, plans })
    }

    /// The runs to make, in order, and for each point the data keys whose databases stay
    /// loaded while it runs.
    ///
    /// Points are grouped by the data they load (first appearance first); within a group,
    /// rounds of repeats in which the protocols take turns when all of their databases fit in
    /// memory at once, else each protocol's points back to back. Groups whose data differs
    /// only in the protocol options (a sweep over `--opt`: each option set builds its own
    /// database) form a family: when all of the family's databases fit side by side, its
    /// points take turns round by round too, so that an option's effect is not confounded with
    /// the machine's drift between points run one after another.
    fn schedule(&self, only: Option<usize>) -> (Vec<Run>, Vec<Vec<String>>) {
        let mut groups: Vec<Group> = Vec::new();
        for (i, p) in self.plans.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            match groups.iter_mut().find(|(k, _)| *k == p.data_key) {
                Some((_, pts)) => pts.push(i),
                None => groups.push((p.data_key.clone(), vec![i])),
            }
        }
        let mut families: Vec<(String, Vec<Group>)> = Vec::new();
        for g in groups {
            let f = family_of(&g.0);
            match families.iter_mut().find(|(k, _)| *k == f) {
                Some((_, gs)) => gs.push(g),
                None => families.push((f, vec![g])),
            }
        }
        let mut order = Vec::new();
        let mut keep = vec![Vec::new(); self.plans.len()];
        for (_, groups) in families {
            let first = &self.plans[groups[0].1[0]];
            let n = first.protocols.len();
            if groups.len() > 1 && first.fits_side_by_side(n * groups.len()) {
                let keys: Vec<String> = groups.iter().map(|(k, _)| k.clone()).collect();
                let mut points: Vec<usize> = groups.iter().flat_map(|(_, p)| p.clone()).collect();
                points.sort_unstable();
                for &pt in &points {
                    keep[pt] = keys.clone();
                }
                for round in 0..first.repeat {
                    for &pt in &points {
                        for k in 0..n {
                            order.push((pt, (round as usize + k) % n, round));
                        }
                    }
                }
                continue;
            }
            for (_, points) in groups {
                if first.fits_side_by_side(n) {
                    for &pt in &points {
                        for round in 0..first.repeat {
                            for k in 0..n {
                                order.push((pt, (round as usize + k) % n, round));
                            }
                        }
                    }
                } else {
                    for proto in 0..n {
                        for &pt in &points {
                            order.extend((0..first.repeat).map(|round| (pt, proto, round)));
                        }
                    }
                }
            }
        }
        (order, keep)
    }
}

/// One run of a sweep: (point, protocol index, repeat).
type Run = (usize, usize, u32);
/// Points that load the same data: (data key, points).
type Group = (String, Vec<usize>);

/// A data key without its protocol options: the points of one family load the same rows and
/// differ only in the options their databases are built with.
fn family_of(data_key: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(data_key).expect("a data key is JSON");
    if let Some(o) = v.as_object_mut() {
        o.remove("protocol_options");
    }
    v.to_string()
}

pub(super) fn sweep(args: &SweepArgs, raw: &[String]) -> Result<(), Failure> {
    for (flag, given) in [("json", args.run.json.is_some()), ("csv", args.run.csv.is_some())] {
        if given {
            return Err(usage(format!(
                "--{flag} applies to run; a sweep writes its results to --out"
            )));
        }
    }
    let sweep = Sweep::new(base_flags(raw), &args.vary)?;
    if let Some(p) = args.point {
        if p >= sweep.plans.len() {
            return Err(usage(format!(
                "--point {p} is out of range (0 to {}: the sweep has {} points)",
                sweep.plans.len() - 1,
                sweep.plans.len()
            )));
        }
    }
    match (&args.emit, &args.out) {
        (Some(emit), out) => super::slurm::emit(&sweep, emit, out.as_deref()),
        (None, Some(out)) => {
            let existing = match (args.resume, args.fresh) {
                (true, _) => Existing::Resume,
                (_, true) => Existing::Fresh,
                _ => Existing::Refuse,
            };
            execute(&sweep, out, existing, args.point)
        }
        (None, None) => Err(usage("sweep needs --out FILE.jsonl")),
    }
}

/// What a sweep does with a results file that holds runs already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Existing {
    /// Refuses to touch it.
    Refuse,
    /// Measures only the runs it lacks (the file's runs must be of the same sweep and origin).
    Resume,
    /// Starts it again.
    Fresh,
}

/// Runs a validated sweep, appending to `out` (after the runs it already holds, with
/// `Existing::Resume`); `only` restricts it to one point.
pub(super) fn execute(
    sweep: &Sweep,
    out: &Path,
    existing: Existing,
    only: Option<usize>,
) -> Result<(), Failure> {
    let exists = out.metadata().is_ok_and(|m| m.len() > 0);
    let mut done: HashSet<(usize, String, u32)> = HashSet::new();
    let mut file = if exists && existing != Existing::Fresh {
        if existing == Existing::Refuse {
            return Err(usage(format!(
                "--out {}: the file exists; add --resume to finish the sweep it holds, --fresh \
                 to measure it again, or choose another file",
                out.display()
            )));
        }
        let read = results::read(out, true).map_err(|e| usage(format!("--resume: {e}")))?;
        let here = results::Origin::current();
        for r in &read.records {
            let origin = results::Origin::of(&r.value);
            if origin != here {
                return Err(usage(format!(
                    "{} line {} was measured by {origin}; this is {here}: runs of different \
                     revisions, builds or machines do not mix in one results file; add --fresh \
                     to measure again into it, or choose another --out",
                    out.display(),
                    r.line
                )));
            }
            if r.sweep.def != sweep.def {
                return Err(usage(format!(
                    "{} line {} belongs to another sweep (run flags `{}`, varying {}); give \
                     the same flags, add --fresh to measure this one into the file, or choose \
                     another --out",
                    out.display(),
                    r.line,
                    r.sweep.def.base.join(" "),
                    r.sweep.def.grid.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
            done.insert((r.sweep.point, r.protocol.clone(), r.repeat));
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(out)
            .map_err(|e| usage(format!("--out {}: {e}", out.display())))?;
        // A line cut off by a kill is dropped: its run is measured again.
        file.set_len(read.complete_len)
            .map_err(|e| Failure::Run(format!("--out {}: {e}", out.display())))?;
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))
            .map_err(|e| Failure::Run(format!("--out {}: {e}", out.display())))?;
        file
    } else {
        create_output("--out", out)?
    };
    let (order, keep) = sweep.schedule(only);
    let order: Vec<Run> = order
        .into_iter()
        .filter(|&(pt, k, round)| {
            !done.contains(&(pt, sweep.plans[pt].protocols[k].name().to_string(), round))
        })
        .collect();
    let points = sweep.plans.len();
    let chosen = only.map_or(points, |_| 1);
    let total_runs = chosen * sweep.plans[0].protocols.len() * sweep.plans[0].repeat as usize;
    eprintln!(
        "sweep: {} x {} protocol(s) x {} run(s) = {total_runs} runs{}; results to {}",
        match only {
            Some(p) => format!("point {} of {points}", p + 1),
            None => format!("{points} point(s)"),
        },
        sweep.plans[0].protocols.len(),
        sweep.plans[0].repeat,
        if total_runs == order.len() {
            String::new()
        } else {
            format!(", {} already in the file", total_runs - order.len())
        },
        out.display()
    );
    for line in sweep.plans[0].announce().iter().skip(1) {
        eprintln!("{line}");
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(order.len() as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("[{bar:20}] {pos}/{len} runs  {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let interrupt = super::interrupt::Interrupt::install();
    let mut bench = Bench::default();
    let log = |line: String| bar.suspend(|| eprintln!("{line}"));
    let started = Instant::now();
    for (n, &(pt, k, round)) in order.iter().enumerate() {
        if interrupt.requested() {
            bar.finish_and_clear();
            return Err(Failure::Interrupted(format!(
                "interrupted: {n} of {} runs done and written to {}; run the same command with \
                 --resume to finish",
                order.len(),
                out.display()
            )));
        }
        let plan = &sweep.plans[pt];
        let kind: ProtocolKind = plan.protocols[k];
        let values = sweep.def.point(pt);
        let here = values.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ");
        let eta = if n == 0 {
            String::new()
        } else {
            let per = started.elapsed().as_secs_f64() / n as f64;
            format!("  ETA {}", clock((order.len() - n) as f64 * per))
        };
        bar.set_message(format!("point {}/{points} {here} {}{eta}", pt + 1, kind.name()));
        // The family's databases stay while its points take turns.
        bench.keep(keep[pt].clone());
        let mut report = bench.measure(plan, kind, &log)?;
        report.repeat = round;
        let pos = SweepPos { def: sweep.def.clone(), point: pt, values };
        results::append(&mut file, &results::record(&report, &pos))
            .map_err(|e| Failure::Run(format!("--out {}: {e}", out.display())))?;
        bar.suspend(|| {
            println!(
                "point {}/{points} [{here}] {} run {}/{}: {:.0} txn/s, abort ratio {:.4}, p99 {:.1} \
                 us{}",
                pt + 1,
                kind.name(),
                round + 1,
                plan.repeat,
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
        bar.inc(1);
        // A protocol's database goes after its last run in this group of points.
        let later = order[n + 1..]
            .iter()
            .any(|&(p2, k2, _)| k2 == k && sweep.plans[p2].data_key == plan.data_key);
        if !later {
            bench.release(kind, &plan.data_key);
        }
    }
    bar.finish_and_clear();
    eprintln!(
        "sweep done: {} runs in {}; results in {}",
        order.len(),
        clock(started.elapsed().as_secs_f64()),
        out.display()
    );
    Ok(())
}

/// Seconds as `1h02m`, `3m05s` or `42s`.
pub(super) fn clock(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn own_flags_are_taken_out_of_the_base() {
        let raw = strings(&[
            "-p",
            "silo",
            "--vary",
            "threads=1,2",
            "--out=r.jsonl",
            "--theta",
            "0.9",
            "--resume",
            "--fresh",
            "--emit",
            "slurm",
            "dir",
            "--point",
            "3",
            "--vary=theta=0,1",
        ]);
        assert_eq!(base_flags(&raw), strings(&["-p", "silo", "--theta", "0.9"]));
    }

    #[test]
    fn axes_split_on_commas_or_semicolons() {
        let a = axis("threads=1,2, 4").ok().unwrap();
        assert_eq!((a.name.as_str(), a.values), ("threads", strings(&["1", "2", "4"])));
        let a = axis("--read_ratio=0.5").ok().unwrap();
        assert_eq!(a.name, "read-ratio");
        let a = axis("mix=50,50,0,0,0;45,43,4,4,4").ok().unwrap();
        assert_eq!(a.values, strings(&["50,50,0,0,0", "45,43,4,4,4"]));
    }

    fn error(r: Result<impl Sized, Failure>) -> String {
        match r {
            Err(Failure::Usage(m)) => m,
            Err(_) => "not a usage error".into(),
            Ok(_) => "accepted".into(),
        }
    }

    #[test]
    fn bad_axes_are_refused_with_one_line() {
        assert_eq!(error(axis("threads")), "--vary threads: expected NAME=V1,V2,...");
        assert_eq!(
            error(axis("threads=")),
            "--vary threads=: a value is empty (expected NAME=V1,V2,...)"
        );
        assert_eq!(
            error(axis("threads=1,,2")),
            "--vary threads=1,,2: a value is empty (expected NAME=V1,V2,...)"
        );
        assert_eq!(error(axis("threads=1,1")), "--vary threads=1,1: 1 is listed twice");
        assert!(error(axis("protocol=silo")).starts_with("--vary protocol: cannot be varied"));
        assert_eq!(
            error(tokens("nonsense", "1")),
            "--vary nonsense: txlab run has no flag --nonsense (see txlab run --help)"
        );
        assert_eq!(tokens("np", "true").ok().unwrap(), strings(&["--np"]));
        assert!(tokens("np", "false").ok().unwrap().is_empty());
        assert!(error(tokens("np", "2")).contains("is a switch"));
    }

    #[test]
    fn points_are_validated_by_runs_rules_before_anything_runs() {
        let base = strings(&["--records", "1000"]);
        assert_eq!(
            error(Sweep::new(base.clone(), &strings(&["theta=0.5,2"]))),
            "--vary theta=2: --theta 2 is out of range (0 to 0.999)"
        );
        assert_eq!(
            error(Sweep::new(base.clone(), &strings(&["records=10,20"]))),
            "--records is given both as a flag and in --vary; give it once"
        );
        assert_eq!(
            error(Sweep::new(base.clone(), &[])),
            "sweep needs at least one --vary NAME=V1,V2,..."
        );
        let s = Sweep::new(base, &strings(&["threads=1,3", "theta=0,0.9"])).ok().unwrap();
        assert_eq!(s.plans.len(), 4);
        assert_eq!(s.plans[3].run_cfg.threads, 3);
        // Every point's database has room for the largest point's workers.
        assert!(s.plans.iter().all(|p| p.db_opts.max_workers == 11));
        // θ and threads change no data: one load serves all four points.
        assert!(s.plans.iter().all(|p| p.data_key == s.plans[0].data_key));
        let r = Sweep::new(strings(&[]), &strings(&["records=1000,2000"])).ok().unwrap();
        assert_ne!(r.plans[0].data_key, r.plans[1].data_key);
    }

    /// A sweep over one protocol's options takes turns between the options round by round
    /// (each option set has its own database, all kept loaded), so that drift between points
    /// does not pass for an option's effect; other varied parameters of the same data keep
    /// their order, and a sweep of other data runs group by group.
    #[test]
    fn option_points_take_turns_round_by_round() {
        let base = strings(&["-p", "cicada", "--records", "1000", "--repeat", "2"]);
        let s = Sweep::new(base.clone(), &strings(&["opt=cicada:sort=on,cicada:sort=off"]));
        let s = s.map_err(|e| error(Err::<(), _>(e))).unwrap();
        let (order, keep) = s.schedule(None);
        assert_eq!(order, [(0, 0, 0), (1, 0, 0), (0, 0, 1), (1, 0, 1)]);
        assert_eq!(keep[0].len(), 2, "both option sets' databases stay");
        assert_eq!(keep[0], keep[1]);
        let (one, keep) = s.schedule(Some(1));
        assert_eq!((one, keep[1].len()), (vec![(1, 0, 0), (1, 0, 1)], 0));
        let base = strings(&["-p", "cicada", "--repeat", "2"]);
        let r = Sweep::new(base, &strings(&["records=1000,2000"])).ok().unwrap();
        let (order, keep) = r.schedule(None);
        assert_eq!(order, [(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1)], "other data: in turn");
        assert!(keep.iter().all(Vec::is_empty));
    }

    /// A varied `--opt` adds to the options given as flags (a preset's fixed options plus the
    /// one its factor analysis turns off); the same option in both is an error of `run`'s.
    #[test]
    fn a_varied_option_adds_to_the_options_given() {
        let base = strings(&["-p", "cicada", "--opt", "cicada:external-consistency=off"]);
        let s = Sweep::new(base.clone(), &strings(&["opt=cicada:sort=off,cicada:wait=off"]))
            .ok()
            .unwrap();
        let opts: Vec<Vec<(String, String)>> = s.plans.iter().map(|p| p.opts.clone()).collect();
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            opts,
            [
                vec![pair("cicada:external-consistency", "off"), pair("cicada:sort", "off")],
                vec![pair("cicada:external-consistency", "off"), pair("cicada:wait", "off")],
            ]
        );
        assert_eq!(
            error(Sweep::new(base, &strings(&["opt=cicada:external-consistency=on"]))),
            "--vary opt=cicada:external-consistency=on: --opt cicada:external-consistency is \
             given twice"
        );
    }

    #[test]
    fn clock_reads_well() {
        assert_eq!(clock(42.4), "42s");
        assert_eq!(clock(185.0), "3m05s");
        assert_eq!(clock(3720.0), "1h02m");
    }
}
