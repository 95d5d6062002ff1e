//! The command line: bad input gets one line naming the flag and the valid range, and a non-zero
//! exit; a small run writes JSON with the fields scripts rely on.

use std::process::{Command, Output};

fn txlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txlab")).args(args).output().expect("run txlab")
}

fn fails_with(args: &[&str], code: i32, message: &str) {
    let out = txlab(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: one line expected, got:\n{stderr}");
    assert_eq!(stderr.trim_end(), message, "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
}

#[test]
fn an_unknown_protocol_is_refused_with_the_valid_names() {
    fails_with(
        &["run", "--protocol", "foo"],
        2,
        "error: --protocol 'foo' is not valid (expected one of: nocc, 2pl-nowait, 2pl-waitdie, 2pl-ordered, silo, tictoc, mocc, si, ermia-ssn, ermia-ssi, hekaton, cicada, bohm, ic3)",
    );
}

#[test]
fn theta_outside_its_range_is_refused() {
    fails_with(&["run", "--theta", "1.5"], 2, "error: --theta 1.5 is out of range (0 to 0.999)");
    fails_with(&["run", "--theta", "-0.1"], 2, "error: --theta -0.1 is out of range (0 to 0.999)");
}

#[test]
fn logging_flags_without_a_log_directory_are_refused() {
    let message =
        "error: --log, --sync, --group-commit-ms, --log-buffer-kb and --checkpoint-interval need --log-dir";
    for flags in [
        &["--log", "central"][..],
        &["--sync", "commit"],
        &["--group-commit-ms", "5"],
        &["--log-buffer-kb", "1024"],
        &["--checkpoint-interval", "1"],
    ] {
        fails_with(&[&["run"][..], flags].concat(), 2, message);
    }
}

#[test]
fn a_missing_required_flag_is_named() {
    fails_with(
        &["sweep", "--vary", "threads=1,2"],
        2,
        "error: --out is required (see txlab --help)",
    );
}

#[test]
fn partitioned_ycsb_needs_a_record_per_thread() {
    fails_with(
        &["run", "-w", "ycsb", "--partitioned", "--records", "3", "--threads", "4"],
        2,
        "error: --partitioned gives each thread its own records: --records 3 is fewer than \
         --threads 4",
    );
    fails_with(
        &["run", "-w", "ycsb", "--partitioned", "--scan-ratio", "0.1", "--index", "ordered"],
        2,
        "error: --partitioned cannot be used with --scan-ratio above 0 (a scan crosses slices)",
    );
}

#[test]
fn zero_threads_is_refused() {
    fails_with(&["run", "--threads", "0"], 2, "error: --threads 0 is out of range (1 to 1024)");
    fails_with(
        &["run", "--threads", "-3"],
        2,
        "error: --threads '-3' is not valid: expected a whole number, 1 to 1024",
    );
}

#[test]
fn a_zero_payload_is_refused() {
    fails_with(
        &["run", "--payload", "0"],
        2,
        "error: --payload 0 is out of range (1 to 1048576 bytes)",
    );
}

#[test]
fn other_out_of_range_values_are_refused() {
    fails_with(&["run", "--read-ratio", "2"], 2, "error: --read-ratio 2 is out of range (0 to 1)");
    fails_with(
        &["run", "--duration", "0"],
        2,
        "error: --duration 0 is out of range (above 0 to 86400)",
    );
    fails_with(&["run", "--ops", "0"], 2, "error: --ops 0 is out of range (1 to 100000)");
    fails_with(&["run", "--txns", "0"], 2, "error: --txns 0 is out of range (1 to 1000000000000)");
    fails_with(
        &["run", "--txns", "5", "--duration", "1"],
        2,
        "error: the argument '--txns <TXNS>' cannot be used with '--duration <DURATION>' (see txlab --help)",
    );
    fails_with(&["run", "--repeat", "0"], 2, "error: --repeat 0 is out of range (1 to 100)");
    for kb in ["48", "100", "2097152"] {
        fails_with(
            &["run", "--log-dir", "/nonexistent/txlab", "--log-buffer-kb", kb],
            2,
            &format!("error: --log-buffer-kb {kb} is not a power of two from 64 to 1048576"),
        );
    }
    fails_with(
        &["run", "--read-ratio", "0.6", "--scan-ratio", "0.6"],
        2,
        "error: --read-ratio 0.6 + --insert-ratio 0 + --scan-ratio 0.6 exceed 1 (the rest of the operations are writes)",
    );
    fails_with(
        &["run", "--preset", "e", "--index", "hash"],
        2,
        "error: --scan-ratio above 0 needs --index ordered or dense (a hash index cannot scan)",
    );
}

#[test]
fn malformed_numbers_and_unknown_flags_get_one_line() {
    fails_with(
        &["run", "--threads", "abc"],
        2,
        "error: --threads 'abc' is not valid: expected a whole number, 1 to 1024",
    );
    let out = txlab(&["run", "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--bogus"), "{stderr}");
}

#[test]
fn more_records_than_memory_allows_is_refused_before_loading() {
    let out = txlab(&["run", "--records", "1000000000000", "--protocol", "silo"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: --records 1000000000000 with --payload 4: the data needs about"),
        "{stderr}"
    );
    assert!(stderr.contains("GiB of memory is available"), "{stderr}");
}

#[test]
fn a_small_run_writes_json_and_csv_with_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let csv = dir.path().join("out.csv");
    let out = txlab(&[
        "run",
        "--protocol",
        "silo",
        "--workload",
        "ycsb",
        "--threads",
        "2",
        "--txns",
        "3000",
        "--records",
        "10000",
        "--ops",
        "4",
        "--read-ratio",
        "0.5",
        "--theta",
        "0.9",
        "--payload",
        "16",
        "--rmw",
        "--no-prefault",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("no backoff, no pre-faulting"), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["protocol"], "silo");
    assert!(v["throughput"].as_f64().unwrap() > 0.0);
    let ar = v["abort_ratio"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&ar));
    assert_eq!(v["config"]["workload"]["records"], 10000);
    assert_eq!(v["config"]["workload"]["rmw"], true);
    assert_eq!(v["config"]["run"]["threads"], 2);
    assert_eq!(v["config"]["run"]["prefault"], false);
    let length = &v["config"]["run"]["length"];
    assert_eq!((&length["kind"], &length["per_worker"]), (&"transactions".into(), &3000.into()));
    assert_eq!(v["commits"], 6000, "two workers, 3000 transactions each (YCSB never rolls back)");
    assert!(v["git_revision"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(v["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(v["latency"]["p99_us"].as_f64().unwrap() >= v["latency"]["p50_us"].as_f64().unwrap());
    assert!(v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')), "{}", v["timestamp"]);
    assert!(v["rustc"].as_str().is_some_and(|s| s.starts_with("rustc ")));
    assert!(v["git_dirty"].is_boolean());
    assert!(v["machine"]["kernel"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(v["summary"]["median_of"], 1);
    assert!(v["versions"].is_null(), "silo keeps no versions: {}", v["versions"]);
    // Durations are seconds, as numbers.
    assert_eq!(v["config"]["database"]["epoch_interval_s"], 0.04);
    assert!(v["per_type"][0]["latency"]["p99_us"].as_f64().unwrap() > 0.0);
    // The CSV has a column per figure, parameter and abort reason.
    let mut reader = csv::Reader::from_path(&csv).unwrap();
    let header = reader.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 1);
    let col = |name: &str| {
        let at =
            header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
        rows[0][at].to_string()
    };
    assert_eq!(col("protocol"), "silo");
    assert_eq!(col("workload"), "ycsb");
    assert_eq!(col("threads"), "2");
    assert_eq!(col("repeat"), "0");
    assert_eq!(col("commits"), "6000");
    assert_eq!(col("workload.records"), "10000");
    assert_eq!(col("workload.theta"), "0.9");
    assert_eq!(col("invariant"), "held");
    assert!(col("aborts.read-validation").parse::<u64>().is_ok());
    assert!(!col("timestamp").is_empty());
    assert_eq!(col("versions.alive"), "", "silo keeps no versions");
}

/// A multi-version protocol's version figures are in its JSON and CSV results.
#[test]
fn a_multi_version_run_reports_its_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("out.json"), dir.path().join("out.csv"));
    let out = txlab(&[
        "run",
        "-p",
        "si",
        "-t",
        "2",
        "--txns",
        "2000",
        "--records",
        "1000",
        "--no-prefault",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let alive = v["versions"]["alive"].as_u64().unwrap();
    assert!(alive >= 1000, "at least a version per row: {}", v["versions"]);
    let mut reader = csv::Reader::from_path(&csv).unwrap();
    let header = reader.headers().unwrap().clone();
    let row = reader.records().next().unwrap().unwrap();
    let col = |name: &str| row[header.iter().position(|h| h == name).unwrap()].to_string();
    assert_eq!(col("versions.alive"), alive.to_string());
    assert_eq!(col("versions.longest_chain"), v["versions"]["longest_chain"].to_string());
    assert!(col("versions.gc_lag_max_us").parse::<f64>().is_ok());
    assert_eq!(col("aborts.snapshot-too-old"), "0");
}

/// A `run` with `args` writing its JSON to `json` and its CSV to `csv`, which must succeed:
/// (stdout, stderr, the JSON record, the CSV's header and first row).
fn run_recorded(
    args: &[&str],
    json: &std::path::Path,
    csv: &std::path::Path,
) -> (String, String, serde_json::Value, csv::StringRecord, csv::StringRecord) {
    let mut all = args.to_vec();
    all.extend(["--json", json.to_str().unwrap(), "--csv", csv.to_str().unwrap()]);
    let out = txlab(&all);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let mut reader = csv::Reader::from_path(csv).unwrap();
    let header = reader.headers().unwrap().clone();
    let row = reader.records().next().unwrap().unwrap();
    (String::from_utf8_lossy(&out.stdout).to_string(), err, v, header, row)
}

/// Cicada runs with its own contention regulation unless the run names a backoff, and records
/// the policy it ran with; with the central counter its read-only snapshots have no staleness
/// in time (the JSON says null, the CSV leaves the cells empty, the text says why).
#[test]
fn cicada_backs_off_adaptively_by_default_and_counter_timestamps_tell_no_staleness() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("out.json"), dir.path().join("out.csv"));
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "-p", "cicada", "-t", "2", "--txns", "2000"];
        args.extend(["--records", "1000", "--no-prefault", "--read-ratio", "0.9"]);
        args.extend(extra);
        let (_, err, v, header, row) = run_recorded(&args, &json, &csv);
        (err, v, header, row)
    };
    let (err, v, _, _) = run(&[]);
    assert!(err.contains("adaptive backoff for cicada, none for the others"), "{err}");
    assert_eq!(v["config"]["run"]["backoff"]["kind"], "adaptive");
    assert!(v["versions"]["read_only_staleness_mean_us"].is_number(), "{}", v["versions"]);
    let (err, v, _, _) = run(&["--backoff", "none"]);
    assert!(err.contains("no backoff"), "{err}");
    assert_eq!(v["config"]["run"]["backoff"]["kind"], "none");
    let counter = ["--opt", "timestamps=counter", "--opt", "external-consistency=off"];
    let (_, v, header, row) = run(&counter);
    assert_eq!(v["options"]["timestamps"], "counter");
    assert!(v["versions"]["read_only_safe"].as_u64().unwrap() > 0, "{}", v["versions"]);
    assert!(v["versions"]["read_only_staleness_mean_us"].is_null(), "{}", v["versions"]);
    let col = |name: &str| row[header.iter().position(|h| h == name).unwrap()].to_string();
    assert_eq!(col("versions.read_only_staleness_mean_us"), "");
    assert!(col("options").contains("timestamps=counter"), "{}", col("options"));
}

/// `--breakdown` times each phase of the measured transactions: the JSON's parts (microseconds
/// per commit) are never negative, reads, writes and commits took time, and the parts add up to
/// the total, the rest being `other`; the text and the CSV show them; a run without the flag has
/// no breakdown (the CSV's cells are empty).
#[test]
fn a_breakdown_accounts_for_the_time_per_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("out.json"), dir.path().join("out.csv"));
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "-p", "silo", "-t", "3", "--txns", "3000", "--records", "1000"];
        args.extend(["--no-prefault", "--read-ratio", "0.5"]);
        args.extend(extra);
        let (text, _, v, header, row) = run_recorded(&args, &json, &csv);
        let i = header.iter().position(|h| h == "breakdown.read_us").expect("a breakdown column");
        (text, v, row[i].to_string())
    };
    let (text, v, cell) = run(&["--breakdown"]);
    let b = &v["breakdown"];
    let part = |n: &str| b[format!("{n}_us")].as_f64().unwrap_or_else(|| panic!("{n}: {b}"));
    let names = ["begin", "prefetch", "read", "write", "commit", "abort", "backoff", "other"];
    assert!(names.iter().all(|n| part(n) >= 0.0), "{b}");
    for n in ["prefetch", "read", "write", "commit", "other"] {
        assert!(part(n) > 0.0, "{n} took no time: {b}");
    }
    let (sum, total) = (names.iter().map(|n| part(n)).sum::<f64>(), part("total"));
    assert!((sum - total).abs() <= 1e-9 * total, "the parts add up to {sum}, not {total}");
    assert!(text.contains("  breakdown   us per commit: begin "), "{text}");
    assert!(cell.parse::<f64>().unwrap() > 0.0, "{cell}");
    assert_eq!(v["config"]["run"]["breakdown"], true);
    let (text, v, cell) = run(&[]);
    assert!(v.get("breakdown").is_none(), "{v}");
    assert!(!text.contains("breakdown"), "{text}");
    assert_eq!(cell, "");
}

#[test]
fn running_every_protocol_prints_a_comparison_against_nocc() {
    let out = txlab(&[
        "run",
        "--threads",
        "2",
        "--duration",
        "0.2",
        // A warm-up: the workers pause after it while the leader faults in memory for the
        // window's inserts (YCSB-E inserts).
        "--warmup",
        "0.1",
        "--records",
        "5000",
        "--preset",
        "e",
        "--ops",
        "2",
        "--repeat",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Comparison"), "{stdout}");
    for p in ["nocc", "2pl-nowait", "2pl-waitdie", "silo"] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(p)), "{p} missing:\n{stdout}");
    }
    for p in ["nocc", "2pl-nowait", "2pl-waitdie", "silo"] {
        let runs = stdout
            .lines()
            .filter(|l| l.starts_with("run ") && l.contains(&format!(": {p} on")))
            .count();
        assert_eq!(runs, 2, "two interleaved runs of {p}:\n{stdout}");
    }
    let table = stdout.split("Comparison").nth(1).unwrap();
    let nocc = table.lines().find(|l| l.trim_start().starts_with("nocc ")).unwrap();
    assert!(nocc.contains("1.000"), "nocc's ratio to itself: {nocc}");
}

/// At one warehouse nocc hands one order id to two concurrent NewOrders and drops the second
/// (missing row); the comparison says its figure is no baseline. Silo's run is not flagged.
#[test]
fn a_comparison_warns_when_nocc_loses_updates() {
    let run = |threads: &str, txns: &str| {
        let out = txlab(&[
            "run",
            "-w",
            "tpcc",
            "--np",
            "--warehouses",
            "1",
            "--threads",
            threads,
            "-p",
            "nocc,silo",
            "--txns",
            txns,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Four workers on one warehouse's ten districts: nocc's NewOrders share order ids whenever
    // two workers overlap, which tens of thousands of transactions make certain even on a
    // loaded machine.
    let stdout = run("4", "25000");
    let table = stdout.split("Comparison").nth(1).expect("a comparison");
    let note = table.split("note: nocc ended").nth(1).unwrap_or_else(|| {
        panic!("no lost-update note:\n{stdout}");
    });
    assert!(note.contains("with a missing row") && note.contains("not a baseline"), "{note}");
    // One thread cannot lose updates: no note.
    let stdout = run("1", "5000");
    assert!(stdout.contains("Comparison") && !stdout.contains("note: nocc"), "{stdout}");
}

#[test]
fn list_names_every_protocol_workload_and_preset() {
    let out = txlab(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8_lossy(&out.stdout);
    for word in [
        "nocc",
        "2pl-nowait",
        "2pl-waitdie",
        "silo",
        "ycsb",
        "isolation: no isolation",
        "isolation: serializable",
    ] {
        assert!(s.contains(word), "{word} missing:\n{s}");
    }
    for p in ["a ", "b ", "c ", "d ", "e ", "f "] {
        assert!(s.lines().any(|l| l.trim_start().starts_with(p)), "preset {p} missing");
    }
}

#[test]
fn help_reads_like_a_manual() {
    let out = txlab(&["run", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--protocol",
        "--workload",
        "--threads",
        "--duration",
        "--json",
        "--records",
        "--ops",
        "--read-ratio",
        "--theta",
        "--payload",
        "--rmw",
        "--preset",
        "--backoff",
    ] {
        assert!(s.contains(flag), "{flag} missing from --help");
    }
}

/// The CI gate of the checker: every protocol's quick check passes (only permitted anomalies).
fn quick_check_passes(protocol: &str, extra: &[&str]) -> String {
    let mut args = vec!["check", "--protocol", protocol, "--quick"];
    args.extend(extra);
    let out = txlab(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // The verdicts come last, then one overall line.
    let verdicts = stdout.split("\nVerdicts:\n").nth(1).expect("a verdict table");
    assert!(verdicts.contains(&format!("  {protocol:<13} PASS  promises")), "{stdout}");
    let workloads = if extra.contains(&"-w") { 1 } else { 7 };
    let overall = format!(
        "overall: PASS (1 protocol(s) x {workloads} workload(s): every protocol showed only \
         anomalies it permits)"
    );
    assert!(verdicts.trim_end().ends_with(&overall), "{stdout}");
    if workloads == 7 {
        for w in ["bank", "write-skew", "read-only", "hot-rmw", "scan-insert", "tpcc", "tpce"] {
            assert!(stdout.contains(&format!("  {w} ")), "{w} missing:\n{stdout}");
        }
    }
    stdout
}

#[test]
fn check_quick_passes_for_2pl_nowait() {
    let s = quick_check_passes("2pl-nowait", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

#[test]
fn check_quick_passes_for_2pl_waitdie() {
    let s = quick_check_passes("2pl-waitdie", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// Ordered locking from the declared sets (the check workloads declare theirs, the
/// scan-insert key and TPC-C's data-dependent keys as guesses): no anomaly, no deadlock.
#[test]
fn check_quick_passes_for_2pl_ordered() {
    let s = quick_check_passes("2pl-ordered", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

#[test]
fn check_quick_passes_for_silo() {
    let s = quick_check_passes("silo", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// SSN on top of the same snapshot isolation that shows write skew below: no anomaly left.
#[test]
fn check_quick_passes_for_ermia_ssn() {
    let s = quick_check_passes("ermia-ssn", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// ERMIA's SSI on the same snapshot isolation: no anomaly left either.
#[test]
fn check_quick_passes_for_ermia_ssi() {
    let s = quick_check_passes("ermia-ssi", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// Without ERMIA's read optimisation (on by default: read-mostly transactions read every
/// unoverwritten version unmarked) every read is marked, and the check stays clean.
#[test]
fn check_quick_passes_for_ermia_ssi_with_marked_reads() {
    let s = quick_check_passes("ermia-ssi", &["--opt", "old-version-age=off"]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

#[test]
fn check_quick_passes_for_ic3() {
    quick_check_passes("ic3", &[]);
}

/// IC3 with snapshots every epoch: TPC-C's read-only transactions (and the other workloads'
/// declared ones) read snapshots while typed transactions commit piece by piece; no anomaly.
#[test]
fn check_quick_passes_for_ic3_with_snapshots() {
    let s = quick_check_passes("ic3", &["--opt", "snapshot-epochs=1"]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// Silo's snapshots as MOCC keeps them, with every record hot (locked in the read phase by
/// the writers, never by the snapshot readers): no anomaly.
#[test]
fn check_quick_passes_for_mocc_with_snapshots() {
    let s = quick_check_passes(
        "mocc",
        &["--opt", "snapshot-epochs=1", "--opt", "temperature-threshold=1"],
    );
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// BOHM runs no interactive transactions: its checks run through its pipeline (the same
/// transactions, declared, executed at their timestamps), with the default split, with
/// small batches over two CC threads, and with the adaptive split; no anomaly any way.
#[test]
fn check_quick_passes_for_bohm() {
    let s = quick_check_passes("bohm", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
    for split in ["dedicated", "adaptive"] {
        let small = [
            "--opt",
            "batch=7",
            "--opt",
            "cc-threads=2",
            "--opt",
            &format!("split={split}"),
            "-w",
            "bank,write-skew,read-only,hot-rmw,scan-insert",
        ];
        let out = txlab(&[&["check", "-p", "bohm", "--quick"][..], &small[..]].concat());
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{split}: {stdout}\n{stderr}");
        assert!(stdout.contains("every protocol showed only anomalies it permits"), "{stdout}");
    }
}

/// Hekaton validates at its commit timestamp and reads speculatively: no anomaly.
#[test]
fn check_quick_passes_for_hekaton() {
    let s = quick_check_passes("hekaton", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// Cicada serializes in timestamp order, installing versions anywhere in a chain: no anomaly,
/// with its optimisations on and with them off (and aborting on pending versions instead of
/// waiting).
#[test]
fn check_quick_passes_for_cicada() {
    let s = quick_check_passes("cicada", &[]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
    let off = [
        "--opt",
        "sort=off",
        "--opt",
        "precheck=off",
        "--opt",
        "adaptive=off",
        "--opt",
        "inlining=off",
        "--opt",
        "early-abort=off",
        "--opt",
        "write-latest-only=off",
        "--opt",
        "wait=off",
        "--opt",
        "deferred-index=off",
    ];
    let s = quick_check_passes("cicada", &off);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// Cicada's multi-version index, with nodes of 3 keys so that inserts split leaves, removals
/// empty them and scans cross many: no anomaly (phantoms are caught by the leaves read).
#[test]
fn check_quick_passes_for_cicada_multi_version_index() {
    let mv = ["--opt", "index=multi-version", "--opt", "index-fanout=3"];
    let s = quick_check_passes("cicada", &mv);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
}

/// Cicada-SV (`single-version=on`) is checked on every workload whose rows fit its record
/// heads; TPC-C's do not, and the check says which table and exits 1.
#[test]
fn check_quick_passes_for_cicada_single_version() {
    let out = txlab(&[
        "check",
        "-p",
        "cicada",
        "--quick",
        "--opt",
        "single-version=on",
        "-w",
        "bank,write-skew,read-only,hot-rmw,scan-insert",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("observed no anomaly (serializable)"), "{stdout}");
    assert!(stdout.contains("overall: PASS (1 protocol(s) x 5 workload(s)"), "{stdout}");
    let out =
        txlab(&["check", "-p", "cicada", "--quick", "--opt", "single-version=on", "-w", "tpcc"]);
    let all =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains(
            "single-version=on keeps each row in its record head, which holds at most \
                      216 bytes; table `customer` has rows of 679 bytes"
        ),
        "{all}"
    );
}

/// `nocc` promises nothing, so it passes, but the check must see it lose updates and read
/// aborted data (the positive control).
#[test]
fn check_sees_nocc_lose_updates_and_read_aborted_data() {
    let s = quick_check_passes("nocc", &["--verbose"]);
    assert!(s.contains("lost update (permitted)"), "{s}");
    assert!(s.contains("G1a (aborted read) (permitted)"), "{s}");
    assert!(s.contains("G2 (phantom) (permitted)"), "{s}");
    // Without --verbose, nocc's permitted anomalies are only named, not detailed.
    let s = quick_check_passes("nocc", &["-w", "hot-rmw"]);
    assert!(!s.contains("(permitted)"), "{s}");
    assert!(s.contains("--verbose shows them"), "{s}");
}

/// `si` promises snapshot isolation: the check passes, and it must see the write skew and the
/// read-only anomaly that SI permits; held to serializability it fails (the positive control
/// that the checker sees SI's anomalies).
#[test]
fn check_passes_si_and_sees_its_write_skew() {
    let s = quick_check_passes("si", &["--verbose"]);
    assert!(s.contains("  si            PASS  promises snapshot isolation"), "{s}");
    assert!(s.contains("G2-item (write skew) (permitted)"), "{s}");
    for w in ["write-skew", "read-only"] {
        let line = s.lines().find(|l| l.starts_with(&format!("  {w} "))).unwrap();
        assert!(line.ends_with("G2-item (write skew)"), "{w}: {line}");
    }
    let out =
        txlab(&["check", "-p", "si", "-w", "write-skew", "--quick", "--isolation", "serializable"]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert!(s.contains("  si            FAIL  held to serializable"), "{s}");
    assert!(s.contains("G2-item (write skew) (not permitted)"), "{s}");
}

/// Held to a level it does not reach, a protocol fails: exit 1, the cycle and a replay command.
#[test]
fn check_fails_a_protocol_held_to_a_level_it_breaks() {
    let out =
        txlab(&["check", "-p", "nocc", "-w", "hot-rmw", "--quick", "--isolation", "serializable"]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{s}");
    assert!(s.contains("  nocc          FAIL  held to serializable"), "{s}");
    assert!(
        s.trim_end().ends_with("overall: FAIL (nocc showed anomalies it does not permit)"),
        "{s}"
    );
    assert!(s.contains("lost update (not permitted)"), "{s}");
    assert!(s.contains("cycle: w"), "{s}");
    assert!(
        s.contains("replay: txlab check --protocol nocc --workload hot-rmw --seed 1 --txns 2000"),
        "{s}"
    );
}

#[test]
fn check_refuses_bad_input() {
    fails_with(&["check", "--threads", "0"], 2, "error: --threads 0 is out of range (1 to 1024)");
    fails_with(&["check", "--txns", "0"], 2, "error: --txns 0 is out of range (at least 1)");
    fails_with(
        &["check", "--max-pause-us", "2000000"],
        2,
        "error: --max-pause-us 2000000 is out of range (0 to 1000000)",
    );
    let out = txlab(&["check", "--quick", "--long"]);
    assert_eq!(out.status.code(), Some(2));
    let out = txlab(&["check", "--workload", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bank, write-skew, read-only"));
}

#[test]
fn check_writes_json_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("check.json");
    let out = txlab(&[
        "check",
        "-p",
        "silo",
        "-w",
        "bank",
        "--txns",
        "200",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["passed"], true);
    assert_eq!(v["verdicts"][0]["protocol"], "silo");
    assert_eq!(v["verdicts"][0]["workloads"][0]["workload"], "bank");
    assert!(v["verdicts"][0]["workloads"][0]["committed"].as_u64().unwrap() > 1000);
}

/// `run --record-history` checks each run's history: clean for Silo and 2PL on a skewed YCSB,
/// reported in the text and the JSON; nocc's anomalies are shown as permitted.
#[test]
fn run_record_history_checks_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = txlab(&[
        "run",
        "-p",
        "nocc,2pl-nowait,silo",
        "--threads",
        "4",
        "--txns",
        "500",
        "--records",
        "1000",
        "--theta",
        "0.9",
        "--preset",
        "a",
        "--record-history",
        "--json",
        json.to_str().unwrap(),
    ]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", String::from_utf8_lossy(&out.stderr));
    // Three protocols, three runs each (the default when comparing): every run's history is
    // checked, each from a freshly loaded database.
    assert_eq!(s.matches("  history     ").count(), 9, "{s}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for run in v["runs"].as_array().unwrap() {
        let h = &run["history_check"];
        assert_eq!(h["committed"], 2000, "4 workers' 500 transactions each: {h}");
        assert_eq!(h["permitted"], true, "{h}");
        if run["protocol"] != "nocc" {
            assert_eq!(h["anomalies"].as_array().unwrap().len(), 0, "{h}");
        }
    }
}

#[test]
fn smallbank_parameters_are_checked() {
    fails_with(
        &["run", "--workload", "smallbank", "--customers", "0"],
        2,
        "error: --customers 0 is out of range (2 to 4294967296)",
    );
    fails_with(
        &["run", "--workload", "smallbank", "--records", "5"],
        2,
        "error: --records applies to --workload ycsb",
    );
    fails_with(
        &["run", "--customers", "50"],
        2,
        "error: --customers applies to --workload smallbank and tpce",
    );
}

#[test]
fn a_short_smallbank_run_reports_every_transaction_type() {
    let out = txlab(&[
        "run",
        "-p",
        "silo",
        "-w",
        "smallbank",
        "--customers",
        "100",
        "--threads",
        "2",
        "--txns",
        "2000",
    ]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{s}\n{}", String::from_utf8_lossy(&out.stderr));
    for t in [
        "balance",
        "deposit-checking",
        "transact-savings",
        "amalgamate",
        "write-check",
        "send-payment",
    ] {
        assert!(s.contains(&format!("  {t} ")), "{t} missing:\n{s}");
    }
    assert!(!s.contains("invariant"), "{s}");
}

#[test]
fn pieces_parameters_are_checked() {
    fails_with(
        &["run", "-w", "pieces", "--pieces", "0"],
        2,
        "error: --pieces 0 is out of range (1 to 64)",
    );
    fails_with(
        &["run", "-w", "pieces", "--table-rows", "3"],
        2,
        "error: --table-rows 3 is out of range (4 to 4294967296: a piece updates 4 distinct rows)",
    );
    fails_with(
        &["run", "-w", "pieces", "--table-rows", "50", "--scope", "51"],
        2,
        "error: --scope 51 is out of range (1 to --table-rows, 50)",
    );
    fails_with(
        &["run", "-w", "pieces", "--user-abort", "-1"],
        2,
        "error: --user-abort -1 is out of range (0 to 100)",
    );
    fails_with(&["run", "--scope", "10"], 2, "error: --scope applies to --workload pieces");
    fails_with(
        &["run", "-w", "pieces", "--warehouses", "2"],
        2,
        "error: --warehouses applies to --workload tpcc",
    );
}

/// IC3's micro-benchmark with user aborts: ic3 cascades them and keeps the counters exact.
#[test]
fn a_short_pieces_run_counts_its_updates() {
    let out = txlab(&[
        "run",
        "-p",
        "ic3,2pl-waitdie",
        "-w",
        "pieces",
        "--pieces",
        "3",
        "--table-rows",
        "100",
        "--scope",
        "5",
        "--user-abort",
        "10",
        "--threads",
        "2",
        "--txns",
        "2000",
    ]);
    let s = String::from_utf8_lossy(&out.stdout);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{s}\n{e}");
    assert!(e.contains("IC3 micro-benchmark: 3 pieces of 4 updates, 100 rows per table"), "{e}");
    assert!(s.contains("user "), "user aborts reported:\n{s}");
    assert!(!s.contains("invariant"), "{s}");
}

#[test]
fn tpcc_parameters_are_checked() {
    fails_with(
        &["run", "-w", "tpcc", "--warehouses", "0"],
        2,
        "error: --warehouses 0 is out of range (1 to 65535)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--warehouses", "70000"],
        2,
        "error: --warehouses 70000 is out of range (1 to 65535)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--mix", "45,43,4,4,5"],
        2,
        "error: --mix 45,43,4,4,5 sums to 101, not 100",
    );
    fails_with(
        &["run", "-w", "tpcc", "--mix", "50,50"],
        2,
        "error: --mix '50,50' needs five comma-separated percentages (new-order, payment, \
         order-status, delivery, stock-level), e.g. 45,43,4,4,4",
    );
    fails_with(
        &["run", "-w", "tpcc", "--np", "--mix", "50,50,0,0,0"],
        2,
        "error: the argument '--np' cannot be used with '--mix <NO,P,OS,D,SL>' (see txlab --help)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--simplify", "everything"],
        2,
        "error: --simplify 'everything' is not valid (expected one of: no-remote, no-rollback, \
         customer-by-id, no-inserts)",
    );
    fails_with(&["run", "--warehouses", "2"], 2, "error: --warehouses applies to --workload tpcc");
    fails_with(&["run", "-w", "smallbank", "--np"], 2, "error: --np applies to --workload tpcc");
    fails_with(
        &["run", "-w", "tpcc", "--theta", "0.5"],
        2,
        "error: --theta applies to --workload ycsb",
    );
    fails_with(
        &["run", "-w", "tpcc", "--customers", "5"],
        2,
        "error: --customers applies to --workload smallbank and tpce",
    );
    fails_with(
        &["run", "-w", "tpcc", "--analytic", "0"],
        2,
        "error: --analytic 0 is out of range (1 to 100 percent of the transactions)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--analytic", "101"],
        2,
        "error: --analytic 101 is out of range (1 to 100 percent of the transactions)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--analytic-scan", "5"],
        2,
        "error: --analytic-scan needs --analytic",
    );
    fails_with(
        &["run", "-w", "tpcc", "--analytic", "20", "--analytic-scan", "0"],
        2,
        "error: --analytic-scan 0 is out of range (more than 0, at most 100 percent of a \
         warehouse's stock)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--analytic", "20", "--analytic-scan", "NaN"],
        2,
        "error: --analytic-scan NaN is out of range (more than 0, at most 100 percent of a \
         warehouse's stock)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--analytic", "20", "--analytic-scan", "0.0001"],
        2,
        "error: --analytic-scan 0.0001 scans no stock row (one row is 0.001 percent)",
    );
    fails_with(
        &["run", "-w", "ycsb", "--analytic", "20"],
        2,
        "error: --analytic applies to --workload tpcc",
    );
}

/// The analytic transaction is a type of its own in the report, beside the total, and says it
/// departs from the specification.
#[test]
fn a_tpcc_run_with_analytics_reports_their_commit_rate() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tpcc.json");
    let out = txlab(&[
        "run",
        "-p",
        "silo,si",
        "-w",
        "tpcc",
        "--threads",
        "2",
        "--txns",
        "400",
        "--analytic",
        "25",
        "--analytic-scan",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let s = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{s}\n{err}");
    assert!(
        err.contains(
            "25 % analytic transactions scanning 2 % of a warehouse's stock (2000 rows), the mix \
             sharing the rest"
        ),
        "{err}"
    );
    assert!(s.contains("  analytic "), "the analytic type has its own line:\n{s}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for r in v["comparison"].as_array().unwrap() {
        let types = r["per_type"].as_array().unwrap();
        assert_eq!(types.len(), 6, "{r}");
        let a = &types[5];
        assert_eq!(a["name"], "analytic");
        // 800 transactions, a quarter of them analytic: the count is binomial around 200.
        let commits = a["commits"].as_u64().unwrap();
        assert!((120..=280).contains(&commits), "{commits} analytic commits of 800");
        assert!(a["throughput"].as_f64().unwrap() > 0.0);
        assert!(
            r["notes"].as_array().unwrap().iter().any(|n| n
                .as_str()
                .unwrap()
                .starts_with("analytic transaction (not in the specification): 25 %")),
            "{r}"
        );
    }
}

#[test]
fn a_short_tpcc_run_reports_new_orders_the_mix_and_simplifications() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tpcc.json");
    let out = txlab(&[
        "run",
        "-p",
        "silo,2pl-nowait",
        "-w",
        "tpcc",
        "--threads",
        "2",
        "--txns",
        "1000",
        "--simplify",
        "no-remote",
        "--json",
        json.to_str().unwrap(),
    ]);
    let s = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{s}\n{err}");
    assert!(
        err.contains("TPC-C: 1 warehouse(s)") && err.contains("SIMPLIFIED: no-remote"),
        "{err}"
    );
    assert!(
        err.contains("memory faulted in ahead of inserts"),
        "pre-faulting is the default: {err}"
    );
    assert!(s.contains("  note        SIMPLIFIED: no-remote"), "{s}");
    for t in ["new-order", "payment", "order-status", "delivery", "stock-level"] {
        assert!(s.contains(&format!("  {t} ")), "{t} missing:\n{s}");
    }
    assert!(s.contains("tpmC-style"), "{s}");
    assert!(s.contains("new-order/s"), "comparison shows the headline:\n{s}");
    assert!(!s.contains("invariant"), "{s}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for r in v["comparison"].as_array().unwrap() {
        let h = &r["headline"];
        assert_eq!(h["name"], "new-order");
        assert!(h["throughput"].as_f64().unwrap() > 0.0);
        let shares: f64 =
            r["per_type"].as_array().unwrap().iter().map(|t| t["share"].as_f64().unwrap()).sum();
        assert!((shares - 1.0).abs() < 1e-9, "measured mix sums to 1: {shares}");
        assert_eq!(r["notes"][0], "SIMPLIFIED: no-remote");
    }
}

#[test]
fn protocol_options_are_checked_per_protocol_and_recorded() {
    fails_with(
        &["run", "-p", "silo,2pl-nowait", "--opt", "validation-lock=nowait"],
        2,
        "error: --opt validation-lock applies to silo, tictoc and mocc, not to 2pl-nowait (choose \
         protocols with -p, or name one: --opt silo:validation-lock=nowait)",
    );
    // Without -p every protocol runs, and the option applies to only some of them.
    fails_with(
        &["run", "--opt", "validation-lock=nowait"],
        2,
        "error: --opt validation-lock applies to silo, tictoc and mocc, not to nocc, 2pl-nowait, \
         2pl-waitdie, 2pl-ordered, si, ermia-ssn, ermia-ssi, hekaton, cicada, bohm and ic3 (choose protocols \
         with -p, or name one: \
         --opt silo:validation-lock=nowait)",
    );
    fails_with(
        &["run", "-p", "silo,tictoc", "--opt", "preemptive-abort=off"],
        2,
        "error: --opt preemptive-abort applies to tictoc, not to silo (choose protocols with -p, \
         or name one: --opt tictoc:preemptive-abort=off)",
    );
    fails_with(
        &["run", "-p", "silo,tictoc", "--opt", "read-phase-extension=5000000"],
        2,
        "error: --opt read-phase-extension=5000000: expected a number from 0 to 1000000",
    );
    fails_with(
        &["run", "-p", "tictoc", "--opt", "timestamp-history=yes"],
        2,
        "error: --opt timestamp-history=yes: expected on or off",
    );
    fails_with(
        &["run", "-p", "si,ermia-ssi", "--opt", "old-version-age=0"],
        2,
        "error: --opt old-version-age applies to ermia-ssi, not to si (choose protocols with -p, \
         or name one: --opt ermia-ssi:old-version-age=0)",
    );
    fails_with(
        &["run", "-p", "ermia-ssi", "--opt", "old-version-age=young"],
        2,
        "error: --opt old-version-age=young: expected a number from 0 to 1099511627776 or off",
    );
    fails_with(
        &["run", "-p", "silo", "--opt", "validation-lock=maybe"],
        2,
        "error: --opt validation-lock=maybe: expected wait or nowait or nowaittt",
    );
    fails_with(
        &["run", "-p", "silo,mocc", "--opt", "validation-lock=nowaittt"],
        2,
        "error: --opt validation-lock=nowaittt: expected wait or nowait",
    );
    fails_with(
        &["run", "-p", "mocc", "--opt", "temperature-threshold=21"],
        2,
        "error: --opt temperature-threshold=21: expected a number from 1 to 20",
    );
    fails_with(
        &["run", "-p", "mocc", "--opt", "lock=mcs"],
        2,
        "error: --opt lock=mcs: expected mql or rwlock",
    );
    fails_with(
        &["run", "-p", "silo", "--opt", "nope=1"],
        2,
        "error: --opt nope: no protocol has this option (txlab list shows each protocol's)",
    );
    fails_with(&["run", "-p", "silo", "--opt", "x"], 2, "error: --opt x: expected NAME=VALUE");
    fails_with(
        &["run", "-p", "silo", "--opt", "validation-lock=wait", "--opt", "validation-lock=nowait"],
        2,
        "error: --opt validation-lock is given twice",
    );
    fails_with(
        &["check", "-p", "2pl-nowait", "--opt", "validation-lock=nowait"],
        2,
        "error: --opt validation-lock applies to silo, tictoc and mocc, not to 2pl-nowait (choose \
         protocols with -p)",
    );
    // PROTOCOL:NAME=VALUE applies to that protocol only.
    fails_with(
        &["run", "-p", "silo,si", "--opt", "sillo:validation-lock=nowait"],
        2,
        "error: --opt sillo:validation-lock: sillo is not a protocol (txlab list shows them)",
    );
    fails_with(
        &["run", "-p", "silo,si", "--opt", "tictoc:validation-lock=nowait"],
        2,
        "error: --opt tictoc:validation-lock: tictoc is not among the protocols run (choose \
         protocols with -p)",
    );
    fails_with(
        &["run", "-p", "silo,si", "--opt", "si:validation-lock=nowait"],
        2,
        "error: --opt si:validation-lock: si has no option validation-lock (txlab list shows each \
         protocol's)",
    );
    fails_with(
        &["run", "-p", "silo,si", "--opt", "silo:validation-lock=maybe"],
        2,
        "error: --opt validation-lock=maybe: expected wait or nowait or nowaittt",
    );
    fails_with(
        &[
            "run",
            "-p",
            "silo",
            "--opt",
            "silo:validation-lock=wait",
            "--opt",
            "silo:validation-lock=nowait",
        ],
        2,
        "error: --opt silo:validation-lock is given twice",
    );
    let list = String::from_utf8_lossy(&txlab(&["list"]).stdout).into_owned();
    assert!(list.contains("--opt validation-lock=wait|nowait|nowaittt (default wait)"), "{list}");
    assert!(list.contains("--opt validation-lock=wait|nowait|nowaittt (default nowait)"), "{list}");
    assert!(list.contains("--opt timestamp-history=on|off (default on)"), "{list}");
    assert!(list.contains("reads: invisible, validation writes read timestamps"), "{list}");
    assert!(list.contains("reads: visible (read locks)"), "{list}");
    assert!(list.contains("--opt temperature-threshold=1 to 20 (default 10)"), "{list}");
    assert!(list.contains("--opt snapshot-epochs=0 to 100000 (epochs) (default 0)"), "{list}");
    assert!(list.contains("--opt lock=mql|rwlock (default rwlock)"), "{list}");
    assert!(list.contains("reads: visible on hot records (read locks), else invisible"), "{list}");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let out = txlab(&[
        "run",
        "-p",
        "silo",
        "--opt",
        "validation-lock=nowait",
        "--records",
        "1000",
        "--threads",
        "3",
        "--txns",
        "2000",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("silo on ycsb | 3 threads | "), "{stdout}");
    // Every option is recorded, the defaults too.
    assert!(
        stdout
            .lines()
            .next()
            .unwrap()
            .ends_with(" | read-phase-extension=0 snapshot-epochs=0 validation-lock=nowait"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        v["options"],
        serde_json::json!({
            "validation-lock": "nowait",
            "read-phase-extension": 0,
            "snapshot-epochs": 0
        })
    );
    assert_eq!(v["commits"], 6000);
    // Scoped options: each protocol gets its own, and another's are not its business.
    let out = txlab(&[
        "run",
        "-p",
        "silo,ermia-ssi",
        "--opt",
        "ermia-ssi:old-version-age=off",
        "--opt",
        "silo:validation-lock=nowait",
        "--opt",
        "ermia-ssi:gc-interval-us=20",
        "--records",
        "1000",
        "--threads",
        "2",
        "--txns",
        "500",
        "--repeat",
        "1",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let header = |p: &str| {
        let prefix = format!("{p} on ycsb | ");
        stdout.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{stdout}"))
    };
    assert!(
        header("silo")
            .ends_with(" | read-phase-extension=0 snapshot-epochs=0 validation-lock=nowait"),
        "{stdout}"
    );
    assert!(
        header("ermia-ssi").ends_with(
            " | aggressive-gc-us=0 gc-interval-us=20 old-version-age=off version-alloc=pool \
             version-poison=off"
        ),
        "{stdout}"
    );
}

/// TicToc under each option value that changes its commit path: the defaults (nowait,
/// preemptive abort, timestamp history), and the other two lock policies with the optimisations
/// off and on.
#[test]
fn check_quick_passes_for_tictoc_under_each_commit_path() {
    for opts in [
        &[][..],
        &[
            "--opt",
            "validation-lock=wait",
            "--opt",
            "preemptive-abort=off",
            "--opt",
            "timestamp-history=off",
        ][..],
        &["--opt", "validation-lock=nowaittt"][..],
    ] {
        let s = quick_check_passes("tictoc", opts);
        assert!(s.contains("observed no anomaly (serializable)"), "{opts:?}: {s}");
    }
}

/// MOCC under each option value that changes its commit path: the defaults (records rarely
/// get hot in a quick check), and every failed validation making its record hot, with waiting
/// and with NoWait locks, each with the reader-writer lock word (the default) and MQL.
#[test]
fn check_quick_passes_for_mocc_under_each_commit_path() {
    for opts in [
        &[][..],
        &["--opt", "temperature-threshold=1"][..],
        &["--opt", "temperature-threshold=1", "--opt", "validation-lock=nowait"][..],
        &["--opt", "temperature-threshold=1", "--opt", "lock=mql"][..],
        &[
            "--opt",
            "temperature-threshold=1",
            "--opt",
            "validation-lock=nowait",
            "--opt",
            "lock=mql",
        ][..],
    ] {
        let s = quick_check_passes("mocc", opts);
        assert!(s.contains("observed no anomaly (serializable)"), "{opts:?}: {s}");
    }
}

#[test]
fn check_quick_passes_for_silo_with_nowait_validation() {
    let s = quick_check_passes("silo", &["--opt", "validation-lock=nowait"]);
    assert!(s.contains("observed no anomaly (serializable)"), "{s}");
    assert!(
        s.starts_with("txlab check: 8 threads")
            && s.lines().next().unwrap().ends_with(", --opt validation-lock=nowait"),
        "{s}"
    );
}

/// `txlab analyze -w tpce` works on TPC-E's column-level templates: the six read-only types
/// left out; Trade-Order's first frame reads only columns no template writes (the account's
/// owner and tax status, the customer's and the broker's names), so it runs unconstrained
/// apart from its other frames; Trade-Result's frames meet in the trade (frame 1 reads the
/// status frame 5 writes) and stay one piece; Trade-Result's broker totals are deferred to
/// commit; Data-Maintenance's edits meet Trade-Order and Trade-Result only where they share a
/// table (the permissions and tax rates they scan), not Market-Feed or Trade-Update.
#[test]
fn analyze_prints_tpce_column_level_graph() {
    let out = txlab(&["analyze", "-w", "tpce"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for line in [
        "workload tpce: 6 transaction types analysed (conflicts per table), 16 template pieces \
         -> 7 pieces after merging deadlock-prone cycles",
        "read-only (run on snapshots, not analysed): broker-volume, customer-position, \
         market-watch, security-detail, trade-lookup, trade-status",
        "accumulations applied at commit, outside the C-edges (a:): broker\n",
        "  piece 0: frame1  [u:customer_account u:customer u:broker]\n    \
         no C-edge: runs unconstrained",
        "  piece 1: frame2 + frame3 + frame4  (merged)",
        "  piece 0: frame1 + frame2 + frame3 + frame4 + frame5 + frame6  (merged)",
        "    C-edges: trade-order/1, trade-result/0, data-maintenance/0\n",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
}

/// `txlab analyze` prints TPC-C's SC-graph as IC3 builds it: the read-only types left out,
/// New-Order's order and order-line pieces merged (Delivery touches all their tables in one
/// piece), New-Order's warehouse read unconstrained (Payment writes other columns), and the
/// graph for Graphviz; bad input is refused.
#[test]
fn analyze_prints_the_static_conflict_graph() {
    let dir = tempfile::tempdir().unwrap();
    let dot = dir.path().join("tpcc.dot");
    let dot_arg = dot.to_str().unwrap();
    let out = txlab(&["analyze", "-w", "tpcc", "--granularity", "column", "--dot", dot_arg]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for line in [
        "workload tpcc: 3 transaction types analysed (conflicts per column), 10 template pieces \
         -> 9 pieces",
        "read-only (run on snapshots, not analysed): order-status, stock-level",
        "  piece 0: warehouse  [u:warehouse]\n    no C-edge: runs unconstrained",
        "  piece 3: order + lines  (merged)",
        "accumulations applied at commit, outside the C-edges (a:): warehouse, district",
        "reads of columns no template writes, untracked and outside the C-edges (u:): \
         warehouse, district, customer, item, stock, customer_name",
        "  piece 0: warehouse  [u:warehouse a:warehouse]\n    no C-edge: runs unconstrained",
        "  piece 1: district  [u:district a:district]\n    no C-edge: runs unconstrained",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    let graph = std::fs::read_to_string(&dot).unwrap();
    assert!(graph.starts_with("graph sc {") && graph.contains("[style=dashed]"), "{graph}");
    // What the ic3 protocol runs with (the default): conflicts per table, and accumulations
    // deferred by columns, so New-Order's district update does not meet Payment's D_YTD
    // accumulation, and no warehouse piece conflicts (W_YTD's accumulation is deferred, W_TAX
    // is read untracked); New-Order's customer piece reads only columns nobody writes, so it
    // conflicts with nothing and stays apart from the order and lines.
    let out = txlab(&["analyze", "-w", "tpcc"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in [
        "workload tpcc: 3 transaction types analysed (conflicts per table), 10 template pieces \
         -> 9 pieces after merging deadlock-prone cycles; 7 C-edges",
        "accumulations applied at commit, outside the C-edges (a:): warehouse, district\n",
        "  piece 0: warehouse  [u:warehouse]\n    no C-edge: runs unconstrained",
        "  piece 0: warehouse  [u:warehouse a:warehouse]\n    no C-edge: runs unconstrained",
        "  piece 1: district  [u:district w:district]\n    C-edges: new-order/1\n",
        "  piece 1: district  [u:district a:district]\n    no C-edge: runs unconstrained",
        "  piece 2: customer  [u:customer]\n    no C-edge: runs unconstrained",
        "  piece 3: order + lines  (merged)",
        "  piece 2: customer  [u:customer_name u:customer w:customer]\n    \
         C-edges: payment/2, delivery/0",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // Deferred by rows (what ic3 does with snapshots), D_YTD's accumulation runs as a write:
    // New-Order writes the district.
    let out = txlab(&["analyze", "-w", "tpcc", "--commutative", "rows"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in [
        "; 9 C-edges",
        "accumulations applied at commit, outside the C-edges (a:): warehouse\n\
         accumulations run as writes (the table is read or written otherwise): district\n",
        "  piece 1: district  [u:district w:district]\n    C-edges: new-order/1, payment/1",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // Without deferring (the factor analysis' baseline), both warehouse pieces conflict.
    let out = txlab(&["analyze", "-w", "tpcc", "--commutative", "off"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in [
        "; 10 C-edges",
        "accumulations run as writes (the table is read or written otherwise): warehouse, \
         district\n",
        "  piece 0: warehouse  [u:warehouse]\n    no C-edge: runs unconstrained",
        "  piece 0: warehouse  [u:warehouse w:warehouse]\n    C-edges: payment/0",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // Online analysis (§4.5, the paper's §6.9 mix): New-Order alone keeps five pieces; with
    // Payment and Delivery its last two merge, so until every worker has the new graph it
    // runs them as one piece of two sub-pieces.
    let out = txlab(&["analyze", "-w", "tpcc", "--from", "new-order,order-status,stock-level"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for line in [
        "workload tpcc with new-order, order-status, stock-level only: 1 transaction types \
         analysed (conflicts per table), 5 template pieces -> 5 pieces",
        "from new-order, order-status, stock-level to every type: transitional SC-graph",
        "  new-order:\n    piece 0: [warehouse]\n    piece 1: [district]\n    piece 2: \
         [customer]\n    piece 3: [order] [lines]\n",
        "workload tpcc: 3 transaction types analysed (conflicts per table)",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    fails_with(
        &["analyze", "--from", "new-order,foo"],
        2,
        "error: --from: workload tpcc has no transaction type 'foo' (it has: new-order, \
         payment, order-status, delivery, stock-level)",
    );
    fails_with(
        &["analyze", "--commutative", "maybe"],
        2,
        "error: --commutative 'maybe' is not valid (expected one of: on, rows, off)",
    );
    fails_with(
        &["analyze", "--granularity", "row"],
        2,
        "error: --granularity 'row' is not valid (expected one of: column, table)",
    );
    let sb = txlab(&["analyze", "-w", "smallbank"]);
    assert_eq!(sb.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&sb.stdout).contains("read-only (run on snapshots"));
    fails_with(
        &["analyze", "-w", "ycsb", "--analytic"],
        2,
        "error: --analytic is a TPC-C flag (add -w tpcc)",
    );
}

#[test]
fn mix_changes_are_checked() {
    let tpcc = ["run", "-p", "ic3", "-w", "tpcc", "--warehouses", "1", "-d", "1"];
    let fails = |extra: &[&str], message: &str| {
        let mut args = tpcc.to_vec();
        args.extend(extra);
        fails_with(&args, 2, message);
    };
    fails(
        &["--mix-at", "0=new-order,payments"],
        "error: --mix-at '0=new-order,payments': workload tpcc has no transaction type 'payments' (it has: new-order, payment, order-status, delivery, stock-level)",
    );
    fails(&["--mix-at", "0"], "error: --mix-at '0': needs SECONDS=TYPE,TYPE,...");
    fails(
        &["--mix-at", "1.5=payment"],
        "error: --mix-at '1.5=payment': '1.5' is not a time within the 1 s window",
    );
    fails(
        &["--mix-at", "0.5=payment", "--mix-at", "0.2=all"],
        "error: --mix-at '0.2=all': the steps must be given in time order, each later",
    );
    fails(
        &["--mix-at", "0=delivery", "--mix", "50,50,0,0,0"],
        "error: --mix-at '0=delivery': none of these types has a share in the mix (--mix)",
    );
    fails(&["--timeline", "0"], "error: --timeline 0 is out of range (0.01 to 60)");
    fails_with(
        &["run", "-w", "ycsb", "--mix-at", "0=ycsb"],
        2,
        "error: --mix-at '0=ycsb': workload ycsb cannot change its mix of transaction types",
    );
    fails_with(
        &["run", "-w", "tpcc", "--txns", "10", "--mix-at", "0=payment"],
        2,
        "error: --mix-at changes the mix at times: it needs a timed run, not --txns",
    );
}

/// The workers issue only the types of the steps in force: a type that is in none commits
/// nothing, whatever the timing; the timeline samples the window.
#[test]
fn mix_changes_are_followed_and_the_timeline_sampled() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = txlab(&[
        "run",
        "-p",
        "ic3,silo",
        "--repeat",
        "1",
        "-w",
        "tpcc",
        "--warehouses",
        "1",
        "-t",
        "4",
        "-d",
        "0.4",
        "--warmup",
        "0.1",
        "--mix-at",
        "0=new-order,stock-level",
        "--mix-at",
        "0.2=new-order,payment",
        "--timeline",
        "0.05",
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("  timeline    txn/s by the end of each interval: "), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let runs = v["runs"].as_array().expect("one result per protocol");
    assert_eq!(runs.len(), 2);
    for r in runs {
        let commits = |name: &str| {
            let t = r["per_type"].as_array().unwrap().iter().find(|t| t["name"] == name);
            t.unwrap()["commits"].as_u64().unwrap()
        };
        assert_eq!((commits("order-status"), commits("delivery")), (0, 0), "{}", r["protocol"]);
        assert!(commits("new-order") > 0);
        let timeline = r["timeline"].as_array().expect("a timeline");
        assert!(!timeline.is_empty() && timeline.iter().all(|p| p["t"].as_f64().unwrap() > 0.0));
        let steps = &r["config"]["run"]["mix_at"];
        assert_eq!(steps[1]["types"], serde_json::json!([0, 1]), "{steps}");
    }
}

/// A run that inserted rows is followed by a fresh load, so that every repeat starts from the
/// loaded data (TPC-C's New-Orders insert orders); `--reload never` keeps the database, and a
/// workload that inserts nothing keeps it by default.
#[test]
fn repeats_after_inserts_run_on_a_fresh_load() {
    let loads = |args: &[&str]| {
        let mut all = vec!["run", "--threads", "2", "--txns", "200", "--repeat", "3", "-p", "silo"];
        all.extend_from_slice(args);
        let out = txlab(&all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        let afresh = stderr.lines().filter(|l| l.contains("loading afresh")).count();
        let loaded = stderr.lines().filter(|l| l.contains("] loaded in ")).count();
        (afresh, loaded, stderr)
    };
    let tpcc = ["-w", "tpcc", "--warehouses", "1"];
    let (afresh, loaded, stderr) = loads(&tpcc);
    assert_eq!((afresh, loaded), (2, 3), "a load per repeat:\n{stderr}");
    assert!(stderr.contains("[silo] the last run inserted rows: loading afresh"), "{stderr}");
    let (afresh, loaded, stderr) = loads(&[&tpcc[..], &["--reload", "never"]].concat());
    assert_eq!((afresh, loaded), (0, 1), "one load:\n{stderr}");
    let (afresh, loaded, stderr) = loads(&["-w", "ycsb", "--records", "1000"]);
    assert_eq!((afresh, loaded), (0, 1), "YCSB's updates insert nothing:\n{stderr}");
    let (afresh, loaded, stderr) =
        loads(&["-w", "ycsb", "--records", "1000", "--reload", "always"]);
    assert_eq!((afresh, loaded), (2, 3), "{stderr}");
    assert!(stderr.contains("[silo] --reload always: loading afresh"), "{stderr}");
}

/// A typo gets clap's guess at what was meant, in the one line.
#[test]
fn typos_get_a_did_you_mean() {
    fails_with(
        &["run", "--protocl", "silo"],
        2,
        "error: unexpected argument '--protocl' found (did you mean '--protocol'? see txlab --help)",
    );
    fails_with(
        &["run", "-p", "sillo"],
        2,
        "error: --protocol 'sillo' is not valid (did you mean 'silo'? expected one of: nocc, \
         2pl-nowait, 2pl-waitdie, 2pl-ordered, silo, tictoc, mocc, si, ermia-ssn, ermia-ssi, \
         hekaton, cicada, bohm, ic3)",
    );
}

/// Protocols whose runs' ranges overlap are marked as not distinguishable, in the table and
/// the JSON, with the repeats estimated to separate them; one run each says it cannot tell.
#[test]
fn protocols_the_noise_does_not_separate_are_marked() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    let base = ["run", "-p", "silo,tictoc,2pl-nowait", "--records", "2000", "--txns", "300"];
    let out = txlab(&[&base[..], &["--repeat", "3", "--json", json.to_str().unwrap()]].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let table = stdout.split("Comparison (median of 3 runs per protocol").nth(1).unwrap();
    assert!(table.lines().nth(1).unwrap().contains("spread   rank"), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["comparison"].as_array().unwrap();
    let range = |label: &str| {
        let s = &rows.iter().find(|r| r["summary"]["label"] == label).unwrap()["summary"];
        (s["throughput_min"].as_f64().unwrap(), s["throughput_max"].as_f64().unwrap())
    };
    let mut pairs = 0;
    for r in rows {
        let s = &r["summary"];
        let label = s["label"].as_str().unwrap();
        let rank: Vec<u64> =
            s["rank"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        assert!(1 <= rank[0] && rank[0] <= rank[1] && rank[1] <= 3, "{label}: {rank:?}");
        let ties = s["not_distinguishable_from"].as_array().unwrap();
        // Exactly the protocols whose range overlaps this one's, and the rank spans them.
        let (lo, hi) = range(label);
        for other in ["silo", "tictoc", "2pl-nowait"].iter().filter(|o| **o != label) {
            let (olo, ohi) = range(other);
            let overlaps = olo <= hi && ohi >= lo;
            let listed = ties.iter().any(|t| t["label"] == *other);
            assert_eq!(listed, overlaps, "{label} and {other}: {s}");
            if overlaps {
                pairs += 1;
                // The pair is listed once, on the line of whichever comes first.
                let listed = |a: &str, b: &str| {
                    table.lines().any(|l| {
                        l.strip_prefix(&format!("    {a}: ")).is_some_and(|rest| {
                            rest.split(", ").any(|p| p.starts_with(&format!("{b} ")))
                        })
                    })
                };
                assert!(listed(label, other) ^ listed(other, label), "{table}");
            }
        }
        assert_eq!(rank[1] - rank[0], ties.len() as u64, "{label}: {s}");
    }
    if pairs == 0 {
        assert!(table.contains("no two protocols' ranges of runs overlap"), "{table}");
    } else {
        assert!(table.contains("Not distinguishable here, with the repeats"), "{table}");
    }
    // One run each: nothing can be said, and the note says so.
    let one = txlab(&[&base[..], &["--repeat", "1"]].concat());
    let stdout = String::from_utf8_lossy(&one.stdout);
    let header = stdout.lines().find(|l| l.starts_with("  protocol ")).unwrap();
    assert!(!header.contains("spread") && !header.contains("rank"), "{stdout}");
    assert!(
        stdout.contains("note: one run per protocol: nothing here says which differences exceed")
    );
}

/// A timed run says first how long it will take in all; a run of fixed counts says that its
/// time is the machine's.
#[test]
fn a_run_says_how_long_it_will_take() {
    let timed = txlab(&[
        "run",
        "-p",
        "silo,tictoc",
        "--records",
        "1000",
        "--duration",
        "0.05",
        "--warmup",
        "0",
        "--repeat",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&timed.stderr);
    assert_eq!(timed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("2 run(s) per protocol (about 1 minute in all)"), "{stderr}");
    let counted = txlab(&["run", "-p", "silo", "--records", "1000", "--txns", "10"]);
    let stderr = String::from_utf8_lossy(&counted.stderr);
    assert!(stderr.contains("1 run(s) per protocol (as long as the machine takes)"), "{stderr}");
}

/// A number that does not parse gets what is expected and the flag's range.
#[test]
fn numbers_that_do_not_parse_get_the_range() {
    for (args, message) in [
        (&["run", "--threads", "abc"][..], "error: --threads 'abc' is not valid: expected a whole number, 1 to 1024"),
        (&["run", "--threads", "-1"], "error: --threads '-1' is not valid: expected a whole number, 1 to 1024"),
        (&["run", "--duration", "x"], "error: --duration 'x' is not valid: expected a number, above 0 and at most 86400"),
        (&["run", "--theta", "high"], "error: --theta 'high' is not valid: expected a number, 0 to 0.999"),
        (&["run", "--records", "99999999999999999999999"], "error: --records '99999999999999999999999' is not valid: expected a whole number, 1 to 1099511627776"),
        (&["run", "--log-buffer-kb", "x"], "error: --log-buffer-kb 'x' is not valid: expected a whole number, a power of two from 64 to 1048576"),
        (&["run", "-w", "pieces", "--scope", "x"], "error: --scope 'x' is not valid: expected a whole number, 1 to --table-rows"),
        (&["run", "--seed", "x"], "error: --seed 'x' is not valid: expected a whole number"),
    ] {
        fails_with(args, 2, message);
    }
}

/// The README starts with its two commands, and every txlab command in it is one txlab takes.
#[test]
fn the_readme_commands_are_valid() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let first = readme.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    let firsts: Vec<&str> = first.lines().map(|l| l.split('#').next().unwrap().trim()).collect();
    assert_eq!(firsts, ["cargo run --release -- run", "cargo test --profile ci"]);
    let mut commands = 0;
    for block in readme.split("```sh\n").skip(1) {
        for line in block.split("```").next().unwrap().lines() {
            let Some(rest) = line.split(" #").next().unwrap().trim().strip_prefix("txlab ") else {
                continue;
            };
            let args: Vec<&str> = rest.split_whitespace().collect();
            txlab::cli::validate(&args).unwrap_or_else(|e| panic!("README: `{line}`: {e}"));
            commands += 1;
        }
    }
    assert!(commands >= 10, "the tour shows the commands ({commands} found)");
}

#[test]
fn tpce_flags_out_of_range_or_on_another_workload_are_refused() {
    fails_with(
        &["run", "-w", "tpce", "--customers", "1500"],
        2,
        "error: --customers 1500 is not a multiple of 1000 from 1000 to 1000000 (TPC-E loads \
         customers in units of 1000)",
    );
    fails_with(
        &["run", "-w", "tpce", "--customers", "99999999999"],
        2,
        "error: --customers 99999999999 is not a multiple of 1000 from 1000 to 1000000 (TPC-E \
         loads customers in units of 1000)",
    );
    fails_with(
        &["run", "-w", "tpce", "--trade-days", "301"],
        2,
        "error: --trade-days 301 is out of range (1 to 300)",
    );
    fails_with(
        &["run", "-w", "tpce", "--mix", "45,43,4,4,4"],
        2,
        "error: --mix '45,43,4,4,4' needs ten comma-separated percentages (broker-volume, \
         customer-position, market-feed, market-watch, security-detail, trade-lookup, \
         trade-order, trade-result, trade-status, trade-update), e.g. \
         4.9,13,1,18,14,8,10.1,10,19,2",
    );
    fails_with(
        &["run", "-w", "tpce", "--analytic-group", "10"],
        2,
        "error: --analytic-group needs --tpce-analytic",
    );
    fails_with(
        &["run", "-w", "tpce", "--security-range", "0"],
        2,
        "error: --security-range 0 is out of range (1 to the 685 securities of 1000 customers)",
    );
    fails_with(
        &["run", "-w", "tpcc", "--trade-days", "2"],
        2,
        "error: --trade-days applies to --workload tpce",
    );
    fails_with(
        &["run", "-w", "tpce", "--warehouses", "2"],
        2,
        "error: --warehouses applies to --workload tpcc",
    );
}

/// ERMIA's TPCE-hybrid: the analytic transaction is a type of its own in the report, and the
/// run says it departs from the specification; the consistency checks pass.
#[test]
fn a_tpce_hybrid_run_reports_its_analytic_commits() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("tpce.json");
    let out = txlab(&[
        "run",
        "-p",
        "si",
        "-w",
        "tpce",
        "--tpce-analytic",
        "20",
        "--analytic-group",
        "5",
        "--threads",
        "2",
        "--txns",
        "400",
        "--json",
        json.to_str().unwrap(),
    ]);
    let s = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{s}\n{err}");
    assert!(
        err.contains(
            "ERMIA's TPCE-hybrid mix, 20 % analytic transactions valuing 5 % of the customers' \
             accounts"
        ),
        "{err}"
    );
    assert!(s.contains("  analytic "), "the analytic type has its own line:\n{s}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // One protocol: the report itself, no comparison.
    let r = &v;
    let types = r["per_type"].as_array().unwrap();
    assert_eq!(types.len(), 13, "the ten, maintenance, cleanup and the analytic: {r}");
    assert_eq!(types[12]["name"], "analytic");
    // 800 transactions, a fifth of them analytic: the count is binomial around 160.
    let commits = types[12]["commits"].as_u64().unwrap();
    assert!((100..=220).contains(&commits), "{commits} analytic commits of 800");
    assert!(
        r["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("analytic transaction (not in the specification): 20 %")),
        "{r}"
    );
}
