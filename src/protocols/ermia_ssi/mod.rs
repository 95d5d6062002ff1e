//! `ermia-ssi`: ERMIA's serializable snapshot isolation (`../shared/papers/ermia-tr.txt` §3.6,
//! after Cahill, Röhm and Fekete's SSI), with ERMIA's stamp-based tracking and latch-free
//! parallel pre-commit.
//!
//! Execution is `si`'s (`protocols::common::mvcc`): snapshot reads, pending versions installed
//! at write time, first updater wins. Every cycle of dependencies under snapshot isolation
//! contains a *dangerous structure*: `T1 -rw-> T2 -rw-> T3` where `T3` commits first. SSI
//! aborts a transaction that could complete one (abort reason `dangerous-structure`). ERMIA
//! orders commits by one counter (its log offsets), so every transaction in pre-commit knows
//! which of the three committed first and many certify at once.
//!
//! * **Stamps** (ERMIA's `s0`, `s1`, `s2`, `rstamp`): a transaction's `s1` is the smallest
//!   commit timestamp of a transaction that overwrote a version it read and committed before it
//!   (its `T3`, if it is a `T2`). Each version keeps its overwriter's commit timestamp once that
//!   committed (`sstamp`, its pending stamp before), the overwriter's `s1` (`s2`), the largest
//!   commit timestamp of its committed readers (`rstamp`) and a reader bitmap ([`SsiExt`]).
//! * **Read** of `v`: if `v`'s overwriter committed, `s1` takes its timestamp, and a set `s2`
//!   aborts the reader at once (it is the `T1` of a structure whose `T2` and `T3` committed);
//!   otherwise the reader sets its bit and keeps `v`.
//! * **Pre-commit** at `c` (Algorithm 1): for each version read, an overwriter that committed
//!   or certifies with a smaller timestamp (waited for) gives `s1` its timestamp, and its `s2`
//!   aborts us as above. With `s1` set, the transaction is a `T2` whose `T3` committed first: it
//!   aborts if a reader of a version it overwrote is still running (ERMIA prefers aborting the
//!   pivot: the reader keeps its work), is certifying, or committed (`rstamp`) with a timestamp
//!   at or above `s1` (at: the reader is `T3` itself, a cycle of two).
//! * **Post-commit**: versions read get `rstamp = max(rstamp, c)` and lose the reader bit;
//!   versions overwritten get `s2 = s1`, then `sstamp = c`.
//!
//! **Phantoms.** As `ermia-ssn` (ERMIA inherits Silo's node-set validation and turns it off by
//! default; txlab's is on): scans and absent-key reads observe phantom buckets, inserts mark
//! them (`protocols::common::mvcc`); an inserter with `s1` set aborts if an observer of the
//! absence it ended committed at or above `s1`, an inserter that finds an observer certifying
//! with a later timestamp aborts (that observer may have missed the insert, and an insert leaves
//! no overwriter mark to learn its successor from), and an observer that finds an insert
//! committed after its snapshot aborts with `phantom-validation`.
//!
//! **Where this departs from the paper.** Algorithm 1 aborts a pivot on any in-flight reader;
//! here a reader certifying with a timestamp below `s1` commits before `T3` and is no hazard
//! (no dangerous structure), so only running readers and those at or above `s1` abort it. ERMIA's
//! read optimisation (versions older than an age threshold not tracked, their overwriters
//! assuming readers) is not built: it trades tracking for aborts of every pivot that overwrites
//! an old version, and wants the factor analysis this experiments will give it.
//!
//! **Options**: `gc-interval-us`, `aggressive-gc-us`, `version-alloc` and `version-poison` (as
//! `si`). At most 256 workers: one reader bit each.
//!
//! **Record**: [`SsiRecord`], the substrate's head word; versions carry [`SsiExt`].

mod record;
mod worker;

pub use record::{SsiExt, SsiRecord};
pub use worker::{Ssi, SsiWorker};

use crate::engine::{Capabilities, Isolation, Reads};
use crate::protocols::common::mvcc::MvProtocol;

/// The ermia-ssi protocol.
pub type ErmiaSsi = MvProtocol<Ssi>;

const NAME: &str = "ermia-ssi";
const DESCRIPTION: &str =
    "multi-version serializable snapshot isolation (ERMIA's SSI: dangerous structures)";
const CAPS: Capabilities = Capabilities {
    isolation: Isolation::Serializable,
    inserts: true,
    scans: true,
    needs_access_set: false,
    snapshot_reads: true,
    reads: Reads::Registered,
};
