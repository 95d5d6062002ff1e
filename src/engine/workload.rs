//! The contract between workloads and the driver.

use super::database::Database;
use super::procedure::{Procedure, TxnType};
use super::protocol::Protocol;
use crate::error::Error;
use crate::storage::TableSpec;

/// A benchmark workload: schema, loader, and a transaction generator per worker.
pub trait Workload: Sync {
    /// The procedures it generates (owned and sendable, see [`Generator`]).
    type Proc: Procedure + Send;
    /// Its per-worker generator.
    type Gen: Generator<Proc = Self::Proc>;

    /// Whether its generators can run only the types `types` (indices into
    /// [`Workload::txn_types`]; see [`Generator::restrict_mix`]), with a message saying why
    /// not. By default a workload cannot change its mix.
    fn check_mix(&self, types: &[usize]) -> Result<(), String> {
        let _ = types;
        Err(format!("workload {} cannot change its mix of transaction types", self.name()))
    }

    /// Name on the command line and in results.
    fn name(&self) -> &'static str;
    /// Tables to create, in `TableId` order.
    fn tables(&self) -> Vec<TableSpec>;
    /// Transaction types, indexed by [`Procedure::txn_type`].
    fn txn_types(&self) -> &[TxnType];
    /// Loads the initial data using up to `threads` threads.
    fn load<P: Protocol>(&self, db: &Database<P>, threads: usize) -> Result<(), Error>;
    /// The generator of worker `worker` (of `threads`), seeded with `seed`.
    fn generator(&self, worker: usize, threads: usize, seed: u64) -> Self::Gen;
    /// The workload configuration, for results.
    fn config(&self) -> serde_json::Value;
    /// What the loaded data depends on. Two instances with equal `data_config` create the same
    /// tables and load the same rows, so a database loaded for one can be measured with the
    /// other after [`Workload::continue_from`]: a sweep over YCSB's θ or read ratio loads once.
    /// Defaults to the whole configuration (nothing is reused).
    fn data_config(&self) -> serde_json::Value {
        self.config()
    }
    /// Takes over what `previous` (with the same [`Workload::data_config`]) kept about the
    /// database it loaded and ran on (counters of inserted keys, money ledgers, table growth),
    /// so that `self` can run on that database next. Nothing by default.
    fn continue_from(&mut self, previous: &Self) {
        let _ = previous;
    }
    /// Takes `total`, the sum of every worker's [`Generator::ledger`] recovered after a crash,
    /// as the ledger of committed effects that [`Workload::check`] compares with. Nothing by
    /// default.
    fn adopt_ledger(&mut self, total: i64) {
        let _ = total;
    }
    /// Whether [`Workload::check`] compares the database with a ledger of committed effects
    /// that the run kept in memory (SmallBank's deposits, the pieces' commits, a spec's
    /// updates): after a crash the ledger is known only from the acknowledgement table
    /// ([`Workload::adopt_ledger`]), so recovery without one cannot check. False by default.
    fn ledgered(&self) -> bool {
        false
    }
    /// What [`Workload::check`] checks, in words ("the money total ..."), or `None` when the
    /// workload has no invariant to check (its check always passes).
    fn invariants(&self) -> Option<&'static str> {
        None
    }
    /// Checks the workload's invariants after a run (e.g. money conserved).
    fn check<P: Protocol>(&self, db: &Database<P>) -> Result<(), String> {
        let _ = db;
        Ok(())
    }
    /// The transaction type whose throughput is the workload's headline figure, reported beside
    /// the total (TPC-C: NewOrder, as tpmC counts it). `None` by default.
    fn headline(&self) -> Option<usize> {
        None
    }
    /// Departures from the benchmark's specification in use, printed with every result.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Produces one worker's transactions into procedures that the caller owns.
///
/// The caller takes a procedure from [`Generator::blank`] once and hands it to
/// [`Generator::fill`] for every transaction; `fill` overwrites it and reuses its buffers, so
/// generating allocates nothing once they have grown. Procedures are owned and `Send`: the
/// interactive driver keeps one per worker, and a pipeline (BOHM's sequencer) keeps a pool of
/// them, hands them to other threads to run and fills them again when they come back. A
/// procedure belongs to the generator whose `blank` made it (it may carry that generator's
/// constants, such as YCSB's payload or its long-transaction delay), so `fill` only ever gets
/// its own.
pub trait Generator: Send {
    /// The procedure type.
    type Proc: Procedure + Send;
    /// A procedure for [`Generator::fill`] to overwrite.
    fn blank(&self) -> Self::Proc;
    /// Overwrites `slot` (from this generator's [`Generator::blank`]) with the next
    /// transaction.
    fn fill(&mut self, slot: &mut Self::Proc);
    /// Called after `done` (filled by this generator) committed, for workloads that account
    /// for committed effects (SmallBank's money ledger, TPC-C's delivery hints); `done` holds
    /// what its committed run left in it. A pipeline may fill later transactions before it
    /// calls this, so an implementation must accept the calls late and in any order.
    #[inline]
    fn committed(&mut self, done: &Self::Proc) {
        let _ = done;
    }
    /// Generates only transactions of the types `types` from now on (indices into the
    /// workload's types, accepted by [`Workload::check_mix`]), in the proportions the
    /// workload's mix gives them. The default (for workloads whose `check_mix` accepts
    /// nothing) does nothing.
    fn restrict_mix(&mut self, types: &[usize]) {
        let _ = types;
    }

    /// The worker's share of the workload's ledger: the sum of the effects of the transactions
    /// it reported committed (SmallBank: money deposited minus money withdrawn). With the
    /// running transaction's own effect ([`crate::engine::Procedure::ledger`]), crash tests
    /// store it beside each transaction's writes (`engine::driver::Acks`), so that a recovered
    /// database can be checked on its own. 0 by default.
    #[inline]
    fn ledger(&self) -> i64 {
        0
    }
}
