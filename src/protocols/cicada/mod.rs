//! `cicada`: optimistic multi-version concurrency control with loosely synchronized clocks
//! (Lim, Kaminsky, Andersen, "Cicada: Dependably Fast Multi-Core In-Memory Transactions",
//! SIGMOD 2017, `../shared/papers/cicada-sigmod17.txt` §3).
//!
//! **Timestamps (§3.1).** A read-write transaction takes its timestamp `ts` at begin from its
//! thread's clock (`protocols::cicada::clock`: per-thread software clocks advanced by the TSC,
//! one-sided synchronization every 100 µs, a 1 µs boost after an abort, the thread id below
//! the clock). Transactions serialize in timestamp order, not commit order. `min_wts` and
//! `min_rts` are refreshed every `gc-interval-us` by whichever worker begins first once it is
//! due (non-blocking: a worker that finds another refreshing goes on). A worker between
//! transactions (its quiescence mark even) is left out of the refresh, so an idle thread of an
//! embedding application does not stop the GC; when it begins again its timestamp is checked
//! against `min_wts` and raised past it if needed (`ThreadClock::next_wts_checked`). `timestamps=counter`
//! takes the clock part from one shared counter by fetch-and-add instead (§4.6's baseline).
//!
//! **Contention regulation (§3.9)** is the driver's adaptive backoff, Cicada's default
//! (`Protocol::DEFAULT_BACKOFF`): a run that names no backoff gets it.
//!
//! **External consistency.** Loosely synchronized clocks let a transaction that begins after
//! another's commit returned take a smaller timestamp and miss it (the paper says so, §3.1,
//! and offers remedies). txlab's contract is that a commit is visible to every transaction
//! that begins after it returns, so by default (`external-consistency=on`) a begin first
//! raises its clock above every thread's published `wts` (reading each thread's slot: with 2
//! threads one remote cache line per begin), and read-only transactions take fresh timestamps
//! and are validated like the others. `external-consistency=off` is the paper's behaviour:
//! no catching up, read-only transactions at `thread.rts = min_wts - 1` without tracking or
//! validation (what the reproductions of its figures use).
//!
//! What `on` costs (`txlab run --breakdown` in a `--features shared-writes` build counts it): every
//! begin reads every other worker's clock slot, which that worker wrote at its own begin, so a
//! transaction pays a line transfer per other worker (O(threads): the first limit at many
//! cores); and a read-only transaction raises the read timestamp of every version it reads (10
//! shared writes per YCSB read-only transaction of 10 reads, none with `off`). On 2 threads
//! (`-w ycsb --records 1000000 --ops 10 --read-ratio 1 --theta 0 --payload 4`, medians of 3)
//! Cicada runs at 0.60x Silo with `on` and 0.67x with `off`; in cache (`--records 10000`) the
//! difference grows with the cost of a line transfer between the two cores, from 6 % to 2.3x
//! on the same VM at different times.
//!
//! **Versions (§3.2).** A record's versions hang off its head, newest write timestamp first;
//! a version has `wts` (its stamp), `rts` ([`CicadaExt`]) and a status (PENDING, COMMITTED,
//! ABORTED, DELETED; UNUSED for a free inlined version). A transaction sees the newest version
//! with `wts < ts` that is committed, waiting while it finds one pending (its writer has a
//! smaller timestamp and is validating; with `wait=off`, the factor analysis's no-wait, it
//! aborts instead) and skipping aborted ones. Writes build the new version privately in the
//! read phase; validation installs it. Reads of the transaction's own writes find them in the
//! write set. Early aborts: a write whose visible version's `rts` is above `ts` aborts at once
//! (validation would), as does a read-modify-write of a record with a committed or pending
//! version above `ts` (write-latest-version-only).
//!
//! **Best-effort inlining (§3.3).** The head holds one version in place
//! ([`record::CicadaRecord`]), for rows of at most [`record::INLINE_MAX`] bytes: a writer claims
//! it by CAS (UNUSED to PENDING) and falls back to a pooled version (`storage::version`'s
//! per-worker pools) when it is taken. Loaded rows live there. *Promotion*: a read (not in a
//! transaction declared read-only, not in a scan) of a committed version that is not inlined,
//! below `min_rts`, with nothing newer and the inlined version free, claims the inlined version
//! and writes the same data into it, as a read-modify-write; so the newest version of a record
//! that is read and no longer written ends up inlined. The paper lets a failed promotion abort
//! its transaction like any write ("the promotion may fail if there is a concurrent write");
//! here a promotion that cannot be installed, or fails the write check, is dropped (its
//! version marked ABORTED, or freed) and the transaction goes on: the data it would have
//! written is the data it read, which the read check validates anyway. A later write of the
//! key by the same transaction makes it an ordinary write.
//!
//! **Validation (§3.4-3.5).** (0) Unless five transactions in a row committed (adaptive
//! skipping): the write set is partially sorted, the 8 records whose newest version is newest
//! first (contention-aware), and the early consistency check runs. (1) Each pending version is
//! installed by CAS in `wts` order wherever it belongs in its chain; the version it goes in
//! above must be what the write expects (present, or absent for an insert) with `rts <= ts`.
//! Pending installation is deadlock-free: a transaction waits only for pending versions of
//! smaller timestamps. (2) The read timestamps of the versions read are raised to `ts`
//! (conditionally: only when lower). (3) The version consistency check: every read's visible
//! version is still the one visible now, found by searching again from the version just above
//! `ts` (incremental search), so that *no version appeared anywhere in the visible range*
//! (CCBench §3.3 found that the paper's check of the version read alone misses this, and fixed
//! it; so do we); and every installed version still goes in above an expected version read at
//! or below `ts` only. A SeqCst fence separates (1) from (2) and (2) from (3): an installer and
//! a reader of the same version each store (the version, the `rts`) then load (the `rts`, the
//! chain), so one of them sees the other. Then the writes are logged at `ts` (Cicada's commit
//! stamp is its `wts`, §3.7) and their status set: COMMITTED, or DELETED for a deletion.
//!
//! **The commit contract** (`Protocol`'s docs): `Locked` once every pending version is in its
//! chain (step 1 of validation), `Validated` after step 3, `Logged` once the records are
//! written from the pending versions (before any becomes COMMITTED: a reader of one logs
//! after), `Installed` once every status is set. The log epoch leaves flight only then, in
//! `WorkerCtx::commit_returning` (`Acknowledging`): a checkpoint whose start epoch covers the
//! commit reads its COMMITTED versions (`read_committed`: the newest committed one); were the
//! epoch out of flight before the statuses, a checkpoint could read the versions below them
//! while the commit sat between its log record and its statuses, and lose it.
//!
//! **Phantoms.** With `index=single-version` (the default) the shared single-version index
//! with txlab's phantom buckets protects ranges and absent keys, ordered by timestamp as TicToc
//! orders them (`storage::phantom`'s clocks). A transaction that found a key absent (not in the
//! index, or nothing visible in its record) or scanned a range records the buckets' versions;
//! at validation it raises their `rts` to `ts`, fences and checks that the versions did not
//! move. A transaction whose version makes a key appear where nothing was bumps the bucket,
//! fences and checks that its `rts` is not above `ts`.
//!
//! **Deferred index updates (§3.6).** An insert of a key the index does not hold builds its new
//! record privately: the record enters the index at validation, just before its version is
//! installed (`deferred-index=on`, the default). Until then the transaction finds it through its
//! write set (reads, writes, deletes, a second insert, and scans, which merge such keys with the
//! index's in key order), and others find the key absent without meeting the record; an insert
//! that aborts never touched the index. If the key entered the index meanwhile, another insert
//! of it is in flight or done and this one aborts (`insert-conflict`); an entry whose record is
//! being unlinked is waited out. The paper defers updates of its multi-version index; here the
//! shared single-version index is updated late instead, which keeps its point: aborted
//! transactions do not touch shared index memory, and an insert is in flight in the index for
//! the length of a validation rather than a transaction. With `deferred-index=off` the record
//! enters the index at the insert, with no version until validation.
//!
//! **Multi-version index (§3.6, `index=multi-version`).** Each table gets a B-link tree
//! (`protocols::cicada::btree`, `index-fanout` keys per node) whose nodes are Cicada records of
//! a node table the protocol owns (`index.rs`): a node is read at the transaction's timestamp
//! (its own copy first), written as a new version in the write set, and validated, committed
//! and collected like a row; nodes are not logged. The tree maps each key to its row's record,
//! and at every timestamp it holds a key exactly when the row is present: an insert of an
//! absent key adds the entry, a deletion removes it, both in the same transaction as the row's
//! version, so they commit or abort together (the index update is deferred to validation by
//! construction: until then it lives in the transaction's private node copies, which its own
//! reads and scans see; `deferred-index=off` is refused). As in the paper (its footnote 1),
//! internal nodes and the leaf of a key found present are read untracked: the row's own
//! validation covers a present key. A key found absent tracks the leaf that would hold it, and
//! a scan tracks every leaf it crosses, so a phantom fails validation through the leaf's
//! version: conflicts are per leaf, as in the paper, not per key. A node written (a split, a
//! removal) is validated as read, so a structure change never commits over a newer node.
//! Because the untracked reads may mix timestamps, an insert that finds its key mapped to a row
//! absent at its timestamp (or deleted by itself) aborts (`write-conflict`): writing the row
//! without an entry would commit a row the tree does not hold. Leaves that a removal empties
//! leave the tree with their one-child ancestors (`btree::BTree::remove`); nodes are never
//! merged otherwise. A node taken out is freed once `min_rts` passes the commit that took it
//! out and the quiescence grace period after that; its slot is then reused. The shared index
//! stays as the catalog of records: it finds or allocates a key's record (one per key until
//! unlinked), while the tree decides what a transaction sees. Departures: the paper's hash
//! index is not built (a hash-indexed table gets a tree too, and its scans are refused as with
//! the shared index); a loaded or recovered row enters the tree in place through
//! `Protocol::indexed` (loading is serialised per tree); `Cicada::check_index` checks a tree
//! against the rows while no worker runs.
//!
//! **A blind write reads.** A write of a present row (`Worker::write`) depends on the row being
//! present, so its visible version is validated and its `rts` raised like a read's: a deletion
//! at a smaller timestamp installed later would otherwise leave the write overwriting a row
//! that did not exist at its timestamp. The paper's write-only operations skip this, which is
//! sound only for writes that do not depend on presence.
//!
//! **Read-only transactions (§3.1)** run at `thread.rts` with `external-consistency=off`
//! (their count and staleness are in the version report), else as any transaction.
//!
//! **Inserts in flight.** A new key's record is in the index with no version until its
//! inserter installs one; another insert of the key that finds such a record aborts at once
//! (`insert-conflict`, an early abort: the first inserter is likely to commit), and a reader
//! sees the key absent. An inserter that aborts before installing marks the record abandoned,
//! and the key's next insert installs its version there.
//!
//! **Garbage collection (§3.8).** A committed version is queued with its `wts`; once `min_rts`
//! passes it, its thread takes the record's GC lock (skipping the item if another thread holds
//! it) and, if `wts` is above `record.min_wts`, cuts the chain below it and raises
//! `record.min_wts`. The cut versions are freed to the worker's pools (inlined ones become
//! UNUSED) once every worker has been quiescent since (QSBR, `protocols::cicada::quiescence`):
//! each worker marks the start and end of its transactions (and of reconnaissance), and the
//! worker that refreshes `min_wts`/`min_rts` every `gc-interval-us` also advances the
//! quiescence generation when every busy worker has passed a transaction boundary; a version
//! cut at generation `g` is freed at `g + 2`, typically a few tens of microseconds later, so
//! the memory a write reuses is still in the cache (the storage epochs' 40 ms made it cold: on
//! TPC-C-NP at one thread the freed versions went from cutting to reuse through tens of
//! megabytes). An idle worker is quiescent and holds nothing back. A deleted
//! record is unlinked (its index entry removed, its slot freed, through `storage::reclaim`)
//! when its deletion is its newest version and below `min_rts`; `record.min_wts` is then left
//! at the deletion's `wts`, so a stale GC item of the old record never acts on a reused slot.
//!
//! **Cicada-SV (`single-version=on`, CCBench §7.1).** CCBench built a single-version Cicada
//! that overwrites the inlined version, to show that Cicada's overhead in its Fig. 12 is the
//! version chains; it ran it only on a partitioned workload because it "does not cope well with
//! contention". Its code is not described, so this one is built to be serializable under any
//! contention. Each record keeps one version, its inlined one (every table must inline: rows
//! of at most [`INLINE_MAX`] bytes). Writes build a private copy (a pooled version) in the read
//! phase. Validation takes each written record's *write lock* (the GC lock word, holding the
//! writer's timestamp; a holder with a smaller timestamp is waited for, so waits go one way,
//! as pending installation's do; a larger one aborts), then checks the version below our
//! timestamp, present or absent as the write expects, and its `rts` not above ours. Reads are
//! seqlock-style: the stamp (Acquire) before the copy, again after it; a stamp above the
//! timestamp means the version the transaction should see was overwritten, and it aborts
//! (`snapshot-too-old`); a lock held by a smaller timestamp is waited out (that writer is about
//! to overwrite below us), like a pending version. The consistency check of a read is then:
//! same stamp (stamps are unique), and no smaller timestamp holding the lock (the lock-then-
//! `rts` and `rts`-then-lock pairs, SeqCst, make either the writer see our `rts` or us see its
//! lock). The write phase overwrites the inlined version in place (stamp `WRITING`, payload,
//! status, `rts`, then the stamp: a seqlock) and releases the lock. A record's first version
//! (an insert into a fresh record) is installed as in Cicada. Read-only transactions take fresh
//! timestamps and are validated (there is no older version for `thread.rts` to read). The
//! protocol's `snapshot_reads` capability still holds: a read never sees a version committed
//! above its timestamp; where multi-version Cicada reads the older version, this one aborts
//! (`snapshot-too-old`). No GC work is queued; deleted records are unlinked as usual (the
//! reclaimer's GC lock excludes writers).
//!
//! **Departures and what is missing.** Listed above (the multi-version index's with it).
//! Durability uses
//! the shared per-worker log (recovery takes each key's record with the largest stamp, which
//! applies deletes as §3.7 requires). A checkpoint reads rows while workers run through a
//! quiescence reader slot, so the versions it walks are not reused under it.
//!
//! **Options**: `gc-interval-us` (10), `external-consistency` (on), and the factor analysis's
//! switches, all on by default: `inlining`, `promotion`, `sort` (contention-aware write-set
//! sorting), `precheck` (the early consistency check), `adaptive` (skipping both after 5
//! commits in a row), `wait` (wait for pending versions; off aborts), `early-abort`,
//! `write-latest-only`, `deferred-index`; `timestamps` (`clocks`, or `counter`);
//! `single-version` (off); `index` (`single-version`, or `multi-version`) and `index-fanout`
//! (32).

pub mod btree;
pub mod clock;
mod index;
pub mod quiescence;
mod record;
mod worker;

pub use record::{CicadaExt, CicadaRecord, INLINE_MAX};
pub use worker::CicadaWorker;

use crate::engine::options::{choice, number, switch};
use crate::engine::report::VersionReport;
use crate::engine::{
    Backoff, Capabilities, Database, Isolation, OptionSpec, Protocol, ProtocolOptions, Reads, Setup,
};
use crate::error::Error;
use crate::protocols::cicada::btree::{Shape, MAX_FANOUT};
use crate::protocols::cicada::clock::{ClockParams, Clocks, MAX_CLOCKS};
use crate::protocols::cicada::quiescence::Quiescence;
use crate::storage::reclaim::Unlink;
use crate::storage::version::{VersionPool, VersionStore};
use crate::storage::{RowId, RowRef, TableId};
use crossbeam_utils::CachePadded;
use record::{init_version, next, row_of, set_status, status, wts, CVersion, COMMITTED, DELETED};
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Cicada's options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct CicadaOptions {
    /// Microseconds between refreshes of `min_wts` and `min_rts`.
    pub gc_interval_us: u64,
    /// Best-effort inlining (§3.3).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub inlining: bool,
    /// Promotion of a visible old version into a free inlined version (§3.3).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub promotion: bool,
    /// Contention-aware write-set sorting (§3.5 (1)).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub sort: bool,
    /// The early version consistency check (§3.5 (2)).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub precheck: bool,
    /// Skipping sort and precheck after 5 commits in a row (§3.5).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub adaptive: bool,
    /// Waiting for pending versions (off: aborting).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub wait: bool,
    /// Early aborts on a visible version's read timestamp (§3.2).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub early_abort: bool,
    /// The write-latest-version-only rule for read-modify-writes (§3.2).
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub write_latest_only: bool,
    /// A transaction's timestamp is above every timestamp drawn before it began (§3.1's
    /// external consistency), and read-only transactions take fresh timestamps.
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub external_consistency: bool,
    /// Where timestamps come from.
    pub timestamps: Timestamps,
    /// Index updates deferred to validation (§3.6): an insert's new record enters the index
    /// only once its transaction validates.
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub deferred_index: bool,
    /// Cicada-SV (CCBench §7.1): one version per record, the inlined one, overwritten in place.
    #[serde(serialize_with = "crate::engine::options::serialize_switch")]
    pub single_version: bool,
    /// The primary index: the shared single-version one, or Cicada's multi-version index
    /// (§3.6).
    pub index: IndexMode,
    /// Keys per node of the multi-version index.
    pub index_fanout: usize,
}

/// Cicada's primary index (§3.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IndexMode {
    /// The shared index of txlab's storage with phantom buckets (the paper's single-version
    /// index option).
    SingleVersion,
    /// A B-link tree per table whose nodes are Cicada records (`index.rs`).
    MultiVersion,
}

/// Cicada's timestamp allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timestamps {
    /// Loosely synchronized per-thread clocks (§3.1).
    Clocks,
    /// One shared counter, fetch-and-add per transaction (§4.6's baseline).
    Counter,
}

impl Default for CicadaOptions {
    fn default() -> Self {
        CicadaOptions {
            gc_interval_us: 10,
            inlining: true,
            promotion: true,
            sort: true,
            precheck: true,
            adaptive: true,
            wait: true,
            early_abort: true,
            write_latest_only: true,
            external_consistency: true,
            timestamps: Timestamps::Clocks,
            deferred_index: true,
            single_version: false,
            index: IndexMode::SingleVersion,
            index_fanout: 32,
        }
    }
}

const fn on_off(name: &'static str, help: &'static str) -> OptionSpec {
    OptionSpec { name, values: "on | off", default: "on", help }
}

impl ProtocolOptions for CicadaOptions {
    const SPECS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "gc-interval-us",
            values: "1 to 1000000",
            default: "10",
            help: "microseconds between refreshes of min_wts and min_rts, which the GC and \
                   read-only transactions follow (Fig. 9 varies it)",
        },
        on_off("inlining", "best-effort inlining of a small version in the record head (§3.3)"),
        on_off(
            "promotion",
            "a read of an old non-inlined version copies it into the free inlined version (§3.3)",
        ),
        on_off("sort", "contention-aware sorting of the write set before validation (§3.5)"),
        on_off("precheck", "the early version consistency check before installation (§3.5)"),
        on_off("adaptive", "skip sorting and the early check after 5 commits in a row (§3.5)"),
        on_off("wait", "wait for a pending version below the timestamp; off aborts instead"),
        on_off("early-abort", "abort a write whose visible version was read later (§3.2)"),
        on_off(
            "write-latest-only",
            "abort a read-modify-write of a record with a newer committed or pending version",
        ),
        on_off(
            "external-consistency",
            "order every transaction after all that began before it (each begin reads every \
             thread's clock), read-only ones at fresh timestamps; off is the paper's default: \
             loosely synchronized clocks, read-only transactions at min_wts - 1",
        ),
        OptionSpec {
            name: "timestamps",
            values: "clocks | counter",
            default: "clocks",
            help: "per-thread loosely synchronized clocks (§3.1), or one shared counter with a \
                   fetch-and-add per transaction (§4.6's comparison)",
        },
        on_off(
            "deferred-index",
            "an insert's new record enters the index when its transaction validates (§3.6); \
             off puts it there at once (others then find the key with nothing visible)",
        ),
        OptionSpec {
            name: "single-version",
            values: "on | off",
            default: "off",
            help: "Cicada-SV (CCBench §7.1): each record keeps one version, its inlined one, \
                   which commits overwrite in place under a per-record write lock; a \
                   transaction whose version was overwritten aborts. Needs inlining=on and \
                   rows of at most 216 bytes",
        },
        OptionSpec {
            name: "index",
            values: "single-version | multi-version",
            default: "single-version",
            help: "the primary index: txlab's shared index with phantom buckets, or Cicada's \
                   multi-version index (§3.6): a B-link tree per table whose nodes are Cicada \
                   records, read at the transaction's timestamp, written in its write set and \
                   validated like rows (phantoms: the leaves read)",
        },
        OptionSpec {
            name: "index-fanout",
            values: "3 to 64",
            default: "32",
            help: "keys per node of the multi-version index",
        },
    ];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "gc-interval-us" => self.gc_interval_us = number(name, value, 1, 1_000_000)?,
            "inlining" => self.inlining = switch(name, value)?,
            "promotion" => self.promotion = switch(name, value)?,
            "sort" => self.sort = switch(name, value)?,
            "precheck" => self.precheck = switch(name, value)?,
            "adaptive" => self.adaptive = switch(name, value)?,
            "wait" => self.wait = switch(name, value)?,
            "early-abort" => self.early_abort = switch(name, value)?,
            "write-latest-only" => self.write_latest_only = switch(name, value)?,
            "external-consistency" => self.external_consistency = switch(name, value)?,
            "deferred-index" => self.deferred_index = switch(name, value)?,
            "single-version" => self.single_version = switch(name, value)?,
            "index" => {
                self.index = choice(
                    name,
                    value,
                    &[
                        ("single-version", IndexMode::SingleVersion),
                        ("multi-version", IndexMode::MultiVersion),
                    ],
                )?;
            }
            "index-fanout" => self.index_fanout = number(name, value, 3, MAX_FANOUT)?,
            "timestamps" => {
                self.timestamps = choice(
                    name,
                    value,
                    &[("clocks", Timestamps::Clocks), ("counter", Timestamps::Counter)],
                )?;
            }
            _ => return Err(format!("--opt {name}: not an option of this protocol")),
        }
        Ok(())
    }
}

/// What departed workers left: GC items and versions waiting for their grace periods.
#[derive(Default)]
struct Orphans {
    gc: Vec<worker::GcItem>,
    dead: Vec<worker::Dead>,
    nodes: worker::NodeGarbage,
}

// SAFETY: the pointers name record slots of the database's tables and versions of its stores,
// alive as long as the protocol, and are dereferenced only under the GC's rules.
unsafe impl Send for Orphans {}

/// Statistics workers hand over when they leave.
#[derive(Default)]
struct Stats {
    ro_safe: AtomicU64,
    ro_fresh: AtomicU64,
    ro_sum_ns: AtomicU64,
    ro_max_ns: AtomicU64,
    lag_count: AtomicU64,
    lag_sum_ns: AtomicU64,
    lag_max_ns: AtomicU64,
    promoted: AtomicU64,
    promotions_dropped: AtomicU64,
}

/// A departing worker's statistics: read-only transactions at `thread.rts`, those that took
/// fresh timestamps, and their staleness (sum, largest, ns); versions cut and their lag (count,
/// sum ns, largest ns); promotions committed and given up.
struct Tally {
    ro: (u64, u64, u64, u64),
    lag: (u64, u64, u64),
    promotions: (u64, u64),
}

/// The cicada protocol.
pub struct Cicada {
    options: CicadaOptions,
    clocks: Clocks,
    tsc: quanta::Clock,
    /// Per table, then per node table of the multi-version index (see `index.rs`).
    stores: Vec<VersionStore<CicadaExt>>,
    /// The data tables' count: node table `tables + t` holds table `t`'s index nodes.
    tables: usize,
    /// Per table, its multi-version index (empty with `index=single-version`).
    trees: Vec<index::TreeTable>,
    /// Per table: whether its heads inline versions.
    inline: Vec<bool>,
    /// Per table: whether reads promote versions into the heads (inlining and promotion on).
    pub(super) promote: Vec<bool>,
    row_sizes: Vec<usize>,
    /// When the next refresh of `min_wts`/`min_rts` is due (raw TSC ticks).
    next_refresh: CachePadded<AtomicU64>,
    interval_ticks: u64,
    /// The workers' quiescent states: cut versions are freed one grace period later (§3.8).
    quiescence: Quiescence,
    orphans: Mutex<Orphans>,
    orphaned: AtomicBool,
    stats: Stats,
}

impl Cicada {
    /// Whether the newest version of `key`'s row in table `t` is its record's inlined one
    /// (`None`: no row, or no version): how inlining and promotion placed it (§3.3). For tests
    /// and diagnostics, while no worker runs.
    pub fn newest_inlined(&self, db: &Database<Self>, t: TableId, key: u64) -> Option<bool> {
        let tbl = db.storage().table(t);
        let g = crate::storage::index::pin();
        let rid = tbl.index.get(key, &g)?;
        let v = tbl.rows.get(rid).header.newest().ok().flatten()?;
        Some(record::is_inline(v))
    }

    /// Checks table `t`'s multi-version index (`index=multi-version`) against the rows, for
    /// the keys in `lo..=hi`, while no worker runs: the tree's entries at its newest committed
    /// versions are in key order, each maps its key to the record the shared catalog holds for
    /// it, whose newest committed version is a row, and every key whose catalog record holds
    /// a row has an entry. Returns the number of entries; an error names the first mismatch.
    /// For tests and diagnostics.
    pub fn check_index(
        &self,
        db: &Database<Self>,
        t: TableId,
        lo: u64,
        hi: u64,
    ) -> Result<usize, String> {
        let tree = self.trees.get(t.index()).ok_or_else(|| {
            format!("table {}: no multi-version index (index=multi-version is off)", t.0)
        })?;
        let entries = tree.committed_entries(lo, hi).map_err(|e| format!("table {}: {e}", t.0))?;
        let tbl = db.storage().table(t);
        let g = crate::storage::index::pin();
        let present = |key: u64| {
            let rid = tbl.index.get(key, &g)?;
            let rec = tbl.rows.get(rid).header;
            (!rec.is_unlinked() && self.is_present(rec)).then_some(rid)
        };
        for w in entries.windows(2) {
            if w[0].0 >= w[1].0 {
                return Err(format!("table {}: keys {} and {} out of order", t.0, w[0].0, w[1].0));
            }
        }
        for &(key, rid) in &entries {
            if present(key) != Some(RowId(rid)) {
                return Err(format!(
                    "table {}: key {key} maps to record {rid}, the catalog's row is {:?}",
                    t.0,
                    present(key)
                ));
            }
        }
        let mut entry = entries.iter().map(|e| e.0).peekable();
        for key in lo..=hi {
            let indexed = entry.next_if_eq(&key).is_some();
            if present(key).is_some() && !indexed {
                return Err(format!("table {}: key {key} has a row and no index entry", t.0));
            }
        }
        Ok(entries.len())
    }

    /// Whether the tables use the multi-version index.
    #[inline(always)]
    fn mv_index(&self) -> bool {
        !self.trees.is_empty()
    }

    /// The node table of table `t`'s multi-version index.
    #[inline(always)]
    fn node_table(&self, t: TableId) -> TableId {
        TableId((self.tables + t.index()) as u32)
    }

    /// Whether `t` is a node table of the multi-version index (see `index.rs`).
    #[inline(always)]
    fn is_node_table(&self, t: TableId) -> bool {
        t.index() >= self.tables
    }

    /// Refreshes `min_wts` and `min_rts` if `gc-interval-us` passed since the last refresh.
    #[inline]
    fn maybe_refresh(&self) {
        let now = self.tsc.raw();
        // Relaxed: a schedule; the clocks order what the refresh reads.
        let due = self.next_refresh.load(Ordering::Relaxed);
        if now < due {
            return;
        }
        if self
            .next_refresh
            .compare_exchange(due, now + self.interval_ticks, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            crate::util::shared_writes::note(crate::util::shared_writes::Site::Refresh);
            // Idle workers hold no version: they do not hold `min_wts` back (a worker that
            // begins again takes its timestamp with `next_wts_checked`).
            self.clocks.try_refresh(|slot| self.quiescence.idle(slot));
            self.quiescence.try_advance();
        }
    }

    /// The reclaimer's unlink step for a retired row (a deletion, or an insert that aborted):
    /// unlinks `rec` if its newest version is a deletion below `min_rts` or it has no version,
    /// and queues its versions for freeing.
    ///
    /// A row whose newest version is an aborted one is left alone (`Revived`: the reclaimer
    /// forgets it): a writer may be linking a version below that one right now, by a CAS on
    /// its `next` that no head-word CAS can exclude. Such a row stays in the index with nothing
    /// visible, which every transaction reads as the key's absence, and the key's next insert
    /// installs its version in it; its slot is not reused until then.
    fn unlink(&self, t: TableId, rec: &CicadaRecord, dead: &mut VecDeque<worker::Dead>) -> Unlink {
        if !rec.try_lock_gc() {
            return Unlink::Busy;
        }
        let verdict = loop {
            let head = match rec.newest() {
                Ok(h) => h,
                Err(_) => break Unlink::Gone,
            };
            match head.map(status) {
                None => {}
                Some(DELETED) if head.map_or(0, wts) < self.clocks.min_rts() => {}
                Some(COMMITTED) | Some(record::ABORTED) => break Unlink::Revived,
                // Pending (it may commit), or a deletion some transaction may still read
                // below.
                Some(_) => break Unlink::Busy,
            }
            // Every writer from now on has a timestamp above `min_rts`, so it would install
            // at the head, which this CAS excludes.
            if rec.unlink(head) {
                if let Some(h) = head {
                    // Stale GC items of this record (at or below its newest `wts`) never act
                    // on the slot again, whatever it holds next.
                    rec.raise_min_wts(wts(h));
                    let g = self.quiescence.retire_stamp();
                    worker::retire_chain(dead, t, NonNull::from(h), g);
                }
                break Unlink::Unlinked;
            }
            // A version went in at the head meanwhile: decide again.
        };
        rec.unlock_gc();
        verdict
    }

    /// A departing worker's pools go back to the stores, its queues to the next worker that
    /// maintains, its statistics here.
    fn leave(
        &self,
        pools: &mut [VersionPool<CicadaExt>],
        gc: &mut VecDeque<worker::GcItem>,
        dead: &mut VecDeque<worker::Dead>,
        nodes: &mut worker::NodeGarbage,
        t: Tally,
    ) {
        let (ro, lag) = (t.ro, t.lag);
        for (pool, store) in pools.iter_mut().zip(&self.stores) {
            pool.release(store);
        }
        if !gc.is_empty() || !dead.is_empty() || !nodes.is_empty() {
            let mut o = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
            o.gc.extend(gc.drain(..));
            o.dead.extend(dead.drain(..));
            o.nodes.append(nodes);
            // Relaxed: a hint that `maintain` reads; the `orphans` lock orders the queues
            // themselves.
            self.orphaned.store(true, Ordering::Relaxed);
        }
        // Relaxed: statistics, read when no worker runs.
        let s = &self.stats;
        s.ro_safe.fetch_add(ro.0, Ordering::Relaxed);
        s.ro_fresh.fetch_add(ro.1, Ordering::Relaxed);
        s.ro_sum_ns.fetch_add(ro.2, Ordering::Relaxed);
        s.ro_max_ns.fetch_max(ro.3, Ordering::Relaxed);
        s.lag_count.fetch_add(lag.0, Ordering::Relaxed);
        s.lag_sum_ns.fetch_add(lag.1, Ordering::Relaxed);
        s.lag_max_ns.fetch_max(lag.2, Ordering::Relaxed);
        s.promoted.fetch_add(t.promotions.0, Ordering::Relaxed);
        s.promotions_dropped.fetch_add(t.promotions.1, Ordering::Relaxed);
    }

    /// Takes over what departed workers left.
    #[cold]
    fn adopt(
        &self,
        gc: &mut VecDeque<worker::GcItem>,
        dead: &mut VecDeque<worker::Dead>,
        nodes: &mut worker::NodeGarbage,
    ) {
        let mut o = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
        gc.extend(o.gc.drain(..));
        dead.extend(o.dead.drain(..));
        nodes.append(&mut o.nodes);
        // Relaxed: a hint; the `orphans` lock orders the queues themselves.
        self.orphaned.store(false, Ordering::Relaxed);
    }

    /// Copies the newest committed row of `rec` (of `table`) into `buf` and returns its stamp;
    /// `None` if the row is deleted or has none. The caller is inside a quiescence mark (a
    /// worker's, or a reader slot), or no worker runs.
    fn copy_committed(&self, table: TableId, rec: &CicadaRecord, buf: &mut [u8]) -> Option<u64> {
        let mut spin = crate::util::SpinWait::default();
        loop {
            let v = self.latest_committed(rec)?;
            // A stable copy: Cicada-SV overwrites versions in place (a version's stamp never
            // changes otherwise).
            let stamp = record::stable_wts(v);
            if stamp == record::WRITING {
                spin.spin();
                continue;
            }
            if status(v) != COMMITTED {
                return None;
            }
            // SAFETY: a version of this table (see `CicadaWorker::row`), not reused while the
            // caller is inside its quiescence mark.
            unsafe { row_of(v, self.row_sizes[table.index()]) }.read_into(buf);
            if record::still(v, stamp) {
                return Some(stamp.max(1));
            }
        }
    }

    /// The newest committed version of `rec` (checkpoints, checks after a run).
    fn latest_committed<'a>(&self, rec: &'a CicadaRecord) -> Option<&'a CVersion> {
        let mut v = rec.newest().ok()?;
        while let Some(x) = v {
            if matches!(status(x), COMMITTED | DELETED) {
                return Some(x);
            }
            v = next(x);
        }
        None
    }
}

impl Protocol for Cicada {
    const NAME: &'static str = "cicada";
    const DESCRIPTION: &'static str =
        "optimistic multi-version timestamp ordering with per-thread clocks (Cicada)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: true,
        reads: Reads::InvisibleUntilValidation,
        interactive: true,
        templates: false,
    };
    const BUCKET_CLOCKS: bool = true;
    const DEFAULT_BACKOFF: Backoff = Backoff::Adaptive;
    type Record = CicadaRecord;
    type Worker<'db> = CicadaWorker<'db>;
    type Options = CicadaOptions;

    fn new(options: CicadaOptions, setup: &Setup<'_>) -> Result<Self, Error> {
        if setup.max_workers > MAX_CLOCKS {
            return Err(Error::Config(format!(
                "cicada takes at most {MAX_CLOCKS} workers (a timestamp names its thread in 10 \
                 bits); this database was asked for {}",
                setup.max_workers
            )));
        }
        if options.single_version {
            if !options.inlining {
                return Err(Error::Config(
                    "cicada: single-version=on keeps each row in its record's inlined version; \
                     it needs inlining=on"
                        .into(),
                ));
            }
            if let Some(t) = setup.tables.iter().find(|t| t.row_size > INLINE_MAX) {
                return Err(Error::Config(format!(
                    "cicada: single-version=on keeps each row in its record head, which holds at \
                     most {INLINE_MAX} bytes; table `{}` has rows of {} bytes",
                    t.name, t.row_size
                )));
            }
        }
        if options.index == IndexMode::MultiVersion {
            if options.single_version {
                return Err(Error::Config(
                    "cicada: index=multi-version keeps versions of its index nodes; \
                     single-version=on keeps one version per record"
                        .into(),
                ));
            }
            if !options.deferred_index {
                return Err(Error::Config(
                    "cicada: index=multi-version defers every index update to validation by \
                     itself; deferred-index=off applies to the single-version index"
                        .into(),
                ));
            }
        }
        let params = ClockParams {
            central: options.timestamps == Timestamps::Counter,
            ..ClockParams::default()
        };
        let clocks = Clocks::new(setup.max_workers.max(1), 1, params).map_err(Error::Config)?;
        let tsc = quanta::Clock::new();
        let ticks_per_us = {
            // The TSC's rate, from quanta's calibration: raw ticks over a known span.
            let (a, b) = (tsc.raw(), tsc.raw());
            let ns = tsc.delta_as_nanos(a, b.max(a) + 1_000_000).max(1);
            1_000_000_000 / ns.max(1)
        };
        let mv = options.index == IndexMode::MultiVersion;
        let shape = Shape::new(options.index_fanout).map_err(Error::Config)?;
        let n = setup.tables.len();
        // Node tables after the data tables: rows of one node, never inlined or promoted.
        let node_tables = if mv { n } else { 0 };
        let mut stores: Vec<_> =
            setup.tables.iter().map(|t| VersionStore::new(t.row_size)).collect();
        stores.extend((0..node_tables).map(|_| VersionStore::new(shape.bytes())));
        let mut inline: Vec<_> =
            setup.tables.iter().map(|t| options.inlining && t.row_size <= INLINE_MAX).collect();
        inline.extend((0..node_tables).map(|_| false));
        let mut promote: Vec<_> = setup
            .tables
            .iter()
            .map(|t| {
                options.inlining
                    && options.promotion
                    && !options.single_version
                    && t.row_size <= INLINE_MAX
            })
            .collect();
        promote.extend((0..node_tables).map(|_| false));
        let mut row_sizes: Vec<_> = setup.tables.iter().map(|t| t.row_size).collect();
        row_sizes.extend((0..node_tables).map(|_| shape.bytes()));
        let trees = (0..node_tables)
            .map(|t| index::TreeTable::new(shape, setup.tables[t].capacity, &stores[n + t]))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cicada {
            clocks,
            stores,
            tables: n,
            trees,
            inline,
            promote,
            row_sizes,
            next_refresh: CachePadded::new(AtomicU64::new(0)),
            interval_ticks: options.gc_interval_us * ticks_per_us.max(1),
            tsc,
            quiescence: Quiescence::new(setup.max_workers.max(1)),
            orphans: Mutex::new(Orphans::default()),
            orphaned: AtomicBool::new(false),
            stats: Stats::default(),
            options,
        })
    }

    fn options(&self) -> &CicadaOptions {
        &self.options
    }

    /// A loaded row is its record's only version, at `wts` 0 (below every timestamp): the
    /// inlined one when the table inlines.
    fn load(&self, table: TableId, row: RowRef<'_, CicadaRecord>, payload: &[u8]) {
        let rec = row.header;
        let claimed = if self.inline[table.index()] { rec.claim_inline() } else { None };
        let (v, inline) = match claimed {
            Some(v) => (v, true),
            None => (self.stores[table.index()].alloc_shared(), false),
        };
        // SAFETY: a version nobody else holds: the fresh slot's inlined one, or fresh from the
        // store.
        let ver = unsafe { v.as_ref() };
        init_version(ver, record::LOADED, inline);
        ver.ext.rts.store(0, Ordering::Relaxed);
        // SAFETY: a version of this table (see `CicadaWorker::row`).
        unsafe { row_of(ver, self.row_sizes[table.index()]) }.write_from(payload);
        set_status(ver, COMMITTED);
        rec.init(Some(v));
    }

    /// With the multi-version index, the key goes into the table's tree, in place (loading
    /// runs before transactions).
    fn indexed(&self, table: TableId, key: u64, rid: RowId) {
        if let Some(tree) = self.trees.get(table.index()) {
            tree.load(&self.stores[self.tables + table.index()], key, rid);
        }
    }

    fn is_present(&self, rec: &CicadaRecord) -> bool {
        self.latest_committed(rec).is_some_and(|v| status(v) == COMMITTED)
    }

    /// Reconnaissance (inside the worker's quiescence mark, `Worker::pinned`) and checks
    /// after a run.
    fn read_latest(&self, table: TableId, row: RowRef<'_, CicadaRecord>, buf: &mut [u8]) -> bool {
        self.copy_committed(table, row.header, buf).is_some()
    }

    fn read_committed(
        &self,
        table: TableId,
        _: u64,
        row: RowRef<'_, CicadaRecord>,
        buf: &mut [u8],
    ) -> Option<u64> {
        // A checkpoint reads while workers run: the versions it walks are not reused under it.
        let _reading = self.quiescence.reader();
        self.copy_committed(table, row.header, buf)
    }

    fn worker(db: &Database<Self>) -> Result<CicadaWorker<'_>, Error> {
        Ok(CicadaWorker::new(db.worker_ctx()?, db.protocol()))
    }

    fn versions(&self, db: &Database<Self>) -> Option<VersionReport> {
        let mut r = VersionReport::default();
        let mut g = crate::storage::index::pin();
        for (t, store) in db.storage().tables().iter().zip(&self.stores) {
            let size = store.version_bytes() as u64;
            t.index.for_each_part(
                0,
                1,
                &mut g,
                || {},
                |_, rid| {
                    let mut n = 0;
                    let mut v = t.rows.get(rid).header.newest().ok().flatten();
                    while let Some(x) = v {
                        n += 1;
                        v = next(x);
                    }
                    r.rows += 1;
                    r.alive += n;
                    r.alive_bytes += n * size;
                    r.longest_chain = r.longest_chain.max(n);
                },
            );
            r.carved += store.carved();
            r.carved_bytes += store.carved() * size;
        }
        // Relaxed: handed over by workers that have been joined.
        let s = &self.stats;
        let count = s.lag_count.swap(0, Ordering::Relaxed);
        let sum = s.lag_sum_ns.swap(0, Ordering::Relaxed);
        r.gc_lag_mean_us = if count == 0 { 0.0 } else { sum as f64 / count as f64 / 1e3 };
        r.gc_lag_max_us = s.lag_max_ns.swap(0, Ordering::Relaxed) as f64 / 1e3;
        r.read_only_safe = s.ro_safe.swap(0, Ordering::Relaxed);
        r.read_only_fresh = s.ro_fresh.swap(0, Ordering::Relaxed);
        r.promoted = s.promoted.swap(0, Ordering::Relaxed);
        r.promotions_dropped = s.promotions_dropped.swap(0, Ordering::Relaxed);
        let sum = s.ro_sum_ns.swap(0, Ordering::Relaxed) as f64;
        let max = s.ro_max_ns.swap(0, Ordering::Relaxed) as f64;
        if !self.clocks.central() {
            // A counter's timestamps count, so a snapshot's age in time is not known.
            r.read_only_staleness_mean_us =
                Some(if r.read_only_safe == 0 { 0.0 } else { sum / r.read_only_safe as f64 / 1e3 });
            r.read_only_staleness_max_us = Some(max / 1e3);
        }
        Some(r.finish())
    }

    /// A version per row for the rows a table grows by: a new row's first version comes from
    /// the pools when the table does not inline.
    /// A table that does not inline takes a pooled version per row; with the multi-version
    /// index, its tree takes node versions too: a node splits into halves, so at most one new
    /// node per `fanout / 2` inserts, and node versions stay alive until the GC's grace
    /// periods pass, which the run's own growth showed to be about as many again (TPC-C-NP:
    /// about one carved node version per 9 rows at fanout 32).
    fn prefault(&self, table: TableId, rows: u64, budget: usize) -> usize {
        let mut done = 0;
        if !self.inline[table.index()] {
            done += self.stores[table.index()].prefault(rows, budget);
        }
        if self.mv_index() {
            let nodes = rows.saturating_mul(4) / self.options.index_fanout as u64;
            let store = &self.stores[self.node_table(table).index()];
            done += store.prefault(nodes, budget.saturating_sub(done));
        }
        done
    }
}
