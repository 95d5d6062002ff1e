//! Declarative workloads (`-w spec:FILE.toml`) through the command line: every shipped example
//! runs under every protocol with its invariant, `check` checks a spec's histories, `analyze`
//! reads its templates, and a bad file is one line naming the file, line and column.

use std::path::Path;
use std::process::{Command, Output};

fn txlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txlab")).args(args).output().expect("run txlab")
}

fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workloads").join(name);
    format!("spec:{}", path.display())
}

/// Every example runs a fixed number of transactions under every protocol (BOHM and
/// 2PL-ordered from the declared access sets, IC3 from the templates), with the templates and
/// access sets checked at run time; a serializable protocol that broke a spec's ledger check
/// would exit 1.
#[test]
fn every_example_runs_under_every_protocol() {
    for name in ["ycsb-a.toml", "tpcc-np.toml", "inventory-hotspot.toml", "reporting.toml"] {
        let w = example(name);
        let out = txlab(&[
            "run",
            "-w",
            &w,
            "--threads",
            "3",
            "--txns",
            "150",
            "--check-templates",
            "--check-access-sets",
            "--no-prefault",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}:\n{stdout}\n{stderr}");
        let stem = name.trim_end_matches(".toml");
        assert!(stderr.contains(&format!("spec {stem}: tables ")), "{name}: header\n{stderr}");
        // Only nocc may lose updates (a serializable protocol that did would have exited 1).
        let mut protocol = "";
        for line in stdout.lines() {
            if let Some(run) = line.strip_prefix("run ") {
                protocol = run.split_whitespace().nth(1).unwrap_or("");
            }
            if line.contains("invariant   broken") {
                assert_eq!(protocol, "nocc", "{name}: {line}\n{stdout}");
            }
        }
    }
}

/// The JSON results name the spec and carry it whole, so that two specs never pass for one.
#[test]
fn a_spec_run_records_its_spec_and_its_ledger_holds() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let w = example("inventory-hotspot.toml");
    let out = txlab(&[
        "run",
        "-p",
        "silo",
        "-w",
        &w,
        "--threads",
        "2",
        "--txns",
        "2000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["workload"], "spec:inventory-hotspot");
    assert_eq!(v["config"]["workload"]["tables"][0]["name"], "product");
    assert_eq!(v["config"]["workload"]["txns"][0]["name"], "purchase");
    let types: Vec<&str> =
        v["per_type"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(types, ["purchase", "restock", "browse"]);
    assert_eq!(v["commits"], 4000, "nothing in this spec rolls back on purpose");
    assert!(v["invariant_violation"].is_null(), "{}", v["invariant_violation"]);
}

/// The YCSB-A spec's recorded histories are checked as every workload's are: serializable
/// under the protocols that promise it.
#[test]
fn the_ycsb_a_specs_histories_check_clean() {
    let w = example("ycsb-a.toml");
    let out = txlab(&["check", "-p", "silo,2pl-nowait,ermia-ssi", "-w", &w, "--txns", "300"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.matches(&format!("  {w} ")).count(), 3, "{stdout}");
    assert!(stdout.contains("overall: PASS (3 protocol(s) x 1 workload(s)"), "{stdout}");
}

/// `txlab check` runs a spec with pauses and checks its history: clean under serializable
/// protocols; under nocc, read-modify-writes of four rows lose updates, which the history and
/// the spec's ledger both show (the positive control).
#[test]
fn check_checks_a_spec() {
    let w = example("inventory-hotspot.toml");
    let out = txlab(&["check", "-p", "silo,mocc", "-w", &w, "--txns", "300"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = format!("  {w} ");
    assert_eq!(stdout.matches(&line).count(), 2, "{stdout}");
    assert!(stdout.contains("overall: PASS (2 protocol(s) x 1 workload(s)"), "{stdout}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("counters.toml");
    std::fs::write(
        &file,
        "[[table]]\nname = \"c\"\nrows = 4\ncolumns = [{ name = \"n\", bytes = 8 }]\n\
         [[txn]]\nname = \"bump\"\nweight = 100\n[[txn.op]]\nupdate = \"c\"\n",
    )
    .unwrap();
    let w = format!("spec:{}", file.display());
    let out = txlab(&["check", "-p", "nocc", "-w", &w, "--verbose"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("lost update (permitted)"), "{stdout}");
    assert!(stdout.contains("the committed transactions added"), "the ledger saw it: {stdout}");
    let out = txlab(&["check", "-p", "nocc", "-w", &w, "--isolation", "serializable"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
}

/// IC3's analysis of the TPC-C spec: Payment's year-to-date totals are increments that no
/// other template reads, so they are deferred; NewOrder's district update and Payment's
/// customer update make the C-edges.
#[test]
fn analyze_reads_a_specs_templates() {
    let w = example("tpcc-np.toml");
    let out = txlab(&["analyze", "-w", &w, "--granularity", "column"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with(&format!("workload {w}: ")), "{stdout}");
    assert!(stdout.contains("new-order"), "{stdout}");
    assert!(stdout.contains("payment"), "{stdout}");
}

/// A bad spec is refused before anything runs: one line with the file, line and column.
#[test]
fn a_bad_spec_is_one_line_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[[table]]\nname = \"t\"\nrows = 10\nrow_bytes = 8\n\n[[txn]]\nname = \"a\"\nweight = 100\n\
         [[txn.op]]\nread = \"u\"\n",
    )
    .unwrap();
    let arg = format!("spec:{}", file.display());
    for cmd in [&["run", "-w", &arg][..], &["check", "-w", &arg], &["analyze", "-w", &arg]] {
        let out = txlab(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{cmd:?}: one line: {stderr}");
        assert!(
            stderr.contains(&format!(
                "{}:10:8: transaction `a`, op 0: unknown table `u` (tables: t)",
                file.display()
            )),
            "{cmd:?}: {stderr}"
        );
    }
    let out = txlab(&["run", "-w", "spec:/nonexistent/x.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot read spec /nonexistent/x.toml: "), "{stderr}");
    let out = txlab(&["run", "-w", "nope"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("one of ycsb, smallbank, tpcc, tpce, pieces, spec:FILE.toml"),
        "{stderr}"
    );
}

/// A logged spec run recovers, and `--verify` checks the spec's ledger from the acknowledgement
/// table; without one, the ledger lived in memory and the verdict says it cannot check.
#[test]
fn a_spec_run_recovers_and_verifies_its_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let w = example("inventory-hotspot.toml");
    for acked in [true, false] {
        let logs = dir.path().join(format!("logs-{acked}"));
        let acks = dir.path().join(format!("acks-{acked}"));
        let mut args = vec![
            "run".to_string(),
            "-p".into(),
            "silo".into(),
            "-w".into(),
            w.clone(),
            "--threads".into(),
            "2".into(),
            "--txns".into(),
            "1000".into(),
            "--log-dir".into(),
            logs.display().to_string(),
        ];
        if acked {
            args.extend(["--ack-file".into(), acks.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = txlab(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let silo = logs.join("silo");
        let out = txlab(&["recover", "--log-dir", silo.to_str().unwrap(), "--verify"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if acked {
            assert!(
                stdout.contains(
                    "verify: invariants hold: the updated and incremented columns total what the \
                     committed transactions added"
                ),
                "{stdout}"
            );
        } else {
            assert!(
                stdout.contains(
                    "verify: spec:inventory-hotspot's invariant depends on what the run \
                     committed, which it kept in memory: not checkable after a crash without \
                     --ack-file"
                ),
                "{stdout}"
            );
        }
    }
}
