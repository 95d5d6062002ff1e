//! `si`: snapshot isolation with first-updater-wins, as ERMIA runs it (§3.3-3.4 of
//! `../shared/papers/ermia-tr.txt`; CCBench's SI, ccbench-vldb20.txt §2.1).
//!
//! Every transaction reads the snapshot of its begin: the newest version of each record
//! committed at or below its snapshot timestamp, drawn from a centralized counter. Reads write
//! nothing shared and are never validated. A write installs a new pending version at the head
//! of the record's chain at once (ERMIA's in-place update of the indirection entry): if the
//! newest version was committed after the snapshot, or another transaction's pending version
//! is there, the writer aborts (`write-conflict`, first updater wins). Commit draws a timestamp,
//! logs, and stamps the versions; abort takes them off their chains. The version chains, the
//! transaction table, snapshots and garbage collection are the shared multi-version substrate
//! (`protocols::common::mv`).
//!
//! **Isolation.** Snapshot isolation, not serializability: two transactions that read what the
//! other writes both commit (write skew), and a read-only transaction may see a state no serial
//! order produces. `txlab check -p si` reports those anomalies as found and permitted.
//!
//! **Scans and phantoms.** A scan reads the snapshot's rows in the index range; there is no
//! phantom protection (snapshot isolation needs none: a scan sees its snapshot).
//!
//! **Options**: `gc-interval-us`, how often the GC watermark is refreshed (CCBench's RapidGC
//! interval; its default, 10 µs).
//!
//! **Record**: [`SiRecord`], the substrate's one head word; versions carry no fields of SI's
//! own.

mod record;
mod worker;

pub use record::SiRecord;
pub use worker::{SiCert, SiWorker};

use crate::engine::options::{number, OptionSpec, ProtocolOptions};
use crate::engine::{Capabilities, Database, Isolation, Protocol, Reads, Setup};
use crate::error::Error;
use crate::protocols::common::mv::{MvShared, MAX_WORKERS, TOMBSTONE};
use crate::storage::context::WorkerCtx;
use crate::storage::{RowRef, TableId};
use std::sync::atomic::Ordering;

/// The SI protocol: the substrate's shared state.
pub struct Si {
    options: SiOptions,
    mv: MvShared<()>,
}

/// SI's options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SiOptions {
    /// Microseconds between refreshes of the GC watermark.
    pub gc_interval_us: u64,
}

impl Default for SiOptions {
    fn default() -> Self {
        SiOptions { gc_interval_us: 10 }
    }
}

/// The `gc-interval-us` option, shared by the multi-version protocols.
pub const GC_INTERVAL: OptionSpec = OptionSpec {
    name: "gc-interval-us",
    values: "1 to 1000000",
    default: "10",
    help: "microseconds between refreshes of the GC watermark (CCBench's RapidGC interval)",
};

impl ProtocolOptions for SiOptions {
    const SPECS: &'static [OptionSpec] = &[GC_INTERVAL];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "gc-interval-us" => self.gc_interval_us = number(name, value, 1, 1_000_000)?,
            _ => return Err(format!("--opt {name}: not an option of si")),
        }
        Ok(())
    }
}

impl Si {
    /// The multi-version substrate (version statistics, the watermark).
    pub fn substrate(&self) -> &MvShared<()> {
        &self.mv
    }
}

impl Protocol for Si {
    const NAME: &'static str = "si";
    const DESCRIPTION: &'static str =
        "multi-version snapshot isolation, first updater wins (ERMIA's SI; permits write skew)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Snapshot,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: true,
        reads: Reads::Invisible,
    };
    type Record = SiRecord;
    type Worker<'db> = SiWorker<'db>;
    type Options = SiOptions;

    fn new(options: SiOptions, setup: &Setup<'_>) -> Result<Self, Error> {
        if setup.max_workers > MAX_WORKERS {
            return Err(Error::Config(format!(
                "si takes at most {MAX_WORKERS} workers (a pending version's stamp names its \
                 writer's slot in 14 bits); this database was asked for {}",
                setup.max_workers
            )));
        }
        let mv = MvShared::new(setup.tables, setup.max_workers, options.gc_interval_us);
        Ok(Si { options, mv })
    }

    fn options(&self) -> &SiOptions {
        &self.options
    }

    fn load(&self, table: TableId, row: RowRef<'_, SiRecord>, payload: &[u8]) {
        self.mv.load(table, row, payload);
    }

    fn is_present(&self, rec: &SiRecord) -> bool {
        self.mv
            .latest_committed(rec)
            .is_some_and(|v| v.flags.load(Ordering::Relaxed) & TOMBSTONE == 0)
    }

    fn read_latest(&self, table: TableId, row: RowRef<'_, SiRecord>, buf: &mut [u8]) -> bool {
        self.mv.read_committed(table, row.header, buf).is_some()
    }

    fn read_committed(
        &self,
        table: TableId,
        row: RowRef<'_, SiRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        self.mv.read_committed(table, row.header, buf)
    }

    fn worker(db: &Database<Self>) -> Result<SiWorker<'_>, Error> {
        Ok(SiWorker::new(WorkerCtx::new(db.storage())?, &db.protocol().mv))
    }
}
