//! The small workloads of `txlab check` (every [`CheckWorkload`] but TPC-C) as a [`Workload`],
//! so that they run through the same path as the benchmark workloads: interactively, each
//! attempt paused at random before every operation, or through a protocol's own
//! [`Protocol::drive`] (BOHM's pipeline).
//!
//! Each transaction's random choices (which accounts, which pair, which block) are drawn when
//! its generator fills it, so a retried or re-executed transaction makes the same choices and a
//! protocol that needs the access set declared can be told it. The choices that depend on data
//! (which key of a block a scan-insert transaction inserts or deletes) are declared from a
//! reconnaissance scan; the run-time check catches a stale guess and the transaction is
//! declared again.
//!
//! What a committed transaction saw (an audit's total, a pair with nobody on call, a block
//! with too many keys) and the increments it made are gathered through
//! [`Generator::committed`], and [`Micro::verdict`] adds the invariant over the final state.

use super::suite::CheckWorkload;
use super::AnomalyClass;
use crate::engine::{
    AccessMode, AccessSet, Database, Generator, Piece, Procedure, Protocol, Recon, TableAccess, Tx,
    TxnType, Worker, Workload, ALL_COLUMNS,
};
use crate::error::{Abort, AbortReason, Error};
use crate::storage::pause::PauseRng;
use crate::storage::{TableId, TableSpec};
use rand::{RngExt, SeedableRng};
use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The one table: 8-byte little-endian integers.
const T: TableId = TableId(0);
/// Bank: accounts and each one's opening balance.
const ACCOUNTS: u64 = 16;
const INITIAL: i64 = 1000;
/// Write skew: pairs of doctors.
const PAIRS: u64 = 8;
/// Read-only anomaly: customers, each with a checking and a savings account.
const CUSTOMERS: u64 = 4;
/// Hot read-modify-writes: counters.
const COUNTERS: u64 = 4;
/// Scan-insert: blocks of keys and their size.
const BLOCKS: u64 = 8;
const BLOCK: u64 = 8;

fn get(r: &[u8]) -> i64 {
    i64::from_le_bytes(r[..8].try_into().expect("8-byte rows"))
}

fn put(r: &mut [u8], v: i64) {
    r[..8].copy_from_slice(&v.to_le_bytes());
}

/// One transaction's choices. The variant's index is its [`TxnType`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Bank: read every account; all of them must sum to the opening total.
    Audit,
    /// Bank: move `amount` from one account to another; rolled back by the user after writing
    /// when `user_abort`.
    Transfer { from: u64, to: u64, amount: i64, user_abort: bool },
    /// Write skew: read both doctors of `pair`, then take doctor `mine` off call if both are
    /// on (else put it back on).
    OnCall { pair: u64, mine: u64 },
    /// Read-only anomaly: deposit 20 into a customer's savings.
    Deposit { customer: u64 },
    /// Read-only anomaly: withdraw 10 from checking, with a penalty of 1 when the two balances
    /// together are below 10.
    Withdraw { customer: u64 },
    /// Read-only anomaly: read both balances (declared read-only every other time).
    Report { customer: u64 },
    /// Hot RMW: increment `n` consecutive counters from `first`.
    Increment { first: u64, n: u64 },
    /// Scan-insert: scan a block; insert a key into it if the scan saw fewer than 2, else delete
    /// one (the search for a free or present key starts at `pick`).
    Block { block: u64, pick: u64 },
}

impl Plan {
    /// Draws the next transaction of `which`.
    fn draw(which: CheckWorkload, rng: &mut PauseRng) -> Plan {
        match which {
            CheckWorkload::Bank => {
                if rng.random_range(0..5u32) == 0 {
                    return Plan::Audit;
                }
                let from = rng.random_range(0..ACCOUNTS);
                let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
                let amount = rng.random_range(1..50);
                Plan::Transfer { from, to, amount, user_abort: rng.random_range(0..10u32) == 0 }
            }
            CheckWorkload::WriteSkew => {
                let pair = rng.random_range(0..PAIRS);
                Plan::OnCall { pair, mine: 2 * pair + rng.random_range(0..2u64) }
            }
            CheckWorkload::ReadOnly => {
                let customer = rng.random_range(0..CUSTOMERS);
                match rng.random_range(0..3u32) {
                    0 => Plan::Deposit { customer },
                    1 => Plan::Withdraw { customer },
                    _ => Plan::Report { customer },
                }
            }
            CheckWorkload::HotRmw => {
                let n = rng.random_range(1..=2u64);
                Plan::Increment { first: rng.random_range(0..COUNTERS), n }
            }
            CheckWorkload::ScanInsert
            | CheckWorkload::Tpcc
            | CheckWorkload::Tpce
            | CheckWorkload::Spec(_) => {
                Plan::Block { block: rng.random_range(0..BLOCKS), pick: rng.random_range(0..BLOCK) }
            }
        }
    }

    fn txn_type(self) -> usize {
        match self {
            Plan::Audit => 0,
            Plan::Transfer { .. } => 1,
            Plan::OnCall { .. } => 2,
            Plan::Deposit { .. } => 3,
            Plan::Withdraw { .. } => 4,
            Plan::Report { .. } => 5,
            Plan::Increment { .. } => 6,
            Plan::Block { .. } => 7,
        }
    }
}

const READS: &[TableAccess] =
    &[TableAccess { table: T, mode: AccessMode::Read, columns: ALL_COLUMNS }];
const WRITES: &[TableAccess] =
    &[TableAccess { table: T, mode: AccessMode::Write, columns: ALL_COLUMNS }];
static READ: [Piece; 1] = [Piece { name: "reads", accesses: READS }];
static WRITE: [Piece; 1] = [Piece { name: "reads and writes", accesses: WRITES }];

/// The transaction types, in [`Plan::txn_type`] order.
static TYPES: [TxnType; 8] = [
    TxnType { name: "audit", pieces: &READ },
    TxnType { name: "transfer", pieces: &WRITE },
    TxnType { name: "go-off-call", pieces: &WRITE },
    TxnType { name: "deposit", pieces: &WRITE },
    TxnType { name: "withdraw", pieces: &WRITE },
    TxnType { name: "report", pieces: &READ },
    TxnType { name: "increment", pieces: &WRITE },
    TxnType { name: "scan-insert", pieces: &WRITE },
];

/// What committed transactions reported, gathered from every generator.
#[derive(Default)]
struct Tally {
    increments: AtomicU64,
    violations: Mutex<Vec<(AnomalyClass, String)>>,
}

/// A check workload other than TPC-C. See the module docs.
pub(super) struct Micro {
    which: CheckWorkload,
    tally: Arc<Tally>,
}

impl Micro {
    /// The workload `which`; `None` for TPC-C and TPC-E, benchmark workloads of their own.
    pub(super) fn new(which: CheckWorkload) -> Option<Micro> {
        (!matches!(which, CheckWorkload::Tpcc | CheckWorkload::Tpce | CheckWorkload::Spec(_)))
            .then(|| Micro { which, tally: Arc::default() })
    }

    fn rows(&self) -> u64 {
        match self.which {
            CheckWorkload::Bank => ACCOUNTS,
            CheckWorkload::WriteSkew => 2 * PAIRS,
            CheckWorkload::ReadOnly => 2 * CUSTOMERS,
            CheckWorkload::HotRmw => COUNTERS,
            CheckWorkload::ScanInsert
            | CheckWorkload::Tpcc
            | CheckWorkload::Tpce
            | CheckWorkload::Spec(_) => 0,
        }
    }

    /// After a run: what committed transactions saw that no serial execution shows, and the
    /// final state's invariant violations, each with the anomaly class it reveals. Reads the
    /// final state outside transactions, so call it when no transaction runs.
    pub(super) fn verdict<P: Protocol>(&self, db: &Database<P>) -> Vec<(AnomalyClass, String)> {
        let mut out =
            std::mem::take(&mut *self.tally.violations.lock().unwrap_or_else(|p| p.into_inner()));
        let v = |k: u64| db.peek(T, k, get).unwrap_or(0);
        match self.which {
            CheckWorkload::Bank => {
                let total: i64 = (0..ACCOUNTS).map(v).sum();
                let want = ACCOUNTS as i64 * INITIAL;
                if total != want {
                    out.push((
                        AnomalyClass::LostUpdate,
                        format!("money not conserved: {total} at the end, {want} at the start"),
                    ));
                }
            }
            CheckWorkload::WriteSkew => {
                for p in 0..PAIRS {
                    if v(2 * p) + v(2 * p + 1) < 1 {
                        out.push((
                            AnomalyClass::G2Item,
                            format!("pair {p} ends with nobody on call"),
                        ));
                    }
                }
            }
            CheckWorkload::ReadOnly
            | CheckWorkload::Tpcc
            | CheckWorkload::Tpce
            | CheckWorkload::Spec(_) => {}
            CheckWorkload::HotRmw => {
                let total: i64 = (0..COUNTERS).map(v).sum();
                let increments = self.tally.increments.load(Ordering::Relaxed);
                if total != increments as i64 {
                    out.push((
                        AnomalyClass::LostUpdate,
                        format!("counters sum to {total} after {increments} committed increments"),
                    ));
                }
            }
            CheckWorkload::ScanInsert => {
                for b in 0..BLOCKS {
                    let n = db.scan(T, b * BLOCK, (b + 1) * BLOCK - 1, BLOCK as usize, |_, _| {
                        ControlFlow::Continue(())
                    });
                    if n > 2 {
                        out.push((
                            AnomalyClass::G2,
                            format!("block {b} ends with {n} keys (at most 2 allowed)"),
                        ));
                    }
                }
            }
        }
        out
    }
}

impl Workload for Micro {
    type Proc = MicroTxn;
    type Gen = MicroGen;

    fn name(&self) -> &'static str {
        self.which.name()
    }

    fn tables(&self) -> Vec<TableSpec> {
        vec![TableSpec::new("check", 8, self.rows()).with_capacity(1 << 20)]
    }

    fn txn_types(&self) -> &[TxnType] {
        &TYPES
    }

    fn load<P: Protocol>(&self, db: &Database<P>, _threads: usize) -> Result<(), Error> {
        let initial = match self.which {
            CheckWorkload::Bank => INITIAL,
            CheckWorkload::WriteSkew => 1,
            _ => 0,
        };
        let mut loader = db.loader();
        for k in 0..self.rows() {
            loader.insert(T, k, &initial.to_le_bytes())?;
        }
        Ok(())
    }

    fn generator(&self, _worker: usize, _threads: usize, seed: u64) -> MicroGen {
        MicroGen {
            which: self.which,
            rng: PauseRng::seed_from_u64(seed),
            filled: 0,
            tally: Arc::clone(&self.tally),
        }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({ "workload": self.which.name() })
    }

    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let v = self.verdict(db);
        if v.is_empty() {
            Ok(())
        } else {
            Err(v.into_iter().map(|(_, m)| m).collect::<Vec<_>>().join("; "))
        }
    }
}

/// One worker's transactions.
pub(super) struct MicroGen {
    which: CheckWorkload,
    rng: PauseRng,
    filled: u64,
    tally: Arc<Tally>,
}

impl Generator for MicroGen {
    type Proc = MicroTxn;

    fn blank(&self) -> MicroTxn {
        MicroTxn {
            plan: Plan::Audit,
            read_only: false,
            read_mostly: false,
            increments: Cell::new(0),
            violation: RefCell::new(None),
        }
    }

    fn fill(&mut self, t: &mut MicroTxn) {
        t.plan = Plan::draw(self.which, &mut self.rng);
        // Every other report declares itself read-only; every other transaction of every
        // workload declares itself read-mostly (a protocol may read for them differently:
        // ERMIA SSI's read optimisation).
        let odd = self.filled % 2 == 1;
        t.read_only = matches!(t.plan, Plan::Report { .. }) && !odd;
        t.read_mostly = odd;
        self.filled += 1;
    }

    fn committed(&mut self, done: &MicroTxn) {
        self.tally.increments.fetch_add(done.increments.get(), Ordering::Relaxed);
        if let Some(v) = done.violation.borrow().clone() {
            self.tally.violations.lock().unwrap_or_else(|p| p.into_inner()).push(v);
        }
    }
}

/// One transaction: its plan, and what its last run saw.
pub(super) struct MicroTxn {
    plan: Plan,
    read_only: bool,
    read_mostly: bool,
    increments: Cell<u64>,
    violation: RefCell<Option<(AnomalyClass, String)>>,
}

impl MicroTxn {
    fn saw(&self, class: AnomalyClass, what: String) {
        *self.violation.borrow_mut() = Some((class, what));
    }
}

impl Procedure for MicroTxn {
    fn txn_type(&self) -> usize {
        self.plan.txn_type()
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn read_mostly(&self) -> bool {
        self.read_mostly
    }

    fn declare<R: Recon>(&self, recon: &R, set: &mut AccessSet) -> bool {
        match self.plan {
            Plan::Audit => (0..ACCOUNTS).for_each(|k| set.read(T, k)),
            Plan::Transfer { from, to, .. } => {
                set.write(T, from);
                set.write(T, to);
            }
            Plan::OnCall { pair, mine } => {
                set.read(T, 2 * pair);
                set.read(T, 2 * pair + 1);
                set.write(T, mine);
            }
            Plan::Deposit { customer } => set.write(T, 2 * customer + 1),
            Plan::Withdraw { customer } => {
                set.write(T, 2 * customer);
                set.read(T, 2 * customer + 1);
            }
            Plan::Report { customer } => {
                set.read(T, 2 * customer);
                set.read(T, 2 * customer + 1);
            }
            Plan::Increment { first, n } => {
                (0..n).for_each(|i| set.write(T, (first + i) % COUNTERS))
            }
            Plan::Block { block, pick } => {
                let lo = block * BLOCK;
                set.range(T, lo, lo + BLOCK - 1, AccessMode::Read);
                let mut present = [false; BLOCK as usize];
                recon.scan(T, lo, lo + BLOCK - 1, BLOCK as usize, |k, _| {
                    present[(k - lo) as usize] = true;
                    ControlFlow::Continue(())
                });
                // Which key depends on what the scan finds: a guess, within the block.
                let guess = lo + Self::target(&present, pick);
                set.write_within(T, Some(guess), lo, lo + BLOCK - 1);
            }
        }
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            // Set afresh on every run of the piece (it may run again under IC3).
            self.increments.set(0);
            *self.violation.borrow_mut() = None;
            self.body(tx)
        })
    }
}

impl MicroTxn {
    /// The key of a block (offset from its start) a scan-insert transaction changes, given
    /// which keys its scan saw: with fewer than 2 present, the first absent one from `pick`
    /// on (it inserts it); else the first present one (it deletes it).
    fn target(present: &[bool; BLOCK as usize], pick: u64) -> u64 {
        let n = present.iter().filter(|&&p| p).count();
        let want = n >= 2;
        (0..BLOCK).map(|i| (pick + i) % BLOCK).find(|&i| present[i as usize] == want).unwrap_or(0)
    }

    fn body<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        match self.plan {
            Plan::Audit => {
                let mut total = 0;
                for k in 0..ACCOUNTS {
                    total += tx.read(T, k, get)?.unwrap_or(0);
                }
                let want = ACCOUNTS as i64 * INITIAL;
                if total != want {
                    self.saw(
                        AnomalyClass::GSingle,
                        format!("an audit saw a total of {total}, not {want}"),
                    );
                }
            }
            Plan::Transfer { from, to, amount, user_abort } => {
                let balance = tx.read(T, from, get)?.unwrap_or(0);
                tx.update(T, from, |r| put(r, balance - amount))?;
                tx.update(T, to, |r| put(r, get(r) + amount))?;
                if user_abort {
                    return Err(Abort::new(AbortReason::User));
                }
            }
            Plan::OnCall { pair, mine } => {
                let x = tx.read(T, 2 * pair, get)?.unwrap_or(0);
                let y = tx.read(T, 2 * pair + 1, get)?.unwrap_or(0);
                let on = if x + y >= 2 { 0i64 } else { 1 };
                tx.write(T, mine, &on.to_le_bytes())?;
                if x + y < 1 {
                    self.saw(AnomalyClass::G2Item, format!("pair {pair} had nobody on call"));
                }
            }
            Plan::Deposit { customer } => {
                tx.update(T, 2 * customer + 1, |r| put(r, get(r) + 20))?;
            }
            Plan::Withdraw { customer } => {
                let x = tx.read(T, 2 * customer, get)?.unwrap_or(0);
                let y = tx.read(T, 2 * customer + 1, get)?.unwrap_or(0);
                let penalty = if x + y < 10 { 1 } else { 0 };
                tx.write(T, 2 * customer, &(x - 10 - penalty).to_le_bytes())?;
            }
            Plan::Report { customer } => {
                tx.read(T, 2 * customer, get)?;
                tx.read(T, 2 * customer + 1, get)?;
            }
            Plan::Increment { first, n } => {
                for i in 0..n {
                    let k = (first + i) % COUNTERS;
                    let v = tx.read(T, k, get)?.unwrap_or(0);
                    tx.write(T, k, &(v + 1).to_le_bytes())?;
                }
                self.increments.set(n);
            }
            Plan::Block { block, pick } => {
                let lo = block * BLOCK;
                let mut present = [false; BLOCK as usize];
                let mut n = 0;
                tx.scan(T, lo, lo + BLOCK - 1, BLOCK as usize, |k, _| {
                    present[(k - lo) as usize] = true;
                    n += 1;
                    ControlFlow::Continue(())
                })?;
                let k = lo + Self::target(&present, pick);
                if n < 2 {
                    tx.insert(T, k, &0i64.to_le_bytes())?;
                } else {
                    tx.delete(T, k)?;
                }
                if n > 2 {
                    self.saw(
                        AnomalyClass::G2,
                        format!("a scan saw {n} keys in block {block} (at most 2 allowed)"),
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan-insert transaction inserts the first absent key from its pick while its block
    /// holds fewer than 2, and deletes the first present one after.
    #[test]
    fn scan_insert_targets() {
        let mut present = [false; BLOCK as usize];
        assert_eq!(MicroTxn::target(&present, 6), 6);
        present[6] = true;
        assert_eq!(MicroTxn::target(&present, 6), 7);
        present[7] = true;
        assert_eq!(MicroTxn::target(&present, 3), 6);
        assert_eq!(MicroTxn::target(&present, 7), 7);
    }

    /// A generator's plans belong to its workload, and every other transaction is read-mostly
    /// (and every other report read-only).
    #[test]
    fn generators_draw_their_workloads_transactions() {
        for which in CheckWorkload::ALL {
            let Some(micro) = Micro::new(which) else {
                assert!(matches!(which, CheckWorkload::Tpcc | CheckWorkload::Tpce));
                continue;
            };
            let mut gen = micro.generator(0, 1, 3);
            let mut t = gen.blank();
            let mut types = std::collections::BTreeSet::new();
            for i in 0..200 {
                gen.fill(&mut t);
                types.insert(t.plan.txn_type());
                assert_eq!(t.read_mostly(), i % 2 == 1);
                assert_eq!(t.read_only(), i % 2 == 0 && matches!(t.plan, Plan::Report { .. }));
            }
            let want: &[usize] = match which {
                CheckWorkload::Bank => &[0, 1],
                CheckWorkload::WriteSkew => &[2],
                CheckWorkload::ReadOnly => &[3, 4, 5],
                CheckWorkload::HotRmw => &[6],
                _ => &[7],
            };
            assert_eq!(types.into_iter().collect::<Vec<_>>(), want, "{}", which.name());
        }
    }
}
