//! Storage shared by every protocol: tables of stable record slots, primary indexes, phantom
//! buckets, epochs and memory reclamation.
//!
//! Nothing here knows a concurrency-control protocol: the record header type `R` is the
//! protocol's, and protocol-specific steps (such as deciding whether a deleted record may be
//! unlinked) are passed in as closures.

pub mod dense_index;
pub mod epoch;
pub mod hash_index;
pub mod index;
pub mod inject;
pub(crate) mod memory;
pub mod pause;
pub mod phantom;
pub mod projection;
pub mod reclaim;
pub mod row_store;
pub mod snapshot;
pub mod version;

use crate::error::Error;
use epoch::{EpochAdvancer, Epochs};
use index::{Index, IndexKind};
use phantom::RangeBuckets;
use row_store::{RecordHeader, RowStore};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

pub use row_store::{RowId, RowRef, SlotCache};

/// Identifies a table: its position in the schema the database was created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TableId(pub u32);

impl TableId {
    /// The position as an index.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A named byte range of a row, for column-granularity templates (IC3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Column {
    /// Column name.
    pub name: String,
    /// Byte offset in the row.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

/// The definition of a table: fixed at creation, chosen at run time.
#[derive(Clone, Debug, Serialize)]
pub struct TableSpec {
    /// Name (unique within the database).
    pub name: String,
    /// Payload bytes per row (1 to [`MAX_ROW_SIZE`]).
    pub row_size: usize,
    /// Primary index kind.
    pub index: IndexKind,
    /// Maximum number of rows the table may ever hold (including deleted rows not yet reclaimed).
    pub capacity: u64,
    /// Rows expected after loading: sizes the hash index and the memory estimate.
    pub expected_rows: u64,
    /// Log2 of keys per phantom bucket (see [`phantom`]).
    pub phantom_shift: u32,
    /// Number of phantom bucket words.
    pub phantom_slots: usize,
    /// Optional column layout (bit `i` of a column mask is `columns[i]`).
    pub columns: Vec<Column>,
}

/// Largest row payload accepted, in bytes.
pub const MAX_ROW_SIZE: usize = 1 << 20;

impl TableSpec {
    /// A table named `name` with `row_size`-byte rows, an ordered index and room for
    /// `expected_rows` (capacity: twice that plus 1 M, for inserts).
    pub fn new(name: impl Into<String>, row_size: usize, expected_rows: u64) -> Self {
        TableSpec {
            name: name.into(),
            row_size,
            index: IndexKind::Ordered,
            capacity: expected_rows.saturating_mul(2).saturating_add(1 << 20),
            expected_rows,
            phantom_shift: phantom::DEFAULT_SHIFT,
            phantom_slots: phantom::DEFAULT_SLOTS,
            columns: Vec::new(),
        }
    }

    /// Sets the index kind.
    #[must_use]
    pub fn with_index(mut self, kind: IndexKind) -> Self {
        self.index = kind;
        self
    }

    /// Sets the row capacity.
    #[must_use]
    pub fn with_capacity(mut self, capacity: u64) -> Self {
        self.capacity = capacity;
        self
    }

    /// Sets the phantom-bucket granularity (log2 keys per bucket).
    #[must_use]
    pub fn with_phantom_shift(mut self, shift: u32) -> Self {
        self.phantom_shift = shift;
        self
    }

    /// Declares the column layout.
    #[must_use]
    pub fn with_columns(mut self, cols: &[(&str, usize, usize)]) -> Self {
        self.columns =
            cols.iter().map(|&(n, offset, len)| Column { name: n.into(), offset, len }).collect();
        self
    }

    fn validate(&self) -> Result<(), Error> {
        if self.row_size == 0 || self.row_size > MAX_ROW_SIZE {
            return Err(Error::Config(format!(
                "table '{}': row size {} is out of range (1 to {MAX_ROW_SIZE} bytes)",
                self.name, self.row_size
            )));
        }
        if self.capacity == 0 || self.capacity < self.expected_rows {
            return Err(Error::Config(format!(
                "table '{}': capacity {} must be at least 1 and at least the expected {} rows",
                self.name, self.capacity, self.expected_rows
            )));
        }
        if self.phantom_shift > 63 {
            return Err(Error::Config(format!(
                "table '{}': phantom shift {} is out of range (0 to 63)",
                self.name, self.phantom_shift
            )));
        }
        if self.columns.len() > 64 {
            return Err(Error::Config(format!(
                "table '{}': at most 64 columns can be declared",
                self.name
            )));
        }
        for c in &self.columns {
            if c.offset + c.len > self.row_size {
                return Err(Error::Config(format!(
                    "table '{}': column '{}' ends at byte {}, past the {}-byte row",
                    self.name,
                    c.name,
                    c.offset + c.len,
                    self.row_size
                )));
            }
        }
        Ok(())
    }

    /// Estimated memory in bytes for `expected_rows` rows with header type `R`.
    pub fn estimated_bytes<R>(&self) -> u64 {
        let header = std::mem::size_of::<R>().next_multiple_of(8);
        let slot = (header + self.row_size.next_multiple_of(8)).next_multiple_of(64) as u64;
        self.expected_rows.saturating_mul(slot + self.index.bytes_per_key())
    }
}

/// One table: its spec, record slots, index and phantom buckets.
pub struct Table<R: RecordHeader> {
    /// Its id.
    pub id: TableId,
    /// Its definition.
    pub spec: TableSpec,
    /// Record slots.
    pub rows: RowStore<R>,
    /// Primary index.
    pub index: Index,
    /// Phantom buckets.
    pub buckets: RangeBuckets,
    /// Payload words of each declared column (column-projected copies).
    pub projection: projection::Projection,
    /// The rows' old values for snapshot readers, when the protocol keeps snapshots (see
    /// [`snapshot`]).
    pub chains: Option<snapshot::Chains>,
}

/// Memory this process may still use, if known: the least of the machine's `MemAvailable`, the
/// room left under its cgroup's `memory.max` (cgroup v2), and the address space left under
/// `RLIMIT_AS` (`ulimit -v`).
pub fn available_memory() -> Option<u64> {
    [meminfo_available(), cgroup_room(), address_space_room()].into_iter().flatten().min()
}

fn meminfo_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `memory.max - memory.current` of this process's cgroup (v2), when it has a limit.
fn cgroup_room() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v2: the line "0::/path".
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max: u64 = read("memory.max")?.trim().parse().ok()?; // "max" (no limit) fails to parse
    let current: u64 = read("memory.current").and_then(|c| c.trim().parse().ok()).unwrap_or(0);
    Some(max.saturating_sub(current))
}

/// `RLIMIT_AS` minus the address space in use (`VmSize`), when there is a limit.
fn address_space_room() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct we pass and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let used_kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse().ok())
        .unwrap_or(0);
    Some(lim.rlim_cur.saturating_sub(used_kib * 1024))
}

/// Refuses a schema whose estimated size exceeds 90 % of the available memory.
pub fn check_memory<R>(specs: &[TableSpec]) -> Result<u64, Error> {
    let need: u64 = specs.iter().map(|s| s.estimated_bytes::<R>()).sum();
    if let Some(avail) = available_memory() {
        let budget = avail / 10 * 9;
        if need > budget {
            return Err(Error::OutOfMemory(format!(
                "the data needs about {:.2} GiB but only {:.2} GiB of memory is available \
                 (90 % of what RAM, ulimit -v and the cgroup's memory.max leave); use fewer \
                 records or smaller rows",
                need as f64 / (1u64 << 30) as f64,
                budget as f64 / (1u64 << 30) as f64
            )));
        }
    }
    Ok(need)
}

/// All tables of a database plus its epochs.
pub struct Storage<R: RecordHeader> {
    tables: Vec<Table<R>>,
    epochs: Arc<Epochs>,
    /// Where workers deliver their recorded histories, when recording is on.
    history: Option<crate::history::Sink>,
    /// Longest spin of the pauses protocols inject into their commits (0: none; see
    /// [`pause`]).
    commit_pause_us: u64,
    /// The hook workers call at every phase of their commits ([`inject`]).
    commit_hook: Option<inject::Hook>,
    /// When the storage was created: the origin of clock-based timestamps (2PL wait-die's), so
    /// that they start small and take long to reach the end of their field.
    origin: quanta::Instant,
    /// Reclamation queues and free slots of workers that were dropped, for a live worker to adopt.
    orphans: std::sync::Mutex<Orphans>,
    /// Whether `orphans` holds anything (checked by workers every few dozen transactions).
    has_orphans: std::sync::atomic::AtomicBool,
    _advancer: EpochAdvancer,
}

/// Where every table's allocations stood ([`Prefaulter::cursors`]).
#[derive(Clone, Debug)]
pub struct Cursors {
    /// The row slots' allocation cursor.
    rows: Vec<u64>,
    /// The copies its snapshot chains' store has carved (0 without snapshots).
    kept: Vec<u64>,
}

/// Keeps memory faulted in ahead of the tables that grow, so that inserting workers do not take
/// page faults (see [`RowStore::prefault`], and [`index::Index::prefault`] for the dense
/// index's leaves), nor writers that keep old values for snapshot readers (the tables'
/// [`snapshot::Chains`], whose copies grow with updates, not inserts: their store's
/// [`version::VersionStore::prefault`]). Something other than the workers calls [`Prefaulter::step`] every few
/// milliseconds: the driver's leader thread, which otherwise sleeps. Each step looks at how far
/// every table's allocation cursor moved since the last one and makes sure three times that
/// much (at least one segment, at most [`Prefaulter::MAX_AHEAD`] bytes) lies faulted in beyond
/// it: the next period may insert faster, and a worker that still outruns the leader faults its
/// pages itself, as it would without a prefaulter. A step faults in at most
/// [`Prefaulter::STEP_BUDGET`] bytes, so that the leader stays on time when faulting is slower
/// than inserting (an oversubscribed machine, valgrind): without the bound, a slow step lets
/// the tables grow more, the next step has more to fault, and the leader never gets back to
/// ending the run.
#[derive(Debug)]
pub struct Prefaulter {
    /// Each table's cursors at the last step.
    last: Cursors,
    /// The table the next step starts with (steps rotate, so a budget shared by several growing
    /// tables serves each in turn).
    next: usize,
    /// Bytes faulted in so far.
    faulted: usize,
}

impl Prefaulter {
    /// Most bytes kept faulted in ahead of one table's cursor.
    pub const MAX_AHEAD: usize = 64 << 20;
    /// Most bytes one step faults in.
    pub const STEP_BUDGET: usize = 16 << 20;

    /// A prefaulter for `storage`'s tables, starting from their current cursors.
    pub fn new<R: RecordHeader>(storage: &Storage<R>) -> Self {
        Prefaulter { last: Self::cursors(storage), next: 0, faulted: 0 }
    }

    /// One step (see the type's docs). `beyond(table, rows, budget)` faults in what the
    /// protocol keeps outside the slots for `rows` more rows of `table`
    /// (`Protocol::prefault`). Returns the bytes it faulted in.
    pub fn step<R: RecordHeader>(
        &mut self,
        storage: &Storage<R>,
        mut beyond: impl FnMut(TableId, u64, usize) -> usize,
    ) -> usize {
        let n = storage.tables.len();
        let mut done = 0;
        for i in (0..n).map(|i| (self.next + i) % n) {
            let t = &storage.tables[i];
            if let Some(c) = &t.chains {
                let now = c.store.carved();
                let grew = now.saturating_sub(self.last.kept[i]);
                self.last.kept[i] = now;
                if grew > 0 && done < Self::STEP_BUDGET {
                    done += c.store.prefault(grew.saturating_mul(3), Self::STEP_BUDGET - done);
                }
            }
            let now = t.rows.allocated();
            let grew = now.saturating_sub(self.last.rows[i]);
            self.last.rows[i] = now;
            if grew == 0 || done >= Self::STEP_BUDGET {
                continue;
            }
            let most = (Self::MAX_AHEAD / t.rows.slot_size()) as u64;
            let ahead = grew.saturating_mul(3).max(t.rows.slots_per_segment()).min(most);
            done += t.rows.prefault(now, ahead, Self::STEP_BUDGET - done);
            if done < Self::STEP_BUDGET {
                done += beyond(t.id, ahead, Self::STEP_BUDGET - done);
            }
            // New rows bring new keys: the index's next memory, where it knows it.
            if done < Self::STEP_BUDGET {
                done += t.index.prefault();
            }
        }
        self.next = (self.next + 1) % n.max(1);
        self.faulted += done;
        done
    }

    /// Faults in, for every table that grew since `start` (cursors taken with
    /// [`Prefaulter::cursors`]), `scale` times that growth beyond its cursor, whatever it costs;
    /// returns the bytes faulted in. The driver calls it between warm-up and measurement, with
    /// the workers paused, so that the measured window takes no page faults and shares no core
    /// with a prefaulter: the warm-up's growth scaled to the window's length (and a margin)
    /// estimates the window's.
    pub fn reserve<R: RecordHeader>(
        &mut self,
        storage: &Storage<R>,
        start: &Cursors,
        scale: f64,
        mut beyond: impl FnMut(TableId, u64, usize) -> usize,
    ) -> usize {
        let mut done = 0;
        for (i, t) in storage.tables.iter().enumerate() {
            if let Some(c) = &t.chains {
                let grew = c.store.carved().saturating_sub(start.kept[i]);
                if grew > 0 {
                    done += c.store.prefault((grew as f64 * scale).ceil() as u64, usize::MAX);
                }
            }
            let from = start.rows[i];
            let now = t.rows.allocated();
            let grew = now.saturating_sub(from);
            if grew == 0 {
                continue;
            }
            let ahead = (grew as f64 * scale).ceil() as u64;
            done += t.rows.prefault(now, ahead, usize::MAX);
            done += beyond(t.id, ahead, usize::MAX);
            done += t.index.prefault();
        }
        self.faulted += done;
        done
    }

    /// Every table's cursors now (the `start` of a later [`Prefaulter::reserve`]).
    pub fn cursors<R: RecordHeader>(storage: &Storage<R>) -> Cursors {
        Cursors {
            rows: storage.tables.iter().map(|t| t.rows.allocated()).collect(),
            kept: storage
                .tables
                .iter()
                .map(|t| t.chains.as_ref().map_or(0, |c| c.store.carved()))
                .collect(),
        }
    }

    /// Bytes faulted in so far.
    pub fn faulted_bytes(&self) -> usize {
        self.faulted
    }
}

/// What dropped workers left behind. See [`Storage::leave`].
#[derive(Default)]
struct Orphans {
    reclaimer: reclaim::Reclaimer,
    caches: Vec<SlotCache>,
}

impl<R: RecordHeader> Storage<R> {
    /// Creates the tables of `specs` for at most `max_workers` workers, advancing epochs every
    /// `epoch_interval`.
    pub fn new(
        specs: &[TableSpec],
        max_workers: usize,
        epoch_interval: Duration,
    ) -> Result<Self, Error> {
        if specs.len() > u32::MAX as usize {
            return Err(Error::Config("too many tables".into()));
        }
        for (i, s) in specs.iter().enumerate() {
            s.validate()?;
            if specs[..i].iter().any(|o| o.name == s.name) {
                return Err(Error::Config(format!("table name '{}' is used twice", s.name)));
            }
        }
        check_memory::<R>(specs)?;
        let tables = specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Ok(Table {
                    id: TableId(i as u32),
                    rows: RowStore::new(s.row_size, s.capacity)?,
                    index: Index::new(s.index, usize::try_from(s.expected_rows).unwrap_or(0)),
                    buckets: RangeBuckets::new(s.phantom_shift, s.phantom_slots),
                    projection: projection::Projection::new(s),
                    chains: None,
                    spec: s.clone(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let epochs = Arc::new(Epochs::new(max_workers));
        let advancer = EpochAdvancer::start(epochs.clone(), epoch_interval);
        Ok(Storage {
            tables,
            epochs,
            history: None,
            commit_pause_us: 0,
            commit_hook: None,
            origin: quanta::Instant::now(),
            orphans: Default::default(),
            has_orphans: Default::default(),
            _advancer: advancer,
        })
    }

    /// Takes what a departing worker still holds: deleted rows waiting for their grace periods
    /// and free slots. Without this, a dropped worker's queued rows would never be unlinked or
    /// freed.
    pub fn leave(&self, reclaimer: &mut reclaim::Reclaimer, caches: &mut [SlotCache]) {
        reclaimer.release_pools(self);
        let mut o = self.orphans.lock().unwrap_or_else(|p| p.into_inner());
        o.reclaimer.adopt(reclaimer);
        if o.caches.len() < caches.len() {
            o.caches.resize_with(caches.len(), SlotCache::default);
        }
        for (mine, theirs) in o.caches.iter_mut().zip(caches.iter_mut()) {
            theirs.hand_over(mine);
        }
        self.has_orphans.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Moves what departed workers left into a live worker's queues and caches, if anything.
    pub fn adopt_orphans(&self, reclaimer: &mut reclaim::Reclaimer, caches: &mut [SlotCache]) {
        if !self.has_orphans.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let mut o = self.orphans.lock().unwrap_or_else(|p| p.into_inner());
        reclaimer.adopt(&mut o.reclaimer);
        for (mine, theirs) in caches.iter_mut().zip(o.caches.iter_mut()) {
            theirs.hand_over(mine);
        }
        self.has_orphans.store(false, std::sync::atomic::Ordering::Release);
    }

    /// Fills what column-projected copies leave out with a marker (see
    /// [`projection::Projection::set_poison`]).
    pub fn poison_unprojected(&mut self) {
        for t in &mut self.tables {
            t.projection.set_poison(true);
        }
    }

    /// Keeps snapshots for read-only transactions, a boundary every `every` epochs (see
    /// [`snapshot`]); for protocols whose
    /// [`Protocol::snapshot_epochs`](crate::engine::Protocol::snapshot_epochs) is not 0.
    pub fn enable_snapshots(&mut self, every: u64) -> Result<(), Error> {
        for t in self.tables.iter_mut() {
            t.chains = Some(snapshot::Chains::new(t.spec.row_size, t.spec.capacity)?);
        }
        self.epochs.snapshots.set_every(every);
        Ok(())
    }

    /// Gives every table's phantom buckets logical clocks (see
    /// [`phantom::RangeBuckets::enable_clocks`]); for protocols whose
    /// [`Protocol::BUCKET_CLOCKS`](crate::engine::Protocol::BUCKET_CLOCKS) is set.
    pub fn enable_bucket_clocks(&mut self) {
        for t in self.tables.iter_mut() {
            t.buckets.enable_clocks();
        }
    }

    /// Turns history recording on for workers created from now on.
    pub fn record_history(&mut self) {
        self.history.get_or_insert_with(Default::default);
    }

    /// Makes workers created from now on pause at random, spinning at most `max_us`
    /// microseconds, at the phase boundaries of their protocol's commit (tests and
    /// `txlab check`; see [`pause`]). 0 turns it off.
    pub fn pause_commits(&mut self, max_us: u64) {
        self.commit_pause_us = max_us;
    }

    /// The longest commit pause workers take (0: they take none).
    pub fn commit_pause_us(&self) -> u64 {
        self.commit_pause_us
    }

    /// Makes workers created from now on call `hook` at every phase of their commits (see
    /// [`inject`]).
    pub fn set_commit_hook(&mut self, hook: Option<inject::Hook>) {
        self.commit_hook = hook;
    }

    /// The hook workers call at every phase of their commits, if any.
    pub fn commit_hook(&self) -> Option<&inject::Hook> {
        self.commit_hook.as_ref()
    }

    /// The history sink, when recording is on.
    #[inline]
    pub fn history(&self) -> Option<&crate::history::Sink> {
        self.history.as_ref()
    }

    /// The table `id`, for the engine's own use on ids it has checked already (a worker's read,
    /// write and lock sets hold only ids that an operation found with [`Storage::try_table`]).
    /// Panics on an id not from this database's schema; code outside the crate, which may hold
    /// ids of another database, gets [`Storage::try_table`] only.
    #[inline]
    pub(crate) fn table(&self, id: TableId) -> &Table<R> {
        &self.tables[id.index()]
    }

    /// The table `id`, or `None` if out of range.
    #[inline]
    pub fn try_table(&self, id: TableId) -> Option<&Table<R>> {
        self.tables.get(id.index())
    }

    /// All tables.
    pub fn tables(&self) -> &[Table<R>] {
        &self.tables
    }

    /// The table named `name`.
    pub fn table_by_name(&self, name: &str) -> Option<&Table<R>> {
        self.tables.iter().find(|t| t.spec.name == name)
    }

    /// The epoch state.
    #[inline]
    pub fn epochs(&self) -> &Epochs {
        &self.epochs
    }

    /// When the storage was created (the origin of clock-based timestamps).
    #[inline]
    pub fn origin(&self) -> quanta::Instant {
        self.origin
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// No memory outside the slots.
    fn none(_: TableId, _: u64, _: usize) -> usize {
        0
    }

    /// A header nothing reads: these tests only allocate slots.
    struct Hdr {
        _word: AtomicU64,
    }
    // SAFETY: a single atomic: zero is valid, no Drop, align 8.
    unsafe impl RecordHeader for Hdr {}

    /// A table grows by far more than a step may fault in: the step stops at its budget, faults
    /// in what comes right after the cursor, and does nothing while nothing grows.
    #[test]
    fn prefaulter_steps_are_bounded_and_fault_in_what_comes_next() {
        for index in [IndexKind::Ordered, IndexKind::Dense] {
            // 56-byte rows: 64-byte slots, 32768 to a 2 MiB segment.
            let spec = TableSpec::new("t", 56, 0).with_capacity(8_000_000).with_index(index);
            let storage = Storage::<Hdr>::new(&[spec], 4, Duration::from_millis(40)).unwrap();
            let rows = &storage.tables()[0].rows;
            let seg = 2usize << 20;
            let mut pf = Prefaulter::new(&storage);
            assert_eq!(pf.step(&storage, none), 0, "nothing grew");
            let mut cache = SlotCache::default();
            for _ in 0..100 * rows.slots_per_segment() {
                rows.alloc(&mut cache).unwrap();
            }
            let done = pf.step(&storage, none);
            let leaves = if index == IndexKind::Dense { seg } else { 0 };
            assert!(done >= Prefaulter::STEP_BUDGET, "{index:?}: {done}");
            assert!(done < Prefaulter::STEP_BUDGET + seg + leaves, "{index:?}: {done}");
            // The segments right after the cursor are there now.
            let budget_segs = (Prefaulter::STEP_BUDGET / seg) as u64;
            let now = rows.allocated();
            assert_eq!(rows.prefault(now, budget_segs * rows.slots_per_segment(), usize::MAX), 0);
            assert_eq!(pf.step(&storage, none), 0, "nothing grew since");
            assert_eq!(pf.faulted_bytes(), done);
        }
    }

    /// Copies kept for snapshot readers grow with updates, not inserts: a step faults in three
    /// times what the chains' store carved since the last one, a reservation `scale` times what
    /// it carved since the cursors it was given, and nothing happens while nothing is carved.
    #[test]
    fn kept_copies_are_faulted_in_ahead() {
        let spec = TableSpec::new("t", 56, 0).with_capacity(1000);
        let mut storage = Storage::<Hdr>::new(&[spec], 4, Duration::from_millis(40)).unwrap();
        storage.enable_snapshots(1).unwrap();
        let start = Prefaulter::cursors(&storage);
        let mut pf = Prefaulter::new(&storage);
        assert_eq!(pf.step(&storage, none), 0, "nothing carved");
        let store = &storage.tables()[0].chains.as_ref().unwrap().store;
        let per_chunk = ((2 << 20) / store.version_bytes()) as u64;
        let mut pool = version::VersionPool::default();
        while store.carved() < 2 * per_chunk {
            pool.alloc(store);
        }
        assert_eq!(store.ready_chunks(), 0);
        let done = pf.step(&storage, none);
        assert!(store.ready_chunks() >= 6 && done == store.ready_chunks() * (2 << 20), "{done}");
        assert_eq!(pf.step(&storage, none), 0, "nothing carved since");
        let ready = store.ready_chunks();
        let done = pf.reserve(&storage, &start, 5.0, none);
        assert!(store.ready_chunks() >= 10 && done == (store.ready_chunks() - ready) * (2 << 20));
    }

    /// A reservation faults in `scale` times each table's growth since the cursors it was given,
    /// past the cursor, without a budget; a table that did not grow gets nothing.
    #[test]
    fn a_reservation_faults_in_the_scaled_growth() {
        let specs = [
            TableSpec::new("grows", 56, 0).with_capacity(8_000_000),
            TableSpec::new("still", 56, 0).with_capacity(8_000_000),
        ];
        let storage = Storage::<Hdr>::new(&specs, 4, Duration::from_millis(40)).unwrap();
        let rows = &storage.tables()[0].rows;
        let per_seg = rows.slots_per_segment();
        let start = Prefaulter::cursors(&storage);
        let mut pf = Prefaulter::new(&storage);
        let mut cache = SlotCache::default();
        for _ in 0..10 * per_seg {
            rows.alloc(&mut cache).unwrap();
        }
        // 10 segments grew; 4x that is 40 segments (160 MiB at 2 MiB each, over any step budget).
        let done = pf.reserve(&storage, &start, 4.0, none);
        assert_eq!(done, 40 * (2 << 20));
        let now = rows.allocated();
        assert_eq!(rows.prefault(now, 40 * per_seg, usize::MAX), 0, "all there already");
        assert_eq!(storage.tables()[1].rows.allocated(), 0);
        assert_eq!(pf.faulted_bytes(), done);
    }
}
