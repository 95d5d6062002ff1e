//! IC3's worker: `common::occ`'s read phase for each piece, and IC3's piece commit, waits,
//! transaction commit and rollback (Algorithms 1 and 2, §4.1, §4.2, §4.4).
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
        contexts.wait_while_closing();
    }

    /// The direct writer has installed its writes (or failed), after `enter`.
    fn leave(&self) {
        // SeqCst: after the installs; a typed attempt that counts it reads them (module docs).
        self.finished.fetch_add(1, Ordering::SeqCst);
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

/// Gathers the items the open piece's commit locks, in lock order, marking those of
/// operations before the current sub-piece `early`, and those after a held last piece
/// `trailing`.
fn gather(w: &mut Ic3Worker<'_>) {
    let storage = w.ctx.storage;
    let (r0, w0, p0) = w.local.sub_from;
    let (r1, w1, p1) = w.local.held.unwrap_or((usize::MAX, usize::MAX, usize::MAX));
    let items = &mut w.local.items;
    items.clear();
    for (i, r) in w.reads.iter().enumerate() {
        let (seen, early, trailing) = (r.word, i < r0, i >= r1);
        items.push(Item { early, trailing, seen, ..Item::row(r.table, r.rid, true, None) });
    }
    for (i, x) in w.writes.iter().enumerate() {
        let (early, trailing) = (i < w0, i >= w1);
        items.push(Item { early, trailing, ..Item::row(x.table, x.rid, false, Some(i as u32)) });
        if x.kind != WriteKind::Update {
            // An insert or delete changes which keys exist: its bucket's writer.
            let slot = storage.table(x.table).buckets.slot_of(x.key) as u32;
            items.push(Item { early, trailing, ..Item::bucket(x.table, slot, true) });
        }
    }
    for (i, p) in w.phantoms.iter().enumerate() {
        let (early, trailing) = (i < p0, i >= p1);
        items.push(Item { early, trailing, ..Item::bucket(p.table, p.slot, false) });
    }
    sort_items(items);
}

/// Sorts the items into lock order and merges the duplicates.
fn sort_items(items: &mut Vec<Item>) {
    items.sort_unstable_by_key(|x| x.key);
    items.dedup_by(|later, kept| {
        let same = later.key == kept.key;
        if same {
            merge_item(kept, *later);
        }
        same
    });
}

/// Merges `later`, an item of the same record or bucket as `kept`, into it.
fn merge_item(kept: &mut Item, later: Item) {
    if later.read && !later.is_bucket() {
        if kept.read {
            kept.mixed |= later.mixed || !same_version(kept.seen, later.seen);
        } else {
            kept.seen = later.seen;
            kept.mixed = later.mixed;
        }
    }
    kept.read |= later.read;
    kept.write = kept.write.or(later.write);
    kept.adds |= later.adds;
    kept.early |= later.early;
    kept.trailing |= later.trailing;
    if kept.hold == Hold::No {
        kept.hold = later.hold;
        kept.word = later.word;
    }
}

/// Unlocks what a commit locked (rows first, then buckets: see the module docs), and our
/// inserts' records too when `own` (their pieces committed).
fn release(w: &mut Ic3Worker<'_>, own: bool) {
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        if it.hold == Hold::Locked || (own && it.hold == Hold::Own) {
            let rec = match it.target() {
                Target::Row(t, rid) => row_rec(w, t, rid),
                Target::Bucket(t, slot) => bucket_rec(w.local.shared(), t, slot),
            };
            // SAFETY: this commit holds the lock (taken and kept, or our insert's).
            drop(unsafe { Locked::resume(rec, it.word) });
            w.local.items[i].hold = Hold::No;
        }
    }
}

/// Locks the gathered items; `false` (nothing held) when a record this piece writes is being
/// inserted by another transaction, or a record read as absent is locked and not known to be
/// an insert in progress (a revive committing: the piece runs again).
fn lock(w: &mut Ic3Worker<'_>) -> bool {
    let storage = w.ctx.storage;
    let rows = w.local.items.iter().take_while(|x| !x.is_bucket()).count();
    let mut late = false;
    for i in 0..rows {
        let it = w.local.items[i];
        let Target::Row(t, rid) = it.target() else { unreachable!("rows come first") };
        let rec = row_rec(w, t, rid);
        let own = it.write.is_some_and(|j| {
            matches!(w.writes[j as usize].kind, WriteKind::Insert | WriteKind::InsertDeleted)
        });
        let (hold, word) = if own {
            (Hold::Own, rec.load() & !LOCK)
        } else if let Some(l) = rec.lock_unless_inserting() {
            (Hold::Locked, l.keep())
        } else {
            let known = w.local.inserting.iter().find(|&&(a, b, _)| a == t && b == rid);
            match known {
                Some(&(_, _, key)) if it.write.is_none() => {
                    let slot = storage.table(t).buckets.slot_of(key) as u32;
                    w.local.items.push(Item::bucket(t, slot, false));
                    late = true;
                    (Hold::Skipped, 0)
                }
                _ => {
                    release(w, false);
                    return false;
                }
            }
        };
        w.local.items[i].hold = hold;
        w.local.items[i].word = word;
    }
    if late {
        sort_items(&mut w.local.items);
    }
    let shared = w.local.shared();
    for it in w.local.items.iter_mut().filter(|x| x.is_bucket()) {
        let Target::Bucket(t, slot) = it.target() else { unreachable!() };
        it.word = bucket_rec(shared, t, slot).lock().keep();
        it.hold = Hold::Locked;
    }
    true
}

/// Where the item of row `rid` of table `t` is.
fn item_index(items: &[Item], t: TableId, rid: RowId) -> usize {
    let key = Item::row_key(t, rid);
    items.binary_search_by_key(&key, |x| x.key).expect("every row was gathered")
}

/// What a commit's validation found.
#[derive(Clone, Copy, Debug)]
enum Verdict {
    Valid,
    /// Something read changed (or a lock could not be taken).
    Stale,
    /// A value read or overwritten is a doomed transaction's (marked by a rolled-back writer):
    /// depending on it would only cascade; the piece runs again once that transaction is over.
    Doomed(TxnRef),
    /// The piece touched a table its template does not declare (or wrote one it declares
    /// read-only): the analysis' promise does not cover it, so it must not commit.
    Undeclared,
    /// A held last piece committed, and the transaction with it ([`commit_held`]).
    Committed,
}

/// Validates the locked items: every read still sees the version it read, every write finds
/// the record present or absent as its kind needs, every phantom bucket its version. A piece
/// does not build on a doomed transaction's writes. A direct commit read committed values, and
/// each must still be its record's committed value; it writes only where no entry is (see the
/// module docs of `ic3`).
fn validate(w: &Ic3Worker<'_>, direct: bool) -> Verdict {
    let items = &w.local.items;
    for it in items.iter().filter(|x| x.read && !x.is_bucket()) {
        let Target::Row(t, rid) = it.target() else { unreachable!() };
        let now = match it.hold {
            // Being inserted (absent; a direct read of one with a pending writer fails here:
            // its committed value cannot be read without its lock).
            Hold::Skipped => row_rec(w, t, rid).load(),
            Hold::Locked if direct && it.word & PENDING != 0 => {
                // A direct read saw the committed value: is it still the committed one?
                // SAFETY: this commit holds the lock (`lock` kept it).
                let g = unsafe { Locked::resume(row_rec(w, t, rid), it.word) };
                let committed = g.committed_word();
                g.keep();
                committed
            }
            _ => it.word,
        };
        if it.mixed || !same_version(now, it.seen) {
            return Verdict::Stale;
        }
    }
    for it in items.iter().filter(|x| x.hold == Hold::Locked) {
        if !direct && !it.is_bucket() && it.word & PENDING != 0 {
            let Target::Row(t, rid) = it.target() else { unreachable!() };
            // SAFETY: this commit holds the lock (`lock` kept it).
            let g = unsafe { Locked::resume(row_rec(w, t, rid), it.word) };
            let doomed = g.doomed_writer(w.local.txn.expect("a typed attempt is running"));
            g.keep();
            if let Some(d) = doomed {
                return Verdict::Doomed(d);
            }
        }
        if it.adds && it.word & ABSENT != 0 {
            return Verdict::Stale; // deleted since its accumulation was deferred
        }
        let Some(j) = it.write else { continue };
        if direct && it.word & LISTED != 0 {
            return Verdict::Stale;
        }
        if it.is_bucket() {
            continue;
        }
        let absent = it.word & ABSENT != 0;
        let ok = match w.writes[j as usize].kind {
            WriteKind::Update | WriteKind::Delete => !absent,
            WriteKind::Revive => absent && it.word & UNLINKED == 0,
            WriteKind::Insert | WriteKind::InsertDeleted => true,
        };
        if !ok {
            return Verdict::Stale;
        }
    }
    if phantoms_unchanged(w) {
        Verdict::Valid
    } else {
        Verdict::Stale
    }
}

/// Whether every phantom bucket the attempt covered still has the version it saw.
fn phantoms_unchanged(w: &Ic3Worker<'_>) -> bool {
    let storage = w.ctx.storage;
    w.phantoms.iter().all(|p| storage.table(p.table).buckets.version(p.slot as usize) == p.version)
}

/// Writes write-set entry `j`'s image into its locked record `g` under a fresh version, and
/// reports the write to the history (and keeps it for the redo record when the database logs).
fn install(w: &mut Ic3Worker<'_>, j: usize, g: &mut Locked<'_>) {
    let x = w.writes[j];
    let tbl = w.ctx.storage.table(x.table);
    let row = tbl.rows.get(x.rid);
    let mut cols = ALL_COLUMNS;
    if let Some((image, dirty)) = w.write_image(j) {
        row.write_cols_from(image, &tbl.projection, dirty);
        if x.kind == WriteKind::Update {
            cols = dirty;
        }
    }
    if w.ctx.log.is_some() {
        let l = &mut w.local;
        let image = x.kind.present().then(|| {
            let off = l.redo_images.len();
            l.redo_images.resize(off + row.len(), 0);
            row.read_into(&mut l.redo_images[off..]);
            (off as u32, row.len() as u32)
        });
        l.redo.push(Redo { table: x.table, key: x.key, rid: x.rid, image, cols });
    }
    let prev = version(g.word());
    let v = w.local.ctx().next_version();
    g.set_version(v);
    g.set(ABSENT, !x.kind.present());
    if let Some(h) = &mut w.ctx.history {
        // Only the columns written: pieces that read others (untracked) do not depend on it.
        let (v, prev) = (u128::from(v), u128::from(prev));
        h.write_cols(x.table.0, x.key, v, prev, x.kind.present(), x.written());
    }
}

/// Commits the open merged piece (see the module docs); when its validation fails, nothing is
/// held and the sets are as they were.
///
/// A held last piece (`w.local.held`, see [`held_uncontended`]) commits at the transaction's
/// commit, with it: when the attempt depends on nobody still running and the piece's records
/// name nobody else either, it installs its writes, applies the deferred accumulations and
/// passes the commit point under the piece's locks, leaving no entry ([`Verdict::Committed`]).
/// Otherwise it commits as any piece, with entries, and the transaction's commit goes on as
/// usual; but trailing operations (which commit with the transaction, directly) cannot be told
/// apart from the piece's then, so the attempt fails and its retry commits the piece when it
/// ends.
fn commit_piece(w: &mut Ic3Worker<'_>) -> Verdict {
    gather(w);
    if !declared(w) {
        return Verdict::Undeclared;
    }
    let held = w.local.held.is_some();
    let me = w.local.txn.expect("a typed attempt is running");
    // The attempt's dependencies all over, and no rolled-back writer marked its entries.
    // SAFETY: the entries stay in the pool until the attempt ends.
    let alone = held
        && w.local.deps.iter().all(TxnRef::over)
        && !w.local.entries.iter().any(|&(_, e, _)| unsafe { e.as_ref() }.aborted());
    if alone && !w.local.deferred.is_empty() {
        let l = &mut w.local;
        for d in &l.deferred {
            l.items.push(Item { adds: true, ..Item::row(d.table, d.rid, false, None) });
        }
        sort_items(&mut l.items);
    }
    if !lock(w) {
        return Verdict::Stale;
    }
    match validate(w, false) {
        Verdict::Valid => {}
        v => {
            release(w, false);
            return v;
        }
    }
    if w.local.sub > 0 && !covered(w) {
        release(w, false);
        return Verdict::Stale;
    }
    if held {
        if alone && names_nobody(w, me) {
            if !close_untracked(&w.local) {
                release(w, false);
                return Verdict::Stale;
            }
            commit_held(w);
            reopen(&w.local);
            return Verdict::Committed;
        }
        if w.local.items.iter().any(|it| it.trailing) {
            release(w, false);
            w.local.hold_off_next = true;
            return Verdict::Stale;
        }
        // Commits as any piece, its accumulations left for the transaction's commit.
        w.local.held = None;
        if alone && !w.local.deferred.is_empty() {
            release(w, false); // the accumulations' rows are among the items: gather again
            return commit_piece(w);
        }
    }
    let txn = w.local.txn.expect("a typed attempt is running");
    let storage = w.ctx.storage;
    let shared = w.local.shared();
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        if it.hold == Hold::Skipped {
            continue;
        }
        let (rec, row) = match it.target() {
            Target::Row(t, rid) => {
                let row = storage.table(t).rows.get(rid);
                (row.header, Some(row))
            }
            Target::Bucket(t, slot) => (bucket_rec(shared, t, slot), None),
        };
        // SAFETY: `lock` took this lock (or it is our insert's) and kept it.
        let mut g = unsafe { Locked::resume(rec, it.word) };
        let l = &mut w.local;
        let e = match (it.target(), it.write) {
            (Target::Row(_, _), Some(_)) => {
                let len = row.as_ref().map_or(0, |r| r.len());
                let before = l.images.alloc(len);
                l.pool.entry(txn, true, Some(before))
            }
            (_, write) => l.pool.entry(txn, write.is_some(), None),
        };
        g.append(row.as_ref(), e, &mut l.deps);
        let key = it.write.map_or(0, |j| w.writes[j as usize].key);
        l.entries.push((it.target(), e, key));
        if let (Target::Row(t, rid), Some(j)) = (it.target(), it.write) {
            let j = j as usize;
            install(w, j, &mut g);
            let x = w.writes[j];
            let l = &mut w.local;
            match x.kind {
                WriteKind::Update => {}
                WriteKind::Insert | WriteKind::Revive => l.retire_on_rollback.push((t, x.key, rid)),
                WriteKind::Delete => l.retire_on_commit.push((t, x.key, rid)),
                WriteKind::InsertDeleted => {
                    l.retire_on_commit.push((t, x.key, rid));
                    l.retire_on_rollback.push((t, x.key, rid));
                }
            }
        }
        w.local.items[i].word = g.keep();
    }
    release(w, true);
    w.local.inserting.clear();
    w.clear_sets();
    w.local.sub_from = (0, 0, 0);
    Verdict::Valid
}

/// Whether the locked items of a held last piece name no transaction still running that their
/// entries would make the attempt depend on (the rows of deferred accumulations aside: no
/// analysed template writes them, see [`apply_deferred`]).
fn names_nobody(w: &Ic3Worker<'_>, me: TxnRef) -> bool {
    let shared = w.local.shared();
    let items = w.local.items.iter();
    let touched = items.filter(|it| it.word & LISTED != 0 && (it.read || it.write.is_some()));
    touched.filter(|it| it.hold != Hold::Skipped).all(|it| {
        let rec = match it.target() {
            Target::Row(t, rid) => row_rec(w, t, rid),
            Target::Bucket(t, slot) => bucket_rec(shared, t, slot),
        };
        // SAFETY: the commit holds the lock (`lock` took it and kept it, or our insert's).
        let g = unsafe { Locked::resume(rec, it.word) };
        let mut none = true;
        g.dependencies(me, it.write.is_some(), |d| none &= d.over());
        g.keep();
        none
    })
}

/// Closes the attempt's untracked reads just before its commit point (see the module docs):
/// `true` when it made none, or when no direct writer of untracked columns overlapped them,
/// and then a writer that begins now waits for [`reopen`] after the commit point.
fn close_untracked(l: &Ic3Local) -> bool {
    if !l.untracked_reads {
        return true;
    }
    l.ctx().close();
    if l.shared().direct_writers.none_since(l.writers_finished) {
        return true;
    }
    l.ctx().reopen();
    false
}

/// Ends [`close_untracked`] after the commit point.
fn reopen(l: &Ic3Local) {
    if l.untracked_reads {
        l.ctx().reopen();
    }
}

/// Whether the direct attempt writes a column that typed attempts read untracked.
fn writes_untracked(w: &Ic3Worker<'_>) -> bool {
    let shared = w.local.shared();
    w.writes.iter().any(|x| x.written() & shared.untracked(x.table) != 0)
}

/// Whether the typed attempt committing wrote: a piece's write left a writer's entry, or
/// the commit has writes (a held piece's, trailing ones) or accumulations to apply. Only a
/// commit that wrote passes the commit phases between `Validated` and `Acknowledging`.
fn typed_wrote(w: &Ic3Worker<'_>) -> bool {
    !w.writes.is_empty()
        || !w.local.deferred.is_empty()
        // SAFETY: the entries stay in the pool until the attempt ends.
        || w.local.entries.iter().any(|&(_, e, _)| unsafe { e.as_ref() }.writer())
}

/// Commits the transaction with its held last piece, whose items are locked and validated and
/// name nobody to depend on (see [`commit_piece`]): installs the writes (leaving no entry),
/// applies the deferred accumulations, logs, passes the commit point and unlocks. The entries
/// of its earlier pieces leave as the attempt ends.
fn commit_held(w: &mut Ic3Worker<'_>) {
    // Locked and validated by `commit_piece`.
    let wrote = typed_wrote(w);
    if wrote {
        w.ctx.phase(CommitPhase::Locked);
    }
    w.ctx.phase(CommitPhase::Validated);
    w.local.ctx().committing();
    take_epoch(w);
    install_locked(w);
    if !w.local.deferred.is_empty() {
        apply_deferred(w);
    }
    log_commit(w);
    if wrote {
        w.ctx.phase(CommitPhase::Logged);
    }
    if let Some(h) = &mut w.ctx.history {
        h.serial_point_at(epoch_ts(w.local.epoch, now_ns()));
        h.committed();
    }
    // The commit point, under the locks: no reader sees the writes before it.
    w.local.ctx().commit();
    stamp_and_release(w);
    if wrote {
        w.ctx.phase(CommitPhase::Installed);
    }
    w.clear_sets();
    let l = &mut w.local;
    l.sub_from = (0, 0, 0);
    l.held = None;
    l.open = None;
}

/// Whether the transaction's last merged piece, just ended, can be held to commit with the
/// transaction ([`commit_piece`]): its dependencies are all over, none of the records or
/// buckets it touched has an entry or is locked now, and every record it read still has the
/// version read. Where nobody else is about, entries would only be appended to be removed
/// again at the commit; a held piece that fails its validation at the commit costs the
/// transaction a retry rather than the piece one, so a piece that meets anyone now (or read
/// what changed while it waited after its execution, §4.1) commits as usual.
fn held_uncontended(w: &Ic3Worker<'_>) -> bool {
    let storage = w.ctx.storage;
    let shared = w.local.shared();
    let quiet = |rec: &Ic3Record| rec.load() & (LISTED | LOCK) == 0;
    let bucket = |t: TableId, key: u64| {
        quiet(bucket_rec(shared, t, storage.table(t).buckets.slot_of(key) as u32))
    };
    w.local.deps.iter().all(TxnRef::over)
        && w.reads.iter().all(|r| {
            let now = row_rec(w, r.table, r.rid).load();
            now & (LISTED | LOCK) == 0 && same_version(now, r.word)
        })
        && w.writes.iter().all(|x| match x.kind {
            WriteKind::Insert | WriteKind::InsertDeleted => bucket(x.table, x.key),
            WriteKind::Update => quiet(row_rec(w, x.table, x.rid)),
            WriteKind::Delete | WriteKind::Revive => {
                quiet(row_rec(w, x.table, x.rid)) && bucket(x.table, x.key)
            }
        })
        && w.phantoms.iter().all(|p| quiet(bucket_rec(shared, p.table, p.slot)))
}

/// Learns the transactions the open merged piece's operations of the sub-piece that just ended
/// make it depend on (what its commit would append after: see `record::Locked::dependencies`),
/// so that its next sub-piece waits for them (§4.5: the transitional graph tracks dependencies
/// at each sub-piece's end). Nothing is appended: the merged piece's operations stay invisible
/// to others until it commits, which [`covered`] then checks. A record being inserted by
/// another transaction is passed over (its lock is held until that insert's piece commits):
/// a dependency found there at the commit is one no wait covered.
fn track(w: &mut Ic3Worker<'_>) {
    let me = w.local.txn.expect("a typed attempt is running");
    let storage = w.ctx.storage;
    let shared = w.local.shared();
    let (r0, w0, p0) = w.local.sub_from;
    let deps = &mut w.local.deps;
    let row = |t: TableId, rid: RowId| storage.table(t).rows.get(rid).header;
    for r in &w.reads[r0..] {
        if let Some(g) = row(r.table, r.rid).lock_unless_inserting() {
            g.dependencies(me, false, |d| deps.push(d));
        }
    }
    for x in &w.writes[w0..] {
        let own = matches!(x.kind, WriteKind::Insert | WriteKind::InsertDeleted);
        if !own {
            if let Some(g) = row(x.table, x.rid).lock_unless_inserting() {
                g.dependencies(me, true, |d| deps.push(d));
            }
        }
        if x.kind != WriteKind::Update {
            let slot = storage.table(x.table).buckets.slot_of(x.key) as u32;
            bucket_rec(shared, x.table, slot).lock().dependencies(me, true, |d| deps.push(d));
        }
    }
    for p in &w.phantoms[p0..] {
        bucket_rec(shared, p.table, p.slot).lock().dependencies(me, false, |d| deps.push(d));
    }
    w.local.sub_from = (w.reads.len(), w.writes.len(), w.phantoms.len());
}

/// Whether every transaction the commit of a merged piece of several sub-pieces comes to depend
/// on through an operation of an earlier sub-piece than its last ([`Item::early`]) is one the
/// attempt knew of before its later sub-pieces waited ([`track`]), or one that is over. A
/// dependency that no wait covered would let a transaction on the finer graph overtake it in
/// a later sub-piece (the dependency cycle of §4.5's Fig. 9): the merged piece fails its
/// validation instead. The items are locked.
fn covered(w: &Ic3Worker<'_>) -> bool {
    let me = w.local.txn.expect("a typed attempt is running");
    let shared = w.local.shared();
    let deps = &w.local.deps;
    w.local.items.iter().filter(|it| it.early && it.hold != Hold::Skipped).all(|it| {
        let rec = match it.target() {
            Target::Row(t, rid) => row_rec(w, t, rid),
            Target::Bucket(t, slot) => bucket_rec(shared, t, slot),
        };
        // SAFETY: the commit holds the lock (`lock` took it and kept it, or our insert's).
        let g = unsafe { Locked::resume(rec, it.word) };
        let mut ok = true;
        g.dependencies(me, it.write.is_some(), |d| ok &= deps.contains(&d) || d.over());
        g.keep();
        ok
    })
}

/// Whether every table the open merged piece touched is one its template pieces declare,
/// every table it wrote one they declare written, and every record it read (tracked) of a
/// table they declare with C-edges: the table-level analysis covers nothing else. Its writes
/// change only columns some analysed template declares written: the others are read
/// untracked. Neither its reads nor its writes touch the columns accumulations are deferred
/// into, which go in under uncommitted writers ([`apply_deferred`]). (The engine checks
/// templates per column too, `Capabilities::templates`; this check holds whatever the
/// caller's checks.) Trailing operations (after a held last piece) must be on tables no
/// analysed template touches, as for a transaction whose last piece committed.
fn declared(w: &Ic3Worker<'_>) -> bool {
    let (Mode::Typed(t), Some(m)) = (w.local.mode, w.local.open) else { return true };
    if w.local.deferred_reads {
        return false;
    }
    let tables = &w.local.plan(t).pieces[m].tables;
    let shared = w.local.shared();
    let analysed = &shared.analysed_tables;
    w.local.items.iter().all(|it| {
        let (Target::Row(table, _) | Target::Bucket(table, _)) = it.target();
        if it.trailing {
            return !analysed.get(table.index()).copied().unwrap_or(false);
        }
        let Some(d) = tables.iter().find(|d| d.table == table) else { return false };
        match it.write {
            // A bucket's: an insert or delete, whose row's item is checked.
            Some(_) if it.is_bucket() => d.write,
            Some(j) => {
                let x = &w.writes[j as usize];
                d.write
                    && x.written() & shared.untracked(table) == 0
                    && (x.written() | x.buffered()) & shared.deferred(table) == 0
            }
            // A phantom read: no analysed template inserts or deletes where none writes.
            None if it.is_bucket() => true,
            None => d.tracked,
        }
    })
}

/// Appends the committed attempt's writes to the log (the database logs and the attempt
/// wrote), each key once with its last image, under a commit stamp by Silo's rule: above the
/// worker's last stamp and the stamps of the records it wrote, at least its commit epoch's
/// (`common::stamp_after`). Without a log record the commit stamp is the epoch's first.
///
/// Why this is the durability contract's order: a transaction that read or overwrote this
/// one's writes commits after this one ended (it depends on it, or, running directly, it
/// reads and overwrites committed data only), so it logs after this one read the log epoch,
/// in the same or a later one. The records' stamps are the latest committed writers' (each
/// sets its stamp as it leaves the lists, and a writer commits after the writers before it
/// ended), so a key's stamps grow in its commit order.
fn log_commit(w: &mut Ic3Worker<'_>) {
    if w.ctx.log.is_none() || w.local.redo.is_empty() {
        w.local.stamp = stamp_after(0, w.local.epoch);
        return;
    }
    let storage = w.ctx.storage;
    let l = &mut w.local;
    // (Accumulations under uncommitted writers keep their stamps in the writers' entries.)
    let mut max = w.ctx.last_stamp.max(l.stamp_floor);
    for r in &l.redo {
        max = max.max(storage.table(r.table).rows.get(r.rid).header.stamp());
    }
    // Each key once: its last write (a later piece may write it again), with the columns all
    // its writes changed. The sort is stable.
    l.redo.sort_by_key(|r| (r.table.0, r.key));
    let mut kept = 0;
    let mut cols = 0;
    for i in 0..l.redo.len() {
        let mut r = l.redo[i];
        cols |= r.cols;
        if l.redo.get(i + 1).is_none_or(|n| (n.table, n.key) != (r.table, r.key)) {
            r.cols = cols;
            cols = 0;
            l.redo[kept] = r;
            kept += 1;
        }
    }
    l.redo.truncate(kept);
    let stamp = stamp_after(max, l.epoch);
    let log = w.ctx.log.as_mut().expect("checked above");
    log.begin(stamp, kept as u32);
    let shared = l.shared();
    for r in &l.redo {
        match r.image {
            // A table with deferred accumulations: the image may hold another transaction's
            // pending write of another column (an accumulation's image is the row as it
            // stands), or a stale accumulated column (a writer's image, taken at its piece
            // commit, predates the accumulations that went in under it). Only the columns
            // written reach the log (`shares_words` keeps them in words of their own).
            Some((off, len)) if shared.deferred(r.table) != 0 => {
                let image = &l.redo_images[off as usize..(off + len) as usize];
                let p = &storage.table(r.table).projection;
                log.put_image_only_cols(r.table.0, stamp, r.key, image, p, r.cols);
            }
            Some((off, len)) => {
                let image = &l.redo_images[off as usize..(off + len) as usize];
                let p = &storage.table(r.table).projection;
                log.put_image_cols(r.table.0, stamp, r.key, image, p, r.cols);
            }
            None => log.delete(r.table.0, stamp, r.key),
        }
    }
    w.ctx.log_epoch = log.end();
    w.ctx.last_stamp = stamp;
    l.stamp = stamp;
}

/// Takes the running attempt's commit epoch: the storage epoch, read between two SeqCst
/// fences (see the module docs' commit epochs).
fn take_epoch(w: &mut Ic3Worker<'_>) -> u64 {
    // SeqCst fences: the first orders the epoch's load after what the commit stored before
    // (its locks, a typed attempt's `COMMITTING`), the second before the loads of the
    // validation after it; paired with each other across commits (module docs).
    fence(Ordering::SeqCst);
    let epoch = w.ctx.storage.epochs().global_seqcst();
    fence(Ordering::SeqCst);
    w.local.epoch = epoch;
    epoch
}

/// Keeps, for snapshot readers, the committed value of row `rid` of table `t` (locked by the
/// commit, word `word`) before a commit of the attempt's epoch writes it in place: a direct
/// install or an accumulation (the committed value is the payload: no other writer is listed).
/// Where the attempt's own entry is listed, its payload is the attempt's earlier write, and
/// the entry keeps the committed value until it leaves ([`OccProtocol::end`]).
fn keep_in_place(w: &mut Ic3Worker<'_>, t: TableId, rid: RowId, word: u64) {
    if w.ctx.snapshot_every == 0 || word & PENDING != 0 {
        return;
    }
    let row = w.ctx.storage.table(t).rows.get(rid);
    let epoch = stamp_epoch(row.header.stamp());
    let value = if word & ABSENT != 0 { Kept::Absent } else { Kept::Row(row) };
    w.ctx.keep_for_snapshots(t, rid, value, word & VALUE, epoch, w.local.epoch);
}

/// Validates the items [`lock`] took against committed data (a typed commit's trailing
/// operations and the rows of its deferred accumulations); `false`, nothing held, when the
/// validation fails.
fn lock_held_valid(w: &mut Ic3Worker<'_>) -> bool {
    if matches!(validate(w, true), Verdict::Valid) {
        return true;
    }
    release(w, false);
    false
}

/// Installs every write into its locked item (keeping the locks) and retires the records the
/// writes leave absent: for a commit that can no longer fail, which leaves no entry and has
/// taken its epoch.
fn install_locked(w: &mut Ic3Worker<'_>) {
    let storage = w.ctx.storage;
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        let (Target::Row(t, rid), Some(j)) = (it.target(), it.write) else { continue };
        let rec = storage.table(t).rows.get(rid).header;
        // SAFETY: `lock` took this lock (or it is our insert's) and kept it.
        let mut g = unsafe { Locked::resume(rec, it.word) };
        keep_in_place(w, t, rid, g.word());
        install(w, j as usize, &mut g);
        w.local.items[i].word = g.keep();
        let x = w.writes[j as usize];
        if !x.kind.present() {
            w.ctx.retire(t, x.key, rid);
        }
    }
}

/// Gives the rows a direct unit wrote the attempt's commit stamp, then unlocks everything the
/// unit locked. A row where the attempt's own entry is listed gets it as the entry leaves
/// (see [`keep_in_place`]).
fn stamp_and_release(w: &mut Ic3Worker<'_>) {
    debug_assert_ne!(w.local.stamp, 0, "the commit took its stamp");
    for i in 0..w.local.items.len() {
        let it = w.local.items[i];
        let Target::Row(t, rid) = it.target() else { continue };
        let pending = it.word & PENDING != 0;
        if !it.adds && (it.write.is_none() || pending) {
            continue;
        }
        // SAFETY: the unit still holds the lock (taken and kept by `lock`).
        let mut g = unsafe { Locked::resume(row_rec(w, t, rid), it.word) };
        if pending {
            // An accumulation under listed writers: kept in their entries until they leave.
            g.keep_accumulation_stamp(w.local.stamp);
        } else {
            g.set_stamp(w.local.stamp);
        }
        w.local.items[i].word = g.keep();
    }
    release(w, true);
    w.local.inserting.clear();
}

/// Applies the deferred accumulations to their rows, which the commit holds locked among its
/// items (and present: `validate` checked), each as a fresh committed version reported to the
/// history with its one column, and kept for the redo record.
///
/// Why it is serializable: the analysis defers accumulations only into columns that no
/// analysed template reads or writes otherwise (nor inserts or deletes in the table), so the
/// pending transactions neither saw nor miss anything of the accumulation, and it need not
/// wait for them. It goes in after the transaction's dependencies ended and stays locked until
/// its commit point: the accumulations into a row are applied in an order that every
/// dependency path between their transactions agrees with (a transaction that depends on
/// another commits after it), and a reader of committed data sees all of the transaction's
/// writes or none.
///
/// Under uncommitted writers of the row's other columns it goes into the payload and into
/// their before-images (`record::Locked::accumulate`): a rollback keeps it, and so does the
/// committed value, which it becomes the version of (the first uncommitted writer's history
/// write is rebased on it when that writer commits: see [`OccProtocol::end`]). Its commit
/// stamp stays in their entries until they leave, and the next writes of the row take stamps
/// above it ([`log_commit`]). That needs the accumulated columns in payload words of their own
/// (installs and log records copy whole words; `Ic3::new` checks) and no snapshots (a writer
/// past its commit point but still listed would have its kept value changed; with snapshots
/// accumulations are deferred by rows, where no template writes the row).
fn apply_deferred(w: &mut Ic3Worker<'_>) {
    let storage = w.ctx.storage;
    for i in 0..w.local.deferred.len() {
        let d = w.local.deferred[i];
        let tbl = storage.table(d.table);
        let row = tbl.rows.get(d.rid);
        let at = item_index(&w.local.items, d.table, d.rid);
        // SAFETY: the commit took this lock and kept it (`lock`).
        let mut g = unsafe { Locked::resume(row.header, w.local.items[at].word) };
        debug_assert!(g.word() & ABSENT == 0, "present (validated)");
        debug_assert!(
            g.word() & PENDING == 0 || w.ctx.snapshot_every == 0,
            "with snapshots no analysed template writes the row"
        );
        keep_in_place(w, d.table, d.rid, g.word());
        let l = &mut w.local;
        l.row_buf.resize(row.len(), 0);
        row.read_into(&mut l.row_buf);
        let fits = d.acc.apply(&mut l.row_buf);
        debug_assert!(fits, "checked when deferred");
        l.stamp_floor = l.stamp_floor.max(g.accumulation_stamp());
        let v = l.ctx().next_version();
        let (p, cols) = (&tbl.projection, d.acc.columns());
        let prev = match g.accumulate(&row, p, cols, &l.row_buf, &d.acc, v) {
            Some(prev) => prev,
            None => {
                row.write_cols_from(&l.row_buf, p, cols);
                let prev = version(g.word());
                g.set_version(v);
                prev
            }
        };
        if w.ctx.log.is_some() {
            let off = l.redo_images.len();
            l.redo_images.extend_from_slice(&l.row_buf);
            let image = Some((off as u32, row.len() as u32));
            let cols = d.acc.columns();
            l.redo.push(Redo { table: d.table, key: d.key, rid: d.rid, image, cols });
        }
        if let Some(h) = &mut w.ctx.history {
            let (v, prev) = (u128::from(v), u128::from(prev));
            h.write_cols(d.table.0, d.key, v, prev, true, d.acc.columns());
        }
        w.local.items[at].word = g.keep();
    }
}

/// Whether every gathered item is on a table that no analysed template touches (the unit can
/// then commit directly without the analysis' constraints: no analysed piece conflicts with it).
fn outside_analysis(w: &Ic3Worker<'_>) -> bool {
    let tables = &w.local.shared().analysed_tables;
    let analysed = |table: TableId| tables.get(table.index()).copied().unwrap_or(false);
    w.local.items.iter().all(|it| match it.target() {
        Target::Row(table, _) | Target::Bucket(table, _) => !analysed(table),
    })
}

/// Whether every value a read-only direct attempt read is still its record's committed value,
/// and every phantom bucket it covered unchanged, checked record by record without holding
/// the records together: each value was committed when read and is when checked, and a
/// record's committed version only moves forward, so each was committed all along in between,
/// and all of them at once just after the last read, where the history's serialization point
/// goes (the reasoning of Silo's read validation; a read-write attempt locks its items
/// instead, to install its writes at one instant). A record with pending writers or locked is
/// judged under its lock (a piece commit or a list leave holds it briefly); one locked while
/// being inserted by another transaction stays absent in committed data until that commits,
/// and its word changes when the insert's piece commits (a spurious failure, never a missed
/// change). A record locked and absent that the attempt did not find being inserted is a
/// revive committing: the attempt fails.
fn reads_committed_now(w: &mut Ic3Worker<'_>) -> bool {
    if w.ctx.history.is_some() {
        // Its epoch serves the history's time line only (it writes nothing).
        let epoch = take_epoch(w);
        if let Some(h) = &mut w.ctx.history {
            h.serial_point_at(epoch_ts(epoch, now_ns()));
        }
    }
    let inserting = &w.local.inserting;
    let reads_ok = w.reads.iter().all(|r| {
        let rec = row_rec(w, r.table, r.rid);
        let mut now = rec.load();
        if now & (LOCK | PENDING) != 0 {
            now = match rec.lock_unless_inserting() {
                Some(g) => g.committed_word(),
                None if inserting.iter().any(|&(t, rid, _)| t == r.table && rid == r.rid) => {
                    rec.load()
                }
                None => return false,
            };
        }
        same_version(now, r.word)
    });
    reads_ok && phantoms_unchanged(w)
}

/// Commits an attempt that runs directly (see the module docs): at once, leaving no entry. A
/// read-only one validates without locking ([`reads_committed_now`]).
fn commit_direct(w: &mut Ic3Worker<'_>) -> Result<(), Abort> {
    if w.writes.is_empty() {
        if !reads_committed_now(w) {
            w.rollback();
            return Err(Abort::new(AbortReason::ReadValidation));
        }
        if let Some(h) = &mut w.ctx.history {
            h.committed();
        }
        w.ctx.phase(CommitPhase::Validated);
        w.finish(true);
        return Ok(());
    }
    let shared = w.local.shared();
    if !writes_untracked(w) {
        return commit_direct_writes(w);
    }
    shared.direct_writers.enter(&shared.contexts);
    let done = commit_direct_writes(w);
    shared.direct_writers.leave();
    done
}

/// Locks, validates and installs a direct attempt's writes ([`commit_direct`]).
fn commit_direct_writes(w: &mut Ic3Worker<'_>) -> Result<(), Abort> {
    gather(w);
    if !lock(w) {
        w.rollback();
        return Err(Abort::new(AbortReason::ReadValidation));
    }
    w.ctx.phase(CommitPhase::Locked);
    // The epoch before the validation (see the module docs' commit epochs).
    let epoch = take_epoch(w);
    if !matches!(validate(w, true), Verdict::Valid) {
        release(w, false);
        w.rollback();
        return Err(Abort::new(AbortReason::ReadValidation));
    }
    w.ctx.phase(CommitPhase::Validated);
    if let Some(h) = &mut w.ctx.history {
        h.serial_point_at(epoch_ts(epoch, now_ns()));
    }
    install_locked(w);
    if let Some(h) = &mut w.ctx.history {
        h.committed();
    }
    log_commit(w);
    w.ctx.phase(CommitPhase::Logged);
    stamp_and_release(w);
    w.ctx.phase(CommitPhase::Installed);
    w.finish(true);
    Ok(())
}

/// Commits open merged piece `m` of type `t` where no declared piece can run again (its last
/// declared piece was skipped, or the transaction commits): waits first if it waits after
/// execution, and fails the attempt when validation fails. `Ok(true)` when it was a held last
/// piece that committed the transaction with it.
fn commit_last(w: &mut Ic3Worker<'_>, t: usize, m: usize) -> Result<bool, Abort> {
    if waits_after(&w.local, t, m) {
        wait_phase(&mut w.local, t, m, 0)?;
    }
    match commit_piece(w) {
        Verdict::Valid => {
            w.local.open = None;
            Ok(false)
        }
        Verdict::Committed => Ok(true),
        Verdict::Undeclared => Err(Abort::new(AbortReason::TemplateViolation)),
        Verdict::Doomed(d) => {
            // Run again only once the doomed writer has rolled back: until it has, every
            // attempt would find it again (a retry loop without backoff would spin on it,
            // keeping it off the core it needs to roll back).
            wait_out_doomed(w, d)?;
            Err(Abort::new(AbortReason::ReadValidation))
        }
        Verdict::Stale => Err(Abort::new(AbortReason::ReadValidation)),
    }
}

/// Waits, holding no lock, until the doomed transaction `d` (a [`Verdict::Doomed`]) is over;
/// a cascading abort if this attempt is doomed meanwhile.
fn wait_out_doomed(w: &Ic3Worker<'_>, d: TxnRef) -> Result<(), Abort> {
    let me = w.local.txn.expect("a typed attempt is running");
    d.wait(w.local.shared().options.wait, || d.over() || me.doomed());
    if me.doomed() {
        return Err(cascade());
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
mod tests {
    use super::super::Ic3;
    use super::Ic3Worker;
    use crate::engine::{
        AccessMode, Checks, Database, DbOptions, Piece, PieceEnd, TableAccess, Tx, TxnType, Worker,
        ALL_COLUMNS,
    };
    use crate::error::{Abort, AbortReason};
    use crate::storage::{TableId, TableSpec};

    const A: TableId = TableId(0);
    const B: TableId = TableId(1);
    const fn w(t: TableId) -> TableAccess {
        TableAccess { table: t, mode: AccessMode::Write, columns: ALL_COLUMNS }
    }
    const fn r(t: TableId) -> TableAccess {
        TableAccess { table: t, mode: AccessMode::Read, columns: ALL_COLUMNS }
    }
    /// `AB`: writes table A, then table B (each piece conflicts with its twin only: case 2).
    static AB: [Piece; 2] =
        [Piece { name: "a", accesses: &[w(A)] }, Piece { name: "b", accesses: &[w(B)] }];
    /// `RA`: reads table A only (left out of the analysis: it runs directly).
    static RA: [Piece; 1] = [Piece { name: "a", accesses: &[r(A)] }];
    static TYPES: [TxnType; 2] =
        [TxnType { name: "AB", pieces: &AB }, TxnType { name: "RA", pieces: &RA }];
    const K: u64 = 1;
    /// A table no template names.
    const C: TableId = TableId(2);
    fn c_table() -> TableSpec {
        TableSpec::new("c", 8, 16)
    }

    fn db(opts: &[(&str, &str)]) -> Database<Ic3> {
        db_of(opts, &TYPES)
    }

    fn db_of(opts: &[(&str, &str)], types: &'static [TxnType]) -> Database<Ic3> {
        use crate::engine::ProtocolOptions;
        let pairs: Vec<(String, String)> =
            opts.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        let tables = [TableSpec::new("a", 8, 16), TableSpec::new("b", 8, 16)];
        let db = Database::<Ic3>::builder(&[tables[0].clone(), tables[1].clone(), c_table()])
            .options(DbOptions { max_workers: 4, ..Default::default() })
            .protocol_options(super::super::Ic3Options::from_pairs(&pairs).unwrap())
            .txn_types(types)
            .build()
            .unwrap();
        {
            let mut l = db.worker().unwrap();
            l.begin();
            for t in [A, B, C] {
                assert!(l.insert(t, K, &0u64.to_le_bytes()).unwrap());
            }
            l.commit().unwrap();
        }
        db
    }

    fn value(bytes: &[u8]) -> u64 {
        u64::from_le_bytes(bytes.try_into().unwrap())
    }

    /// Adds `by` to `key` of `t`, returning the value it found.
    fn add<W: Worker>(tx: &mut Tx<'_, W>, t: TableId, by: u64) -> Result<u64, Abort> {
        let seen = tx.read(t, K, value)?.expect("loaded");
        assert!(tx.write(t, K, &(seen + by).to_le_bytes())?);
        Ok(seen)
    }

    fn committed(db: &Database<Ic3>, t: TableId) -> u64 {
        let mut w = db.worker().unwrap();
        w.begin();
        let v = w.read(t, K, value).unwrap().unwrap();
        w.commit().unwrap();
        v
    }

    /// Case 2: T2 overwrites T1's piece on A, so it depends on T1; its piece on B conflicts
    /// with T1's piece on B, so it waits for T1's to commit, and always builds on it (T2's
    /// piece on B sees 1), whatever the interleaving of the threads. Both wait settings, with
    /// and without optimistic constraining.
    #[test]
    fn case_2_a_dependent_piece_waits_for_its_partner() {
        for opts in [&[][..], &[("optimistic", "off"), ("wait", "yield")][..]] {
            let db = db(opts);
            let (tx2, rx2) = std::sync::mpsc::channel();
            std::thread::scope(|s| {
                let mut t1 = db.worker().unwrap();
                t1.typed(0);
                t1.begin();
                let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
                assert_eq!(tx.piece(0, |tx| add(tx, A, 1)).unwrap(), 0);
                let db = &db;
                let t2 = s.spawn(move || {
                    let mut t2 = db.worker().unwrap();
                    t2.typed(0);
                    t2.begin();
                    let mut tx = Tx::new(&mut t2, &TYPES[0], Checks::default());
                    let a = tx.piece(0, |tx| add(tx, A, 10)).unwrap();
                    tx2.send(()).unwrap();
                    let b = tx.piece(1, |tx| add(tx, B, 10)).unwrap();
                    t2.commit().unwrap();
                    (a, b)
                });
                // T2 has committed its piece on A after T1's: it depends on T1.
                rx2.recv().unwrap();
                assert_eq!(tx.piece(1, |tx| add(tx, B, 1)).unwrap(), 0);
                t1.commit().unwrap();
                assert_eq!(t2.join().unwrap(), (1, 1), "T2 read T1's A and waited for its B");
            });
            assert_eq!((committed(&db, A), committed(&db, B)), (11, 11));
        }
    }

    /// `BA`: writes table B, then table A (with `AB`, IC3's Figure 9: each merges into one
    /// piece).
    static BA: [Piece; 2] =
        [Piece { name: "b", accesses: &[w(B)] }, Piece { name: "a", accesses: &[w(A)] }];
    static FIG9: [TxnType; 3] = [
        TxnType { name: "AB", pieces: &AB },
        TxnType { name: "RA", pieces: &RA },
        TxnType { name: "BA", pieces: &BA },
    ];

    /// Online analysis (§4.5, Figs. 9-11): T1 runs `AB` as two pieces on the graph of the mix
    /// without `BA`; adding `BA` publishes the transitional graph, on which T2 (`AB` too) runs
    /// one merged piece of two sub-pieces. T2's first sub-piece overwrites T1's piece on A;
    /// before its second sub-piece it learns that dependency and waits for T1's piece on B,
    /// so it builds on it and commits at its first attempt (without the wait it would commit
    /// its B first and depend on T1 while T1 came to depend on it: a deadlock at both commits,
    /// here refused by T2's commit instead). The change waits for T1 to end before it
    /// publishes the new graph.
    #[test]
    #[allow(clippy::single_range_in_vec_init)] // vectors of sub-pieces
    fn a_transitional_sub_piece_waits_for_the_old_graphs_partner() {
        let db = db_of(&[], &FIG9);
        let bad = db.set_mix(&[0, 3]).unwrap_err().to_string();
        assert_eq!(bad, "set_mix: no transaction type 3 (the workload has 3)");
        db.set_mix(&[0, 1]).unwrap();
        let version = || db.protocol().shared.graphs.current().version;
        let shape = || super::super::graph::shape(db.protocol().shared.graphs.current());
        assert_eq!(version(), 2, "the transitional graph, then the mix's");
        assert_eq!(shape()[0], Some(vec![(0..1, vec![0..1]), (1..2, vec![1..2])]));
        let (tx2, rx2) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let mut t1 = db.worker().unwrap();
            t1.typed(0);
            t1.begin();
            let mut tx = Tx::new(&mut t1, &FIG9[0], Checks::default());
            assert_eq!(tx.piece(0, |tx| add(tx, A, 1)).unwrap(), 0);
            let db = &db;
            let change = s.spawn(move || db.set_mix(&[0, 1, 2]).unwrap());
            let start = std::time::Instant::now();
            while version() != 3 {
                assert!(
                    start.elapsed().as_secs() < 60,
                    "no transitional graph (deadlock detector)"
                );
                std::thread::yield_now();
            }
            assert_eq!(shape()[0], Some(vec![(0..2, vec![0..1, 1..2])]), "nested");
            assert_eq!(shape()[2], None, "the added type runs directly until the new graph");
            let t2 = s.spawn(move || {
                let mut t2 = db.worker().unwrap();
                t2.typed(0);
                t2.begin();
                let mut tx = Tx::new(&mut t2, &FIG9[0], Checks::default());
                let a = tx.piece(0, |tx| add(tx, A, 10)).unwrap();
                tx2.send(()).unwrap();
                let b = tx.piece(1, |tx| add(tx, B, 10)).unwrap();
                (a, b, t2.commit().map_err(|a| a.reason))
            });
            rx2.recv().unwrap();
            // (Time for T2 to reach its second sub-piece: how likely a missing wait shows.)
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(version(), 3, "T1 runs on the old graph: the change waits for it");
            assert_eq!(tx.piece(1, |tx| add(tx, B, 1)).unwrap(), 0);
            t1.commit().unwrap();
            assert_eq!(t2.join().unwrap(), (1, 1, Ok(())), "T2 read T1's A, waited for its B");
            change.join().unwrap();
        });
        assert_eq!(version(), 4);
        assert_eq!(shape()[0], Some(vec![(0..2, vec![0..2])]), "merged on the new graph");
        assert_eq!(shape()[2], Some(vec![(0..2, vec![0..2])]));
        assert_eq!((committed(&db, A), committed(&db, B)), (11, 11));
    }

    /// §4.4: T2 builds on T1's committed piece, T1 rolls back: T2's commit is a cascading
    /// abort and the value T1 overwrote is back.
    #[test]
    fn a_rollback_cascades_to_the_transactions_that_saw_it() {
        let db = db(&[]);
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.typed(0);
        t1.begin();
        Tx::new(&mut t1, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 5)).unwrap();
        t2.typed(0);
        t2.begin();
        let mut tx = Tx::new(&mut t2, &TYPES[0], Checks::default());
        assert_eq!(tx.piece(0, |tx| add(tx, A, 1)).unwrap(), 5, "T1's piece is visible");
        t1.abort();
        assert_eq!(t2.commit().map_err(|a| a.reason), Err(AbortReason::CascadingAbort));
        assert_eq!(committed(&db, A), 0, "both writes undone");
    }

    /// An untyped transaction reads committed data only: while a piece's write is pending it
    /// reads the value before it and commits (it serializes before the writer), but cannot
    /// overwrite it; once the writer has committed it reads and overwrites the writer's value.
    #[test]
    fn untyped_transactions_read_and_write_committed_data_only() {
        let db = db(&[]);
        let (mut t1, mut u) = (db.worker().unwrap(), db.worker().unwrap());
        t1.typed(0);
        t1.begin();
        Tx::new(&mut t1, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 5)).unwrap();
        u.begin();
        assert_eq!(u.read(A, K, value).unwrap(), Some(0), "the committed value");
        u.commit().unwrap();
        u.begin();
        assert_eq!(u.read(A, K, value).unwrap(), Some(0));
        assert!(u.write(A, K, &6u64.to_le_bytes()).unwrap());
        assert_eq!(u.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        t1.commit().unwrap();
        u.begin();
        assert_eq!(u.read(A, K, value).unwrap(), Some(5));
        assert!(u.write(A, K, &6u64.to_le_bytes()).unwrap());
        u.commit().unwrap();
        assert_eq!(committed(&db, A), 6);
    }

    /// Operations after a typed transaction's last piece commit with it, directly, when they
    /// touch only tables no analysed template names (a crash test's acknowledgement row), and
    /// are refused on an analysed table.
    #[test]
    fn operations_after_the_last_piece_are_allowed_only_outside_the_analysis() {
        let db = db(&[]);
        let mut t = db.worker().unwrap();
        t.typed(0);
        t.begin();
        Tx::new(&mut t, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 1)).unwrap();
        assert!(t.write(C, K, &7u64.to_le_bytes()).unwrap());
        t.commit().unwrap();
        assert_eq!((committed(&db, A), committed(&db, C)), (1, 7));
        t.typed(0);
        t.begin();
        Tx::new(&mut t, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 1)).unwrap();
        assert!(t.write(B, K, &7u64.to_le_bytes()).unwrap());
        assert_eq!(t.commit().map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
        assert_eq!((committed(&db, A), committed(&db, B)), (1, 0), "rolled back whole");
    }

    /// A piece that touches a table its template does not declare cannot commit, whatever the
    /// caller's checks (here none): the analysis does not cover it.
    #[test]
    fn an_undeclared_table_is_refused_at_the_piece_commit() {
        let db = db(&[]);
        let mut t = db.worker().unwrap();
        t.typed(0);
        t.begin();
        let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
        let wrote_b = tx.piece(0, |tx| add(tx, B, 1)).map_err(|a| a.reason);
        assert_eq!(wrote_b, Err(AbortReason::TemplateViolation), "piece 0 declares A only");
        t.abort();
        assert_eq!((committed(&db, A), committed(&db, B)), (0, 0));
    }

    /// The word of key `K`'s record in table `t`.
    fn word(db: &Database<Ic3>, t: TableId) -> u64 {
        let tbl = db.storage().table(t);
        let rid = tbl.index.get(K, &crate::storage::index::pin()).expect("loaded");
        tbl.rows.get(rid).header.load()
    }

    /// A last piece that meets nobody is held to commit with the transaction: it installs
    /// nothing and appends no entry when it ends, and the commit installs its writes under its
    /// locks (the earlier piece's entry leaves as usual). A held piece validates at the
    /// commit: a direct writer that changed what it read fails the whole attempt, and the
    /// earlier piece rolls back with it.
    #[test]
    fn an_uncontended_last_piece_commits_with_the_transaction() {
        use super::super::record::{same_version, LISTED, LOCK, PENDING};
        let db = db(&[]);
        let (mut t1, mut d) = (db.worker().unwrap(), db.worker().unwrap());
        t1.typed(0);
        t1.begin();
        let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
        tx.piece(0, |tx| add(tx, A, 1)).unwrap();
        assert_ne!(word(&db, A) & (LISTED | PENDING), 0, "an earlier piece leaves its entry");
        let b = word(&db, B);
        tx.piece(1, |tx| add(tx, B, 1)).unwrap();
        assert_eq!(word(&db, B), b, "held: nothing installed, no entry, no lock");
        t1.commit().unwrap();
        let now = word(&db, B);
        assert!(!same_version(now, b) && now & (LISTED | PENDING | LOCK) == 0, "{now:#x}");
        assert_eq!(word(&db, A) & (LISTED | PENDING | LOCK), 0, "the entry on A left");
        assert_eq!((committed(&db, A), committed(&db, B)), (1, 1));

        t1.typed(0);
        t1.begin();
        let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
        tx.piece(0, |tx| add(tx, A, 1)).unwrap();
        tx.piece(1, |tx| add(tx, B, 1)).unwrap();
        d.begin(); // untyped: writes committed data where no entry is
        assert!(d.write(B, K, &100u64.to_le_bytes()).unwrap());
        d.commit().expect("the held piece left no entry on B");
        assert_eq!(t1.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        assert_eq!((committed(&db, A), committed(&db, B)), (1, 100), "rolled back whole");
    }

    /// Operations after a held last piece commit with it when no analysed template touches
    /// their tables, and fail the attempt otherwise; a piece after the held one is refused.
    #[test]
    fn trailing_operations_commit_with_a_held_last_piece() {
        let db = db(&[]);
        let mut t = db.worker().unwrap();
        let run = |t: &mut Ic3Worker<'_>, then: TableId| {
            t.typed(0);
            t.begin();
            let mut tx = Tx::new(t, &TYPES[0], Checks::default());
            tx.piece(0, |tx| add(tx, A, 1)).unwrap();
            tx.piece(1, |tx| add(tx, B, 1)).unwrap();
            assert!(t.write(then, K, &7u64.to_le_bytes()).unwrap());
            t.commit().map_err(|a| a.reason)
        };
        run(&mut t, C).unwrap();
        assert_eq!((committed(&db, A), committed(&db, B), committed(&db, C)), (1, 1, 7));
        assert_eq!(run(&mut t, A), Err(AbortReason::TemplateViolation));
        assert_eq!((committed(&db, A), committed(&db, B)), (1, 1), "rolled back whole");
        t.typed(0);
        t.begin();
        let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
        tx.piece(0, |tx| add(tx, A, 1)).unwrap();
        tx.piece(1, |tx| add(tx, B, 1)).unwrap();
        let again = tx.piece(1, |tx| add(tx, B, 1)).map_err(|a| a.reason);
        assert_eq!(again, Err(AbortReason::TemplateViolation));
        t.rollback();
    }

    /// A piece that has committed cannot run again (a loop over a piece): a dependent that
    /// waited for it would meet it again. Going back to an earlier piece is refused too.
    #[test]
    fn a_committed_piece_cannot_run_again() {
        let db = db(&[]);
        let mut t = db.worker().unwrap();
        t.typed(0);
        t.begin();
        let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
        tx.piece(0, |tx| add(tx, A, 1)).unwrap();
        let again = tx.piece(0, |tx| add(tx, A, 1)).map_err(|a| a.reason);
        assert_eq!(again, Err(AbortReason::TemplateViolation), "a loop over a piece");
        t.abort();
        t.typed(0);
        t.begin();
        let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
        tx.piece(0, |tx| add(tx, A, 1)).unwrap();
        tx.piece(1, |tx| add(tx, B, 1)).unwrap();
        let back = tx.piece(0, |tx| add(tx, A, 1)).map_err(|a| a.reason);
        assert_eq!(back, Err(AbortReason::TemplateViolation), "back to an earlier piece");
        t.abort();
        assert_eq!((committed(&db, A), committed(&db, B)), (0, 0));
    }

    /// A read-only type is left out of the analysis and runs directly, like an untyped one: it
    /// reads the committed values past a pending writer without waiting, and fails validation
    /// when the writer commits before it does (what it read is no longer committed).
    /// A commit's lock order packs the table and row id into one word: a table too large for
    /// it is refused at set-up, with a message naming it.
    #[test]
    fn a_table_too_large_for_the_lock_order_is_refused() {
        let big = TableSpec::new("huge", 8, 16).with_capacity(super::MAX_ROWS + 1);
        let err = Database::<Ic3>::builder(&[big]).build().err().expect("refused");
        assert_eq!(
            err.to_string(),
            format!(
                "ic3: table huge holds up to {} rows, more than the {} a commit's lock order \
                 can name",
                super::MAX_ROWS + 1,
                super::MAX_ROWS
            )
        );
    }

    /// More workers than a version can name the context of are refused at set-up.
    #[test]
    fn more_workers_than_contexts_a_version_names_are_refused() {
        let max = super::super::txn::MAX_CONTEXTS;
        let opts = DbOptions { max_workers: max + 1, ..Default::default() };
        let err = Database::<Ic3>::builder(&[c_table()]).options(opts).build().err();
        assert_eq!(
            err.expect("refused").to_string(),
            format!(
                "ic3: at most {max} workers, one transaction context each (max_workers is {})",
                max + 1
            )
        );
        let opts = DbOptions { max_workers: max, ..Default::default() };
        assert!(Database::<Ic3>::builder(&[c_table()]).options(opts).build().is_ok());
    }

    /// A read-only direct attempt validates record by record without locks: a record another
    /// transaction is inserting (its lock held until its piece commits) is judged by its word,
    /// absent in committed data; once the insert is committed, the absence read is stale.
    #[test]
    fn a_read_only_direct_attempt_validates_without_locking() {
        let db = db(&[]);
        let (mut t1, mut ro) = (db.worker().unwrap(), db.worker().unwrap());
        const K2: u64 = 2;
        t1.typed(0);
        t1.begin();
        t1.piece_begin(0).unwrap();
        assert!(t1.insert(A, K2, &7u64.to_le_bytes()).unwrap());
        let read_k2 = |ro: &mut Ic3Worker<'_>| {
            ro.begin();
            ro.read(A, K2, value).unwrap()
        };
        assert_eq!(read_k2(&mut ro), None, "being inserted: absent");
        ro.commit().expect("the insert's lock does not fail nor block the validation");
        assert_eq!(t1.piece_end(0, Ok(())).unwrap(), PieceEnd::Done);
        assert_eq!(read_k2(&mut ro), None, "inserted by a pending transaction: absent");
        ro.commit().expect("a pending insert is not committed data");
        assert_eq!(read_k2(&mut ro), None);
        t1.commit().unwrap();
        assert_eq!(ro.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        assert_eq!(read_k2(&mut ro), Some(7));
        ro.commit().unwrap();
    }

    /// [`db`] keeping snapshots every 2 epochs, the epochs advanced by the test ([`tick`]).
    fn db_snapshots() -> Database<Ic3> {
        use crate::engine::ProtocolOptions;
        let pairs = [("snapshot-epochs".to_string(), "2".to_string())];
        let tables = [TableSpec::new("a", 8, 16), TableSpec::new("b", 8, 16), c_table()];
        let epoch_interval = std::time::Duration::from_secs(3600);
        let db = Database::<Ic3>::builder(&tables)
            .options(DbOptions { max_workers: 4, epoch_interval, ..Default::default() })
            .protocol_options(super::super::Ic3Options::from_pairs(&pairs).unwrap())
            .txn_types(&TYPES)
            .build()
            .unwrap();
        let mut l = db.worker().unwrap();
        l.begin();
        for t in [A, B] {
            assert!(l.insert(t, K, &0u64.to_le_bytes()).unwrap());
        }
        l.commit().unwrap();
        drop(l);
        db
    }

    /// Advances the global epoch `n` times and publishes the snapshot boundary, as the epoch
    /// thread does.
    fn tick(db: &Database<Ic3>, n: usize) {
        let e = db.storage().epochs();
        for _ in 0..n {
            e.advance();
        }
        e.snapshots.refresh(e);
    }

    /// What a snapshot reader (typed `RA`: it runs directly all the same) finds of `keys` of
    /// `t`, with its boundary.
    fn snapshot(db: &Database<Ic3>, keys: &[(TableId, u64)]) -> (u64, Vec<Option<u64>>) {
        let mut r = db.worker().unwrap();
        r.typed(1);
        r.begin_read_only();
        let seen = keys.iter().map(|&(t, k)| r.read(t, k, value).unwrap()).collect();
        let b = r.ctx.snapshot;
        assert_eq!(r.write(A, K, &[0; 8]).map_err(|a| a.reason), Err(AbortReason::ReadOnlyWrite));
        r.abort();
        (b, seen)
    }

    /// Snapshot readers (the paper's footnote: as Silo does) read the state of every commit
    /// below their boundary: not a pending piece's writes (the before-image of the first
    /// writer listed), not a transaction that committed at the boundary or later (the values
    /// its first writes replaced, kept as its entries left; and those its held last piece
    /// installed, kept as it wrote them), not a direct commit's (kept as it wrote); a later
    /// boundary shows them all. An insert and a delete of a pending transaction, likewise.
    #[test]
    fn snapshot_readers_read_below_pending_and_later_writers() {
        let db = db_snapshots();
        const K2: u64 = 2;
        let keys = [(A, K), (B, K), (A, K2)];
        tick(&db, 1);
        assert_eq!(snapshot(&db, &keys), (2, vec![Some(0), Some(0), None]));
        // T1 (epoch 2): A += 1 and an insert of K2 in its first piece, which commits and
        // lists it; B += 1 in its last piece, held and committed with the transaction.
        let mut t1 = db.worker().unwrap();
        t1.typed(0);
        t1.begin();
        t1.piece_begin(0).unwrap();
        assert!(t1.write(A, K, &1u64.to_le_bytes()).unwrap());
        assert!(t1.insert(A, K2, &5u64.to_le_bytes()).unwrap());
        assert_eq!(t1.piece_end(0, Ok(())).unwrap(), PieceEnd::Done);
        assert_eq!(snapshot(&db, &keys), (2, vec![Some(0), Some(0), None]), "pending");
        t1.piece_begin(1).unwrap();
        assert!(t1.write(B, K, &1u64.to_le_bytes()).unwrap());
        assert_eq!(t1.piece_end(1, Ok(())).unwrap(), PieceEnd::Done);
        t1.commit().unwrap();
        assert_eq!(snapshot(&db, &keys), (2, vec![Some(0), Some(0), None]), "committed at 2");
        tick(&db, 2);
        assert_eq!(snapshot(&db, &keys), (4, vec![Some(1), Some(1), Some(5)]));
        // A direct commit (epoch 4) writes A in place, and deletes K2.
        let mut d = db.worker().unwrap();
        d.begin();
        assert!(d.write(A, K, &7u64.to_le_bytes()).unwrap());
        assert!(d.delete(A, K2).unwrap());
        d.commit().unwrap();
        assert_eq!(snapshot(&db, &keys), (4, vec![Some(1), Some(1), Some(5)]), "direct at 4");
        tick(&db, 2);
        assert_eq!(snapshot(&db, &keys), (6, vec![Some(7), Some(1), None]));
    }

    #[test]
    fn a_type_the_analysis_leaves_out_runs_directly_over_committed_data() {
        let db = db(&[]);
        let (mut t1, mut ro) = (db.worker().unwrap(), db.worker().unwrap());
        let read_a = |ro: &mut Ic3Worker<'_>| {
            ro.typed(1);
            ro.begin();
            Tx::new(ro, &TYPES[1], Checks::default())
                .piece(0, |tx| Ok(tx.read(A, K, value)?.unwrap()))
                .unwrap()
        };
        t1.typed(0);
        t1.begin();
        Tx::new(&mut t1, &TYPES[0], Checks::default()).piece(0, |tx| add(tx, A, 5)).unwrap();
        assert_eq!(read_a(&mut ro), 0, "the value before the pending piece");
        ro.commit().unwrap();
        assert_eq!(read_a(&mut ro), 0);
        t1.commit().unwrap();
        assert_eq!(ro.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        assert_eq!(read_a(&mut ro), 5, "the writer's value once it committed");
        ro.commit().unwrap();
    }

    /// §4.3: an accumulation into a table no analysed template writes (or reads the column
    /// of) is deferred to the transaction's commit: readers see the old value until then, a
    /// piece that runs again (its validation failed) keeps it once, and a rolled-back
    /// transaction leaves nothing.
    #[test]
    fn accumulations_are_deferred_to_commit() {
        use crate::engine::Accumulation;
        static ACC: [Piece; 2] = [
            Piece {
                name: "acc",
                accesses: &[
                    r(B),
                    TableAccess { table: A, mode: AccessMode::Accumulate, columns: 1 },
                ],
            },
            Piece { name: "c", accesses: &[w(C)] },
        ];
        // A type that writes B, so that the read of B is tracked (and its validation can fail).
        static WB: [Piece; 1] = [Piece { name: "b", accesses: &[w(B)] }];
        static ACC_TYPES: [TxnType; 2] =
            [TxnType { name: "acc", pieces: &ACC }, TxnType { name: "wb", pieces: &WB }];
        let tables = [
            TableSpec::new("a", 8, 16).with_columns(&[("v", 0, 8)]),
            TableSpec::new("b", 8, 16),
            c_table(),
        ];
        let db = Database::<Ic3>::builder(&tables)
            .options(DbOptions { max_workers: 4, ..Default::default() })
            .txn_types(&ACC_TYPES)
            .build()
            .unwrap();
        let analysis = &db.protocol().shared.templates.as_ref().unwrap().full;
        assert_eq!(analysis.deferred, vec![A]);
        let mut other = db.worker().unwrap();
        other.begin();
        for t in [A, B, C] {
            assert!(other.insert(t, K, &0u64.to_le_bytes()).unwrap());
        }
        other.commit().unwrap();
        let read_a = |w: &mut Ic3Worker<'_>| {
            w.begin();
            let v = w.read(A, K, value).unwrap().unwrap();
            w.commit().unwrap();
            v
        };
        let checks = Checks { templates: true, ..Checks::default() };
        for commit in [true, false] {
            let mut t1 = db.worker().unwrap();
            t1.typed(0);
            t1.begin();
            let mut tx = Tx::new(&mut t1, &ACC_TYPES[0], checks);
            let mut runs = 0;
            tx.piece(0, |tx| {
                runs += 1;
                tx.read(B, K, value)?;
                assert!(tx.accumulate(A, K, Accumulation::add_i64(0, 0, 5))?);
                if runs == 1 {
                    // Overwrite what the piece read: its validation fails, it runs again.
                    other.begin();
                    assert!(other.write(B, K, &7u64.to_le_bytes()).unwrap());
                    other.commit().unwrap();
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(runs, 2, "the piece ran again");
            assert_eq!(read_a(&mut other), if commit { 0 } else { 5 }, "not applied yet");
            tx.piece(1, |tx| add(tx, C, 1)).unwrap();
            if commit {
                t1.commit().unwrap();
            } else {
                t1.abort();
            }
            assert_eq!(read_a(&mut other), 5, "applied once, at commit, and never rolled back");
        }
    }

    /// The accumulated column of `u` in the tests of accumulations under pending writers.
    const Y: u64 = 0b10;
    static UPD_N: [Piece; 2] = [
        Piece {
            name: "n",
            accesses: &[TableAccess { table: U, mode: AccessMode::Write, columns: N }],
        },
        Piece { name: "v", accesses: &[w(V)] },
    ];
    static PAY: [Piece; 1] = [Piece {
        name: "y",
        accesses: &[TableAccess { table: U, mode: AccessMode::Accumulate, columns: Y }],
    }];
    /// Writers of `u.n` (then of `v`) and accumulators into `u.y`: the accumulations are
    /// deferred under pending writers of `n` (§4.3).
    static N_AND_Y: [TxnType; 2] =
        [TxnType { name: "upd", pieces: &UPD_N }, TxnType { name: "pay", pieces: &PAY }];

    /// The tables of [`N_AND_Y`]: `u` is `[n | y]`, 16 bytes.
    fn n_and_y_tables() -> [TableSpec; 2] {
        [
            TableSpec::new("u", 16, 16).with_columns(&[("n", 0, 8), ("y", 8, 8)]),
            TableSpec::new("v", 8, 16),
        ]
    }

    /// A database of [`N_AND_Y`] with `options`: `u` is `[n | y]`, 16 bytes, `y` deferred
    /// under writers of `n`; key `K` loaded as `u = [0 | 7]`, `v = 0`.
    fn n_and_y_db(options: DbOptions) -> Database<Ic3> {
        let tables = n_and_y_tables();
        let db =
            Database::<Ic3>::builder(&tables).options(options).txn_types(&N_AND_Y).build().unwrap();
        assert_eq!(db.protocol().shared.deferred(U), Y, "deferred under writers of n");
        let mut l = db.loader();
        l.insert(U, K, &[0u64.to_le_bytes(), 7u64.to_le_bytes()].concat()).unwrap();
        l.insert(V, K, &0u64.to_le_bytes()).unwrap();
        drop(l);
        db
    }

    /// §4.3 under pending writers: an accumulation into a column that no template reads or
    /// writes otherwise goes in at its transaction's commit under another transaction's
    /// uncommitted write of the row's other column, without waiting for it or depending on
    /// it; readers of committed data see it at once, and the writer's commit or rollback keeps
    /// it. The history rebases the writer's write on the accumulation, and the checker finds
    /// both outcomes serializable. A typed read or write of the accumulated column is refused.
    #[test]
    fn accumulations_go_in_under_pending_writers_of_other_columns() {
        use crate::checker;
        use crate::engine::Accumulation;
        const TYPES: &[TxnType; 2] = &N_AND_Y;
        let y = |r: &[u8]| u64::from_le_bytes(r[8..16].try_into().unwrap());
        for commit in [true, false] {
            let db = n_and_y_db(DbOptions {
                max_workers: 4,
                record_history: true,
                ..Default::default()
            });
            let (mut t1, mut t2, mut d) =
                (db.worker().unwrap(), db.worker().unwrap(), db.worker().unwrap());
            let read_u = |d: &mut Ic3Worker<'_>| {
                d.begin();
                let r = d.read(U, K, |r| (value(&r[..8]), y(r))).unwrap().unwrap();
                d.commit().unwrap();
                r
            };
            t1.typed(0);
            t1.begin();
            let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
            tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] = 5).map(|_| ())).unwrap();
            assert_ne!(word(&db, U) & super::super::record::PENDING, 0, "t1's write is pending");
            for _ in 0..2 {
                t2.typed(1);
                t2.begin();
                let mut tx = Tx::new(&mut t2, &TYPES[1], Checks::default());
                tx.piece(0, |tx| tx.accumulate(U, K, Accumulation::add_i64(1, 8, 3)).map(|_| ()))
                    .unwrap();
                assert!(t2.local.deps.is_empty(), "no dependency on the pending writer");
                t2.commit().unwrap();
            }
            assert_eq!(read_u(&mut d), (0, 13), "committed at once, under the pending n");
            let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
            tx.piece(1, |tx| add(tx, V, 1)).unwrap();
            if commit {
                t1.commit().unwrap();
            } else {
                t1.abort();
            }
            let n = if commit { 5 } else { 0 };
            assert_eq!(read_u(&mut d), (n, 13), "the writer's outcome keeps the accumulations");
            // A typed read or write of the accumulated column is refused at the piece commit.
            for write in [false, true] {
                t1.typed(0);
                t1.begin();
                let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
                let r = tx.piece(0, |tx| {
                    if write {
                        tx.update_cols(U, K, N | Y, N | Y, |r| r[8] = 1).map(|_| ())
                    } else {
                        tx.read_cols(U, K, Y, |_| ()).map(|_| ())
                    }
                });
                assert_eq!(r.map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
                t1.abort();
            }
            assert_eq!(read_u(&mut d), (n, 13));
            drop((t1, t2, d));
            let report = checker::check(&db.take_history());
            assert!(report.anomalies.is_empty(), "{commit}: {report:?}");
        }
    }

    /// Logging accumulations under pending writers: a 16-byte row `[n | y]` (a column record
    /// of one word is no smaller than the row), a piece writes `n`, two deferred accumulations
    /// of `y` commit under it, then the writer commits or rolls back; the log recovers `n` as
    /// committed and `y` with both accumulations. Logging whole images instead put the
    /// pending `n` into the accumulations' records (recovered after a rollback), and the
    /// writer's image, taken at its piece commit, put the stale `y` above them.
    #[test]
    fn accumulations_under_pending_writers_log_only_their_columns() {
        use crate::durability::log::LogOptions;
        use crate::durability::recovery::recover;
        use crate::engine::Accumulation;
        const TYPES: &[TxnType; 2] = &N_AND_Y;
        let read_u = |db: &Database<Ic3>| {
            let mut d = db.worker().unwrap();
            d.begin();
            let r = d.read(U, K, |r| (value(&r[..8]), value(&r[8..]))).unwrap().unwrap();
            d.commit().unwrap();
            r
        };
        for commit in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let db = n_and_y_db(DbOptions {
                max_workers: 4,
                log: Some(LogOptions::new(dir.path())),
                ..Default::default()
            });
            db.checkpoint().unwrap();
            let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
            t1.typed(0);
            t1.begin();
            let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
            tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] = 5).map(|_| ())).unwrap();
            for _ in 0..2 {
                t2.typed(1);
                t2.begin();
                let mut tx = Tx::new(&mut t2, &TYPES[1], Checks::default());
                tx.piece(0, |tx| tx.accumulate(U, K, Accumulation::add_i64(1, 8, 3)).map(|_| ()))
                    .unwrap();
                t2.commit().unwrap();
            }
            let mut tx = Tx::new(&mut t1, &TYPES[0], Checks::default());
            tx.piece(1, |tx| add(tx, V, 1)).unwrap();
            if commit {
                t1.commit().unwrap();
            } else {
                t1.abort();
            }
            drop((t1, t2));
            let n = if commit { 5 } else { 0 };
            assert_eq!(read_u(&db), (n, 13), "live");
            let mut db = db;
            db.close_log().unwrap();
            let fresh =
                Database::<Ic3>::builder(&n_and_y_tables()).txn_types(TYPES).build().unwrap();
            let report = recover(&fresh, dir.path()).unwrap();
            assert_eq!(
                read_u(&fresh),
                (n, 13),
                "recovered, the writer committed: {commit} ({report:?})"
            );
        }
    }

    /// A transaction that writes one column of a row in a piece and accumulates into another
    /// column of the same row applies the accumulation at its commit under its own listed
    /// write (it is then passing its commit point itself: the accumulation must not wait for
    /// that), and the history stays serializable.
    #[test]
    fn an_accumulation_under_the_transactions_own_write_commits() {
        use crate::checker;
        use crate::engine::Accumulation;
        use std::sync::mpsc;
        const Y: u64 = 0b10;
        static BOTH: [Piece; 2] = [
            Piece {
                name: "n",
                accesses: &[TableAccess { table: U, mode: AccessMode::Write, columns: N }],
            },
            Piece {
                name: "y",
                accesses: &[TableAccess { table: U, mode: AccessMode::Accumulate, columns: Y }],
            },
        ];
        static TYPES: [TxnType; 1] = [TxnType { name: "both", pieces: &BOTH }];
        let tables = [TableSpec::new("u", 16, 16).with_columns(&[("n", 0, 8), ("y", 8, 8)])];
        let db = Database::<Ic3>::builder(&tables)
            .options(DbOptions { max_workers: 4, record_history: true, ..Default::default() })
            .txn_types(&TYPES)
            .build()
            .unwrap();
        assert_eq!(db.protocol().shared.deferred(U), Y);
        let mut l = db.loader();
        l.insert(U, K, &[0u64.to_le_bytes(), 7u64.to_le_bytes()].concat()).unwrap();
        drop(l);
        let db = std::sync::Arc::new(db);
        let (done, wait) = mpsc::channel();
        let d = db.clone();
        // On a thread of its own, so that a commit waiting for itself fails the test instead
        // of hanging it.
        let h = std::thread::spawn(move || {
            let mut t = d.worker().unwrap();
            for _ in 0..2 {
                t.typed(0);
                t.begin();
                let mut tx = Tx::new(&mut t, &TYPES[0], Checks::default());
                tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] += 1).map(|_| ())).unwrap();
                tx.piece(1, |tx| tx.accumulate(U, K, Accumulation::add_i64(1, 8, 3)).map(|_| ()))
                    .unwrap();
                t.commit().unwrap();
            }
            t.begin();
            let r = t.read(U, K, |r| (value(&r[..8]), value(&r[8..]))).unwrap().unwrap();
            t.commit().unwrap();
            done.send(r).unwrap();
        });
        let r = wait.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(
            r,
            Ok((2, 13)),
            "both commits applied (a timeout: the commit waited for itself)"
        );
        h.join().unwrap();
        let db = std::sync::Arc::into_inner(db).expect("the thread has ended");
        let report = checker::check(&db.take_history());
        assert!(report.anomalies.is_empty(), "{report:?}");
    }

    /// Table U: column `n` (0), which a template writes, and `tax` (1), which none does.
    const U: TableId = TableId(0);
    const V: TableId = TableId(1);
    const N: u64 = 0b01;
    const TAX: u64 = 0b10;
    /// `upd` writes U's `n`, then V; `tax` reads U's `tax` (untracked), then writes V.
    static UPD: [Piece; 2] = [
        Piece {
            name: "n",
            accesses: &[TableAccess { table: U, mode: AccessMode::Write, columns: N }],
        },
        Piece { name: "v", accesses: &[w(V)] },
    ];
    static TAXED: [Piece; 2] = [
        Piece {
            name: "tax",
            accesses: &[TableAccess { table: U, mode: AccessMode::Read, columns: TAX }],
        },
        Piece { name: "v", accesses: &[w(V)] },
    ];
    static UNTRACKED: [TxnType; 2] =
        [TxnType { name: "upd", pieces: &UPD }, TxnType { name: "tax", pieces: &TAXED }];

    /// A database of U (`n` = 0, `tax` = 7 at key `K`) and V (0), analysing [`UNTRACKED`].
    fn db_untracked() -> Database<Ic3> {
        let tables = [
            TableSpec::new("u", 16, 16).with_columns(&[("n", 0, 8), ("tax", 8, 8)]),
            TableSpec::new("v", 8, 16),
        ];
        let db = Database::<Ic3>::builder(&tables)
            .options(DbOptions { max_workers: 4, ..Default::default() })
            .txn_types(&UNTRACKED)
            .build()
            .unwrap();
        let mut l = db.loader();
        l.insert(U, K, &[0u64.to_le_bytes(), 7u64.to_le_bytes()].concat()).unwrap();
        l.insert(V, K, &0u64.to_le_bytes()).unwrap();
        drop(l);
        db
    }

    fn tax(bytes: &[u8]) -> u64 {
        u64::from_le_bytes(bytes[8..16].try_into().unwrap())
    }

    /// Runs a `tax` transaction's first piece on `t`: reads U's `tax`.
    fn read_tax(t: &mut Ic3Worker<'_>) -> u64 {
        t.typed(1);
        t.begin();
        let mut tx = Tx::new(t, &UNTRACKED[1], Checks { templates: true, ..Checks::default() });
        tx.piece(0, |tx| Ok(tx.read_cols(U, K, TAX, tax)?.unwrap())).unwrap()
    }

    /// A typed read of a column no template writes leaves no entry and makes no dependency:
    /// the reader neither waits for a pending writer of another column of the row nor is
    /// ordered after it, and commits first.
    #[test]
    fn untracked_reads_leave_no_entry_and_make_no_dependency() {
        let db = db_untracked();
        let (mut t1, mut t2) = (db.worker().unwrap(), db.worker().unwrap());
        t1.typed(0);
        t1.begin();
        let mut tx = Tx::new(&mut t1, &UNTRACKED[0], Checks::default());
        tx.piece(0, |tx| tx.update_cols(U, K, N, N, |r| r[0] = 5).map(|_| ())).unwrap();
        assert_ne!(word(&db, U) & super::super::record::PENDING, 0, "t1's write is pending");
        assert_eq!(read_tax(&mut t2), 7);
        assert!(t2.local.deps.is_empty() && t2.reads.is_empty(), "no dependency, no read set");
        assert!(t2.local.untracked_reads);
        let mut tx = Tx::new(&mut t2, &UNTRACKED[1], Checks::default());
        tx.piece(1, |tx| add(tx, V, 1)).unwrap();
        t2.commit().unwrap();
        assert_eq!(t2.local.shared().contexts.states().filter(|s| s.runs()).count(), 1);
        let mut tx = Tx::new(&mut t1, &UNTRACKED[0], Checks::default());
        tx.piece(1, |tx| add(tx, V, 1)).unwrap();
        t1.commit().unwrap();
        assert_eq!(committed(&db, V), 2);
    }

    /// A direct writer of an untracked column that overlaps a typed reader of it fails the
    /// reader at its commit (the reader does not wait for it, nor it for the reader); one that
    /// finished before the reader began does not, nor does a direct write of a written column.
    #[test]
    fn a_direct_writer_of_an_untracked_column_fails_the_readers_it_overlaps() {
        let db = db_untracked();
        let (mut t, mut d) = (db.worker().unwrap(), db.worker().unwrap());
        let direct = |d: &mut Ic3Worker<'_>, cols: u64, v: u8| {
            d.begin();
            assert!(d.update_cols(U, K, cols, cols, |r| r[8] = v).unwrap().is_some());
            d.commit().unwrap();
        };
        assert_eq!(read_tax(&mut t), 7);
        direct(&mut d, TAX, 8);
        let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
        tx.piece(1, |tx| add(tx, V, 1)).unwrap();
        assert_eq!(t.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        assert_eq!(committed(&db, V), 0, "rolled back");
        assert_eq!(read_tax(&mut t), 8, "the writer finished before this attempt began");
        direct(&mut d, N | TAX, 8); // `n` and `tax` (unchanged): a write of `tax` all the same
        let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
        tx.piece(1, |tx| add(tx, V, 1)).unwrap();
        assert_eq!(t.commit().map_err(|a| a.reason), Err(AbortReason::ReadValidation));
        assert_eq!(read_tax(&mut t), 8);
        d.begin();
        assert!(d.update_cols(U, K, N, N, |r| r[0] = 9).unwrap().is_some());
        d.commit().unwrap();
        let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
        tx.piece(1, |tx| add(tx, V, 1)).unwrap();
        t.commit().unwrap();
        assert_eq!(committed(&db, V), 1);
    }

    /// What the untracked reads rely on is checked at the piece commit whatever the caller's
    /// checks (here none): a typed write of a column no template declares written, and a
    /// tracked read where the template declares only untracked ones (the analysis gave it no
    /// C-edge), are refused.
    #[test]
    fn writes_of_untracked_columns_and_undeclared_tracked_reads_are_refused() {
        let db = db_untracked();
        let mut t = db.worker().unwrap();
        t.typed(0);
        t.begin();
        let mut tx = Tx::new(&mut t, &UNTRACKED[0], Checks::default());
        let wrote = tx.piece(0, |tx| tx.update_cols(U, K, TAX, TAX, |r| r[8] = 1).map(|_| ()));
        assert_eq!(wrote.map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
        t.abort();
        t.typed(1);
        t.begin();
        let mut tx = Tx::new(&mut t, &UNTRACKED[1], Checks::default());
        let read = tx.piece(0, |tx| Ok(tx.read_cols(U, K, N | TAX, tax)?.unwrap()));
        assert_eq!(read.map_err(|a| a.reason), Err(AbortReason::TemplateViolation));
        t.abort();
        assert_eq!(read_tax(&mut t), 7, "nothing was written");
        t.abort();
    }
}
