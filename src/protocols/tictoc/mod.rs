//! `tictoc`: optimistic concurrency control with data-driven timestamps.
//!
//! Yu, Pavlo, Sanchez, Devadas. *TicToc: Time Traveling Optimistic Concurrency Control.*
//! SIGMOD 2016. <https://doi.org/10.1145/2882903.2882935>
//!
//! **Record** ([`record`]): one word packing wts, delta = rts - wts and the lock and status bits,
//! plus the version's install timestamp and its predecessor's.
//!
//! **Read phase**: Silo's, shared ([`crate::protocols::occ`]): a read copies the row
//! between two loads of the word and keeps `(wts, rts, installed)` in the read set; writes are
//! buffered; inserts put a locked, absent record into the index at once.
//!
//! **Commit** (Algorithm 2): lock the write set in a global order; the commit timestamp `cts` is
//! the largest wts read and one above the largest rts written, with no global counter; every read
//! whose rts is below `cts` is validated: still the same version and not locked by another
//! transaction, and its rts is extended to `cts` by CAS (when `cts - wts` overflows delta, wts
//! moves up to `cts - MAX_DELTA`); the write phase installs `wts = rts = cts`.
//!
//! **Options** (`--opt`): `validation-lock` (`nowait`, CCBench's default for TicToc: abort when a
//! write-set record is locked; `nowaittt`: release every lock, wait, relock, TicToc's original
//! no-wait locking; `wait`: spin in lock order), `preemptive-abort` (§4.2: before locking, abort a
//! transaction whose read record is locked with an rts below a lower bound of its `cts`), and
//! `timestamp-history` (§4.3: a read of a version overwritten since is still valid if the version
//! that replaced it was installed after `cts`). CCBench's T+BO is TicToc with `--backoff
//! adaptive`. Defaults: `nowait`, preemptive abort and timestamp history on (the paper's
//! configuration has all its optimisations on). `read-phase-extension` (CCBench §6.2, off by
//! default) is shared with Silo (`OccWorker::extend_read_phase`).
//!
//! **Phantoms.** The paper leaves phantom avoidance unspecified (the Cicada paper's footnote 2).
//! txlab uses the shared phantom buckets (`storage::phantom`), given logical clocks: absence is a
//! version too. A scan or an absent-key read keeps the bucket's version; its transaction's `cts`
//! is at least the bucket's wts (the largest commit timestamp of a deletion whose record was
//! unlinked from it), and validation raises the bucket's rts to `cts`, then re-checks the version
//! after a fence. A transaction that makes a key appear (an insert or a revive bumps the bucket)
//! commits above the bucket's wts and rts, read after its bump and a fence. This is sufficient:
//! an insert into a range a transaction T read either bumps the bucket before T's re-check (T
//! aborts) or reads T's `cts` from the bucket's rts (it serialises after T); a key deleted and
//! then removed from the index leaves its deletion's timestamps on the bucket, so a later miss
//! serialises after the deletion, and a later insert after every reader of the absence. Plain
//! version checks as in Silo would not be: TicToc serialises in `cts` order, not in the physical
//! order that a version check protects, so an inserter with a small `cts` could otherwise
//! serialise before a scanner that missed its key and after which it physically committed.
//!
//! **Deviations and fixes.** Validation identifies a version by its install timestamp, not its
//! wts: a wts moved up by a delta overflow is the same version, which the paper would abort. A
//! read whose record is locked by another transaction is valid only if its rts already covers
//! `cts` (the paper's rule); with the timestamp history a locked record is never taken as a
//! predecessor, because its install timestamp may be half-written. History recording uses `cts`
//! as the serialisation timestamp (`Recorder::serial_point_at`), which is the order TicToc
//! promises and the checker verifies.
//!
//! **Commit contract** (`Protocol`'s docs): kept by the optimistic substrate
//! ([`crate::protocols::occ`]): `Locked` once the write set is locked, `Validated` once
//! the reads are valid at `cts`, the write set installed, logged and unlocked record by record,
//! and the log epoch out of flight only after the last.

pub mod record;
mod worker;

use crate::storage::{RowRef, TableId};
pub use record::{TicTocRecord, TsWord};
use worker::TicTocLocal;
pub use worker::TicTocWorker;

use crate::engine::options::{switch, OptionSpec, ProtocolOptions};
use crate::engine::{Capabilities, Database, Isolation, Protocol, Reads, Setup};
use crate::error::Error;
use crate::protocols::occ::{
    parse_read_phase_extension, OccRecord, OccWorker, ValidationLock, READ_PHASE_EXTENSION,
};

/// The TicToc protocol.
#[derive(Clone, Copy, Debug)]
pub struct TicToc {
    options: TicTocOptions,
}

/// TicToc's options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct TicTocOptions {
    /// What commit does with a write-set record locked by another commit.
    pub validation_lock: ValidationLock,
    /// Abort before locking when a read is already doomed (§4.2).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub preemptive_abort: bool,
    /// Validate reads of a just-overwritten version through the record's previous install
    /// timestamp (§4.3).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub timestamp_history: bool,
    /// ReadPhaseExtension (CCBench §6.2): nanoseconds to wait before validating after a read
    /// phase that met a concurrent update; 0 (the default) turns it off.
    pub read_phase_extension: u32,
}

impl Default for TicTocOptions {
    fn default() -> Self {
        TicTocOptions {
            validation_lock: ValidationLock::NoWait,
            preemptive_abort: true,
            timestamp_history: true,
            read_phase_extension: 0,
        }
    }
}

impl ProtocolOptions for TicTocOptions {
    const SPECS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "validation-lock",
            values: ValidationLock::VALUES,
            default: "nowait",
            help: "a write-set record locked by another commit: abort and retry (NoWait, \
                   CCBench's default), release all and relock (NoWaitTT, the paper's), or spin",
        },
        OptionSpec {
            name: "preemptive-abort",
            values: "on|off",
            default: "on",
            help: "abort before locking when a read record is locked below the commit \
                   timestamp's lower bound (§4.2)",
        },
        OptionSpec {
            name: "timestamp-history",
            values: "on|off",
            default: "on",
            help: "accept a read of a version overwritten after the commit timestamp (§4.3)",
        },
        READ_PHASE_EXTENSION,
    ];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "validation-lock" => self.validation_lock = ValidationLock::parse(name, value)?,
            "preemptive-abort" => self.preemptive_abort = switch(name, value)?,
            "timestamp-history" => self.timestamp_history = switch(name, value)?,
            "read-phase-extension" => {
                self.read_phase_extension = parse_read_phase_extension(name, value)?
            }
            _ => return Err(format!("--opt {name}: not an option of tictoc")),
        }
        Ok(())
    }
}

impl Protocol for TicToc {
    const NAME: &'static str = "tictoc";
    const DESCRIPTION: &'static str =
        "optimistic; data-driven wts/rts timestamps, rts extension in validation (SIGMOD'16)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: false,
        reads: Reads::InvisibleUntilValidation,
        interactive: true,
        templates: false,
    };
    const BUCKET_CLOCKS: bool = true;
    type Record = TicTocRecord;
    type Worker<'db> = TicTocWorker<'db>;
    type Options = TicTocOptions;

    fn new(options: TicTocOptions, _: &Setup<'_>) -> Result<Self, Error> {
        Ok(TicToc { options })
    }

    fn options(&self) -> &TicTocOptions {
        &self.options
    }

    fn load(&self, _: TableId, row: RowRef<'_, TicTocRecord>, payload: &[u8]) {
        row.write_from(payload);
        let rec = row.header;
        rec.publish(TsWord(TicToc::loaded_word()), record::LOADED);
    }

    fn is_present(&self, rec: &TicTocRecord) -> bool {
        !crate::protocols::occ::is_absent(rec.load())
    }

    fn read_committed(
        &self,
        _: TableId,
        _: u64,
        row: RowRef<'_, TicTocRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        crate::protocols::occ::read_committed(row, buf)
    }

    fn worker(db: &Database<Self>) -> Result<TicTocWorker<'_>, Error> {
        let local = TicTocLocal::new(db.protocol().options);
        Ok(OccWorker::new(db.worker_ctx()?, local))
    }
}
