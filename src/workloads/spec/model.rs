//! A declarative workload, validated: tables, transaction types and their operations, with
//! every reference resolved to an index. [`super::parse`] builds it from a TOML file; an
//! embedder can build one by hand and call [`Spec::validate`].

use crate::engine::{AccessMode, Columns, Piece, TableAccess, TxnType, ALL_COLUMNS};
use crate::storage::index::IndexKind;
use crate::storage::TableId;

/// The longest row a spec may declare, in bytes (the storage layer's limit).
pub const MAX_ROW_BYTES: u64 = crate::storage::MAX_ROW_SIZE as u64;
/// The most rows a spec table may declare at load (the engine's tables hold up to 2^40 keys in
/// practice; this bound keeps an impossible size a clear error, not an allocation failure).
pub const MAX_ROWS: u64 = 1 << 36;
/// The most keys one operation may touch per transaction.
pub const MAX_COUNT: u32 = 100_000;

/// A table of a spec.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TableDef {
    /// Name, unique in the spec.
    pub name: String,
    /// Rows loaded, keyed `0..rows`.
    pub rows: u64,
    /// Columns: name and width in bytes, laid out in order (one column `row` when the file
    /// gives only a row size).
    pub columns: Vec<(String, u64)>,
    /// Primary index.
    #[serde(serialize_with = "index_name")]
    pub index: IndexKind,
}

fn index_name<S: serde::Serializer>(k: &IndexKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match k {
        IndexKind::Ordered => "ordered",
        IndexKind::Hash => "hash",
        IndexKind::Dense => "dense",
    })
}

impl TableDef {
    /// Bytes per row.
    pub fn row_bytes(&self) -> u64 {
        self.columns.iter().map(|c| c.1).sum()
    }

    /// Byte offset of column `c`.
    pub fn offset(&self, c: usize) -> usize {
        self.columns[..c].iter().map(|c| c.1 as usize).sum()
    }
}

/// What an operation does to each of its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    /// Reads the row's `columns`.
    Read,
    /// Reads the whole row, taking write intent (a lock, where the protocol has them).
    ReadForUpdate,
    /// Read-modify-write of `columns`: each column's leading integer (8 bytes, or fewer in a
    /// narrower column) goes up by one.
    Update,
    /// Overwrites the whole row without reading it.
    Write,
    /// Inserts a row (zeroed); a key present already inserts nothing.
    Insert,
    /// Deletes the row; an absent key deletes nothing.
    Delete,
    /// Reads the rows of keys `key ..= key + length - 1` that are present, in order.
    Scan,
    /// Adds `by` to `column`'s 8-byte integer without reading it (a commutative
    /// accumulation: IC3 defers it when nothing else reads the column).
    Increment,
}

impl OpKind {
    /// The name in a spec file.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::ReadForUpdate => "read_for_update",
            OpKind::Update => "update",
            OpKind::Write => "write",
            OpKind::Insert => "insert",
            OpKind::Delete => "delete",
            OpKind::Scan => "scan",
            OpKind::Increment => "increment",
        }
    }

    /// Every kind, in the order the file format documents them.
    pub const ALL: [OpKind; 8] = [
        OpKind::Read,
        OpKind::ReadForUpdate,
        OpKind::Update,
        OpKind::Write,
        OpKind::Insert,
        OpKind::Delete,
        OpKind::Scan,
        OpKind::Increment,
    ];

    /// Whether it changes the database.
    pub fn writes(self) -> bool {
        !matches!(self, OpKind::Read | OpKind::Scan)
    }
}

/// Where an operation's keys come from.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyDist {
    /// Uniform over the loaded keys `0..rows`.
    Uniform,
    /// Zipf(θ) over the loaded keys, key 0 hottest (YCSB's generator, as CCBench draws it).
    Zipf(f64),
    /// `accesses` percent of the draws fall uniformly on the first `keys` percent of the
    /// loaded keys, the rest uniformly on the others.
    Hot {
        /// Percent of the keys that are hot (0 < keys < 100).
        keys: f64,
        /// Percent of the draws that go to them (0 to 100).
        accesses: f64,
    },
    /// Recently inserted keys: Zipf(θ) over recency from the table's newest key (YCSB-D).
    Latest(f64),
    /// Each worker walks the loaded keys in order from its own starting point, wrapping.
    Sequential,
    /// The table's insert counter: a fresh key above every loaded and inserted one.
    Next,
    /// The keys of operation `0` of the same transaction (the j-th key is that operation's
    /// j-th, wrapping): a read-modify-write, or the same key in another table.
    Same(usize),
    /// `key / fanout` of operation `0`'s keys: the parent row of a hierarchical key.
    Parent(usize, u64),
    /// `key * fanout + u`, `u` uniform below `fanout`, of operation `0`'s keys: a child row.
    Child(usize, u64),
}

impl KeyDist {
    /// The operation it derives its keys from, if it does.
    pub fn source(&self) -> Option<usize> {
        match *self {
            KeyDist::Same(n) | KeyDist::Parent(n, _) | KeyDist::Child(n, _) => Some(n),
            _ => None,
        }
    }
}

/// A count drawn per transaction: fixed, uniform in an inclusive range, or as many keys as an
/// earlier operation drew (`like`: TPC-C's order lines, one per item).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Count {
    /// Least.
    pub lo: u32,
    /// Most.
    pub hi: u32,
    /// As many as operation `like` of the same transaction drew (then `lo` and `hi` are 0).
    pub like: Option<usize>,
}

impl Count {
    /// Exactly `n`.
    pub const fn fixed(n: u32) -> Self {
        Count { lo: n, hi: n, like: None }
    }

    /// Uniform in `lo..=hi`.
    pub const fn range(lo: u32, hi: u32) -> Self {
        Count { lo, hi, like: None }
    }

    /// As many as operation `op` drew.
    pub const fn like(op: usize) -> Self {
        Count { lo: 0, hi: 0, like: Some(op) }
    }
}

/// One operation of a transaction type.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Op {
    /// What it does.
    pub kind: OpKind,
    /// Table index in [`Spec::tables`].
    pub table: usize,
    /// Where its keys come from.
    pub keys: KeyDist,
    /// How many keys. `None`: one, or as many as the operation it derives its keys from drew.
    pub count: Option<Count>,
    /// Its keys are distinct within the transaction (drawn again on a repeat, where the
    /// distribution and the table's size allow).
    pub distinct: bool,
    /// Columns read or updated (a mask; every column when the file names none).
    pub columns: Columns,
    /// For increments: the column and the amount.
    pub increment: Option<(usize, i64)>,
    /// For scans: how many keys the range covers.
    pub length: Count,
}

/// A transaction type of a spec.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TxnDef {
    /// Name, unique in the spec.
    pub name: String,
    /// Percent of the mix.
    pub weight: u32,
    /// Writes nothing (begun read-only; derived from the operations, and checked against the
    /// file's `read_only` when it gives one).
    pub read_only: bool,
    /// Microseconds the transaction spends after its operations and before it commits,
    /// holding what it read and wrote (an interactive client's round trip).
    pub think_us: u64,
    /// Probability that it rolls back on purpose after its operations (TPC-C's 1 %).
    pub abort: f64,
    /// Its operations, in order.
    pub ops: Vec<Op>,
    /// Its pieces (IC3): consecutive ranges of operation indices covering them all.
    pub pieces: Vec<std::ops::Range<usize>>,
}

/// A validated declarative workload.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Spec {
    /// Name in results.
    pub name: String,
    /// Tables, in `TableId` order.
    pub tables: Vec<TableDef>,
    /// Transaction types, in the order of their statistics.
    pub txns: Vec<TxnDef>,
}

impl Spec {
    /// Checks what the file format promises of a spec built by hand (a parsed one passes):
    /// names unique, weights summing to 100, references backwards, parameters in range.
    pub fn validate(&self) -> Result<(), String> {
        if self.tables.is_empty() {
            return Err("a spec needs at least one [[table]]".into());
        }
        if self.txns.is_empty() {
            return Err("a spec needs at least one [[txn]]".into());
        }
        for (i, t) in self.tables.iter().enumerate() {
            if self.tables[..i].iter().any(|u| u.name == t.name) {
                return Err(format!("table `{}` is declared twice", t.name));
            }
            if t.rows == 0 || t.rows > MAX_ROWS {
                return Err(format!(
                    "table `{}`: {} rows is out of range (1 to {MAX_ROWS})",
                    t.name, t.rows
                ));
            }
            if t.columns.is_empty() || t.columns.len() > 64 {
                return Err(format!("table `{}` needs 1 to 64 columns", t.name));
            }
            if t.columns.iter().any(|c| c.1 == 0) || t.row_bytes() > MAX_ROW_BYTES {
                return Err(format!(
                    "table `{}`: rows of {} bytes are out of range (every column at least 1 \
                     byte, rows at most {MAX_ROW_BYTES})",
                    t.name,
                    t.row_bytes()
                ));
            }
        }
        let total: u64 = self.txns.iter().map(|t| u64::from(t.weight)).sum();
        if total != 100 {
            return Err(format!("the transaction weights sum to {total}, not 100"));
        }
        for (i, t) in self.txns.iter().enumerate() {
            if self.txns[..i].iter().any(|u| u.name == t.name) {
                return Err(format!("transaction `{}` is declared twice", t.name));
            }
            if t.ops.is_empty() {
                return Err(format!("transaction `{}` has no operations", t.name));
            }
            let covered: Vec<usize> = t.pieces.iter().flat_map(|p| p.clone()).collect();
            if covered != (0..t.ops.len()).collect::<Vec<_>>()
                || t.pieces.iter().any(|p| p.is_empty())
            {
                return Err(format!(
                    "transaction `{}`: pieces must list every operation once, in order",
                    t.name
                ));
            }
            if t.read_only == t.ops.iter().any(|o| o.kind.writes()) {
                return Err(format!(
                    "transaction `{}` is {}read-only but its operations {}",
                    t.name,
                    if t.read_only { "" } else { "not " },
                    if t.read_only { "write" } else { "only read" }
                ));
            }
            if !(0.0..=1.0).contains(&t.abort) {
                return Err(format!(
                    "transaction `{}`: abort {} is out of range (0 to 1)",
                    t.name, t.abort
                ));
            }
            for (j, op) in t.ops.iter().enumerate() {
                op.validate(self, j)
                    .map_err(|m| format!("transaction `{}`, op {j}: {m}", t.name))?;
            }
        }
        Ok(())
    }

    /// One line for a run's header: the name, the tables and the mix.
    pub fn summary(&self) -> String {
        let tables: Vec<String> = self
            .tables
            .iter()
            .map(|t| format!("{} ({} rows of {} B)", t.name, t.rows, t.row_bytes()))
            .collect();
        let mix: Vec<String> =
            self.txns.iter().map(|t| format!("{} {} %", t.name, t.weight)).collect();
        format!("spec {}: tables {}; mix {}", self.name, tables.join(", "), mix.join(", "))
    }

    /// The engine's templates for the transaction types: each piece declares the tables,
    /// columns and modes of its operations. Built once per spec and kept for the process (the
    /// engine's [`TxnType`] is static, as a compiled workload's is).
    pub fn templates(&self) -> &'static [TxnType] {
        let types: Vec<TxnType> = self
            .txns
            .iter()
            .map(|t| {
                let pieces: Vec<Piece> = t
                    .pieces
                    .iter()
                    .enumerate()
                    .map(|(i, range)| Piece {
                        name: leak(if t.pieces.len() == 1 {
                            "ops".to_string()
                        } else {
                            format!("piece{i}")
                        }),
                        accesses: Vec::leak(accesses(&t.ops[range.clone()])),
                    })
                    .collect();
                TxnType { name: leak(t.name.clone()), pieces: Vec::leak(pieces) }
            })
            .collect();
        Vec::leak(types)
    }
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The template accesses of `ops`: one per table and mode, columns merged.
fn accesses(ops: &[Op]) -> Vec<TableAccess> {
    let mut out: Vec<TableAccess> = Vec::new();
    let mut add = |table: usize, mode: AccessMode, columns: Columns| {
        let table = TableId(table as u32);
        match out.iter_mut().find(|a| a.table == table && a.mode == mode) {
            Some(a) => a.columns |= columns,
            None => out.push(TableAccess { table, mode, columns }),
        }
    };
    for op in ops {
        match op.kind {
            OpKind::Read => add(op.table, AccessMode::Read, op.columns),
            OpKind::Scan => add(op.table, AccessMode::Read, ALL_COLUMNS),
            OpKind::Update => add(op.table, AccessMode::Write, op.columns),
            OpKind::Increment => {
                add(op.table, AccessMode::Accumulate, 1 << op.increment.map_or(0, |i| i.0))
            }
            OpKind::ReadForUpdate | OpKind::Write | OpKind::Insert | OpKind::Delete => {
                add(op.table, AccessMode::Write, ALL_COLUMNS)
            }
        }
    }
    out
}

impl Op {
    fn validate(&self, spec: &Spec, at: usize) -> Result<(), String> {
        let table = spec.tables.get(self.table).ok_or("no such table")?;
        match self.keys {
            KeyDist::Zipf(t) | KeyDist::Latest(t) if !(0.0..=0.999).contains(&t) => {
                return Err(format!("theta {t} is out of range (0 to 0.999)"));
            }
            KeyDist::Hot { keys, accesses }
                if !(keys > 0.0 && keys < 100.0 && (0.0..=100.0).contains(&accesses)) =>
            {
                return Err(format!(
                    "hot keys {keys} % and accesses {accesses} % are out of range (keys above 0 \
                     and below 100, accesses 0 to 100)"
                ));
            }
            KeyDist::Next if !matches!(self.kind, OpKind::Insert) => {
                return Err("key \"next\" (the insert counter) is for inserts".into());
            }
            KeyDist::Parent(_, 0) | KeyDist::Child(_, 0) => {
                return Err("fanout must be at least 1".into());
            }
            _ => {}
        }
        if let Some(n) = self.keys.source() {
            if n >= at {
                return Err(format!("key refers to op {n}, which is not before it"));
            }
        }
        if let Some(Count { like: Some(n), .. }) = self.count {
            if n >= at {
                return Err(format!("count refers to op {n}, which is not before it"));
            }
        } else if let Some(c) = self.count {
            if c.lo == 0 || c.lo > c.hi || c.hi > MAX_COUNT {
                return Err(format!(
                    "count {}..={} is out of range (1 to {MAX_COUNT}, least first)",
                    c.lo, c.hi
                ));
            }
        }
        if self.kind == OpKind::Scan {
            if table.index == IndexKind::Hash {
                return Err(format!("table `{}` has a hash index, which cannot scan", table.name));
            }
            let l = self.length;
            if l.lo == 0 || l.lo > l.hi || l.hi > MAX_COUNT {
                return Err(format!(
                    "length {}..={} is out of range (1 to {MAX_COUNT}, least first)",
                    l.lo, l.hi
                ));
            }
        }
        if let Some((c, _)) = self.increment {
            let width = table.columns.get(c).map_or(0, |c| c.1);
            if width != 8 {
                return Err(format!(
                    "increment needs an 8-byte column; `{}` has {width} bytes",
                    table.columns.get(c).map_or("?", |c| c.0.as_str())
                ));
            }
        }
        let all = if table.columns.len() == 64 { u64::MAX } else { (1 << table.columns.len()) - 1 };
        if self.columns & !all != 0 && self.columns != ALL_COLUMNS {
            return Err("a column beyond the table's".into());
        }
        Ok(())
    }
}
