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
//! (`protocols::mv`).
//!
//! **Isolation.** Snapshot isolation, not serializability: two transactions that read what the
//! other writes both commit (write skew), and a read-only transaction may see a state no serial
//! order produces. `txlab check -p si` reports those anomalies as found and permitted.
//!
//! **Scans and phantoms.** A scan reads the snapshot's rows in the index range; there is no
//! phantom protection (snapshot isolation needs none: a scan sees its snapshot).
//!
//! **Options**: `gc-interval-us`, how often the GC watermark is refreshed (CCBench's RapidGC
//! interval; its default, 10 µs), and `aggressive-gc-us`, CCBench's AggressiveGC (versions older
//! than the bound are collected even if a running snapshot may need them; see
//! `protocols::mv`; 0, the default, is off), and `version-alloc`, `pool` (per-worker
//! pools reusing reclaimed versions, CCBench's AssertiveVersionReuse; the default) or `malloc`
//! (the global allocator, for the factor analysis), and `version-poison` (debugging: freed versions
//! are overwritten). The protocol is `protocols::mv::worker`'s `MvProtocol` with
//! [`SiCert`].
//!
//! **Record**: [`SiRecord`], the substrate's one head word; versions carry no fields of SI's
//! own.
//!
//! **Commit contract** (`Protocol`'s docs): kept by the multi-version substrate
//! ([`crate::protocols::mv::worker`]): logged from the pending versions before they are
//! stamped, the log epoch out of flight only once they are.

mod worker;

pub use worker::{SiCert, SiWorker};

/// A record slot of an SI database: the multi-version substrate's head word, with no version
/// fields of its own (so SI has no `record.rs`).
pub type SiRecord = crate::protocols::mv::MvRecord<()>;

use crate::engine::{Capabilities, Isolation, Reads};
use crate::protocols::mv::worker::MvProtocol;

/// The SI protocol.
pub type Si = MvProtocol<SiCert>;

const NAME: &str = "si";
const DESCRIPTION: &str =
    "multi-version snapshot isolation, first updater wins (ERMIA's SI; permits write skew)";
const CAPS: Capabilities = Capabilities {
    isolation: Isolation::Snapshot,
    inserts: true,
    scans: true,
    needs_access_set: false,
    snapshot_reads: true,
    reads: Reads::Invisible,
    interactive: true,
    templates: false,
};
