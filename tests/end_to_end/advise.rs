//! `txlab advise` end to end, on a tiny workload with a tiny budget: the ranking, the
//! recommendation, the finalists' checks and the files it writes; Ctrl-C; bad input. Nothing
//! here depends on which protocol is faster on this machine: the tests assert the structure
//! of the advice and that it agrees with itself (the verdict logic is tested on recorded
//! results in `experiment::advice`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn txlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txlab")).args(args).output().expect("run txlab")
}

/// A small workload with a read-only type (so that the snapshot variants are contenders).
fn tiny_spec(dir: &Path) -> String {
    let path = dir.join("tiny.toml");
    std::fs::write(
        &path,
        r#"
name = "tiny"

[[table]]
name = "item"
rows = 2000
columns = [{ name = "count", bytes = 8 }, { name = "data", bytes = 24 }]

[[txn]]
name = "bump"
weight = 60

  [[txn.op]]
  update = "item"
  key = { zipf = 0.9 }
  count = 2
  columns = ["count"]

[[txn]]
name = "look"
weight = 40
read_only = true

  [[txn.op]]
  read = "item"
  key = "uniform"
  count = 4
  columns = ["data"]
"#,
    )
    .unwrap();
    format!("spec:{}", path.display())
}

const LABELS: [&str; 5] = ["silo", "silo+snapshots", "mocc", "mocc+snapshots", "2pl-nowait"];

#[test]
fn advise_ranks_checks_recommends_and_writes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny_spec(dir.path());
    let out_dir = dir.path().join("advice");
    let out = txlab(&[
        "advise",
        "-w",
        &w,
        "-p",
        "silo,mocc,2pl-nowait",
        "--threads",
        "1,3",
        "--budget",
        "8s",
        "--out",
        out_dir.to_str().unwrap(),
        "--no-prefault",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // The contenders, with the snapshot variants for the read-only type.
    assert!(
        stderr.contains("advise: 5 contenders promising serializable at 1 and 3 thread(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("silo+snapshots: --opt snapshot-epochs=25: read-only types (look)"),
        "{stderr}"
    );
    // A ranked table per thread count, every contender in each.
    for t in ["At 1 threads", "At 3 threads"] {
        let table: &str = stdout.split(t).nth(1).unwrap_or_else(|| panic!("{t}:\n{stdout}"));
        let table = table.split("\n\n").next().unwrap();
        for l in LABELS {
            assert!(
                table.lines().any(|line| line.split_whitespace().next() == Some(l)),
                "{t}: {l} missing\n{table}"
            );
        }
        assert!(table.contains("contender") && table.contains("abort ratio"), "{table}");
    }
    // The recommendation is a contender, with reasons, and its check passed.
    let rec = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Recommendation: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let pick = rec.split_whitespace().next().unwrap();
    assert!(LABELS.contains(&pick), "{rec}");
    assert!(stdout.contains(&format!("check of {pick}: ")), "{stdout}");
    assert!(stdout.contains("history serializable"), "{stdout}");
    assert!(!stdout.contains("FAILED"), "{stdout}");
    // The files: every run in results.jsonl, the advice in advice.json, the report.
    let results = std::fs::read_to_string(out_dir.join("results.jsonl")).unwrap();
    let records: Vec<serde_json::Value> =
        results.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let advice: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("advice.json")).unwrap())
            .unwrap();
    assert_eq!(advice["recommended"]["label"], pick);
    assert_eq!(advice["interrupted"], false);
    let runs: u64 = advice["at"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|at| at["entries"].as_array().unwrap().clone())
        .map(|e| e["runs"].as_u64().unwrap())
        .sum();
    assert_eq!(runs as usize, records.len(), "a record per run");
    for at in advice["at"].as_array().unwrap() {
        // Each contender ran at least its screen; the pick ran at least as often as any.
        let entries = at["entries"].as_array().unwrap();
        assert_eq!(entries.len(), LABELS.len());
        assert!(entries.iter().all(|e| e["runs"].as_u64().unwrap() >= 1), "{at}");
        assert!(at["reasons"].as_array().is_some_and(|r| !r.is_empty()), "{at}");
    }
    for r in &records {
        let label = r["advise"]["label"].as_str().unwrap();
        assert!(LABELS.contains(&label), "{label}");
        assert_eq!(r["protocol"], label, "records are grouped by contender");
        assert!(["1", "3"].contains(&r["sweep"]["values"][0][1].as_str().unwrap()));
    }
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("<h2 id=\"section-1\">Advice</h2>"), "the advice section");
    assert!(html.contains("<h3>At 3 threads</h3>"));
    assert!(html.contains(&format!("<td>{pick}</td>")));
    assert!(html.contains(&format!("<p>Recommendation: {pick}")), "a paragraph per line");
    assert!(html.contains("<p>pick at 3 threads: "), "each thread count's pick");
    // The results are a results file like a sweep's: `txlab report` reads them.
    let again = dir.path().join("again.html");
    let rep = txlab(&[
        "report",
        out_dir.join("results.jsonl").to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert_eq!(rep.status.code(), Some(0), "{}", String::from_utf8_lossy(&rep.stderr));
    // An earlier advice is never overwritten.
    let second = txlab(&["advise", "-w", &w, "--out", out_dir.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(2));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("holds an earlier advice"), "{err}");
}

/// Ctrl-C stops after the run in progress and still ranks what was measured, writes it, and
/// exits 130.
#[test]
fn an_interrupted_advice_ranks_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny_spec(dir.path());
    let out_dir = dir.path().join("advice");
    let mut child = Command::new(env!("CARGO_BIN_EXE_txlab"))
        .args([
            "advise",
            "-w",
            &w,
            "-p",
            "silo,2pl-nowait,tictoc",
            "--threads",
            "2",
            "--budget",
            "10m",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("2 threads screen "), "{first}");
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted after"), "{stderr}");
    let stdout = rest.join("\n");
    assert!(stdout.contains("At 2 threads"), "{stdout}");
    assert!(
        stdout.contains("Recommendation from what was measured before the interrupt: "),
        "{stdout}"
    );
    assert!(stdout.contains("not checked: interrupted"), "{stdout}");
    let advice: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("advice.json")).unwrap())
            .unwrap();
    assert_eq!(advice["interrupted"], true);
    let records = std::fs::read_to_string(out_dir.join("results.jsonl")).unwrap();
    let runs = records.lines().count();
    assert!((1..=3).contains(&runs), "{runs} runs: stopped within the screen's four runs");
    assert!(out_dir.join("report.html").exists());
}

#[test]
fn bad_advise_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny_spec(dir.path());
    let out = dir.path().join("o");
    let o = out.to_str().unwrap();
    for (args, expected) in [
        (vec!["--budget", "2x"], "--budget '2x' is not a duration"),
        (vec!["--budget", "1s"], "--budget '1s' is out of range (5s to 24h)"),
        (
            vec!["--duration", "3"],
            "--duration is not an advise flag: advise sets the runs' length from --budget",
        ),
        (vec!["--repeat", "3"], "--repeat is not an advise flag"),
        (
            vec!["--opt", "lock=mql"],
            "--opt is not an advise flag: advise sets each protocol's options",
        ),
        (
            vec!["-p", "si"],
            "--protocol si: it promises snapshot isolation, and advise recommends for serializable",
        ),
        (vec!["-p", "nocc"], "--protocol nocc: it promises no isolation"),
        (
            vec!["--isolation", "none"],
            "--isolation none: advise recommends protocols for serializable or snapshot",
        ),
        (vec!["--threads", "2,0"], "--threads 0 is out of range (1 to 1024)"),
        (vec!["--threads", "2,2"], "--threads lists 2 twice"),
        (vec!["--theta", "0.5"], "--theta applies to --workload ycsb"),
    ] {
        let mut a = vec!["advise", "-w", &w, "--out", o];
        a.extend(args.iter().copied());
        let r = txlab(&a);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(!out.join("results.jsonl").exists(), "{args:?}: nothing written");
    }
}

/// With logging, every contender logs (a variant beside its plain protocol), the table counts
/// durable commits, and the finalists' checks run without the log (they record histories).
#[test]
fn a_logged_advice_measures_durable_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny_spec(dir.path());
    let logs = dir.path().join("logs");
    let out_dir = dir.path().join("advice");
    let out = txlab(&[
        "advise",
        "-w",
        &w,
        "-p",
        "silo",
        "--threads",
        "2",
        "--budget",
        "5s",
        "--log-dir",
        logs.to_str().unwrap(),
        "--sync",
        "none",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("durable txn/s"), "{stdout}");
    let advice: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("advice.json")).unwrap())
            .unwrap();
    for e in advice["at"][0]["entries"].as_array().unwrap() {
        assert!(e["runs"].as_u64().unwrap() >= 1, "{e}");
    }
    assert!(logs.join("silo").join("run.json").exists());
    assert!(logs.join("silo+snapshots").join("silo").join("run.json").exists());
    assert!(stdout.contains("history serializable"), "{stdout}");
}
