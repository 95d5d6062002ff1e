//! Durability through the command line: logged runs killed with SIGKILL recover with every
//! commit they acknowledged as durable, TPC-C's consistency conditions and SmallBank's money
//! total intact; bad and partial log files give their exact one-line error, exit status 1, and
//! stay untouched.
//!
//! `TXLAB_CRASH_KILLS=N` sets the number of kills per protocol and workload (default 1: three
//! kills per protocol, one per workload; `TXLAB_CRASH_KILLS=34` kills 102 times per protocol).

use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn txlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_txlab")).args(args).output().expect("run txlab")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A finished logged run: its protocol log directory.
fn logged_run(root: &Path, protocol: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["run", "-p", protocol, "-t", "2", "--txns", "400", "--log-dir", s(root)];
    args.extend_from_slice(extra);
    let out = txlab(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    root.join(protocol)
}

/// `recover` fails with exactly `message` (one line, exit 1) and leaves the files as they were.
fn recover_fails(dir: &Path, message: &str) {
    let before = snapshot(dir);
    let out = txlab(&["recover", "--log-dir", s(dir)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end(), message);
    assert!(out.stdout.is_empty());
    assert!(before == snapshot(dir), "recovery changed the files");
}

/// The first log segment of stream 0, and the offset of the record holding its middle byte.
fn middle_record(dir: &Path) -> (PathBuf, usize, usize) {
    let seg = dir.join("log").join("w0000-00000000.log");
    let bytes = std::fs::read(&seg).unwrap();
    let middle = bytes.len() / 2;
    let mut off = 64;
    loop {
        let len = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
        if off + len > middle {
            return (seg, off, middle);
        }
        off += len;
    }
}

#[test]
fn a_clean_log_recovers_and_verifies() {
    let root = tempfile::tempdir().unwrap();
    for log in ["central", "per-worker"] {
        let args = ["-w", "tpcc", "--warehouses", "1", "--log", log];
        let dir = logged_run(&root.path().join(log), "silo", &args);
        let out = txlab(&["recover", "--log-dir", s(&dir), "--verify"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{log}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("verify: invariants hold"), "{log}: {stdout}");
    }
    let root = root.path().join("per-worker");
    let dir = root.join("silo");
    // A second run into the same directory is refused before loading.
    let out = txlab(&["run", "-p", "silo", "--log-dir", s(&root)]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "error: --log-dir {}: {} holds a log already (recover it with txlab recover --log-dir {}, or remove it)",
            root.display(),
            dir.display(),
            dir.display()
        )
    );
}

#[test]
fn corrupt_truncated_missing_and_foreign_logs_are_refused_untouched() {
    let ycsb = ["-w", "ycsb", "--records", "2000", "--payload", "100"];
    // A byte flipped in the middle of a segment, under either log manager: a bit of the
    // record's stamp (a flip in its length word reads as a record running past the end of the
    // file instead).
    for (protocol, log) in [("2pl-nowait", "per-worker"), ("silo", "central")] {
        let root = tempfile::tempdir().unwrap();
        let dir = logged_run(root.path(), protocol, &[&ycsb[..], &["--log", log]].concat());
        let (seg, rec, _) = middle_record(&dir);
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[rec + 12] ^= 0x10;
        std::fs::write(&seg, &bytes).unwrap();
        recover_fails(
            &dir,
            &format!(
                "error: {}: offset {rec}: corrupt record (record checksum mismatch)",
                seg.display()
            ),
        );
    }

    // A segment cut inside a record of its synced part.
    let root = tempfile::tempdir().unwrap();
    let dir = logged_run(root.path(), "silo", &ycsb);
    let (seg, _, middle) = middle_record(&dir);
    let len = std::fs::metadata(&seg).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(middle as u64).unwrap();
    recover_fails(
        &dir,
        &format!(
            "error: {}: offset {middle}: the file ends here, but the durable marker says {len} bytes were synced",
            seg.display()
        ),
    );

    // A missing segment.
    let root = tempfile::tempdir().unwrap();
    let dir = logged_run(root.path(), "tictoc", &ycsb);
    std::fs::remove_file(dir.join("log").join("w0001-00000000.log")).unwrap();
    let marker_end = {
        let m = std::fs::read(dir.join("durable")).unwrap();
        let half = m.len() / 2;
        // The newer slot's stream 1 entry: (segment, end).
        let slot = |at: usize| (u64::from_le_bytes(m[at + 8..at + 16].try_into().unwrap()), at);
        let (_, at) = slot(0).max(slot(half));
        u64::from_le_bytes(m[at + 32 + 12 + 4..at + 32 + 24].try_into().unwrap())
    };
    recover_fails(
        &dir,
        &format!(
            "error: {}: stream 1 has no segments, but the durable marker says {marker_end} bytes of its segment 0 were synced",
            dir.join("log").display()
        ),
    );

    // Another schema: the run's manifest rebuilt with another row size.
    let root = tempfile::tempdir().unwrap();
    let dir = logged_run(root.path(), "mocc", &ycsb);
    let manifest = std::fs::read_to_string(dir.join("run.json")).unwrap();
    std::fs::write(dir.join("run.json"), manifest.replace("\"100\"", "\"200\"")).unwrap();
    let seg = dir.join("log").join("w0000-00000000.log");
    let out = txlab(&["recover", "--log-dir", s(&dir)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let prefix =
        format!("error: {}: offset 0: schema mismatch: written for schema ", seg.display());
    assert!(stderr.starts_with(&prefix) && stderr.lines().count() == 1, "{stderr}");

    // A segment of another format version (1: before COLS records).
    let root = tempfile::tempdir().unwrap();
    let dir = logged_run(root.path(), "2pl-waitdie", &ycsb);
    let seg = dir.join("log").join("w0000-00000000.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, &bytes).unwrap();
    recover_fails(
        &dir,
        &format!(
            "error: {}: offset 0: written in log format version 1, this build reads version 2",
            seg.display()
        ),
    );
}

#[test]
fn a_torn_tail_is_reported_and_dropped() {
    let root = tempfile::tempdir().unwrap();
    let dir = logged_run(root.path(), "silo", &["-w", "tpcc", "--warehouses", "1"]);
    let seg = dir.join("log").join("w0000-00000000.log");
    let len = std::fs::metadata(&seg).unwrap().len();
    // Half a record after the synced end: a write the crash cut.
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, &[0x40, 0, 0, 0, 2, 0, 0, 0, 7, 7, 7]).unwrap();
    drop(f);
    let out = txlab(&["recover", "--log-dir", s(&dir), "--verify"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "warning: {}: offset {len}: torn tail after the last synced byte, 11 bytes dropped",
            seg.display()
        )
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("verify: invariants hold"));
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), len + 11, "the file is left as it was");

    // A next segment whose header the crash cut (created after the last synced byte).
    let next = dir.join("log").join("w0000-00000001.log");
    std::fs::write(&next, &std::fs::read(&seg).unwrap()[..30]).unwrap();
    let out = txlab(&["recover", "--log-dir", s(&dir), "--verify"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: {}: offset 0: torn segment header after the last synced byte, 30 bytes dropped",
            next.display()
        )),
        "{stderr}"
    );
}

/// Starts a logged run of `protocol` on `workload`, kills it with SIGKILL at a random moment
/// once it has acknowledged commits, recovers and checks.
fn crash_once(protocol: &str, workload: &[&str], log_kind: &str, rng: &mut impl rand::Rng) {
    let root = tempfile::tempdir().unwrap();
    let acks = root.path().join("acks");
    let mut args = vec!["run", "-p", protocol, "-t", "3", "--txns", "100000000", "--log", log_kind];
    args.extend_from_slice(workload);
    let log = root.path().join("log");
    args.extend_from_slice(&["--log-dir", s(&log), "--ack-file", s(&acks)]);
    args.extend_from_slice(&["--checkpoint-interval", "0.05", "--group-commit-ms", "2"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_txlab"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first acknowledgements (a deadlock detector, not a timing assumption).
    let t = Instant::now();
    while std::fs::metadata(&acks).map_or(0, |m| m.len()) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "no commit acknowledged in 10 minutes (deadlock detector)"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{args:?} exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(rng.random_range(0..400)));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    recovers_what_was_acknowledged(
        protocol,
        &log.join(protocol),
        &format!("{workload:?} {log_kind}"),
    );
}

/// `txlab recover --verify` of the log `dir` that a killed run of `protocol` left: every
/// acknowledged commit is back, and the workload's invariants hold.
fn recovers_what_was_acknowledged(protocol: &str, dir: &Path, run: &str) {
    let out = txlab(&["recover", "--log-dir", s(dir), "--verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("{protocol} {run}: {stdout}{stderr}");
    assert!(stdout.contains("commits acknowledged durable by"), "{what}");
    assert!(!stdout.contains("MISSING"), "{what}");
    // TPC-C's consistency conditions, and SmallBank's money total against the ledgers the
    // recovered transactions wrote beside their writes: nothing was half applied. nocc breaks
    // both by itself, with lost updates: for it only the acknowledgements count, and a broken
    // invariant's exit status 1 is expected.
    if protocol != "nocc" {
        assert!(out.status.success(), "{what}");
        if run.contains("\"ycsb\"") {
            // YCSB has no invariant: the acknowledgements are what is checked.
            assert!(stdout.contains("verify: ycsb has no invariant to check\n"), "{what}");
        } else {
            assert!(stdout.contains("verify: invariants hold: "), "{what}");
        }
    } else {
        // Recovery itself succeeded: no error, at most torn-tail warnings.
        let warnings_only = stderr.lines().all(|l| l.starts_with("warning: "));
        assert!(matches!(out.status.code(), Some(0 | 1)) && warnings_only, "{what}");
    }
}

/// `--crash-at`: a logged run of `protocol` whose first worker to reach `phase` of a commit
/// (once commits are acknowledged) is held there while a checkpoint is taken, then let go;
/// the run kills itself once that commit and the ones after it are acknowledged durable,
/// before any other checkpoint. Whatever the phase, recovery finds every acknowledged commit
/// and the workload's invariants: a checkpoint never misses a commit it was taken across
/// (a multi-version protocol that logs before it installs used to lose one held at
/// `logged`).
fn crash_at(protocol: &str, phase: &str, workload: &[&str], log_kind: &str) {
    let root = tempfile::tempdir().unwrap();
    let (acks, log) = (root.path().join("acks"), root.path().join("log"));
    let mut args = vec!["run", "-p", protocol, "-t", "3", "--txns", "100000000", "--log", log_kind];
    args.extend_from_slice(workload);
    args.extend_from_slice(&["--log-dir", s(&log), "--ack-file", s(&acks), "--crash-at", phase]);
    // Under `--sync commit` the held commit is the last the file acknowledges for its worker
    // when the run kills itself: a lost one shows as a missing acknowledgement.
    args.extend_from_slice(&["--checkpoint-interval", "0.005", "--sync", "commit"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_txlab"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{args:?} ended by SIGKILL: {status} {stderr}");
    recovers_what_was_acknowledged(protocol, &log.join(protocol), &format!("{phase} {log_kind}"));
}

/// [`crash_at`] each phase in turn, on SmallBank (whose money total a lost or half-applied
/// commit breaks) and, at `logged`, the window of the multi-version protocols, on TPC-C too
/// (`sum(H_AMOUNT) = W_YTD` breaks with a lost Payment).
fn crashes_at_each_phase(protocol: &str) {
    let smallbank: &[&str] = &["-w", "smallbank", "--customers", "200"];
    let tpcc: &[&str] = &["-w", "tpcc", "--warehouses", "1"];
    let phases = ["locked", "validated", "logged", "installed", "acknowledging"];
    for (i, phase) in phases.into_iter().enumerate() {
        let kind = ["per-worker", "central"][(i + protocol.len()) % 2];
        crash_at(protocol, phase, smallbank, kind);
        if phase == "logged" {
            crash_at(protocol, phase, tpcc, kind);
        }
    }
}

macro_rules! crash_at_each_phase {
    ($($name:ident => $protocol:literal),* $(,)?) => {$(
        #[test]
        fn $name() {
            crashes_at_each_phase($protocol);
        }
    )*};
}

crash_at_each_phase! {
    every_phase_crashes_losing_nothing_nocc => "nocc",
    every_phase_crashes_losing_nothing_2pl_nowait => "2pl-nowait",
    every_phase_crashes_losing_nothing_2pl_waitdie => "2pl-waitdie",
    every_phase_crashes_losing_nothing_2pl_ordered => "2pl-ordered",
    every_phase_crashes_losing_nothing_silo => "silo",
    every_phase_crashes_losing_nothing_tictoc => "tictoc",
    every_phase_crashes_losing_nothing_mocc => "mocc",
    every_phase_crashes_losing_nothing_si => "si",
    every_phase_crashes_losing_nothing_ermia_ssn => "ermia-ssn",
    every_phase_crashes_losing_nothing_ermia_ssi => "ermia-ssi",
    every_phase_crashes_losing_nothing_hekaton => "hekaton",
    every_phase_crashes_losing_nothing_cicada => "cicada",
    every_phase_crashes_losing_nothing_bohm => "bohm",
    every_phase_crashes_losing_nothing_ic3 => "ic3",
}

fn crashes(protocol: &str) {
    let kills: usize =
        std::env::var("TXLAB_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(protocol.len() as u64);
    let workloads: [&[&str]; 3] = [
        &["-w", "tpcc", "--warehouses", "2"],
        &["-w", "ycsb", "--records", "20000", "--insert-ratio", "0.2"],
        &["-w", "smallbank", "--customers", "1000"],
    ];
    for k in 0..kills {
        for (i, w) in workloads.into_iter().enumerate() {
            // Both log managers, alternating over kills, workloads and protocols.
            let kind = ["per-worker", "central"][(k + i + protocol.len()) % 2];
            crash_once(protocol, w, kind, &mut rng);
        }
    }
}

#[test]
fn crashes_lose_nothing_acknowledged_silo() {
    crashes("silo");
}

#[test]
fn crashes_lose_nothing_acknowledged_tictoc() {
    crashes("tictoc");
}

#[test]
fn crashes_lose_nothing_acknowledged_mocc() {
    crashes("mocc");
}

#[test]
fn crashes_lose_nothing_acknowledged_2pl_nowait() {
    crashes("2pl-nowait");
}

#[test]
fn crashes_lose_nothing_acknowledged_2pl_waitdie() {
    crashes("2pl-waitdie");
}

#[test]
fn crashes_lose_nothing_acknowledged_si() {
    crashes("si");
}

#[test]
fn crashes_lose_nothing_acknowledged_ermia_ssn() {
    crashes("ermia-ssn");
}

#[test]
fn crashes_lose_nothing_acknowledged_ermia_ssi() {
    crashes("ermia-ssi");
}

#[test]
fn crashes_lose_nothing_acknowledged_hekaton() {
    crashes("hekaton");
}

#[test]
fn crashes_lose_nothing_acknowledged_cicada() {
    crashes("cicada");
}

/// BOHM acknowledges from its execution threads, per client: each transaction declares a
/// write of its client's acknowledgement row and counts itself in it at its timestamp.
#[test]
fn crashes_lose_nothing_acknowledged_ic3() {
    crashes("ic3");
}

#[test]
fn crashes_lose_nothing_acknowledged_bohm() {
    crashes("bohm");
}

/// A BOHM run that finishes acknowledges every commit, per client, whichever execution thread
/// ran it: the recovered acknowledgement rows count exactly the run's commits, and SmallBank's
/// money adds up with the ledgers they hold.
#[test]
fn bohm_acknowledges_each_clients_commits() {
    for kind in ["per-worker", "central"] {
        let root = tempfile::tempdir().unwrap();
        let (acks, log, json) =
            (root.path().join("acks"), root.path().join("log"), root.path().join("run.json"));
        let mut args = vec!["run", "-p", "bohm", "-w", "smallbank", "--customers", "1000"];
        args.extend_from_slice(&["-t", "3", "--txns", "3000", "--log", kind]);
        args.extend_from_slice(&["--log-dir", s(&log), "--ack-file", s(&acks), "--json", s(&json)]);
        let out = txlab(&args);
        assert!(out.status.success(), "{kind}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let commits = v["commits"].as_u64().unwrap();
        let ended = commits + v["user_aborts"].as_u64().unwrap();
        assert_eq!(ended, 9000, "{kind}: every transaction committed or was rolled back");
        assert_eq!(v["durability"]["durable_commits"], commits, "{kind}");
        let out = txlab(&["recover", "--log-dir", s(&log.join("bohm")), "--verify"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let what = format!("{kind}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{what}");
        let all = format!("all {commits} commits acknowledged durable by 3 workers were recovered");
        assert!(stdout.contains(&all), "{what}");
        assert!(stdout.contains("verify: invariants hold"), "{what}");
    }
}

#[test]
fn crashes_lose_nothing_acknowledged_2pl_ordered() {
    crashes("2pl-ordered");
}

#[test]
fn crashes_lose_nothing_acknowledged_nocc() {
    crashes("nocc");
}

#[test]
fn a_sweep_logs_every_point_afresh_and_keeps_the_last_log() {
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("log");
    let out = root.path().join("sweep.jsonl");
    let args =
        ["sweep", "-p", "silo", "-w", "ycsb", "--txns", "300", "--vary", "records=1000,2000"];
    let out =
        txlab(&[&args[..], &["--log-dir", s(&log), "--log", "central", "--out", s(&out)]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = txlab(&["recover", "--log-dir", s(&log.join("silo")), "--verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains(", 2000 rows (2000 from the checkpoint)"),
        "the last point's log: {stdout}"
    );
}

/// `--log off,per-worker,central` measures each protocol with each choice in one invocation,
/// their runs taking turns: the comparison compares each logged run with the same protocol's
/// unlogged one, and each manager's logs go to their own directory, which recovers.
#[test]
fn run_compares_log_managers_side_by_side() {
    let root = tempfile::tempdir().unwrap();
    let log = root.path().join("log");
    let json = root.path().join("out.json");
    let out = txlab(&[
        "run",
        "-p",
        "nocc,silo",
        "-w",
        "smallbank",
        "--customers",
        "1000",
        "-t",
        "2",
        "--txns",
        "300",
        "--repeat",
        "2",
        "--log-dir",
        s(&log),
        "--log",
        "off,per-worker,central",
        "--json",
        s(&json),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = stdout.split("Comparison (median of 2 runs per protocol and log").nth(1);
    let table = table.unwrap_or_else(|| panic!("a comparison of every contender: {stdout}"));
    assert!(table.lines().nth(1).unwrap().contains("vs off"), "{table}");
    let labels =
        // The table's rows end at the blank line before its notes.
        table.lines().skip(2).take_while(|l| !l.is_empty()).filter_map(|l| l.split("  ").nth(1));
    let labels = labels.collect::<Vec<_>>();
    assert_eq!(
        labels,
        [
            "nocc log=off",
            "silo log=off",
            "nocc log=per-worker",
            "silo log=per-worker",
            "nocc log=central",
            "silo log=central"
        ],
        "{table}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["comparison"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for r in rows {
        let label = r["summary"]["label"].as_str().unwrap();
        let logged = !label.ends_with("log=off");
        assert_eq!(r["durability"].is_object(), logged, "{label}");
        assert!(r["summary"]["vs_log_off"].is_f64(), "{label}");
        if logged {
            let kind = label.rsplit('=').next().unwrap();
            assert_eq!(r["durability"]["log"], kind, "{label}");
            assert_eq!(r["durability"]["durable_commits"], r["commits"], "{label}");
        }
    }
    assert_eq!(v["runs"].as_array().unwrap().len(), 12, "2 runs of each contender");
    for kind in ["per-worker", "central"] {
        let out = txlab(&["recover", "--log-dir", s(&log.join(kind).join("silo")), "--verify"]);
        assert!(out.status.success(), "{kind}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(!log.join("off").exists() && !log.join("silo").exists());
}

#[test]
fn log_lists_are_checked() {
    let root = tempfile::tempdir().unwrap();
    let dir = s(root.path());
    for (log, message) in [
        ("off", "error: --log off logs nothing: leave out --log-dir, or compare it with a log manager (--log off,per-worker)"),
        ("central,off,central", "error: --log lists central twice"),
    ] {
        let out = txlab(&["run", "--log-dir", dir, "--log", log]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end(), message);
    }
    let out = txlab(&[
        "sweep",
        "-p",
        "silo",
        "--vary",
        "threads=1,2",
        "--log-dir",
        dir,
        "--log",
        "off,central",
        "--out",
        "/dev/null",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "error: a sweep takes one --log manager; compare managers with txlab run --log off,per-worker,central"
    );
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0, "nothing was written");
}

/// A transaction whose records do not fit in the log buffer stops the run with an error that
/// names the flag to raise.
#[test]
fn a_transaction_larger_than_the_log_buffer_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let out = txlab(&[
        "run",
        "-p",
        "silo",
        "-w",
        "ycsb",
        "--records",
        "100",
        "--payload",
        "100000",
        "--txns",
        "10",
        "-t",
        "1",
        "--log-dir",
        s(root.path()),
        "--log-buffer-kb",
        "64",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.lines().last().unwrap(),
        "error: the log failed, the run stopped: a transaction's log records need more than the 65536-byte log buffer; raise --log-buffer-kb",
    );
}

/// A recovery that fails leaves the `--json` file it would have written as it was.
#[test]
fn a_failed_recovery_leaves_its_old_json_intact() {
    let root = tempfile::tempdir().unwrap();
    let ycsb = ["-w", "ycsb", "--records", "2000", "--payload", "100"];
    let dir = logged_run(root.path(), "silo", &ycsb);
    let json = root.path().join("recovery.json");
    std::fs::write(&json, "OLD").unwrap();
    let out = txlab(&["recover", "--log-dir", s(&dir), "--json", s(&json)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(written.contains("\"recovery\""), "{written}");
    std::fs::write(&json, "OLD").unwrap();
    // Another schema: the run's manifest rebuilt with another row size.
    let manifest = std::fs::read_to_string(dir.join("run.json")).unwrap();
    assert!(manifest.contains("\"100\""), "{manifest}");
    std::fs::write(dir.join("run.json"), manifest.replace("\"100\"", "\"200\"")).unwrap();
    let out = txlab(&["recover", "--log-dir", s(&dir), "--json", s(&json)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("schema mismatch"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "OLD");
    let left = std::fs::read_dir(root.path()).unwrap().count();
    assert_eq!(left, 2, "the protocol's log directory and the JSON file only");
}

/// `recover --verify` says what it checked: YCSB has no invariant (and --ack-file is how to
/// prove no acknowledged commit was lost); TPC-C names its consistency conditions.
#[test]
fn verify_says_what_it_checked() {
    let root = tempfile::tempdir().unwrap();
    let ycsb = logged_run(root.path(), "silo", &["--records", "2000"]);
    let out = txlab(&["recover", "--log-dir", s(&ycsb), "--verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains(
            "verify: ycsb has no invariant to check; run with --ack-file FILE to check that no \
             acknowledged commit was lost\n"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("invariants hold"), "{stdout}");
    let acked = tempfile::tempdir().unwrap();
    let acks = acked.path().join("acks");
    let dir = logged_run(
        acked.path(),
        "tictoc",
        &["--records", "2000", "--sync", "commit", "--ack-file", s(&acks)],
    );
    let out = txlab(&["recover", "--log-dir", s(&dir), "--verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout
            .contains("verify: all 800 commits acknowledged durable by 2 workers were recovered\n"),
        "{stdout}"
    );
    assert!(stdout.contains("verify: ycsb has no invariant to check\n"), "{stdout}");
    let tpcc = tempfile::tempdir().unwrap();
    let dir = logged_run(tpcc.path(), "silo", &["-w", "tpcc", "--warehouses", "1"]);
    let out = txlab(&["recover", "--log-dir", s(&dir), "--verify"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "verify: invariants hold: TPC-C's consistency conditions (clause 3.3.2: 1 to 10 and 12)"
        ),
        "{stdout}"
    );
}

/// TPC-E crashed mid-commit and recovered: what was acknowledged is there and the consistency
/// checks hold (a half-recovered Trade-Result would leave a holding summary, a settlement or a
/// balance behind its trade).
#[test]
fn tpce_crashes_recover_consistent() {
    let tpce: &[&str] = &["-w", "tpce", "--customers", "1000"];
    crash_at("silo", "logged", tpce, "per-worker");
    crash_at("ermia-ssi", "installed", tpce, "central");
}
