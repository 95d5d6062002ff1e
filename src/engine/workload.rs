//! The contract between workloads and the driver.

use super::database::Database;
use super::procedure::{Procedure, TxnType};
use super::protocol::Protocol;
use crate::error::Error;
use crate::storage::TableSpec;

/// A benchmark workload: schema, loader, and a transaction generator per worker.
pub trait Workload: Sync {
    /// The procedures it generates.
    type Proc: Procedure;
    /// Its per-worker generator.
    type Gen: Generator<Proc = Self::Proc>;

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

/// Produces the next transaction of one worker. Reuses one procedure value, so generating a
/// transaction allocates nothing.
pub trait Generator: Send {
    /// The procedure type.
    type Proc: Procedure;
    /// The next transaction to run.
    fn next(&mut self) -> &Self::Proc;
    /// Called by the driver after the transaction from the last `next` committed (for
    /// workloads that account for committed effects, such as SmallBank's money ledger).
    #[inline]
    fn committed(&mut self) {}
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
