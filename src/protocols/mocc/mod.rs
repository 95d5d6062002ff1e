//! `mocc`: mostly-optimistic concurrency control.
//!
//! Wang, Kimura. *Mostly-optimistic concurrency control for highly contended dynamic workloads
//! on a thousand cores.* PVLDB 10(2), 2016. <https://doi.org/10.14778/3015274.3015276>
//!
//! **Silo plus temperature.** Records carry Silo's TID word and are read, written, inserted,
//! deleted and scanned through the shared optimistic read phase (`occ`), and commit runs
//! Silo's protocol (`occ::tid`). On top, every record has a *temperature*, an approximate
//! count of the read validations that failed on it in the current period (see [`record`]), and
//! a pessimistic reader-writer lock.
//!
//! **Read phase.** Before the read phase touches a record whose temperature has reached the
//! threshold (or that the retrospective lock list names), it takes the record's lock: write mode
//! for a write or a read announcing one (`read_for_update`, an update), else read mode. Locks are
//! taken in a canonical order (table, row). A lock needed out of order first releases the held
//! locks after it (their reads stay in the read set and are validated optimistically, so giving a
//! lock up is always safe), then takes the RLL's entries before it and itself, waiting: a waiter
//! holds only locks before the one it waits for, so waiting cannot deadlock.
//!
//! **Commit.** An attempt that holds no MOCC lock and has no RLL (it met nothing hot) runs
//! Silo's commit directly, admitted once the TID words are locked only if no one holds a MOCC lock
//! on the write set (a lock taken after that check finds the TID word locked or changed, as under
//! Silo); otherwise, and for every other attempt, the write set's locks are taken in canonical
//! order the same way as in the read phase (upgrading read locks; a read lock another reader
//! shares is given up and requested again in write mode, since two upgraders would wait for each
//! other), then Silo's commit runs: lock the TID words, fence, validate, choose the TID, install.
//! A committer holds TID locks only while it waits for nothing else (the fast path releases them
//! before it goes the slow way), and the read phase waits on a TID lock only for such a holder,
//! so MOCC locks and TID locks cannot wait for each other in a cycle. A read validation that fails warms
//! its record up (MOCC §3.1: +1 with probability 2^-temperature). The locks are released when the
//! attempt ends, after the write phase.
//!
//! **Retrospective lock list (§3.4).** An aborted attempt leaves its retry a list of what to lock
//! up front, as CCBench builds it: its write set in write mode, and the records it read that are
//! hot or failed validation, in read mode. The retry takes each entry as soon as canonical order
//! allows: before it touches (locks or reads) any record after the entry, so an aborted
//! transaction's hot records are locked before it reads them again. (CCBench takes the entries
//! only when it locks a later record, so a retry touching only cold records after them never
//! takes them.) A transaction that commits forgets its list. The
//! list holds row ids of an earlier attempt, which may have been recycled meanwhile: the retry
//! then locks a slot that belongs to another record (row-store memory is never unmapped), which
//! costs only that lock.
//!
//! **Snapshots** (`--opt snapshot-epochs=K`, off by default): a transaction declared read-only
//! reads the newest snapshot boundary, as silo's do (Silo §4.9): no locks, read set or
//! validation, so it neither warms records up nor takes MOCC locks, and it cannot abort. The
//! writers' Silo commit keeps the values such readers need (`occ::tid`, see
//! [`crate::storage::snapshot`]); the histories' epoch time line places a snapshot reader at
//! its boundary, as for silo.
//!
//! **Deviations.**
//! * The temperature is per record, not per 4 KiB page as in FOEDUS (CCBench lets the statistics
//!   cover a configurable number of bytes); and it is reset lazily, per record, when its period
//!   (`temperature-reset` Silo epochs) has passed, as CCBench does instead of the original's
//!   periodic wholesale reset (§3.3: that one invalidates many cache lines at once).
//! * The lock is CCBench's reader-writer lock word by default (`lock=rwlock`), or with
//!   `lock=mql` a queue lock with cancellation built for txlab
//!   (`mocc::mql`): MCS queueing with local spinning, FIFO between readers and writers,
//!   cancellable at any point of a wait. MQL's cancellation unlinks a leaving node through a
//!   handshake with both neighbours; here the node is left in the queue, marked abandoned, and
//!   the next release passes the turn through it, so every step is one CAS (the module doc
//!   argues it, and `scripts/loom.sh` model-checks it). The lock word's readers do not queue
//!   behind waiting writers, and a releaser may take the lock again at once. The default is the
//!   lock word because FIFO hand-over costs here: with every record hot, MQL cuts MOCC's abort
//!   ratio but runs below the lock word's throughput, far below with more threads than cores,
//!   where it hands the lock to descheduled waiters (`txlab sweep -p mocc -w ycsb --records 50
//!   --read-ratio 0.2 --rmw --vary "opt=lock=mql;lock=rwlock" --vary threads=2,8`). The paper
//!   runs one thread per core.
//! * A lock needed out of canonical order is requested, with MQL, as the original does: a
//!   cancellable request that waits a bounded time (128 rounds of the spin-wait) while the later
//!   locks are kept. If it is cancelled, or with `lock=rwlock` (CCBench), the later locks are
//!   released and the lock is taken in canonical order. The original instead continues
//!   without the lock after a failed try; waiting in order keeps the "hot records are locked"
//!   guarantee the retry relies on.
//!
//! **Options** (`--opt`): `lock=mql|rwlock`, `validation-lock=wait|nowait` (a lock conflict in canonical order:
//! wait, MOCC's, or abort), `temperature-threshold`, `temperature-reset`,
//! `read-phase-extension` (CCBench §6.2, as for Silo) and `snapshot-epochs`.
//!
//! **Commit contract** (`Protocol`'s docs): Silo's ([`crate::protocols::silo`]): its MOCC
//! locks are taken before `Locked` and released when the attempt ends, after `Installed`.

pub mod mql;
pub mod record;
mod worker;

/// What the queue lock ([`mql`]) takes from its surroundings: std's atomics and
/// [`SpinWait`](crate::util::SpinWait) here; `tests/loom_mql.rs` compiles `mql.rs` against
/// loom's instead, to model-check it.
pub mod shim {
    pub use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

    /// Queue nodes per chunk.
    pub const CHUNK: usize = 256;
    /// Chunks per worker slot.
    pub const CHUNKS: usize = 256;

    /// A fresh spin-wait for a queue waiter: it spins on its own cache line, so it spins
    /// longer before yielding than `SpinWait::default` (512 rounds, not 64: with every record
    /// hot, yielding early stalls the queue on a FIFO hand-over to a descheduled waiter; the
    /// `lock=mql` sweep in the module docs shows it when this is changed).
    #[inline(always)]
    pub fn spin_wait() -> crate::util::SpinWait {
        crate::util::SpinWait::spinning(512)
    }
}

pub use record::MoccRecord;
pub use worker::{LockEntry, MoccLocal, MoccWorker};

use crate::engine::options::{choice, number, OptionSpec, ProtocolOptions};
use crate::engine::{Capabilities, Database, Isolation, Protocol, Reads, Setup};
use crate::error::Error;
use crate::protocols::mocc::mql::{QNodes, MAX_SLOTS};
use crate::protocols::occ::tid::Tid;
use crate::protocols::occ::{parse_read_phase_extension, READ_PHASE_EXTENSION};
use crate::protocols::occ::{parse_snapshot_epochs, SNAPSHOT_EPOCHS};
use crate::protocols::occ::{OccRecord, OccWorker, ValidationLock};
use crate::storage::{RowRef, TableId};
use std::sync::Arc;

/// The MOCC protocol.
pub struct Mocc {
    options: MoccOptions,
    /// The queue lock's nodes (`lock=mql`).
    nodes: Option<Arc<QNodes>>,
}

/// MOCC's pessimistic lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockKind {
    /// The queue lock with cancellation (MOCC's MQL, `mocc::mql`).
    Mql,
    /// A reader-writer lock word (CCBench's).
    Rwlock,
}

/// MOCC's options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct MoccOptions {
    /// The pessimistic lock's implementation.
    pub lock: LockKind,
    /// A MOCC lock held in a conflicting mode: wait (in canonical order) or abort.
    pub validation_lock: ValidationLock,
    /// The temperature at which records are locked pessimistically.
    pub temperature_threshold: u32,
    /// Silo epochs per temperature period (temperatures restart from 0 in a new period).
    pub temperature_reset: u32,
    /// ReadPhaseExtension's delay (ns), as for Silo.
    pub read_phase_extension: u32,
    /// Read-only transactions read a snapshot taken every this many epochs, as for Silo; 0
    /// (the default): off.
    pub snapshot_epochs: u32,
}

/// The default temperature threshold (CCBench's `temp_threshold`).
pub const DEFAULT_THRESHOLD: u32 = 10;

impl Default for MoccOptions {
    fn default() -> Self {
        MoccOptions {
            lock: LockKind::Rwlock,
            validation_lock: ValidationLock::Wait,
            temperature_threshold: DEFAULT_THRESHOLD,
            temperature_reset: 1,
            read_phase_extension: 0,
            snapshot_epochs: 0,
        }
    }
}

impl ProtocolOptions for MoccOptions {
    const SPECS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "lock",
            values: "mql|rwlock",
            default: "rwlock",
            help: "the pessimistic lock: a reader-writer lock word (CCBench's) or a queue lock \
                   whose waits can be cancelled (MOCC's MQL: fair, fewer aborts, slower when \
                   threads outnumber cores)",
        },
        OptionSpec {
            name: "validation-lock",
            values: "wait|nowait",
            default: "wait",
            help: "a record locked in a conflicting mode (read phase or commit): wait in \
                   canonical order (MOCC) or abort and retry (NoWait)",
        },
        OptionSpec {
            name: "temperature-threshold",
            values: "1 to 20",
            default: "10",
            help: "lock a record pessimistically once about 2^N of its read validations failed \
                   in one period",
        },
        OptionSpec {
            name: "temperature-reset",
            values: "1 to 1000 (epochs)",
            default: "1",
            help: "the temperature period, in Silo epochs (CCBench resets every epoch)",
        },
        READ_PHASE_EXTENSION,
        SNAPSHOT_EPOCHS,
    ];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "lock" => {
                self.lock =
                    choice(name, value, &[("mql", LockKind::Mql), ("rwlock", LockKind::Rwlock)])?;
            }
            "validation-lock" => {
                self.validation_lock = choice(
                    name,
                    value,
                    &[("wait", ValidationLock::Wait), ("nowait", ValidationLock::NoWait)],
                )?;
            }
            "temperature-threshold" => {
                self.temperature_threshold = number(name, value, 1, record::TEMP_MAX as u32)?;
            }
            "temperature-reset" => self.temperature_reset = number(name, value, 1, 1000)?,
            "read-phase-extension" => {
                self.read_phase_extension = parse_read_phase_extension(name, value)?;
            }
            "snapshot-epochs" => self.snapshot_epochs = parse_snapshot_epochs(name, value)?,
            _ => return Err(format!("--opt {name}: not an option of mocc")),
        }
        Ok(())
    }
}

impl Protocol for Mocc {
    const NAME: &'static str = "mocc";
    const DESCRIPTION: &'static str =
        "Silo plus temperature: hot records locked in the read phase, in canonical order (VLDB'16)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: false,
        reads: Reads::VisibleWhenHot,
        interactive: true,
        templates: false,
    };
    type Record = MoccRecord;
    type Worker<'db> = MoccWorker<'db>;
    type Options = MoccOptions;

    fn new(options: MoccOptions, setup: &Setup<'_>) -> Result<Self, Error> {
        let nodes = match options.lock {
            LockKind::Mql => Some(Arc::new(QNodes::new(setup.max_workers).map_err(|_| {
                Error::Config(format!(
                    "mocc with lock=mql supports at most {MAX_SLOTS} workers, not {}",
                    setup.max_workers
                ))
            })?)),
            LockKind::Rwlock => None,
        };
        Ok(Mocc { options, nodes })
    }

    fn options(&self) -> &MoccOptions {
        &self.options
    }

    fn snapshot_epochs(&self) -> u64 {
        u64::from(self.options.snapshot_epochs)
    }

    fn load(&self, _: TableId, row: RowRef<'_, MoccRecord>, payload: &[u8]) {
        row.write_from(payload);
        let rec = row.header;
        rec.store(Tid::LOADED.with(Tid::LATEST).0);
    }

    fn is_present(&self, rec: &MoccRecord) -> bool {
        !Tid(rec.load()).is_absent()
    }

    fn read_committed(
        &self,
        _: TableId,
        _: u64,
        row: RowRef<'_, MoccRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        crate::protocols::occ::read_committed(row, buf)
    }

    fn worker(db: &Database<Self>) -> Result<MoccWorker<'_>, Error> {
        let ctx = db.worker_ctx()?;
        let p = db.protocol();
        let local = MoccLocal::new(&p.options, p.nodes.clone(), ctx.slot);
        Ok(OccWorker::new(ctx, local))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::DbOptions;
    use crate::storage::TableSpec;

    #[test]
    fn mql_refuses_more_workers_than_node_ids_can_name() {
        let build = |lock: &str| {
            Database::<Mocc>::builder(&[TableSpec::new("t", 8, 16)])
                .options(DbOptions { max_workers: MAX_SLOTS + 1, ..Default::default() })
                .protocol_options(MoccOptions::from_pairs(&[("lock".into(), lock.into())]).unwrap())
                .build()
        };
        assert_eq!(
            build("mql").err().unwrap().to_string(),
            format!(
                "mocc with lock=mql supports at most {MAX_SLOTS} workers, not {}",
                MAX_SLOTS + 1
            )
        );
        assert!(build("rwlock").is_ok());
    }
}
