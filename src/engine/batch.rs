//! The batch interface: a library user hands the database a batch of transactions (owned
//! procedures) and gets each one back with its outcome, run by the protocol's own thread model
//! ([`Protocol::drive`]). It is how a protocol that runs no interactive transactions (BOHM,
//! which orders whole transactions before running them; `Database::worker` refuses it) is used
//! from Rust, and it works the same for every other protocol.
//!
//! ```
//! use std::cell::Cell;
//! use txlab::engine::{AccessSet, BatchOutcome, Procedure, Recon, Tx, TxnType, Worker};
//! use txlab::prelude::*;
//!
//! const T: TableId = TableId(0);
//! static TYPES: [TxnType; 1] = [TxnType { name: "add", pieces: &[] }];
//!
//! /// Adds `add` to key 0 and remembers what it read.
//! struct Add { add: u64, saw: Cell<u64> }
//!
//! impl Procedure for Add {
//!     fn txn_type(&self) -> usize { 0 }
//!     fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
//!         set.write(T, 0);
//!         true
//!     }
//!     fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
//!         let v = tx.read(T, 0, |r| u64::from_le_bytes(r[..8].try_into().unwrap()))?.unwrap();
//!         self.saw.set(v);
//!         tx.write(T, 0, &(v + self.add).to_le_bytes())?;
//!         Ok(())
//!     }
//! }
//!
//! let db = Database::<txlab::protocols::bohm::Bohm>::new(&[TableSpec::new("t", 8, 1)]).unwrap();
//! db.loader().insert(T, 0, &0u64.to_le_bytes()).unwrap();
//! let batch = (1..=10).map(|add| Add { add, saw: Cell::new(0) }).collect();
//! let done = db.run_batch(&TYPES, batch, 2).unwrap();
//! assert!(done.iter().all(|(_, o)| *o == BatchOutcome::Committed));
//! assert_eq!(db.peek(T, 0, |r| u64::from_le_bytes(r[..8].try_into().unwrap())), Some(55));
//! ```
//!
//! **How.** The batch becomes a [`Workload`] of `threads` clients that take the procedures in
//! order from a shared cursor, each to completion (committed, or rolled back by the
//! procedure), in a run of `ceil(n / threads)` transactions per client: the clients are asked
//! `threads * ceil(n / threads)` times in all, however the protocol spreads its requests over
//! them (BOHM's sequencer asks whichever client owns the batch slot it fills), so every
//! procedure is handed out once, and the requests past the last get empty transactions. The procedures stay
//! where the caller's batch put them (a slot per procedure, behind a mutex that only the thread
//! running it takes); the transactions the protocol handles refer to their slots, so nothing is
//! copied and every procedure comes back with what it recorded while it ran.

use super::database::Database;
use super::driver::{Backoff, RunConfig, RunLength};
use super::procedure::{AccessSet, Procedure, Recon, Tx, TxnType};
use super::protocol::{Protocol, Worker};
use super::workload::{Generator, Workload};
use crate::error::{Abort, Error};
use crate::storage::TableSpec;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What became of a transaction of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOutcome {
    /// It committed.
    Committed,
    /// Its procedure rolled it back (a user abort, or another abort that retrying cannot
    /// cure); its writes are undone.
    RolledBack,
}

impl<P: Protocol> Database<P> {
    /// Runs `procs` (of the transaction types `types`, indexed by [`Procedure::txn_type`]) on
    /// `threads` threads with the protocol's own thread model, each to completion, and returns
    /// them in the order given, each with its outcome. Concurrency aborts are retried (or, for
    /// BOHM, never happen); the order in which the transactions serialize is the protocol's.
    ///
    /// Fails with the run's error: a transaction type out of `types`, no thread, or a
    /// transaction that failed in a way retrying cannot cure (a missing table, a wrong row
    /// length: [`Error::Fatal`]).
    pub fn run_batch<Q: Procedure + Send>(
        &self,
        types: &[TxnType],
        procs: Vec<Q>,
        threads: usize,
    ) -> Result<Vec<(Q, BatchOutcome)>, Error> {
        if threads == 0 {
            return Err(Error::Config("a batch needs at least one thread".into()));
        }
        if let Some((i, p)) = procs.iter().enumerate().find(|(_, p)| p.txn_type() >= types.len()) {
            return Err(Error::Config(format!(
                "transaction {i} of the batch is of type {}, but the batch names {} type(s)",
                p.txn_type(),
                types.len()
            )));
        }
        if procs.is_empty() {
            return Ok(Vec::new());
        }
        let n = procs.len();
        let shared = Arc::new(Shared {
            procs: procs.into_iter().map(|p| Mutex::new(Some(p))).collect(),
            committed: (0..n).map(|_| AtomicBool::new(false)).collect(),
            next: AtomicUsize::new(0),
        });
        let workload = BatchWorkload { shared: shared.clone(), types };
        let cfg = RunConfig {
            threads,
            length: RunLength::transactions(n.div_ceil(threads) as u64),
            backoff: Backoff::Protocol,
            pin: false,
            seed: 1,
            check_templates: false,
            check_access_sets: false,
            prefault: false,
            breakdown: false,
            acks: None,
            ..RunConfig::default()
        };
        P::drive(self, &workload, &cfg)?;
        Ok(shared
            .procs
            .iter()
            .zip(shared.committed.iter())
            .map(|(p, c)| {
                // The run is over: no thread holds a procedure any more. A procedure that
                // panicked took its run down with it, so the lock is not poisoned here.
                let p = p.lock().unwrap_or_else(|e| e.into_inner()).take();
                // Acquire: pairs with the Release in `BatchGen::committed`.
                let o = if c.load(Ordering::Acquire) {
                    BatchOutcome::Committed
                } else {
                    BatchOutcome::RolledBack
                };
                (p.expect("every procedure stays in its slot until the batch is over"), o)
            })
            .collect())
    }
}

/// The batch's procedures, each in its slot, which committed, and the next to hand out.
struct Shared<Q> {
    procs: Box<[Mutex<Option<Q>>]>,
    committed: Box<[AtomicBool]>,
    next: AtomicUsize,
}

/// The batch as a workload (see the module docs). Its data is the database's as it is:
/// nothing to create or load.
struct BatchWorkload<'a, Q> {
    shared: Arc<Shared<Q>>,
    types: &'a [TxnType],
}

impl<Q: Procedure + Send> Workload for BatchWorkload<'_, Q> {
    type Proc = BatchProc<Q>;
    type Gen = BatchGen<Q>;

    fn name(&self) -> &'static str {
        "batch"
    }

    fn tables(&self) -> Vec<TableSpec> {
        Vec::new()
    }

    fn txn_types(&self) -> &[TxnType] {
        self.types
    }

    fn load<P: Protocol>(&self, _: &Database<P>, _: usize) -> Result<(), Error> {
        Ok(())
    }

    fn generator(&self, _: usize, _: usize, _: u64) -> BatchGen<Q> {
        BatchGen { shared: self.shared.clone() }
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({ "transactions": self.shared.procs.len() })
    }
}

/// One client of the batch: the next procedure not handed out yet, then empty transactions.
struct BatchGen<Q> {
    shared: Arc<Shared<Q>>,
}

impl<Q: Procedure + Send> Generator for BatchGen<Q> {
    type Proc = BatchProc<Q>;

    fn blank(&self) -> BatchProc<Q> {
        BatchProc { shared: self.shared.clone(), index: PADDING, ty: 0, read_only: true }
    }

    fn fill(&mut self, slot: &mut BatchProc<Q>) {
        slot.index = PADDING;
        slot.ty = 0;
        slot.read_only = true;
        // Relaxed: only the count matters; each procedure's slot is handed over by its mutex.
        let next = self.shared.next.fetch_add(1, Ordering::Relaxed);
        if next < self.shared.procs.len() {
            slot.index = next;
            let (ty, read_only) =
                slot.procedure().as_ref().map_or((0, true), |p| (p.txn_type(), p.read_only()));
            slot.ty = ty;
            slot.read_only = read_only;
        }
    }

    fn committed(&mut self, done: &BatchProc<Q>) {
        if done.index != PADDING {
            if let Some(p) = done.procedure().as_ref() {
                p.committed();
            }
            // Release: pairs with the Acquire in `run_batch`.
            self.shared.committed[done.index].store(true, Ordering::Release);
        }
    }
}

/// `BatchProc::index` of an empty transaction (a client's padding).
const PADDING: usize = usize::MAX;

/// A transaction of the batch: the slot of its procedure (or an empty transaction), with the
/// procedure's type and read-only promise kept aside, so the driver's questions about them
/// take no lock.
struct BatchProc<Q> {
    shared: Arc<Shared<Q>>,
    index: usize,
    ty: usize,
    read_only: bool,
}

impl<Q> BatchProc<Q> {
    /// The procedure's slot, locked. Only the thread that runs or declares the transaction
    /// takes it, so it never waits.
    fn procedure(&self) -> std::sync::MutexGuard<'_, Option<Q>> {
        // A procedure that panicked takes the run down with it; the lock stays usable.
        self.shared.procs[self.index].lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<Q: Procedure + Send> Procedure for BatchProc<Q> {
    fn txn_type(&self) -> usize {
        self.ty
    }

    fn declare<R: Recon>(&self, recon: &R, set: &mut AccessSet) -> bool {
        if self.index == PADDING {
            return true;
        }
        self.procedure().as_ref().is_some_and(|p| p.declare(recon, set))
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn read_mostly(&self) -> bool {
        self.index != PADDING && self.procedure().as_ref().is_some_and(|p| p.read_mostly())
    }

    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        if self.index == PADDING {
            return Ok(());
        }
        match self.procedure().as_ref() {
            Some(p) => p.run(tx),
            None => Ok(()),
        }
    }

    fn ledger(&self) -> i64 {
        if self.index == PADDING {
            return 0;
        }
        self.procedure().as_ref().map_or(0, |p| p.ledger())
    }
}
