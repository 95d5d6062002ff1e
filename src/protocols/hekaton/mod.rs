//! `hekaton`: Hekaton's optimistic multi-version concurrency control (Larson, Blanas, Diaconu,
//! Freedman, Patel, Zwilling, "High-Performance Concurrency Control Mechanisms for Main-Memory
//! Databases", PVLDB 5(4) 2011; `../shared/papers/PROTOCOLS.md`).
//!
//! Execution is the multi-version worker's (`protocols::mv::worker`): a transaction reads
//! the versions visible at its begin timestamp and installs new versions at write time. What
//! Hekaton adds:
//!
//! * **Begin and End fields.** A version's Begin is the substrate's stamp: a commit timestamp,
//!   or the pending stamp that names its running writer (Hekaton's transaction id, resolved
//!   through the transaction table). Its End ([`HekatonExt`]) is 0 (infinity) until a
//!   transaction replaces it, then that transaction's pending stamp, then its commit
//!   timestamp. Writing a version whose replacement is another transaction's aborts the writer
//!   (`write-conflict`, first writer wins), as does writing one replaced after the snapshot.
//! * **Speculative reads and commit dependencies.** A version whose writer is *preparing*
//!   (it drew its end timestamp and is validating) with an end timestamp at or below the
//!   reader's begin timestamp is read at once, not waited for; the reader takes a commit
//!   dependency on it and cannot commit before the writer does. If the writer aborts, so does
//!   the reader (`cascading-abort`). This also covers the paper's *speculative ignore*: the
//!   version a preparing transaction replaced is skipped in favour of its new one.
//! * **Validation** at the end timestamp `c`, in the preparing state: *read stability*, every
//!   version read is still visible at `c` (its End names no transaction committed or committing
//!   below `c`; a committing one is waited for), else `read-validation`; *phantom avoidance*,
//!   every range scanned and every key found absent is scanned again and must show no version
//!   committed in `(begin, c)` and none whose writer is committing there, else
//!   `phantom-validation`. Then the commit dependencies are waited for, the transaction is
//!   logged, and its versions get their Begin and the replaced ones their End.
//!
//! **Where this departs from the paper.** (1) The paper keeps a commit-dependency counter in
//! each dependent and has the writer decrement it (or set its AbortNow flag) at its end; here
//! the dependent polls the Begin of the versions it read speculatively, which the writer
//! stamps (commit) or marks aborted anyway: no registration, no list of dependents, the same
//! outcome. (2) A writer that finds the newest version pending with a writer that is preparing
//! waits for it to finish instead of aborting: its retry would meet the same pending version,
//! and a preparing transaction waits only for transactions with smaller end timestamps, so the
//! wait ends. (3) A transaction that writes nothing commits at its begin timestamp without
//! validation once its commit dependencies resolved: every transaction that commits below the
//! begin timestamp is in its reads and every later one is not, which is a serial prefix (our
//! reasoning; the paper validates serializable read-only transactions at their end timestamp).
//! (4) Versions are reclaimed by the substrate's watermark GC, not Hekaton's cooperative
//! collection; timestamps come from the substrate's centralized counter, as in the paper. (5)
//! Only the optimistic scheme is built; the paper's pessimistic (locking) variant is not.
//!
//! **Options**: `gc-interval-us`, `aggressive-gc-us`, `version-alloc` and `version-poison` (as
//! `si`).
//!
//! **Record**: [`HekatonRecord`], the substrate's head word; versions carry [`HekatonExt`].
//!
//! **Commit contract** (`Protocol`'s docs): kept by the multi-version substrate
//! ([`crate::protocols::mv::worker`]): logged from the pending versions before they are
//! stamped, the log epoch out of flight only once they are. A speculative reader of a
//! preparing transaction commits only after it (its commit dependency), so it logs after it
//! too.

mod record;
mod worker;

pub use record::{HekatonExt, HekatonRecord};
pub use worker::{Hekaton as HekatonCert, HekatonWorker};

use crate::engine::{Capabilities, Isolation, Reads};
use crate::protocols::mv::worker::MvProtocol;

/// The hekaton protocol.
pub type Hekaton = MvProtocol<HekatonCert>;

const NAME: &str = "hekaton";
const DESCRIPTION: &str =
    "optimistic multi-version concurrency control (Hekaton: speculative reads, commit dependencies)";
const CAPS: Capabilities = Capabilities {
    isolation: Isolation::Serializable,
    inserts: true,
    scans: true,
    needs_access_set: false,
    snapshot_reads: true,
    reads: Reads::Invisible,
    interactive: true,
    templates: false,
};
