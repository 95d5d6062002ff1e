//! `ermia-ssn`: snapshot isolation made serializable by the serial safety net (SSN: Wang,
//! Johnson, Fekete and Pandis, DaMoN 2015 and VLDB Journal 26(4) 2017; ERMIA's SI+SSN, as
//! CCBench runs it, ccbench-vldb20.txt §2.1), latch-free.
//!
//! Execution is `si`'s (`protocols::mv::worker`): snapshot reads, pending versions installed
//! at write time, first updater wins. SSN certifies at pre-commit that no dependency cycle can
//! close through the transaction. Each transaction `T` keeps `eta(T)` (its *pstamp*), the
//! largest commit timestamp of a transaction that must precede it, and `pi(T)` (its *sstamp*),
//! the smallest successor stamp of a transaction that must follow it through an
//! anti-dependency, starting at its own commit timestamp `c(T)`; it aborts when
//! `pi(T) <= eta(T)` (the *exclusion window*, abort reason `exclusion-window`). Each version
//! carries its readers' largest commit timestamp (`pstamp`), its overwriter's `pi` once that
//! committed (`sstamp`; the overwriter's pending stamp before), and a bitmap of the workers
//! whose running transaction read it (ERMIA's reader tracking; [`SsnExt`]).
//!
//! * **Read** of `v`: `eta` takes `v`'s commit timestamp; if `v`'s overwriter committed, `pi`
//!   takes its `sstamp`; otherwise the reader sets its bit and keeps `v` in its read set.
//! * **Overwrite** of `v`: `v.sstamp` names the writer; `eta` takes `v`'s commit timestamp and
//!   `pstamp`.
//! * **Pre-commit** at `c` (latch-free: many transactions certify at once; of the two ends of
//!   an edge, the one with the larger commit timestamp accounts for it): for each version read,
//!   an overwriter that committed, or is certifying with a smaller timestamp (waited for), gives
//!   `pi` its `pi`; for each version overwritten, readers certifying with a smaller timestamp
//!   (read through the bitmap and the transaction table) and committed readers (`pstamp`) give
//!   `eta` their timestamps. Both exclusion tests, early at each access and at pre-commit, are
//!   the paper's.
//! * **Post-commit**: versions read get `pstamp = max(pstamp, c)` and lose the reader bit;
//!   versions overwritten get `sstamp = pi`.
//!
//! A transaction that read nothing still tracked and wrote nothing commits at its snapshot
//! without a commit timestamp (every version it read was already overwritten, so no later
//! transaction can depend on it, and the early tests covered its stamps).
//!
//! **Phantoms.** ERMIA's phantom protection is off by default; txlab's is on: scans and
//! absent-key reads observe the shared phantom buckets and inserts mark them, with the two
//! bucket clocks described in `protocols::mv::worker` (an insert is an overwrite of an
//! absence: the observer that certified first gives the inserter its timestamp, and an observer
//! that finds an insert committed after its snapshot aborts with `phantom-validation`, since
//! the inserter's `pi` is not kept per bucket). The deleter of an absence read is a
//! predecessor too: a read of a tombstone takes its timestamp into `eta` as any read does, and
//! once the GC has unlinked the deleted row (no version is left to name the deleter) the
//! bucket's `wts`, to which the GC handed the tombstone's timestamp first, stands for it.
//!
//! **Where this departs from the papers.** A reader certifying before an overwriter is counted
//! in the overwriter's `eta` at its commit timestamp without waiting to learn whether it
//! commits (conservative: it can only abort more). The read-mostly optimisation of ERMIA's SSI
//! (old versions not tracked) is SSI's, not SSN's, and is not applied here.
//!
//! **Options**: `gc-interval-us`, `aggressive-gc-us`, `version-alloc` and `version-poison` (as
//! `si`). At most 256 workers: one reader bit each.
//!
//! **Record**: [`SsnRecord`], the substrate's head word; versions carry [`SsnExt`].
//!
//! **Commit contract** (`Protocol`'s docs): kept by the multi-version substrate
//! ([`crate::protocols::mv::worker`]): logged from the pending versions before they are
//! stamped, the log epoch out of flight only once they are.

mod record;
mod worker;

pub use record::{SsnExt, SsnRecord};
pub use worker::{Ssn, SsnWorker};

use crate::engine::{Capabilities, Isolation, Reads};
use crate::protocols::mv::worker::MvProtocol;

/// The ermia-ssn protocol.
pub type ErmiaSsn = MvProtocol<Ssn>;

const NAME: &str = "ermia-ssn";
const DESCRIPTION: &str =
    "multi-version snapshot isolation with the serial safety net (ERMIA's SI+SSN)";
const CAPS: Capabilities = Capabilities {
    isolation: Isolation::Serializable,
    inserts: true,
    scans: true,
    needs_access_set: false,
    snapshot_reads: true,
    reads: Reads::Registered,
    interactive: true,
    templates: false,
};
