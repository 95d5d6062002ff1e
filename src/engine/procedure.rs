//! Procedures, declared access sets and static transaction templates.
//!
//! A transaction is a **procedure**: a struct holding its parameters whose `run` method is written
//! against [`Tx`], a thin wrapper over the protocol's [`Worker`]. Beyond running, a procedure can:
//!
//! * **declare its access set** before it runs ([`Procedure::declare`]): exact keys, key ranges,
//!   and keys found by *reconnaissance* reads ([`Recon`], non-transactional). When declared sets
//!   are enforced, every operation is checked against the set at run time; touching an undeclared
//!   key aborts with `AccessSetMismatch` and the driver declares again and retries (OLLP). BOHM and
//!   ordered-locking 2PL need this.
//! * **belong to a transaction type** ([`TxnType`]) whose static template lists its pieces and, per
//!   piece, the tables, columns and modes it touches. `run` marks piece boundaries with
//!   [`Tx::piece`]. IC3 needs the templates; when template checks are on, an operation outside the
//!   current piece's declaration aborts with `TemplateViolation` (a procedure bug that stops a run).

use super::protocol::{PieceEnd, Worker};
use super::stats::{Phase, PhaseTicks};
use crate::error::{Abort, AbortReason};
use crate::storage::TableId;
use std::ops::ControlFlow;

/// Read or write intent. `Write` covers reads of the same columns (an update reads and writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum AccessMode {
    /// Reads only.
    Read,
    /// Reads and writes (update, blind write, insert, delete).
    Write,
    /// In a template only: commutative accumulations into the columns
    /// ([`Tx::accumulate`]), which neither read them nor return anything. IC3 leaves them out
    /// of its conflicts and applies them at commit when no analysed template reads the columns
    /// or writes the table otherwise (§4.3, `engine::scgraph`); every other protocol applies
    /// them at once, as updates. Access sets declare them as `Write`.
    Accumulate,
}

/// A commutative accumulation into one integer column of a row ([`Tx::accumulate`]): adds
/// `delta`, wrapping, to the little-endian integer of `width` bytes at byte `offset`, which
/// column `column` of the table's declared layout holds. Wrapping addition commutes, so any
/// order of applying a set of accumulations gives the same row (a checked or saturating one
/// would not). Plain data, so that a protocol can keep it until commit without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accumulation {
    column: u8,
    width: u8,
    offset: u32,
    delta: i64,
}

impl Accumulation {
    /// Adds `delta` to the 8-byte integer at `offset`, column `column`.
    pub const fn add_i64(column: usize, offset: usize, delta: i64) -> Self {
        assert!(column < 64, "a column mask has 64 columns");
        Accumulation { column: column as u8, width: 8, offset: offset as u32, delta }
    }

    /// Adds `delta` to the 4-byte integer at `offset`, column `column` (the sum taken modulo
    /// 2^32).
    pub const fn add_u32(column: usize, offset: usize, delta: i64) -> Self {
        assert!(column < 64, "a column mask has 64 columns");
        Accumulation { column: column as u8, width: 4, offset: offset as u32, delta }
    }

    /// The column it changes, as a mask.
    #[inline]
    pub fn columns(&self) -> Columns {
        1 << self.column
    }

    /// Whether it fits in a row of `len` bytes.
    #[inline]
    pub fn fits(&self, len: usize) -> bool {
        self.offset as usize + self.width as usize <= len
    }

    /// Applies it to `row`; `false`, changing nothing, when it does not fit.
    #[inline]
    pub fn apply(&self, row: &mut [u8]) -> bool {
        let at = self.offset as usize;
        match self.width {
            8 => match row.get_mut(at..at + 8) {
                Some(b) => {
                    let v = i64::from_le_bytes(b.try_into().expect("8 bytes"));
                    b.copy_from_slice(&v.wrapping_add(self.delta).to_le_bytes());
                    true
                }
                None => false,
            },
            _ => match row.get_mut(at..at + 4) {
                Some(b) => {
                    let v = u32::from_le_bytes(b.try_into().expect("4 bytes"));
                    b.copy_from_slice(&v.wrapping_add(self.delta as u32).to_le_bytes());
                    true
                }
                None => false,
            },
        }
    }
}

pub use crate::storage::projection::Columns;
/// Every column.
pub const ALL_COLUMNS: Columns = u64::MAX;

/// One table access a piece declares. A piece that reads some columns of a table and writes
/// others declares two accesses, so that IC3's analysis sees which columns are written.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TableAccess {
    /// The table.
    pub table: TableId,
    /// Read, or read and write.
    pub mode: AccessMode,
    /// Columns touched.
    pub columns: Columns,
}

/// One piece of a transaction template.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Piece {
    /// Name, for messages and IC3's analysis.
    pub name: &'static str,
    /// What the piece touches.
    pub accesses: &'static [TableAccess],
}

/// A transaction type: its name (for per-type statistics) and its static template.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TxnType {
    /// Name in results.
    pub name: &'static str,
    /// Pieces in execution order.
    pub pieces: &'static [Piece],
}

/// Non-transactional reads used to compute an access set before the transaction runs. While
/// workers run, call them inside [`crate::engine::Worker::pinned`] of the calling thread's worker
/// (the driver does): the rows and versions they walk are then not freed under them.
pub trait Recon {
    /// Reads the current committed-or-not row of `key`, best effort (may be stale or torn; the
    /// run-time check catches a wrong guess).
    fn peek<T>(&self, table: TableId, key: u64, f: impl FnOnce(&[u8]) -> T) -> Option<T>;

    /// Visits the present rows with `lo <= key <= hi` in key order, at most `limit`, stopping
    /// when `f` breaks, best effort like [`Recon::peek`]. Returns the number visited (0 on a
    /// hash-indexed table's range longer than a probe can cover).
    fn scan(
        &self,
        table: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> usize;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct KeyEntry {
    table: TableId,
    key: u64,
    mode: AccessMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RangeEntry {
    table: TableId,
    lo: u64,
    hi: u64,
    mode: AccessMode,
}

/// A declared access set: keys and key ranges with their modes. Reused across transactions, so
/// declaring allocates nothing once warmed up (`clone_from` reuses the target's buffers too).
///
/// [`AccessSet::seal`] sorts the keys so that lookups ([`AccessSet::covers`]) take a binary
/// search; the driver seals every set it declares. An unsealed set answers every question the
/// same, in time linear in its size: forgetting to seal costs time, never correctness.
#[derive(Debug, Default)]
pub struct AccessSet {
    keys: Vec<KeyEntry>,
    ranges: Vec<RangeEntry>,
    sorted: bool,
    /// [`AccessSet::write_within`] declares the range, not the guess.
    guesses_as_ranges: bool,
}

impl Clone for AccessSet {
    fn clone(&self) -> Self {
        AccessSet {
            keys: self.keys.clone(),
            ranges: self.ranges.clone(),
            sorted: self.sorted,
            guesses_as_ranges: self.guesses_as_ranges,
        }
    }
    /// Copies `source` into this set's buffers (no allocation once they are large enough).
    fn clone_from(&mut self, source: &Self) {
        self.keys.clone_from(&source.keys);
        self.ranges.clone_from(&source.ranges);
        self.sorted = source.sorted;
        self.guesses_as_ranges = source.guesses_as_ranges;
    }
}

impl AccessSet {
    /// Makes [`AccessSet::write_within`] declare ranges instead of guessed keys, for a
    /// protocol whose declarations are made well ahead of execution (BOHM's sequencer fills
    /// batches while earlier ones run, so a guess from reconnaissance is stale for every
    /// transaction of a district but the first). Kept across [`AccessSet::clear`].
    pub fn declare_guesses_as_ranges(&mut self, on: bool) {
        self.guesses_as_ranges = on;
    }
    /// Declares a write of a key that depends on data the transaction itself changes or reads
    /// (TPC-C's next order number, the oldest undelivered order): `guess` is what
    /// reconnaissance found, and `[lo, hi]` the range the key is certain to fall in. Declares
    /// the guess, which the run-time check sends back to be declared again when it turns out
    /// wrong (OLLP), unless the set declares guesses as ranges
    /// ([`AccessSet::declare_guesses_as_ranges`]); with no guess, the range.
    pub fn write_within(&mut self, table: TableId, guess: Option<u64>, lo: u64, hi: u64) {
        match guess {
            Some(key) if !self.guesses_as_ranges => self.write(table, key),
            _ => self.range(table, lo, hi, AccessMode::Write),
        }
    }
    /// Empties the set.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.ranges.clear();
        self.sorted = true;
    }
    /// Declares a read of `key`.
    pub fn read(&mut self, table: TableId, key: u64) {
        self.push(table, key, AccessMode::Read);
    }
    /// Declares a write (update, blind write, insert or delete) of `key`.
    pub fn write(&mut self, table: TableId, key: u64) {
        self.push(table, key, AccessMode::Write);
    }
    /// Declares access to every key in `[lo, hi]` (scans; inserts into a range).
    /// [`AccessMode::Accumulate`] declares writes.
    pub fn range(&mut self, table: TableId, lo: u64, hi: u64, mode: AccessMode) {
        let mode = mode.min(AccessMode::Write);
        self.ranges.push(RangeEntry { table, lo, hi, mode });
    }
    fn push(&mut self, table: TableId, key: u64, mode: AccessMode) {
        self.keys.push(KeyEntry { table, key, mode });
        self.sorted = false;
    }
    /// Sorts the keys for lookup (the driver calls it after declaring; see the type's docs).
    pub fn seal(&mut self) {
        if !self.sorted {
            self.keys.sort_unstable();
            self.sorted = true;
        }
    }
    /// The declared keys, each once with the strongest mode declared for it: in (table, key)
    /// order once sealed, in the order first declared before.
    pub fn keys(&self) -> impl Iterator<Item = (TableId, u64, AccessMode)> + '_ {
        let sorted = self.sorted;
        self.keys.iter().enumerate().filter_map(move |(i, e)| {
            let same = |n: &KeyEntry| n.table == e.table && n.key == e.key;
            if sorted {
                // Sorted by (table, key, mode): the last entry of a key has its strongest mode.
                let next_same = self.keys.get(i + 1).is_some_and(same);
                return (!next_same).then_some((e.table, e.key, e.mode));
            }
            if self.keys[..i].iter().any(same) {
                return None;
            }
            let mode = self.keys[i..].iter().filter(|n| same(n)).map(|n| n.mode).max();
            Some((e.table, e.key, mode.unwrap_or(e.mode)))
        })
    }
    /// The declared ranges, as declared: `(table, lo, hi, mode)`.
    pub fn ranges(&self) -> impl Iterator<Item = (TableId, u64, u64, AccessMode)> + '_ {
        self.ranges.iter().map(|r| (r.table, r.lo, r.hi, r.mode))
    }
    /// Number of key entries.
    pub fn len(&self) -> usize {
        self.keys.len() + self.ranges.len()
    }
    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether an access to `key` with `mode` is covered.
    pub fn covers(&self, table: TableId, key: u64, mode: AccessMode) -> bool {
        if !self.sorted {
            return self.covers_unsealed(table, key, mode);
        }
        let probe = KeyEntry { table, key, mode: AccessMode::Read };
        let start = self.keys.partition_point(|e| *e < probe);
        let hit = self.keys[start..]
            .iter()
            .take_while(|e| e.table == table && e.key == key)
            .any(|e| e.mode >= mode);
        hit || self.covers_range(table, key, key, mode)
    }
    /// [`AccessSet::covers`] of a set not sealed: a linear search (kept out of the sealed
    /// set's path, which the driver's run-time checks take at every operation).
    #[cold]
    fn covers_unsealed(&self, table: TableId, key: u64, mode: AccessMode) -> bool {
        self.keys.iter().any(|e| e.table == table && e.key == key && e.mode >= mode)
            || self.covers_range(table, key, key, mode)
    }
    /// Whether a scan of `[lo, hi]` with `mode` is covered.
    pub fn covers_range(&self, table: TableId, lo: u64, hi: u64, mode: AccessMode) -> bool {
        self.ranges.iter().any(|r| r.table == table && r.lo <= lo && hi <= r.hi && r.mode >= mode)
    }
}

/// A transaction program. See the module docs.
pub trait Procedure {
    /// Index of this procedure's type in the workload's [`TxnType`] table.
    fn txn_type(&self) -> usize;

    /// Declares the access set into `set` (which is empty on entry), using `recon` for keys that
    /// depend on data. Returns `false` if this procedure cannot declare (the default).
    fn declare<R: Recon>(&self, recon: &R, set: &mut AccessSet) -> bool {
        let _ = (recon, set);
        false
    }

    /// Whether this transaction writes nothing (known before it runs). The driver then begins
    /// it with [`Worker::begin_read_only`] and refuses its writes (`read-only-write`). False by
    /// default.
    #[inline]
    fn read_only(&self) -> bool {
        false
    }

    /// Whether this transaction reads much and writes little (ERMIA's read-mostly
    /// transactions; known before it runs, and unlike [`Procedure::read_only`] it may write).
    /// The driver then begins it with [`Worker::begin_read_mostly`]. False by default.
    #[inline]
    fn read_mostly(&self) -> bool {
        false
    }

    /// The transaction body. Returning `Err` rolls back: `Err(Abort::user())` is a final user
    /// abort, `Err(Abort::retry())` asks for another attempt, and an operation's own `Err` is
    /// passed on with `?`.
    ///
    /// **Runs.** `run` may be called several times for one transaction: once per attempt (a
    /// retried conflict; BOHM's re-execution of a transaction whose read met a version still
    /// being produced), each on a fresh attempt that sees none of the earlier runs' writes.
    /// What `run` records in the procedure (through a `Cell` or other interior mutability: it
    /// gets `&self`) must therefore be *set* by every run, not accumulated across runs: the
    /// procedure is left holding what its last run recorded, and the last run is the one
    /// whose outcome counts (the committed run, or the run whose rollback was final).
    /// [`Procedure::committed`] is called after the committed run, once.
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort>;
    /// Called once after this procedure's transaction committed, with what its committed run
    /// recorded still in it, by [`crate::engine::Database::run_batch`] (on whichever thread
    /// learns of the commit, possibly after later transactions of the batch ran): the place
    /// for an effect that must happen once per committed transaction. The driver's workloads
    /// hear of commits through [`crate::engine::Generator::committed`] instead. Nothing by
    /// default.
    #[inline]
    fn committed(&self) {}
    /// What the last run would add to the workload's ledger if it commits (SmallBank: money
    /// deposited minus money withdrawn); see [`crate::engine::Generator::ledger`]. 0 by default.
    #[inline]
    fn ledger(&self) -> i64 {
        0
    }
}

/// Run-time checks a [`Tx`] applies; the default checks nothing.
///
/// ```
/// # use txlab::engine::{AccessSet, Checks};
/// let set = AccessSet::default();
/// let checks = Checks { templates: true, ..Checks::default() };
/// let both = Checks { access_set: Some(&set), ..checks };
/// # let _ = both;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Checks<'a> {
    /// Check every operation against the transaction type's piece template
    /// ([`AbortReason::TemplateViolation`]).
    pub templates: bool,
    /// Check every operation against this declared access set
    /// ([`AbortReason::AccessSetMismatch`]).
    pub access_set: Option<&'a AccessSet>,
    /// The transaction was declared read-only: refuse every write
    /// ([`AbortReason::ReadOnlyWrite`]).
    pub read_only: bool,
    /// Check only the writes against [`Checks::access_set`]: for a protocol that needs the
    /// write set alone (BOHM reads every key at the transaction's timestamp, declared or not),
    /// so that a read the reconnaissance could not foresee does not send the transaction back.
    pub writes_only: bool,
}

/// What a procedure runs against: the protocol's worker plus optional checks.
pub struct Tx<'a, W: Worker> {
    worker: &'a mut W,
    ty: &'a TxnType,
    piece: Option<usize>,
    declared: Option<&'a AccessSet>,
    /// Reads are checked against `declared` too.
    declared_reads: bool,
    check_templates: bool,
    read_only: bool,
    /// Where reads and writes add their time, when the run times phases.
    timing: Option<(&'a quanta::Clock, &'a mut PhaseTicks)>,
}

impl<'a, W: Worker> Tx<'a, W> {
    /// Wraps `worker` for a transaction of type `ty`, applying `checks`.
    pub fn new(worker: &'a mut W, ty: &'a TxnType, checks: Checks<'a>) -> Self {
        let (declared, check_templates) = (checks.access_set, checks.templates);
        let (read_only, declared_reads) = (checks.read_only, !checks.writes_only);
        Tx {
            worker,
            ty,
            piece: None,
            declared,
            declared_reads,
            check_templates,
            read_only,
            timing: None,
        }
    }

    /// Adds the time of each read and write operation to `ticks` (read on `clock`): the
    /// driver's phase breakdown ([`Phase`]).
    pub fn timed(mut self, clock: &'a quanta::Clock, ticks: &'a mut PhaseTicks) -> Self {
        self.timing = Some((clock, ticks));
        self
    }

    /// Runs `op` on the worker, its time added to `phase` when the run times phases.
    #[inline(always)]
    fn op<T>(&mut self, phase: Phase, op: impl FnOnce(&mut W) -> T) -> T {
        match &mut self.timing {
            None => op(self.worker),
            Some((clock, ticks)) => {
                let start = clock.raw();
                let out = op(self.worker);
                ticks.add(clock, phase, start);
                out
            }
        }
    }

    /// The underlying worker (for protocol-specific extensions).
    pub fn worker(&mut self) -> &mut W {
        self.worker
    }

    /// Checks an operation on `key` that reads the columns `reads` and writes `writes` (a
    /// write of the key, for the access set, when `write`).
    #[inline]
    fn check(
        &self,
        table: TableId,
        key: u64,
        write: bool,
        reads: Columns,
        writes: Columns,
    ) -> Result<(), Abort> {
        self.check_op(table, key, write, reads, writes, 0)
    }

    /// [`Tx::check`] for an operation that also accumulates into the columns `accumulates`.
    #[inline]
    fn check_op(
        &self,
        table: TableId,
        key: u64,
        write: bool,
        reads: Columns,
        writes: Columns,
        accumulates: Columns,
    ) -> Result<(), Abort> {
        if write && self.read_only {
            return Err(Abort::new(AbortReason::ReadOnlyWrite));
        }
        if let Some(set) = self.declared.filter(|_| write || self.declared_reads) {
            let mode = if write { AccessMode::Write } else { AccessMode::Read };
            if !set.covers(table, key, mode) {
                return Err(Abort::new(AbortReason::AccessSetMismatch));
            }
        }
        if self.check_templates {
            self.check_template(table, reads, writes, accumulates)?;
        }
        Ok(())
    }

    /// Whether the current piece declares `table` with every column of `reads` among its read
    /// and write accesses, every column of `writes` among its write accesses, and every column
    /// of `accumulates` among its write and accumulate accesses (an accumulate access allows
    /// nothing else: reading the columns would make the accumulation not commute).
    fn check_template(
        &self,
        table: TableId,
        reads: Columns,
        writes: Columns,
        accumulates: Columns,
    ) -> Result<(), Abort> {
        let ok = match self.piece {
            // Outside any piece: allowed only for types without pieces.
            None => self.ty.pieces.is_empty(),
            Some(p) => {
                let (mut seen, mut readable, mut writable, mut accumulable) = (false, 0, 0, 0);
                for a in self.ty.pieces[p].accesses.iter().filter(|a| a.table == table) {
                    seen = true;
                    match a.mode {
                        AccessMode::Read => readable |= a.columns,
                        AccessMode::Write => {
                            readable |= a.columns;
                            writable |= a.columns;
                            accumulable |= a.columns;
                        }
                        AccessMode::Accumulate => accumulable |= a.columns,
                    }
                }
                seen && reads & !readable == 0
                    && writes & !writable == 0
                    && accumulates & !accumulable == 0
            }
        };
        if ok {
            Ok(())
        } else {
            Err(Abort::new(AbortReason::TemplateViolation))
        }
    }

    /// Runs `body` as piece `piece` of this transaction's template, between
    /// [`Worker::piece_begin`] and [`Worker::piece_end`], and again for as long as the end asks
    /// for it ([`PieceEnd::Again`]: a protocol that validates pieces on their own discarded the
    /// run). So `body` must be re-runnable: everything it does outside the transaction's
    /// operations (its output, counters, flags) it either returns or sets afresh on every run,
    /// never accumulates.
    pub fn piece<T>(
        &mut self,
        piece: usize,
        mut body: impl FnMut(&mut Self) -> Result<T, Abort>,
    ) -> Result<T, Abort> {
        if self.check_templates && piece >= self.ty.pieces.len() {
            return Err(Abort::new(AbortReason::TemplateViolation));
        }
        loop {
            self.worker.piece_begin(piece)?;
            let outer = self.piece.replace(piece);
            let out = body(self);
            self.piece = outer;
            let status = out.as_ref().map(|_| ()).map_err(|a| *a);
            match self.worker.piece_end(piece, status)? {
                PieceEnd::Done => return out,
                PieceEnd::Again => {}
            }
        }
    }

    /// See [`Worker::read`].
    #[inline]
    pub fn read<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.read_cols(table, key, ALL_COLUMNS, f)
    }

    /// [`Worker::read_cols`]: only the columns `cols` are used, and only they are guaranteed in
    /// the slice `f` sees (the protocol may copy just those).
    #[inline]
    pub fn read_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        cols: Columns,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.check(table, key, false, cols, 0)?;
        self.op(Phase::Read, |w| w.read_cols(table, key, cols, f))
    }

    /// See [`Worker::read_for_update`].
    #[inline]
    pub fn read_for_update<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.check(table, key, true, ALL_COLUMNS, ALL_COLUMNS)?;
        self.op(Phase::Read, |w| w.read_for_update(table, key, f))
    }

    /// See [`Worker::write`].
    #[inline]
    #[must_use = "`Ok(false)` means the key is absent and nothing was written"]
    pub fn write(&mut self, table: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.check(table, key, true, 0, ALL_COLUMNS)?;
        self.op(Phase::Write, |w| w.write(table, key, value))
    }

    /// See [`Worker::update`].
    #[inline]
    #[must_use = "`Ok(None)` means the key is absent and nothing was changed"]
    pub fn update<T>(
        &mut self,
        table: TableId,
        key: u64,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.update_cols(table, key, ALL_COLUMNS, ALL_COLUMNS, f)
    }

    /// [`Worker::update_cols`]: `f` sees the columns `reads | writes` and only its changes to
    /// `writes` are kept. The template must declare `reads` in some access of the piece and
    /// `writes` in a write access.
    #[inline]
    #[must_use = "`Ok(None)` means the key is absent and nothing was changed"]
    pub fn update_cols<T>(
        &mut self,
        table: TableId,
        key: u64,
        reads: Columns,
        writes: Columns,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<Option<T>, Abort> {
        self.check(table, key, true, reads, writes)?;
        self.op(Phase::Write, |w| w.update_cols(table, key, reads, writes, f))
    }

    /// See [`Worker::accumulate`]: a commutative accumulation into `key`, which the
    /// transaction does not read. The template must declare its column in an accumulate (or
    /// write) access of the piece, and the access set a write of `key`.
    #[inline]
    #[must_use = "`Ok(false)` means the key is absent and nothing was changed"]
    pub fn accumulate(
        &mut self,
        table: TableId,
        key: u64,
        acc: Accumulation,
    ) -> Result<bool, Abort> {
        self.check_op(table, key, true, 0, 0, acc.columns())?;
        self.op(Phase::Write, |w| w.accumulate(table, key, acc))
    }

    /// See [`Worker::insert`].
    #[inline]
    #[must_use = "`Ok(false)` means the key is present already and nothing was inserted"]
    pub fn insert(&mut self, table: TableId, key: u64, value: &[u8]) -> Result<bool, Abort> {
        self.check(table, key, true, 0, ALL_COLUMNS)?;
        self.op(Phase::Write, |w| w.insert(table, key, value))
    }

    /// See [`Worker::delete`].
    #[inline]
    #[must_use = "`Ok(false)` means the key is absent and nothing was deleted"]
    pub fn delete(&mut self, table: TableId, key: u64) -> Result<bool, Abort> {
        self.check(table, key, true, 0, ALL_COLUMNS)?;
        self.op(Phase::Write, |w| w.delete(table, key))
    }

    /// See [`Worker::scan`].
    #[inline]
    pub fn scan(
        &mut self,
        table: TableId,
        lo: u64,
        hi: u64,
        limit: usize,
        f: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Abort> {
        if let Some(set) = self.declared.filter(|_| self.declared_reads) {
            if !set.covers_range(table, lo, hi, AccessMode::Read) {
                return Err(Abort::new(AbortReason::AccessSetMismatch));
            }
        }
        if self.check_templates {
            self.check_template(table, ALL_COLUMNS, 0, 0)?;
        }
        self.op(Phase::Read, |w| w.scan(table, lo, hi, limit, f))
    }

    /// See [`Worker::prefetch`]: a hint, never checked against templates or access sets.
    #[inline]
    pub fn prefetch(&mut self, table: TableId, key: u64) {
        self.op(Phase::Prefetch, |w| w.prefetch(table, key));
    }

    /// See [`Worker::prefetch_many`]: a hint, never checked.
    #[inline]
    pub fn prefetch_many(&mut self, keys: &[(TableId, u64, Columns)]) {
        self.op(Phase::Prefetch, |w| w.prefetch_many(keys));
    }

    /// Aborts on purpose: `return tx.user_abort()`.
    pub fn user_abort<T>(&mut self) -> Result<T, Abort> {
        Err(Abort::user())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AbortReason;

    /// A worker that records the calls the engine makes and ends each piece as scripted: the
    /// first `again` ends ask for the piece to run again.
    #[derive(Default)]
    struct Scripted {
        calls: Vec<String>,
        again: usize,
        commits_fail: usize,
    }

    impl Worker for Scripted {
        fn begin(&mut self) {
            self.calls.push("begin".into());
        }
        fn typed(&mut self, ty: usize) {
            self.calls.push(format!("typed {ty}"));
        }
        fn piece_begin(&mut self, piece: usize) -> Result<(), Abort> {
            self.calls.push(format!("piece_begin {piece}"));
            Ok(())
        }
        fn piece_end(&mut self, piece: usize, body: Result<(), Abort>) -> Result<PieceEnd, Abort> {
            self.calls.push(format!("piece_end {piece} {}", body.is_ok()));
            body?;
            if self.again > 0 {
                self.again -= 1;
                return Ok(PieceEnd::Again);
            }
            Ok(PieceEnd::Done)
        }
        fn read_for_update<T>(
            &mut self,
            _: TableId,
            _: u64,
            _: impl FnOnce(&[u8]) -> T,
        ) -> Result<Option<T>, Abort> {
            Ok(None)
        }
        fn write(&mut self, _: TableId, _: u64, _: &[u8]) -> Result<bool, Abort> {
            Ok(false)
        }
        fn read_cols<T>(
            &mut self,
            _: TableId,
            key: u64,
            _: Columns,
            f: impl FnOnce(&[u8]) -> T,
        ) -> Result<Option<T>, Abort> {
            self.calls.push(format!("read {key}"));
            Ok(Some(f(&key.to_le_bytes())))
        }
        fn update_cols<T>(
            &mut self,
            _: TableId,
            _: u64,
            _: Columns,
            _: Columns,
            _: impl FnOnce(&mut [u8]) -> T,
        ) -> Result<Option<T>, Abort> {
            Ok(None)
        }
        fn insert(&mut self, _: TableId, _: u64, _: &[u8]) -> Result<bool, Abort> {
            Ok(false)
        }
        fn delete(&mut self, _: TableId, _: u64) -> Result<bool, Abort> {
            Ok(false)
        }
        fn scan(
            &mut self,
            _: TableId,
            _: u64,
            _: u64,
            _: usize,
            _: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
        ) -> Result<usize, Abort> {
            Ok(0)
        }
        fn commit(&mut self) -> Result<(), Abort> {
            self.calls.push("commit".into());
            if self.commits_fail > 0 {
                self.commits_fail -= 1;
                return Err(Abort::new(AbortReason::WriteConflict));
            }
            Ok(())
        }
        fn abort(&mut self) {
            self.calls.push("abort".into());
        }
    }

    const T: TableId = TableId(0);
    static PIECES: [Piece; 2] = [
        Piece {
            name: "a",
            accesses: &[TableAccess { table: T, mode: AccessMode::Read, columns: 1 }],
        },
        Piece {
            name: "b",
            accesses: &[TableAccess { table: T, mode: AccessMode::Read, columns: 1 }],
        },
    ];
    static TY: TxnType = TxnType { name: "t", pieces: &PIECES };

    #[test]
    fn a_piece_asked_again_runs_its_body_again_and_returns_the_last_run() {
        let mut w = Scripted { again: 2, ..Scripted::default() };
        let checks = Checks { templates: true, ..Checks::default() };
        let mut tx = Tx::new(&mut w, &TY, checks);
        let mut runs = 0;
        let out = tx
            .piece(1, |tx| {
                runs += 1;
                tx.read_cols(T, runs, 1, |r| r[0])
            })
            .unwrap();
        assert_eq!((runs, out), (3, Some(3)), "three runs, the last one's result");
        let want = [
            "piece_begin 1",
            "read 1",
            "piece_end 1 true",
            "piece_begin 1",
            "read 2",
            "piece_end 1 true",
            "piece_begin 1",
            "read 3",
            "piece_end 1 true",
        ];
        assert_eq!(w.calls, want);
    }

    #[test]
    fn a_failing_piece_body_reaches_the_piece_end_and_ends_the_attempt() {
        let mut w = Scripted { again: 5, ..Scripted::default() };
        let mut tx = Tx::new(&mut w, &TY, Checks { templates: true, ..Checks::default() });
        let err = tx.piece(0, |tx| tx.read_cols(T, 7, 2, |_| ())).unwrap_err();
        assert_eq!(err.reason, AbortReason::TemplateViolation, "column 2 is undeclared");
        assert_eq!(w.calls, ["piece_begin 0", "piece_end 0 false"]);
        let mut tx = Tx::new(&mut w, &TY, Checks { templates: true, ..Checks::default() });
        let err = tx.piece(2, |_| Ok(())).unwrap_err();
        assert_eq!(err.reason, AbortReason::TemplateViolation, "the type has two pieces");
    }

    /// One NewOrder-like procedure of type 1, for the retry loop.
    struct Typed;
    impl Procedure for Typed {
        fn txn_type(&self) -> usize {
            1
        }
        fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
            tx.piece(0, |tx| tx.read_cols(T, 4, 1, |_| ()).map(drop))
        }
    }

    #[test]
    fn every_attempt_of_a_procedure_is_typed_before_it_begins() {
        let mut w = Scripted { commits_fail: 1, ..Scripted::default() };
        let checks = Checks { templates: true, ..Checks::default() };
        super::super::Retry::new().run_procedure(&mut w, &TY, &Typed, checks).unwrap();
        let attempt = ["typed 1", "begin", "piece_begin 0", "read 4", "piece_end 0 true", "commit"];
        let mut want: Vec<&str> = attempt.to_vec();
        want.push("abort");
        want.extend(attempt);
        assert_eq!(w.calls, want);
        // An untyped transaction is begun without a type.
        w.calls.clear();
        super::super::Retry::new().run(&mut w, |w| w.read_cols(T, 5, 1, |_| ()).map(drop)).unwrap();
        assert_eq!(w.calls, ["begin", "read 5", "commit"]);
    }

    /// An accumulate access allows accumulating into its columns and nothing else; a write
    /// access allows accumulating too; the access set checks an accumulation as a write.
    #[test]
    fn templates_check_accumulations() {
        static ACC: [Piece; 2] = [
            Piece {
                name: "acc",
                accesses: &[
                    TableAccess { table: T, mode: AccessMode::Accumulate, columns: 0b01 },
                    TableAccess { table: T, mode: AccessMode::Read, columns: 0b10 },
                ],
            },
            Piece {
                name: "write",
                accesses: &[TableAccess { table: T, mode: AccessMode::Write, columns: 0b11 }],
            },
        ];
        static ACC_TY: TxnType = TxnType { name: "acc", pieces: &ACC };
        let mut w = Scripted::default();
        let checks = Checks { templates: true, ..Checks::default() };
        let mut tx = Tx::new(&mut w, &ACC_TY, checks);
        let (col0, col1) = (Accumulation::add_i64(0, 0, 1), Accumulation::add_i64(1, 8, 1));
        let reason = |r: Result<bool, Abort>| r.map_err(|a| a.reason);
        let violation = Err(AbortReason::TemplateViolation);
        tx.piece(0, |tx| {
            // (`Scripted` reports every key absent.)
            assert_eq!(reason(tx.accumulate(T, 1, col0)), Ok(false));
            assert_eq!(reason(tx.accumulate(T, 1, col1)), violation, "a read column");
            let read = tx.read_cols(T, 1, 0b01, |_| ()).map_err(|a| a.reason);
            assert_eq!(read, Err(AbortReason::TemplateViolation), "reading the sum");
            let update = tx.update_cols(T, 1, 0, 0b01, |_| ()).map_err(|a| a.reason);
            assert_eq!(update, Err(AbortReason::TemplateViolation), "writing it otherwise");
            Ok(())
        })
        .unwrap();
        tx.piece(1, |tx| {
            assert_eq!(reason(tx.accumulate(T, 1, col1)), Ok(false), "a write access covers it");
            Ok(())
        })
        .unwrap();
        let mut set = AccessSet::default();
        set.read(T, 1);
        set.seal();
        let checks = Checks { access_set: Some(&set), ..Checks::default() };
        let mut tx = Tx::new(&mut w, &ACC_TY, checks);
        assert_eq!(reason(tx.accumulate(T, 1, col0)), Err(AbortReason::AccessSetMismatch));
    }

    /// Accumulations add with wrapping, in any order to the same result, and refuse a row too
    /// short for them.
    #[test]
    fn accumulations_wrap_commute_and_check_their_bounds() {
        let mut a = [0u8; 12];
        a[..8].copy_from_slice(&(i64::MAX - 1).to_le_bytes());
        a[8..].copy_from_slice(&1u32.to_le_bytes());
        let mut b = a;
        let ops = [
            Accumulation::add_i64(0, 0, 5),
            Accumulation::add_u32(1, 8, -3),
            Accumulation::add_i64(0, 0, -1),
        ];
        for op in &ops {
            assert!(op.apply(&mut a));
        }
        for op in ops.iter().rev() {
            assert!(op.apply(&mut b));
        }
        assert_eq!(a, b);
        assert_eq!(i64::from_le_bytes(a[..8].try_into().unwrap()), (i64::MAX - 1).wrapping_add(4));
        assert_eq!(u32::from_le_bytes(a[8..].try_into().unwrap()), 1u32.wrapping_sub(3));
        assert_eq!(ops[1].columns(), 0b10);
        let far = Accumulation::add_i64(0, 8, 1);
        assert!(!far.fits(12) && far.fits(16));
        assert!(!far.apply(&mut a), "does not fit");
        assert_eq!(a, b, "and changed nothing");
    }

    #[test]
    fn a_guessed_write_is_the_guess_or_its_range() {
        let t = TableId(2);
        let mut s = AccessSet::default();
        s.write_within(t, Some(7), 0, 99);
        s.seal();
        assert!(s.covers(t, 7, AccessMode::Write) && !s.covers(t, 8, AccessMode::Write));
        s.declare_guesses_as_ranges(true);
        s.clear();
        s.write_within(t, Some(7), 0, 99);
        s.seal();
        assert!(s.covers(t, 8, AccessMode::Write), "the range, kept across clear");
        assert_eq!(s.keys().count(), 0);
        s.declare_guesses_as_ranges(false);
        s.clear();
        s.write_within(t, None, 10, 19);
        s.seal();
        assert_eq!(s.ranges().collect::<Vec<_>>(), vec![(t, 10, 19, AccessMode::Write)]);
    }

    /// The same answers sealed or not (sealing only makes lookups faster).
    #[test]
    fn access_set_covers_declared_keys_modes_and_ranges() {
        let t = TableId(0);
        let mut s = AccessSet::default();
        s.clear();
        s.read(t, 9);
        s.read(t, 5);
        s.write(t, 9);
        s.read(t, 9);
        s.range(TableId(1), 100, 200, AccessMode::Read);
        for sealed in [false, true] {
            if sealed {
                s.seal();
            }
            let at = if sealed { "sealed" } else { "unsealed" };
            assert!(s.covers(t, 5, AccessMode::Read), "{at}");
            assert!(!s.covers(t, 5, AccessMode::Write), "{at}");
            assert!(s.covers(t, 9, AccessMode::Write), "{at}");
            assert!(!s.covers(t, 6, AccessMode::Read), "{at}");
            assert!(s.covers(TableId(1), 150, AccessMode::Read), "{at}");
            assert!(!s.covers(TableId(1), 150, AccessMode::Write), "{at}");
            assert!(s.covers_range(TableId(1), 100, 200, AccessMode::Read), "{at}");
            assert!(!s.covers_range(TableId(1), 100, 201, AccessMode::Read), "{at}");
            let mut keys: Vec<_> = s.keys().collect();
            if !sealed {
                assert_eq!(keys[0].1, 9, "in the order first declared");
                keys.sort_unstable();
            }
            assert_eq!(keys, vec![(t, 5, AccessMode::Read), (t, 9, AccessMode::Write)], "{at}");
        }
        let copy = s.clone();
        let mut into = AccessSet::default();
        into.clone_from(&s);
        assert_eq!(format!("{copy:?}"), format!("{s:?}"));
        assert_eq!(format!("{into:?}"), format!("{s:?}"));
    }
}

/// How a transaction declared itself before it runs, i.e. which `Worker::begin*` starts each of
/// its attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    /// Any transaction: [`Worker::begin`].
    ReadWrite,
    /// Reads much, writes little: [`Worker::begin_read_mostly`].
    ReadMostly,
    /// Writes nothing: [`Worker::begin_read_only`].
    ReadOnly,
}

impl Intent {
    /// What `procedure` declares ([`Procedure::read_only`] first).
    pub fn of<P: Procedure>(procedure: &P) -> Self {
        if procedure.read_only() {
            Intent::ReadOnly
        } else if procedure.read_mostly() {
            Intent::ReadMostly
        } else {
            Intent::ReadWrite
        }
    }

    /// Begins an attempt of a transaction of type `ty` ([`Worker::typed`]) on `w` as declared.
    #[inline]
    pub fn begin_typed<W: Worker>(self, w: &mut W, ty: usize) {
        w.typed(ty);
        self.begin(w);
    }

    /// Begins an untyped attempt on `w` as declared.
    #[inline]
    pub fn begin<W: Worker>(self, w: &mut W) {
        match self {
            Intent::ReadWrite => w.begin(),
            Intent::ReadMostly => w.begin_read_mostly(),
            Intent::ReadOnly => w.begin_read_only(),
        }
    }
}
