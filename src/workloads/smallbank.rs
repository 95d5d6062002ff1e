//! SmallBank (Cahill et al., SIGMOD 2008; as BOHM §4.3 runs it): customers with an account, a
//! savings and a checking balance, and six transactions in H-Store's mix.
//!
//! Keys are customer ids in all three tables (hash indexes). Money is in cents. The invariant:
//! the sum of all balances changes only by the deposits and checks that committed. Every
//! transaction that changes the total reports its change through the generator's commit hook
//! (counted only after its commit), and [`SmallBank::check`] compares.

use crate::engine::loader::parallel_load;
use crate::engine::{
    AccessMode, AccessSet, Database, Generator, Piece, Procedure, Protocol, Recon, TableAccess, Tx,
    TxnType, Worker, Workload, ALL_COLUMNS,
};
use crate::error::{Abort, Error};
use crate::storage::index::IndexKind;
use crate::storage::{TableId, TableSpec};
use rand::{RngExt, SeedableRng};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Customer names (64 bytes).
pub const ACCOUNTS: TableId = TableId(0);
/// Savings balances (8 bytes, cents).
pub const SAVINGS: TableId = TableId(1);
/// Checking balances (8 bytes, cents).
pub const CHECKING: TableId = TableId(2);

/// Initial savings and checking balance of every customer, in cents.
pub const INITIAL_BALANCE: i64 = 10_000;
const DEPOSIT: i64 = 130;
const TRANSACT: i64 = 2_020;
const CHECK: i64 = 500;
const PAYMENT: i64 = 500;
const NAME_LEN: usize = 64;

/// SmallBank's parameters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SmallBankConfig {
    /// Customers (BOHM uses 50 for high contention and 100 000 for low).
    pub customers: u64,
    /// Busy-wait inside every transaction, in microseconds (BOHM uses 50).
    pub spin_us: u64,
}

impl SmallBankConfig {
    /// Checks the ranges; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.customers < 2 || self.customers > 1 << 32 {
            return Err(format!(
                "--customers {} is out of range (2 to 4294967296)",
                self.customers
            ));
        }
        if self.spin_us > 1_000_000 {
            return Err(format!("--spin-us {} is out of range (0 to 1000000)", self.spin_us));
        }
        Ok(())
    }
}

/// The six transaction types, in [`Procedure::txn_type`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Sum of one customer's balances (read-only).
    Balance,
    /// Add to checking.
    DepositChecking,
    /// Add to savings.
    TransactSavings,
    /// Move everything of customer 1 into customer 2's checking.
    Amalgamate,
    /// Cash a check against checking (penalty when both balances cannot cover it).
    WriteCheck,
    /// Move money between two checking balances (user abort when it does not cover it).
    SendPayment,
}

/// H-Store's mix, in percent, in `Kind` order.
const MIX: [u32; 6] = [15, 15, 15, 15, 15, 25];

const fn acc(table: TableId, mode: AccessMode) -> TableAccess {
    TableAccess { table, mode, columns: ALL_COLUMNS }
}

static PIECES: [Piece; 6] = [
    Piece {
        name: "balance",
        accesses: &[
            acc(ACCOUNTS, AccessMode::Read),
            acc(SAVINGS, AccessMode::Read),
            acc(CHECKING, AccessMode::Read),
        ],
    },
    Piece {
        name: "deposit-checking",
        accesses: &[acc(ACCOUNTS, AccessMode::Read), acc(CHECKING, AccessMode::Write)],
    },
    Piece {
        name: "transact-savings",
        accesses: &[acc(ACCOUNTS, AccessMode::Read), acc(SAVINGS, AccessMode::Write)],
    },
    Piece {
        name: "amalgamate",
        accesses: &[
            acc(ACCOUNTS, AccessMode::Read),
            acc(SAVINGS, AccessMode::Write),
            acc(CHECKING, AccessMode::Write),
        ],
    },
    Piece {
        name: "write-check",
        accesses: &[
            acc(ACCOUNTS, AccessMode::Read),
            acc(SAVINGS, AccessMode::Read),
            acc(CHECKING, AccessMode::Write),
        ],
    },
    Piece {
        name: "send-payment",
        accesses: &[acc(ACCOUNTS, AccessMode::Read), acc(CHECKING, AccessMode::Write)],
    },
];

static TYPES: [TxnType; 6] = [
    TxnType { name: "balance", pieces: std::slice::from_ref(&PIECES[0]) },
    TxnType { name: "deposit-checking", pieces: std::slice::from_ref(&PIECES[1]) },
    TxnType { name: "transact-savings", pieces: std::slice::from_ref(&PIECES[2]) },
    TxnType { name: "amalgamate", pieces: std::slice::from_ref(&PIECES[3]) },
    TxnType { name: "write-check", pieces: std::slice::from_ref(&PIECES[4]) },
    TxnType { name: "send-payment", pieces: std::slice::from_ref(&PIECES[5]) },
];

/// The SmallBank workload.
pub struct SmallBank {
    cfg: SmallBankConfig,
    /// Net money the committed transactions added (deposits minus checks), in cents.
    ledger: Arc<AtomicI64>,
}

impl SmallBank {
    /// The workload for `cfg` (validated).
    pub fn new(cfg: SmallBankConfig) -> Self {
        SmallBank { cfg, ledger: Arc::new(AtomicI64::new(0)) }
    }

    /// The tables for `cfg`.
    pub fn tables_for(cfg: &SmallBankConfig) -> Vec<TableSpec> {
        let spec = |name: &str, size| {
            TableSpec::new(name, size, cfg.customers).with_index(IndexKind::Hash)
        };
        vec![spec("accounts", NAME_LEN), spec("savings", 8), spec("checking", 8)]
    }

    /// Net money added by committed transactions so far.
    pub fn ledger(&self) -> i64 {
        self.ledger.load(Ordering::Acquire)
    }
}

fn cents(r: &[u8]) -> i64 {
    i64::from_le_bytes(r[..8].try_into().expect("8-byte balances"))
}

fn set(r: &mut [u8], v: i64) {
    r[..8].copy_from_slice(&v.to_le_bytes());
}

impl Workload for SmallBank {
    type Proc = SmallBankTxn;
    type Gen = SmallBankGen;

    fn name(&self) -> &'static str {
        "smallbank"
    }

    fn tables(&self) -> Vec<TableSpec> {
        Self::tables_for(&self.cfg)
    }

    fn txn_types(&self) -> &[TxnType] {
        &TYPES
    }

    fn load<P: Protocol>(&self, db: &Database<P>, threads: usize) -> Result<(), Error> {
        parallel_load(db, self.cfg.customers, 1 << 14, threads, "customers", |loader, ids| {
            let mut name = [0u8; NAME_LEN];
            for c in ids {
                let text = format!("customer-{c:010}");
                name[..text.len()].copy_from_slice(text.as_bytes());
                loader.insert(ACCOUNTS, c, &name)?;
                loader.insert(SAVINGS, c, &INITIAL_BALANCE.to_le_bytes())?;
                loader.insert(CHECKING, c, &INITIAL_BALANCE.to_le_bytes())?;
            }
            Ok(())
        })
    }

    fn generator(&self, _worker: usize, _threads: usize, seed: u64) -> SmallBankGen {
        SmallBankGen {
            customers: self.cfg.customers,
            rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed),
            spin: Duration::from_micros(self.cfg.spin_us),
            net: 0,
            ledger: self.ledger.clone(),
        }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.cfg).expect("plain data serializes")
    }

    fn data_config(&self) -> serde_json::Value {
        serde_json::json!({ "customers": self.cfg.customers })
    }

    fn continue_from(&mut self, previous: &Self) {
        // The money the database holds includes every earlier run's deposits and checks.
        self.ledger = previous.ledger.clone();
    }

    fn ledgered(&self) -> bool {
        true
    }

    fn adopt_ledger(&mut self, total: i64) {
        self.ledger = Arc::new(AtomicI64::new(total));
    }

    fn invariants(&self) -> Option<&'static str> {
        Some("the money total equals the initial balances plus the committed deposits minus the committed checks")
    }

    /// Total money equals the initial total plus the committed deposits minus the committed
    /// checks, read outside transactions. Call it with every worker finished (their generators
    /// flush on drop).
    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        use crate::engine::Recon as _;
        let mut total = 0i64;
        for c in 0..self.cfg.customers {
            total +=
                db.peek(SAVINGS, c, cents).unwrap_or(0) + db.peek(CHECKING, c, cents).unwrap_or(0);
        }
        let want = 2 * INITIAL_BALANCE * self.cfg.customers as i64 + self.ledger();
        if total == want {
            Ok(())
        } else {
            Err(format!(
                "SmallBank money not conserved: balances sum to {total} cents, expected {want} \
                 (initial {} plus {} from committed deposits and checks)",
                2 * INITIAL_BALANCE * self.cfg.customers as i64,
                self.ledger()
            ))
        }
    }
}

/// One SmallBank transaction.
#[derive(Debug)]
pub struct SmallBankTxn {
    /// Which transaction.
    pub kind: Kind,
    /// The (first) customer.
    pub c1: u64,
    /// The second customer (Amalgamate, SendPayment), different from `c1`.
    pub c2: u64,
    /// Busy-wait inside the transaction.
    pub spin: Duration,
    /// Money this attempt adds to the bank, valid after it commits.
    delta: Cell<i64>,
}

impl SmallBankTxn {
    fn spin(&self) {
        crate::util::spin_for(self.spin);
    }
}

/// Reads a balance that the loader created; a missing row is a broken database, not a user abort.
fn balance<W: Worker>(tx: &mut Tx<'_, W>, t: TableId, c: u64) -> Result<i64, Abort> {
    Ok(tx.read(t, c, cents)?.unwrap_or(0))
}

impl Procedure for SmallBankTxn {
    fn txn_type(&self) -> usize {
        self.kind as usize
    }

    /// Balance writes nothing.
    #[inline]
    fn read_only(&self) -> bool {
        self.kind == Kind::Balance
    }

    fn ledger(&self) -> i64 {
        self.delta.get()
    }

    fn declare<R: Recon>(&self, _recon: &R, set: &mut AccessSet) -> bool {
        let (c1, c2) = (self.c1, self.c2);
        set.read(ACCOUNTS, c1);
        match self.kind {
            Kind::Balance => {
                set.read(SAVINGS, c1);
                set.read(CHECKING, c1);
            }
            Kind::DepositChecking => set.write(CHECKING, c1),
            Kind::TransactSavings => set.write(SAVINGS, c1),
            Kind::Amalgamate => {
                set.read(ACCOUNTS, c2);
                set.write(SAVINGS, c1);
                set.write(CHECKING, c1);
                set.write(CHECKING, c2);
            }
            Kind::WriteCheck => {
                set.read(SAVINGS, c1);
                set.write(CHECKING, c1);
            }
            Kind::SendPayment => {
                set.read(ACCOUNTS, c2);
                set.write(CHECKING, c1);
                set.write(CHECKING, c2);
            }
        }
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let (c1, c2) = (self.c1, self.c2);
        tx.piece(0, |tx| {
            // Set afresh on every run of the piece (it may run again under IC3).
            self.delta.set(0);
            tx.read(ACCOUNTS, c1, |_| ())?;
            self.spin();
            match self.kind {
                Kind::Balance => {
                    balance(tx, SAVINGS, c1)?;
                    balance(tx, CHECKING, c1)?;
                }
                Kind::DepositChecking => {
                    tx.update(CHECKING, c1, |r| set(r, cents(r) + DEPOSIT))?;
                    self.delta.set(DEPOSIT);
                }
                Kind::TransactSavings => {
                    tx.update(SAVINGS, c1, |r| set(r, cents(r) + TRANSACT))?;
                    self.delta.set(TRANSACT);
                }
                Kind::Amalgamate => {
                    tx.read(ACCOUNTS, c2, |_| ())?;
                    let saved = balance(tx, SAVINGS, c1)?;
                    let checked = balance(tx, CHECKING, c1)?;
                    tx.write(SAVINGS, c1, &0i64.to_le_bytes())?;
                    tx.write(CHECKING, c1, &0i64.to_le_bytes())?;
                    tx.update(CHECKING, c2, |r| set(r, cents(r) + saved + checked))?;
                }
                Kind::WriteCheck => {
                    let total = balance(tx, SAVINGS, c1)? + balance(tx, CHECKING, c1)?;
                    let cost = if total < CHECK { CHECK + 1 } else { CHECK };
                    tx.update(CHECKING, c1, |r| set(r, cents(r) - cost))?;
                    self.delta.set(-cost);
                }
                Kind::SendPayment => {
                    tx.read(ACCOUNTS, c2, |_| ())?;
                    if balance(tx, CHECKING, c1)? < PAYMENT {
                        return tx.user_abort();
                    }
                    tx.update(CHECKING, c1, |r| set(r, cents(r) - PAYMENT))?;
                    tx.update(CHECKING, c2, |r| set(r, cents(r) + PAYMENT))?;
                }
            }
            Ok(())
        })
    }
}

/// A worker's SmallBank generator.
pub struct SmallBankGen {
    customers: u64,
    rng: rand::rngs::Xoshiro256PlusPlus,
    /// The busy-wait inside each transaction.
    spin: Duration,
    /// Money added by this worker's committed transactions, not yet in the shared ledger.
    net: i64,
    ledger: Arc<AtomicI64>,
}

impl Generator for SmallBankGen {
    type Proc = SmallBankTxn;

    fn blank(&self) -> SmallBankTxn {
        SmallBankTxn { kind: Kind::Balance, c1: 0, c2: 0, spin: self.spin, delta: Cell::new(0) }
    }

    fn fill(&mut self, t: &mut SmallBankTxn) {
        let mut pick = self.rng.random_range(0..100u32);
        let mut kind = 0;
        while pick >= MIX[kind] {
            pick -= MIX[kind];
            kind += 1;
        }
        t.kind = [
            Kind::Balance,
            Kind::DepositChecking,
            Kind::TransactSavings,
            Kind::Amalgamate,
            Kind::WriteCheck,
            Kind::SendPayment,
        ][kind];
        t.c1 = self.rng.random_range(0..self.customers);
        t.c2 = (t.c1 + self.rng.random_range(1..self.customers)) % self.customers;
    }

    fn committed(&mut self, done: &SmallBankTxn) {
        self.net += done.delta.get();
    }

    fn ledger(&self) -> i64 {
        self.net
    }
}

impl Drop for SmallBankGen {
    fn drop(&mut self) {
        self.ledger.fetch_add(self.net, Ordering::AcqRel);
    }
}
