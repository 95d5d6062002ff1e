//! `Database<P>`: a protocol plus the storage it runs on. The entry point of the embedding API.

use super::procedure::Recon;
use super::protocol::Protocol;
use crate::error::Error;
use crate::storage::index::IndexKind;
use crate::storage::row_store::RecordHeader;
use crate::storage::{index, RowId, SlotCache, Storage, TableId, TableSpec};
use std::ops::ControlFlow;
use std::time::Duration;

/// Database-wide options.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DbOptions {
    /// Maximum number of workers that may exist at once (each needs an epoch slot).
    pub max_workers: usize,
    /// Interval between global epoch advances (Silo: 40 ms).
    #[serde(rename = "epoch_interval_s", serialize_with = "crate::util::serialize_secs")]
    pub epoch_interval: Duration,
    /// Record every transaction's reads and writes for the serializability checker (see
    /// [`crate::history`]); [`Database::take_history`] collects them. Off by default.
    pub record_history: bool,
    /// Fill the bytes a column-projected read or update does not copy with
    /// [`crate::storage::projection::POISON`], so that a procedure using a column it did not
    /// declare computes with garbage that tests notice, instead of silently with stale bytes;
    /// and check that `update_cols` changes no byte outside its `writes` columns (such a change
    /// would be lost: the transaction aborts with `TemplateViolation`). For tests; off by
    /// default.
    pub poison_unprojected: bool,
    /// Pause at random inside every commit, between its phases (after locking, after
    /// validating), spinning at most this many microseconds; 0 (the default) for none. A
    /// commit's critical windows are otherwise nanoseconds wide, so tests and `txlab check` turn
    /// this on to meet the schedules that race in them (see [`crate::storage::pause`]).
    pub commit_pause_us: u64,
    /// Called by every worker at every phase of its commits (see
    /// [`crate::storage::inject`]): tests stop a worker between two phases with a
    /// [`crate::storage::inject::Gate`]. `None` (the default): one branch per phase.
    #[serde(skip)]
    pub commit_hook: Option<crate::storage::inject::Hook>,
    /// Log every commit into a directory ([`crate::durability`]); `None` (the default): no
    /// durability.
    pub log: Option<crate::durability::log::LogOptions>,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            max_workers: 256,
            epoch_interval: Duration::from_millis(40),
            record_history: false,
            poison_unprojected: false,
            commit_pause_us: 0,
            commit_hook: None,
            log: None,
        }
    }
}

/// A database running protocol `P`.
///
/// ```
/// use txlab::prelude::*;
/// use txlab::protocols::silo::Silo;
///
/// let db = Database::<Silo>::new(&[TableSpec::new("accounts", 8, 100)]).unwrap();
/// let t = db.table_id("accounts").unwrap();
/// let mut w = db.worker().unwrap();
/// w.begin();
/// assert!(w.insert(t, 1, &100u64.to_le_bytes()).unwrap());
/// w.commit().unwrap();
/// w.begin();
/// let v = w.read(t, 1, |row| u64::from_le_bytes(row.try_into().unwrap())).unwrap();
/// assert_eq!(v, Some(100));
/// w.commit().unwrap();
/// ```
pub struct Database<P: Protocol> {
    protocol: P,
    storage: Storage<P::Record>,
    options: DbOptions,
    /// The logger, when the database logs (dropped, and so flushed, after the storage's users).
    log: Option<crate::durability::log::LogHandle>,
    /// How many transaction types the workload declared ([`Builder::txn_types`]).
    txn_types: usize,
    /// The adaptive backoff every [`crate::engine::Retry`] of the database shares (made by
    /// the first [`Database::retry`] of a protocol that regulates).
    regulator: std::sync::OnceLock<std::sync::Arc<super::retry::Regulator>>,
    /// Seeds [`Database::retry`] hands out.
    retry_seeds: std::sync::atomic::AtomicU64,
}

impl<P: Protocol> Drop for Database<P> {
    fn drop(&mut self) {
        // Before the tables: the protocol walks them to free what they point to.
        self.protocol.teardown(&self.storage);
    }
}

/// Creates a database: its tables, and optionally database options, the protocol's options and
/// the workload's transaction types ([`Database::builder`]).
pub struct Builder<'a, P: Protocol> {
    tables: &'a [TableSpec],
    options: DbOptions,
    protocol: P::Options,
    txn_types: &'a [crate::engine::TxnType],
}

impl<'a, P: Protocol> Builder<'a, P> {
    /// Database options (workers, epochs, history recording, ...).
    pub fn options(mut self, options: DbOptions) -> Self {
        self.options = options;
        self
    }

    /// The protocol's options.
    pub fn protocol_options(mut self, options: P::Options) -> Self {
        self.protocol = options;
        self
    }

    /// The transaction types the database will run (their templates, for protocols that
    /// analyse them).
    pub fn txn_types(mut self, types: &'a [crate::engine::TxnType]) -> Self {
        self.txn_types = types;
        self
    }

    /// Creates the database and sets the protocol up for it.
    pub fn build(self) -> Result<Database<P>, Error> {
        let options = self.options;
        if options.max_workers == 0 {
            return Err(Error::Config("max_workers must be at least 1".into()));
        }
        let setup = crate::engine::Setup {
            tables: self.tables,
            max_workers: options.max_workers,
            txn_types: self.txn_types,
        };
        let protocol = P::new(self.protocol, &setup)?;
        let mut storage = Storage::new(self.tables, options.max_workers, options.epoch_interval)?;
        if P::BUCKET_CLOCKS {
            storage.enable_bucket_clocks();
        }
        match protocol.snapshot_epochs() {
            0 => {}
            k => storage.enable_snapshots(k)?,
        }
        if options.record_history {
            storage.record_history();
        }
        storage.pause_commits(options.commit_pause_us);
        storage.set_commit_hook(options.commit_hook.clone());
        if options.poison_unprojected {
            storage.poison_unprojected();
        }
        let log = match &options.log {
            None => None,
            Some(_) if options.record_history => {
                return Err(Error::Config(
                    "a database cannot both log and record histories: the in-place protocols keep one stamp per record for either".into(),
                ))
            }
            Some(lo) => {
                let fingerprint = crate::durability::format::fingerprint(self.tables);
                let handle = crate::durability::log::LogManager::start(
                    lo.clone(),
                    options.max_workers,
                    fingerprint,
                )?;
                Some(handle)
            }
        };
        let txn_types = self.txn_types.len();
        Ok(Database {
            protocol,
            storage,
            options,
            log,
            txn_types,
            regulator: std::sync::OnceLock::new(),
            retry_seeds: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Opens the database that logs into the directory of the options' log
    /// ([`DbOptions::log`]): recovers what the directory holds (see
    /// [`crate::durability::recovery`]), then continues logging there, in a new log
    /// generation that starts with a checkpoint of the recovered state (see
    /// [`crate::durability::generation`]); returns the database and what recovery found. A
    /// directory without a log gives a new, empty database that logs into it (and no report).
    ///
    /// The tables must be those the log was written for (a different schema is refused with
    /// the file it was found in). Load nothing into an opened database: write through
    /// transactions, which are logged.
    ///
    /// ```
    /// use txlab::durability::log::LogOptions;
    /// use txlab::prelude::*;
    /// use txlab::protocols::silo::Silo;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let tables = [TableSpec::new("accounts", 8, 100)];
    /// let options = DbOptions { log: Some(LogOptions::new(dir.path())), ..Default::default() };
    /// let (db, _) = Database::<Silo>::builder(&tables).options(options.clone()).open().unwrap();
    /// let t = db.table_id("accounts").unwrap();
    /// let mut w = db.worker().unwrap();
    /// w.begin();
    /// assert!(w.insert(t, 1, &100u64.to_le_bytes()).unwrap());
    /// w.commit().unwrap();
    /// drop(w);
    /// drop(db); // closing the log makes the commit durable
    ///
    /// let (db, report) = Database::<Silo>::builder(&tables).options(options).open().unwrap();
    /// assert_eq!(report.unwrap().rows, 1);
    /// let mut w = db.worker().unwrap();
    /// w.begin();
    /// let v = w.read(t, 1, |row| u64::from_le_bytes(row.try_into().unwrap())).unwrap();
    /// assert_eq!(v, Some(100));
    /// w.commit().unwrap();
    /// ```
    pub fn open(
        mut self,
    ) -> Result<(Database<P>, Option<crate::durability::recovery::RecoveryReport>), Error> {
        use crate::durability::generation;
        let Some(log) = self.options.log.as_mut() else {
            return Err(Error::Config(
                "Database::open needs log options (DbOptions::log): the directory to recover from and log into"
                    .into(),
            ));
        };
        let dir = log.dir.clone();
        if !generation::holds_log(&dir) {
            return Ok((self.build()?, None));
        }
        let current = generation::number(&dir)?;
        generation::remove_others(&dir, current)?;
        let next = current
            .checked_add(1)
            .ok_or_else(|| Error::Durability(format!("{}: too many generations", dir.display())))?;
        log.dir = dir.join(generation::subdir(next));
        let db = self.build()?;
        let report = crate::durability::recovery::recover(&db, &dir)?;
        db.checkpoint()?;
        generation::publish(&dir, next)?;
        generation::remove(&dir, current)?;
        Ok((db, Some(report)))
    }
}

impl<P: Protocol> Database<P> {
    /// Creates a database with `tables`, with default options.
    pub fn new(tables: &[TableSpec]) -> Result<Self, Error> {
        Self::builder(tables).build()
    }

    /// Creates a database with `tables` and `options`, and the protocol's default options.
    pub fn with_options(tables: &[TableSpec], options: DbOptions) -> Result<Self, Error> {
        Self::builder(tables).options(options).build()
    }

    /// A builder for a database with `tables`.
    pub fn builder(tables: &[TableSpec]) -> Builder<'_, P> {
        Builder {
            tables,
            options: DbOptions::default(),
            protocol: P::Options::default(),
            txn_types: &[],
        }
    }

    /// The protocol.
    #[inline]
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// The storage.
    #[inline]
    pub fn storage(&self) -> &Storage<P::Record> {
        &self.storage
    }

    /// The options the database was created with.
    pub fn options(&self) -> &DbOptions {
        &self.options
    }

    /// The redo log, when the database logs.
    pub fn log(&self) -> Option<&std::sync::Arc<crate::durability::log::LogManager>> {
        self.log.as_ref().map(|h| h.manager())
    }

    /// A new worker's storage-side state: its epoch slot, slot caches, log stream (when the
    /// database logs) and history recorder (when it records). Every protocol's
    /// [`Protocol::worker`] starts from it.
    pub fn worker_ctx(&self) -> Result<crate::engine::context::WorkerCtx<'_, P::Record>, Error> {
        crate::engine::context::WorkerCtx::new(&self.storage, self.log())
    }

    /// Writes a checkpoint of the database, with one checkpointer thread per core, while
    /// transactions may run; then deletes the log segments and older checkpoints it makes
    /// unnecessary (see [`crate::durability::checkpoint`]). The database must log.
    pub fn checkpoint(&self) -> Result<crate::durability::checkpoint::CheckpointReport, Error> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        crate::durability::checkpoint::checkpoint(self, threads)
    }

    /// Makes every transaction committed so far durable and stops logging (drop the workers
    /// first). Returns the log's error, if it met one. Dropping the database does the same and
    /// ignores the error.
    pub fn close_log(&mut self) -> Result<(), Error> {
        match &mut self.log {
            Some(h) => h.close(),
            None => Ok(()),
        }
    }

    /// The id of the table named `name`.
    pub fn table_id(&self, name: &str) -> Option<TableId> {
        self.storage.table_by_name(name).map(|t| t.id)
    }

    /// Tells the protocol which of the workload's transaction types (indices into the types
    /// given to [`Builder::txn_types`]) the workload runs from now on: all of them until the
    /// first call. A protocol that analyses the templates (IC3) re-analyses the mix and moves
    /// its running workers to the new analysis without stopping them (IC3 §4.5); a type
    /// outside the mix still runs, without the analysis' help. Call it from a thread that is
    /// not inside a transaction; it returns once the new mix is in force.
    pub fn set_mix(&self, types: &[usize]) -> Result<(), Error> {
        if let Some(&bad) = types.iter().find(|&&t| t >= self.txn_types) {
            return Err(Error::Config(format!(
                "set_mix: no transaction type {bad} (the workload has {})",
                self.txn_types
            )));
        }
        self.protocol.set_mix(types)
    }

    /// The adaptive backoff shared by this database's [`crate::engine::Retry`]s.
    pub(crate) fn regulator(&self) -> &std::sync::Arc<super::retry::Regulator> {
        self.regulator.get_or_init(|| std::sync::Arc::new(super::retry::Regulator::new()))
    }

    /// A seed for the next [`Database::retry`].
    pub(crate) fn next_retry_seed(&self) -> u64 {
        // Relaxed: only distinctness matters.
        let n = self.retry_seeds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        0x7E7 ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// A worker for the calling thread. Workers are not `Send`; create one per thread.
    pub fn worker(&self) -> Result<P::Worker<'_>, Error> {
        if !P::CAPS.interactive {
            return Err(Error::Config(format!(
                "protocol '{}' does not run interactive transactions: it orders whole \
                 transactions before running them: run a batch of procedures through it \
                 (`Database::run_batch`) or a workload (`txlab run`, `Protocol::drive`)",
                P::NAME
            )));
        }
        P::worker(self)
    }

    /// The histories of every worker dropped since the last call (empty unless the database
    /// was created with `record_history`). Drop the workers first: each delivers its history
    /// when it is dropped.
    pub fn take_history(&self) -> crate::history::History {
        self.storage.history().map(|s| s.take()).unwrap_or_default()
    }

    /// A bulk loader for the calling thread (non-transactional; use before running).
    pub fn loader(&self) -> Loader<'_, P> {
        Loader {
            db: self,
            caches: (0..self.storage.tables().len()).map(|_| SlotCache::default()).collect(),
            guard: index::pin(),
        }
    }

    /// Longest key range [`Self::count_present`] probes on a hash table.
    pub const MAX_HASH_COUNT_RANGE: u64 = 1 << 20;

    /// Counts the present rows with keys in `[lo, hi]`, outside any transaction (for checks
    /// after a run). A hash table is probed key by key, so there the range may span at most
    /// [`Self::MAX_HASH_COUNT_RANGE`] keys. `None` for an unknown table or a longer hash range.
    pub fn count_present(&self, table: TableId, lo: u64, hi: u64) -> Option<u64> {
        let mut n = 0;
        self.visit_present(table, lo, hi, usize::MAX, |_, _| {
            n += 1;
            ControlFlow::Continue(())
        })?;
        Some(n)
    }

    /// Visits the present rows with keys in `[lo, hi]` in key order (at most `limit`, stopping
    /// when `f` breaks), outside any transaction: exact when no transaction runs (checks after a
    /// run), best effort otherwise (reconnaissance). A hash table is probed key by key, so there
    /// the range may span at most [`Self::MAX_HASH_COUNT_RANGE`] keys. Returns the number
    /// visited; `None` for an unknown table or a longer hash range.
    pub fn visit_present(
        &self,
        table: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        mut f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Option<usize> {
        let t = self.storage.try_table(table)?;
        let g = index::pin();
        let mut n = 0;
        let mut visit = |k: u64, rid: RowId, n: &mut usize| -> ControlFlow<()> {
            let row = t.rows.get(rid);
            let Some(flow) = with_row_copy(&self.protocol, table, row, |bytes| f(k, bytes)) else {
                return ControlFlow::Continue(());
            };
            *n += 1;
            if *n >= limit {
                return ControlFlow::Break(());
            }
            flow
        };
        if hi < lo || limit == 0 {
            return Some(0);
        }
        if t.index.kind() == IndexKind::Hash {
            if hi - lo >= Self::MAX_HASH_COUNT_RANGE {
                return None;
            }
            for k in lo..=hi {
                if let Some(rid) = t.index.get(k, &g) {
                    if visit(k, rid, &mut n).is_break() {
                        break;
                    }
                }
            }
            return Some(n);
        }
        let mut buf = index::ScanBuf::default();
        let mut from = lo;
        loop {
            if !t.index.scan(from, hi, 1024, &mut buf, &g) {
                return None;
            }
            let mut last = None;
            for (k, rid) in buf.entries() {
                if visit(k, rid, &mut n).is_break() {
                    return Some(n);
                }
                last = Some(k);
            }
            match last {
                Some(k) if buf.len() == 1024 && k < hi => from = k + 1,
                _ => return Some(n),
            }
        }
    }
}

/// Runs `f` on a private copy of `row`'s present row (on the stack for rows up to 1 KiB), read
/// through the protocol; `None` if the row is not present.
fn with_row_copy<P: Protocol, T>(
    protocol: &P,
    table: TableId,
    row: crate::storage::RowRef<'_, P::Record>,
    f: impl FnOnce(&[u8]) -> T,
) -> Option<T> {
    let mut small = [0u8; 1024];
    let mut big;
    let buf: &mut [u8] = if row.len() <= small.len() {
        &mut small[..row.len()]
    } else {
        big = vec![0u8; row.len()];
        &mut big
    };
    protocol.read_latest(table, row, buf).then(|| f(buf))
}

impl<P: Protocol> Recon for Database<P> {
    fn peek<T>(&self, table: TableId, key: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let t = self.storage.try_table(table)?;
        let g = index::pin();
        let rid = t.index.get(key, &g)?;
        with_row_copy(&self.protocol, table, t.rows.get(rid), f)
    }

    fn scan(
        &self,
        table: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> usize {
        self.visit_present(table, lo, hi, limit, f).unwrap_or(0)
    }
}

/// Inserts committed rows directly, outside any transaction. One per loading thread.
pub struct Loader<'db, P: Protocol> {
    db: &'db Database<P>,
    caches: Vec<SlotCache>,
    guard: index::IndexGuard,
}

impl<P: Protocol> Loader<'_, P> {
    /// Inserts `key -> payload` into `table` as a committed row.
    pub fn insert(&mut self, table: TableId, key: u64, payload: &[u8]) -> Result<RowId, Error> {
        let t = self
            .db
            .storage
            .try_table(table)
            .ok_or_else(|| Error::Config(format!("no table with id {}", table.0)))?;
        if payload.len() != t.spec.row_size {
            return Err(Error::Config(format!(
                "table '{}': payload of {} bytes, rows are {} bytes",
                t.spec.name,
                payload.len(),
                t.spec.row_size
            )));
        }
        let rid = t.rows.alloc(&mut self.caches[table.index()]).ok_or_else(|| {
            Error::TableFull { table: t.spec.name.clone(), capacity: t.spec.capacity }
        })?;
        self.db.protocol.load(table, t.rows.get(rid), payload);
        if t.index.insert_if_absent(key, rid, &self.guard).is_err() {
            self.caches[table.index()].release(rid);
            return Err(Error::DuplicateKey { table: t.spec.name.clone(), key });
        }
        self.db.protocol.indexed(table, key, rid);
        Ok(rid)
    }
}

impl<P: Protocol> crate::durability::Install for Loader<'_, P> {
    fn insert(&mut self, table: TableId, key: u64, image: &[u8]) -> Result<(), Error> {
        Loader::insert(self, table, key, image).map(|_| ())
    }
}

impl<P: Protocol> crate::durability::Durable for Database<P> {
    type Record = P::Record;
    type Installer<'a> = Loader<'a, P>;

    fn storage(&self) -> &Storage<P::Record> {
        &self.storage
    }

    fn log(&self) -> Option<&std::sync::Arc<crate::durability::log::LogManager>> {
        Database::log(self)
    }

    fn read_committed(
        &self,
        t: TableId,
        key: u64,
        row: crate::storage::RowRef<'_, P::Record>,
        image: &mut [u8],
    ) -> Option<u64> {
        self.protocol.read_committed(t, key, row, image)
    }

    fn installer(&self) -> Loader<'_, P> {
        self.loader()
    }
}

/// Compile-time check that header types used by protocols satisfy the storage contract.
#[allow(dead_code)]
fn assert_record<R: RecordHeader>() {}
