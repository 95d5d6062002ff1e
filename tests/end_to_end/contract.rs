//! The commit contract (`Protocol`'s docs), each point tested by stopping a worker between two
//! phases of its commit with a `Gate` (`storage::inject`), for every protocol: a checkpoint
//! taken while a commit has logged but not installed holds it (or waits for it); a read-only
//! commit under `--sync commit` returns only once what it read is durable; a commit that the
//! log cannot make durable says so.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use txlab::durability::log::{LogOptions, SyncPolicy};
use txlab::durability::recovery::recover;
use txlab::engine::{AccessSet, BatchOutcome, Procedure, Recon, Tx, TxnType};
use txlab::prelude::*;
use txlab::protocols::ProtocolKind;
use txlab::storage::inject::{CommitPhase, Gate, Who};

const T: TableId = TableId(0);
/// A generous deadlock detector, not a timing assumption.
const PATIENCE: Duration = Duration::from_secs(120);
static TYPES: [TxnType; 1] = [TxnType { name: "set", pieces: &[] }];

fn tables() -> [TableSpec; 1] {
    [TableSpec::new("t", 8, 64)]
}

fn value(row: &[u8]) -> u64 {
    u64::from_le_bytes(row[..8].try_into().unwrap())
}

fn options(dir: &Path, sync: SyncPolicy, gate: &Arc<Gate>) -> DbOptions {
    let mut log = LogOptions::new(dir);
    log.sync = sync;
    log.group_interval = Duration::from_millis(2);
    DbOptions {
        max_workers: 8,
        epoch_interval: Duration::from_millis(2),
        log: Some(log),
        commit_hook: Some(gate.hook()),
        ..Default::default()
    }
}

/// Sets key `key` to `to`: a transaction any protocol runs, BOHM included (it declares its
/// write).
struct Set {
    key: u64,
    to: u64,
}

impl Procedure for Set {
    fn txn_type(&self) -> usize {
        0
    }
    fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
        set.write(T, self.key);
        true
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        assert!(tx.write(T, self.key, &self.to.to_le_bytes())?, "the key is loaded");
        Ok(())
    }
}

/// A database of `P` logging into `dir` with key 1 loaded as 10 and checkpointed.
fn loaded<P: Protocol>(dir: &Path, sync: SyncPolicy, gate: &Arc<Gate>) -> Database<P> {
    let db = Database::<P>::builder(&tables())
        .options(options(dir, sync, gate))
        .txn_types(&TYPES)
        .build()
        .unwrap();
    db.loader().insert(T, 1, &10u64.to_le_bytes()).unwrap();
    db.checkpoint().unwrap();
    db
}

/// §1 of the contract's checkpoint rule: a commit stopped between its log record and its
/// install (`Logged`), a checkpoint taken meanwhile (it runs to its end, unless it waits for
/// the stopped commit, which is then let go after 0.2 s), the commit let go, the log closed:
/// recovery finds the commit. The multi-version protocols and BOHM log before they install,
/// and a checkpoint used to read the old value there while recovery skipped the commit's
/// log record, which its start epoch covered.
fn a_checkpoint_across_logged_holds_the_commit<P: Protocol>() -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let mut db = loaded::<P>(dir.path(), SyncPolicy::Group, &gate);
    let stop = gate.stop(CommitPhase::Logged, Who::Any, 0);
    let waited = std::thread::scope(|s| {
        let writer = s.spawn(|| db.run_batch(&TYPES, vec![Set { key: 1, to: 20 }], 1).unwrap());
        let held = gate.wait(stop, PATIENCE).expect("the writer reaches Logged");
        let log = db.log().unwrap();
        let ckpt = s.spawn(|| db.checkpoint().unwrap());
        // Until the checkpoint is over, or evidently waits for the held commit.
        let t = Instant::now();
        let waits_for_held =
            || log.in_flight(held.at.worker) && t.elapsed() > Duration::from_millis(200);
        while !ckpt.is_finished() && !waits_for_held() {
            assert!(t.elapsed() < PATIENCE, "{}: the checkpoint never ended", P::NAME);
            std::thread::sleep(Duration::from_millis(1));
        }
        let waited = !ckpt.is_finished();
        gate.release(stop);
        ckpt.join().unwrap();
        let done = writer.join().unwrap();
        assert_eq!(done[0].1, BatchOutcome::Committed, "{}", P::NAME);
        waited
    });
    db.close_log().unwrap();
    let fresh = Database::<P>::builder(&tables()).txn_types(&TYPES).build().unwrap();
    let report = recover(&fresh, dir.path()).unwrap();
    let mut w_value = None;
    fresh
        .visit_present(T, 1, 1, 1, |_, row| {
            w_value = Some(value(row));
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    if w_value != Some(20) {
        return Err(format!(
            "{}: recovered {w_value:?}, not the commit's 20 ({report:?})",
            P::NAME
        ));
    }
    // The held commit's log epoch was in flight, and the checkpoint waited for it.
    if !waited {
        return Err(format!("{}: the checkpoint finished while the commit was held", P::NAME));
    }
    Ok(())
}

#[test]
fn a_checkpoint_across_a_logged_commit_holds_it_under_every_protocol() {
    let failed: Vec<String> = ProtocolKind::ALL
        .into_iter()
        .filter_map(|kind| {
            txlab::with_protocol!(kind, P => a_checkpoint_across_logged_holds_the_commit::<P>())
                .err()
        })
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Begins an attempt on `w` that touches key 1 of `T` (`mode`), read-only if `read_only`:
/// declared where the protocol locks from declared sets (`2pl-ordered`).
fn begin_on_key<P: Protocol>(w: &mut P::Worker<'_>, mode: AccessMode, read_only: bool) {
    if P::CAPS.needs_access_set {
        let mut set = AccessSet::default();
        match mode {
            AccessMode::Read => set.read(T, 1),
            _ => set.write(T, 1),
        }
        w.begin_declared(&set);
    } else if read_only {
        w.begin_read_only();
    } else {
        w.begin();
    }
}

/// §3: under `--sync commit` a read-only commit returns only once everything it could have
/// read is durable. A writer is stopped at `Installed` (its writes visible, its log epoch
/// still in flight, so no group can make it durable); a reader reads its key and commits,
/// on a thread of its own, while the writer is held for 0.2 s: when the reader's commit
/// returns, the writer's log epoch is durable. Both kinds of read-only begin.
fn a_read_only_commit_waits_for_what_it_read<P: Protocol>(read_only: bool) {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    // Group commit only when someone waits: nothing becomes durable by the clock here.
    let mut opts = options(dir.path(), SyncPolicy::Commit, &gate);
    opts.log.as_mut().unwrap().group_interval = Duration::from_secs(10);
    let db = Database::<P>::builder(&tables()).options(opts).build().unwrap();
    db.loader().insert(T, 1, &10u64.to_le_bytes()).unwrap();
    let stop = gate.stop(CommitPhase::Installed, Who::Any, 0);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut w = db.worker().unwrap();
            begin_on_key::<P>(&mut w, AccessMode::Write, false);
            assert!(w.write(T, 1, &20u64.to_le_bytes()).unwrap());
            w.commit().unwrap();
        });
        let held = gate.wait(stop, PATIENCE).expect("the writer reaches Installed");
        let epoch = held.at.log_epoch;
        assert!(epoch > 0, "{}: the writer logged", P::NAME);
        let log = db.log().unwrap();
        let reader = s.spawn(|| {
            let mut r = db.worker().unwrap();
            begin_on_key::<P>(&mut r, AccessMode::Read, read_only);
            let saw = r.read(T, 1, value).unwrap();
            r.commit().unwrap();
            (saw, log.durable_epoch())
        });
        let t = Instant::now();
        while !reader.is_finished() && t.elapsed() < Duration::from_millis(200) {
            std::thread::sleep(Duration::from_millis(1));
        }
        gate.release(stop);
        let (saw, durable) = reader.join().unwrap();
        writer.join().unwrap();
        assert!(
            durable >= epoch,
            "{} (read-only: {read_only}): the reader saw {saw:?} and returned with log epoch \
             {durable} durable, below the writer's {epoch}",
            P::NAME
        );
    });
}

#[test]
fn read_only_commits_wait_for_what_they_read_under_sync_commit() {
    for kind in ProtocolKind::ALL.into_iter().filter(|k| k.caps().interactive) {
        for read_only in [false, true] {
            txlab::with_protocol!(kind, P => a_read_only_commit_waits_for_what_it_read::<P>(read_only));
        }
    }
}

/// §3: a commit the log cannot make durable returns `NotDurable`, not `Ok`. The log's
/// directory loses its segment directory to a file of the same name after the database
/// starts, so the first segment cannot be created: under `--sync commit` the writing commit
/// that waits for it, and under `group` every writing commit once the log has failed, return
/// `NotDurable`, the log's error names the file and the operating system's error, and a
/// checkpoint refuses with it.
fn a_failed_log_fails_the_commit<P: Protocol>(sync: SyncPolicy) {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let db = Database::<P>::builder(&tables())
        .options(options(dir.path(), sync, &gate))
        .build()
        .unwrap();
    db.loader().insert(T, 1, &10u64.to_le_bytes()).unwrap();
    let logdir = dir.path().join("log");
    std::fs::remove_dir(&logdir).unwrap();
    std::fs::write(&logdir, b"not a directory").unwrap();
    let mut w = db.worker().unwrap();
    let what = format!("{} {sync:?}", P::NAME);
    let t = Instant::now();
    let failed = loop {
        assert!(t.elapsed() < PATIENCE, "{what}: the log never failed (deadlock detector)");
        begin_on_key::<P>(&mut w, AccessMode::Write, false);
        assert!(w.write(T, 1, &20u64.to_le_bytes()).unwrap());
        match w.commit() {
            Ok(()) => {
                assert_ne!(sync, SyncPolicy::Commit, "{what}: acknowledged, yet never durable");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(a) => break a,
        }
    };
    assert_eq!(failed.reason, AbortReason::NotDurable, "{what}");
    let error = db.log().unwrap().error().expect("the log failed");
    // The first segment of the worker's stream: `<dir>/log/wNNNN-00000000.log: ...`.
    let named = error.strip_prefix(&format!("{}/w", logdir.display()));
    assert!(
        named.is_some_and(|e| e[4..].starts_with("-00000000.log: ") && e.contains("(os error ")),
        "{what}: {error}"
    );
    // Every writing commit from now on, and a checkpoint.
    begin_on_key::<P>(&mut w, AccessMode::Write, false);
    assert!(w.write(T, 1, &30u64.to_le_bytes()).unwrap());
    assert_eq!(w.commit().map_err(|a| a.reason), Err(AbortReason::NotDurable), "{what}");
    assert_eq!(db.checkpoint().unwrap_err().to_string(), error, "{what}");
}

#[test]
fn a_commit_the_log_cannot_make_durable_is_not_acknowledged() {
    for kind in ProtocolKind::ALL.into_iter().filter(|k| k.caps().interactive) {
        for sync in [SyncPolicy::Commit, SyncPolicy::Group] {
            txlab::with_protocol!(kind, P => a_failed_log_fails_the_commit::<P>(sync));
        }
    }
}
