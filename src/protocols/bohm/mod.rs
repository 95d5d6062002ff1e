//! `bohm`: deterministic multi-version concurrency control with a sequencer, partitioned
//! concurrency-control threads and execution threads (Faleiro and Abadi, VLDB 2015, §3).
//!
//! A sequencer orders transactions into batches (a transaction's timestamp is its position);
//! `m` concurrency-control threads, each owning the records whose hash falls to it, push a
//! placeholder version for every declared write, batch by batch, without synchronising with
//! each other except once per batch; `n` execution threads run the transactions at their
//! timestamps, producing the placeholders' data and evaluating unproduced dependencies
//! recursively. Reads never block writes and nothing aborts for a conflict: the order is fixed
//! before execution.
//!
//! * [`record`]: records (a head pointer) over `storage::version` versions, visibility.
//! * [`pipeline`]: the batch ring and the concurrency-control step.
//! * [`worker`]: a transaction executed at its timestamp.
//! * [`run`]: the threads, the garbage collection and the end of a run.
//! * [`units`]: declared write ranges, versioned as units of keys.
//!
//! BOHM needs every transaction's write set before it runs (its reads are at its timestamp,
//! declared or not: `Checks::writes_only`): workloads declare access sets
//! ([`crate::engine::Procedure::declare`]), with reconnaissance reads of the latest produced
//! data where keys depend on data; a transaction that writes a key it did not declare is
//! rolled back and submitted again, declared anew (OLLP, as Calvin and the paper describe).
//! A key that depends on data other transactions in the pipeline change (TPC-C's next order
//! number) is declared as the range it falls in (`AccessSet::write_within`), which puts its
//! table in unit mode ([`units`]). It runs no interactive transactions: `Database::worker`
//! refuses it, and a library user runs batches of procedures through `Database::run_batch`.
//!
//! **Durability.** An execution thread logs a committed transaction's writes when it completes
//! it, before producing any of its versions, with its timestamp as the commit stamp: for every
//! key a later writer has a later timestamp, and a transaction that reads the value logs after
//! it (the log epochs' rule). The timestamps of a database opened from a log restart above the
//! recovered rows, which are loaded rows (see `crate::durability::recovery`). A commit is
//! acknowledged (counted durable, waited for under `--sync commit`) by the execution thread
//! that answers for its slot at the end of the batch; under `--sync commit` a batch's commits
//! that logged nothing wait for the log epoch in progress, which covers what they read.
//!
//! **The commit contract** (`Protocol`'s docs). A transaction's placeholders hold its writes
//! from planning on; once its procedure ran and the slots of the rows it creates in units are
//! taken (nothing can fail after that), it passes `Locked` and `Validated`, logs (`Logged`)
//! *before* any of its writes is visible, pushes the rows of its units and produces its
//! versions (`Installed`), and only then takes its log epoch out of flight, so that a
//! checkpoint whose start epoch covers it reads its produced versions (`read_committed`: the
//! newest produced one). `Acknowledging` is passed per commit when its batch is counted. (Rows
//! of units pushed, readable, before the log record would let a checkpoint hold them from a
//! transaction whose record came in a later epoch, never made durable.)
//!
//! **Read-set annotation** (§3.2.3, `--opt read-annotation=on`, the default): the CC thread
//! that owns a declared read's record stores the record's newest version when it plans the
//! transaction, which is the version visible at its timestamp (the earlier transactions'
//! placeholders are pushed, the later ones not), so the execution reads it without walking the
//! chain. The same holds for the units of tables in unit mode ([`units`]): for each unit a
//! declared read (a key or a range) touches and the transaction does not write, the unit's CC
//! thread stores the unit's newest version, and the execution waits for that version's
//! producer instead of walking the unit's chain from the head, past every placeholder of the
//! batches planned ahead (on TPC-C with one warehouse, 230 versions per read of a customer,
//! whose district's unit every Payment writes). Rows of units and undeclared reads walk.
//!
//! **Departures from the paper.** Versions keep no end timestamp (readers walk newest first,
//! see [`record`]). A placeholder a transaction declared and did not write (or wrote and rolled
//! back) takes the previous version's value; when that is not produced yet, the placeholder
//! says so ([`record::PASS`]) instead of waiting, and readers go on to the previous version.
//! The index is the shared one (concurrent), not a hash table with one writer per key; only
//! the owning concurrency-control thread inserts a key, as in the paper. Write ranges
//! ([`units`]) are not in the paper, which runs no transaction whose write set depends on data
//! other transactions change; without them such transactions would be re-submitted for ever.

pub mod pipeline;
pub mod record;
pub mod run;
pub mod units;
pub mod worker;

use crate::engine::driver::RunConfig;
use crate::engine::options::{choice, number, switch, OptionSpec, ProtocolOptions};
use crate::engine::stats::WorkerStats;
use crate::engine::{Capabilities, Database, Isolation, Protocol, Reads, Setup, Workload};
use crate::error::Error;
use crate::storage::version::VersionStore;
use crate::storage::{RowRef, TableId};
use record::{BohmExt, BohmRecord};
use std::sync::atomic::Ordering;

/// The BOHM protocol: its options and each table's versions.
pub struct Bohm {
    options: BohmOptions,
    /// Per table its versions, then the units' (payload-less) versions.
    stores: Box<[VersionStore<BohmExt>]>,
    units: units::Units,
    /// The number of the next run's first batch: runs on one database continue each other's
    /// timestamps (see `run::drive`).
    next_batch: std::sync::atomic::AtomicU64,
}

/// BOHM's options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct BohmOptions {
    /// Concurrency-control threads (the execution threads are the rest of `--threads`);
    /// 0 picks a quarter of the threads, at least one.
    pub cc_threads: u32,
    /// Transactions per batch.
    pub batch: u32,
    /// Read-set annotation (§3.2.3): the CC threads give each declared read the version it
    /// sees, so that the execution reads it without walking the record's chain.
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub read_annotation: bool,
    /// How the threads divide between the two layers.
    pub split: Split,
}

/// How BOHM's threads divide between concurrency control and execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    /// The paper's: `cc-threads` threads plan, the rest execute, each layer on its own
    /// threads, the slots of a batch dealt round-robin to the execution threads.
    Dedicated,
    /// Every thread executes and plans: a thread plans a partition of a batch whenever one
    /// waits to be planned, and otherwise takes the next few slots of the oldest planned
    /// batch, so the threads go to whichever layer has work (the dynamic allocation of threads
    /// to stages the paper proposes after SEDA, §3.2.4, and does not build; see `run`).
    Adaptive,
}

impl Default for BohmOptions {
    fn default() -> Self {
        BohmOptions { cc_threads: 0, batch: 1000, read_annotation: true, split: Split::Dedicated }
    }
}

/// How a run's threads divide (see [`Bohm::split`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threads {
    /// Partitions of the records for the concurrency-control layer: with dedicated threads,
    /// one per CC thread.
    pub partitions: usize,
    /// Execution threads.
    pub exec: usize,
    /// Whether the execution threads plan too (`split=adaptive`, or a run on one thread);
    /// otherwise `partitions` threads of their own plan.
    pub shared: bool,
}

impl BohmOptions {
    /// See [`Bohm::split`].
    fn split(&self, threads: usize) -> Result<Threads, String> {
        let cc = match self.cc_threads as usize {
            0 => (threads / 4).max(1),
            m => m,
        };
        if threads > 0 && (self.split == Split::Adaptive || (threads == 1 && cc == 1)) {
            return Ok(Threads { partitions: cc, exec: threads, shared: true });
        }
        if threads == 0 || cc >= threads {
            return Err(format!(
                "bohm runs at least one concurrency-control and one execution thread: \
                 --threads {threads} with --opt cc-threads={cc} leaves {} execution threads \
                 (cc-threads must be below --threads, or both 1)",
                threads.saturating_sub(cc)
            ));
        }
        Ok(Threads { partitions: cc, exec: threads - cc, shared: false })
    }
}

impl ProtocolOptions for BohmOptions {
    const SPECS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "cc-threads",
            values: "0 to 1024",
            default: "0",
            help: "concurrency-control threads (§3.2), each owning a partition of the records; \
                   the execution threads are the rest of --threads (with split=adaptive: the \
                   partitions, which any thread plans); 0: a quarter of the threads, at least \
                   one",
        },
        OptionSpec {
            name: "batch",
            values: "1 to 1000000",
            default: "1000",
            help: "transactions per batch: the CC threads synchronise once per batch (§3.2.4)",
        },
        OptionSpec {
            name: "read-annotation",
            values: "on, off",
            default: "on",
            help: "read-set annotation (§3.2.3): the CC threads give each declared read the \
                   version it sees, so execution reads it without walking the chain",
        },
        OptionSpec {
            name: "split",
            values: "dedicated, adaptive",
            default: "dedicated",
            help: "dedicated: cc-threads threads plan and the rest execute (the paper); \
                   adaptive: every thread plans a waiting batch's partitions first and \
                   otherwise executes slots as it takes them, so the threads go to whichever \
                   layer has work (the dynamic allocation the paper proposes, §3.2.4)",
        },
    ];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "cc-threads" => self.cc_threads = number(name, value, 0u32, 1024)?,
            "batch" => self.batch = number(name, value, 1u32, 1_000_000)?,
            "read-annotation" => self.read_annotation = switch(name, value)?,
            "split" => {
                let choices = [("dedicated", Split::Dedicated), ("adaptive", Split::Adaptive)];
                self.split = choice(name, value, &choices)?;
            }
            _ => return Err(format!("--opt {name}: not an option of bohm")),
        }
        Ok(())
    }

    fn check_threads(&self, threads: usize) -> Result<(), String> {
        self.split(threads).map(drop)
    }
}

impl Bohm {
    /// Each table's versions, then (one past the last table) the units' versions.
    pub fn stores(&self) -> &[VersionStore<BohmExt>] {
        &self.stores
    }

    /// The units of the tables written by declared ranges ([`units`]).
    pub fn units(&self) -> &units::Units {
        &self.units
    }

    /// How `threads` threads divide into the layers (besides the sequencer); an error if a
    /// dedicated split leaves either side empty. One thread plays both parts (`--threads 1`
    /// with one CC thread). With `split=adaptive` every thread executes and plans, and the
    /// records are cut into `cc_threads` partitions.
    pub fn split(&self, threads: usize) -> Result<Threads, Error> {
        self.options.split(threads).map_err(Error::Config)
    }
}

/// BOHM's worker type: none can exist (BOHM runs no interactive transactions, see
/// [`Capabilities::interactive`]).
pub enum NoWorker {}

impl crate::engine::Worker for NoWorker {
    fn begin(&mut self) {
        match *self {}
    }
    fn read_cols<T>(
        &mut self,
        _: TableId,
        _: u64,
        _: crate::storage::projection::Columns,
        _: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, crate::error::Abort> {
        match *self {}
    }
    fn read_for_update<T>(
        &mut self,
        _: TableId,
        _: u64,
        _: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, crate::error::Abort> {
        match *self {}
    }
    fn write(&mut self, _: TableId, _: u64, _: &[u8]) -> Result<bool, crate::error::Abort> {
        match *self {}
    }
    fn update_cols<T>(
        &mut self,
        _: TableId,
        _: u64,
        _: crate::storage::projection::Columns,
        _: crate::storage::projection::Columns,
        _: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, crate::error::Abort> {
        match *self {}
    }
    fn insert(&mut self, _: TableId, _: u64, _: &[u8]) -> Result<bool, crate::error::Abort> {
        match *self {}
    }
    fn delete(&mut self, _: TableId, _: u64) -> Result<bool, crate::error::Abort> {
        match *self {}
    }
    fn scan(
        &mut self,
        _: TableId,
        _: u64,
        _: u64,
        _: usize,
        _: impl FnMut(u64, &[u8]) -> std::ops::ControlFlow<()>,
    ) -> Result<usize, crate::error::Abort> {
        match *self {}
    }
    fn commit(&mut self) -> Result<(), crate::error::Abort> {
        match *self {}
    }
    fn abort(&mut self) {
        match *self {}
    }
}

impl Protocol for Bohm {
    const NAME: &'static str = "bohm";
    const DESCRIPTION: &'static str =
        "deterministic multi-version: a sequencer orders batches, partitioned CC threads place \
         versions, execution threads produce them (VLDB'15)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: true,
        snapshot_reads: false,
        reads: Reads::Invisible,
        interactive: false,
        templates: false,
    };
    type Record = BohmRecord;
    type Worker<'db> = NoWorker;
    type Options = BohmOptions;

    fn new(options: BohmOptions, setup: &Setup<'_>) -> Result<Self, Error> {
        let stores = setup
            .tables
            .iter()
            .map(|t| VersionStore::new(t.row_size))
            .chain([VersionStore::new(0)])
            .collect();
        let units = units::Units::new(setup.tables.len());
        Ok(Bohm { options, stores, units, next_batch: Default::default() })
    }

    fn options(&self) -> &BohmOptions {
        &self.options
    }

    fn load(&self, table: TableId, row: RowRef<'_, BohmRecord>, payload: &[u8]) {
        let store = &self.stores[table.index()];
        let v = store.alloc_shared();
        // SAFETY: a fresh version nobody else holds.
        store.row(unsafe { v.as_ref() }).write_from(payload);
        row.header.clear();
        row.header.load(v);
    }

    fn is_present(&self, rec: &BohmRecord) -> bool {
        rec.latest_produced().is_some()
    }

    /// The latest produced value (reconnaissance, checks after a run).
    fn read_latest(&self, table: TableId, row: RowRef<'_, BohmRecord>, buf: &mut [u8]) -> bool {
        match row.header.latest_produced() {
            Some(v) => {
                self.stores[table.index()].row(v).read_into(buf);
                true
            }
            None => false,
        }
    }

    /// The latest produced value and its timestamp (its position in the log). A version may be
    /// produced while an older one of the same record is not yet; the stamp says which
    /// transaction's value was read.
    fn read_committed(
        &self,
        table: TableId,
        _key: u64,
        row: RowRef<'_, BohmRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        let v = row.header.latest_produced()?;
        self.stores[table.index()].row(v).read_into(buf);
        Some(v.stamp.load(Ordering::Relaxed))
    }

    /// A row inserted into a table needs a version of its own (its placeholder, or in unit
    /// mode the version its writer pushes); the versions of updates are recycled by the GC.
    fn prefault(&self, table: TableId, rows: u64, budget: usize) -> usize {
        self.stores.get(table.index()).map_or(0, |s| s.prefault(rows, budget))
    }

    fn worker(_: &Database<Self>) -> Result<NoWorker, Error> {
        Err(Error::Config("bohm runs no interactive transactions".into()))
    }

    fn drive<W: Workload>(
        db: &Database<Self>,
        workload: &W,
        cfg: &RunConfig,
    ) -> Result<Vec<WorkerStats>, Error> {
        run::drive(db, workload, cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Database;
    use crate::storage::TableSpec;

    fn split(opts: &[(&str, &str)], threads: usize) -> Result<(usize, usize, bool), String> {
        let pairs: Vec<(String, String)> =
            opts.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let db = Database::<Bohm>::builder(&[TableSpec::new("t", 8, 16)])
            .protocol_options(BohmOptions::from_pairs(&pairs).unwrap())
            .build()
            .unwrap();
        db.protocol()
            .split(threads)
            .map(|t| (t.partitions, t.exec, t.shared))
            .map_err(|e| e.to_string())
    }

    /// The threads divide into the layers as the options say, or the options are refused
    /// with the numbers that do not fit.
    #[test]
    fn threads_split_into_the_two_layers() {
        assert_eq!(split(&[], 8), Ok((2, 6, false)), "a quarter plan by default");
        assert_eq!(split(&[], 2), Ok((1, 1, false)));
        assert_eq!(split(&[], 1), Ok((1, 1, true)), "one thread plays both parts");
        assert_eq!(split(&[("cc-threads", "3")], 4), Ok((3, 1, false)));
        assert_eq!(
            split(&[("cc-threads", "2")], 2),
            Err("bohm runs at least one concurrency-control and one execution thread: --threads \
                 2 with --opt cc-threads=2 leaves 0 execution threads (cc-threads must be below \
                 --threads, or both 1)"
                .into())
        );
        let adaptive = ("split", "adaptive");
        assert_eq!(split(&[adaptive], 2), Ok((1, 2, true)), "every thread executes and plans");
        assert_eq!(split(&[adaptive, ("cc-threads", "4")], 2), Ok((4, 2, true)), "partitions");
        assert_eq!(split(&[adaptive], 1), Ok((1, 1, true)));
        assert_eq!(split(&[adaptive], 8), Ok((2, 8, true)));
        assert_eq!(
            BohmOptions::from_pairs(&[("split".into(), "mixed".into())]).map(|_| ()),
            Err("--opt split=mixed: expected dedicated or adaptive".into())
        );
    }
}
