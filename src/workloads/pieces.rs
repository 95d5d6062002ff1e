//! IC3's micro-benchmark (Wang et al., SIGMOD 2016, §6.2 and §6.7): one transaction type of
//! `pieces` pieces, piece `i` updating 4 distinct records of table `i`. Contention comes from
//! each piece's first record, drawn from the first `scope` keys of its table (a scope of 10 is
//! the paper's 10 % contention rate); the other three are drawn from the whole table. A piece
//! takes its records in key order (the paper sorts them to keep its 2PL pieces deadlock-free),
//! so two transactions meet each piece's hot record in the same piece order.
//!
//! §6.7's user-initiated aborts: with probability `user_abort` a transaction rolls back on its
//! own after one of its pieces (chosen at random), which under IC3 cascades to the transactions
//! that read what that piece wrote.
//!
//! Rows are 100 bytes (the paper's value size) under 8-byte keys; an update adds 1 to the
//! row's first 8 bytes, a counter. The invariant: the counters of every table sum to 4 times
//! the committed transactions (each commits 4 increments per table). The paper loads 1 M
//! records per table; `rows` makes that smaller for quick runs.

use crate::engine::loader::parallel_load;
use crate::engine::{
    AccessMode, AccessSet, Database, Generator, Piece, Procedure, Protocol, Recon, TableAccess, Tx,
    TxnType, Worker, Workload, ALL_COLUMNS,
};
use crate::error::{Abort, Error};
use crate::storage::index::IndexKind;
use crate::storage::{TableId, TableSpec};
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The most pieces a transaction can have (the paper's longest transactions have 64).
pub const MAX_PIECES: u32 = 64;
/// Updates per piece.
pub const UPDATES: usize = 4;
/// Bytes per row (the paper's 100-byte values).
pub const ROW: usize = 100;

/// The workload's parameters.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PiecesConfig {
    /// Pieces per transaction, each on its own table (the paper: 2, 10 and 64).
    pub pieces: u32,
    /// Rows per table (the paper: 1 M).
    pub rows: u64,
    /// Keys the first update of a piece draws from (the paper: 10 to 1 M; 100 is 1 %
    /// contention).
    pub scope: u64,
    /// Percent of transactions that roll back on their own after a piece (§6.7: 0 to 10).
    pub user_abort: f64,
}

impl Default for PiecesConfig {
    /// The paper's moderate transactions (10 pieces) over 1 M rows per table, at 1 % contention.
    fn default() -> Self {
        PiecesConfig { pieces: 10, rows: 1_000_000, scope: 100, user_abort: 0.0 }
    }
}

impl PiecesConfig {
    /// Checks the ranges; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_PIECES).contains(&self.pieces) {
            return Err(format!("--pieces {} is out of range (1 to {MAX_PIECES})", self.pieces));
        }
        if !(UPDATES as u64..=1 << 32).contains(&self.rows) {
            return Err(format!(
                "--table-rows {} is out of range ({UPDATES} to 4294967296: a piece updates \
                 {UPDATES} distinct rows)",
                self.rows
            ));
        }
        if self.scope == 0 || self.scope > self.rows {
            return Err(format!(
                "--scope {} is out of range (1 to --table-rows, {})",
                self.scope, self.rows
            ));
        }
        if !(self.user_abort.is_finite() && (0.0..=100.0).contains(&self.user_abort)) {
            return Err(format!("--user-abort {} is out of range (0 to 100)", self.user_abort));
        }
        Ok(())
    }

    /// One line for the run's header.
    pub fn summary(&self) -> String {
        format!(
            "IC3 micro-benchmark: {} pieces of {UPDATES} updates, {} rows per table, first \
             update from {} keys ({:.3} % contention), {} % user aborts",
            self.pieces,
            self.rows,
            self.scope,
            100.0 / self.scope as f64,
            self.user_abort
        )
    }
}

const fn piece(table: u32) -> Piece {
    const NAMES: [&str; MAX_PIECES as usize] = [
        "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11", "t12", "t13",
        "t14", "t15", "t16", "t17", "t18", "t19", "t20", "t21", "t22", "t23", "t24", "t25", "t26",
        "t27", "t28", "t29", "t30", "t31", "t32", "t33", "t34", "t35", "t36", "t37", "t38", "t39",
        "t40", "t41", "t42", "t43", "t44", "t45", "t46", "t47", "t48", "t49", "t50", "t51", "t52",
        "t53", "t54", "t55", "t56", "t57", "t58", "t59", "t60", "t61", "t62", "t63",
    ];
    // One access per piece, in a static array of its own.
    const fn access(t: u32) -> TableAccess {
        TableAccess { table: TableId(t), mode: AccessMode::Write, columns: ALL_COLUMNS }
    }
    static ACCESSES: [TableAccess; MAX_PIECES as usize] = {
        let mut a = [access(0); MAX_PIECES as usize];
        let mut i = 0;
        while i < MAX_PIECES as usize {
            a[i] = access(i as u32);
            i += 1;
        }
        a
    };
    Piece { name: NAMES[table as usize], accesses: std::slice::from_ref(&ACCESSES[table as usize]) }
}

/// Piece `i` updates table `i` (named after it).
static PIECES: [Piece; MAX_PIECES as usize] = {
    let mut p = [piece(0); MAX_PIECES as usize];
    let mut i = 0;
    while i < MAX_PIECES as usize {
        p[i] = piece(i as u32);
        i += 1;
    }
    p
};

/// The workload.
pub struct Pieces {
    cfg: PiecesConfig,
    /// Its one type, of `cfg.pieces` pieces.
    types: [TxnType; 1],
    /// Transactions committed so far (the ledger the invariant checks).
    ledger: Arc<AtomicI64>,
}

impl Pieces {
    /// The workload for `cfg` (validated).
    pub fn new(cfg: PiecesConfig) -> Self {
        let types = [TxnType { name: "update", pieces: &PIECES[..cfg.pieces as usize] }];
        Pieces { cfg, types, ledger: Arc::new(AtomicI64::new(0)) }
    }

    /// The tables for `cfg`: one per piece.
    pub fn tables_for(cfg: &PiecesConfig) -> Vec<TableSpec> {
        (0..cfg.pieces)
            .map(|i| TableSpec::new(format!("t{i}"), ROW, cfg.rows).with_index(IndexKind::Hash))
            .collect()
    }

    /// Transactions committed so far.
    pub fn ledger(&self) -> i64 {
        self.ledger.load(Ordering::Acquire)
    }
}

fn counter(r: &[u8]) -> u64 {
    u64::from_le_bytes(r[..8].try_into().expect("rows hold a counter"))
}

impl Workload for Pieces {
    type Proc = PiecesTxn;
    type Gen = PiecesGen;

    fn name(&self) -> &'static str {
        "pieces"
    }

    fn tables(&self) -> Vec<TableSpec> {
        Self::tables_for(&self.cfg)
    }

    fn txn_types(&self) -> &[TxnType] {
        &self.types
    }

    fn load<P: Protocol>(&self, db: &Database<P>, threads: usize) -> Result<(), Error> {
        let pieces = self.cfg.pieces;
        parallel_load(db, self.cfg.rows, 1 << 14, threads, "rows per table", |loader, keys| {
            let mut row = [0u8; ROW];
            for k in keys {
                // A recognisable filler after the counter (0).
                row[8..16].copy_from_slice(&k.to_le_bytes());
                for t in 0..pieces {
                    loader.insert(TableId(t), k, &row)?;
                }
            }
            Ok(())
        })
    }

    fn generator(&self, _worker: usize, _threads: usize, seed: u64) -> PiecesGen {
        PiecesGen {
            cfg: self.cfg.clone(),
            rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed),
            committed: 0,
            ledger: self.ledger.clone(),
        }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.cfg).expect("plain data serializes")
    }

    fn data_config(&self) -> serde_json::Value {
        serde_json::json!({ "pieces": self.cfg.pieces, "rows": self.cfg.rows })
    }

    fn continue_from(&mut self, previous: &Self) {
        // The counters include every earlier run's commits.
        self.ledger = previous.ledger.clone();
    }

    fn ledgered(&self) -> bool {
        true
    }

    fn adopt_ledger(&mut self, total: i64) {
        self.ledger = Arc::new(AtomicI64::new(total));
    }

    fn invariants(&self) -> Option<&'static str> {
        Some("every table's counters sum to 4 per committed transaction")
    }

    /// Every table's counters sum to 4 per committed transaction. Call it with every worker
    /// finished (their generators flush on drop).
    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        use crate::engine::Recon as _;
        let want = UPDATES as u64 * self.ledger() as u64;
        for t in 0..self.cfg.pieces {
            let sum: u64 =
                (0..self.cfg.rows).map(|k| db.peek(TableId(t), k, counter).unwrap_or(0)).sum();
            if sum != want {
                return Err(format!(
                    "pieces: table t{t}'s counters sum to {sum}, expected {want} ({UPDATES} per \
                     committed transaction, {} committed)",
                    self.ledger()
                ));
            }
        }
        Ok(())
    }

    fn notes(&self) -> Vec<String> {
        if self.cfg.rows == PiecesConfig::default().rows {
            Vec::new()
        } else {
            vec![format!("{} rows per table (the paper loads 1 M)", self.cfg.rows)]
        }
    }
}

/// One transaction: per piece, its 4 keys in ascending order; the piece after which it rolls
/// back, if it does.
#[derive(Debug)]
pub struct PiecesTxn {
    keys: Vec<[u64; UPDATES]>,
    abort_after: Option<usize>,
}

impl Procedure for PiecesTxn {
    fn txn_type(&self) -> usize {
        0
    }

    fn declare<R: Recon>(&self, _recon: &R, set: &mut AccessSet) -> bool {
        for (t, keys) in self.keys.iter().enumerate() {
            for &k in keys {
                set.write(TableId(t as u32), k);
            }
        }
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        for (i, keys) in self.keys.iter().enumerate() {
            let t = TableId(i as u32);
            tx.piece(i, |tx| {
                for &k in keys {
                    let found = tx.update(t, k, |r| {
                        let c = counter(r) + 1;
                        r[..8].copy_from_slice(&c.to_le_bytes());
                    })?;
                    debug_assert!(found.is_some(), "the loader created every key");
                }
                Ok(())
            })?;
            if self.abort_after == Some(i) {
                return tx.user_abort();
            }
        }
        Ok(())
    }

    fn ledger(&self) -> i64 {
        1
    }
}

/// A worker's generator.
pub struct PiecesGen {
    cfg: PiecesConfig,
    rng: rand::rngs::Xoshiro256PlusPlus,
    /// Transactions this worker committed, not yet in the shared ledger.
    committed: i64,
    ledger: Arc<AtomicI64>,
}

impl Generator for PiecesGen {
    type Proc = PiecesTxn;

    fn blank(&self) -> PiecesTxn {
        PiecesTxn { keys: vec![[0; UPDATES]; self.cfg.pieces as usize], abort_after: None }
    }

    fn fill(&mut self, t: &mut PiecesTxn) {
        let (rows, scope) = (self.cfg.rows, self.cfg.scope);
        for keys in &mut t.keys {
            keys[0] = self.rng.random_range(0..scope);
            for i in 1..UPDATES {
                keys[i] = loop {
                    let k = self.rng.random_range(0..rows);
                    if !keys[..i].contains(&k) {
                        break k;
                    }
                };
            }
            keys.sort_unstable();
        }
        let aborts = self.cfg.user_abort > 0.0 && self.rng.random_bool(self.cfg.user_abort / 100.0);
        t.abort_after = aborts.then(|| self.rng.random_range(0..t.keys.len()));
    }

    fn committed(&mut self, done: &PiecesTxn) {
        self.committed += done.ledger();
    }

    fn ledger(&self) -> i64 {
        self.committed
    }
}

impl Drop for PiecesGen {
    fn drop(&mut self) {
        self.ledger.fetch_add(self.committed, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::scgraph::Analysis;

    #[test]
    fn keys_are_distinct_sorted_and_the_first_is_in_scope() {
        let cfg = PiecesConfig { pieces: 3, rows: 8, scope: 2, user_abort: 50.0 };
        let w = Pieces::new(cfg);
        let mut g = w.generator(0, 1, 7);
        let mut t = g.blank();
        let mut aborts = 0;
        for _ in 0..1000 {
            g.fill(&mut t);
            for keys in &t.keys {
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
                assert!(keys.iter().all(|&k| k < 8));
                assert!(keys[0] < 2 || keys.iter().any(|&k| k < 2), "a key from the scope");
            }
            aborts += usize::from(t.abort_after.is_some());
            assert!(t.abort_after.is_none_or(|p| p < 3));
        }
        assert!((400..600).contains(&aborts), "about half roll back: {aborts}");
    }

    #[test]
    fn bad_parameters_are_refused_with_the_flag_named() {
        let bad = |f: fn(&mut PiecesConfig)| {
            let mut c = PiecesConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.pieces = 0).starts_with("--pieces 0 is out of range"));
        assert!(bad(|c| c.pieces = 65).starts_with("--pieces 65"));
        assert!(bad(|c| c.rows = 3).starts_with("--table-rows 3"));
        assert!(bad(|c| c.scope = 0).starts_with("--scope 0"));
        assert!(bad(|c| c.scope = 2_000_000).starts_with("--scope 2000000 is out of range"));
        assert!(bad(|c| c.user_abort = 101.0).starts_with("--user-abort 101"));
        assert!(bad(|c| c.user_abort = f64::NAN).starts_with("--user-abort NaN"));
        assert_eq!(PiecesConfig::default().validate(), Ok(()));
    }

    /// Every piece conflicts with its twin only: no merge, each piece's partner is its twin
    /// (case 2), as the paper's analysis of its micro-benchmark has it.
    #[test]
    fn the_analysis_chains_the_pieces_without_merging() {
        let w = Pieces::new(PiecesConfig { pieces: 4, ..PiecesConfig::default() });
        let a = Analysis::new(w.txn_types());
        let t = a.analysed(0).expect("the type writes");
        assert_eq!(a.types[t].pieces.len(), 4, "no piece merged");
        for m in 0..4 {
            assert!(a.conflicting(t, m));
            assert_eq!(a.partner(t, m, t), Some(m));
        }
    }
}
