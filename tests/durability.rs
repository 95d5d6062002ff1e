//! Durability: every protocol's log, replayed into a fresh database, rebuilds exactly the state
//! the protocol produced (inserts, updates, deletes and re-inserts by several threads at once,
//! more threads than cores, fixed seeds); and logs with bad or missing parts give their exact
//! error and are left untouched.

mod common;

use rand::{RngExt, SeedableRng};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;
use txlab::durability::log::{LogOptions, SyncPolicy};
use txlab::durability::recovery::{recover, RecoveryReport};
use txlab::engine::Retry;
use txlab::prelude::*;

const KEYS: u64 = 300;

fn tables() -> Vec<TableSpec> {
    vec![TableSpec::new("a", 24, KEYS), TableSpec::new("b", 200, KEYS)]
}

fn log_options(dir: &Path, sync: SyncPolicy) -> DbOptions {
    let mut log = LogOptions::new(dir);
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
fn round_trip<P: Protocol>(
    threads: usize,
    sync: SyncPolicy,
    seed: u64,
    checkpoints: bool,
) -> RecoveryReport {
    let dir = tempfile::tempdir().unwrap();
    let mut db = common::database::<P>(&tables(), log_options(dir.path(), sync));
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
                let mut n = 0;
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    let r = db.checkpoint().unwrap();
                    deleted_segments += r.segments_deleted;
                    n += 1;
                }
                n
            });
            let w = churn(&db, threads, 400, seed);
            done.store(true, std::sync::atomic::Ordering::Release);
            assert!(ckpt.join().unwrap() > 0);
            w
        });
        // Every stream has rolled to a second segment by now: this one deletes the first ones.
        deleted_segments += db.checkpoint().unwrap().segments_deleted;
        // A log tail after the last checkpoint.
        w + churn(&db, threads, 100, seed + 100)
    } else {
        churn(&db, threads, 400, seed)
    };
    db.close_log().unwrap();
    let live = dump(&db);
    assert!(live.len() > 50, "the churn left rows in both tables ({} rows)", live.len());
    let fresh = Database::<P>::new(&tables()).unwrap();
    let report = recover(&fresh, dir.path()).unwrap();
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

fn round_trips<P: Protocol>(threads: usize) {
    for (sync, seed, ckpt) in [
        (SyncPolicy::None, 1, false),
        (SyncPolicy::Group, 2, false),
        (SyncPolicy::Commit, 3, false),
        (SyncPolicy::None, 4, true),
        (SyncPolicy::Group, 5, true),
        (SyncPolicy::Commit, 6, true),
    ] {
        let r = round_trip::<P>(threads, sync, seed, ckpt);
        assert!(ckpt || (r.deleted > 0 && r.segments > threads as u64), "{r:?}");
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
fn silo_round_trips() {
    round_trips::<txlab::protocols::silo::Silo>(6);
}

#[test]
fn tictoc_round_trips() {
    round_trips::<txlab::protocols::tictoc::TicToc>(6);
}

#[test]
fn mocc_round_trips() {
    common::with_options(&[("temperature-threshold", "1")], || {
        round_trips::<txlab::protocols::mocc::Mocc>(6)
    });
}
