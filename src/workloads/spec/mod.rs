//! Declarative workloads: a TOML file describes tables and transaction types, and every
//! command runs it as it runs a built-in workload (`-w spec:FILE.toml`).
//!
//! # The file
//!
//! ```toml
//! name = "inventory"                 # optional: the file's stem otherwise
//! description = "..."                # optional
//!
//! [[table]]
//! name = "item"
//! rows = 10_000                      # loaded rows, keys 0..rows
//! columns = [{ name = "stock", bytes = 8 }, { name = "data", bytes = 92 }]
//! # or: row_bytes = 100              # one column, `row`
//! index = "ordered"                  # ordered (default), hash, dense
//!
//! [[txn]]
//! name = "buy"
//! weight = 60                        # percent of the mix; weights sum to 100
//! read_only = false                  # optional: derived from the operations, and checked
//! think_us = 0                       # optional: time held before commit
//! abort = 0.01                       # optional: probability of rolling back on purpose
//! pieces = [[0], [1, 2]]             # optional (IC3): groups of operations, in order
//!
//! [[txn.op]]
//! read = "item"                      # the operation, naming its table
//! key = { zipf = 0.9 }
//! count = [1, 5]                     # optional: keys per transaction, fixed or a range
//! distinct = true                    # optional: no key twice in one transaction
//! columns = ["stock"]                # optional: for read and update
//!
//! [[txn.op]]
//! update = "item"
//! key = { same = 0 }                 # the keys operation 0 drew
//! columns = ["stock"]
//!
//! [[txn.op]]
//! increment = "item"
//! key = { same = 0 }
//! column = "stock"                   # an 8-byte column
//! by = -1
//! ```
//!
//! Operations: `read` (the named `columns`, or all), `read_for_update` (the whole row, with
//! write intent), `update` (read-modify-write of `columns`: each one's leading integer goes up
//! by one), `write` (a blind overwrite of the whole row), `insert` (a zeroed row; a present key
//! inserts nothing), `delete` (an absent key deletes nothing), `scan` (up to `length` present
//! rows from the key on, in key order; not on hash tables) and `increment` (adds `by`, default
//! 1, to an 8-byte column without reading it: a commutative accumulation, which IC3 defers to
//! commit when nothing else reads the column).
//!
//! Keys: `"uniform"` (the default) over the loaded keys; `{ zipf = θ }` (key 0 hottest, θ 0 to
//! 0.999); `{ hot = { keys = Y, accesses = X } }` (X % of the draws on the first Y % of the
//! keys); `"latest"` or `{ latest = θ }` (recently inserted keys, YCSB-D); `"sequential"` (each
//! worker walks the keys from its own start); `"next"` (the table's insert counter: the
//! default for inserts); `{ same = N }` (the keys operation N drew: a read-modify-write, or a
//! foreign key with the same number); `{ parent = N, fanout = F }` (N's key divided by F);
//! `{ child = N, fanout = F }` (N's key times F plus a uniform draw below F). A derived
//! operation draws as many keys as its source unless it gives a `count`; its j-th key comes
//! from the source's j-th (wrapping). An operation's keys may repeat, as YCSB's do, unless it
//! says `distinct = true` (TPC-C's items).
//!
//! # What it compiles to
//!
//! The engine's procedure contract, as a hand-written workload fills it: each type's template
//! lists its pieces with the tables, columns and modes of their operations (so IC3 analyses a
//! spec and the template check guards it); every transaction declares its exact access set
//! before it runs (keys are all drawn up front; scans declare their range), so BOHM and
//! ordered 2PL run it; read-only types begin read-only; histories record as for any workload,
//! so `txlab check` checks it. When every column a spec updates or increments is 8 bytes wide
//! and it never deletes or blindly overwrites rows of their tables, each committed update adds
//! exactly one to a column and each increment its amount, and the check after a run compares
//! the columns' total with the committed transactions' ledger: a lost update shows.

mod dist;
pub mod model;
#[cfg(feature = "cli")]
mod parse;

pub use model::{Count, KeyDist, Op, OpKind, Spec, TableDef, TxnDef};
#[cfg(feature = "cli")]
pub use parse::{parse, SpecError};

use crate::engine::loader::parallel_load;
use crate::engine::{
    AccessMode, AccessSet, Accumulation, Database, Generator, Procedure, Protocol, Recon, Tx,
    TxnType, Worker, Workload, ALL_COLUMNS,
};
use crate::error::{Abort, Error};
use crate::storage::index::IndexKind;
use crate::storage::{TableId, TableSpec};
use dist::Sampler;
use rand::{RngExt, SeedableRng};
use std::cell::Cell;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Reads and parses the spec at `path`, with a one-line message naming the file (and the line
/// and column) when it cannot.
#[cfg(feature = "cli")]
pub fn load_file(path: &str) -> Result<Spec, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read spec {path}: {e}"))?;
    parse(path, &text).map_err(|e| e.to_string())
}

/// What a workload keeps of its spec: the spec, its templates and the rows it writes.
#[derive(Debug)]
struct Compiled {
    spec: Spec,
    types: &'static [TxnType],
    /// Per type and operation: the base sampler of its keys.
    samplers: Vec<Vec<Sampler>>,
    /// Per table: the row that blind writes and inserts write (zeros).
    zero_rows: Vec<Vec<u8>>,
    /// Whether the ledger check applies (see the module docs).
    ledgered: bool,
    /// Per table: the columns whose totals the ledger check sums.
    counted: Vec<Vec<usize>>,
    /// Cumulative weights, for drawing a type.
    cumulative: Vec<u32>,
}

/// A workload described by a [`Spec`].
#[derive(Debug)]
pub struct SpecWorkload {
    compiled: Arc<Compiled>,
    name: &'static str,
    /// Per table: the next insert key.
    counters: Arc<[AtomicU64]>,
    ledger: Arc<AtomicI64>,
}

impl SpecWorkload {
    /// The workload of `spec` (validated here too); `threads` compute Zipf's constants.
    pub fn new(spec: Spec, threads: usize) -> Result<Self, Error> {
        spec.validate().map_err(Error::Config)?;
        let samplers = spec
            .txns
            .iter()
            .map(|t| {
                t.ops
                    .iter()
                    .map(|o| Sampler::new(o.keys, spec.tables[o.table].rows, threads))
                    .collect()
            })
            .collect();
        let zero_rows = spec.tables.iter().map(|t| vec![0u8; t.row_bytes() as usize]).collect();
        let mut counted: Vec<Vec<usize>> = vec![Vec::new(); spec.tables.len()];
        let mut ledgered = true;
        for op in spec.txns.iter().flat_map(|t| &t.ops) {
            let table = &spec.tables[op.table];
            let cols: Vec<usize> = match op.kind {
                OpKind::Update => {
                    (0..table.columns.len()).filter(|c| op.columns >> c & 1 == 1).collect()
                }
                OpKind::Increment => op.increment.iter().map(|i| i.0).collect(),
                _ => continue,
            };
            for c in cols {
                ledgered &= table.columns[c].1 == 8;
                if !counted[op.table].contains(&c) {
                    counted[op.table].push(c);
                }
            }
        }
        for op in spec.txns.iter().flat_map(|t| &t.ops) {
            let counted_table = !counted[op.table].is_empty();
            // Deletes and blind writes reset what updates added; on a hash table the check finds
            // rows by probing the keys below the insert counter, which a row inserted at a drawn
            // key may lie beyond.
            let hash = spec.tables[op.table].index == IndexKind::Hash;
            let escapes = op.kind == OpKind::Insert && op.keys != KeyDist::Next;
            if counted_table
                && (matches!(op.kind, OpKind::Delete | OpKind::Write) || (hash && escapes))
            {
                ledgered = false;
            }
        }
        // Nothing counted, nothing to check.
        ledgered &= counted.iter().any(|c| !c.is_empty());
        let mut acc = 0;
        let cumulative = spec
            .txns
            .iter()
            .map(|t| {
                acc += t.weight;
                acc
            })
            .collect();
        let counters = spec.tables.iter().map(|t| AtomicU64::new(t.rows)).collect();
        let name = Box::leak(format!("spec:{}", spec.name).into_boxed_str());
        let types = spec.templates();
        Ok(SpecWorkload {
            compiled: Arc::new(Compiled {
                spec,
                types,
                samplers,
                zero_rows,
                ledgered,
                counted,
                cumulative,
            }),
            name,
            counters,
            ledger: Arc::new(AtomicI64::new(0)),
        })
    }

    /// The spec it runs.
    pub fn spec(&self) -> &Spec {
        &self.compiled.spec
    }

    /// The tables of `spec`, with room for what its inserts may add.
    pub fn tables_for(spec: &Spec) -> Vec<TableSpec> {
        spec.tables
            .iter()
            .map(|t| {
                let inserts = spec
                    .txns
                    .iter()
                    .flat_map(|x| &x.ops)
                    .any(|o| o.kind == OpKind::Insert && spec.tables[o.table].name == t.name);
                let mut offset = 0;
                let cols: Vec<(&str, usize, usize)> = t
                    .columns
                    .iter()
                    .map(|(n, w)| {
                        let c = (n.as_str(), offset, *w as usize);
                        offset += *w as usize;
                        c
                    })
                    .collect();
                let room = if inserts { t.rows.max(16 << 20) } else { 1 << 16 };
                TableSpec::new(t.name.clone(), t.row_bytes() as usize, t.rows)
                    .with_index(t.index)
                    .with_capacity(t.rows + room)
                    .with_columns(&cols)
            })
            .collect()
    }
}

impl Workload for SpecWorkload {
    type Proc = SpecTxn;
    type Gen = SpecGen;

    fn check_mix(&self, types: &[usize]) -> Result<(), String> {
        if types.iter().all(|&t| self.compiled.spec.txns[t].weight == 0) {
            return Err("the chosen transaction types all have weight 0".into());
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn tables(&self) -> Vec<TableSpec> {
        SpecWorkload::tables_for(&self.compiled.spec)
    }

    fn txn_types(&self) -> &[TxnType] {
        self.compiled.types
    }

    fn load<P: Protocol>(&self, db: &Database<P>, threads: usize) -> Result<(), Error> {
        for (i, t) in self.compiled.spec.tables.iter().enumerate() {
            let table = TableId(i as u32);
            let row = &self.compiled.zero_rows[i];
            parallel_load(db, t.rows, 1 << 14, threads, &t.name, |loader, keys| {
                for key in keys {
                    loader.insert(table, key, row)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    fn generator(&self, worker: usize, threads: usize, seed: u64) -> SpecGen {
        let c = &self.compiled;
        let cursors = c
            .spec
            .txns
            .iter()
            .flat_map(|t| &t.ops)
            .map(|o| {
                // Worker w of n starts its walk at w/n of the table.
                c.spec.tables[o.table].rows / threads.max(1) as u64 * worker as u64
            })
            .collect();
        SpecGen {
            compiled: c.clone(),
            counters: self.counters.clone(),
            rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed),
            cursors,
            types: (0..c.spec.txns.len()).collect(),
            net: 0,
            ledger: self.ledger.clone(),
        }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.compiled.spec).expect("serializable")
    }

    fn data_config(&self) -> serde_json::Value {
        serde_json::to_value(&self.compiled.spec.tables).expect("serializable")
    }

    fn continue_from(&mut self, previous: &Self) {
        self.counters = previous.counters.clone();
        self.ledger = previous.ledger.clone();
    }

    fn ledgered(&self) -> bool {
        self.compiled.ledgered
    }

    fn adopt_ledger(&mut self, total: i64) {
        self.ledger = Arc::new(AtomicI64::new(total));
    }

    fn invariants(&self) -> Option<&'static str> {
        self.compiled.ledgered.then_some(
            "the updated and incremented columns total what the committed transactions added",
        )
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let c = &self.compiled;
        if !c.ledgered {
            return Ok(());
        }
        let mut total = 0i64;
        for (t, cols) in c.counted.iter().enumerate() {
            if cols.is_empty() {
                continue;
            }
            let def = &c.spec.tables[t];
            let offsets: Vec<usize> = cols.iter().map(|&c| def.offset(c)).collect();
            let mut add = |row: &[u8]| {
                for &o in &offsets {
                    let v = i64::from_le_bytes(row[o..o + 8].try_into().expect("8 bytes"));
                    total = total.wrapping_add(v);
                }
            };
            let table = TableId(t as u32);
            if def.index == IndexKind::Hash {
                // A hash table cannot scan: probe every key the table can hold (loaded keys and
                // the insert counter's; `ledgered` requires hash tables' inserts to use it).
                use crate::engine::Recon as _;
                for k in 0..self.counters[t].load(Ordering::Acquire) {
                    db.peek(table, k, &mut add);
                }
            } else {
                db.visit_present(table, 0, u64::MAX, usize::MAX, |_, row| {
                    add(row);
                    ControlFlow::Continue(())
                });
            }
        }
        let want = self.ledger.load(Ordering::Acquire);
        if total != want {
            return Err(format!(
                "the updated and incremented columns total {total}, but the committed \
                 transactions added {want}: {} lost",
                want.wrapping_sub(total)
            ));
        }
        Ok(())
    }
}

/// One transaction of a spec: its type and the keys each operation drew.
#[derive(Debug)]
pub struct SpecTxn {
    compiled: Arc<Compiled>,
    ty: usize,
    /// Every operation's keys, one after another.
    keys: Vec<u64>,
    /// Per operation: where its keys start in `keys`, and (scans) the rows to read.
    at: Vec<(u32, u32)>,
    /// Rolls back on purpose after its operations.
    abort: bool,
    /// What the last run added to the counted columns (updates of present rows, increments).
    added: Cell<i64>,
}

impl SpecTxn {
    fn keys(&self, op: usize) -> &[u64] {
        let start = self.at[op].0 as usize;
        let end = self.at.get(op + 1).map_or(self.keys.len(), |a| a.0 as usize);
        &self.keys[start..end]
    }

    fn run_op<W: Worker>(
        &self,
        tx: &mut Tx<'_, W>,
        i: usize,
        op: &Op,
        sink: &mut u8,
        added: &mut i64,
    ) -> Result<(), Abort> {
        let table = TableId(op.table as u32);
        let c = &self.compiled;
        let def = &c.spec.tables[op.table];
        for &key in self.keys(i) {
            match op.kind {
                OpKind::Read => {
                    if let Some(b) =
                        tx.read_cols(table, key, op.columns, |row| first(row, def, op.columns))?
                    {
                        *sink ^= b;
                    }
                }
                OpKind::ReadForUpdate => {
                    tx.read_for_update(table, key, |row| row.first().copied())?;
                }
                OpKind::Update => {
                    let cols = op.columns;
                    if let Some(n) =
                        tx.update_cols(table, key, cols, cols, |row| bump(row, def, cols))?
                    {
                        *added = added.wrapping_add(n);
                    }
                }
                OpKind::Write => {
                    tx.write(table, key, &c.zero_rows[op.table])?;
                }
                OpKind::Insert => {
                    tx.insert(table, key, &c.zero_rows[op.table])?;
                }
                OpKind::Delete => {
                    tx.delete(table, key)?;
                }
                OpKind::Scan => {
                    let len = self.at[i].1 as usize;
                    tx.scan(table, key, u64::MAX, len, |_, row| {
                        *sink ^= row.first().copied().unwrap_or(0);
                        ControlFlow::Continue(())
                    })?;
                }
                OpKind::Increment => {
                    let (col, by) = op.increment.expect("an increment names its column");
                    if tx.accumulate(table, key, Accumulation::add_i64(col, def.offset(col), by))? {
                        *added = added.wrapping_add(by);
                    }
                }
            }
        }
        Ok(())
    }
}

impl SpecTxn {
    /// Prefetches the rows the operations `ops` will touch by key (every key is drawn before
    /// the transaction runs), in batches so that a protocol can overlap the lookups, as YCSB's
    /// procedure does. Inserts and scans have no row to fetch yet.
    fn prefetch<W: Worker>(&self, tx: &mut Tx<'_, W>, ops: std::ops::Range<usize>) {
        let def = &self.compiled.spec.txns[self.ty];
        let mut batch = [(TableId(0), 0, ALL_COLUMNS); 16];
        let mut n = 0;
        for i in ops {
            let op = &def.ops[i];
            if matches!(op.kind, OpKind::Insert | OpKind::Scan) {
                continue;
            }
            for &k in self.keys(i) {
                batch[n] = (TableId(op.table as u32), k, op.columns);
                n += 1;
                if n == batch.len() {
                    tx.prefetch_many(&batch);
                    n = 0;
                }
            }
        }
        tx.prefetch_many(&batch[..n]);
    }
}

/// The first byte of the first column in `cols` (what a read consumes).
#[inline]
fn first(row: &[u8], def: &TableDef, cols: u64) -> u8 {
    let c = cols.trailing_zeros() as usize;
    if c >= def.columns.len() {
        return row.first().copied().unwrap_or(0);
    }
    row.get(def.offset(c)).copied().unwrap_or(0)
}

/// Adds one to the leading integer of each column in `cols`: 8 bytes little-endian, or the
/// column's bytes when it is narrower (wrapping in its width). Returns how many columns.
#[inline]
fn bump(row: &mut [u8], def: &TableDef, cols: u64) -> i64 {
    let mut offset = 0;
    let mut count = 0;
    for (c, (_, w)) in def.columns.iter().enumerate() {
        let w = *w as usize;
        if cols >> c & 1 == 1 {
            let n = w.min(8);
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&row[offset..offset + n]);
            let v = u64::from_le_bytes(b).wrapping_add(1);
            row[offset..offset + n].copy_from_slice(&v.to_le_bytes()[..n]);
            count += 1;
        }
        offset += w;
    }
    count
}

impl Procedure for SpecTxn {
    fn txn_type(&self) -> usize {
        self.ty
    }

    #[inline]
    fn read_only(&self) -> bool {
        self.compiled.spec.txns[self.ty].read_only
    }

    fn declare<R: Recon>(&self, _recon: &R, set: &mut AccessSet) -> bool {
        for (i, op) in self.compiled.spec.txns[self.ty].ops.iter().enumerate() {
            let table = TableId(op.table as u32);
            for &k in self.keys(i) {
                match op.kind {
                    OpKind::Read => set.read(table, k),
                    OpKind::Scan => set.range(table, k, u64::MAX, AccessMode::Read),
                    _ => set.write(table, k),
                }
            }
        }
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let def = &self.compiled.spec.txns[self.ty];
        let mut sink = 0u8;
        let mut added = 0i64;
        for (p, range) in def.pieces.iter().enumerate() {
            // A piece may run again (IC3): what it adds is counted from its last run.
            added += tx.piece(p, |tx| {
                self.prefetch(tx, range.clone());
                let mut piece_added = 0;
                for i in range.clone() {
                    self.run_op(tx, i, &def.ops[i], &mut sink, &mut piece_added)?;
                }
                Ok(piece_added)
            })?;
        }
        self.added.set(added);
        std::hint::black_box(sink);
        crate::util::spin_for(Duration::from_micros(def.think_us));
        if self.abort {
            return tx.user_abort();
        }
        Ok(())
    }

    fn ledger(&self) -> i64 {
        if self.compiled.ledgered {
            self.added.get()
        } else {
            0
        }
    }
}

/// A worker's generator of spec transactions.
pub struct SpecGen {
    compiled: Arc<Compiled>,
    counters: Arc<[AtomicU64]>,
    rng: rand::rngs::Xoshiro256PlusPlus,
    /// Per operation of every type, in order: the sequential walk's position.
    cursors: Vec<u64>,
    /// The types it draws from (all, unless restricted).
    types: Vec<usize>,
    /// What this worker's committed transactions added, not yet in the shared ledger.
    net: i64,
    ledger: Arc<AtomicI64>,
}

impl Drop for SpecGen {
    fn drop(&mut self) {
        // AcqRel: the check's Acquire load pairs with it, after the workers are joined.
        self.ledger.fetch_add(self.net, Ordering::AcqRel);
    }
}

impl SpecGen {
    fn draw_type(&mut self) -> usize {
        let c = &self.compiled;
        if self.types.len() == c.spec.txns.len() {
            let r = self.rng.random_range(0..100);
            return c.cumulative.iter().position(|&w| r < w).expect("weights sum to 100");
        }
        let total: u32 = self.types.iter().map(|&t| c.spec.txns[t].weight).sum();
        let mut r = self.rng.random_range(0..total.max(1));
        for &t in &self.types {
            let w = c.spec.txns[t].weight;
            if r < w {
                return t;
            }
            r -= w;
        }
        self.types[0]
    }
}

/// Draws `c` for the transaction being filled into `slot`.
fn drawn(c: Count, slot: &SpecTxn, rng: &mut rand::rngs::Xoshiro256PlusPlus) -> usize {
    match c.like {
        Some(op) => {
            let end = slot.at.get(op + 1).map_or(slot.keys.len(), |a| a.0 as usize);
            end - slot.at[op].0 as usize
        }
        None => dist::count(c, rng) as usize,
    }
}

impl Generator for SpecGen {
    type Proc = SpecTxn;

    fn blank(&self) -> SpecTxn {
        let most = self.compiled.spec.txns.iter().map(|t| t.ops.len()).max().unwrap_or(0);
        SpecTxn {
            compiled: self.compiled.clone(),
            ty: 0,
            keys: Vec::with_capacity(most * 4),
            at: Vec::with_capacity(most),
            abort: false,
            added: Cell::new(0),
        }
    }

    fn fill(&mut self, slot: &mut SpecTxn) {
        let ty = self.draw_type();
        // Borrowed field by field: cloning the shared `Arc` here would write its count, a cache
        // line every worker shares, once per transaction.
        let SpecGen { compiled, counters, rng, cursors, .. } = self;
        let def = &compiled.spec.txns[ty];
        slot.ty = ty;
        slot.keys.clear();
        slot.at.clear();
        let cursor_base: usize = compiled.spec.txns[..ty].iter().map(|t| t.ops.len()).sum();
        for (i, op) in def.ops.iter().enumerate() {
            let start = slot.keys.len();
            let length = if op.kind == OpKind::Scan { dist::count(op.length, rng) } else { 0 };
            slot.at.push((start as u32, length));
            match op.keys.source() {
                Some(src) => {
                    let s0 = slot.at[src].0 as usize;
                    let s1 = slot.at[src + 1].0 as usize;
                    let n = match op.count {
                        Some(cnt) => drawn(cnt, slot, rng),
                        None => s1 - s0,
                    };
                    for j in 0..n {
                        let base = slot.keys[s0 + j % (s1 - s0).max(1)];
                        let k = match op.keys {
                            KeyDist::Parent(_, f) => base / f,
                            KeyDist::Child(_, f) => {
                                base.wrapping_mul(f).wrapping_add(rng.random_range(0..f))
                            }
                            _ => base,
                        };
                        slot.keys.push(k);
                    }
                }
                None => {
                    let n = op.count.map_or(1, |cnt| drawn(cnt, slot, rng));
                    let sampler = &compiled.samplers[ty][i];
                    let counter = &counters[op.table];
                    let cursor = &mut cursors[cursor_base + i];
                    for _ in 0..n {
                        // Distinct keys (`distinct`): a repeat is drawn again, a bounded number
                        // of times (a table smaller than the count keeps the repeats).
                        let mut k = sampler.draw(rng, cursor, counter);
                        let mut tries = 0;
                        while op.distinct
                            && sampler.repeats()
                            && tries < 64
                            && slot.keys[start..].contains(&k)
                        {
                            k = sampler.draw(rng, cursor, counter);
                            tries += 1;
                        }
                        slot.keys.push(k);
                    }
                }
            }
        }
        slot.abort = def.abort > 0.0 && rng.random::<f64>() < def.abort;
    }

    fn committed(&mut self, done: &SpecTxn) {
        self.net = self.net.wrapping_add(done.ledger());
    }

    fn restrict_mix(&mut self, types: &[usize]) {
        self.types = types.to_vec();
    }

    fn ledger(&self) -> i64 {
        self.net
    }
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::*;
    use crate::workloads::ycsb::{Preset, Ycsb, YcsbArgs};

    fn example(name: &str) -> Spec {
        let path = format!("{}/examples/workloads/{name}", env!("CARGO_MANIFEST_DIR"));
        load_file(&path).unwrap()
    }

    /// The spec YCSB-A and the built-in preset draw the same workload: half the accesses
    /// reads and half blind writes, ten per transaction, on the same Zipf keys (key 0 takes
    /// 1/ζ(10^6, 0.99) of them in both).
    #[test]
    fn the_ycsb_a_spec_draws_what_the_preset_draws() {
        let spec = SpecWorkload::new(example("ycsb-a.toml"), 2).unwrap();
        let args = YcsbArgs { preset: Some(Preset::A), ..YcsbArgs::default() };
        let builtin = Ycsb::new(args.resolve().unwrap(), 2);
        assert_eq!(spec.tables()[0].row_size, builtin.tables()[0].row_size);
        assert_eq!(spec.tables()[0].expected_rows, builtin.tables()[0].expected_rows);
        assert_eq!(spec.tables()[0].index, builtin.tables()[0].index);
        const TXNS: usize = 20_000;
        // (reads, writes, accesses of key 0) over TXNS transactions.
        let mut s = (0u64, 0u64, 0u64);
        let mut g = spec.generator(0, 1, 5);
        let mut slot = g.blank();
        for _ in 0..TXNS {
            g.fill(&mut slot);
            assert_eq!(slot.keys.len(), 10);
            for (i, op) in spec.spec().txns[0].ops.iter().enumerate() {
                match op.kind {
                    OpKind::Read => s.0 += slot.keys(i).len() as u64,
                    OpKind::Write => s.1 += slot.keys(i).len() as u64,
                    other => panic!("YCSB-A has no {other:?}"),
                }
            }
            s.2 += slot.keys.iter().filter(|&&k| k == 0).count() as u64;
        }
        let mut b = (0u64, 0u64, 0u64);
        let mut g = builtin.generator(0, 1, 5);
        let mut slot = g.blank();
        for _ in 0..TXNS {
            g.fill(&mut slot);
            assert_eq!(slot.ops.len(), 10);
            for op in &slot.ops {
                match *op {
                    crate::workloads::ycsb::Op::Read(k) => (b.0 += 1, b.2 += u64::from(k == 0)),
                    crate::workloads::ycsb::Op::Write(k) => (b.1 += 1, b.2 += u64::from(k == 0)),
                    other => panic!("YCSB-A has no {other:?}"),
                };
            }
        }
        let total = (TXNS * 10) as f64;
        let zeta = crate::workloads::zipf::zeta(1_000_000, 0.99, 2);
        for (name, (reads, writes, zero)) in [("spec", s), ("built-in", b)] {
            let r = reads as f64 / total;
            assert!((r - 0.5).abs() < 0.01, "{name}: read share {r}");
            assert_eq!(reads + writes, total as u64, "{name}");
            let z = zero as f64 / total;
            assert!((z * zeta - 1.0).abs() < 0.03, "{name}: key 0 share {z} vs {}", 1.0 / zeta);
        }
    }

    /// Derived keys: `same` repeats the source's keys, `parent` divides, `child` multiplies and
    /// adds below the fanout, and `like` counts as the source drew.
    #[test]
    fn derived_keys_and_counts_follow_their_source() {
        let spec = SpecWorkload::new(example("tpcc-np.toml"), 1).unwrap();
        let mut g = spec.generator(0, 1, 3);
        let mut slot = g.blank();
        let mut seen = [0; 2];
        for _ in 0..2_000 {
            g.fill(&mut slot);
            let ty = slot.ty;
            seen[ty] += 1;
            let district = slot.keys(0)[0];
            assert!(district < 10);
            assert_eq!(slot.keys(1), [district / 10], "the warehouse is the district's parent");
            let customer = slot.keys(2)[0];
            assert_eq!(customer / 3000, district, "the customer is the district's child");
            if ty == 0 {
                let items = slot.keys(3).to_vec();
                assert!((5..=15).contains(&items.len()));
                let mut distinct = items.clone();
                distinct.sort_unstable();
                distinct.dedup();
                assert_eq!(distinct.len(), items.len(), "distinct items");
                assert_eq!(slot.keys(4), &items[..], "stock rows are the items'");
                assert_eq!(slot.keys(7).len(), items.len(), "one order line per item");
                assert!(slot.keys(5)[0] >= 30_000, "orders are inserted above the loaded ones");
            }
        }
        assert!(seen[0] > 900 && seen[1] > 900, "50/50: {seen:?}");
        // The declared set covers every key the transaction touches, in the right mode.
        let mut set = AccessSet::default();
        struct NoRecon;
        impl Recon for NoRecon {
            fn peek<T>(&self, _: TableId, _: u64, _: impl FnOnce(&[u8]) -> T) -> Option<T> {
                None
            }
            fn scan(
                &self,
                _: TableId,
                _: u64,
                _: u64,
                _: usize,
                _: impl FnMut(u64, &[u8]) -> ControlFlow<()>,
            ) -> usize {
                0
            }
        }
        assert!(slot.declare(&NoRecon, &mut set));
        set.seal();
        let def = &spec.spec().txns[slot.ty];
        for (i, op) in def.ops.iter().enumerate() {
            let mode = if op.kind.writes() { AccessMode::Write } else { AccessMode::Read };
            for &k in slot.keys(i) {
                assert!(set.covers(TableId(op.table as u32), k, mode), "op {i} key {k}");
            }
        }
    }

    /// The ledger check applies only where every counted column is 8 bytes and nothing resets
    /// them.
    #[test]
    fn the_ledger_check_applies_where_it_can_be_exact() {
        let ledgered =
            |name: &str| SpecWorkload::new(example(name), 1).unwrap().invariants().is_some();
        assert!(ledgered("inventory-hotspot.toml"));
        assert!(ledgered("tpcc-np.toml"));
        assert!(ledgered("reporting.toml"));
        assert!(!ledgered("ycsb-a.toml"), "nothing to count");
    }
}
