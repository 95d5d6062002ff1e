//! IC3's worker: `protocols::occ`'s read phase for each piece, and IC3's piece commit, waits,
//! transaction commit and rollback (Algorithms 1 and 2, §4.1, §4.2, §4.4).
//!
//! Here: the worker's state ([`Ic3Local`]) and the read phase's hooks ([`OccProtocol`] for
//! [`Ic3`]); a merged piece's commit in `worker/piece.rs`, the typed transaction's commit with
//! its last piece held (tracking, accumulations, logging) in `worker/held.rs`, the direct path
//! in `worker/direct.rs`, and the tests in `worker/tests.rs`.
//!
//! A typed transaction (one whose type its graph runs typed: see `graph`) runs *merged piece*
//! by merged piece. A merged piece is the declared pieces the analysis combined, waited for
//! sub-piece by sub-piece (one sub-piece but on a transitional graph: see [`track`]);
//! its operations gather in the read phase's sets until its last declared piece ends, and then
//! it commits on its own ([`commit_piece`]): it locks every record it read or wrote and the
//! phantom buckets it covered or changed, in one global order (rows, then buckets; by table and
//! row or slot), validates its reads as OCC does, appends its entries to the accessor lists
//! (collecting the transactions it now depends on), writes its images into the payloads under
//! fresh versions, and unlocks. A merged piece of one declared piece that fails validation
//! runs again ([`PieceEnd::Again`]); one of several cannot (only the last declared piece's body
//! could run again), so the attempt rolls back and the transaction runs again.
//!
//! Before a merged piece commits (after its execution with optimistic constraining, §4.1, else
//! before it), it waits for its dependencies as Algorithm 1 says: not at all when it has no
//! C-edge; for the dependency's partner piece (case 2) or, with rendezvous pieces on, its
//! rendezvous piece (§4.2); otherwise for the dependency's end (case 3). The transaction
//! commits once every dependency has ended (Algorithm 2), unless a rolled-back writer marked
//! one of its entries (§4.4): it then rolls back (a cascading abort).
//!
//! Transactions without an analysed type (untyped ones, and read-only types, which the
//! analysis leaves out) run *directly*: one OCC unit that commits at once and leaves no entry,
//! and so reads and overwrites only committed data ([`commit_direct`]). Its reads of a record
//! with a pending writer copy the record's committed image (the first uncommitted writer's
//! before-image, under the record's lock), and its validation checks that each value read is
//! still its record's committed one (a read-only attempt record by record, without holding the
//! records together: [`reads_committed_now`]). A typed transaction's writes become committed
//! data at its commit point, one store of its context's state (`txn::COMMITTED`) before it
//! leaves the lists: readers of committed images see all of them from there or none. The values read were
//! all committed at once between the last read and the first check (each is its record's
//! committed value at both, and a record's committed version only moves forward), and the
//! transactions committed at any instant are closed under dependencies (a transaction
//! commits after every transaction it depends on ended), so the reads are a consistent state:
//! read-only transactions neither wait for nor starve behind pending writers.
//!
//! **Commit epochs** (for snapshot readers and the history's time line, `history::epoch_ts`).
//! Every commit takes a storage epoch ([`take_epoch`], between two SeqCst fences), and the
//! epochs agree with the serialization order: a transaction that depends on another commits
//! after it ended, and so reads a later epoch. Readers of committed images need more, because
//! a typed transaction's writes become committed data at one store: it stores
//! `txn::COMMITTING`, then takes its epoch, then stores `txn::COMMITTED`, and a direct commit
//! takes its epoch before it validates. A direct reader that validated a value as committed
//! while the typed writer had not stored `COMMITTING` took its epoch before the writer did (the
//! fences: the reader's load of the writer's state comes after its fence and missed a store
//! before the writer's fence); one that read the writer's value saw `COMMITTED`, made after
//! the writer's epoch; and one that finds `COMMITTING` waits for `COMMITTED` (a few stores
//! away: [`TxnRef::committed`]). Between direct commits the record locks order the same
//! way, as in Silo (a commit locks, fences, takes its epoch, fences, validates).
//!
//! **Snapshots** (`--opt snapshot-epochs=K`, `storage::snapshot`): a transaction declared
//! read-only reads the state of every commit below a boundary, with no lock, entry or
//! validation, running directly. A record's stamp is its last leaving writer's, so the value
//! in place at a boundary is the one before the first listed writer when that stamp's epoch is
//! below it (`record::at_boundary`); a typed writer keeps the value its first write replaced
//! as its entry leaves the list ([`OccProtocol::end`]), and a direct install or accumulation
//! as it writes ([`keep_in_place`]), both when the two values lie in different intervals.
//!
//! **Untracked reads.** A typed attempt's read of columns that no analysed template writes
//! (`scgraph`'s untracked reads: TPC-C's ITEM, W_TAX, D_TAX, C_DISCOUNT, S_DIST_xx, ...; which
//! columns is decided over all the workload's types, as the analysis decides it) stays out of
//! the read set ([`OccProtocol::untracked`]): no lock, no validation, no entry, no
//! dependency, and the analysis gives it no C-edge. Typed writers cannot change those columns
//! (the piece commit refuses a write of one, and a tracked read the analysis gave no C-edge,
//! [`declared`]); a rollback restores the same bytes. Only direct (untyped) writers can, and
//! a guard keeps them from overlapping such a reader ([`UntrackedWriters`]): a direct writer
//! of an untracked column counts itself in `started` before it locks anything and in
//! `finished` after it installed, and a typed attempt that read untracked loads `finished` at
//! its begin and, just before its commit point, stores its context's `closing` flag and then
//! loads `started` (both SeqCst): it commits only if the two counts agree, that is if every
//! writer that began before the check had finished before the attempt began (it then read
//! their values). A writer that begins after the check finds the flag (the writer's count and
//! its loads of the flags are SeqCst too) and waits until the attempt passed its commit point,
//! so its validation sees the attempt's writes committed: without that wait, a writer that
//! read the committed value of a record the attempt writes, and overwrote a column the
//! attempt read before, would close a cycle. Nobody waits for a direct attempt and no closing
//! attempt waits for anything, so a writer's wait ends, even for a typed attempt of the same
//! thread. In the history such a read names the record's committed version (the payload's
//! may be a pending writer's), and typed writes name the columns they change
//! (`Recorder::write_cols`), so the checker judges it by its columns as the runtime does.
//!
//! **Records being inserted.** An insert holds its fresh record locked (and absent) from the
//! insert to its piece's commit, and its transaction may wait for others meanwhile (optimistic
//! constraining). A piece that read such a record as absent does not wait for its lock (that
//! could deadlock): it leaves a reader entry on the record's phantom bucket instead, which the
//! insert's piece, when it commits, must append after (the inserter locks the bucket before it
//! releases the record, so a reader that holds the bucket and still sees the record locked is
//! before it).

use super::graph::{Graph, Plan, Rule};
use super::record::{
    same_version, version, Entry, EntryPool, Ic3Record, Locked, ABSENT, LISTED, LOCK, PENDING,
    UNLINKED, VALUE,
};
use super::txn::{Contexts, DepQueue, TxnCtx, TxnRef, UNTYPED};
use super::{Ic3, Online, Shared};
use crate::engine::Worker;
use crate::engine::{Accumulation, PieceEnd, ALL_COLUMNS};
use crate::error::{Abort, AbortReason};
use crate::history::{epoch_ts, now_ns};
use crate::protocols::common::{stamp_after, stamp_epoch};
use crate::protocols::occ::{OccProtocol, OccWorker, WriteKind};
use crate::storage::inject::CommitPhase;
use crate::storage::projection::Columns;
use crate::storage::snapshot::Kept;
use crate::storage::{RowId, TableId};
use crossbeam_utils::CachePadded;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

mod direct;
mod held;
mod piece;

use direct::*;
use held::*;
use piece::*;

/// An IC3 worker.
pub type Ic3Worker<'db> = OccWorker<'db, Ic3>;

/// How the running attempt executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Piece by piece, as workload type `t`, on the attempt's graph.
    Typed(usize),
    /// As one unit over committed data (untyped, or a type the graph leaves out).
    Direct,
}

/// What an entry is on.
#[derive(Clone, Copy, Debug)]
enum Target {
    Row(TableId, RowId),
    Bucket(TableId, u32),
}

/// How a commit holds an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// Not locked (yet).
    No,
    /// Locked by this commit.
    Locked,
    /// Our own insert's record, locked since the insert.
    Own,
    /// A record being inserted by another transaction, read as absent: covered by its bucket.
    Skipped,
}

/// Where an item's key puts the bucket flag: buckets sort after rows.
const BUCKET_KEY: u64 = 1 << 63;
/// Where an item's key puts the table: the bits above the row id or slot.
const TABLE_SHIFT: u32 = 47;
/// The most tables and the most rows per table an item key can name (checked at set-up:
/// `Ic3::new`).
pub(super) const MAX_TABLES: usize = 1 << (63 - TABLE_SHIFT);
pub(super) const MAX_ROWS: u64 = 1 << TABLE_SHIFT;

/// A record or bucket a commit locks. Items are sorted and looked up once or more per piece
/// commit, so they are kept small and keyed by one integer.
#[derive(Clone, Copy, Debug)]
struct Item {
    /// The lock order and the identity: [`BUCKET_KEY`] for a bucket (rows first), the table
    /// from [`TABLE_SHIFT`], the row id or slot below.
    key: u64,
    /// Rows: the word the first read of the row saw (validated against the word locked).
    seen: u64,
    /// The word when locked (without the lock bit).
    word: u64,
    /// Rows: the write-set index. Buckets: `Some(0)` when a key in it is inserted or deleted.
    write: Option<u32>,
    /// Read (rows: in the read set; buckets: covered by a scan or an absent read).
    read: bool,
    /// Rows: two reads of the row saw different versions (the validation fails).
    mixed: bool,
    /// Rows: the commit applies deferred accumulations to it.
    adds: bool,
    /// Gathered from an operation of a sub-piece before the open merged piece's current one
    /// (see [`covered`]).
    early: bool,
    /// Gathered from an operation after the transaction's last piece, which a held last piece
    /// commits with (see [`commit_piece`]).
    trailing: bool,
    hold: Hold,
}

impl Item {
    fn row_key(t: TableId, rid: RowId) -> u64 {
        debug_assert!(rid.0 < MAX_ROWS && (t.0 as usize) < MAX_TABLES, "checked at set-up");
        u64::from(t.0) << TABLE_SHIFT | rid.0
    }

    fn new(key: u64, read: bool, write: Option<u32>) -> Self {
        Item {
            key,
            seen: 0,
            word: 0,
            write,
            read,
            mixed: false,
            adds: false,
            early: false,
            trailing: false,
            hold: Hold::No,
        }
    }

    fn row(t: TableId, rid: RowId, read: bool, write: Option<u32>) -> Self {
        Item::new(Item::row_key(t, rid), read, write)
    }

    fn bucket(t: TableId, slot: u32, write: bool) -> Self {
        debug_assert!((t.0 as usize) < MAX_TABLES, "checked at set-up");
        let key = BUCKET_KEY | u64::from(t.0) << TABLE_SHIFT | u64::from(slot);
        Item::new(key, !write, write.then_some(0))
    }

    fn is_bucket(&self) -> bool {
        self.key & BUCKET_KEY != 0
    }

    fn target(&self) -> Target {
        let t = TableId(((self.key & !BUCKET_KEY) >> TABLE_SHIFT) as u32);
        let low = self.key & (MAX_ROWS - 1);
        if self.is_bucket() {
            Target::Bucket(t, low as u32)
        } else {
            Target::Row(t, RowId(low))
        }
    }
}

/// Before-images of row writers' entries: chunks that never move while the attempt runs.
#[derive(Default)]
struct Images {
    chunks: Vec<Box<[u64]>>,
    chunk: usize,
    used: usize,
}

/// Words in an image chunk (rows larger than this get a chunk of their own).
const IMAGE_CHUNK: usize = 4096;

impl Images {
    /// A buffer of `len` bytes, valid until [`Images::reset`].
    fn alloc(&mut self, len: usize) -> NonNull<u8> {
        let words = len.div_ceil(8).max(1);
        loop {
            if self.chunk == self.chunks.len() {
                self.chunks.push(vec![0u64; words.max(IMAGE_CHUNK)].into_boxed_slice());
            }
            let c = &mut self.chunks[self.chunk];
            if self.used + words <= c.len() {
                // In bounds: `used + words <= len`. A pointer from `as_mut_ptr` covers the
                // whole chunk, so the image may span `words` of it.
                let p = c.as_mut_ptr().wrapping_add(self.used);
                self.used += words;
                return NonNull::new(p.cast()).expect("a chunk's pointer");
            }
            self.chunk += 1;
            self.used = 0;
        }
    }

    fn reset(&mut self) {
        self.chunk = 0;
        self.used = 0;
    }
}

/// A write of the running attempt kept for its redo record when the database logs (see
/// [`log_commit`]).
#[derive(Clone, Copy, Debug)]
struct Redo {
    table: TableId,
    key: u64,
    rid: RowId,
    /// The row image the piece installed, as `(offset, length)` in `Ic3Local::redo_images`;
    /// `None` for a deletion.
    image: Option<(u32, u32)>,
    /// The columns it changed (every column for a write that creates the row).
    cols: Columns,
}

/// An accumulation deferred to the transaction's commit.
#[derive(Clone, Copy, Debug)]
struct Deferred {
    table: TableId,
    key: u64,
    rid: RowId,
    acc: Accumulation,
}

/// The direct writers of untracked columns (see the module docs): how many began and how many
/// finished. A typed attempt that read untracked commits only if every such writer that began
/// before its commit had finished before it began.
#[derive(Default)]
pub(crate) struct UntrackedWriters {
    started: CachePadded<AtomicU64>,
    finished: CachePadded<AtomicU64>,
}

impl UntrackedWriters {
    /// A direct writer begins, before it locks anything: counts itself, then waits for the
    /// typed attempts closing their untracked reads to pass their commit points.
    fn enter(&self, contexts: &Contexts) {
        // SeqCst: before the loads of the contexts' `closing` flags (`wait_while_closing`),
        // paired with a closing attempt's store of its flag before its load of `started`.
        self.started.fetch_add(1, Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Counter);
        contexts.wait_while_closing();
    }

    /// The direct writer has installed its writes (or failed), after `enter`.
    fn leave(&self) {
        // SeqCst: after the installs; a typed attempt that counts it reads them (module docs).
        self.finished.fetch_add(1, Ordering::SeqCst);
        crate::util::shared_writes::note(crate::util::shared_writes::Site::Counter);
    }

    /// How many writers have finished (a typed attempt's begin, before its reads).
    #[inline]
    fn finished(&self) -> u64 {
        // SeqCst (Acquire would do): pairs with `leave`, so the attempt reads what the writers
        // it counts installed.
        self.finished.load(Ordering::SeqCst)
    }

    /// Whether no writer began but those of the `finished` that had finished when the
    /// attempt began: none overlapped its reads. Asked after [`TxnCtx::close`].
    #[inline]
    fn none_since(&self, finished: u64) -> bool {
        // SeqCst: after the attempt's `closing` store (see `enter`).
        self.started.load(Ordering::SeqCst) == finished
    }
}

/// An IC3 worker's own state.
pub struct Ic3Local {
    /// Keeps `shared_ptr` valid.
    _shared: Arc<Shared>,
    /// The protocol's shared state (see [`Ic3Local::shared`]).
    shared_ptr: NonNull<Shared>,
    /// This worker's transaction context, in `shared.contexts`.
    ctx: NonNull<TxnCtx>,
    /// The running attempt.
    txn: Option<TxnRef>,
    /// The graph the running attempt runs on (one of `shared.graphs`, kept for the
    /// protocol's life).
    graph: NonNull<Graph>,
    /// The workload type named for the next attempt ([`crate::engine::Worker::typed`]).
    next_type: Option<usize>,
    mode: Mode,
    /// The merged piece executing and not committed yet.
    open: Option<usize>,
    /// The latest merged piece begun.
    reached: Option<usize>,
    /// The open merged piece's current sub-piece.
    sub: usize,
    /// The read, write and phantom sets' lengths when the current sub-piece began.
    sub_from: (usize, usize, usize),
    /// The sets' lengths when the transaction's last merged piece ended, when that piece
    /// found nothing to depend on and commits with the transaction (see [`held_uncontended`]);
    /// operations after them are trailing ones.
    held: Option<(usize, usize, usize)>,
    /// The running attempt commits its last merged piece when it ends: a held one met
    /// contention and trailing operations at the commit, and the attempt runs again so.
    hold_off: bool,
    /// Sets `hold_off` for the next attempt.
    hold_off_next: bool,
    /// Where the history's events stood when the open merged piece began.
    mark: usize,
    deps: DepQueue,
    pool: EntryPool,
    images: Images,
    /// The attempt's entries, in the order they were appended, with the row's key for a row
    /// writer's (0 otherwise).
    entries: Vec<(Target, NonNull<Entry>, u64)>,
    /// Records to retire when the attempt commits (deleted) or rolls back (inserted).
    retire_on_commit: Vec<(TableId, u64, RowId)>,
    retire_on_rollback: Vec<(TableId, u64, RowId)>,
    /// Records found being inserted by others when read in the open piece, with their keys.
    inserting: Vec<(TableId, RowId, u64)>,
    items: Vec<Item>,
    /// The attempt's accumulations deferred to its commit (§4.3), in the order made.
    deferred: Vec<Deferred>,
    /// Where `deferred` stood when the open merged piece began.
    deferred_mark: usize,
    /// A row's bytes while an accumulation is applied to it.
    row_buf: Vec<u8>,
    /// The largest stamp of the accumulations kept in the entries of the rows the attempt's
    /// own accumulations went into (see [`apply_deferred`]): its commit stamp exceeds it.
    stamp_floor: u64,
    /// The attempt's writes, for its redo record (only when the database logs).
    redo: Vec<Redo>,
    redo_images: Vec<u8>,
    /// The attempt's commit epoch once taken ([`take_epoch`]; 0 before).
    epoch: u64,
    /// The attempt's commit stamp once it committed (its log stamp when the database logs,
    /// else its epoch's first stamp; 0 before): given to the records it wrote as it leaves
    /// their lists, or as a direct commit unlocks them.
    stamp: u64,
    /// Whether the attempt read untracked ([`OccProtocol::untracked`]).
    untracked_reads: bool,
    /// Whether the attempt read columns that typed attempts defer their accumulations into
    /// (no template declares such a read: [`declared`] refuses the piece).
    deferred_reads: bool,
    /// The direct writers of untracked columns that had finished when the attempt began
    /// ([`UntrackedWriters::finished`]).
    writers_finished: u64,
    /// Piece runs discarded by a failed validation, since the worker was created.
    pub piece_retries: u64,
}

// SAFETY: `ctx` points into `shared`, which the local keeps alive; the context's state is
// atomic. Entries and images are this worker's own.
unsafe impl Send for Ic3Local {}

impl Ic3Local {
    pub(super) fn new(shared: Arc<Shared>) -> Option<Self> {
        let ctx = NonNull::from(shared.contexts.take()?);
        let graph = NonNull::from(shared.graphs.current());
        Some(Ic3Local {
            shared_ptr: NonNull::from(&*shared),
            _shared: shared,
            ctx,
            txn: None,
            graph,
            next_type: None,
            mode: Mode::Direct,
            open: None,
            reached: None,
            sub: 0,
            sub_from: (0, 0, 0),
            held: None,
            hold_off: false,
            hold_off_next: false,
            mark: 0,
            deps: DepQueue::default(),
            pool: EntryPool::default(),
            images: Images::default(),
            entries: Vec::new(),
            retire_on_commit: Vec::new(),
            retire_on_rollback: Vec::new(),
            inserting: Vec::new(),
            items: Vec::new(),
            deferred: Vec::new(),
            deferred_mark: 0,
            row_buf: Vec::new(),
            stamp_floor: 0,
            redo: Vec::new(),
            redo_images: Vec::new(),
            epoch: 0,
            stamp: 0,
            untracked_reads: false,
            deferred_reads: false,
            writers_finished: 0,
            piece_retries: 0,
        })
    }

    /// This worker's transaction context, borrowed apart from the local.
    fn ctx<'a>(&self) -> &'a TxnCtx {
        // SAFETY: the context lives in the shared state, which this local keeps alive
        // (`_shared`) for as long as it exists; the reference is used within calls on the
        // worker, never kept.
        unsafe { self.ctx.as_ref() }
    }

    /// The protocol's shared state, borrowed apart from the local (so that the worker's other
    /// fields can change meanwhile) without touching the `Arc`'s shared count.
    fn shared<'a>(&self) -> &'a Shared {
        // SAFETY: as for `ctx`: `_shared` keeps it alive, and no reference outlives a call.
        unsafe { self.shared_ptr.as_ref() }
    }

    /// The running attempt's graph, borrowed apart from the local.
    fn graph<'a>(&self) -> &'a Graph {
        // SAFETY: published graphs live as long as the shared state (`graph`), which `_shared`
        // keeps alive; no reference outlives a call.
        unsafe { self.graph.as_ref() }
    }

    /// How typed attempt type `t` runs on the attempt's graph.
    fn plan<'a>(&self, t: usize) -> &'a Plan {
        self.graph().plans[t].as_ref().expect("a typed attempt's type has a plan")
    }
}

impl Drop for Ic3Local {
    fn drop(&mut self) {
        // The worker's drop rolled back any open attempt (ending it) before its local drops.
        self.shared().contexts.give_back(self.ctx());
    }
}

/// The record of a row.
fn row_rec<'db>(w: &Ic3Worker<'db>, t: TableId, rid: RowId) -> &'db Ic3Record {
    w.ctx.storage.table(t).rows.get(rid).header
}

/// The pseudo-record of a bucket.
fn bucket_rec(shared: &Shared, t: TableId, slot: u32) -> &Ic3Record {
    &shared.buckets()[t.index()][slot as usize]
}

/// Whether merged piece `m` of type `t` waits after its execution (optimistic constraining,
/// §4.1) rather than before: only a merged piece of one declared piece, which can run again
/// when what it read changed while it waited (a merged piece of several would roll the
/// transaction back, see the module docs).
fn waits_after(l: &Ic3Local, t: usize, m: usize) -> bool {
    l.shared().options.optimistic && l.plan(t).pieces[m].range.len() == 1
}

/// The abort of an attempt that learnt it is doomed (a rolled-back writer marked its entries).
fn cascade() -> Abort {
    Abort::new(AbortReason::CascadingAbort)
}

/// Algorithm 1's wait phase for sub-piece `s` of merged piece `m` of type `t` (see
/// [`super::graph::Rule`]). Ends early with a cascading abort when the attempt is doomed
/// meanwhile.
fn wait_phase(l: &mut Ic3Local, t: usize, m: usize, s: usize) -> Result<(), Abort> {
    let sub = &l.plan(t).pieces[m].subs[s];
    if !sub.conflicting {
        return Ok(()); // case 1
    }
    let me = l.txn.expect("an attempt is running");
    let tag = l.graph().tag();
    let policy = l.shared().options.wait;
    l.deps.prune();
    for d in l.deps.iter() {
        let Some((u, graph)) = d.running() else { continue };
        let rule = match u {
            UNTYPED => Rule::End,
            u if graph == tag => sub.same[u as usize],
            u => sub.cross[u as usize],
        };
        match rule {
            Rule::Piece(j) => d.wait(policy, || d.passed(j) || me.doomed()), // case 2
            Rule::End => d.wait(policy, || d.over() || me.doomed()),         // case 3
        }
        if me.doomed() {
            return Err(cascade());
        }
    }
    Ok(())
}

impl OccProtocol for Ic3 {
    type Record = Ic3Record;
    type Local = Ic3Local;

    fn typed(w: &mut Ic3Worker<'_>, ty: usize) {
        w.local.next_type = Some(ty);
    }

    /// Begins on the current graph: typed when the graph has a plan for the named type, else
    /// directly. After the context published the attempt's graph, the current graph is loaded
    /// again; when a mix change published another meanwhile, the attempt moves to it (see
    /// `txn::TxnCtx::begin`: a change then never misses an attempt on the graph it drains).
    /// With `online=stop`, an attempt that begins while a change stops the world ends at once
    /// and waits until the change is over (`graph::stop_the_world`).
    fn begin(w: &mut Ic3Worker<'_>) {
        let l = &mut w.local;
        let ty = l.next_type.take();
        let shared = l.shared();
        let graphs = &shared.graphs;
        let mode = |g: &Graph| match ty {
            Some(t) if g.plans.get(t).is_some_and(Option::is_some) => Mode::Typed(t),
            _ => Mode::Direct,
        };
        let code = |m: Mode| if let Mode::Typed(t) = m { t as u64 } else { UNTYPED };
        let mut g = graphs.current();
        l.mode = mode(g);
        l.txn = Some(l.ctx().begin(code(l.mode), g.tag()));
        if shared.options.online == Online::Stop {
            while graphs.stopped() {
                l.ctx().end();
                while graphs.stopped() {
                    std::thread::yield_now();
                }
                g = graphs.current();
                l.mode = mode(g);
                l.txn = Some(l.ctx().begin(code(l.mode), g.tag()));
            }
        }
        loop {
            let now = graphs.current();
            if std::ptr::eq(now, g) {
                break;
            }
            g = now;
            l.mode = mode(g);
            l.ctx().rebegin(code(l.mode), g.tag());
        }
        l.graph = NonNull::from(g);
        l.untracked_reads = false;
        l.deferred_reads = false;
        if let Mode::Typed(_) = l.mode {
            // After the context's last begin store (SeqCst): see the module docs.
            l.writers_finished = shared.direct_writers.finished();
        }
        l.hold_off = std::mem::take(&mut l.hold_off_next);
        l.open = None;
        l.reached = None;
    }

    /// A snapshot reader runs directly (outside the analysis: it commits nothing and waits for
    /// nobody).
    fn snapshot_taken(w: &mut Ic3Worker<'_>) {
        let l = &mut w.local;
        if l.mode != Mode::Direct {
            l.mode = Mode::Direct;
            l.ctx().rebegin(UNTYPED, l.graph().tag());
        }
    }

    fn access(
        w: &mut Ic3Worker<'_>,
        t: TableId,
        key: u64,
        rid: RowId,
        rec: &Ic3Record,
        write: bool,
    ) -> Result<(), Abort> {
        if !write && rec.load() & (LOCK | ABSENT) == LOCK | ABSENT {
            w.local.inserting.push((t, rid, key));
        }
        Ok(())
    }

    fn piece_begin(w: &mut Ic3Worker<'_>, piece: usize) -> Result<(), Abort> {
        let Mode::Typed(t) = w.local.mode else { return Ok(()) };
        let plan = w.local.plan(t);
        let Some((m, s)) = plan.at(piece) else {
            return Err(Abort::new(AbortReason::TemplateViolation));
        };
        if w.local.held.is_some() {
            // A piece after the last one, or the last one again.
            return Err(Abort::new(AbortReason::TemplateViolation));
        }
        if w.local.reached.is_some_and(|k| m < k || (m == k && w.local.open != Some(m))) {
            // The analysis orders pieces as the template does, each run once: going back, or
            // running a committed piece again (a loop over a piece: a loop belongs inside one
            // piece), would let a dependent that waited for the piece meet it again.
            return Err(Abort::new(AbortReason::TemplateViolation));
        }
        if w.local.txn.is_some_and(|me| me.doomed()) {
            return Err(cascade());
        }
        if let Some(k) = w.local.open.filter(|&k| k != m) {
            // A merged piece whose last declared piece was skipped: it commits now.
            let with_transaction = commit_last(w, t, k)?;
            debug_assert!(!with_transaction, "only the last merged piece is held");
        }
        if w.local.reached.is_none_or(|k| k < m) {
            // Every merged piece before `m` has committed, for good.
            w.local.ctx().progress(plan.pieces[m].range.start as u64);
        }
        w.local.reached = Some(m);
        if w.local.open == Some(m) {
            if s > w.local.sub {
                // A later sub-piece of the open merged piece (a transitional graph's).
                track(w);
                w.local.sub = s;
                wait_phase(&mut w.local, t, m, s)?;
            }
            return Ok(());
        }
        let l = &mut w.local;
        l.open = Some(m);
        l.sub = s;
        l.sub_from = (0, 0, 0);
        l.mark = w.ctx.history.as_ref().map_or(0, |h| h.mark());
        l.deferred_mark = l.deferred.len();
        if !waits_after(l, t, m) {
            wait_phase(l, t, m, s)?;
        }
        Ok(())
    }

    fn piece_end(
        w: &mut Ic3Worker<'_>,
        piece: usize,
        body: Result<(), Abort>,
    ) -> Result<PieceEnd, Abort> {
        body?;
        let Mode::Typed(t) = w.local.mode else { return Ok(PieceEnd::Done) };
        let Some(m) = w.local.open else {
            return Err(Abort::new(AbortReason::TemplateViolation));
        };
        let range = &w.local.plan(t).pieces[m].range;
        if piece + 1 != range.end {
            return Ok(PieceEnd::Done); // the merged piece goes on
        }
        if waits_after(&w.local, t, m) {
            wait_phase(&mut w.local, t, m, 0)?;
        }
        if m + 1 == w.local.plan(t).pieces.len() && !w.local.hold_off && held_uncontended(w) {
            // Committed with the transaction (see `commit_piece`).
            w.local.held = Some((w.reads.len(), w.writes.len(), w.phantoms.len()));
            return Ok(PieceEnd::Done);
        }
        let doomed = match commit_piece(w) {
            Verdict::Valid => {
                w.local.open = None;
                return Ok(PieceEnd::Done);
            }
            Verdict::Committed => unreachable!("only a held piece commits the transaction"),
            Verdict::Undeclared => return Err(Abort::new(AbortReason::TemplateViolation)),
            _ if range.len() > 1 => {
                // Only the last declared piece could run again: the transaction does.
                return Err(Abort::new(AbortReason::ReadValidation));
            }
            Verdict::Stale => None,
            Verdict::Doomed(d) => Some(d),
        };
        w.local.piece_retries += 1;
        w.discard_sets();
        w.local.inserting.clear();
        w.local.deferred.truncate(w.local.deferred_mark);
        if let Some(h) = &mut w.ctx.history {
            h.rewind(w.local.mark);
        }
        if let Some(d) = doomed {
            // Nothing held now: wait for the doomed transaction to roll back.
            wait_out_doomed(w, d)?;
        }
        Ok(PieceEnd::Again)
    }

    fn reads_still_valid(w: &mut Ic3Worker<'_>) -> bool {
        let direct = w.local.mode == Mode::Direct;
        w.reads.iter().all(|r| {
            let rec = row_rec(w, r.table, r.rid);
            let now = rec.load();
            // (A record this attempt writes may be locked by it: its payload is compared.)
            let committed = direct && now & PENDING != 0 && w.find_write(r.table, r.rid).is_none();
            let now = if committed { rec.lock().committed_word() } else { now };
            same_version(now, r.word)
        })
    }

    #[inline]
    fn reads_committed(w: &Ic3Worker<'_>) -> bool {
        w.local.mode == Mode::Direct
    }

    /// A typed attempt's read of columns that no analysed template writes (see the module
    /// docs).
    #[inline]
    fn untracked(w: &mut Ic3Worker<'_>, t: TableId, cols: Columns) -> bool {
        let l = &mut w.local;
        let typed = matches!(l.mode, Mode::Typed(_));
        let yes = cols != 0 && typed && cols & !l.shared().untracked(t) == 0;
        l.untracked_reads |= yes;
        l.deferred_reads |= typed && cols & l.shared().deferred(t) != 0;
        yes
    }

    #[inline]
    fn defers(w: &Ic3Worker<'_>, t: TableId) -> bool {
        matches!(w.local.mode, Mode::Typed(_)) && w.local.shared().deferred(t) != 0
    }

    /// Keeps the accumulation for the commit (`apply_deferred`) once the open merged piece
    /// is found to declare it (the analysis' promise covers nothing else). A row found absent
    /// is read as any other, so that its absence is validated and recorded (and one that
    /// turns out present then, inserted meanwhile, sends the attempt back).
    fn defer(
        w: &mut Ic3Worker<'_>,
        t: TableId,
        key: u64,
        rid: RowId,
        acc: Accumulation,
    ) -> Result<bool, Abort> {
        let (Mode::Typed(ty), Some(m)) = (w.local.mode, w.local.open) else {
            return Err(Abort::new(AbortReason::TemplateViolation));
        };
        let tables = &w.local.plan(ty).pieces[m].tables;
        if !tables.iter().any(|d| d.table == t && acc.columns() & !d.accumulates == 0) {
            return Err(Abort::new(AbortReason::TemplateViolation));
        }
        if row_rec(w, t, rid).load() & (ABSENT | UNLINKED) != 0 {
            return match w.read_cols(t, key, 0, |_| ())? {
                None => Ok(false),
                // Inserted meanwhile (by a direct transaction: no analysed one writes `t`).
                Some(()) => Err(Abort::new(AbortReason::ReadValidation)),
            };
        }
        w.local.deferred.push(Deferred { table: t, key, rid, acc });
        Ok(true)
    }

    fn commit(w: &mut Ic3Worker<'_>) -> Result<(), Abort> {
        let Mode::Typed(t) = w.local.mode else { return commit_direct(w) };
        if let Some(m) = w.local.open {
            match commit_last(w, t, m) {
                Ok(false) => {}
                Ok(true) => {
                    w.finish(true);
                    return Ok(());
                }
                Err(a) => {
                    w.rollback();
                    return Err(a);
                }
            }
        }
        // Operations after the last piece (a crash test's acknowledgement row): allowed only on
        // tables no analysed template touches, and committed with the transaction, directly.
        let trailing = !(w.reads.is_empty() && w.writes.is_empty() && w.phantoms.is_empty());
        if trailing {
            gather(w);
            if !outside_analysis(w) {
                w.rollback();
                return Err(Abort::new(AbortReason::TemplateViolation));
            }
        }
        // Algorithm 2: every dependency ends first.
        let policy = w.local.shared().options.wait;
        let me = w.local.txn.expect("an attempt is running");
        for d in w.local.deps.iter() {
            d.wait(policy, || d.over() || me.doomed());
        }
        // SAFETY: the entries stay in the pool until the attempt ends.
        if w.local.entries.iter().any(|&(_, e, _)| unsafe { e.as_ref() }.aborted()) {
            w.rollback();
            return Err(Abort::new(AbortReason::CascadingAbort));
        }

        // The trailing operations and the rows of deferred accumulations, locked together
        // (in one order) until after the commit point.
        let adds = !w.local.deferred.is_empty();
        if adds {
            let l = &mut w.local;
            if !trailing {
                l.items.clear();
            }
            for d in &l.deferred {
                l.items.push(Item { adds: true, ..Item::row(d.table, d.rid, false, None) });
            }
            sort_items(&mut l.items);
        }
        if (trailing || adds) && !(lock(w) && lock_held_valid(w)) {
            w.rollback();
            return Err(Abort::new(AbortReason::ReadValidation));
        }
        // Its pieces' writes are in place under its entries (which exclude every conflicting
        // commit until it ends); the trailing operations and accumulations are locked.
        let wrote = typed_wrote(w);
        if wrote {
            w.ctx.phase(CommitPhase::Locked);
        }
        if !close_untracked(&w.local) {
            if trailing || adds {
                release(w, false);
            }
            w.rollback();
            return Err(Abort::new(AbortReason::ReadValidation));
        }
        w.ctx.phase(CommitPhase::Validated);
        // The commit epoch, between the two stores of the commit point (module docs).
        w.local.ctx().committing();
        let epoch = take_epoch(w);
        if trailing || adds {
            install_locked(w);
        }
        if adds {
            apply_deferred(w);
        }
        log_commit(w);
        if wrote {
            w.ctx.phase(CommitPhase::Logged);
        }
        if let Some(h) = &mut w.ctx.history {
            h.serial_point_at(epoch_ts(epoch, now_ns()));
            h.committed();
        }
        // The commit point (after the history's serialization point: a direct reader that
        // sees the writes committed serializes after it; after the log record: a reader of
        // committed data logs after it).
        w.local.ctx().commit();
        reopen(&w.local);
        if trailing || adds {
            stamp_and_release(w);
        }
        if wrote {
            w.ctx.phase(CommitPhase::Installed);
        }
        w.finish(true);
        Ok(())
    }

    /// Leaves every accessor list (rolling back, with §4.4's marks, unless `committed`),
    /// retires what the outcome leaves absent, and ends the attempt.
    fn end(w: &mut Ic3Worker<'_>, committed: bool) {
        let storage = w.ctx.storage;
        // Newest first: a rolled-back record gets its images back in reverse order.
        let (stamp, epoch) = (w.local.stamp, w.local.epoch);
        for i in (0..w.local.entries.len()).rev() {
            let (target, e, key) = w.local.entries[i];
            match target {
                Target::Row(t, rid) => {
                    let row = storage.table(t).rows.get(rid);
                    let mut g = row.header.lock();
                    // The leave step of the transaction's first write of the record: the value
                    // it replaced, committed by the last writer to leave, is kept for snapshot
                    // readers, and the record takes the transaction's stamp (see
                    // `record::at_boundary`).
                    // SAFETY: the entry stays in the pool until the attempt ends.
                    let first = committed && unsafe { e.as_ref() }.writer();
                    let first = first.then(|| g.replaced_by(e, row.len())).flatten();
                    if let Some((image, word)) = first {
                        if w.ctx.snapshot_every != 0 {
                            let value =
                                if word & ABSENT != 0 { Kept::Absent } else { Kept::Bytes(image) };
                            let old = stamp_epoch(row.header.stamp());
                            w.ctx.keep_for_snapshots(t, rid, value, word, old, epoch);
                        }
                    }
                    let first = first.is_some();
                    if first {
                        // An accumulation that went in under this write is the committed
                        // version it follows (`apply_deferred`).
                        if let (Some((over, now)), Some(h)) = (g.rebased(e), &mut w.ctx.history) {
                            h.rebase(t.0, key, u128::from(over), u128::from(now));
                        }
                    }
                    let fresh = || w.local.ctx().next_version();
                    let restored = g.unlink(Some(&row), e, !committed, fresh);
                    if let (Some(r), Some(h)) = (restored, &mut w.ctx.history) {
                        h.restored(t.0, key, u128::from(r.version), u128::from(r.of));
                    }
                    if first {
                        debug_assert_ne!(stamp, 0, "a committed writer has its stamp");
                        g.raise_stamp(stamp);
                    }
                }
                Target::Bucket(t, slot) => {
                    // A bucket has no payload: nothing to restore.
                    let none = || unreachable!("a bucket restores no image");
                    bucket_rec(w.local.shared(), t, slot).lock().unlink(None, e, !committed, none);
                }
            }
        }
        let retire =
            if committed { &w.local.retire_on_commit } else { &w.local.retire_on_rollback };
        for &(t, key, rid) in retire {
            w.ctx.retire(t, key, rid);
        }
        let l = &mut w.local;
        l.entries.clear();
        l.retire_on_commit.clear();
        l.retire_on_rollback.clear();
        l.deferred.clear();
        l.deferred_mark = 0;
        l.redo.clear();
        l.redo_images.clear();
        l.epoch = 0;
        l.stamp = 0;
        l.stamp_floor = 0;
        if l.txn.take().is_some() {
            l.ctx().end();
        }
        l.deps.clear();
        l.pool.reset();
        l.images.reset();
        l.inserting.clear();
        l.open = None;
        l.reached = None;
        l.sub = 0;
        l.sub_from = (0, 0, 0);
        l.held = None;
    }
}

#[cfg(test)]
mod tests;
