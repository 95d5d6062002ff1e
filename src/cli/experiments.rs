//! `plot`, `report`, `reproduce`, `merge` and `compare`: the commands that read results files.

use super::output::Output;
use super::run::{minutes, usage, Failure, LOAD_S};
use super::sweep::{execute, Existing, Sweep};
use crate::experiment::figure::{figure, FigureSpec};
use crate::experiment::preset::{self, Verdict};
use crate::experiment::report::{self, ClaimRow, Extra};
use crate::experiment::{compare as cmp, plot as draw, results};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  txlab plot skew.jsonl --x theta --y throughput --out skew.svg\n  \
txlab plot tpcc.jsonl --x warehouses --y NewOrder.p99_us --out p99.png\n  txlab plot a.jsonl b.jsonl \
--x threads --y abort_ratio --where theta=0.99 --log-y --out aborts.svg"
)]
pub(super) struct PlotArgs {
    /// Results files (JSON lines from `txlab sweep`)
    #[arg(required = true, value_name = "FILE.jsonl")]
    files: Vec<PathBuf>,
    /// The varied parameter on the x axis (e.g. threads, theta, records), or `time`: each
    /// run's timeline (`run --timeline`), throughput per interval
    #[arg(long)]
    x: String,
    /// The statistic on the y axis: throughput, abort_ratio, p50_us, p99_us, p999_us, max_us,
    /// headline (TPC-C: new orders/s), TYPE.throughput, TYPE.p99_us, aborts.REASON, or any
    /// numeric field of a record
    #[arg(long, default_value = "throughput")]
    y: String,
    /// The figure: .svg or .png
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Logarithmic x axis
    #[arg(long)]
    log_x: bool,
    /// Logarithmic y axis
    #[arg(long)]
    log_y: bool,
    /// Only points where a varied parameter has this value (repeatable)
    #[arg(long = "where", value_name = "NAME=VALUE")]
    filter: Vec<String>,
    /// Title (default: the statistic, the parameter and the workload)
    #[arg(long)]
    title: Option<String>,
}

#[derive(clap::Args, Debug)]
pub(super) struct ReportArgs {
    /// Results files (JSON lines from `txlab sweep`)
    #[arg(required = true, value_name = "FILE.jsonl")]
    files: Vec<PathBuf>,
    /// The HTML file to write
    #[arg(long, value_name = "FILE.html")]
    out: PathBuf,
    /// Title
    #[arg(long)]
    title: Option<String>,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  txlab reproduce --list\n  txlab reproduce ccbench-skew\n  \
txlab reproduce ccbench-tictoc-high --vary threads=1,2,4,...,cores\n  txlab reproduce tpcc-warehouses \
--set threads=8 --out results/\n  txlab reproduce --file my-preset.toml\n  txlab reproduce --all\n\n\
Presets scale to the machine: their thread counts are written relative to its cores (presets/README.md).")]
pub(super) struct ReproduceArgs {
    /// The preset to run (see --list)
    #[arg(required_unless_present_any = ["list", "file", "all"], conflicts_with_all = ["file", "all"])]
    name: Option<String>,
    /// List the presets: the figure, the claims, the points and an estimate of the time on
    /// this machine
    #[arg(long, conflicts_with_all = ["name", "file", "all"])]
    list: bool,
    /// Run a preset of your own: a TOML file in the shipped presets' format
    /// (presets/README.md); its results go to a folder named after the file. Repeated: every
    /// file's preset, then one report of them all (DIR/report.html), as --all writes
    #[arg(long, value_name = "FILE.toml", conflicts_with = "all")]
    file: Vec<PathBuf>,
    /// Run every shipped preset, one after the other, into one report (DIR/report.html) whose
    /// claims table says what reproduces on this machine; run again, it measures only what
    /// is missing
    #[arg(long)]
    all: bool,
    /// Replace the values of a parameter the preset varies: NAME=V1,V2,... (values may be
    /// relative to the cores: cores, 4*cores, 1,2,4,...,cores); repeatable
    #[arg(long, value_name = "NAME=V1,V2,...", conflicts_with = "all")]
    vary: Vec<String>,
    /// Give a run flag the preset does not vary this value (replacing the preset's):
    /// NAME=VALUE, e.g. threads=16, warehouses=4, duration=5; repeatable
    #[arg(long, value_name = "NAME=VALUE", conflicts_with = "all")]
    set: Vec<String>,
    /// Directory for the results, figures and report (a folder per preset inside it); a
    /// preset run again continues its results file (measuring only the runs it lacks) and
    /// redraws, if the file's runs come from this revision, build and machine and the same
    /// sweep
    #[arg(long, value_name = "DIR", default_value = "txlab-results")]
    out: PathBuf,
    /// Measure the preset again, discarding the runs its results file holds
    #[arg(long)]
    fresh: bool,
}

#[derive(clap::Args, Debug)]
pub(super) struct MergeArgs {
    /// Results files to join (e.g. a Slurm job array's, one per point)
    #[arg(required = true, value_name = "FILE.jsonl")]
    files: Vec<PathBuf>,
    /// The joined file
    #[arg(long, value_name = "FILE.jsonl")]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub(super) struct CompareArgs {
    /// The baseline (before)
    #[arg(value_name = "A.jsonl")]
    a: PathBuf,
    /// The results compared with it (after)
    #[arg(value_name = "B.jsonl")]
    b: PathBuf,
    /// The statistic compared (as `plot --y`)
    #[arg(long, default_value = "throughput")]
    metric: String,
}

fn read(files: &[PathBuf]) -> Result<Vec<results::Record>, Failure> {
    results::read_all(files).map_err(usage)
}

/// Says on stderr when `records` come from several revisions, builds or machines.
fn note_origins(records: &[results::Record]) {
    let origins = report::origins(records);
    if origins.len() > 1 {
        let list: Vec<String> = origins.iter().map(|(o, n)| format!("{o} ({n} runs)")).collect();
        eprintln!(
            "note: the runs come from {} different revisions, builds or machines: {}",
            origins.len(),
            list.join("; ")
        );
    }
}

fn pairs(flag: &str, list: &[String]) -> Result<Vec<(String, String)>, Failure> {
    list.iter()
        .map(|w| {
            w.split_once('=')
                .map(|(n, v)| {
                    (n.trim().trim_start_matches('-').replace('_', "-"), v.trim().to_string())
                })
                .ok_or_else(|| usage(format!("{flag} {w}: expected NAME=VALUE")))
        })
        .collect()
}

/// Checks that a figure's file name ends in .svg or .png.
fn figure_format(out: &Path) -> Result<(), Failure> {
    let ext = out.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    if ext != "svg" && ext != "png" {
        return Err(usage(format!(
            "--out {}: the figure's name must end in .svg or .png",
            out.display()
        )));
    }
    Ok(())
}

/// Writes a figure into `out` as SVG or PNG, by the destination's extension, and puts it in
/// place.
fn write_figure(fig: &crate::experiment::figure::Figure, mut out: Output) -> Result<(), Failure> {
    figure_format(out.path())?;
    if out.path().extension().is_some_and(|e| e.eq_ignore_ascii_case("svg")) {
        let svg = draw::svg(fig, draw::SIZE).map_err(Failure::Run)?;
        out.write_all_bytes(svg.text.as_bytes())?;
    } else {
        draw::png(fig, draw::SIZE, out.temp_path()).map_err(Failure::Run)?;
    }
    out.finish()
}

pub(super) fn plot(args: &PlotArgs) -> Result<(), Failure> {
    figure_format(&args.out)?;
    let out = Output::create("--out", &args.out)?;
    let records = read(&args.files)?;
    note_origins(&records);
    let spec = FigureSpec {
        x: args.x.clone(),
        y: args.y.clone(),
        log_x: args.log_x,
        log_y: args.log_y,
        filter: pairs("--where", &args.filter)?,
        title: args.title.clone(),
    };
    let fig = figure(&records, &spec).map_err(usage)?;
    write_figure(&fig, out)?;
    println!(
        "wrote {} ({} lines, {} points)",
        args.out.display(),
        fig.series.len(),
        fig.series.iter().map(|s| s.points.len()).sum::<usize>()
    );
    Ok(())
}

pub(super) fn report(args: &ReportArgs) -> Result<(), Failure> {
    let mut file = Output::create("--out", &args.out)?;
    let records = read(&args.files)?;
    note_origins(&records);
    let sources: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
    let extra = Extra { title: args.title.clone(), ..Default::default() };
    let html = report::html(&records, &sources, &extra).map_err(usage)?;
    file.write_all_bytes(html.as_bytes())?;
    file.finish()?;
    println!("wrote {} ({} runs)", args.out.display(), records.len());
    Ok(())
}

fn machine_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// A shipped preset, resolved for this machine.
fn shipped_here(name: &str, text: &str, cores: usize) -> Result<preset::Preset, Failure> {
    preset::parse(name, text).and_then(|p| p.for_machine(cores)).map_err(Failure::Run)
}

pub(super) fn reproduce(args: &ReproduceArgs) -> Result<i32, Failure> {
    let cores = machine_cores();
    if args.list {
        return list_presets(cores);
    }
    let existing = if args.fresh { Existing::Fresh } else { Existing::Resume };
    let (vary, set) = (pairs("--vary", &args.vary)?, pairs("--set", &args.set)?);
    let chosen: Vec<(String, preset::Preset)> = if args.all {
        preset::SHIPPED
            .iter()
            .map(|(n, t)| preset::parse(n, t).map(|p| (n.to_string(), p)))
            .collect::<Result<_, _>>()
            .map_err(Failure::Run)?
    } else if let Some(name) = &args.name {
        vec![(name.clone(), preset::shipped(name).map_err(usage)?)]
    } else {
        args.file.iter().map(|f| preset::from_file(f)).collect::<Result<_, _>>().map_err(usage)?
    };
    if chosen.len() > 1 && !(vary.is_empty() && set.is_empty()) {
        return Err(usage("--vary and --set change one preset: give one name or one --file"));
    }
    let mut names: Vec<&str> = chosen.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(usage(format!(
            "--file: two presets are named {} (their results would share a folder)",
            w[0]
        )));
    }
    let mut here = Vec::new();
    for (name, p) in chosen {
        let p = p.with_overrides(&vary, &set).and_then(|p| p.for_machine(cores)).map_err(usage)?;
        here.push((name, p));
    }
    if here.len() > 1 {
        return reproduce_many(&here, &args.out, existing, cores);
    }
    let (name, p) = &here[0];
    let outcome = run_preset(name, p, &args.out.join(name), existing)?;
    println!(
        "\nfigures: {}\nreport: {}",
        outcome.figure_files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "),
        outcome.report.display()
    );
    Ok(0)
}

fn list_presets(cores: usize) -> Result<i32, Failure> {
    println!("Presets (txlab reproduce NAME), as they run on this machine ({cores} cores):");
    let (mut points, mut secs) = (0, 0.0);
    for (name, text) in preset::SHIPPED {
        let p = shipped_here(name, text, cores)?;
        let sweep = Sweep::new(p.flags.clone(), &p.vary_args())?;
        let s = estimate_s(&sweep);
        points += sweep.plans.len();
        secs += s;
        println!(
            "\n  {name}\n    {}\n    {} points, about {} on this machine",
            p.title,
            sweep.plans.len(),
            minutes(s)
        );
        for (n, v) in &p.vary {
            println!("    varies {n}: {v}");
        }
        for c in &p.claims {
            let note = if c.needs_cores > cores {
                format!(" [needs {} cores: not observable here]", c.needs_cores)
            } else {
                String::new()
            };
            println!("    claim: {}{note}", c.text);
        }
    }
    println!(
        "\nAll {} presets (txlab reproduce --all): {points} points, about {} on this machine.",
        preset::SHIPPED.len(),
        minutes(secs)
    );
    Ok(0)
}

/// What running a preset produced.
struct PresetOutcome {
    /// The claims and their verdicts.
    claims: Vec<ClaimRow>,
    /// The figures, drawn.
    figures: Vec<crate::experiment::figure::Figure>,
    /// The figures' files.
    figure_files: Vec<PathBuf>,
    /// The preset's own report.
    report: PathBuf,
}

/// Runs preset `p` into `dir` (results.jsonl, a figure file per figure, report.html): measures
/// the runs its results file lacks, draws, checks the claims and prints what it found.
fn run_preset(
    name: &str,
    p: &preset::Preset,
    dir: &Path,
    existing: Existing,
) -> Result<PresetOutcome, Failure> {
    let sweep = Sweep::new(p.flags.clone(), &p.vary_args())?;
    std::fs::create_dir_all(dir).map_err(|e| usage(format!("--out {}: {e}", dir.display())))?;
    let results_file = dir.join("results.jsonl");
    println!("{name}: {}\n{}\n{}", p.title, p.source, p.about.trim());
    println!(
        "about {} on this machine; results in {}",
        minutes(estimate_s(&sweep)),
        results_file.display()
    );
    execute(&sweep, &results_file, existing, None)?;
    let records = results::read(&results_file, false).map_err(Failure::Run)?.records;
    let mut figures = Vec::new();
    let mut figure_files = Vec::new();
    for (i, f) in p.figures.iter().enumerate() {
        let fig = figure(&records, &f.spec()).map_err(Failure::Run)?;
        let path = dir.join(format!("figure-{}-{}.svg", i + 1, f.y.replace(['.', '/'], "-")));
        write_figure(&fig, Output::create("--out", &path)?)?;
        figures.push(fig);
        figure_files.push(path);
    }
    println!("\nClaims ({}):", p.source);
    let mut claims = Vec::new();
    for c in &p.claims {
        let v = preset::check(c, &records);
        let (word, class) = v.word();
        println!("  {}\n    {}: {}", c.text, word, v.detail());
        claims.push(ClaimRow {
            claim: c.text.clone(),
            verdict: word.into(),
            class,
            detail: v.detail().into(),
        });
        if let Verdict::NoData(_) = v {
            eprintln!("note: the results lack points this claim needs");
        }
    }
    let html = report::html(
        &records,
        &[results_file.display().to_string()],
        &Extra {
            title: Some(p.title.clone()),
            intro: Some(format!("{} {}", p.source, p.about.trim())),
            figures: p.figures.iter().map(|f| f.spec()).collect(),
            claims: claims.clone(),
            sections: Vec::new(),
        },
    )
    .map_err(Failure::Run)?;
    let report_path = dir.join("report.html");
    let mut report_file = Output::create("--out", &report_path)?;
    report_file.write_all_bytes(html.as_bytes())?;
    report_file.finish()?;
    Ok(PresetOutcome { claims, figures, figure_files, report: report_path })
}

/// `reproduce --all` (or several `--file`s): every preset into its folder of `out`, then one
/// report, `out/report.html`, with every claim's verdict at the top.
fn reproduce_many(
    presets: &[(String, preset::Preset)],
    out: &Path,
    existing: Existing,
    cores: usize,
) -> Result<i32, Failure> {
    let mut secs = 0.0;
    for (_, p) in presets {
        secs += estimate_s(&Sweep::new(p.flags.clone(), &p.vary_args())?);
    }
    println!(
        "{} presets, about {} on this machine ({cores} cores); results in {}/NAME/ (run again \
         to continue after an interruption)",
        presets.len(),
        minutes(secs),
        out.display()
    );
    let mut sections = Vec::new();
    for (k, (name, p)) in presets.iter().enumerate() {
        print!("\n[{}/{}] ", k + 1, presets.len());
        let outcome = run_preset(name, p, &out.join(name), existing)?;
        sections.push(report::PresetSection {
            name: name.to_string(),
            title: p.title.clone(),
            source: p.source.clone(),
            about: p.about.trim().to_string(),
            link: format!("{name}/report.html"),
            claims: outcome.claims,
            figures: outcome.figures,
        });
    }
    let html =
        report::summary_html(&sections, &results::Origin::current()).map_err(Failure::Run)?;
    let path = out.join("report.html");
    let mut file = Output::create("--out", &path)?;
    file.write_all_bytes(html.as_bytes())?;
    file.finish()?;
    println!("\nWhat reproduces on this machine ({cores} cores):");
    print!("{}", report::claims_table(&sections));
    println!("report: {}", path.display());
    Ok(0)
}

/// The seconds a sweep should take: its runs' windows and warm-ups plus a load per protocol
/// and data set.
fn estimate_s(sweep: &Sweep) -> f64 {
    let mut secs = 0.0;
    let mut keys: Vec<&str> = Vec::new();
    for plan in &sweep.plans {
        secs += match plan.run_cfg.length {
            crate::engine::RunLength::Timed { .. } => plan.window_s(),
            crate::engine::RunLength::Transactions { .. } => {
                plan.repeat as f64 * plan.protocols.len() as f64
            }
        };
        if !keys.contains(&plan.data_key.as_str()) {
            keys.push(&plan.data_key);
            secs += plan.protocols.len() as f64 * LOAD_S;
        }
    }
    secs
}

pub(super) fn merge(args: &MergeArgs) -> Result<(), Failure> {
    let out_abs = std::path::absolute(&args.out).ok();
    if args.files.iter().any(|f| std::path::absolute(f).ok() == out_abs) {
        return Err(usage(format!("--out {}: is one of the files to merge", args.out.display())));
    }
    let records = read(&args.files)?;
    let mut seen: Vec<(&results::SweepDef, usize, &str, u32, &str, usize)> = Vec::new();
    for r in &records {
        let key = (&r.sweep.def, r.sweep.point, r.protocol.as_str(), r.repeat);
        if let Some(first) = seen.iter().find(|s| (s.0, s.1, s.2, s.3) == key) {
            return Err(usage(format!(
                "{} line {} and {} line {} both hold point {} {} run {}",
                first.4,
                first.5,
                r.file,
                r.line,
                r.sweep.point,
                r.protocol,
                r.repeat + 1
            )));
        }
        seen.push((key.0, key.1, key.2, key.3, &r.file, r.line));
    }
    let sweeps = {
        let mut d: Vec<&results::SweepDef> = Vec::new();
        for r in &records {
            if !d.contains(&&r.sweep.def) {
                d.push(&r.sweep.def);
            }
        }
        d.len()
    };
    let mut file = Output::create("--out", &args.out)?;
    for r in &records {
        results::append(&mut file, &r.value).map_err(|e| file.error(e))?;
    }
    file.finish()?;
    let missing: usize = if sweeps == 1 {
        let r0 = &records[0];
        let protocols = {
            let mut p: Vec<&str> = records.iter().map(|r| r.protocol.as_str()).collect();
            p.sort();
            p.dedup();
            p.len()
        };
        let repeat = records.iter().map(|r| r.repeat + 1).max().unwrap_or(1) as usize;
        (r0.sweep.def.points() * protocols * repeat).saturating_sub(records.len())
    } else {
        0
    };
    println!(
        "wrote {} ({} runs from {} files{}{})",
        args.out.display(),
        records.len(),
        args.files.len(),
        if sweeps > 1 { format!("; {sweeps} different sweeps") } else { String::new() },
        if missing > 0 {
            format!("; {missing} runs of the sweep are missing")
        } else {
            String::new()
        }
    );
    Ok(())
}

pub(super) fn compare(args: &CompareArgs) -> Result<(), Failure> {
    let a = read(std::slice::from_ref(&args.a))?;
    let b = read(std::slice::from_ref(&args.b))?;
    let c = cmp::compare(&a, &b, &args.metric).map_err(usage)?;
    println!("A = {}, B = {}", args.a.display(), args.b.display());
    print!("{}", c.table(&args.metric));
    Ok(())
}
