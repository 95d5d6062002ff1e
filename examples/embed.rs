//! Embedding txlab: create tables, pick a protocol, run your own procedures on your own threads.
//!
//! `cargo run --release --example embed`
//!
//! Four threads move money between 100 accounts under Silo; a procedure written once against
//! `Tx` runs unchanged under any protocol. At the end the total is what it was.

use std::time::Instant;
use txlab::engine::{Checks, Piece, Retry, TableAccess, ALL_COLUMNS};
use txlab::prelude::*;
use txlab::protocols::silo::Silo;

const ACCOUNTS: TableId = TableId(0);
const N: u64 = 100;

/// One transaction type with one piece that reads and writes accounts.
static TYPES: [TxnType; 1] = [TxnType {
    name: "transfer",
    pieces: &[Piece {
        name: "move",
        accesses: &[TableAccess { table: ACCOUNTS, mode: AccessMode::Write, columns: ALL_COLUMNS }],
    }],
}];

/// Moves `amount` from one account to another; aborts on purpose if the balance is too low.
struct Transfer {
    from: u64,
    to: u64,
    amount: i64,
}

fn balance(row: &[u8]) -> i64 {
    i64::from_le_bytes(row.try_into().expect("8-byte rows"))
}

impl Procedure for Transfer {
    fn txn_type(&self) -> usize {
        0
    }

    fn declare<R: Recon>(&self, _recon: &R, set: &mut AccessSet) -> bool {
        set.write(ACCOUNTS, self.from);
        set.write(ACCOUNTS, self.to);
        true
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        tx.piece(0, |tx| {
            let from = tx.read(ACCOUNTS, self.from, balance)?.expect("account exists");
            if from < self.amount {
                return tx.user_abort();
            }
            tx.update(ACCOUNTS, self.from, |r| {
                r.copy_from_slice(&(from - self.amount).to_le_bytes())
            })?;
            tx.update(ACCOUNTS, self.to, |r| {
                let b = balance(r) + self.amount;
                r.copy_from_slice(&b.to_le_bytes());
            })?;
            Ok(())
        })
    }
}

fn main() -> Result<(), Error> {
    let db = Database::<Silo>::new(&[TableSpec::new("accounts", 8, N)])?;
    let mut loader = db.loader();
    for k in 0..N {
        loader.insert(ACCOUNTS, k, &1000i64.to_le_bytes())?;
    }
    let start = Instant::now();
    let committed: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let db = &db;
                s.spawn(move || {
                    let mut w = db.worker().expect("a worker slot");
                    // Retries conflicts with a random backoff until the transfer commits; a user
                    // abort (too little money) ends it.
                    let mut retry = Retry::new().seed(t);
                    let mut ok = 0;
                    for i in 0..50_000u64 {
                        let from = (i * 7 + t * 13) % N;
                        let to = (from + 1 + i % (N - 1)) % N;
                        let transfer = Transfer { from, to, amount: (i % 50) as i64 };
                        let ty = &TYPES[transfer.txn_type()];
                        match retry.run_procedure(&mut w, ty, &transfer, Checks::default()) {
                            Ok(()) => ok += 1,
                            Err(a) if a.reason == AbortReason::User => {}
                            Err(a) => panic!("transfer failed: {a}"),
                        }
                    }
                    ok
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker")).sum()
    });
    let mut w = db.worker()?;
    let total = Retry::new().run(&mut w, |w| {
        let mut total = 0;
        for k in 0..N {
            total += w.read(ACCOUNTS, k, balance)?.unwrap_or(0);
        }
        Ok(total)
    })?;
    println!(
        "{committed} transfers committed in {:.2} s; total balance {total} (expected {})",
        start.elapsed().as_secs_f64(),
        1000 * N as i64
    );
    assert_eq!(total, 1000 * N as i64);
    Ok(())
}
