use crate::engine::driver::{Backoff, RunConfig, RunLength};
use crate::engine::{ProtocolOptions, Workload};
use crate::error::Abort;
use crate::prelude::*;
use crate::protocols::bohm::Bohm;
use crate::workloads::smallbank::{SmallBank, SmallBankConfig};
use std::time::Duration;

fn config(threads: usize, per_worker: u64) -> RunConfig {
    RunConfig {
        threads,
        length: RunLength::transactions(per_worker),
        backoff: Backoff::None,
        pin: false,
        seed: 7,
        check_templates: true,
        check_access_sets: true,
        prefault: true,
        breakdown: false,
        acks: None,
        ..RunConfig::default()
    }
}

/// A BOHM database for `workload` with options `opts`, loaded.
fn database<W: Workload>(workload: &W, opts: &[(&str, &str)], history: bool) -> Database<Bohm> {
    let pairs: Vec<(String, String)> =
        opts.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    let db = Database::<Bohm>::builder(&workload.tables())
        .options(DbOptions {
            max_workers: 16,
            epoch_interval: Duration::from_millis(2),
            record_history: history,
            ..Default::default()
        })
        .protocol_options(crate::protocols::bohm::BohmOptions::from_pairs(&pairs).unwrap())
        .txn_types(workload.txn_types())
        .build()
        .unwrap();
    workload.load(&db, 2).unwrap();
    drop(db.take_history());
    db
}

/// Transactions that ended (committed, or rolled back by the workload).
fn ended(stats: &[crate::engine::stats::WorkerStats]) -> u64 {
    stats.iter().map(|s| s.total_commits() + s.user_aborts.iter().sum::<u64>()).sum()
}

fn smallbank(threads: usize, opts: &[(&str, &str)], per_worker: u64) -> (Result<(), String>, u64) {
    let sb = SmallBank::new(SmallBankConfig { customers: 50, spin_us: 0 });
    let db = database(&sb, opts, false);
    let stats = Bohm::drive(&db, &sb, &config(threads, per_worker)).unwrap();
    (sb.check(&db), ended(&stats))
}

/// The histories of SmallBank at 50 customers and TPC-C at one warehouse under BOHM are
/// serializable, with many dependencies to check, under either split.
#[test]
fn recorded_histories_are_serializable() {
    use crate::workloads::tpcc::{Tpcc, TpccConfig};
    for split in ["dedicated", "adaptive"] {
        let sb = SmallBank::new(SmallBankConfig { customers: 50, spin_us: 0 });
        let db = database(&sb, &[("batch", "50"), ("split", split)], true);
        let stats = Bohm::drive(&db, &sb, &config(4, 1500)).unwrap();
        assert_eq!(ended(&stats), 6000);
        assert_eq!(sb.check(&db), Ok(()));
        let rep = crate::checker::check(&db.take_history());
        assert!(rep.anomalies.is_empty(), "smallbank, {split}: {rep}");
        assert!(rep.committed > 5000 && rep.edges[..3].iter().all(|&e| e > 1000), "{rep}");
        let tpcc = Tpcc::new(TpccConfig::new(1));
        let db = database(&tpcc, &[("batch", "64"), ("split", split)], true);
        let stats = Bohm::drive(&db, &tpcc, &config(4, 300)).unwrap();
        assert_eq!(ended(&stats), 1200);
        assert_eq!(tpcc.check(&db), Ok(()));
        let rep = crate::checker::check(&db.take_history());
        assert!(rep.anomalies.is_empty(), "tpcc, {split}: {rep}");
        assert!(rep.edges[3] + rep.edges[4] > 0, "scans made predicate edges: {rep}");
    }
}

/// A second run on the same database continues the first one's timestamps: it sees the
/// first run's writes, and TPC-C's consistency conditions hold across runs.
#[test]
fn a_second_run_continues_the_first() {
    use crate::workloads::tpcc::{Tpcc, TpccConfig};
    let sb = Tpcc::new(TpccConfig::new(1));
    let db = database(&sb, &[("batch", "16")], false);
    // A long run, then short ones: a short run's timestamps, restarted, would fall below
    // most of the long run's versions.
    for (run, per_worker) in [500, 50, 50].into_iter().enumerate() {
        let stats = Bohm::drive(&db, &sb, &config(4, per_worker)).unwrap();
        assert_eq!(ended(&stats), 4 * per_worker, "run {run}");
        assert_eq!(sb.check(&db), Ok(()), "run {run}");
    }
}

/// A batch counts when any of it falls in the window, however long it is.
#[test]
fn batches_count_when_they_overlap_the_window() {
    use super::{
        overlaps_window,
        RunPhase::{Measure, Pause, Stop, Warmup},
    };
    assert!(!overlaps_window(Warmup, Warmup), "all of it before the window");
    assert!(overlaps_window(Warmup, Measure), "straddles the opening");
    assert!(overlaps_window(Warmup, Stop), "spans the whole window");
    assert!(overlaps_window(Measure, Measure));
    assert!(overlaps_window(Measure, Pause) && overlaps_window(Pause, Measure));
    assert!(overlaps_window(Measure, Stop), "straddles the close");
    assert!(!overlaps_window(Stop, Stop), "all of it after the window");
}

/// Index entries of table `t` whose rows are deleted (the index holds them, no present
/// row answers for them).
fn lingering(db: &Database<Bohm>, t: crate::storage::TableId) -> u64 {
    let index = &db.storage().table(t).index;
    let (g, mut buf, mut from, mut entries) =
        (crate::storage::index::pin(), crate::storage::index::ScanBuf::default(), 0, 0);
    loop {
        assert!(index.scan(from, u64::MAX, 1024, &mut buf, &g));
        let last = buf.entries().last().map(|(k, _)| k);
        entries += buf.entries().count() as u64;
        match last {
            Some(k) if buf.len() == 1024 && k < u64::MAX => from = k + 1,
            _ => break,
        }
    }
    entries - db.count_present(t, 0, u64::MAX).unwrap()
}

/// The rows TPC-C's Delivery deletes (new orders, in a table in unit mode) leave the index
/// once no running transaction can read below the deletion, under either split: without
/// that, every Delivery's scan for a district's oldest new order walks all the orders
/// delivered before, and the run slows down as it goes.
#[test]
fn deleted_rows_of_units_leave_the_index() {
    use crate::workloads::tpcc::{tables::NEW_ORDER, txns::Kind, Tpcc, TpccConfig};
    for split in ["dedicated", "adaptive"] {
        let tpcc = Tpcc::new(TpccConfig::new(1));
        let db = database(&tpcc, &[("batch", "16"), ("split", split)], false);
        let stats = Bohm::drive(&db, &tpcc, &config(4, 600)).unwrap();
        assert_eq!(tpcc.check(&db), Ok(()), "{split}");
        // Each Delivery deletes one new order in each of the 10 districts (900 wait in
        // each after loading).
        let deleted: u64 = stats.iter().map(|s| s.commits[Kind::Delivery as usize]).sum();
        let deleted = 10 * deleted;
        let left = lingering(&db, NEW_ORDER);
        assert!(deleted > 500, "{split}: {deleted} new orders delivered");
        assert!(left * 10 < deleted, "{split}: {left} of {deleted} deleted rows linger");
    }
}

/// Rows deleted in a table not in unit mode leave the index once the execution threads
/// are past the deletion's batch: the partition that owns them unlinks them; a key
/// inserted again afterwards gets a fresh row.
#[test]
fn deleted_rows_leave_the_index() {
    use crate::engine::{AccessSet, Procedure, Recon, Tx, TxnType};
    use crate::storage::{TableId, TableSpec};
    const T: TableId = TableId(0);
    /// Inserts (`value` > 0) or deletes `key`; reports whether it found what it expected.
    struct Op {
        key: u64,
        value: u64,
        ok: std::cell::Cell<bool>,
    }
    impl Procedure for Op {
        fn txn_type(&self) -> usize {
            0
        }
        fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
            set.write(T, self.key);
            true
        }
        fn run<W: crate::engine::Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
            let ok = match self.value {
                0 => tx.delete(T, self.key)?,
                v => tx.insert(T, self.key, &v.to_le_bytes())?,
            };
            self.ok.set(ok);
            Ok(())
        }
    }
    static TYPES: [TxnType; 1] = [TxnType { name: "op", pieces: &[] }];
    let op = |key, value| Op { key, value, ok: Default::default() };
    for split in ["dedicated", "adaptive"] {
        let pairs = [("batch", "4"), ("cc-threads", "2"), ("split", split)];
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let db = Database::<Bohm>::builder(&[TableSpec::new("t", 8, 4096)])
            .protocol_options(crate::protocols::bohm::BohmOptions::from_pairs(&pairs).unwrap())
            .build()
            .unwrap();
        // Inserts, the deletes, then enough other writes for the watermark to pass them.
        let mut ops: Vec<Op> = (0..100).map(|k| op(k, k + 1)).collect();
        ops.extend((0..100).map(|k| op(k, 0)));
        ops.extend((0..100).map(|k| op(1000 + k, 7)));
        let done = db.run_batch(&TYPES, ops, 3).unwrap();
        assert!(done.iter().all(|(o, _)| o.ok.get()), "{split}: every op found its key");
        assert_eq!(lingering(&db, T), 0, "{split}: the deleted rows left the index");
        assert_eq!(db.count_present(T, 0, u64::MAX), Some(100));
        // The keys come back as fresh rows.
        let again = db.run_batch(&TYPES, (0..100).map(|k| op(k, 9)).collect(), 3).unwrap();
        assert!(again.iter().all(|(o, _)| o.ok.get()), "{split}: re-inserted");
        assert_eq!(db.count_present(T, 0, 99), Some(100));
    }
}

#[test]
fn smallbank_money_is_conserved_through_the_pipeline() {
    for (threads, opts) in [
        (4, vec![("batch", "16")]),
        (5, vec![("batch", "7"), ("cc-threads", "2")]),
        (5, vec![("batch", "7"), ("cc-threads", "2"), ("split", "adaptive")]),
        (3, vec![("batch", "64"), ("cc-threads", "5"), ("split", "adaptive")]),
        (2, vec![("batch", "1000")]),
        (2, vec![("batch", "9"), ("split", "adaptive")]),
        (1, vec![("batch", "3")]),
    ] {
        let (check, ended) = smallbank(threads, &opts, 600);
        assert_eq!(check, Ok(()), "{threads} threads, {opts:?}");
        assert_eq!(ended, threads as u64 * 600, "every transaction ended once: {opts:?}");
    }
}
