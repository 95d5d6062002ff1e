//! `silo`: optimistic concurrency control with epochs and invisible reads.
//!
//! Tu, Zheng, Kohler, Liskov, Madden. *Speedy transactions in multicore in-memory databases.*
//! SOSP 2013. <https://doi.org/10.1145/2517349.2522713>
//!
//! **Record**: one 64-bit TID word (see [`record`]) in front of the payload: lock, latest, absent
//! and unlinked bits, a sequence number and the epoch.
//!
//! **Read phase** (§4.4): reads copy the row between two loads of the TID word (waiting while it is
//! locked) and keep `(record, TID)` in the read set; they write no shared memory. Writes are
//! buffered in the write set. An insert puts a locked, absent record into the index immediately
//! (§4.5) and bumps its phantom bucket; a delete is a buffered write that marks the record absent.
//! Range scans and absent-key reads keep the versions of the phantom buckets they covered (our
//! stand-in for Silo's node set, shared with every optimistic protocol: see
//! [`crate::storage::phantom`]).
//!
//! **Commit** (§4.4, Figure 2):
//! 1. lock the write set in a global order (table, row id); deadlock-free;
//! 2. fence, then read the global epoch `e`;
//! 3. validate: every read record still has the TID read and is not locked by another
//!    transaction; every phantom bucket still has the version read;
//! 4. choose the commit TID: larger than every TID read or written and than this worker's last
//!    TID, and in epoch `e` or later;
//! 5. install the buffered values and release each lock by storing the new TID.
//!
//! A transaction with an empty write set only validates (step 3): it holds no locks whose
//! acquisition a fence would have to order, and needs no TID.
//!
//! **Deletes** mark the record absent at commit; the shared epoch GC unlinks it and removes the
//! index entry two grace periods later (§4.6).
//!
//! **Snapshots** (§4.9, `--opt snapshot-epochs=K`, off by default; the paper's K is 25 epochs,
//! one second): a transaction declared read-only reads the newest snapshot boundary, every K
//! epochs, without locks, read set or validation, and cannot abort; writers keep the values such
//! readers need, and deleted records stay indexed while a snapshot can see them (see
//! [`crate::storage::snapshot`]). As in Silo, its data may be older than the worker's own last
//! commit. A running snapshot reader does not hold the next boundary back (it commits
//! nothing). Recorded histories place silo's transactions on an epoch-major time line
//! ([`crate::history::epoch_ts`]), where a snapshot reader sits at its boundary.
//!
//! **Deviations.** Durability is txlab's shared redo log rather than Silo's per-worker value
//! logs (§4.10, see [`crate::durability`]); phantom protection uses key-range buckets instead of
//! B-tree node versions. A record that is locked when read is waited for (spinning, then
//! yielding) as in the paper.
//!
//! **Commit contract** (`Protocol`'s docs): kept by the optimistic substrate
//! ([`crate::protocols::occ`]): `Locked` after phase 1, `Validated` after phase 3, the
//! write set installed, logged and unlocked record by record, and the log epoch out of flight
//! only after the last.

pub mod record;
mod worker;

pub use record::{SiloRecord, Tid};
pub use worker::SiloWorker;

use crate::engine::options::{OptionSpec, ProtocolOptions};
use crate::engine::{Capabilities, Database, Isolation, Protocol, Reads, Setup};
use crate::error::Error;
use crate::protocols::occ::tid::SiloLocal;
pub use crate::protocols::occ::ValidationLock;
use crate::protocols::occ::{parse_read_phase_extension, READ_PHASE_EXTENSION};
use crate::protocols::occ::{parse_snapshot_epochs, SNAPSHOT_EPOCHS};
use crate::protocols::occ::{OccRecord, OccWorker};
use crate::storage::{RowRef, TableId};

/// The Silo protocol.
#[derive(Clone, Copy, Debug)]
pub struct Silo {
    options: SiloOptions,
}

/// Silo's options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SiloOptions {
    /// What commit does with a write-set record locked by another commit (default: wait).
    pub validation_lock: ValidationLock,
    /// ReadPhaseExtension (CCBench §6.2): nanoseconds to wait before validating after a read
    /// phase that met a concurrent update; 0 (the default) turns it off.
    pub read_phase_extension: u32,
    /// Read-only transactions read a snapshot taken every this many epochs (§4.9); 0 (the
    /// default): off.
    pub snapshot_epochs: u32,
}

impl Default for SiloOptions {
    fn default() -> Self {
        SiloOptions {
            validation_lock: ValidationLock::Wait,
            read_phase_extension: 0,
            snapshot_epochs: 0,
        }
    }
}

impl ProtocolOptions for SiloOptions {
    const SPECS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "validation-lock",
            values: ValidationLock::VALUES,
            default: "wait",
            help: "a write-set record locked by another commit: spin until free (Silo), abort \
                   and retry (NoWait, CCBench §4.2), or release all and relock (NoWaitTT)",
        },
        READ_PHASE_EXTENSION,
        SNAPSHOT_EPOCHS,
    ];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "validation-lock" => {
                self.validation_lock = ValidationLock::parse(name, value)?;
                Ok(())
            }
            "read-phase-extension" => {
                self.read_phase_extension = parse_read_phase_extension(name, value)?;
                Ok(())
            }
            "snapshot-epochs" => {
                self.snapshot_epochs = parse_snapshot_epochs(name, value)?;
                Ok(())
            }
            _ => Err(format!("--opt {name}: not an option of silo")),
        }
    }
}

impl Protocol for Silo {
    const NAME: &'static str = "silo";
    const DESCRIPTION: &'static str =
        "optimistic; TID words, epochs, invisible reads, sorted write locking, validation (SOSP'13)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: false,
        reads: Reads::Invisible,
        interactive: true,
        templates: false,
    };
    type Record = SiloRecord;
    type Worker<'db> = SiloWorker<'db>;
    type Options = SiloOptions;

    fn new(options: SiloOptions, _: &Setup<'_>) -> Result<Self, Error> {
        Ok(Silo { options })
    }

    fn options(&self) -> &SiloOptions {
        &self.options
    }

    fn snapshot_epochs(&self) -> u64 {
        u64::from(self.options.snapshot_epochs)
    }

    fn load(&self, _: TableId, row: RowRef<'_, SiloRecord>, payload: &[u8]) {
        row.write_from(payload);
        let rec = row.header;
        rec.store(Tid::LOADED.with(Tid::LATEST).0);
    }

    fn is_present(&self, rec: &SiloRecord) -> bool {
        !rec.tid().is_absent()
    }

    fn read_committed(
        &self,
        _: TableId,
        _: u64,
        row: RowRef<'_, SiloRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        crate::protocols::occ::read_committed(row, buf)
    }

    fn worker(db: &Database<Self>) -> Result<SiloWorker<'_>, Error> {
        let o = db.protocol().options;
        let local = SiloLocal::new(o.validation_lock, o.read_phase_extension);
        Ok(OccWorker::new(db.worker_ctx()?, local))
    }
}
