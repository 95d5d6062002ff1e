//! `2pl-ordered`: strict two-phase locking with every lock taken at begin, in one global order,
//! from the transaction's declared access set: no deadlock can form, so there is no deadlock
//! detection, no wait-die and no abort.
//!
//! This is the locking baseline of BOHM (Faleiro and Abadi, VLDB 2015, §4: "2PL" acquires
//! locks in a global order from the known read and write sets, as Calvin and VLL do), which
//! BOHM is compared against; it needs each transaction's access set before it runs
//! ([`crate::engine::Procedure::declare`], with reconnaissance reads where a key depends on
//! data).
//!
//! **Locks** (see [`record`]): key locks in a hashed table of reader-writer words, and the
//! tables' phantom bucket words as range locks. A declared read takes its key's word shared; a
//! declared write takes its key's word exclusive and its bucket word in *insert* mode; a
//! declared range takes its buckets' words in *scan* mode (a range declared for writing, in
//! both). [`Worker::begin_declared`](crate::engine::Worker::begin_declared) sorts the wanted
//! locks by id (key words, then bucket words by table and word), merges the modes asked of one
//! lock, and takes them in that order, waiting for each: a transaction waits only for a lock
//! above every lock it holds, so no cycle of waits can form.
//!
//! **Execution**: a locked direct worker ([`crate::protocols::inplace::direct`]) reads and
//! writes the rows in place with an undo log. The serialization point is the commit, with every
//! lock held; the locks are released after the log records are made.
//!
//! **Undeclared accesses.** The driver checks every operation against the declared set and
//! re-declares on a mismatch (OLLP: reconnaissance may be stale by the time the locks are
//! held, e.g. TPC-C's `D_NEXT_O_ID`). The worker keeps the same rule for a program that
//! drives it through the library ([`crate::engine::Retry::run_declared`] declares each
//! attempt): an attempt begun without a declaration ([`Worker::begin`](crate::engine::Worker::begin))
//! fails its first operation with `undeclared` (a bug in the program, never retried), and an
//! access that no lock taken at begin covers fails with `access-set-mismatch` (retried after
//! declaring again). An undeclared access that a lock held anyway covers passes (key-lock words
//! are shared by many keys, a range's bucket words by its 64 neighbouring keys): it is
//! locked, so this is safe, but the check is not complete.
//! `--opt undeclared=no-wait` instead takes the lock such an access needs at once, *without
//! waiting*: a conflict aborts with `lock-conflict`, as `2pl-nowait` would. Such a transaction
//! never waits, so it cannot close a cycle of waits either; its undeclared scans take their
//! whole range's bucket words.
//!
//! **Granularity.** Key locks may share a word (2^20 words per database) and bucket words
//! cover 64 keys and are themselves shared by far-apart buckets; either gives false conflicts
//! (waits), never missed ones. A declared range over more than 64 buckets takes coarse words
//! (buckets of 2^32 keys, see [`record`]): TPC-C's open-ended ranges lock their district or
//! customer. YCSB-E's `[start, ∞)` takes every coarse word of the table, which serialises its
//! scans against every writer of the table: correct, and coarse. The paper ran no scans. An
//! undeclared scan takes the fine words of its range (every word of the table at most).
//!
//! **Commit contract** (`Protocol`'s docs): 2PL's ([`crate::protocols::two_pl`]), on its
//! locked direct worker: the key and bucket locks taken at begin are all held through
//! `Logged`, and released before `Installed`.

pub mod record;
mod worker;

pub use record::{Coarse, KeyLocks, OrderedRecord};
pub use worker::OrderedWorker;

use crate::engine::options::choice;
use crate::engine::{Capabilities, Database, Isolation, OptionSpec, Protocol, ProtocolOptions};
use crate::engine::{Reads, Setup};
use crate::error::Error;
use crate::protocols::inplace::direct::DirectWorker;
use crate::protocols::inplace::state::PRESENT;
use crate::storage::{RowRef, TableId};
use crate::util::SpinWait;

/// The `2pl-ordered` protocol: the key locks and each table's coarse range words.
pub struct TwoPlOrdered {
    keys: KeyLocks,
    coarse: Box<[Coarse]>,
    options: OrderedOptions,
}

/// What the worker does with an access no declared lock covers (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Undeclared {
    /// Refuse it: `undeclared` for an attempt begun without a declaration,
    /// `access-set-mismatch` for an access outside the declared set.
    Refuse,
    /// Take its lock at once without waiting (a conflict aborts with `lock-conflict`).
    NoWait,
}

/// `2pl-ordered`'s options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct OrderedOptions {
    /// What an undeclared access does (default: refuse).
    pub undeclared: Undeclared,
}

impl Default for OrderedOptions {
    fn default() -> Self {
        OrderedOptions { undeclared: Undeclared::Refuse }
    }
}

impl ProtocolOptions for OrderedOptions {
    const SPECS: &'static [OptionSpec] = &[OptionSpec {
        name: "undeclared",
        values: "refuse|no-wait",
        default: "refuse",
        help: "an attempt begun without a declared access set, or an access outside it: \
               refused (`undeclared`, `access-set-mismatch`), or locked at once without \
               waiting (a conflict aborts, as 2pl-nowait)",
    }];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "undeclared" => {
                self.undeclared = choice(
                    name,
                    value,
                    &[("refuse", Undeclared::Refuse), ("no-wait", Undeclared::NoWait)],
                )?;
                Ok(())
            }
            _ => Err(format!("--opt {name}: not an option of 2pl-ordered")),
        }
    }
}

impl Protocol for TwoPlOrdered {
    const NAME: &'static str = "2pl-ordered";
    const DESCRIPTION: &'static str =
        "strict 2PL taking every lock at begin in one global order from the declared access \
         set (BOHM's baseline): no deadlocks, no aborts";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: true,
        snapshot_reads: false,
        reads: Reads::Visible,
        interactive: true,
        templates: false,
    };
    type Record = OrderedRecord;
    type Worker<'db> = OrderedWorker<'db>;
    type Options = OrderedOptions;

    fn new(options: OrderedOptions, setup: &Setup<'_>) -> Result<Self, Error> {
        let coarse = setup.tables.iter().map(|_| Coarse::default()).collect();
        Ok(TwoPlOrdered { keys: KeyLocks::new(record::KEY_LOCK_BITS), coarse, options })
    }

    fn options(&self) -> &OrderedOptions {
        &self.options
    }

    fn load(&self, _: TableId, row: RowRef<'_, OrderedRecord>, payload: &[u8]) {
        row.write_from(payload);
        row.header.state.set_versioned(PRESENT, crate::history::INITIAL as u64);
    }

    fn is_present(&self, rec: &OrderedRecord) -> bool {
        rec.present()
    }

    /// Under the key's lock, shared, taken by spinning (rows change in place under the
    /// exclusive lock, so the image is committed).
    fn read_committed(
        &self,
        table: TableId,
        key: u64,
        row: RowRef<'_, OrderedRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        let w = self.keys.word_of(table, key);
        let mut spin = SpinWait::default();
        while !self.keys.try_read(w) {
            spin.spin();
        }
        let out = row.header.present().then(|| {
            row.read_into(buf);
            row.header.state.stamp()
        });
        self.keys.unlock_read(w);
        out
    }

    fn worker(db: &Database<Self>) -> Result<OrderedWorker<'_>, Error> {
        let inner = DirectWorker::locked(db.worker_ctx()?);
        Ok(OrderedWorker::new(inner, db.protocol()))
    }
}
