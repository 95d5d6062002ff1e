//! IC3 (Wang, Mu, Li and Huang, SIGMOD 2016): a transaction runs piece by piece, each piece
//! atomic by OCC, and transactions whose pieces conflict interleave instead of aborting: the
//! runtime tracks direct dependencies in per-record accessor lists and makes a piece wait for
//! the pieces of its dependencies that the static analysis of the workload's templates says it
//! could otherwise overtake (`engine::scgraph`).
//!
//! **The parts.**
//!
//! * [`txn`]: transaction contexts (attempt, type, committed pieces in one word), the waits of
//!   Algorithms 1 and 2, and the dependency queue;
//! * [`record`]: the record (a version word for piece validation, the payload holding the
//!   visible value, an accessor list whose writer entries keep before-images), appending with
//!   the dependency it creates, leaving at commit, and rolling back with the marks of §4.4;
//! * `worker`: each piece on `occ`'s read phase, the piece commit, the waits, the
//!   transaction's commit and rollback, and the direct path of untyped transactions.
//!
//! **Options** (`--opt`): `wait=spin|yield|suspend` (spin, then yield the core, as the paper's
//! spin-wait; yield at once; or yield a few times and then sleep until the transaction waited
//! for changes its state, the paper's suspend-wait), `optimistic=on|off` (constrain a piece
//! after its execution, before its commit, §4.1), `rendezvous=on|off` (§4.2),
//! `commutative=on|rows|off` (§4.3), `online=on|stop|off` (re-analyse when the mix changes, §4.5,
//! or with the workers stopped, the paper's §6.9 baseline) and `snapshot-epochs=K`
//! (read-only transactions on snapshots every K epochs; 0, off, by default).
//! All on, spinning, by default. On 2 cores, spinning is best with as many workers as cores
//! and yielding with more (TPC-C at 1 warehouse: see the notes); sleeping costs a wake-up
//! per wait, too much for waits as short as a piece.
//!
//! **The commit contract** (`Protocol`'s docs). A typed transaction's pieces write the payload
//! at their piece commits, held by its writer entries against every conflicting commit; it
//! passes `Locked` once its dependencies ended and its trailing operations and accumulations
//! are locked, `Validated` once it may commit, `Logged` after its log record (written after
//! its dependencies', each key's last image, or only the columns written on a table with
//! deferred accumulations: `worker::log_commit`), and `Installed` past its commit point, when
//! `read_committed` (the before-image of the first writer not past its commit point) sees its
//! writes; its log epoch leaves flight after that, in `WorkerCtx::commit_returning`. A direct
//! attempt passes them as an OCC commit does (locked, validated, installed and logged under
//! its locks).
//!
//! Decisions taken where the paper is silent or where this engine differs, kept here as the
//! worker grows:
//!
//! * The visible value (the paper's stash) is the payload itself, and writer entries keep
//!   before-images (see [`record`]): reads stay plain seqlock reads and a transaction's commit
//!   installs nothing; a rollback restores.
//! * A rolled-back *reader* marks nobody (the paper marks every entry after any rolled-back
//!   entry); only a writer's successors saw or overwrote what is undone.
//! * **Conflicts per table, not per column.** The runtime tracks dependencies per record, so
//!   two pieces that touch one record in different columns depend on each other, and the
//!   waits that keep such dependencies from forming cycles need a C-edge behind every one of
//!   them: the analysis ic3 runs with puts a C-edge between pieces that share a table, one of
//!   them writing it (`scgraph::Granularity::Table`; `txlab analyze` prints it, and
//!   `--granularity column` the paper's). With the paper's column edges and per-record
//!   dependencies, New-Order and Payment would each come to depend on the other through the
//!   district and customer rows (disjoint columns) and wait for each other at commit: a
//!   deadlock. Column-level tracking (entries with column masks, rollbacks per column) would
//!   recover the paper's parallelism in general. Two column-level cases are handled without
//!   it: reads of columns that no analysed template writes take no part in C-edges and are
//!   untracked at run time, guarded against untyped writers (see `worker`), so New-Order's
//!   reads of customers, items, W_TAX and D_TAX conflict with nothing; and accumulations go in
//!   under uncommitted writes of the row's other columns (below), so Payment's D_YTD does not
//!   meet New-Order's D_NEXT_O_ID. On TPC-C the graph ic3 runs is then the paper's per-column
//!   one.
//! * **A last piece that meets nobody commits with the transaction** (not in the paper). When
//!   the transaction's last merged piece ends with every dependency over, and none of its
//!   records or buckets has an entry or a lock, it is held: no entry is appended, nothing
//!   installed. The transaction's commit then locks and validates it and, if it still names
//!   no running transaction, installs its writes and passes the commit point under its
//!   locks. Its entries would have been appended only to leave again at that commit. A
//!   transaction that meanwhile reads what the piece writes reads the values before it and
//!   serializes before it (or, writing them, makes its validation fail); a held piece that
//!   fails validation costs a retry of the transaction rather than the piece, which is why a
//!   piece that meets anyone at its end commits as usual.
//! * **Pieces commit as merged pieces.** A merged piece's declared pieces gather their
//!   operations and commit together when its last one ends. One that fails validation runs
//!   again when it is one declared piece; a merged piece of several rolls the transaction back
//!   (the engine can run only the last declared piece's body again).
//! * **A piece's commit is published when the next merged piece begins** (or the transaction
//!   ends), not when it commits: a template piece may run several times (TPC-C Delivery's one
//!   piece per district), and a dependent that waited for one run could meet the next.
//! * **Untyped transactions, and the read-only types the analysis leaves out, run directly**:
//!   one OCC unit over committed data that commits at once and leaves no entry: its reads copy
//!   the committed image of a record with a pending writer and validate that it is still the
//!   committed one; its writes must find no entry at all. A transaction that depended on
//!   uncommitted ones without the analysis' constraints could close a cycle. The paper runs
//!   read-only transactions on Silo-style snapshots, which `--opt snapshot-epochs=K` turns
//!   on (off by default; the paper's K is Silo's 25 epochs): a transaction declared read-only
//!   then reads the newest boundary's state with no lock, entry or validation
//!   (`storage::snapshot`; how IC3's records answer for it: `record::at_boundary`, and its
//!   commits' epochs: `worker`). Off, reading the latest committed values with OCC validation
//!   serves the same end (they neither wait for pending writers nor abort because of them: a
//!   typed transaction's commit point is one store, see `worker`) without stale data, at the
//!   price of validation against later commits.
//! * **Phantoms**: each phantom bucket has a pseudo-record with an accessor list: a scan or an
//!   absent-key read leaves a reader entry, an insert or delete a writer entry, so range
//!   conflicts become dependencies as record conflicts do. A piece that read a record another
//!   transaction is inserting (its lock held from the insert to its piece's commit) reads it
//!   through its bucket instead of waiting for the lock (see `worker`).
//! * **Template checks are on whatever the run asks** (`Capabilities::templates`): an
//!   undeclared access would break what the analysis promised.
//! * **Durability** (the paper reuses Silo's logging and says no more, §5; §6.6 measures it):
//!   a transaction logs
//!   all its writes, each key once with its last image, at its commit, after its dependencies
//!   ended and before its commit point, under a commit stamp by Silo's rule above the stamps of
//!   the records it wrote; each record keeps the stamp of its last committed writer (set as
//!   that writer leaves the list), which checkpoints pair with the committed image (see
//!   `worker`). Operations after a typed transaction's last piece (a crash test's
//!   acknowledgement row) commit with it directly when no analysed template names their tables.
//! * **Commutative accumulations (§4.3)** (`Tx::accumulate`, declared `AccessMode::Accumulate`;
//!   `commutative=on`): the paper defers every commutative operation to commit and drops the
//!   C-edges between them. Here an accumulation is deferred only where the analysis finds
//!   nothing it could fail to commute with (`engine::scgraph::Deferral`): no analysed template
//!   reads its columns or writes them otherwise (nor inserts or deletes in the table); elsewhere
//!   it runs as a write in its piece. A deferred accumulation is applied after the dependencies
//!   ended, under the row's lock held across the commit point, as a fresh committed version;
//!   its history event names its one column, and the checker judges reads per column, so a
//!   piece that read another column of the row does not depend on it. Where other
//!   transactions' uncommitted writes of the row's other columns are listed, it goes into the
//!   payload and into their before-images, so that their rollbacks keep it (see
//!   `worker::apply_deferred`): in TPC-C that defers W_YTD and D_YTD (New-Order writes
//!   D_NEXT_O_ID), and Payment's warehouse and district pieces have no C-edge. Two conditions,
//!   checked at set-up, else accumulations are deferred by rows (only where no analysed
//!   template writes the table at all; `commutative=rows` asks for it): no column the
//!   templates write shares a payload word with an accumulated one (installs and log records
//!   copy whole words; TPC-C's district layout gives D_YTD a word of its own), and no
//!   snapshots (a writer past its commit point but still listed keeps the value it replaced
//!   for snapshot readers, which an accumulation committed after it must not change;
//!   `docs/ic3-plan.md`, "Column-level runtime", describes what it would take).
//! * **Online analysis (§4.5)** (`Database::set_mix`): workers run on *graphs* (`graph`),
//!   and a change of the mix publishes the transitional graph, waits until no attempt runs on
//!   the old one, and publishes the new one, without stopping the workers. Where the paper
//!   tracks a transitional sub-piece's dependencies at its end, this runtime learns them
//!   without appending anything (the merged piece's operations stay invisible until its
//!   commit), and the commit refuses a dependency no wait covered (a reader or writer that came
//!   after the sub-piece ended): the merged piece's validation fails. Types being added or
//!   removed run directly during the change (the paper admits an added type only once every
//!   worker runs the new graph). Which accumulations are deferred is fixed for the workload
//!   (decided over all its types), so no change of the mix changes it.
//! * **Template pieces as the measure of progress**: a context publishes how many template
//!   pieces its committed merged pieces cover, and a wait names the last template piece of the
//!   dependency's type that conflicts with the waiting sub-piece: the same wait on the
//!   dependency's own graph (its partner piece) and meaningful on another graph's chopping.

mod graph;
pub mod record;
pub mod txn;
mod worker;

pub use record::Ic3Record;
pub use worker::{Ic3Local, Ic3Worker};

use crate::engine::options::{choice, serialize_switch, switch, OptionSpec, ProtocolOptions};
use crate::engine::scgraph::{Analysis, Deferral, Granularity};
use crate::engine::{Capabilities, Database, Isolation, Protocol, Reads, Setup};
use crate::error::Error;
use crate::history::Stamp;
use crate::protocols::common::stamp_epoch;
use crate::protocols::occ::{
    parse_snapshot_epochs, InPlace, OccRecord, OccWorker, SNAPSHOT_EPOCHS,
};
use crate::storage::projection::{Columns, Projection};
use crate::storage::{RowId, RowRef, TableId, TableSpec};
use record::{Locked, ABSENT, LISTED, LOCK, PENDING, VERSION_SHIFT};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use txn::{Contexts, WaitPolicy};

/// The IC3 protocol.
pub struct Ic3 {
    shared: Arc<Shared>,
}

/// What every worker shares.
pub(crate) struct Shared {
    options: Ic3Options,
    /// The workload's templates and the analysis of all of them (none without a workload).
    templates: Option<graph::Templates>,
    /// The graphs workers run on (see [`graph`]).
    graphs: graph::Graphs,
    /// Per table id: the columns typed transactions defer their accumulations into (§4.3; the
    /// same for every mix; 0: none).
    deferred: Vec<Columns>,
    /// Per table id: whether a template of the workload's (analysed) names it.
    analysed_tables: Vec<bool>,
    /// Per table id: the columns no analysed template writes, which typed attempts read
    /// untracked (none for tables no analysed template names; see `worker`).
    untracked: Vec<Columns>,
    /// The direct writers of those columns (see `worker`).
    direct_writers: worker::UntrackedWriters,
    contexts: Contexts,
    /// Per table, per phantom bucket, its pseudo-record (made with the first worker, when the
    /// storage's bucket counts are known).
    buckets: OnceLock<Box<[Box<[Ic3Record]>]>>,
}

impl Shared {
    fn buckets(&self) -> &[Box<[Ic3Record]>] {
        self.buckets.get().expect("made before any worker exists")
    }

    /// The columns of table `t` that typed attempts read untracked.
    #[inline]
    fn untracked(&self, t: TableId) -> Columns {
        self.untracked.get(t.index()).copied().unwrap_or(0)
    }

    /// The columns of table `t` that typed attempts defer their accumulations into.
    #[inline]
    fn deferred(&self, t: TableId) -> Columns {
        self.deferred.get(t.index()).copied().unwrap_or(0)
    }
}

/// IC3's options (serialized under their `--opt` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Ic3Options {
    /// How a worker waits for another transaction.
    pub wait: WaitPolicy,
    /// Constrain a piece after executing it, before its commit (§4.1).
    #[serde(serialize_with = "serialize_switch")]
    pub optimistic: bool,
    /// Wait for rendezvous pieces instead of whole transactions where the analysis finds one
    /// (§4.2).
    #[serde(serialize_with = "serialize_switch")]
    pub rendezvous: bool,
    /// Which accumulations to defer to commit, outside the C-edges (§4.3): by columns (`on`),
    /// by rows, or none. With snapshots on, `on` defers by rows (see the module docs).
    pub commutative: Deferral,
    /// What a change of the mix does (`Database::set_mix`).
    pub online: Online,
    /// Read-only transactions read a snapshot taken every this many epochs (the paper's
    /// footnote: as Silo does, §4.9); 0 (the default): off, they run directly.
    pub snapshot_epochs: u32,
}

/// What IC3 does when the mix of transaction types changes (`Database::set_mix`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Online {
    /// Re-analyse the templates and move the workers to the new graph through the transitional
    /// one, without stopping them (§4.5).
    On,
    /// Re-analyse the templates with the workers stopped: no attempt begins until every
    /// running one has ended and the new graph is published (the paper's "stop the world"
    /// baseline, §6.9).
    Stop,
    /// Keep the analysis of every type made at the start (the paper's "analysis at
    /// beginning").
    Off,
}

impl Default for Ic3Options {
    fn default() -> Self {
        Ic3Options {
            wait: WaitPolicy::Spin,
            optimistic: true,
            rendezvous: true,
            commutative: Deferral::Columns,
            online: Online::On,
            snapshot_epochs: 0,
        }
    }
}

impl ProtocolOptions for Ic3Options {
    const SPECS: &'static [OptionSpec] = &[
        OptionSpec {
            name: "wait",
            values: "spin|yield|suspend",
            default: "spin",
            help: "how a piece waits for the transactions it depends on: spin, then yield the \
                   core (the paper's spin-wait); yield at once; or yield a few times, then \
                   sleep until woken (the paper's suspend-wait)",
        },
        OptionSpec {
            name: "optimistic",
            values: "on|off",
            default: "on",
            help: "constrain pieces optimistically: wait after a piece's execution, before its \
                   commit, instead of before its execution (IC3 §4.1)",
        },
        OptionSpec {
            name: "rendezvous",
            values: "on|off",
            default: "on",
            help: "wait for a dependency's rendezvous piece instead of its commit when a piece \
                   has no C-edge with it (IC3 §4.2)",
        },
        OptionSpec {
            name: "commutative",
            values: "on|rows|off",
            default: "on",
            help: "apply accumulations (TPC-C's W_YTD and D_YTD += amount) at commit, outside \
                   the conflicts, where no analysed template reads their columns or writes them \
                   otherwise, under other transactions' uncommitted writes of the rows' other \
                   columns (IC3 §4.3); rows only where no analysed template writes their table \
                   at all (what on does with snapshot-epochs); off runs them as writes in their \
                   pieces",
        },
        OptionSpec {
            name: "online",
            values: "on|stop|off",
            default: "on",
            help: "re-analyse the templates when the mix of transaction types changes during a \
                   run (--mix-at), moving the workers to the new analysis without stopping them \
                   (IC3 §4.5); stop re-analyses with the workers stopped until every running \
                   transaction has ended (the paper's stop-the-world baseline, §6.9); off keeps \
                   the analysis of every type made at the start",
        },
        SNAPSHOT_EPOCHS,
    ];

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "wait" => {
                self.wait = choice(
                    name,
                    value,
                    &[
                        ("spin", WaitPolicy::Spin),
                        ("yield", WaitPolicy::Yield),
                        ("suspend", WaitPolicy::Suspend),
                    ],
                )?;
            }
            "optimistic" => self.optimistic = switch(name, value)?,
            "rendezvous" => self.rendezvous = switch(name, value)?,
            "commutative" => {
                self.commutative = choice(
                    name,
                    value,
                    &[("on", Deferral::Columns), ("rows", Deferral::Rows), ("off", Deferral::Off)],
                )?;
            }
            "online" => {
                self.online = choice(
                    name,
                    value,
                    &[("on", Online::On), ("stop", Online::Stop), ("off", Online::Off)],
                )?;
            }
            "snapshot-epochs" => self.snapshot_epochs = parse_snapshot_epochs(name, value)?,
            _ => return Err(format!("--opt {name}: not an option of ic3")),
        }
        Ok(())
    }
}

impl OccRecord for Ic3Record {
    #[inline(always)]
    fn word(&self) -> &AtomicU64 {
        Ic3Record::word(self)
    }

    type Aux = ();

    #[inline(always)]
    fn aux(&self) {}

    #[inline(always)]
    fn same_version(a: u64, b: u64) -> bool {
        record::same_version(a, b)
    }

    /// A record with a pending writer: its committed image is the first uncommitted writer's
    /// before-image (read under the record's lock, which commits of pieces hold briefly).
    #[inline]
    fn committed_image(row: RowRef<'_, Self>, word: u64, buf: &mut [u8]) -> Option<(u64, ())> {
        if word & PENDING == 0 {
            return None;
        }
        let g = row.header.lock();
        Some((g.read_committed(&row, buf), ()))
    }

    /// The version: unique among all writes (see `record`), 1 for loaded rows, 0 for rows
    /// never committed.
    #[inline]
    fn stamp(word: u64, _: (), _: RowId) -> Stamp {
        Stamp::from(record::version(word))
    }

    #[inline]
    fn commit_stamp(word: u64, _: ()) -> u64 {
        record::version(word)
    }

    #[inline]
    fn init_fresh(&self) {
        self.init(ABSENT | LOCK);
    }

    /// For a snapshot reader: [`record::at_boundary`].
    #[inline]
    fn at_boundary(
        row: RowRef<'_, Self>,
        b: u64,
        buf: &mut [u8],
        p: &Projection,
        cols: Columns,
    ) -> InPlace {
        record::at_boundary(row, b, buf, p, cols)
    }

    /// Nobody is listed on it (a transaction that read the record absent is ordered by its
    /// entry there), and its deletion's commit stamp is of an epoch below `safe` (below every
    /// running transaction's, so that the key's next insert, into a fresh record, commits a
    /// larger stamp: see `worker`'s logging; and below every snapshot in use, whose readers
    /// must still find the key).
    #[inline]
    fn unlinkable(&self, word: u64, safe: u64) -> bool {
        word & (LISTED | PENDING) == 0 && stamp_epoch(self.stamp()) < safe
    }
}

/// A table a merged piece's template pieces declare.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Declared {
    pub(crate) table: TableId,
    /// Whether one of them writes it (an accumulation that is not deferred is a write).
    pub(crate) write: bool,
    /// Whether one of them takes part in C-edges on it (a write, or a read of columns some
    /// analysed template writes): a tracked read of the table is allowed only then.
    pub(crate) tracked: bool,
    /// The columns they accumulate into, deferred.
    pub(crate) accumulates: Columns,
}

/// Whether a column of a table that `analysis` defers accumulations into shares a payload word
/// with a column the analysed templates write otherwise: installs and log records of columns
/// copy whole words, so such a write would carry a stale copy of the accumulated bytes.
fn shares_words(analysis: &Analysis, tables: &[TableSpec]) -> bool {
    analysis.deferred.iter().any(|&t| {
        let Some(spec) = tables.get(t.index()) else { return false };
        let p = Projection::new(spec);
        let deferred = analysis.deferred_columns(t);
        let words = |cols: Columns| {
            let mut w = Vec::new();
            p.runs(cols, |lo, hi| w.extend(lo..hi));
            w
        };
        let other = words(analysis.written(t) & !deferred);
        words(deferred).iter().any(|w| other.contains(w))
    })
}

impl Protocol for Ic3 {
    const NAME: &'static str = "ic3";
    const DESCRIPTION: &'static str = "piece-wise OCC with dependency tracking, constrained by a \
         static SC-graph analysis of the workload's templates (SIGMOD'16)";
    const CAPS: Capabilities = Capabilities {
        isolation: Isolation::Serializable,
        inserts: true,
        scans: true,
        needs_access_set: false,
        snapshot_reads: false,
        reads: Reads::Listed,
        interactive: true,
        templates: true,
    };
    type Record = Ic3Record;
    type Worker<'db> = Ic3Worker<'db>;
    type Options = Ic3Options;

    fn new(options: Ic3Options, setup: &Setup<'_>) -> Result<Self, Error> {
        let types = setup.txn_types;
        if types.len() > txn::MAX_TYPES || types.iter().any(|t| t.pieces.len() > txn::MAX_PIECES) {
            return Err(Error::Config(format!(
                "ic3: at most {} transaction types of at most {} pieces each",
                txn::MAX_TYPES,
                txn::MAX_PIECES
            )));
        }
        if setup.max_workers > txn::MAX_CONTEXTS {
            return Err(Error::Config(format!(
                "ic3: at most {} workers, one transaction context each (max_workers is {})",
                txn::MAX_CONTEXTS,
                setup.max_workers
            )));
        }
        if setup.tables.len() > worker::MAX_TABLES {
            return Err(Error::Config(format!(
                "ic3: at most {} tables (the workload has {})",
                worker::MAX_TABLES,
                setup.tables.len()
            )));
        }
        if let Some(t) = setup.tables.iter().find(|t| t.capacity > worker::MAX_ROWS) {
            return Err(Error::Config(format!(
                "ic3: table {} holds up to {} rows, more than the {} a commit's lock order can name",
                t.name,
                t.capacity,
                worker::MAX_ROWS
            )));
        }
        let templates = (!types.is_empty()).then(|| {
            let analyse = |d| Analysis::with_options(types, Granularity::Table, d);
            let (mut deferral, mut full) = (options.commutative, analyse(options.commutative));
            // Accumulations go under uncommitted writers of other columns only without
            // snapshots, and where no written column shares a payload word with them (module
            // docs); elsewhere they are deferred by rows.
            if deferral == Deferral::Columns
                && (options.snapshot_epochs > 0 || shares_words(&full, setup.tables))
            {
                deferral = Deferral::Rows;
                full = analyse(deferral);
            }
            graph::Templates {
                types: types.to_vec(),
                granularity: Granularity::Table,
                deferral,
                full,
            }
        });
        let mut deferred = Vec::new();
        let mut analysed_tables = Vec::new();
        let mark = |v: &mut Vec<bool>, t: TableId| {
            v.resize(v.len().max(t.index() + 1), false);
            v[t.index()] = true;
        };
        let mut untracked = Vec::new();
        let all: Vec<usize> = (0..types.len()).collect();
        let first = match &templates {
            Some(tp) => {
                for &t in &tp.full.deferred {
                    deferred.resize(deferred.len().max(t.index() + 1), 0);
                    deferred[t.index()] = tp.full.deferred_columns(t);
                }
                for c in &tp.full.types {
                    for x in types[c.txn_type].pieces.iter().flat_map(|p| p.accesses.iter()) {
                        mark(&mut analysed_tables, x.table);
                    }
                }
                untracked = (0..analysed_tables.len())
                    .map(|t| {
                        let t = TableId(t as u32);
                        if analysed_tables[t.index()] {
                            !tp.full.written(t)
                        } else {
                            0
                        }
                    })
                    .collect();
                tp.graph(&tp.full, &all, 0, options.rendezvous)
            }
            None => graph::Graph { version: 0, mix: Vec::new(), plans: Vec::new() },
        };
        let contexts = Contexts::new(setup.max_workers);
        let shared = Shared {
            options,
            templates,
            graphs: graph::Graphs::new(first),
            deferred,
            analysed_tables,
            untracked,
            direct_writers: worker::UntrackedWriters::default(),
            contexts,
            buckets: OnceLock::new(),
        };
        Ok(Ic3 { shared: Arc::new(shared) })
    }

    fn options(&self) -> &Ic3Options {
        &self.shared.options
    }

    fn snapshot_epochs(&self) -> u64 {
        u64::from(self.shared.options.snapshot_epochs)
    }

    fn load(&self, _: TableId, row: RowRef<'_, Ic3Record>, payload: &[u8]) {
        row.write_from(payload);
        row.header.init(1 << VERSION_SHIFT);
    }

    fn is_present(&self, rec: &Ic3Record) -> bool {
        rec.load() & ABSENT == 0
    }

    fn read_committed(
        &self,
        _: TableId,
        _: u64,
        row: RowRef<'_, Ic3Record>,
        buf: &mut [u8],
    ) -> Option<u64> {
        let g: Locked<'_> = row.header.lock();
        let word = g.read_committed(&row, buf);
        // The stamp of the last writer that left the list: the committed image's, or, when a
        // committed writer is still leaving it, an older one (that writer's own log record,
        // durable before it committed, carries the image with its stamp; no other write of
        // the key has a stamp between the two).
        (word & ABSENT == 0).then(|| row.header.stamp())
    }

    /// Re-analyses the templates for the mix and moves the workers to its graph through the
    /// transitional one (§4.5; see `graph`), or with the world stopped (`online=stop`), or
    /// keeps the graph (`online=off`).
    fn set_mix(&self, types: &[usize]) -> Result<(), Error> {
        let s = &self.shared;
        let Some(templates) = s.templates.as_ref() else { return Ok(()) };
        let (graphs, contexts, rendezvous) = (&s.graphs, &s.contexts, s.options.rendezvous);
        match s.options.online {
            Online::On => graph::set_mix(graphs, contexts, templates, rendezvous, types),
            Online::Stop => graph::stop_the_world(graphs, contexts, templates, rendezvous, types),
            Online::Off => {}
        }
        Ok(())
    }

    fn worker(db: &Database<Self>) -> Result<Ic3Worker<'_>, Error> {
        let storage = db.storage();
        let shared = &db.protocol().shared;
        shared.buckets.get_or_init(|| {
            storage
                .tables()
                .iter()
                .map(|t| (0..t.buckets.slots()).map(|_| Ic3Record::default()).collect())
                .collect()
        });
        let ctx = db.worker_ctx()?;
        let local = Ic3Local::new(Arc::clone(shared)).ok_or_else(|| {
            Error::Config(format!(
                "too many workers: this database was created for at most {}",
                storage.epochs().capacity()
            ))
        })?;
        Ok(OccWorker::new(ctx, local))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::procedure::{Piece, TableAccess, TxnType};
    use crate::engine::{AccessMode, DbOptions, Workload};
    use crate::workloads::tpcc::{schema::district as di, tables::DISTRICT, Tpcc, TpccConfig};

    fn deferred(
        tables: &[TableSpec],
        types: &[TxnType],
        opts: &[(&str, &str)],
        t: TableId,
    ) -> Columns {
        let mut o = Ic3Options::default();
        for (name, value) in opts {
            o.set(name, value).unwrap();
        }
        let db = Database::<Ic3>::builder(tables)
            .options(DbOptions { max_workers: 2, ..Default::default() })
            .protocol_options(o)
            .txn_types(types)
            .build()
            .unwrap();
        db.protocol().shared.deferred(t)
    }

    /// Which accumulations ic3 defers: TPC-C's D_YTD under New-Order's writes of the district
    /// (a payload word of its own), by rows with snapshots (the district is written: none),
    /// and by rows where a written column shares a payload word with the accumulated one.
    #[test]
    fn accumulations_go_under_writers_only_without_snapshots_and_in_words_of_their_own() {
        let w = Tpcc::new(TpccConfig::new(1));
        let (tables, types) = (w.tables(), w.txn_types());
        assert_eq!(deferred(&tables, types, &[], DISTRICT), di::mask(&[di::D_YTD]));
        assert_eq!(deferred(&tables, types, &[("snapshot-epochs", "1")], DISTRICT), 0);
        assert_eq!(deferred(&tables, types, &[("commutative", "rows")], DISTRICT), 0);
        assert_eq!(deferred(&tables, types, &[("commutative", "off")], DISTRICT), 0);
        // `n` (4 bytes) and `y` (8) share the first word.
        const T: TableId = TableId(0);
        static P: [Piece; 2] = [
            Piece {
                name: "n",
                accesses: &[TableAccess { table: T, mode: AccessMode::Write, columns: 0b01 }],
            },
            Piece {
                name: "y",
                accesses: &[TableAccess { table: T, mode: AccessMode::Accumulate, columns: 0b10 }],
            },
        ];
        let types = [TxnType { name: "t", pieces: &P }];
        let packed = [TableSpec::new("t", 16, 16).with_columns(&[("n", 0, 4), ("y", 4, 8)])];
        assert_eq!(deferred(&packed, &types, &[], T), 0, "shares a word with n");
        let apart = [TableSpec::new("t", 16, 16).with_columns(&[("n", 0, 4), ("y", 8, 8)])];
        assert_eq!(deferred(&apart, &types, &[], T), 0b10);
    }
}
