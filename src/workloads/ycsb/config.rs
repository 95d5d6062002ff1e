//! YCSB parameters: CCBench's seven plus YCSB's presets, scans, inserts and distributions.

use crate::error::Error;
use crate::storage::index::IndexKind;
use crate::storage::MAX_ROW_SIZE;
use serde::Serialize;

/// YCSB's core workloads (Cooper et al., SoCC 2010, Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Update heavy: 50 % reads, 50 % (blind) updates, Zipfian.
    A,
    /// Read mostly: 95 % reads, 5 % updates, Zipfian.
    B,
    /// Read only, Zipfian.
    C,
    /// Read latest: 95 % reads, 5 % inserts, reads favour recent inserts.
    D,
    /// Short ranges: 95 % scans of 1..=100 records, 5 % inserts, Zipfian start keys.
    E,
    /// Read-modify-write: 50 % reads, 50 % read-modify-writes, Zipfian.
    F,
}

impl Preset {
    /// What the preset sets.
    pub fn describe(self) -> &'static str {
        match self {
            Preset::A => "50% reads, 50% blind updates, zipfian",
            Preset::B => "95% reads, 5% blind updates, zipfian",
            Preset::C => "100% reads, zipfian",
            Preset::D => "95% reads, 5% inserts, read-latest distribution",
            Preset::E => "95% scans (1..=100 rows), 5% inserts, zipfian start keys",
            Preset::F => "50% reads, 50% read-modify-writes, zipfian",
        }
    }
}

/// How keys are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Zipf(θ) over the loaded keys, hottest key 0 (θ = 0 is uniform).
    Zipfian,
    /// Uniform over the loaded keys (ignores θ).
    Uniform,
    /// Zipf(θ) over recency: the most recently inserted key is the hottest (YCSB-D).
    Latest,
}

/// Where worker 0's long transaction spends its delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum DelayAt {
    /// At the end of the read phase, after every operation (CCBench §7.2): the transaction
    /// holds its snapshot and its writes long, and reads while young.
    End,
    /// Before the first operation: every read is at a snapshot as old as the delay (what a
    /// multi-version protocol's AggressiveGC makes fail with `snapshot-too-old`).
    Start,
}

/// Command-line form of the YCSB parameters: every field optional, so a preset can fill in what
/// the user did not set.
#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[cfg_attr(feature = "cli", command(next_help_heading = "YCSB workload"))]
pub struct YcsbArgs {
    /// Start from a YCSB core workload (explicit flags override it).
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    pub preset: Option<Preset>,
    /// Records loaded (cardinality), 1 to 1099511627776 [default: 1000000]
    #[cfg_attr(feature = "cli", arg(long))]
    pub records: Option<u64>,
    /// Operations per transaction, 1 to 100000 [default: 10]
    #[cfg_attr(feature = "cli", arg(long))]
    pub ops: Option<u64>,
    /// Fraction of operations that are reads, 0 to 1 [default: 0.5]
    #[cfg_attr(feature = "cli", arg(long))]
    pub read_ratio: Option<f64>,
    /// Zipf skew θ, 0 (uniform) to 0.999 [default: 0.8]
    #[cfg_attr(feature = "cli", arg(long))]
    pub theta: Option<f64>,
    /// Payload bytes per record, 1 to 1048576 [default: 4]
    #[cfg_attr(feature = "cli", arg(long))]
    pub payload: Option<u64>,
    /// Writes are read-modify-writes instead of blind writes
    #[cfg_attr(feature = "cli", arg(long))]
    pub rmw: bool,
    /// Fraction of operations that insert a new key, 0 to 1 [default: 0]
    #[cfg_attr(feature = "cli", arg(long))]
    pub insert_ratio: Option<f64>,
    /// Fraction of operations that are range scans, 0 to 1 [default: 0]
    #[cfg_attr(feature = "cli", arg(long))]
    pub scan_ratio: Option<f64>,
    /// Longest scan, 1 to 1000000; lengths are uniform in 1..=N [default: 100]
    #[cfg_attr(feature = "cli", arg(long))]
    pub max_scan: Option<u64>,
    /// Key distribution [default: zipfian]
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    pub distribution: Option<Distribution>,
    /// Index of the table [default: dense]
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    pub index: Option<IndexKind>,
    /// Long-transaction delay: worker 0 spins this many microseconds at the end of every
    /// transaction's read phase (CCBench §7.2), 0 to 60000000 [default: 0]
    #[cfg_attr(feature = "cli", arg(long))]
    pub long_txn_delay_us: Option<u64>,
    /// Where the long transaction's delay goes [default: end]
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    pub long_txn_delay_at: Option<DelayAt>,
    /// Fraction of transactions that are long read-only ones (BOHM §4.2.3: each reads
    /// --long-read-records records chosen uniformly at random), 0 to 1 [default: 0]
    #[cfg_attr(feature = "cli", arg(long))]
    pub long_read_ratio: Option<f64>,
    /// Records a long read-only transaction reads, 1 to 10000000 [default: 10000]
    #[cfg_attr(feature = "cli", arg(long))]
    pub long_read_records: Option<u64>,
    /// Do not prefetch each transaction's records before running its operations (prefetching
    /// overlaps the cache misses of independent operations; it is the same for every protocol)
    #[cfg_attr(feature = "cli", arg(long))]
    pub no_prefetch: bool,
    /// Each worker draws its keys from its own slice of the records (CCBench §7.1's
    /// partitioned workload for Fig. 13: no two workers touch a row), the distribution applied
    /// within the slice
    #[cfg_attr(feature = "cli", arg(long))]
    pub partitioned: bool,
}

impl YcsbArgs {
    /// The first YCSB flag given on the command line, if any (to refuse it for other workloads).
    pub fn given_flag(&self) -> Option<&'static str> {
        [
            (self.preset.is_some(), "preset"),
            (self.records.is_some(), "records"),
            (self.ops.is_some(), "ops"),
            (self.read_ratio.is_some(), "read-ratio"),
            (self.theta.is_some(), "theta"),
            (self.payload.is_some(), "payload"),
            (self.rmw, "rmw"),
            (self.insert_ratio.is_some(), "insert-ratio"),
            (self.scan_ratio.is_some(), "scan-ratio"),
            (self.max_scan.is_some(), "max-scan"),
            (self.distribution.is_some(), "distribution"),
            (self.index.is_some(), "index"),
            (self.long_txn_delay_us.is_some(), "long-txn-delay-us"),
            (self.long_txn_delay_at.is_some(), "long-txn-delay-at"),
            (self.long_read_ratio.is_some(), "long-read-ratio"),
            (self.long_read_records.is_some(), "long-read-records"),
            (self.no_prefetch, "no-prefetch"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// Resolved, validated YCSB parameters.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct YcsbConfig {
    /// The preset used, if any.
    pub preset: Option<Preset>,
    /// Records loaded.
    pub records: u64,
    /// Operations per transaction.
    pub ops: usize,
    /// Fraction of reads.
    pub read_ratio: f64,
    /// Zipf skew.
    pub theta: f64,
    /// Payload bytes.
    pub payload: usize,
    /// Read-modify-write instead of blind writes.
    pub rmw: bool,
    /// Fraction of inserts.
    pub insert_ratio: f64,
    /// Fraction of scans.
    pub scan_ratio: f64,
    /// Longest scan.
    pub max_scan: usize,
    /// Key distribution.
    pub distribution: Distribution,
    /// Index kind.
    pub index: IndexKind,
    /// Long-transaction delay in µs for worker 0.
    pub long_txn_delay_us: u64,
    /// Where the delay goes.
    pub long_txn_delay_at: DelayAt,
    /// Fraction of long read-only transactions.
    pub long_read_ratio: f64,
    /// Records each reads.
    pub long_read_records: usize,
    /// Prefetch each transaction's records before running it.
    pub prefetch: bool,
    /// Each worker's keys come from its own slice of the records.
    pub partitioned: bool,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbArgs::default().resolve().expect("defaults are valid")
    }
}

fn ratio(flag: &str, v: f64) -> Result<f64, Error> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(Error::Config(format!("--{flag} {v} is out of range (0 to 1)")))
    }
}

fn range(flag: &str, v: u64, lo: u64, hi: u64, unit: &str) -> Result<u64, Error> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(Error::Config(format!("--{flag} {v} is out of range ({lo} to {hi}{unit})")))
    }
}

impl YcsbArgs {
    /// Applies the preset and defaults and validates every value. Errors name the flag and the
    /// valid range.
    pub fn resolve(&self) -> Result<YcsbConfig, Error> {
        // (read, insert, scan, rmw, distribution) per preset.
        let p = self.preset.map(|p| match p {
            Preset::A => (0.5, 0.0, 0.0, false, Distribution::Zipfian),
            Preset::B => (0.95, 0.0, 0.0, false, Distribution::Zipfian),
            Preset::C => (1.0, 0.0, 0.0, false, Distribution::Zipfian),
            Preset::D => (0.95, 0.05, 0.0, false, Distribution::Latest),
            Preset::E => (0.0, 0.05, 0.95, false, Distribution::Zipfian),
            Preset::F => (0.5, 0.0, 0.0, true, Distribution::Zipfian),
        });
        let theta = self.theta.unwrap_or(if self.preset.is_some() { 0.99 } else { 0.8 });
        if !(0.0..=0.999).contains(&theta) {
            return Err(Error::Config(format!("--theta {theta} is out of range (0 to 0.999)")));
        }
        let records = range("records", self.records.unwrap_or(1_000_000), 1, 1 << 40, "")?;
        let ops = range("ops", self.ops.unwrap_or(10), 1, 100_000, "")? as usize;
        let payload =
            range("payload", self.payload.unwrap_or(4), 1, MAX_ROW_SIZE as u64, " bytes")?;
        let read_ratio = ratio("read-ratio", self.read_ratio.or(p.map(|p| p.0)).unwrap_or(0.5))?;
        let insert_ratio =
            ratio("insert-ratio", self.insert_ratio.or(p.map(|p| p.1)).unwrap_or(0.0))?;
        let scan_ratio = ratio("scan-ratio", self.scan_ratio.or(p.map(|p| p.2)).unwrap_or(0.0))?;
        if read_ratio + insert_ratio + scan_ratio > 1.0 + 1e-9 {
            return Err(Error::Config(format!(
                "--read-ratio {read_ratio} + --insert-ratio {insert_ratio} + --scan-ratio \
                 {scan_ratio} exceed 1 (the rest of the operations are writes)"
            )));
        }
        let max_scan = range("max-scan", self.max_scan.unwrap_or(100), 1, 1_000_000, "")? as usize;
        let index = self.index.unwrap_or(IndexKind::Dense);
        if scan_ratio > 0.0 && index == IndexKind::Hash {
            return Err(Error::Config(
                "--scan-ratio above 0 needs --index ordered or dense (a hash index cannot scan)"
                    .into(),
            ));
        }
        let long_txn_delay_us =
            range("long-txn-delay-us", self.long_txn_delay_us.unwrap_or(0), 0, 60_000_000, " us")?;
        if self.long_txn_delay_at.is_some() && long_txn_delay_us == 0 {
            return Err(Error::Config(
                "--long-txn-delay-at needs a --long-txn-delay-us above 0".into(),
            ));
        }
        let long_read_ratio = ratio("long-read-ratio", self.long_read_ratio.unwrap_or(0.0))?;
        let long_read_records = range(
            "long-read-records",
            self.long_read_records.unwrap_or(10_000),
            1,
            10_000_000,
            "",
        )? as usize;
        if self.long_read_records.is_some() && long_read_ratio == 0.0 {
            return Err(Error::Config(
                "--long-read-records needs a --long-read-ratio above 0".into(),
            ));
        }
        if self.partitioned {
            let clash = if scan_ratio > 0.0 {
                Some("--scan-ratio above 0 (a scan crosses slices)")
            } else if long_read_ratio > 0.0 {
                Some("--long-read-ratio above 0 (long reads read every slice)")
            } else if self.distribution.or(p.map(|p| p.4)) == Some(Distribution::Latest) {
                Some("the latest distribution (new keys are shared)")
            } else {
                None
            };
            if let Some(what) = clash {
                return Err(Error::Config(format!("--partitioned cannot be used with {what}")));
            }
        }
        Ok(YcsbConfig {
            preset: self.preset,
            records,
            ops,
            read_ratio,
            theta,
            payload: payload as usize,
            rmw: self.rmw || p.is_some_and(|p| p.3),
            insert_ratio,
            scan_ratio,
            max_scan,
            distribution: self.distribution.or(p.map(|p| p.4)).unwrap_or(Distribution::Zipfian),
            index,
            long_txn_delay_us,
            long_txn_delay_at: self.long_txn_delay_at.unwrap_or(DelayAt::End),
            long_read_ratio,
            long_read_records,
            prefetch: !self.no_prefetch,
            partitioned: self.partitioned,
        })
    }
}

impl YcsbConfig {
    /// One line describing the workload.
    pub fn summary(&self) -> String {
        let writes = 1.0 - self.read_ratio - self.insert_ratio - self.scan_ratio;
        let mut s = format!(
            "YCSB{}: {} records, {} ops/txn, {:.0}% reads, {:.0}% {}",
            self.preset.map(|p| format!("-{p:?}")).unwrap_or_default(),
            self.records,
            self.ops,
            self.read_ratio * 100.0,
            writes.max(0.0) * 100.0,
            if self.rmw { "read-modify-writes" } else { "blind writes" },
        );
        if self.insert_ratio > 0.0 {
            s += &format!(", {:.0}% inserts", self.insert_ratio * 100.0);
        }
        if self.scan_ratio > 0.0 {
            s += &format!(", {:.0}% scans (1..={})", self.scan_ratio * 100.0, self.max_scan);
        }
        if self.long_read_ratio > 0.0 {
            s += &format!(
                "; {}% of transactions read {} random records, read-only",
                self.long_read_ratio * 100.0,
                self.long_read_records
            );
        }
        let dist = match self.distribution {
            Distribution::Zipfian => "zipfian",
            Distribution::Uniform => "uniform",
            Distribution::Latest => "latest",
        };
        let index = match self.index {
            IndexKind::Ordered => "ordered",
            IndexKind::Hash => "hash",
            IndexKind::Dense => "dense",
        };
        s += &format!(", {dist} theta {}, {} B payload, {index} index", self.theta, self.payload);
        if !self.prefetch {
            s += ", no prefetch";
        }
        if self.partitioned {
            s += ", partitioned by worker";
        }
        if self.long_txn_delay_us > 0 {
            let at = match self.long_txn_delay_at {
                DelayAt::End => "end of its read phase",
                DelayAt::Start => "start",
            };
            s += &format!(", long txn delay {} us at the {at} on worker 0", self.long_txn_delay_us);
        }
        s
    }
}
