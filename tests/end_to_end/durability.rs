//! Durability: every protocol's log, replayed into a fresh database, rebuilds exactly the state
//! the protocol produced (inserts, updates, deletes and re-inserts by several threads at once,
//! more threads than cores, fixed seeds); and logs with bad or missing parts give their exact
//! error and are left untouched.

use crate::common;

use rand::{RngExt, SeedableRng};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;
use txlab::durability::log::{LogKind, LogOptions, SyncPolicy};
use txlab::durability::recovery::{recover, RecoveryReport};
use txlab::engine::Retry;
use txlab::prelude::*;

const KEYS: u64 = 300;

fn tables() -> Vec<TableSpec> {
    vec![TableSpec::new("a", 24, KEYS), TableSpec::new("b", 200, KEYS)]
}

fn log_options(dir: &Path, sync: SyncPolicy) -> DbOptions {
    log_options_of(dir, sync, LogKind::PerWorker)
}

fn log_options_of(dir: &Path, sync: SyncPolicy, kind: LogKind) -> DbOptions {
    let mut log = LogOptions::new(dir);
    log.kind = kind;
    log.sync = sync;
    log.group_interval = Duration::from_millis(2);
    // Small rings and segments: wrap-around and segment rolls happen in every test.
    log.buffer_bytes = 1 << 16;
    log.segment_bytes = 1 << 16;
    DbOptions {
        max_workers: 16,
        epoch_interval: Duration::from_millis(2),
        log: Some(log),
        ..Default::default()
    }
}

/// Every present row of every table, in key order.
fn dump<P: Protocol>(db: &Database<P>) -> Vec<(u32, u64, Vec<u8>)> {
    let mut out = Vec::new();
    for t in 0..tables().len() as u32 {
        db.visit_present(TableId(t), 0, u64::MAX, usize::MAX, |k, row| {
            out.push((t, k, row.to_vec()));
            ControlFlow::Continue(())
        })
        .unwrap();
    }
    out
}

/// `threads` workers each run `txns` transactions of random inserts, updates, deletes and
/// blind writes on both tables (each transaction touching 1-4 keys); returns how many committed
/// transactions wrote something (the others log nothing).
fn churn<P: Protocol>(db: &Database<P>, threads: usize, txns: u64, seed: u64) -> u64 {
    let (a, b) = (TableId(0), TableId(1));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                s.spawn(move || {
                    let mut writers = 0;
                    let mut w = db.worker().unwrap();
                    let mut rng =
                        rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed * 1000 + th as u64);
                    let mut retry = Retry::new().seed(th as u64);
                    for n in 0..txns {
                        let ops: Vec<(u8, u64, u64)> = (0..rng.random_range(1..=4))
                            .map(|_| {
                                (rng.random_range(0..4u8), rng.random_range(0..KEYS), rng.random())
                            })
                            .collect();
                        let stamp = (th as u64) << 32 | n;
                        let wrote = retry
                            .run(&mut w, |w| {
                                let mut wrote = false;
                                for &(op, key, v) in &ops {
                                    let t = if v % 3 == 0 { b } else { a };
                                    let size = if t == b { 200 } else { 24 };
                                    let mut row = vec![0u8; size];
                                    row[..8].copy_from_slice(&stamp.to_le_bytes());
                                    row[size - 8..].copy_from_slice(&v.to_le_bytes());
                                    wrote |= match op {
                                        0 => w.insert(t, key, &row)?,
                                        1 => w.delete(t, key)?,
                                        2 => w
                                            .update(t, key, |r| {
                                                r[8..16].copy_from_slice(&v.to_le_bytes())
                                            })?
                                            .is_some(),
                                        _ => w.write(t, key, &row)? || w.insert(t, key, &row)?,
                                    };
                                }
                                Ok(wrote)
                            })
                            .unwrap();
                        writers += u64::from(wrote);
                    }
                    writers
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// Logs a churn, closes the log, recovers into a fresh database and compares. With
/// `checkpoints`, half the keys are loaded first (not logged: a checkpoint right after the load
/// holds them) and checkpoints run continuously during the churn.
/// `verify` checks the recovered database beyond its rows (a protocol's own structures).
fn round_trip<P: Protocol>(
    threads: usize,
    kind: LogKind,
    sync: SyncPolicy,
    seed: u64,
    checkpoints: bool,
    verify: &dyn Fn(&Database<P>),
) -> RecoveryReport {
    let dir = tempfile::tempdir().unwrap();
    let mut db = common::database::<P>(&tables(), log_options_of(dir.path(), sync, kind));
    let mut deleted_segments = 0;
    let writers = if checkpoints {
        let mut loader = db.loader();
        for k in (0..KEYS).step_by(2) {
            loader.insert(TableId(0), k, &[k as u8; 24]).unwrap();
            loader.insert(TableId(1), k, &[k as u8; 200]).unwrap();
        }
        drop(loader);
        db.checkpoint().unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        let w = std::thread::scope(|s| {
            let ckpt = s.spawn(|| {
                // At least one, however fast the churn is over.
                loop {
                    let r = db.checkpoint().unwrap();
                    deleted_segments += r.segments_deleted;
                    if done.load(std::sync::atomic::Ordering::Acquire) {
                        break;
                    }
                }
            });
            let w = churn(&db, threads, 400, seed);
            done.store(true, std::sync::atomic::Ordering::Release);
            ckpt.join().unwrap();
            w
        });
        // Every stream has rolled to a second segment by now: once that is written out, this
        // checkpoint deletes the first ones.
        let log = db.log().unwrap();
        log.await_durable(log.epoch_now()).unwrap();
        deleted_segments += db.checkpoint().unwrap().segments_deleted;
        // A log tail after the last checkpoint.
        w + churn(&db, threads, 100, seed + 100)
    } else {
        churn(&db, threads, 400, seed)
    };
    db.close_log().unwrap();
    let live = dump(&db);
    assert!(live.len() > 50, "the churn left rows in both tables ({} rows)", live.len());
    let fresh = common::database::<P>(&tables(), DbOptions::default());
    let report = recover(&fresh, dir.path()).unwrap();
    verify(&fresh);
    let back = dump(&fresh);
    assert_eq!(
        back.len(),
        live.len(),
        "{} rows recovered, {} live ({report:?})",
        back.len(),
        live.len()
    );
    assert!(back == live, "recovered rows differ from the live database ({report:?})");
    assert_eq!(report.rows as usize, live.len());
    assert!(report.torn.is_empty(), "a clean close leaves no torn tail: {:?}", report.torn);
    assert_eq!(report.beyond_durable, 0, "a clean close makes everything durable");
    if checkpoints {
        assert!(report.checkpoint_rows > 0, "{report:?}");
        assert!(report.transactions <= writers, "{report:?}");
        assert!(deleted_segments > 0, "checkpoints delete the segments they make unnecessary");
    } else {
        assert_eq!(
            report.transactions, writers,
            "every committed transaction that wrote was logged"
        );
    }
    report
}

/// Every sync policy, with and without checkpoints, under both log managers. The logs roll
/// segments (per-worker: each stream; central: several, so blocks straddle segment ends and
/// segments open in races).
fn round_trips<P: Protocol>(threads: usize) {
    round_trips_verified::<P>(threads, &|_| ());
}

/// [`round_trips`], each recovered database checked by `verify`.
fn round_trips_verified<P: Protocol>(threads: usize, verify: &dyn Fn(&Database<P>)) {
    use LogKind::{Central, PerWorker};
    for (kind, sync, seed, ckpt) in [
        (PerWorker, SyncPolicy::None, 1, false),
        (PerWorker, SyncPolicy::Group, 2, false),
        (PerWorker, SyncPolicy::Commit, 3, false),
        (PerWorker, SyncPolicy::None, 4, true),
        (PerWorker, SyncPolicy::Group, 5, true),
        (PerWorker, SyncPolicy::Commit, 6, true),
        (Central, SyncPolicy::Group, 7, false),
        (Central, SyncPolicy::None, 8, true),
        (Central, SyncPolicy::Commit, 9, true),
    ] {
        let r = round_trip::<P>(threads, kind, sync, seed, ckpt, verify);
        // Per-worker: some stream rolled; central: the log did.
        let rolled = if kind == PerWorker { threads as u64 } else { 1 };
        assert!(ckpt || (r.deleted > 0 && r.segments > rolled), "{kind:?}: {r:?}");
    }
}

#[test]
fn nocc_round_trips() {
    // No isolation: concurrent writers of one key may log in another order than they wrote.
    round_trips::<txlab::protocols::nocc::Nocc>(1);
}

#[test]
fn two_pl_nowait_round_trips() {
    round_trips::<txlab::protocols::two_pl::TwoPlNoWait>(6);
}

#[test]
fn two_pl_waitdie_round_trips() {
    round_trips::<txlab::protocols::two_pl::TwoPlWaitDie>(6);
}

#[test]
fn two_pl_ordered_round_trips() {
    // Undeclared transactions, locked as they go without waiting.
    common::with_options(&[("undeclared", "no-wait")], || {
        round_trips::<txlab::protocols::two_pl_ordered::TwoPlOrdered>(6)
    });
}

#[test]
fn silo_round_trips() {
    round_trips::<txlab::protocols::silo::Silo>(6);
}

#[test]
fn tictoc_round_trips() {
    round_trips::<txlab::protocols::tictoc::TicToc>(6);
}

#[test]
fn si_round_trips() {
    round_trips::<txlab::protocols::si::Si>(6);
}

#[test]
fn ermia_ssn_round_trips() {
    round_trips::<txlab::protocols::ermia_ssn::ErmiaSsn>(6);
}

#[test]
fn ermia_ssi_round_trips() {
    round_trips::<txlab::protocols::ermia_ssi::ErmiaSsi>(6);
}

#[test]
fn hekaton_round_trips() {
    round_trips::<txlab::protocols::hekaton::Hekaton>(6);
}

#[test]
fn cicada_round_trips() {
    round_trips::<txlab::protocols::cicada::Cicada>(6);
}

#[test]
fn cicada_single_version_round_trips() {
    common::with_options(&[("single-version", "on")], || {
        round_trips::<txlab::protocols::cicada::Cicada>(6)
    });
}

/// Recovery loads the rows through the loader, which fills cicada's multi-version index too:
/// the recovered trees hold exactly the recovered rows.
#[test]
fn cicada_multi_version_index_round_trips() {
    use txlab::protocols::cicada::Cicada;
    common::with_options(&[("index", "multi-version"), ("index-fanout", "4")], || {
        round_trips_verified::<Cicada>(6, &|db: &Database<Cicada>| {
            for t in 0..tables().len() as u32 {
                let n = db.protocol().check_index(db, TableId(t), 0, KEYS).unwrap();
                assert!(n > 0, "table {t}: the recovered tree has entries");
            }
        })
    });
}

#[test]
fn mocc_round_trips() {
    common::with_options(&[("temperature-threshold", "1")], || {
        round_trips::<txlab::protocols::mocc::Mocc>(6)
    });
}

/// Every present row of every table of `db`, sorted by (table, key): through the index, so
/// hash-indexed tables are complete too.
fn dump_all<P: Protocol>(db: &Database<P>) -> Vec<(u32, u64, Vec<u8>)> {
    let mut out = Vec::new();
    for t in db.storage().tables() {
        let mut g = txlab::storage::index::pin();
        let mut image = vec![0u8; t.spec.row_size];
        t.index.for_each_part(
            0,
            1,
            &mut g,
            || {},
            |k, rid| {
                if db.protocol().read_committed(t.id, k, t.rows.get(rid), &mut image).is_some() {
                    out.push((t.id.0, k, image.clone()));
                }
            },
        );
    }
    out.sort_unstable_by_key(|r| (r.0, r.1));
    out
}

/// A workload loaded, checkpointed and run with logging by 4 threads (with `checkpoints`,
/// while checkpoints are taken one after another), then recovered into a fresh database:
/// every table is the same, byte for byte.
fn workload_round_trip<P: Protocol, W: txlab::engine::Workload>(
    workload: &W,
    per_worker: u64,
    kind: LogKind,
    checkpoints: bool,
) -> Database<P> {
    workload_round_trip_in::<P, W>(workload, per_worker, kind, checkpoints, 1 << 20)
}

/// [`workload_round_trip`] with log buffers and segments of `log_bytes`.
fn workload_round_trip_in<P: Protocol, W: txlab::engine::Workload>(
    workload: &W,
    per_worker: u64,
    kind: LogKind,
    checkpoints: bool,
    log_bytes: usize,
) -> Database<P> {
    use txlab::engine::{Backoff, RunConfig, RunLength};
    let dir = tempfile::tempdir().unwrap();
    let mut opts = log_options_of(dir.path(), SyncPolicy::Group, kind);
    if let Some(l) = &mut opts.log {
        l.buffer_bytes = log_bytes;
        l.segment_bytes = log_bytes as u64;
    }
    let mut db = Database::<P>::builder(&workload.tables())
        .options(opts)
        .protocol_options(common::options::<P>())
        .txn_types(workload.txn_types())
        .build()
        .unwrap();
    workload.load(&db, 2).unwrap();
    db.checkpoint().unwrap();
    let cfg = RunConfig {
        threads: 4,
        length: RunLength::transactions(per_worker),
        backoff: Backoff::Fixed { max_us: 20.0 },
        pin: false,
        seed: 7,
        check_templates: false,
        check_access_sets: false,
        prefault: true,
        breakdown: false,
        acks: None,
        ..RunConfig::default()
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let stats = std::thread::scope(|s| {
        if checkpoints {
            s.spawn(|| {
                // At least one, however fast the run is over.
                while {
                    db.checkpoint().unwrap();
                    !done.load(std::sync::atomic::Ordering::Acquire)
                } {}
            });
        }
        let stats = P::drive(&db, workload, &cfg).unwrap();
        done.store(true, std::sync::atomic::Ordering::Release);
        stats
    });
    let durable: u64 = stats.iter().map(|s| s.durable_commits).sum();
    let commits: u64 = stats.iter().map(|s| s.total_commits()).sum();
    assert_eq!(durable, commits, "every commit of the run became durable");
    db.close_log().unwrap();
    let live = dump_all(&db);
    let fresh = Database::<P>::builder(&workload.tables())
        .protocol_options(common::options::<P>())
        .build()
        .unwrap();
    let report = recover(&fresh, dir.path()).unwrap();
    assert!(report.transactions > 0 && report.checkpoint_rows > 0, "{report:?}");
    let back = dump_all(&fresh);
    assert_eq!(back.len(), live.len(), "{report:?}");
    if let Some(i) = (0..live.len()).find(|&i| back[i] != live[i]) {
        panic!("first difference: table {} key {} ({report:?})", live[i].0, live[i].1);
    }
    fresh
}

fn workloads_round_trip<P: Protocol>() {
    use txlab::workloads::smallbank::{SmallBank, SmallBankConfig};
    use txlab::workloads::tpcc::{Tpcc, TpccConfig};
    use txlab::workloads::ycsb::{Ycsb, YcsbConfig};
    let ycsb = YcsbConfig { records: 5000, insert_ratio: 0.2, theta: 0.9, ..Default::default() };
    let ycsb = Ycsb::new(ycsb, 4);
    let smallbank = SmallBank::new(SmallBankConfig { customers: 200, spin_us: 0 });
    let tpcc = Tpcc::new(TpccConfig::new(1));
    for kind in [LogKind::PerWorker, LogKind::Central] {
        let _ = workload_round_trip::<P, _>(&ycsb, 300, kind, false);
        let _ = workload_round_trip::<P, _>(&smallbank, 300, kind, false);
        let _ = workload_round_trip::<P, _>(&tpcc, 150, kind, false);
    }
}

#[test]
fn workloads_round_trip_two_pl_nowait() {
    workloads_round_trip::<txlab::protocols::two_pl::TwoPlNoWait>();
}

#[test]
fn workloads_round_trip_two_pl_waitdie() {
    workloads_round_trip::<txlab::protocols::two_pl::TwoPlWaitDie>();
}

#[test]
fn workloads_round_trip_two_pl_ordered() {
    workloads_round_trip::<txlab::protocols::two_pl_ordered::TwoPlOrdered>();
}

#[test]
fn workloads_round_trip_silo() {
    workloads_round_trip::<txlab::protocols::silo::Silo>();
}

#[test]
fn workloads_round_trip_tictoc() {
    workloads_round_trip::<txlab::protocols::tictoc::TicToc>();
}

#[test]
fn workloads_round_trip_mocc() {
    workloads_round_trip::<txlab::protocols::mocc::Mocc>();
}

#[test]
fn ic3_round_trips() {
    // Untyped transactions: ic3 runs them directly, logging under their locks.
    round_trips::<txlab::protocols::ic3::Ic3>(6);
}

#[test]
fn workloads_round_trip_ic3() {
    // Typed: pieces commit and become visible before their transaction logs at its commit.
    workloads_round_trip::<txlab::protocols::ic3::Ic3>();
}

/// IC3 applies Payment's D_YTD accumulation under New-Order's uncommitted writes of the
/// district row, keeping its stamp apart until they leave: checkpoints taken meanwhile carry
/// the committed image's older stamp, and recovery still rebuilds every row.
#[test]
fn ic3_tpcc_round_trips_with_checkpoints_during_the_run() {
    use txlab::workloads::tpcc::{Tpcc, TpccConfig};
    let tpcc = Tpcc::new(TpccConfig::new(1));
    for kind in [LogKind::PerWorker, LogKind::Central] {
        let _ = workload_round_trip::<txlab::protocols::ic3::Ic3, _>(&tpcc, 400, kind, true);
    }
}

/// TPC-E logged and recovered: every row back as the run left it, and its consistency
/// checks hold on the recovered database. Its logs get 16 MiB segments: Trade-Cleanup, the
/// first transaction (every pending order canceled), logs about half a megabyte.
#[test]
fn tpce_round_trips_and_recovers_consistent() {
    use txlab::engine::Workload;
    use txlab::workloads::tpce::{Tpce, TpceConfig};
    let tpce = Tpce::new(TpceConfig::new(1_000));
    type Silo = txlab::protocols::silo::Silo;
    let fresh = workload_round_trip_in::<Silo, _>(&tpce, 150, LogKind::PerWorker, false, 16 << 20);
    assert_eq!(tpce.check(&fresh), Ok(()));
    type Si = txlab::protocols::si::Si;
    let fresh = workload_round_trip_in::<Si, _>(&tpce, 150, LogKind::Central, true, 16 << 20);
    assert_eq!(tpce.check(&fresh), Ok(()));
}

#[test]
fn workloads_round_trip_bohm() {
    workloads_round_trip::<txlab::protocols::bohm::Bohm>();
}

/// `Database::open` recovers and goes on logging, generation after generation, for a
/// protocol that runs whole workloads (BOHM's pipeline: its timestamps restart in every new
/// database, above the recovered rows): SmallBank loaded, checkpointed and run through
/// `Protocol::drive`, then reopened and run again twice; each open sees exactly the state the
/// previous database left, and so does recovering the last generation.
fn reopens_driven<P: Protocol>(kind: LogKind, sync: SyncPolicy) {
    use txlab::engine::{Backoff, RunConfig, RunLength, Workload};
    use txlab::workloads::smallbank::{SmallBank, SmallBankConfig};
    let sb = SmallBank::new(SmallBankConfig { customers: 100, spin_us: 0 });
    let dir = tempfile::tempdir().unwrap();
    let opts = log_options_of(dir.path(), sync, kind);
    let open = || {
        Database::<P>::builder(&sb.tables())
            .options(opts.clone())
            .protocol_options(common::options::<P>())
            .txn_types(sb.txn_types())
            .open()
            .unwrap()
    };
    let cfg = |seed| RunConfig {
        threads: 3,
        length: RunLength::transactions(200),
        backoff: Backoff::None,
        pin: false,
        seed,
        check_templates: false,
        check_access_sets: false,
        prefault: true,
        breakdown: false,
        acks: None,
        ..RunConfig::default()
    };
    let run = |db: &Database<P>, seed| {
        let stats = P::drive(db, &sb, &cfg(seed)).unwrap();
        let durable: u64 = stats.iter().map(|s| s.durable_commits).sum();
        let commits: u64 = stats.iter().map(|s| s.total_commits()).sum();
        assert!(commits > 0);
        assert_eq!(durable, commits, "{kind:?} {sync:?}: every commit became durable");
    };
    let (mut db, report) = open();
    assert!(report.is_none(), "an empty directory has nothing to recover");
    sb.load(&db, 2).unwrap();
    db.checkpoint().unwrap();
    run(&db, 1);
    db.close_log().unwrap();
    let mut live = dump_all(&db);
    drop(db);
    for round in 1..=2u64 {
        let (mut db, report) = open();
        let report = report.expect("a directory with a log is recovered");
        assert!(dump_all(&db) == live, "{kind:?} round {round}: the opened database differs");
        assert_eq!(report.rows as usize, live.len());
        run(&db, 1 + round);
        db.close_log().unwrap();
        let now = dump_all(&db);
        assert!(now != live, "round {round}: the run changed nothing");
        live = now;
        drop(db);
    }
    let fresh = Database::<P>::builder(&sb.tables())
        .protocol_options(common::options::<P>())
        .build()
        .unwrap();
    recover(&fresh, dir.path()).unwrap();
    assert!(dump_all(&fresh) == live, "{kind:?}: recovery of the last generation differs");
}

#[test]
fn bohm_reopens_and_continues_logging() {
    use txlab::protocols::bohm::Bohm;
    reopens_driven::<Bohm>(LogKind::PerWorker, SyncPolicy::Group);
    reopens_driven::<Bohm>(LogKind::Central, SyncPolicy::Commit);
}

/// Deleted and re-inserted keys, across checkpoints and log: the newest state wins, and a
/// deletion is not undone by an older image of the key.
fn delete_and_reinsert<P: Protocol>() {
    let dir = tempfile::tempdir().unwrap();
    let mut db =
        Database::<P>::with_options(&tables(), log_options(dir.path(), SyncPolicy::Group)).unwrap();
    let a = TableId(0);
    let mut w = db.worker().unwrap();
    let row = |v: u8| [v; 24];
    w.begin();
    for k in 0..10 {
        assert!(w.insert(a, k, &row(1)).unwrap());
    }
    w.commit().unwrap();
    drop(w);
    db.checkpoint().unwrap(); // keys 0..10 in the checkpoint
    let mut w = db.worker().unwrap();
    for (k, steps) in [(1u64, 1), (2, 2), (3, 3), (4, 4)] {
        // Key 1 deleted; 2 deleted and re-inserted; 3 deleted, re-inserted, deleted; 4 four times.
        for s in 0..steps {
            w.begin();
            if s % 2 == 0 {
                assert!(w.delete(a, k).unwrap());
            } else {
                assert!(w.insert(a, k, &row(10 + s as u8)).unwrap());
            }
            w.commit().unwrap();
        }
    }
    w.begin();
    assert!(w.insert(a, 20, &row(20)).unwrap());
    assert!(w.delete(a, 20).unwrap());
    assert!(w.insert(a, 20, &row(21)).unwrap());
    w.commit().unwrap();
    drop(w);
    db.close_log().unwrap();
    let fresh = Database::<P>::new(&tables()).unwrap();
    recover(&fresh, dir.path()).unwrap();
    let got: Vec<(u64, u8)> = dump(&fresh).into_iter().map(|(_, k, r)| (k, r[0])).collect();
    let want: Vec<(u64, u8)> =
        vec![(0, 1), (2, 11), (4, 13), (5, 1), (6, 1), (7, 1), (8, 1), (9, 1), (20, 21)];
    assert_eq!(got, want);
    assert_eq!(dump(&fresh), dump(&db));
}

#[test]
fn deleted_and_reinserted_keys_recover_right() {
    delete_and_reinsert::<txlab::protocols::nocc::Nocc>();
    delete_and_reinsert::<txlab::protocols::two_pl::TwoPlNoWait>();
    delete_and_reinsert::<txlab::protocols::two_pl::TwoPlWaitDie>();
    delete_and_reinsert::<txlab::protocols::silo::Silo>();
    delete_and_reinsert::<txlab::protocols::tictoc::TicToc>();
    delete_and_reinsert::<txlab::protocols::mocc::Mocc>();
    delete_and_reinsert::<txlab::protocols::si::Si>();
    delete_and_reinsert::<txlab::protocols::ermia_ssn::ErmiaSsn>();
    delete_and_reinsert::<txlab::protocols::ermia_ssi::ErmiaSsi>();
    delete_and_reinsert::<txlab::protocols::hekaton::Hekaton>();
    delete_and_reinsert::<txlab::protocols::cicada::Cicada>();
}

/// A log that cannot be written (its directory removed, so the next segment cannot be created)
/// stops a run with an error naming the file, instead of losing commits silently or hanging.
#[test]
fn a_failing_log_stops_the_run_with_its_error() {
    use txlab::engine::{Backoff, RunConfig, RunLength, Workload};
    use txlab::workloads::smallbank::{SmallBank, SmallBankConfig};
    let dir = tempfile::tempdir().unwrap();
    let sb = SmallBank::new(SmallBankConfig { customers: 1000, spin_us: 0 });
    let mut db = Database::<txlab::protocols::silo::Silo>::builder(&sb.tables())
        .options(log_options(dir.path(), SyncPolicy::Group))
        .build()
        .unwrap();
    sb.load(&db, 2).unwrap();
    std::fs::remove_dir_all(dir.path().join("log")).unwrap();
    let cfg = RunConfig {
        threads: 3,
        length: RunLength::transactions(100_000),
        backoff: Backoff::None,
        pin: false,
        seed: 1,
        check_templates: false,
        check_access_sets: false,
        prefault: false,
        breakdown: false,
        acks: None,
        ..RunConfig::default()
    };
    let err = txlab::engine::Protocol::drive(&db, &sb, &cfg).unwrap_err().to_string();
    let want = format!(
        "the log failed, the run stopped: {}: No such file or directory (os error 2)",
        dir.path().join("log").join("w0000-00000000.log").display()
    );
    // Which stream's segment the logger tried to create first depends on who committed first.
    assert!(
        err.starts_with("the log failed, the run stopped: ")
            && err.ends_with(": No such file or directory (os error 2)")
            && err.contains(&*dir.path().join("log").to_string_lossy()),
        "{err} (e.g. {want})"
    );
    assert!(db.close_log().is_err());
}

fn open<P: Protocol>(opts: &DbOptions) -> (Database<P>, Option<RecoveryReport>) {
    Database::<P>::builder(&tables()).options(opts.clone()).open().unwrap()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// `Database::open` recovers the directory and goes on logging there, generation after
/// generation: each open sees exactly the state the previous database left, including what
/// it wrote over recovered rows, deleted and re-inserted (so the new generation's stamps order
/// after everything recovered), and only the current generation stays on disk. `threads`
/// workers churn (one for a protocol without isolation, whose concurrent writers of a key may
/// log in another order than they wrote).
fn reopens<P: Protocol>(kind: LogKind, seed: u64, threads: usize) {
    let dir = tempfile::tempdir().unwrap();
    let opts = log_options_of(dir.path(), SyncPolicy::Group, kind);
    let (mut db, report) = open::<P>(&opts);
    assert!(report.is_none(), "an empty directory has nothing to recover");
    churn(&db, threads, 150, seed);
    db.close_log().unwrap();
    let mut live = dump(&db);
    drop(db);
    assert_eq!(names(dir.path()), ["durable", "log"], "the first generation is the directory");
    for round in 1..=3u64 {
        let (mut db, report) = open::<P>(&opts);
        let report = report.expect("a directory with a log is recovered");
        assert!(dump(&db) == live, "{kind:?} round {round}: the opened database differs");
        assert_eq!(report.rows as usize, live.len());
        let generation = format!("gen-{round:06}");
        assert_eq!(names(dir.path()), ["GENERATION", &generation], "round {round}");
        assert_eq!(
            names(&dir.path().join(&generation)),
            ["checkpoint", "durable", "log"],
            "round {round}: the generation starts with a checkpoint"
        );
        churn(&db, threads, 150, seed + round);
        if round == 2 {
            db.checkpoint().unwrap();
            churn(&db, threads, 100, seed + 10);
        }
        db.close_log().unwrap();
        live = dump(&db);
        drop(db);
    }
    // `recover` (and so `txlab recover`) follows the pointer to the current generation.
    let fresh = Database::<P>::new(&tables()).unwrap();
    recover(&fresh, dir.path()).unwrap();
    assert!(dump(&fresh) == live, "{kind:?}: recovery of the last generation differs");
}

#[test]
fn open_recovers_and_continues_logging() {
    use txlab::protocols::{mocc, nocc, silo, tictoc, two_pl};
    reopens::<nocc::Nocc>(LogKind::PerWorker, 1, 1);
    reopens::<two_pl::TwoPlNoWait>(LogKind::Central, 2, 4);
    reopens::<two_pl::TwoPlWaitDie>(LogKind::PerWorker, 3, 4);
    reopens::<silo::Silo>(LogKind::Central, 4, 4);
    reopens::<silo::Silo>(LogKind::PerWorker, 5, 4);
    reopens::<tictoc::TicToc>(LogKind::PerWorker, 6, 4);
    reopens::<tictoc::TicToc>(LogKind::Central, 7, 4);
    reopens::<mocc::Mocc>(LogKind::PerWorker, 8, 4);
    reopens::<txlab::protocols::si::Si>(LogKind::Central, 9, 4);
    reopens::<txlab::protocols::ermia_ssn::ErmiaSsn>(LogKind::PerWorker, 10, 4);
    reopens::<txlab::protocols::ermia_ssi::ErmiaSsi>(LogKind::Central, 11, 4);
    reopens::<txlab::protocols::hekaton::Hekaton>(LogKind::PerWorker, 12, 4);
    reopens::<txlab::protocols::cicada::Cicada>(LogKind::Central, 13, 4);
}

/// An open that crashed leaves either an unfinished next generation (before its pointer was
/// published) or parts of the old one (after): the next open removes them and recovers the
/// current one. A torn tail goes with the old generation. A bad pointer is refused with its
/// file named, and nothing is changed.
#[test]
fn open_cleans_up_after_a_crashed_open_and_refuses_a_bad_pointer() {
    type P = txlab::protocols::silo::Silo;
    let dir = tempfile::tempdir().unwrap();
    let opts = log_options(dir.path(), SyncPolicy::Group);
    let (mut db, _) = open::<P>(&opts);
    churn(&db, 3, 100, 1);
    db.close_log().unwrap();
    let live = dump(&db);
    drop(db);
    // A torn tail: half a record appended after the synced end.
    let seg = dir.path().join("log").join("w0000-00000000.log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, &[0x40, 0, 0, 0, 2, 0, 0, 0, 7]).unwrap();
    drop(f);
    // An open that crashed before publishing generation 1.
    std::fs::create_dir_all(dir.path().join("gen-000001").join("log")).unwrap();
    std::fs::write(dir.path().join("gen-000001").join("durable"), b"half").unwrap();
    let (mut db, report) = open::<P>(&opts);
    let report = report.unwrap();
    assert_eq!(report.torn.len(), 1, "{report:?}");
    assert!(dump(&db) == live);
    db.close_log().unwrap();
    drop(db);
    assert_eq!(names(dir.path()), ["GENERATION", "gen-000001"]);

    // An open that crashed after publishing generation 2, while removing generation 1, and
    // left files of the first generation too.
    let (db, _) = open::<P>(&opts);
    drop(db);
    std::fs::create_dir_all(dir.path().join("gen-000001").join("checkpoint")).unwrap();
    std::fs::create_dir_all(dir.path().join("log")).unwrap();
    std::fs::write(dir.path().join("durable"), b"old").unwrap();
    let (db, report) = open::<P>(&opts);
    assert!(report.unwrap().torn.is_empty(), "the torn tail went with the first generation");
    assert!(dump(&db) == live);
    drop(db);
    assert_eq!(names(dir.path()), ["GENERATION", "gen-000003"]);

    let pointer = dir.path().join("GENERATION");
    for (text, why) in [
        ("gen-3\n", "unreadable generation pointer (expected a line like gen-000001)"),
        ("gen-000007\n", "names gen-000007, which does not exist"),
    ] {
        std::fs::write(&pointer, text).unwrap();
        let before = names(dir.path());
        let err = Database::<P>::builder(&tables()).options(opts.clone()).open().err().unwrap();
        assert_eq!(err.to_string(), format!("{}: {why}", pointer.display()));
        let fresh = Database::<P>::new(&tables()).unwrap();
        let err = recover(&fresh, dir.path()).unwrap_err();
        assert_eq!(err.to_string(), format!("{}: {why}", pointer.display()));
        assert_eq!(names(dir.path()), before, "nothing was changed");
        assert_eq!(std::fs::read_to_string(&pointer).unwrap(), text);
    }
    // A new log is not started over a directory with generations.
    std::fs::write(&pointer, "gen-000003\n").unwrap();
    let err = Database::<P>::with_options(&tables(), opts.clone()).err().unwrap();
    assert!(err.to_string().contains("holds a log already"), "{err}");
    let err = Database::<P>::builder(&tables()).open().err().unwrap();
    assert_eq!(
        err.to_string(),
        "Database::open needs log options (DbOptions::log): the directory to recover from and log into"
    );
}

/// A table with a column layout: updates that declare the columns they write.
fn column_tables() -> Vec<TableSpec> {
    vec![TableSpec::new("c", 70, KEYS).with_columns(&[
        ("a", 0, 8),
        ("b", 8, 8),
        ("c", 16, 40),
        ("d", 56, 14),
    ])]
}

/// Updates that declare the columns they write are logged as those columns (COLS records) and
/// replayed, oldest first, on top of the key's image from the log or the checkpoint: with
/// deletes, re-inserts and whole-row writes of the same keys by several threads, and
/// checkpoints running meanwhile, recovery rebuilds exactly the live table.
fn column_round_trip<P: Protocol>(threads: usize, kind: LogKind, seed: u64) -> RecoveryReport {
    let dir = tempfile::tempdir().unwrap();
    let tables = column_tables();
    let c = TableId(0);
    let mut db = Database::<P>::builder(&tables)
        .options(log_options_of(dir.path(), SyncPolicy::Group, kind))
        .build()
        .unwrap();
    let mut loader = db.loader();
    for k in 0..KEYS {
        loader.insert(c, k, &[k as u8; 70]).unwrap();
    }
    drop(loader);
    db.checkpoint().unwrap();
    // With checkpoints running, then a log tail after the last one.
    for phase in 0..2u64 {
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            if phase == 0 {
                s.spawn(|| {
                    while !done.load(std::sync::atomic::Ordering::Acquire) {
                        db.checkpoint().unwrap();
                    }
                });
            }
            let workers: Vec<_> = (0..threads)
                .map(|th| {
                    let db = &db;
                    s.spawn(move || {
                        let mut w = db.worker().unwrap();
                        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(
                            seed * 1000 + phase * 100 + th as u64,
                        );
                        let mut retry = Retry::new().seed(th as u64);
                        for n in 0..200u64 {
                            let (op, key) = (rng.random_range(0..6u8), rng.random_range(0..KEYS));
                            let v = ((th as u64) << 32 | n).to_le_bytes();
                            retry
                                .run(&mut w, |w| {
                                    let set = |cols: &[(usize, usize)]| {
                                        let cols = cols.to_vec();
                                        move |r: &mut [u8]| {
                                            for c in &cols {
                                                for (i, b) in r[c.0..c.1].iter_mut().enumerate() {
                                                    *b = v[i % 8] ^ i as u8;
                                                }
                                            }
                                        }
                                    };
                                    // Whether each write happened does not matter here.
                                    let _ = match op {
                                        0 => w.update_cols(c, key, 0, 1, set(&[(0, 8)]))?.is_some(),
                                        1 => w
                                            .update_cols(
                                                c,
                                                key,
                                                0,
                                                0b1010,
                                                set(&[(8, 16), (56, 70)]),
                                            )?
                                            .is_some(),
                                        2 => w
                                            .update_cols(c, key, 0b1, 0b100, set(&[(16, 56)]))?
                                            .is_some(),
                                        3 => w.delete(c, key)?,
                                        4 => w.insert(c, key, &[n as u8; 70])?,
                                        _ => {
                                            // Two updates of one row in one transaction.
                                            let _ = w.update_cols(c, key, 0, 1, set(&[(0, 8)]))?;
                                            w.update_cols(c, key, 0, 0b1000, set(&[(56, 70)]))?
                                                .is_some()
                                        }
                                    };
                                    Ok(())
                                })
                                .unwrap();
                        }
                    })
                })
                .collect();
            for h in workers {
                h.join().unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
    }
    db.close_log().unwrap();
    let dump = |db: &Database<P>| {
        let mut out = Vec::new();
        db.visit_present(c, 0, u64::MAX, usize::MAX, |k, row| {
            out.push((k, row.to_vec()));
            ControlFlow::Continue(())
        })
        .unwrap();
        out
    };
    let live = dump(&db);
    let fresh = Database::<P>::new(&tables).unwrap();
    let report = recover(&fresh, dir.path()).unwrap();
    assert!(
        dump(&fresh) == live,
        "{kind:?}: recovered rows differ from the live ones ({report:?})"
    );
    assert!(live.len() > 50, "{}", live.len());
    report
}

#[test]
fn updates_log_the_columns_they_write() {
    use txlab::protocols::{mocc, nocc, silo, tictoc, two_pl};
    for (i, kind) in [LogKind::PerWorker, LogKind::Central].into_iter().enumerate() {
        let seed = i as u64;
        for r in [
            column_round_trip::<two_pl::TwoPlNoWait>(5, kind, seed),
            column_round_trip::<two_pl::TwoPlWaitDie>(5, kind, seed + 10),
            column_round_trip::<silo::Silo>(5, kind, seed + 20),
            column_round_trip::<tictoc::TicToc>(5, kind, seed + 30),
            column_round_trip::<mocc::Mocc>(5, kind, seed + 40),
            column_round_trip::<txlab::protocols::si::Si>(5, kind, seed + 60),
            column_round_trip::<txlab::protocols::ermia_ssn::ErmiaSsn>(5, kind, seed + 70),
            column_round_trip::<txlab::protocols::ermia_ssi::ErmiaSsi>(5, kind, seed + 80),
            column_round_trip::<txlab::protocols::hekaton::Hekaton>(5, kind, seed + 90),
            column_round_trip::<txlab::protocols::cicada::Cicada>(5, kind, seed + 100),
        ] {
            assert!(r.column_records > 100, "{r:?}");
        }
        // Without isolation, whole images (see `log_in_place`).
        let r = column_round_trip::<nocc::Nocc>(1, kind, seed + 50);
        assert_eq!(r.column_records, 0, "{r:?}");
    }
}
