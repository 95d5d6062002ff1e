//! Cicada's multi-version index (§3.6, `index=multi-version`): per table, a B-link tree
//! (`protocols::cicada::btree`) whose nodes are Cicada records of a node table the protocol
//! owns, read and written by transactions like rows (see the module docs of
//! `protocols::cicada` for what it changes in the worker).
//!
//! Node tables are numbered after the data tables: the node table of table `t` of `n` is
//! `TableId(n + t)` in the protocol's per-table vectors (version stores, pools, row sizes), so
//! a node's versions go through the same chains, validation, GC and pools as a row's. A node
//! the tree takes out (an emptied leaf and its one-child ancestors) is freed by the worker that
//! committed its removal (`worker::NodeGarbage`), and its slot reused.

use super::record::{init_version, row_of, set_status, CVersion, CicadaRecord};
use super::record::{next, status, COMMITTED, LOADED};
use crate::error::Abort;
use crate::protocols::cicada::btree::{BTree, NodeId, Nodes, Shape};
use crate::storage::row_store::{RowStore, SlotCache};
use crate::storage::version::VersionStore;
use crate::storage::RowId;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// One table's tree: its node records and their layout.
pub(super) struct TreeTable {
    pub(super) rows: RowStore<CicadaRecord>,
    pub(super) tree: BTree,
    /// Slots for nodes loading creates (loads are serialised by this lock: they change nodes
    /// in place), and those departed workers left.
    pub(super) load: Mutex<SlotCache>,
}

/// The words of version `v` of a node of `shape`.
#[inline(always)]
pub(super) fn node_words(v: &CVersion, shape: Shape) -> &[AtomicU64] {
    // SAFETY: node versions come from the node table's store, cut with `shape.bytes()` of
    // payload after the struct (`TreeTable::new`).
    unsafe { row_of(v, shape.bytes()) }.words()
}

impl TreeTable {
    /// An empty tree for a table of `capacity` rows: its root node, an empty leaf, loaded
    /// below every timestamp. Room for a node per row: nodes split at `fanout` keys into
    /// halves, so a tree over at most `capacity` keys ever inserted needs fewer.
    pub(super) fn new(
        shape: Shape,
        capacity: u64,
        store: &VersionStore<super::CicadaExt>,
    ) -> Result<TreeTable, crate::error::Error> {
        let rows = RowStore::new(shape.bytes(), capacity.saturating_add(64))?;
        let mut cache = SlotCache::default();
        let root = create_loaded(&rows, store, shape, &mut cache).0;
        shape.format_root(node_words(newest(&rows, root), shape));
        Ok(TreeTable { rows, tree: BTree::new(root, shape), load: Mutex::new(cache) })
    }

    /// Adds a loaded row's `key -> rid` (bulk loading and recovery, before transactions run
    /// on this table: nodes change in place).
    pub(super) fn load(&self, store: &VersionStore<super::CicadaExt>, key: u64, rid: RowId) {
        let mut cache = self.load.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = Loading { t: self, store, cache: &mut cache };
        // Nothing aborts a load: its nodes are read and written in place.
        let had = self.tree.insert(&mut n, key, rid.0).expect("a load does not abort");
        debug_assert!(had.is_none(), "the catalog refused duplicate key {key}");
    }
}

impl TreeTable {
    /// The tree's entries in `[lo, hi]` at its nodes' newest committed versions, while no
    /// transaction runs (`Cicada::check_index`).
    pub(super) fn committed_entries(&self, lo: u64, hi: u64) -> Result<Vec<(u64, u64)>, Abort> {
        let mut out = Vec::new();
        self.tree.scan(&mut Committed(self), lo, hi, |_, k, v| {
            out.push((k, v));
            Ok(std::ops::ControlFlow::Continue(()))
        })?;
        Ok(out)
    }
}

/// The tree's nodes at their newest committed versions, read only (no transaction running).
struct Committed<'a>(&'a TreeTable);

impl Nodes for Committed<'_> {
    type Read = ();

    fn read(&mut self, id: NodeId) -> Result<(&[AtomicU64], ()), Abort> {
        let rec = self.0.rows.get(RowId(id)).header;
        let mut v = rec.newest().ok().flatten();
        while let Some(x) = v.filter(|x| status(x) != COMMITTED) {
            v = next(x);
        }
        // A linked node has a committed version; none means the tree is broken.
        let v = v.ok_or(Abort::new(crate::error::AbortReason::Unsupported))?;
        Ok((node_words(v, self.0.tree.shape()), ()))
    }

    fn track(&mut self, _: ()) -> Result<(), Abort> {
        Ok(())
    }

    fn write(&mut self, _: NodeId) -> Result<&[AtomicU64], Abort> {
        Err(Abort::new(crate::error::AbortReason::Unsupported))
    }

    fn create(&mut self) -> Result<NodeId, Abort> {
        Err(Abort::new(crate::error::AbortReason::Unsupported))
    }

    fn retire(&mut self, _: NodeId) {}
}

/// The newest version of node `id` (loading: its only one).
fn newest(rows: &RowStore<CicadaRecord>, id: NodeId) -> &CVersion {
    let rec = rows.get(RowId(id)).header;
    // A node record has a version from its creation on, and loading runs alone.
    rec.newest().ok().flatten().expect("a loaded node has a version")
}

/// A new node record with one committed version at `LOADED`, zeroed.
fn create_loaded<'a>(
    rows: &'a RowStore<CicadaRecord>,
    store: &VersionStore<super::CicadaExt>,
    shape: Shape,
    cache: &mut SlotCache,
) -> (NodeId, &'a CicadaRecord) {
    let rid = rows.alloc(cache).expect("the node table has a slot per row");
    let v = store.alloc_shared();
    // SAFETY: a version nobody else holds yet, fresh from the store.
    let ver = unsafe { v.as_ref() };
    init_version(ver, LOADED, false);
    for w in node_words(ver, shape) {
        w.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    set_status(ver, COMMITTED);
    let rec = rows.get(rid).header;
    rec.init(Some(v));
    (rid.0, rec)
}

/// The tree's nodes as loading sees them: the newest version of each, changed in place.
struct Loading<'a> {
    t: &'a TreeTable,
    store: &'a VersionStore<super::CicadaExt>,
    cache: &'a mut SlotCache,
}

impl Nodes for Loading<'_> {
    type Read = ();

    fn read(&mut self, id: NodeId) -> Result<(&[AtomicU64], ()), Abort> {
        Ok((node_words(newest(&self.t.rows, id), self.t.tree.shape()), ()))
    }

    fn track(&mut self, _: ()) -> Result<(), Abort> {
        Ok(())
    }

    fn write(&mut self, id: NodeId) -> Result<&[AtomicU64], Abort> {
        Ok(self.read(id)?.0)
    }

    fn create(&mut self) -> Result<NodeId, Abort> {
        Ok(create_loaded(&self.t.rows, self.store, self.t.tree.shape(), self.cache).0)
    }

    /// Loading only inserts, which never takes a node out.
    fn retire(&mut self, _: NodeId) {}
}
