//! Embedding txlab: tables, procedures and threads of your own, under a protocol chosen at run
//! time. Every protocol family goes through the same program:
//!
//! * interactive protocols (the locking, optimistic and multi-version families, IC3): a worker
//!   per thread, and the database's [`Retry`](txlab::engine::Retry) (the protocol's own
//!   backoff) running each procedure until it commits:
//!   [`Retry::run_procedure_on`](txlab::engine::Retry::run_procedure_on) declares the
//!   procedure's access set first for a protocol that locks from it (`2pl-ordered`);
//! * BOHM, which orders whole transactions before it runs them: the same procedures as one
//!   batch ([`Database::run_batch`]), each run as often as BOHM needs, told once that it
//!   committed ([`Procedure::committed`]).
//!
//! `cargo run --release --example embed [PROTOCOL...]` (every protocol when none is named).
//! Four threads move money between accounts; a transfer that would overdraw rolls back with a
//! code ([`Abort::with_code`]: final, not retried; [`Abort::retry`] would ask for another
//! attempt instead). Read-only audits run alongside and must see the total unchanged under
//! every protocol that isolates transactions; at the end the total is what it was (under
//! `nocc`, which does not isolate, it may have drifted, and the program says by how much).
//! `cargo test --example embed` runs it on every protocol.

use std::cell::Cell;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use txlab::engine::{BatchOutcome, Checks, Isolation, Piece, TableAccess, ALL_COLUMNS};
use txlab::prelude::*;
use txlab::protocols::{DatabaseConfig, ProtocolKind, WithDatabase};

const ACCOUNTS: TableId = TableId(0);
/// An account's row: its balance.
const ROW: usize = 8;
const START: i64 = 1000;
/// The user-abort code of a transfer that would overdraw.
const OVERDRAWN: u32 = 1;

/// Two transaction types, each one piece (IC3 runs pieces; the others ignore them).
static TYPES: [TxnType; 2] = [
    TxnType {
        name: "transfer",
        pieces: &[Piece {
            name: "move",
            accesses: &[TableAccess {
                table: ACCOUNTS,
                mode: AccessMode::Write,
                columns: ALL_COLUMNS,
            }],
        }],
    },
    TxnType {
        name: "audit",
        pieces: &[Piece {
            name: "sum",
            accesses: &[TableAccess {
                table: ACCOUNTS,
                mode: AccessMode::Read,
                columns: ALL_COLUMNS,
            }],
        }],
    },
];

fn balance(row: &[u8]) -> i64 {
    i64::from_le_bytes(row.try_into().expect("8-byte rows"))
}

/// Moves `amount` from one account to another, unless that would overdraw the source.
/// Records what its last run saw, which for a committed or rolled-back transfer is what the
/// run that ended it saw (every run sets it: see [`Procedure::run`]).
struct Transfer {
    from: u64,
    to: u64,
    amount: i64,
    /// The source's balance as the last run read it.
    saw: Cell<i64>,
    /// Money moved by committed transfers, added once per commit ([`Procedure::committed`]).
    moved: Arc<AtomicI64>,
}

impl Procedure for Transfer {
    fn txn_type(&self) -> usize {
        0
    }

    fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
        set.write(ACCOUNTS, self.from);
        set.write(ACCOUNTS, self.to);
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let from = tx.read(ACCOUNTS, self.from, balance)?.expect("account exists");
            self.saw.set(from);
            if from < self.amount {
                return Err(Abort::with_code(OVERDRAWN));
            }
            let to = tx.read(ACCOUNTS, self.to, balance)?.expect("account exists");
            tx.write(ACCOUNTS, self.from, &(from - self.amount).to_le_bytes())?;
            tx.write(ACCOUNTS, self.to, &(to + self.amount).to_le_bytes())?;
            Ok(())
        })
    }

    fn committed(&self) {
        self.moved.fetch_add(self.amount, Ordering::Relaxed);
    }
}

/// Sums every balance, writing nothing.
struct Audit {
    accounts: u64,
    total: Cell<i64>,
}

impl Procedure for Audit {
    fn txn_type(&self) -> usize {
        1
    }

    fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
        set.range(ACCOUNTS, 0, self.accounts - 1, AccessMode::Read);
        true
    }

    fn read_only(&self) -> bool {
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let mut total = 0;
            tx.scan(ACCOUNTS, 0, self.accounts - 1, usize::MAX, |_, r| {
                total += balance(r);
                ControlFlow::Continue(())
            })?;
            self.total.set(total);
            Ok(())
        })
    }
}

/// The bank, run on one protocol: `threads` threads of `transfers` transfers each over
/// `accounts` accounts.
struct Bank {
    accounts: u64,
    threads: u64,
    transfers: u64,
}

/// What a run of the bank did.
#[derive(Debug)]
struct Summary {
    protocol: &'static str,
    isolation: Isolation,
    committed: u64,
    overdrawn: u64,
    /// Audits whose total was not the starting total.
    torn_audits: u64,
    /// The final total minus the starting one.
    drift: i64,
    /// Money the committed transfers moved, as they counted it ([`Procedure::committed`]),
    /// and as their outcomes say.
    moved: (i64, i64),
    seconds: f64,
}

impl Bank {
    /// The `i`-th transfer of thread `t` (some of them large enough to overdraw).
    fn transfer(&self, t: u64, i: u64, moved: &Arc<AtomicI64>) -> Transfer {
        let from = (i * 7 + t * 13) % self.accounts;
        let to = (from + 1 + i % (self.accounts - 1)) % self.accounts;
        let amount = if i % 10 == 9 { START } else { (i % 50) as i64 + 1 };
        Transfer { from, to, amount, saw: Cell::new(0), moved: moved.clone() }
    }

    fn expected(&self) -> i64 {
        START * self.accounts as i64
    }
}

impl WithDatabase for Bank {
    type Output = Result<Summary, Error>;

    fn run<P: Protocol>(self, db: Database<P>) -> Result<Summary, Error> {
        let mut loader = db.loader();
        for k in 0..self.accounts {
            loader.insert(ACCOUNTS, k, &START.to_le_bytes())?;
        }
        drop(loader);
        let (committed, overdrawn, torn) =
            (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        let moved = Arc::new(AtomicI64::new(0));
        let outcomes_moved = AtomicI64::new(0);
        let start = Instant::now();
        if P::CAPS.interactive {
            std::thread::scope(|s| -> Result<(), Error> {
                let threads: Vec<_> = (0..self.threads)
                    .map(|t| {
                        let (db, bank) = (&db, &self);
                        let (committed, overdrawn, torn) = (&committed, &overdrawn, &torn);
                        let (moved, outcomes_moved) = (&moved, &outcomes_moved);
                        s.spawn(move || -> Result<(), Error> {
                            let mut w = db.worker()?;
                            let mut retry = db.retry();
                            for i in 0..bank.transfers {
                                let transfer = bank.transfer(t, i, moved);
                                let ty = &TYPES[transfer.txn_type()];
                                match retry.run_procedure_on(
                                    db,
                                    &mut w,
                                    ty,
                                    &transfer,
                                    Checks::default(),
                                ) {
                                    Ok(()) => {
                                        // Interactive: the program knows its commit.
                                        transfer.committed();
                                        committed.fetch_add(1, Ordering::Relaxed);
                                        outcomes_moved
                                            .fetch_add(transfer.amount, Ordering::Relaxed);
                                    }
                                    Err(a) if a.user_code() == Some(OVERDRAWN) => {
                                        overdrawn.fetch_add(1, Ordering::Relaxed);
                                    }
                                    Err(a) => return Err(a.into()),
                                }
                                if i % 64 == 0 {
                                    let audit =
                                        Audit { accounts: bank.accounts, total: Cell::new(0) };
                                    retry.run_procedure_on(
                                        db,
                                        &mut w,
                                        &TYPES[1],
                                        &audit,
                                        Checks::default(),
                                    )?;
                                    if audit.total.get() != bank.expected() {
                                        torn.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            }
                            Ok(())
                        })
                    })
                    .collect();
                threads.into_iter().try_for_each(|h| h.join().expect("a bank thread panicked"))
            })?;
        } else {
            // One batch of every thread's transfers: the protocol runs them with its own
            // threads, and hands each back with its outcome and what its committed run saw.
            let batch: Vec<Transfer> = (0..self.threads)
                .flat_map(|t| (0..self.transfers).map(move |i| (t, i)))
                .map(|(t, i)| self.transfer(t, i, &moved))
                .collect();
            for (transfer, outcome) in db.run_batch(&TYPES, batch, self.threads as usize)? {
                match outcome {
                    BatchOutcome::Committed => {
                        committed.fetch_add(1, Ordering::Relaxed);
                        outcomes_moved.fetch_add(transfer.amount, Ordering::Relaxed);
                    }
                    BatchOutcome::RolledBack => {
                        // What the run that rolled back saw: too little.
                        assert!(
                            transfer.saw.get() < transfer.amount,
                            "only an overdraft rolls back"
                        );
                        overdrawn.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        let mut total = 0;
        for k in 0..self.accounts {
            total += db.peek(ACCOUNTS, k, balance).expect("account exists");
        }
        Ok(Summary {
            protocol: P::NAME,
            isolation: P::CAPS.isolation,
            committed: committed.into_inner(),
            overdrawn: overdrawn.into_inner(),
            torn_audits: torn.into_inner(),
            drift: total - self.expected(),
            moved: (moved.load(Ordering::Relaxed), outcomes_moved.into_inner()),
            seconds,
        })
    }
}

/// Runs the bank on `kind` and checks what a protocol of its isolation must keep.
fn bank(kind: ProtocolKind, bank: Bank) -> Result<Summary, Error> {
    let tables = [TableSpec::new("accounts", ROW, bank.accounts)];
    let config = DatabaseConfig::new(&tables).txn_types(&TYPES);
    let transfers = bank.threads * bank.transfers;
    let s = kind.create(&config, bank)??;
    assert_eq!(s.committed + s.overdrawn, transfers, "{}: every transfer ended", s.protocol);
    assert_eq!(s.moved.0, s.moved.1, "{}: each commit was counted once", s.protocol);
    if s.isolation != Isolation::None {
        assert_eq!(s.drift, 0, "{}: money was made or lost", s.protocol);
        assert_eq!(s.torn_audits, 0, "{}: an audit saw money in flight", s.protocol);
    }
    Ok(s)
}

#[cfg_attr(test, allow(dead_code))]
fn main() -> Result<(), Error> {
    let kinds = match std::env::args()
        .skip(1)
        .map(|n| ProtocolKind::from_name(&n))
        .collect::<Result<Vec<_>, _>>()?
    {
        named if named.is_empty() => ProtocolKind::ALL.to_vec(),
        named => named,
    };
    for kind in kinds {
        let s = bank(kind, Bank { accounts: 100, threads: 4, transfers: 20_000 })?;
        println!(
            "{:<12} {:>6} transfers committed, {:>5} overdrawn, in {:.2} s ({}){}",
            s.protocol,
            s.committed,
            s.overdrawn,
            s.seconds,
            s.isolation.name(),
            if s.drift == 0 && s.torn_audits == 0 {
                String::new()
            } else {
                format!(": the total drifted by {}, {} audits saw it torn", s.drift, s.torn_audits)
            }
        );
    }
    Ok(())
}

#[test]
fn every_protocol_keeps_the_bank_balanced() {
    for kind in ProtocolKind::ALL {
        // More threads than cores, a fixed number of transfers each.
        bank(kind, Bank { accounts: 20, threads: 4, transfers: 600 }).unwrap();
    }
}
