//! YCSB (Cooper et al., SoCC 2010) with CCBench's parameters (Tanabe et al., VLDB 2020, §3.2).
//!
//! One table, `usertable`, of `records` rows of `payload` bytes keyed `0..records`. A transaction
//! is `ops` operations, each independently a read, a write (blind, or read-modify-write with
//! `--rmw`), an insert of a fresh key, or a scan of 1..=`max_scan` rows, in the configured
//! proportions. Keys follow Zipf(θ) with key 0 hottest (CCBench's generator, Gray et al.), uniform,
//! or "latest" (Zipf over recency, for YCSB-D). Inserted keys come from a shared counter starting
//! at `records`. With `--long-txn-delay-us`, worker 0 spins at the end of every read phase
//! (CCBench §7.2), or with `--long-txn-delay-at start` before its first operation, so that it
//! reads at an old snapshot. With `--long-read-ratio`, that fraction of transactions are long
//! read-only ones reading `--long-read-records` records chosen uniformly (BOHM §4.2.3), reported
//! as their own type, `long-read`. With `--partitioned` worker `w` of `n` draws its keys from
//! its own slice, `[w * records / n, (w + 1) * records / n)` (a key's rank modulo the slice's
//! size, so the skew applies within the slice): no two workers touch a row (CCBench §7.1).
//!
//! Every transaction declares its access set (exact keys; scans declare their range) and has a
//! one-piece template, so BOHM- and IC3-style protocols can run it.

mod config;

pub use config::{DelayAt, Distribution, Preset, YcsbArgs, YcsbConfig};

use super::zipf::Zipf;
use crate::engine::loader::parallel_load;
use crate::engine::{
    AccessMode, AccessSet, Database, Generator, Piece, Procedure, Protocol, Recon, TableAccess, Tx,
    TxnType, Worker, Workload, ALL_COLUMNS,
};
use crate::error::{Abort, Error};
use crate::storage::{TableId, TableSpec};
use rand::{RngExt, SeedableRng};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The only table.
pub const USERTABLE: TableId = TableId(0);

/// The transaction types: every YCSB transaction, and the long read-only ones when
/// `--long-read-ratio` asks for them (reported apart).
static TYPES: [TxnType; 2] = [
    TxnType {
        name: "ycsb",
        pieces: &[Piece {
            name: "ops",
            accesses: &[TableAccess {
                table: USERTABLE,
                mode: AccessMode::Write,
                columns: ALL_COLUMNS,
            }],
        }],
    },
    TxnType {
        name: "long-read",
        pieces: &[Piece {
            name: "reads",
            accesses: &[TableAccess {
                table: USERTABLE,
                mode: AccessMode::Read,
                columns: ALL_COLUMNS,
            }],
        }],
    },
];
/// The index of the long read-only type in `TYPES`.
const LONG_READ: usize = 1;

/// The YCSB workload.
pub struct Ycsb {
    cfg: YcsbConfig,
    zipf: Zipf,
    next_insert: Arc<AtomicU64>,
}

impl Ycsb {
    /// A YCSB workload; computes ζ(records, θ) with up to `threads` threads.
    pub fn new(cfg: YcsbConfig, threads: usize) -> Self {
        let theta = if cfg.distribution == Distribution::Uniform { 0.0 } else { cfg.theta };
        Ycsb {
            zipf: Zipf::new(cfg.records, theta, threads),
            next_insert: Arc::new(AtomicU64::new(cfg.records)),
            cfg,
        }
    }

    /// The schema for `cfg` (before computing anything else).
    pub fn tables_for(c: &YcsbConfig) -> Vec<TableSpec> {
        let headroom = if c.insert_ratio > 0.0 { c.records.max(64 << 20) } else { 1 << 16 };
        vec![TableSpec::new("usertable", c.payload, c.records)
            .with_index(c.index)
            .with_capacity(c.records + headroom)]
    }

    /// The configuration.
    pub fn settings(&self) -> &YcsbConfig {
        &self.cfg
    }
}

/// Initial payload of `key`: its little-endian bytes, repeated.
fn fill(key: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = key.to_le_bytes()[i % 8];
    }
}

impl Workload for Ycsb {
    type Proc = YcsbTxn;
    type Gen = YcsbGen;

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn tables(&self) -> Vec<TableSpec> {
        Ycsb::tables_for(&self.cfg)
    }

    fn txn_types(&self) -> &[TxnType] {
        if self.cfg.long_read_ratio > 0.0 {
            &TYPES
        } else {
            &TYPES[..LONG_READ]
        }
    }

    fn load<P: Protocol>(&self, db: &Database<P>, threads: usize) -> Result<(), Error> {
        let payload = self.cfg.payload;
        parallel_load(db, self.cfg.records, 1 << 14, threads, "usertable", |loader, keys| {
            let mut buf = vec![0u8; payload];
            for key in keys {
                fill(key, &mut buf);
                loader.insert(USERTABLE, key, &buf)?;
            }
            Ok(())
        })
    }

    fn generator(&self, worker: usize, threads: usize, seed: u64) -> YcsbGen {
        let c = &self.cfg;
        let slice = if c.partitioned {
            // At least one record per worker (the run checks it).
            let size = (c.records / threads.max(1) as u64).max(1);
            ((worker as u64 * size).min(c.records - 1), size)
        } else {
            (0, c.records)
        };
        let mut value = vec![0u8; c.payload];
        fill(!(worker as u64), &mut value);
        YcsbGen {
            cfg: c.clone(),
            zipf: self.zipf,
            rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed),
            next_insert: self.next_insert.clone(),
            slice,
            blank: YcsbTxn {
                ops: Vec::with_capacity(if c.long_read_ratio > 0.0 {
                    c.ops.max(c.long_read_records)
                } else {
                    c.ops
                }),
                value,
                delay: if worker == 0 {
                    Duration::from_micros(c.long_txn_delay_us)
                } else {
                    Duration::ZERO
                },
                delay_at: c.long_txn_delay_at,
                prefetch: c.prefetch,
                read_only: true,
                ty: 0,
            },
        }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.cfg).expect("serializable")
    }

    /// The rows, their size, the index and the room for inserts; the rest only shapes the
    /// transactions.
    fn data_config(&self) -> serde_json::Value {
        let c = &self.cfg;
        serde_json::json!({
            "records": c.records,
            "payload": c.payload,
            "index": c.index,
            "capacity": Ycsb::tables_for(c)[0].capacity,
        })
    }

    fn continue_from(&mut self, previous: &Self) {
        // Keys inserted by earlier runs stay: new inserts continue after them.
        self.next_insert = previous.next_insert.clone();
    }
}

/// One YCSB operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read a row.
    Read(u64),
    /// Overwrite a row without reading it.
    Write(u64),
    /// Read a row and write it back modified.
    Rmw(u64),
    /// Insert a new row.
    Insert(u64),
    /// Scan `len` rows starting at the key.
    Scan(u64, usize),
}

/// A YCSB transaction.
#[derive(Clone, Debug)]
pub struct YcsbTxn {
    /// The operations in order.
    pub ops: Vec<Op>,
    /// Value written by blind writes and inserts.
    pub value: Vec<u8>,
    /// Read-phase extension (long transactions).
    pub delay: Duration,
    /// Where the delay goes.
    pub delay_at: DelayAt,
    /// Prefetch every point access before running the operations.
    pub prefetch: bool,
    /// Every operation reads (reads and scans only): the transaction declares itself
    /// read-only.
    pub read_only: bool,
    /// Its type (`TYPES`): a long read-only transaction, or any other.
    pub ty: usize,
}

impl Procedure for YcsbTxn {
    fn txn_type(&self) -> usize {
        self.ty
    }

    #[inline]
    fn read_only(&self) -> bool {
        self.read_only
    }

    fn declare<R: Recon>(&self, _recon: &R, set: &mut AccessSet) -> bool {
        for op in &self.ops {
            match *op {
                Op::Read(k) => set.read(USERTABLE, k),
                Op::Write(k) | Op::Rmw(k) | Op::Insert(k) => set.write(USERTABLE, k),
                Op::Scan(k, _) => set.range(USERTABLE, k, u64::MAX, AccessMode::Read),
            }
        }
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            if self.delay_at == DelayAt::Start {
                crate::util::spin_for(self.delay);
            }
            if self.prefetch {
                // In batches, so that a protocol can overlap each stage of the lookups (a
                // multi-version one fetches the versions the records point to in a second pass).
                let mut batch = [(USERTABLE, 0, ALL_COLUMNS); 16];
                let mut n = 0;
                for op in &self.ops {
                    if let Op::Read(k) | Op::Write(k) | Op::Rmw(k) = *op {
                        batch[n].1 = k;
                        n += 1;
                        if n == batch.len() {
                            tx.prefetch_many(&batch);
                            n = 0;
                        }
                    }
                }
                tx.prefetch_many(&batch[..n]);
            }
            let mut sink = 0u8;
            for op in &self.ops {
                match *op {
                    Op::Read(k) => {
                        if let Some(b) = tx.read(USERTABLE, k, |row| row[0])? {
                            sink ^= b;
                        }
                    }
                    Op::Write(k) => {
                        tx.write(USERTABLE, k, &self.value)?;
                    }
                    Op::Rmw(k) => {
                        tx.update(USERTABLE, k, |row| row[0] = row[0].wrapping_add(1))?;
                    }
                    Op::Insert(k) => {
                        tx.insert(USERTABLE, k, &self.value)?;
                    }
                    Op::Scan(k, len) => {
                        tx.scan(USERTABLE, k, u64::MAX, len, |_, row| {
                            sink ^= row[0];
                            ControlFlow::Continue(())
                        })?;
                    }
                }
            }
            if self.delay_at == DelayAt::End {
                crate::util::spin_for(self.delay);
            }
            std::hint::black_box(sink);
            Ok(())
        })
    }
}

/// A worker's YCSB generator.
pub struct YcsbGen {
    cfg: YcsbConfig,
    zipf: Zipf,
    rng: rand::rngs::Xoshiro256PlusPlus,
    next_insert: Arc<AtomicU64>,
    /// The worker's keys: the first and how many (all of them unless `--partitioned`).
    slice: (u64, u64),
    /// What [`Generator::blank`] hands out: this worker's payload and delay, no operations.
    blank: YcsbTxn,
}

impl YcsbGen {
    #[inline]
    fn key(&mut self) -> u64 {
        let rank = self.zipf.sample(&mut self.rng);
        match self.cfg.distribution {
            Distribution::Latest => {
                let latest = self.next_insert.load(Ordering::Relaxed).saturating_sub(1);
                latest.saturating_sub(rank)
            }
            _ if self.cfg.partitioned => self.slice.0 + rank % self.slice.1,
            _ => rank,
        }
    }
}

impl Generator for YcsbGen {
    type Proc = YcsbTxn;

    fn blank(&self) -> YcsbTxn {
        self.blank.clone()
    }

    fn fill(&mut self, t: &mut YcsbTxn) {
        t.ops.clear();
        let c = &self.cfg;
        if c.long_read_ratio > 0.0 && self.rng.random::<f64>() < c.long_read_ratio {
            // BOHM §4.2.3: records chosen uniformly at random among those loaded.
            for _ in 0..c.long_read_records {
                let key = self.rng.random_range(0..c.records);
                t.ops.push(Op::Read(key));
            }
            (t.read_only, t.ty) = (true, LONG_READ);
            return;
        }
        t.ty = 0;
        let (r, s, i) = (
            c.read_ratio,
            c.read_ratio + c.scan_ratio,
            c.read_ratio + c.scan_ratio + c.insert_ratio,
        );
        let (rmw, max_scan) = (c.rmw, c.max_scan);
        let mut read_only = true;
        for _ in 0..self.cfg.ops {
            let u: f64 = self.rng.random();
            let op = if u < r {
                Op::Read(self.key())
            } else if u < s {
                let len = self.rng.random_range(1..=max_scan);
                Op::Scan(self.key(), len)
            } else if u < i {
                Op::Insert(self.next_insert.fetch_add(1, Ordering::Relaxed))
            } else if rmw {
                Op::Rmw(self.key())
            } else {
                Op::Write(self.key())
            };
            read_only &= matches!(op, Op::Read(_) | Op::Scan(..));
            t.ops.push(op);
        }
        t.read_only = read_only;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut YcsbArgs)) -> Result<YcsbConfig, Error> {
        let mut a = YcsbArgs::default();
        f(&mut a);
        a.resolve()
    }

    #[test]
    fn presets_set_the_mix_and_flags_override_them() {
        let e = args(|a| a.preset = Some(Preset::E)).unwrap();
        assert_eq!(
            (e.read_ratio, e.scan_ratio, e.insert_ratio, e.max_scan),
            (0.0, 0.95, 0.05, 100)
        );
        let d = args(|a| a.preset = Some(Preset::D)).unwrap();
        assert_eq!(d.distribution, Distribution::Latest);
        let f = args(|a| {
            a.preset = Some(Preset::F);
            a.read_ratio = Some(0.2);
        })
        .unwrap();
        assert!(f.rmw);
        assert_eq!(f.read_ratio, 0.2);
        assert_eq!(f.theta, 0.99);
    }

    #[test]
    fn out_of_range_values_name_the_flag_and_the_range() {
        let e = |f: fn(&mut YcsbArgs)| args(f).unwrap_err().to_string();
        assert_eq!(e(|a| a.theta = Some(1.5)), "--theta 1.5 is out of range (0 to 0.999)");
        assert_eq!(e(|a| a.payload = Some(0)), "--payload 0 is out of range (1 to 1048576 bytes)");
        assert_eq!(e(|a| a.read_ratio = Some(-0.1)), "--read-ratio -0.1 is out of range (0 to 1)");
        assert_eq!(e(|a| a.records = Some(0)), "--records 0 is out of range (1 to 1099511627776)");
        assert_eq!(
            e(|a| a.long_txn_delay_at = Some(DelayAt::Start)),
            "--long-txn-delay-at needs a --long-txn-delay-us above 0"
        );
        assert!(e(|a| {
            a.scan_ratio = Some(0.5);
            a.index = Some(crate::storage::index::IndexKind::Hash);
        })
        .contains("--index ordered"));
    }

    #[test]
    fn generated_mix_matches_the_ratios() {
        let cfg = args(|a| {
            a.records = Some(1000);
            a.read_ratio = Some(0.6);
            a.insert_ratio = Some(0.1);
            a.scan_ratio = Some(0.1);
            a.ops = Some(100);
        })
        .unwrap();
        let y = Ycsb::new(cfg, 1);
        let mut g = y.generator(0, 1, 42);
        let mut t = g.blank();
        let mut counts = [0usize; 4];
        for _ in 0..200 {
            g.fill(&mut t);
            for op in &t.ops {
                counts[match op {
                    Op::Read(k) | Op::Write(k) => {
                        assert!(*k < 1000);
                        if matches!(op, Op::Read(_)) {
                            0
                        } else {
                            3
                        }
                    }
                    Op::Scan(k, len) => {
                        assert!(*k < 1000 && (1..=100).contains(len));
                        1
                    }
                    Op::Insert(k) => {
                        assert!(*k >= 1000);
                        2
                    }
                    Op::Rmw(_) => unreachable!("blind writes configured"),
                }] += 1;
            }
        }
        let frac = |i: usize| counts[i] as f64 / 20_000.0;
        assert!((frac(0) - 0.6).abs() < 0.02 && (frac(1) - 0.1).abs() < 0.01);
        assert!((frac(2) - 0.1).abs() < 0.01 && (frac(3) - 0.2).abs() < 0.02);
    }

    /// Long read-only transactions come at their ratio, read their count of loaded keys, declare
    /// themselves read-only and are their own type; the rest are as configured.
    #[test]
    fn long_reads_are_their_own_read_only_type() {
        let cfg = args(|a| {
            a.records = Some(1000);
            a.read_ratio = Some(0.0);
            a.ops = Some(4);
            a.long_read_ratio = Some(0.1);
            a.long_read_records = Some(50);
        })
        .unwrap();
        let y = Ycsb::new(cfg, 1);
        assert_eq!(y.txn_types().iter().map(|t| t.name).collect::<Vec<_>>(), ["ycsb", "long-read"]);
        let mut g = y.generator(0, 1, 7);
        let mut t = g.blank();
        let mut long = 0;
        for _ in 0..10_000 {
            g.fill(&mut t);
            if t.txn_type() == LONG_READ {
                long += 1;
                assert!(t.read_only());
                assert_eq!(t.ops.len(), 50);
                assert!(t.ops.iter().all(|op| matches!(op, Op::Read(k) if *k < 1000)));
            } else {
                assert_eq!(t.txn_type(), 0);
                assert!(!t.read_only(), "writes only were configured");
                assert_eq!(t.ops.len(), 4);
            }
        }
        assert!((900..=1100).contains(&long), "{long} long readers in 10000");
        let plain = Ycsb::new(args(|_| {}).unwrap(), 1);
        assert_eq!(plain.txn_types().len(), 1, "no long-read type unless asked for");
        let e = args(|a| a.long_read_records = Some(5)).unwrap_err().to_string();
        assert_eq!(e, "--long-read-records needs a --long-read-ratio above 0");
        let e = args(|a| a.long_read_ratio = Some(1.5)).unwrap_err().to_string();
        assert_eq!(e, "--long-read-ratio 1.5 is out of range (0 to 1)");
    }

    /// `--partitioned`: each worker's keys stay in its own slice, the skew applies within it,
    /// and what would cross slices is refused.
    #[test]
    fn partitioned_workers_keep_to_their_slices() {
        let cfg = args(|a| {
            a.records = Some(1003);
            a.theta = Some(0.9);
            a.partitioned = true;
        })
        .unwrap();
        let y = Ycsb::new(cfg, 1);
        for w in 0..4 {
            let mut g = y.generator(w, 4, w as u64);
            let mut t = g.blank();
            let lo = w as u64 * 250;
            let mut hottest = 0;
            for _ in 0..2_000 {
                g.fill(&mut t);
                for op in &t.ops {
                    let (Op::Read(k) | Op::Write(k)) = *op else { panic!("{op:?}") };
                    assert!((lo..lo + 250).contains(&k), "worker {w} drew key {k}");
                    hottest += u64::from(k == lo);
                }
            }
            assert!(hottest > 1_000, "worker {w}: the skew applies in the slice ({hottest})");
        }
        let e = |f: fn(&mut YcsbArgs)| {
            args(|a| {
                a.partitioned = true;
                f(a)
            })
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            e(|a| a.scan_ratio = Some(0.1)),
            "--partitioned cannot be used with --scan-ratio above 0 (a scan crosses slices)"
        );
        assert_eq!(
            e(|a| a.preset = Some(Preset::D)),
            "--partitioned cannot be used with the latest distribution (new keys are shared)"
        );
        assert!(e(|a| a.long_read_ratio = Some(0.1)).contains("--long-read-ratio above 0"));
    }
}
