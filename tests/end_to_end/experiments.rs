//! Sweeps, results files, plots, reports, merges, comparisons and Slurm job arrays, through the
//! `txlab` binary. Sweeps run a fixed number of transactions per worker (`--txns`), so what
//! they do does not depend on the machine's speed.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn txlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txlab")).args(args).output().expect("run txlab")
}

fn ok(args: &[&str]) -> String {
    let out = txlab(args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails_with(args: &[&str], code: i32, message: &str) {
    let out = txlab(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one line expected, got:\n{stderr}");
    assert_eq!(stderr.trim_end(), message, "{args:?}");
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON record per line"))
        .collect()
}

/// The sweep every test here runs: two protocols, threads 1 and 3, θ 0 and 0.9.
const SWEEP: [&str; 15] = [
    "sweep",
    "-p",
    "silo,2pl-nowait",
    "--records",
    "2000",
    "--ops",
    "4",
    "--txns",
    "300",
    "--vary",
    "threads=1,3",
    "--vary",
    "theta=0,0.9",
    "--repeat",
    "2",
];

fn sweep_to(out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend(extra);
    txlab(&args)
}

/// (point, protocol, repeat) of each record.
fn keys(rs: &[serde_json::Value]) -> Vec<(u64, String, u64)> {
    let mut k: Vec<(u64, String, u64)> = rs
        .iter()
        .map(|r| {
            (
                r["sweep"]["point"].as_u64().unwrap(),
                r["protocol"].as_str().unwrap().to_string(),
                r["repeat"].as_u64().unwrap(),
            )
        })
        .collect();
    k.sort();
    k
}

#[test]
fn a_sweep_records_every_run_of_the_cross_product_with_its_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let o = sweep_to(&out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let rs = records(&out);
    // 4 points x 2 protocols x 2 repeats.
    assert_eq!(rs.len(), 16);
    let k = keys(&rs);
    let mut want = Vec::new();
    for point in 0..4 {
        for p in ["2pl-nowait", "silo"] {
            for repeat in 0..2 {
                want.push((point, p.to_string(), repeat));
            }
        }
    }
    want.sort();
    assert_eq!(k, want);
    for r in &rs {
        let point = r["sweep"]["point"].as_u64().unwrap();
        let (threads, theta) = (["1", "3"][point as usize / 2], ["0", "0.9"][point as usize % 2]);
        assert_eq!(
            r["sweep"]["values"],
            serde_json::json!([["threads", threads], ["theta", theta]])
        );
        assert_eq!(r["config"]["run"]["threads"].to_string(), threads);
        assert_eq!(r["threads"].to_string(), threads);
        assert_eq!(r["config"]["workload"]["theta"].as_f64(), theta.parse::<f64>().ok());
        assert_eq!(r["config"]["workload"]["records"], 2000);
        // Every worker ran its 300 transactions (YCSB never rolls back).
        assert_eq!(r["commits"].as_u64(), Some(300 * threads.parse::<u64>().unwrap()));
        assert_eq!(r["format"], 1);
        assert!(r["throughput"].as_f64().unwrap() > 0.0);
        assert!(r["abort_ratio"].as_f64().is_some());
        assert!(r["git_revision"].is_string() && r["machine"]["cpu"].is_string());
        assert!(r["timestamp"].is_string());
    }
    // Threads and theta change no data: one load per protocol for the whole sweep.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.matches("loaded in").count(), 2, "{stderr}");
    // The file exists now: a second sweep without --resume refuses to touch it.
    let again = sweep_to(&out, &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("the file exists; add --resume"));
    // With --resume, nothing is left to do.
    let done = sweep_to(&out, &["--resume"]);
    assert_eq!(done.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&done.stdout).is_empty());
    assert_eq!(records(&out).len(), 16);
}

#[test]
fn resuming_measures_exactly_the_runs_a_cut_file_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.jsonl");
    let o = sweep_to(&full, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // As if killed while writing the sixth record: five whole lines and half of the next.
    let text = std::fs::read_to_string(&full).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = dir.path().join("cut.jsonl");
    let sixth = lines[5];
    std::fs::write(&cut, format!("{}\n{}", lines[..5].join("\n"), &sixth[..sixth.len() / 2]))
        .unwrap();
    let o = sweep_to(&cut, &["--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let measured =
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("point ")).count();
    assert_eq!(measured, 11, "16 runs, 5 of them kept");
    let rs = records(&cut);
    assert_eq!(keys(&rs), keys(&records(&full)));
    // The five kept records are the file's first five, untouched.
    assert_eq!(
        std::fs::read_to_string(&cut).unwrap().lines().take(5).collect::<Vec<_>>(),
        lines[..5]
    );
}

#[test]
fn a_killed_sweep_resumes_without_repeating_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend(["--out", out.to_str().unwrap()]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_txlab"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Each run's record is in the file before its line is printed: kill after the third.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for _ in 0..3 {
        lines.next().expect("a line per run").unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = records(&out).len();
    assert!(before >= 3, "{before} records before the kill");
    let o = sweep_to(&out, &["--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let measured =
        String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("point ")).count();
    let rs = records(&out);
    assert_eq!(rs.len(), 16);
    let k = keys(&rs);
    let mut unique = k.clone();
    unique.dedup();
    assert_eq!(unique, k, "no run twice");
    // A record cut by the kill was measured again; every whole one was kept.
    assert!(measured == 16 - before, "{measured} measured after {before} kept");
}

#[test]
fn bad_sweeps_get_the_same_one_line_errors_as_run() {
    for (vary, message) in [
        (
            "nonsense=1,2",
            "--vary nonsense: txlab run has no flag --nonsense (see txlab run --help)",
        ),
        ("threads=", "--vary threads=: a value is empty (expected NAME=V1,V2,...)"),
        ("theta=0.5,1.5", "--vary theta=1.5: --theta 1.5 is out of range (0 to 0.999)"),
        ("threads=0,1", "--vary threads=0: --threads 0 is out of range (1 to 1024)"),
        ("warehouses=1,2", "--vary warehouses=1: --warehouses applies to --workload tpcc"),
    ] {
        fails_with(&["sweep", "--vary", vary, "--out", "x.jsonl"], 2, &format!("error: {message}"));
    }
    for (args, message) in [
        (
            &["--threads", "2", "--vary", "threads=1,2", "--out", "x.jsonl"][..],
            "--threads is given both as a flag and in --vary; give it once",
        ),
        (&["--out", "x.jsonl"][..], "sweep needs at least one --vary NAME=V1,V2,..."),
        (
            &["--vary", "threads=1", "--out", "/nonexistent/x.jsonl"][..],
            "--out /nonexistent/x.jsonl: No such file or directory (os error 2)",
        ),
        (
            &["--vary", "threads=1", "--out", "x.jsonl", "--json", "y.json"][..],
            "--json applies to run; a sweep writes its results to --out",
        ),
    ] {
        let mut all = vec!["sweep"];
        all.extend(args);
        fails_with(&all, 2, &format!("error: {message}"));
    }
}

#[test]
fn plots_reports_and_comparisons_read_results_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    for f in [&a, &b] {
        let o = sweep_to(f, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let svg = path("t.svg");
    let said = ok(&["plot", a, "--x", "theta", "--y", "throughput", "--out", &svg]);
    assert!(said.contains("4 lines, 8 points"), "{said}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") || text.starts_with("<?xml"));
    assert!(text.matches("<circle").count() >= 4);
    let png = path("t.png");
    ok(&[
        "plot",
        a,
        "--x",
        "threads",
        "--y",
        "p99_us",
        "--where",
        "theta=0.9",
        "--log-y",
        "--out",
        &png,
    ]);
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    // The report: valid HTML with the figures inline.
    let html_path = path("r.html");
    ok(&["report", a, b, "--out", &html_path]);
    let html = std::fs::read_to_string(&html_path).unwrap();
    let doc = scraper::Html::parse_document(&html);
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    let svgs = doc.select(&scraper::Selector::parse("figure svg").unwrap()).count();
    assert_eq!(svgs, 6, "throughput, abort ratio and p99 against threads and against theta");
    // Compare: one row per point and protocol.
    let table = ok(&["compare", a, b]);
    assert_eq!(table.lines().filter(|l| l.starts_with("threads=")).count(), 8, "{table}");
    // Bad input.
    fails_with(
        &["plot", a, "--x", "records", "--out", &svg],
        2,
        "error: --x records: the results do not vary it (they vary: threads, theta)",
    );
    fails_with(
        &["plot", a, "--x", "theta", "--out", &path("t.pdf")],
        2,
        &format!("error: --out {}: the figure's name must end in .svg or .png", path("t.pdf")),
    );
    let bad = path("bad.jsonl");
    let first = std::fs::read_to_string(a).unwrap().lines().next().unwrap().to_string();
    std::fs::write(&bad, format!("{first}\n{{\"format\": 1,\n")).unwrap();
    let out = txlab(&["plot", &bad, "--x", "theta", "--out", &svg]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with(&format!("error: {bad} line 2: not a JSON record (")), "{stderr}");
    let old = path("old.jsonl");
    let mut v: serde_json::Value = serde_json::from_str(&first).unwrap();
    v.as_object_mut().unwrap().remove("sweep");
    v["txlab_version"] = "0.0.1".into();
    std::fs::write(&old, format!("{v}\n")).unwrap();
    fails_with(
        &["report", &old, "--out", &html_path],
        2,
        &format!(
            "error: {old} line 1: missing field `sweep` (written by txlab 0.0.1; this txlab {} \
             reads results format 1)",
            env!("CARGO_PKG_VERSION")
        ),
    );
}

#[test]
fn an_emitted_slurm_array_runs_one_point_per_task_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend(["--emit", "slurm", jobs.to_str().unwrap()]);
    let said = ok(&args);
    assert!(said.contains("4 array tasks"), "{said}");
    let script = std::fs::read_to_string(jobs.join("sweep.sbatch")).unwrap();
    assert!(script.starts_with("#!/usr/bin/env bash\n"));
    assert!(script.contains("\n#SBATCH --array=0-3\n"), "{script}");
    assert!(script.contains("#SBATCH --exclusive"));
    assert!(script.contains("--vary threads=1,3 --vary theta=0,0.9"), "{script}");
    assert!(script.contains("--point \"$task\" --resume"), "{script}");
    // Run it as sbatch would: once per array index.
    for task in 0..4 {
        let out = Command::new("bash")
            .arg(jobs.join("sweep.sbatch"))
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .env("TXLAB", env!("CARGO_BIN_EXE_txlab"))
            .output()
            .unwrap();
        assert!(out.status.success(), "task {task}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // Without a task index the script says what it needs.
    let out = Command::new("bash")
        .arg(jobs.join("sweep.sbatch"))
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("run this script with sbatch"));
    let mut files: Vec<String> = (0..4)
        .map(|t| jobs.join(format!("results/point-{t}.jsonl")).to_str().unwrap().to_string())
        .collect();
    for (t, f) in files.iter().enumerate() {
        let rs = records(Path::new(f));
        assert_eq!(rs.len(), 4, "task {t}: 2 protocols x 2 repeats");
        assert!(rs.iter().all(|r| r["sweep"]["point"] == t));
    }
    let merged = dir.path().join("all.jsonl");
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--out", merged.to_str().unwrap()]);
    let said = ok(&args);
    assert!(said.contains("16 runs from 4 files"), "{said}");
    assert_eq!(records(&merged).len(), 16);
    // The same file twice holds the same runs twice: refused.
    files.push(files[0].clone());
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    let other = dir.path().join("twice.jsonl");
    args.extend(["--out", other.to_str().unwrap()]);
    let out = txlab(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("both hold point 0"));
}

#[test]
fn ctrl_c_stops_a_run_after_the_current_window_and_writes_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let csv = dir.path().join("r.csv");
    let mut child = Command::new(env!("CARGO_BIN_EXE_txlab"))
        .args([
            "run",
            "-p",
            "nocc",
            "--records",
            "1000",
            "--threads",
            "1",
            "--txns",
            "200000",
            "--repeat",
            "100",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("run 1/100"), "{first}");
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted after"), "{stderr}");
    let runs = 1 + rest.iter().filter(|l| l.starts_with("run ")).count();
    assert!(runs < 100, "the run stopped early");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        v["median_of"].as_u64().unwrap_or(1) as usize,
        runs,
        "every finished run is written"
    );
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count();
    assert_eq!(rows, runs + 1, "a CSV row per finished run");
}

/// A command that fails leaves the file it would have written as it was, and nothing beside
/// it; one that succeeds replaces it whole.
#[test]
fn a_failed_command_leaves_its_old_output_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (corrupt, empty) = (path("corrupt.jsonl"), path("empty.jsonl"));
    std::fs::write(&corrupt, "{\"not\": \"a run\"}\nnot json\n").unwrap();
    std::fs::write(&empty, "").unwrap();
    let outputs = ["old.html", "old.svg", "old.jsonl", "old.json", "old.csv", "old.dot"];
    for o in outputs {
        std::fs::write(path(o), "OLD").unwrap();
    }
    let failing: Vec<Vec<String>> = [
        vec!["report", &corrupt, "--out", &path("old.html")],
        vec!["report", &empty, "--out", &path("old.html")],
        vec!["plot", &corrupt, "--x", "theta", "--out", &path("old.svg")],
        vec!["merge", &corrupt, "--out", &path("old.jsonl")],
        // Refused before loading (bohm needs an execution thread besides its CC threads).
        vec![
            "run",
            "-p",
            "bohm",
            "--threads",
            "2",
            "--opt",
            "cc-threads=2",
            "--json",
            &path("old.json"),
            "--csv",
            &path("old.csv"),
        ],
        vec!["analyze", "-w", "tpcc", "--from", "no-such-type", "--dot", &path("old.dot")],
    ]
    .into_iter()
    .map(|a| a.into_iter().map(String::from).collect())
    .collect();
    for args in &failing {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = txlab(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        for o in outputs {
            assert_eq!(std::fs::read_to_string(path(o)).unwrap(), "OLD", "{args:?} changed {o}");
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), outputs.len() + 2, "{args:?} left files behind: {names:?}");
    }
    assert!(
        String::from_utf8_lossy(
            &txlab(&failing[4].iter().map(String::as_str).collect::<Vec<_>>()).stderr
        )
        .starts_with("error: bohm runs at least one concurrency-control and one execution thread"),
        "the run is refused by bohm's thread check"
    );
    // A run that succeeds replaces both files.
    ok(&[
        "run",
        "-p",
        "silo",
        "--threads",
        "1",
        "--txns",
        "50",
        "--records",
        "1000",
        "--json",
        &path("old.json"),
        "--csv",
        &path("old.csv"),
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("old.json")).unwrap()).unwrap();
    assert!(json.is_object() || json.is_array(), "{json}");
    let csv = std::fs::read_to_string(path("old.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "a header and the run: {csv}");
}

/// Runs of another revision, build or machine are not mixed into a results file: `--resume`
/// and a preset run again refuse, naming both origins; `--fresh` measures again; a report of
/// mixed files says where each run came from.
#[test]
fn results_of_another_origin_are_not_mixed_in() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours.jsonl");
    let o = sweep_to(&ours, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let here = records(&ours)[0]["git_revision"].as_str().unwrap().to_string();
    // The same sweep as another revision measured it, cut after two runs.
    let text = std::fs::read_to_string(&ours).unwrap();
    let theirs = dir.path().join("theirs.jsonl");
    let old: Vec<String> = text
        .lines()
        .take(2)
        .map(|l| {
            l.replace(&format!("\"git_revision\":\"{here}\""), "\"git_revision\":\"0ld0ld0ld0ld\"")
        })
        .collect();
    assert!(old[0].contains("0ld0ld0ld0ld"), "{}", old[0]);
    std::fs::write(&theirs, old.join("\n") + "\n").unwrap();
    let o = sweep_to(&theirs, &["--resume"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let prefix =
        format!("error: {} line 1 was measured by revision 0ld0ld0ld0ld (", theirs.display());
    assert!(stderr.starts_with(&prefix), "{stderr}");
    assert!(stderr.contains(&format!("; this is revision {here} (")), "{stderr}");
    assert!(stderr.contains("add --fresh to measure again into it"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), old.join("\n") + "\n", "untouched");
    // Without --resume the file is refused too; --fresh and --resume exclude each other.
    let o = sweep_to(&theirs, &[]);
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("add --resume to finish the sweep it holds, --fresh to measure it again"));
    assert_eq!(sweep_to(&theirs, &["--resume", "--fresh"]).status.code(), Some(2));
    // A report of both files says so, on stderr and in the page.
    let html = dir.path().join("mixed.html");
    let both = [ours.to_str().unwrap(), theirs.to_str().unwrap()];
    let out = txlab(&["report", both[0], both[1], "--out", html.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.starts_with("note: the runs come from 2 different revisions, builds or machines: ")
            && note.contains("revision 0ld0ld0ld0ld (")
            && note.contains(&format!("revision {here} (")),
        "{note}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("These runs come from 2 different revisions, builds or machines"));
    assert!(page.contains("(2 runs)") && page.contains("(16 runs)"), "runs per origin");
    let one = dir.path().join("one.html");
    let out = txlab(&["report", both[0], "--out", one.to_str().unwrap()]);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!std::fs::read_to_string(&one).unwrap().contains("These runs come from"));
    // --fresh measures the sweep again: every run is this revision's.
    let o = sweep_to(&theirs, &["--fresh"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let rs = records(&theirs);
    assert_eq!(rs.len(), 16);
    assert!(rs.iter().all(|r| r["git_revision"] == here.as_str() && r["build"].is_string()));
    // A preset run again over another revision's results refuses before measuring.
    let presets = dir.path().join("presets");
    let preset_dir = presets.join("ccbench-skew");
    std::fs::create_dir_all(&preset_dir).unwrap();
    std::fs::write(preset_dir.join("results.jsonl"), old.join("\n") + "\n").unwrap();
    let out = txlab(&["reproduce", "ccbench-skew", "--out", presets.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("was measured by revision 0ld0ld0ld0ld ("), "{stderr}");
    assert!(stderr.contains("add --fresh"), "{stderr}");
}

/// A user's preset: tiny, fixed-count runs, a thread axis relative to the cores, a claim that
/// needs 4 cores and one that needs none.
const MY_PRESET: &str = r#"
title = "Mine"
source = "me"
about = "A tiny preset."
flags = ["-p", "silo,2pl-nowait", "--records", "2000", "--ops", "4", "--txns", "200", "--repeat", "1"]
vary = [["threads", "1,2,4,...,2*cores"]]

[[figure]]
x = "threads"
y = "throughput"

[[claim]]
text = "silo scales up to 4 threads"
trend = "increasing"
protocol = "silo"
along = "threads"
needs_cores = 4
why = "it takes 4 threads running at once"

[[claim]]
text = "2pl-nowait commits"
ratio = ["2pl-nowait", "silo"]
min = 0.0
"#;

#[test]
fn a_users_preset_runs_with_a_thread_override_and_is_judged_on_the_threads_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.toml");
    std::fs::write(&file, MY_PRESET).unwrap();
    let out = dir.path().join("out");
    let (f, o) = (file.to_str().unwrap(), out.to_str().unwrap());
    // Told to run 1 and 2 threads: the 4-core claim reads runs of at most 2 threads.
    let stdout = ok(&["reproduce", "--file", f, "--vary", "threads=1,2", "--out", o]);
    assert!(
        stdout.contains(
            "silo scales up to 4 threads\n    not observable on this machine: it takes 4 threads \
             running at once (needs 4 cores; the runs it reads ran at most 2 threads"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("2pl-nowait commits\n    holds: "), "{stdout}");
    let rs = records(&out.join("mine/results.jsonl"));
    assert_eq!(rs.len(), 2 * 2, "two thread counts, two protocols");
    let threads: Vec<u64> = rs.iter().map(|r| r["threads"].as_u64().unwrap()).collect();
    assert_eq!(threads.iter().filter(|&&t| t == 2).count(), 2, "{threads:?}");
    assert!(
        out.join("mine/report.html").is_file()
            && out.join("mine/figure-1-throughput.svg").is_file()
    );
    // Without the override, the axis follows the machine's cores: another sweep, refused
    // in the same folder (naming the way out), measured with --fresh.
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    let o2 = txlab(&["reproduce", "--file", f, "--out", o]);
    let stderr = String::from_utf8_lossy(&o2.stderr);
    assert_eq!(o2.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("belongs to another sweep") && stderr.contains("add --fresh"),
        "{stderr}"
    );
    ok(&["reproduce", "--file", f, "--out", o, "--fresh"]);
    let mut ran: Vec<u64> = records(&out.join("mine/results.jsonl"))
        .iter()
        .map(|r| r["threads"].as_u64().unwrap())
        .collect();
    ran.dedup();
    assert_eq!(ran.last(), Some(&(2 * cores)), "the axis ends at 2*cores: {ran:?}");
    // Bad overrides and files: one line each, nothing run.
    fails_with(
        &["reproduce", "--file", f, "--vary", "theta=0,1", "--out", o],
        2,
        "error: --vary theta: the preset does not vary theta (it varies threads); give a fixed \
         value with --set theta=VALUE",
    );
    fails_with(
        &["reproduce", "--file", f, "--set", "threads=2", "--out", o],
        2,
        "error: --set threads: the preset varies threads; give its values with --vary \
         threads=V1,V2,...",
    );
    let missing = dir.path().join("nope.toml");
    let out3 = txlab(&["reproduce", "--file", missing.to_str().unwrap(), "--out", o]);
    let stderr = String::from_utf8_lossy(&out3.stderr);
    assert_eq!(out3.status.code(), Some(2));
    assert!(stderr.starts_with("error: --file ") && stderr.lines().count() == 1, "{stderr}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, MY_PRESET.replace("1,2,4,...,2*cores", "1,2,...,cores")).unwrap();
    fails_with(
        &["reproduce", "--file", bad.to_str().unwrap(), "--out", o],
        2,
        "error: vary threads `1,2,...,cores`: `...` needs three values before it to show the \
         progression",
    );
}

/// Several presets run into one report whose claims table comes first; run again, the
/// command measures nothing and redraws.
#[test]
fn several_presets_make_one_report_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("first.toml");
    let b = dir.path().join("second.toml");
    std::fs::write(&a, MY_PRESET.replace("1,2,4,...,2*cores", "1,2")).unwrap();
    std::fs::write(&b, MY_PRESET.replace("1,2,4,...,2*cores", "1,3").replace("Mine", "Second"))
        .unwrap();
    let out = dir.path().join("out");
    let args = [
        "reproduce",
        "--file",
        a.to_str().unwrap(),
        "--file",
        b.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let stdout = ok(&args);
    assert!(stdout.starts_with("2 presets, about "), "{stdout}");
    assert!(
        stdout.contains("[1/2] first: Mine") && stdout.contains("[2/2] second: Second"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("\n  first   not observable on this machine  silo scales up to 4 threads\n"),
        "{stdout}"
    );
    assert!(stdout.contains("4 claims of 2 presets: "), "{stdout}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let claims = html.find("<h2 id=\"claims\">").unwrap();
    assert!(claims < html.find("<figure").unwrap(), "the claims table comes first");
    assert!(
        html.contains("href=\"first/report.html\"") && html.contains("href=\"second/report.html\"")
    );
    assert_eq!(records(&out.join("first/results.jsonl")).len(), 4);
    // Again: both results files are complete, nothing is measured.
    let again = txlab(&args);
    assert_eq!(again.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(stderr.matches("4 already in the file").count(), 2, "{stderr}");
    assert_eq!(records(&out.join("second/results.jsonl")).len(), 4);
    // Overrides change one preset only.
    let mut over = args.to_vec();
    over.extend(["--set", "records=100"]);
    fails_with(&over, 2, "error: --vary and --set change one preset: give one name or one --file");
}
