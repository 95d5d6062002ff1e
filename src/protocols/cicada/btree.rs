//! A B-link tree whose nodes are records of a transactional store: the shape of Cicada's
//! multi-version index (§3.6), where "an index node is stored as a record, and pointers to index
//! nodes and to indexed records use their record IDs".
//!
//! The tree knows nothing of versions or validation. It reads and writes nodes through
//! [`Nodes`], which a protocol implements over its own records:
//! - a read returns the node as the running transaction sees it (its own write, else the
//!   version visible at its timestamp), in place;
//! - a write returns the transaction's private copy, made from the version visible when it is
//!   first written (the store records that read, so validation fails if another version
//!   commits under it);
//! - a new node is private to its transaction until it commits.
//!
//! Every change to the tree is therefore deferred to the transaction's validation, visible to
//! the transaction itself through its own writes, and an aborted transaction leaves no trace in
//! shared memory. Decisions to change a node are made on the private copy, never on an earlier
//! read of it.
//!
//! **Phantoms.** A lookup that finds its key absent can track the leaf that would hold it
//! ([`Nodes::track`]), and a scan tracks every leaf its range meets: validation then fails if one
//! changed below the timestamp, and raising their read timestamps keeps a write at a smaller
//! timestamp from committing under them. A key that is present needs no tracking: the record it
//! names is read and validated.
//!
//! **Internal nodes are read untracked** (the paper's footnote 1): a transaction may see an
//! internal node older than a node it reaches from it, when a split committed between the two
//! reads. A split moves the upper half of a node into a new right sibling and lowers the node's
//! high key, so a search that finds its key above a node's high key follows the sibling link
//! (Lehman and Yao's B-link tree) and misses nothing. The reverse, a node older than its parent,
//! cannot be seen: the split's versions of both were installed before either committed, and a
//! reader waits for (or aborts on) a pending version below its timestamp.
//!
//! **Emptied nodes leave the tree.** A removal that empties a leaf takes it out, with the
//! ancestors of which it was the only descendant, when the top of that keyless subtree has a
//! left sibling under its parent: the parent drops it and the separator before it, and the
//! sibling's rightmost path takes over its range and right links level by level. The removed
//! nodes are marked dead and retired ([`Nodes::retire`]): a transaction that reaches one
//! through an internal node it read before the removal committed aborts, and the store reuses
//! them once no such transaction can run. A parent's first child stays (its left neighbour is
//! under another parent), and so does the root. Keys that slide, inserted at one end and
//! deleted at the other as TPC-C's new orders are, keep the tree at the size of the live keys.
//! Nodes are not merged otherwise: a removal leaves a leaf smaller, and inserts fill it again.
//!
//! ```text
//!  node words: | meta: count, LEAF bit | high key | right sibling | keys[fanout] | values or children[fanout + 1] |
//! ```
//!
//! A leaf holds `count` keys, sorted, with their values (record ids). An internal node holds
//! `count` separator keys and `count + 1` children: child `i` covers the keys above separator
//! `i - 1` and up to separator `i`, the last one those up to the node's high key. Every key of a
//! node's subtree is at most its high key; the rightmost node of each level has high key
//! `u64::MAX` and no sibling.

use crate::error::{Abort, AbortReason};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

/// A node's id: a record of the store's node table.
pub type NodeId = u64;

/// No node (the right sibling of the rightmost node of a level).
pub const NO_NODE: NodeId = u64::MAX;

/// The most keys a node holds that [`Shape::new`] accepts (splits use stack buffers this big).
pub const MAX_FANOUT: usize = 64;

/// Levels a descent records for splits; a deeper descent is a broken tree ([`corrupt`]). The
/// tree grows a level only when its root splits, at `fanout + 1` children, so 64 levels take
/// more splits than any run makes.
const MAX_DEPTH: usize = 64;

const META: usize = 0;
const HIGH: usize = 1;
const RIGHT: usize = 2;
const KEYS: usize = 3;
const LEAF: u64 = 1 << 63;
/// A node taken out of the tree (see [`BTree::remove`]): a transaction that reaches it through
/// an internal node read before the removal committed aborts.
const DEAD: u64 = 1 << 62;
const COUNT: u64 = u32::MAX as u64;

/// The node layout: keys per node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    fanout: usize,
}

impl Shape {
    /// Nodes of `fanout` keys (3 to [`MAX_FANOUT`]).
    pub fn new(fanout: usize) -> Result<Shape, String> {
        if !(3..=MAX_FANOUT).contains(&fanout) {
            return Err(format!("an index node holds 3 to {MAX_FANOUT} keys, not {fanout}"));
        }
        Ok(Shape { fanout })
    }

    /// Keys per node.
    pub fn fanout(self) -> usize {
        self.fanout
    }

    /// Words per node.
    pub fn words(self) -> usize {
        KEYS + 2 * self.fanout + 1
    }

    /// Bytes per node (a node record's row size).
    pub fn bytes(self) -> usize {
        self.words() * 8
    }

    /// Where values (leaf) or children (internal node) start.
    #[inline(always)]
    fn vals(self) -> usize {
        KEYS + self.fanout
    }

    /// Formats `w` as an empty leaf covering every key: a new tree's root.
    pub fn format_root(self, w: &[AtomicU64]) {
        let n = Node { w, s: self };
        n.set(META, LEAF);
        n.set(HIGH, u64::MAX);
        n.set(RIGHT, NO_NODE);
    }
}

/// Where a tree's nodes live: a protocol's records, read and written by the running transaction
/// (see the module docs).
pub trait Nodes {
    /// What [`Nodes::track`] needs to name a read (the version read, for a multi-version store).
    type Read: Copy;

    /// Node `id` as the transaction sees it, and its read for [`Nodes::track`]. The words do not
    /// change while they are borrowed (a committed version, or the transaction's own copy).
    fn read(&mut self, id: NodeId) -> Result<(&[AtomicU64], Self::Read), Abort>;

    /// Adds `read` to the transaction's read set: validation fails if the node changed below
    /// the timestamp since (phantom protection for the keys the node covers).
    fn track(&mut self, read: Self::Read) -> Result<(), Abort>;

    /// The transaction's private copy of node `id`, to change (made on the first write from the
    /// version visible then, which the store validates like a read).
    fn write(&mut self, id: NodeId) -> Result<&[AtomicU64], Abort>;

    /// A new node, private to the transaction until it commits; its words are written next.
    fn create(&mut self) -> Result<NodeId, Abort>;

    /// Node `id` leaves the tree if the transaction commits (its private copy is marked dead):
    /// no node visible above the commit links to it any more. Transactions that read a node
    /// linking to it before the commit may still reach it, so the store reclaims it once none
    /// of those can be running.
    fn retire(&mut self, id: NodeId);
}

/// A node's words. Loads and stores are Relaxed: the words are a committed version, immutable
/// since the store's Acquire load that led to it, or the transaction's own copy.
#[derive(Clone, Copy)]
struct Node<'a> {
    w: &'a [AtomicU64],
    s: Shape,
}

impl<'a> Node<'a> {
    #[inline(always)]
    fn get(self, i: usize) -> u64 {
        self.w[i].load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn set(self, i: usize, v: u64) {
        self.w[i].store(v, Ordering::Relaxed);
    }

    #[inline(always)]
    fn count(self) -> usize {
        (self.get(META) & COUNT) as usize
    }

    #[inline(always)]
    fn is_leaf(self) -> bool {
        self.get(META) & LEAF != 0
    }

    #[inline(always)]
    fn is_dead(self) -> bool {
        self.get(META) & DEAD != 0
    }

    #[inline(always)]
    fn high(self) -> u64 {
        self.get(HIGH)
    }

    #[inline(always)]
    fn right(self) -> NodeId {
        self.get(RIGHT)
    }

    #[inline(always)]
    fn key(self, i: usize) -> u64 {
        self.get(KEYS + i)
    }

    /// A leaf's value `i`, or an internal node's child `i`.
    #[inline(always)]
    fn val(self, i: usize) -> u64 {
        self.get(self.s.vals() + i)
    }

    /// The first position whose key is at least `key` (`count` if none).
    #[inline(always)]
    fn lower_bound(self, key: u64) -> usize {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The node's words, copied out (a split rearranges them).
    fn copy(self) -> Buf {
        let mut b = Buf::default();
        let n = self.count();
        b.leaf = self.is_leaf();
        b.high = self.high();
        b.right = self.right();
        for i in 0..n {
            b.keys[i] = self.key(i);
        }
        for i in 0..n + usize::from(!b.leaf) {
            b.vals[i] = self.val(i);
        }
        b.count = n;
        b
    }

    /// Writes `b`'s entries `[from, to)` (and, internal, children `[from, to]`) as this node's.
    fn fill(self, b: &Buf, from: usize, to: usize, high: u64, right: NodeId) {
        let n = to - from;
        self.set(META, n as u64 | if b.leaf { LEAF } else { 0 });
        self.set(HIGH, high);
        self.set(RIGHT, right);
        for i in 0..n {
            self.set(KEYS + i, b.keys[from + i]);
        }
        for i in 0..n + usize::from(!b.leaf) {
            self.set(self.s.vals() + i, b.vals[from + i]);
        }
    }
}

/// A node's contents off the tree, one entry over a full node's (a split's input).
struct Buf {
    leaf: bool,
    count: usize,
    high: u64,
    right: NodeId,
    keys: [u64; MAX_FANOUT + 1],
    vals: [u64; MAX_FANOUT + 2],
}

impl Default for Buf {
    fn default() -> Self {
        Buf {
            leaf: true,
            count: 0,
            high: u64::MAX,
            right: NO_NODE,
            keys: [0; MAX_FANOUT + 1],
            vals: [0; MAX_FANOUT + 2],
        }
    }
}

impl Buf {
    /// Puts `key` at position `i` with value (leaf) or right child (internal) `val`.
    fn insert(&mut self, i: usize, key: u64, val: u64) {
        let vi = if self.leaf { i } else { i + 1 };
        let nv = self.count + usize::from(!self.leaf);
        self.keys.copy_within(i..self.count, i + 1);
        self.vals.copy_within(vi..nv, vi + 1);
        self.keys[i] = key;
        self.vals[vi] = val;
        self.count += 1;
    }

    /// Takes out key `k` and value (leaf) or child (internal) `v`.
    fn remove(&mut self, k: usize, v: usize) {
        let nv = self.count + usize::from(!self.leaf);
        self.keys.copy_within(k + 1..self.count, k);
        self.vals.copy_within(v + 1..nv, v);
        self.count -= 1;
    }
}

/// What a lookup found: the key's value, and the read of the leaf that holds or would hold it
/// (to [`Nodes::track`] when an absence matters).
#[derive(Clone, Copy, Debug)]
pub struct Lookup<R> {
    /// The value, if the key is in the tree.
    pub value: Option<u64>,
    /// The leaf's read.
    pub leaf: R,
}

/// A B-link tree rooted at a fixed node (the root splits by moving its contents into two new
/// children, so its id never changes).
#[derive(Clone, Copy, Debug)]
pub struct BTree {
    root: NodeId,
    shape: Shape,
}

/// The node ids a descent went through above the leaf, to insert split separators into.
struct Path {
    ids: [NodeId; MAX_DEPTH],
    len: usize,
}

impl BTree {
    /// The tree rooted at `root` (formatted by [`Shape::format_root`], or grown since).
    pub fn new(root: NodeId, shape: Shape) -> Self {
        BTree { root, shape }
    }

    /// The root node's id.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// The node layout.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    #[inline(always)]
    fn node(self, w: &[AtomicU64]) -> Node<'_> {
        Node { w, s: self.shape }
    }

    /// Descends to the leaf that covers `key`, recording the internal nodes left on the way
    /// down in `path` (if given): the leaf's id, `key`'s value there, and the leaf's read.
    #[inline]
    fn descend<N: Nodes>(
        self,
        n: &mut N,
        key: u64,
        mut path: Option<&mut Path>,
    ) -> Result<(NodeId, Lookup<N::Read>), Abort> {
        let mut id = self.root;
        loop {
            let (w, read) = n.read(id)?;
            let node = self.node(w);
            if let Some(right) = self.right_of(node, key)? {
                id = right;
                continue;
            }
            if node.is_leaf() {
                let i = node.lower_bound(key);
                let value = (i < node.count() && node.key(i) == key).then(|| node.val(i));
                return Ok((id, Lookup { value, leaf: read }));
            }
            if let Some(p) = path.as_deref_mut() {
                if p.len == MAX_DEPTH {
                    return Err(corrupt());
                }
                p.ids[p.len] = id;
                p.len += 1;
            }
            id = node.val(node.lower_bound(key));
        }
    }

    /// Where a search for `key` that reached `node` goes on at its level: `None` if the node
    /// covers the key, else its right sibling (B-link: a split moved the key right; there is
    /// one, since the rightmost node of a level covers every key). A dead node aborts.
    #[inline(always)]
    fn right_of(self, node: Node<'_>, key: u64) -> Result<Option<NodeId>, Abort> {
        if node.is_dead() {
            return Err(moved());
        }
        if key <= node.high() {
            return Ok(None);
        }
        match node.right() {
            NO_NODE => Err(corrupt()),
            r => Ok(Some(r)),
        }
    }

    /// The node of `id`'s level that covers `key`, from `id` rightwards (by reads).
    fn covering<N: Nodes>(self, n: &mut N, mut id: NodeId, key: u64) -> Result<NodeId, Abort> {
        loop {
            let (w, _) = n.read(id)?;
            match self.right_of(self.node(w), key)? {
                Some(right) => id = right,
                None => return Ok(id),
            }
        }
    }

    /// The private copy of the node of `id`'s level that covers `key`, from `id` rightwards
    /// (moving right by reads, so that only that node is written).
    fn write_covering<'n, N: Nodes>(
        self,
        n: &'n mut N,
        id: NodeId,
        key: u64,
    ) -> Result<(NodeId, Node<'n>), Abort> {
        let id = self.covering(n, id, key)?;
        let node = self.node(n.write(id)?);
        if node.is_dead() || key > node.high() {
            // Split by a commit between the read and the write (the write copied the newer
            // version): the transaction's view of the tree moved under it. Aborting is always
            // safe; this is rare enough not to chase the key further.
            return Err(moved());
        }
        Ok((id, node))
    }

    /// Looks `key` up. The leaf is not tracked: the caller tracks it if the key's absence is
    /// what it reads.
    #[inline]
    pub fn get<N: Nodes>(self, n: &mut N, key: u64) -> Result<Lookup<N::Read>, Abort> {
        Ok(self.descend(n, key, None)?.1)
    }

    /// Inserts `key` with `value`: `None` if it went in, or the value already there (the tree
    /// is then unchanged; but if a commit made the key appear between the leaf's read and its
    /// write, the leaf stays written, unchanged).
    pub fn insert<N: Nodes>(self, n: &mut N, key: u64, value: u64) -> Result<Option<u64>, Abort> {
        let mut path = Path { ids: [NO_NODE; MAX_DEPTH], len: 0 };
        let (id, found) = self.descend(n, key, Some(&mut path))?;
        if found.value.is_some() {
            return Ok(found.value);
        }
        let (id, leaf) = self.write_covering(n, id, key)?;
        if !leaf.is_leaf() {
            // The root was a leaf when read and has split since.
            return Err(moved());
        }
        let i = leaf.lower_bound(key);
        if i < leaf.count() && leaf.key(i) == key {
            return Ok(Some(leaf.val(i)));
        }
        let mut b = leaf.copy();
        b.insert(i, key, value);
        if b.count <= self.shape.fanout {
            leaf.fill(&b, 0, b.count, b.high, b.right);
            return Ok(None);
        }
        self.split(n, id, b, &mut path)?;
        Ok(None)
    }

    /// Splits the node `id`, whose private copy's contents plus one entry are `b`, and inserts
    /// the separator into its parent, splitting upwards as far as needed.
    fn split<N: Nodes>(
        self,
        n: &mut N,
        mut id: NodeId,
        mut b: Buf,
        path: &mut Path,
    ) -> Result<(), Abort> {
        loop {
            if id == self.root {
                return self.split_root(n, &b);
            }
            let (sep, m, right_from) = halves(&b);
            let r = n.create()?;
            self.node(n.write(r)?).fill(&b, right_from, b.count, b.high, b.right);
            self.node(n.write(id)?).fill(&b, 0, m, sep, r);
            // The separator goes into the parent, next to `id`: into the node of the parent's
            // level that covers `sep` now (a concurrent split may have moved `id` right).
            if path.len == 0 {
                return Err(moved());
            }
            path.len -= 1;
            let (pid, parent) = self.write_covering(n, path.ids[path.len], sep)?;
            let i = parent.lower_bound(sep);
            if parent.is_leaf() || parent.val(i) != id {
                return Err(moved());
            }
            b = parent.copy();
            b.insert(i, sep, r);
            if b.count <= self.shape.fanout {
                parent.fill(&b, 0, b.count, b.high, b.right);
                return Ok(());
            }
            id = pid;
        }
    }

    /// Splits the root, whose contents plus one entry are `b`: they move into two new nodes
    /// and the root becomes an internal node over them.
    fn split_root<N: Nodes>(self, n: &mut N, b: &Buf) -> Result<(), Abort> {
        let (sep, m, right_from) = halves(b);
        let (a, c) = (n.create()?, n.create()?);
        self.node(n.write(a)?).fill(b, 0, m, sep, c);
        self.node(n.write(c)?).fill(b, right_from, b.count, b.high, NO_NODE);
        let mut rb = Buf { leaf: false, count: 1, ..Buf::default() };
        rb.keys[0] = sep;
        rb.vals[0] = a;
        rb.vals[1] = c;
        self.node(n.write(self.root)?).fill(&rb, 0, 1, u64::MAX, NO_NODE);
        Ok(())
    }

    /// Removes `key`: its value, or `None` (with the leaf's read, to track) if it was absent.
    /// A leaf the removal empties leaves the tree, with the ancestors of which it was the only
    /// descendant, when the top of that keyless subtree has a left sibling under its parent
    /// (see `unlink_empty`): so keys that slide (inserted at one end, deleted at the other) do
    /// not leave a trail of empty nodes. A parent's first child stays, empty or not, so an
    /// internal node may be left with one child and no separator.
    pub fn remove<N: Nodes>(self, n: &mut N, key: u64) -> Result<Lookup<N::Read>, Abort> {
        let mut path = Path { ids: [NO_NODE; MAX_DEPTH], len: 0 };
        let (id, found) = self.descend(n, key, Some(&mut path))?;
        if found.value.is_none() {
            return Ok(found);
        }
        let (id, leaf) = self.write_covering(n, id, key)?;
        if !leaf.is_leaf() {
            return Err(moved());
        }
        let i = leaf.lower_bound(key);
        if i == leaf.count() || leaf.key(i) != key {
            // Removed by a commit between the read and the write (the write copied the newer
            // version); the leaf stays written, unchanged.
            return Ok(Lookup { value: None, leaf: found.leaf });
        }
        let value = leaf.val(i);
        let mut b = leaf.copy();
        b.remove(i, i);
        leaf.fill(&b, 0, b.count, b.high, b.right);
        if b.count == 0 && id != self.root {
            // A subtree that took an emptied one over may be keyless itself, and go in turn.
            while self.unlink_empty(n, key)? {}
        }
        Ok(Lookup { value: Some(value), leaf: found.leaf })
    }

    /// Takes the keyless subtree that ends in the empty leaf `leaf` (covering `key`) out of the
    /// tree. The subtree is the leaf and the ancestors of which it is the only descendant (each
    /// internal node with one child and no separator), up to the first ancestor whose parent
    /// has other children; it goes if its top has a left sibling under that parent. The parent
    /// loses the top and the separator before it, and the left sibling's rightmost path takes
    /// over, level by level, the range and right link of the subtree's node of that level,
    /// which is marked dead and retired. The leaf is the one that covers `key`, if empty.
    /// Returns whether the parent is left with the left sibling alone and its subtree holds no
    /// key either (which may then go the same way).
    fn unlink_empty<N: Nodes>(self, n: &mut N, key: u64) -> Result<bool, Abort> {
        let mut path = Path { ids: [NO_NODE; MAX_DEPTH], len: 0 };
        let (leaf, _) = self.descend(n, key, Some(&mut path))?;
        if leaf == self.root || self.node(n.read(leaf)?.0).count() > 0 {
            return Ok(false);
        }
        let mut chain = [NO_NODE; MAX_DEPTH];
        chain[0] = leaf;
        let mut len = 1;
        let mut level = path.len;
        let (pid, i) = loop {
            if level == 0 {
                // Up to the root, which stays.
                return Ok(false);
            }
            let pid = self.covering(n, path.ids[level - 1], key)?;
            let (w, _) = n.read(pid)?;
            let p = self.node(w);
            let i = p.lower_bound(key);
            if p.is_leaf() || p.val(i) != chain[len - 1] {
                return Err(moved());
            }
            if p.count() > 0 {
                break (pid, i);
            }
            if pid == self.root {
                return Ok(false);
            }
            chain[len] = pid;
            len += 1;
            level -= 1;
        };
        if i == 0 {
            // A first child stays (its left neighbour is under another parent).
            return Ok(false);
        }
        // The copy written may be newer than the one read (a commit in between removed or
        // added separators): the subtree's position is found again in it.
        let (_, p) = self.write_covering(n, pid, key)?;
        let i = p.lower_bound(key);
        if p.is_leaf() || p.val(i) != chain[len - 1] {
            return Err(moved());
        }
        if i == 0 {
            // It became the first child; the parent stays written, unchanged.
            return Ok(false);
        }
        let left = p.val(i - 1);
        let mut pb = p.copy();
        pb.remove(i - 1, i);
        p.fill(&pb, 0, pb.count, pb.high, pb.right);
        let alone = pb.count == 0;
        let (mut s_id, mut keyless) = (left, true);
        for level in (0..len).rev() {
            let x = chain[level];
            // The subtree was found keyless by reads; the copy written is what is validated,
            // and a commit since the read may have given it keys (a split below a one-child
            // node): it must still be keyless, or marking it dead would lose them.
            let (high, right, meta) = {
                let xn = self.node(n.write(x)?);
                let keyless = if level == 0 {
                    xn.is_leaf() && xn.count() == 0
                } else {
                    !xn.is_leaf() && xn.count() == 0 && xn.val(0) == chain[level - 1]
                };
                if xn.is_dead() || !keyless {
                    return Err(moved());
                }
                (xn.high(), xn.right(), xn.get(META) & LEAF)
            };
            let s = self.node(n.write(s_id)?);
            if s.is_dead() || s.right() != x || s.is_leaf() != (level == 0) {
                return Err(moved());
            }
            s.set(HIGH, high);
            s.set(RIGHT, right);
            keyless &= s.count() == 0;
            let below = if level > 0 { s.val(s.count()) } else { NO_NODE };
            self.node(n.write(x)?).set(META, meta | DEAD);
            n.retire(x);
            s_id = below;
        }
        Ok(alone && keyless)
    }

    /// Calls `f` with each key in `[lo, hi]` and its value, in key order, until `f` breaks.
    /// Every leaf whose range meets `[lo, hi]` is tracked before its entries are handed out.
    pub fn scan<N: Nodes>(
        self,
        n: &mut N,
        lo: u64,
        hi: u64,
        mut f: impl FnMut(&mut N, u64, u64) -> Result<ControlFlow<()>, Abort>,
    ) -> Result<(), Abort> {
        if lo > hi {
            return Ok(());
        }
        let (mut id, _) = self.descend(n, lo, None)?;
        let mut from = lo;
        let mut entries = [(0u64, 0u64); MAX_FANOUT];
        loop {
            let (w, read) = n.read(id)?;
            let leaf = self.node(w);
            if let Some(right) = self.right_of(leaf, from)? {
                id = right;
                continue;
            }
            let (mut len, high, right) = (0, leaf.high(), leaf.right());
            for i in leaf.lower_bound(from)..leaf.count() {
                let k = leaf.key(i);
                if k > hi {
                    break;
                }
                entries[len] = (k, leaf.val(i));
                len += 1;
            }
            n.track(read)?;
            for &(k, v) in &entries[..len] {
                if f(n, k, v)?.is_break() {
                    return Ok(());
                }
            }
            if high >= hi || right == NO_NODE {
                return Ok(());
            }
            from = high + 1;
            id = right;
        }
    }
}

/// How a full node splits: the separator that goes up, the keys the left half keeps, and where
/// the right half's start. A leaf's left half keeps `[0, m)` and its high key becomes its
/// largest key; an internal node's key `m` moves up, its left half keeping keys `[0, m)` and
/// children `[0, m]`.
fn halves(b: &Buf) -> (u64, usize, usize) {
    let m = b.count.div_ceil(2);
    if b.leaf {
        (b.keys[m - 1], m, m)
    } else {
        (b.keys[m], m, m + 1)
    }
}

/// The tree changed under the transaction between two of its reads (a split or a removal
/// committed): it aborts and retries, which is always safe, rather than chase the change.
#[cold]
fn moved() -> Abort {
    Abort::new(AbortReason::WriteConflict)
}

/// A broken tree: a level's rightmost node below a key (every level ends at `u64::MAX`), or a
/// descent deeper than any tree of `u64` keys. Not reachable from nodes this module wrote.
#[cold]
fn corrupt() -> Abort {
    Abort::new(AbortReason::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use std::collections::{BTreeMap, HashMap};

    fn words(s: Shape) -> Vec<AtomicU64> {
        (0..s.words()).map(|_| AtomicU64::new(0)).collect()
    }

    fn snapshot(w: &[AtomicU64]) -> Vec<AtomicU64> {
        w.iter().map(|x| AtomicU64::new(x.load(Ordering::Relaxed))).collect()
    }

    /// A single-version store with transactions: private copies and new nodes until `commit`.
    /// `stale` makes reads of a node return an old copy (a transaction that read an internal
    /// node before a split committed).
    struct Store {
        shape: Shape,
        committed: Vec<Vec<AtomicU64>>,
        own: HashMap<NodeId, Vec<AtomicU64>>,
        stale: HashMap<NodeId, Vec<AtomicU64>>,
        tracked: Vec<NodeId>,
        written: Vec<NodeId>,
        created: usize,
        /// Nodes this transaction took out of the tree, and those committed transactions did.
        retired: Vec<NodeId>,
        dead: Vec<NodeId>,
    }

    impl Store {
        fn new(shape: Shape) -> Self {
            let root = words(shape);
            shape.format_root(&root);
            Store {
                shape,
                committed: vec![root],
                own: HashMap::new(),
                stale: HashMap::new(),
                tracked: Vec::new(),
                written: Vec::new(),
                created: 0,
                retired: Vec::new(),
                dead: Vec::new(),
            }
        }

        fn commit(&mut self) {
            for (id, w) in self.own.drain() {
                let id = id as usize;
                if id >= self.committed.len() {
                    self.committed.resize_with(id + 1, || words(self.shape));
                }
                self.committed[id] = w;
            }
            self.tracked.clear();
            self.written.clear();
            self.created = 0;
            self.dead.append(&mut self.retired);
        }

        fn abort(&mut self) {
            self.retired.clear();
            self.own.clear();
            self.tracked.clear();
            self.written.clear();
            self.created = 0;
        }
    }

    impl Nodes for Store {
        type Read = NodeId;

        fn read(&mut self, id: NodeId) -> Result<(&[AtomicU64], NodeId), Abort> {
            if let Some(w) = self.own.get(&id) {
                return Ok((w, id));
            }
            if let Some(w) = self.stale.get(&id) {
                return Ok((w, id));
            }
            Ok((&self.committed[id as usize], id))
        }

        fn track(&mut self, read: NodeId) -> Result<(), Abort> {
            self.tracked.push(read);
            Ok(())
        }

        fn write(&mut self, id: NodeId) -> Result<&[AtomicU64], Abort> {
            if !self.own.contains_key(&id) {
                self.written.push(id);
                let copy = snapshot(&self.committed[id as usize]);
                self.own.insert(id, copy);
            }
            Ok(&self.own[&id])
        }

        fn retire(&mut self, id: NodeId) {
            self.retired.push(id);
        }

        fn create(&mut self) -> Result<NodeId, Abort> {
            let id = (self.committed.len() + self.created) as NodeId;
            self.created += 1;
            self.own.insert(id, words(self.shape));
            Ok(id)
        }
    }

    /// Checks the tree's structure against the committed nodes and returns its entries in key
    /// order: keys sorted and inside each node's range, every node's high key the bound its
    /// parent gives it, children and siblings agreeing, and the leaf chain visiting every leaf
    /// in key order.
    fn verify(s: &Store, t: BTree) -> Vec<(u64, u64)> {
        /// The leaves met, and the entries.
        type Acc = (Vec<NodeId>, Vec<(u64, u64)>);
        /// Checks node `id`, which its parent bounds by `(low, high]` and whose sibling it
        /// says is `right`.
        fn walk(
            s: &Store,
            t: BTree,
            id: NodeId,
            bounds: (Option<u64>, u64, NodeId),
            acc: &mut Acc,
        ) {
            let (low, high, right) = bounds;
            let node = t.node(&s.committed[id as usize]);
            assert_eq!(node.high(), high, "node {id}: high key");
            assert_eq!(node.right(), right, "node {id}: right sibling");
            let n = node.count();
            assert!(n <= s.shape.fanout, "node {id}: {n} keys");
            for i in 0..n {
                let k = node.key(i);
                assert!(low.is_none_or(|l| k > l) && k <= high, "node {id}: key {k} outside");
                assert!(i == 0 || node.key(i - 1) < k, "node {id}: keys out of order");
            }
            assert!(!node.is_dead(), "node {id} is dead but linked");
            if node.is_leaf() {
                acc.0.push(id);
                acc.1.extend((0..n).map(|i| (node.key(i), node.val(i))));
                return;
            }
            assert!(!node.is_dead(), "node {id} is dead but linked");
            assert!(!s.dead.contains(&id), "node {id} was retired but is linked");
            for i in 0..=n {
                let child_low = if i == 0 { low } else { Some(node.key(i - 1)) };
                let child_high = if i == n { high } else { node.key(i) };
                // A child's sibling is the next child, or the leftmost node under the
                // parent's sibling: checked through the leaf chain and by recursion.
                let child_right = if i < n { node.val(i + 1) } else { leftmost(s, t, right) };
                walk(s, t, node.val(i), (child_low, child_high, child_right), acc);
            }
        }
        fn leftmost(s: &Store, t: BTree, id: NodeId) -> NodeId {
            if id == NO_NODE {
                return NO_NODE;
            }
            let node = t.node(&s.committed[id as usize]);
            if node.is_leaf() {
                return id;
            }
            // The node one level down: the child 0 of `id`.
            node.val(0)
        }
        let mut acc = (Vec::new(), Vec::new());
        walk(s, t, t.root, (None, u64::MAX, NO_NODE), &mut acc);
        let (leaves, out) = acc;
        // The leaf chain from the leftmost leaf visits the same leaves.
        let mut chain = Vec::new();
        let mut id = leaves[0];
        while id != NO_NODE {
            chain.push(id);
            id = t.node(&s.committed[id as usize]).right();
        }
        assert_eq!(chain, leaves, "the leaf chain");
        out
    }

    fn scan_all(s: &mut Store, t: BTree, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        t.scan(s, lo, hi, |_, k, v| {
            out.push((k, v));
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        out
    }

    /// Random inserts, removals, lookups and scans against a `BTreeMap`, committed in
    /// transactions of a few operations (some aborted), at several fanouts; the structure is
    /// checked after every commit.
    #[test]
    fn matches_a_btreemap_model() {
        for (fanout, span, seed) in [(3, 200, 1), (4, 1000, 2), (7, 5000, 3), (32, 10_000, 4)] {
            let shape = Shape::new(fanout).unwrap();
            let mut s = Store::new(shape);
            let t = BTree::new(0, shape);
            let mut model = BTreeMap::new();
            let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed);
            for txn in 0..3000 {
                let mut pending = model.clone();
                for _ in 0..rng.random_range(1..6) {
                    let key = rng.random_range(0..span);
                    match rng.random_range(0..10) {
                        0..=4 => {
                            let v = rng.random::<u64>() >> 1;
                            let had = pending.get(&key).copied();
                            assert_eq!(t.insert(&mut s, key, v).unwrap(), had, "insert {key}");
                            pending.entry(key).or_insert(v);
                        }
                        5..=6 => {
                            let had = pending.remove(&key);
                            assert_eq!(t.remove(&mut s, key).unwrap().value, had, "remove {key}");
                        }
                        7..=8 => {
                            let want = pending.get(&key).copied();
                            assert_eq!(t.get(&mut s, key).unwrap().value, want, "get {key}");
                        }
                        _ => {
                            let hi = key.saturating_add(rng.random_range(0..span / 10));
                            let want: Vec<_> =
                                pending.range(key..=hi).map(|(k, v)| (*k, *v)).collect();
                            assert_eq!(scan_all(&mut s, t, key, hi), want, "scan {key}..={hi}");
                        }
                    }
                }
                if txn % 7 == 3 {
                    s.abort();
                } else {
                    s.commit();
                    model = pending;
                }
                let all: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
                assert_eq!(verify(&s, t), all, "fanout {fanout}, after transaction {txn}");
            }
            // Deep enough that splits reached internal nodes and the root more than once.
            let mut height = 1;
            let mut node = t.node(&s.committed[0]);
            while !node.is_leaf() {
                height += 1;
                node = t.node(&s.committed[node.val(0) as usize]);
            }
            assert!(height >= 3, "fanout {fanout}: height {height}, {} keys", model.len());
        }
    }

    /// Keys that slide (inserted at the right, deleted at the left, 100 alive) do not grow the
    /// tree: emptied leaves leave it into their left siblings, and the nodes a run creates stay
    /// a small multiple of what 100 keys need. Retired nodes are dead and unlinked (`verify`).
    #[test]
    fn sliding_keys_do_not_grow_the_tree() {
        let shape = Shape::new(4).unwrap();
        let mut s = Store::new(shape);
        let t = BTree::new(0, shape);
        for k in 0..20_000u64 {
            t.insert(&mut s, k, k).unwrap();
            if k >= 100 {
                assert_eq!(t.remove(&mut s, k - 100).unwrap().value, Some(k - 100));
            }
            s.commit();
            if k % 1000 == 999 {
                let live: Vec<_> = (k - 99..=k).map(|k| (k, k)).collect();
                assert_eq!(verify(&s, t), live, "after key {k}");
            }
        }
        let linked = s.committed.len() - s.dead.len();
        // 100 keys in leaves of 2 to 4 (53 nodes in all when written).
        assert!(
            linked < 100,
            "{linked} nodes linked for 100 keys ({} dead of {})",
            s.dead.len(),
            s.committed.len()
        );
        assert!(s.dead.len() > 1000, "emptied leaves were retired: {}", s.dead.len());
    }

    /// A transaction that read internal nodes before a removal took a leaf out reaches the dead
    /// leaf through them and aborts, rather than read it as the owner of its old range (which
    /// its left sibling covers now).
    #[test]
    fn a_dead_node_reached_through_stale_nodes_aborts() {
        let shape = Shape::new(4).unwrap();
        let mut s = Store::new(shape);
        let t = BTree::new(0, shape);
        for k in 0..64 {
            t.insert(&mut s, k * 10, k).unwrap();
        }
        s.commit();
        let internal: Vec<_> = (0..s.committed.len())
            .filter(|&id| !t.node(&s.committed[id]).is_leaf())
            .map(|id| (id as NodeId, snapshot(&s.committed[id])))
            .collect();
        // Empty the leaf holding 300: it is not a first child, so it leaves the tree.
        let leaf = t.descend(&mut s, 300, None).unwrap().0;
        let keys: Vec<_> = {
            let n = t.node(&s.committed[leaf as usize]);
            (0..n.count()).map(|i| n.key(i)).collect()
        };
        for &k in &keys {
            t.remove(&mut s, k).unwrap();
        }
        s.commit();
        assert!(s.dead.contains(&leaf), "leaf {leaf} of keys {keys:?} was retired");
        assert_eq!(t.get(&mut s, 300).unwrap().value, None);
        verify(&s, t);
        s.stale.extend(internal);
        assert_eq!(t.get(&mut s, 300).unwrap_err().reason, AbortReason::WriteConflict);
        assert_eq!(t.get(&mut s, 0).unwrap().value, Some(0), "other leaves still answer");
    }

    /// Keys at both ends of the domain, including `u64::MAX`, and scans reaching it.
    #[test]
    fn extreme_keys() {
        let shape = Shape::new(3).unwrap();
        let mut s = Store::new(shape);
        let t = BTree::new(0, shape);
        let keys = [0, 1, 2, u64::MAX - 2, u64::MAX - 1, u64::MAX, 1 << 40, 1 << 63];
        for &k in &keys {
            assert_eq!(t.insert(&mut s, k, k ^ 1).unwrap(), None);
            s.commit();
        }
        let mut sorted = keys.to_vec();
        sorted.sort_unstable();
        let want: Vec<_> = sorted.iter().map(|&k| (k, k ^ 1)).collect();
        assert_eq!(verify(&s, t), want);
        assert_eq!(scan_all(&mut s, t, 0, u64::MAX), want);
        assert_eq!(scan_all(&mut s, t, u64::MAX, u64::MAX), vec![(u64::MAX, u64::MAX ^ 1)]);
        assert_eq!(scan_all(&mut s, t, 3, (1 << 40) - 1), vec![]);
        assert_eq!(t.get(&mut s, u64::MAX).unwrap().value, Some(u64::MAX ^ 1));
        assert_eq!(t.insert(&mut s, u64::MAX, 0).unwrap(), Some(u64::MAX ^ 1), "present");
    }

    /// Reads that see an internal node older than the nodes below it (a split committed
    /// between the two reads) still find every key, by following sibling links; and a scan
    /// tracks every leaf whose range it covers, in order.
    #[test]
    fn stale_internal_nodes_are_mended_by_sibling_links() {
        let shape = Shape::new(4).unwrap();
        let mut s = Store::new(shape);
        let t = BTree::new(0, shape);
        for k in 0..40 {
            t.insert(&mut s, k * 10, k).unwrap();
            s.commit();
        }
        // The root as a reader saw it, then splits under it: keys into every leaf.
        let old_root = snapshot(&s.committed[0]);
        for k in 0..400 {
            if k % 10 != 0 {
                t.insert(&mut s, k, 1000 + k).unwrap();
            }
        }
        s.commit();
        let all = verify(&s, t);
        assert_eq!(all.len(), 400);
        s.stale.insert(0, old_root);
        for &(k, v) in &all {
            assert_eq!(t.get(&mut s, k).unwrap().value, Some(v), "key {k} through a stale root");
        }
        assert_eq!(scan_all(&mut s, t, 0, 399), all);
        // The scan tracked the leaves in chain order, each once.
        let tracked = s.tracked.clone();
        let mut chain = Vec::new();
        let mut id = t.descend(&mut s, 0, None).unwrap().0;
        while id != NO_NODE {
            chain.push(id);
            id = t.node(&s.committed[id as usize]).right();
        }
        assert_eq!(tracked, chain);
        // An insert through the stale root lands in the right leaf too.
        assert_eq!(t.insert(&mut s, 1000, 7).unwrap(), None);
        s.stale.clear();
        s.commit();
        assert_eq!(t.get(&mut s, 1000).unwrap().value, Some(7));
        verify(&s, t);
    }

    /// A removal that finds a subtree keyless through a stale read of a one-child internal
    /// node, which a commit has since given a second child (its leaf split), aborts instead of
    /// taking the subtree out: marking the node dead would lose the new child's keys.
    #[test]
    fn a_subtree_that_gained_keys_since_it_was_read_stays() {
        let shape = Shape::new(4).unwrap();
        let mut s = Store::new(shape);
        let t = BTree::new(0, shape);
        for k in 0..200 {
            t.insert(&mut s, k * 10, k).unwrap();
        }
        s.commit();
        // A node above the leaves that is not its parent's first child, and its leaves.
        fn node(s: &Store, t: BTree, id: NodeId) -> Node<'_> {
            t.node(&s.committed[id as usize])
        }
        // `parents` are two levels above the leaves.
        let (mut parents, mut level) = (Vec::new(), vec![0]);
        while !node(&s, t, node(&s, t, level[0]).val(0)).is_leaf() {
            parents = level;
            level = parents
                .iter()
                .flat_map(|&id| (0..=node(&s, t, id).count()).map(move |i| (id, i)))
                .map(|(id, i)| node(&s, t, id).val(i))
                .collect();
        }
        let parent = *parents.first().expect("three levels or more");
        let x = node(&s, t, parent).val(1);
        let leaves: Vec<NodeId> =
            (0..=node(&s, t, x).count()).map(|j| node(&s, t, x).val(j)).collect();
        let keys = |s: &Store, leaf: NodeId| {
            let n = node(s, t, leaf);
            (0..n.count()).map(|j| n.key(j)).collect::<Vec<_>>()
        };
        // Its leaves but the first emptied: it is left with one child and no separator.
        for &leaf in &leaves[1..] {
            for k in keys(&s, leaf) {
                t.remove(&mut s, k).unwrap();
            }
        }
        s.commit();
        let first = leaves[0];
        assert_eq!((node(&s, t, x).count(), node(&s, t, x).val(0)), (0, first));
        let stale = snapshot(&s.committed[x as usize]);
        // A commit splits the one leaf: the node gets a separator and a second child.
        let low = keys(&s, first)[0];
        for k in 1..=4 {
            t.insert(&mut s, low + k, 1000 + k).unwrap();
        }
        s.commit();
        assert!(node(&s, t, x).count() >= 1, "the leaf split under the node");
        let before = verify(&s, t);
        // A transaction that read the node before that commit empties the first leaf.
        s.stale.insert(x as NodeId, stale);
        let mut result = Ok(());
        for k in keys(&s, first) {
            if let Err(e) = t.remove(&mut s, k) {
                result = Err(e);
                break;
            }
        }
        assert_eq!(result.unwrap_err().reason, AbortReason::WriteConflict);
        s.abort();
        s.stale.clear();
        assert_eq!(verify(&s, t), before, "nothing lost");
    }

    /// A removal that empties a parent's last child through a stale read of the parent, which
    /// a commit has since left with one separator fewer, finds the child's position again in
    /// the copy it writes (the stale position is past the copy's separators, whose vacated
    /// slot still names the child) and takes the child out.
    #[test]
    fn a_parent_that_lost_a_separator_since_it_was_read_is_searched_again() {
        let shape = Shape::new(4).unwrap();
        let mut s = Store::new(shape);
        let t = BTree::new(0, shape);
        fn node(s: &Store, id: NodeId) -> Node<'_> {
            BTree::new(0, s.shape).node(&s.committed[id as usize])
        }
        let mut k = 0;
        // A root over four leaves.
        while node(&s, 0).is_leaf() || node(&s, 0).count() < 3 {
            t.insert(&mut s, k, k).unwrap();
            s.commit();
            k += 1;
        }
        assert!(node(&s, node(&s, 0).val(0)).is_leaf(), "two levels");
        let root = node(&s, 0);
        let children: Vec<NodeId> = (0..=3).map(|i| root.val(i)).collect();
        let keys = |s: &Store, leaf: NodeId| {
            let n = node(s, leaf);
            (0..n.count()).map(|j| n.key(j)).collect::<Vec<_>>()
        };
        let stale = snapshot(&s.committed[0]);
        // A commit empties the third leaf, which leaves: the root has two separators.
        for key in keys(&s, children[2]) {
            t.remove(&mut s, key).unwrap();
        }
        s.commit();
        assert_eq!(node(&s, 0).count(), 2);
        let mut want = verify(&s, t);
        // A transaction that read the root before that commit empties the last leaf.
        s.stale.insert(0, stale);
        let last = keys(&s, children[3]);
        for &key in &last {
            assert_eq!(t.remove(&mut s, key).unwrap().value, Some(key));
        }
        s.commit();
        s.stale.clear();
        want.retain(|e| !last.contains(&e.0));
        assert_eq!(verify(&s, t), want);
        assert_eq!(node(&s, 0).count(), 1, "the last leaf left the root");
        assert!(s.dead.contains(&children[3]));
    }

    /// A transaction sees its own changes (private copies and new nodes), and a lookup of an
    /// absent key names the leaf that would hold it; a present key's lookup writes nothing.
    #[test]
    fn own_changes_and_what_is_written() {
        let shape = Shape::new(4).unwrap();
        let mut s = Store::new(shape);
        let t = BTree::new(0, shape);
        for k in 0..20 {
            t.insert(&mut s, k, k).unwrap();
        }
        assert_eq!(t.get(&mut s, 7).unwrap().value, Some(7), "own insert visible");
        s.abort();
        assert_eq!(verify(&s, t), vec![], "an aborted transaction left nothing");
        for k in 0..20 {
            t.insert(&mut s, k, k).unwrap();
        }
        s.commit();
        assert_eq!(t.insert(&mut s, 5, 99).unwrap(), Some(5));
        assert!(s.written.is_empty(), "a duplicate insert writes nothing");
        let miss = t.get(&mut s, 100).unwrap();
        assert_eq!(miss.value, None);
        assert_eq!(miss.leaf, t.descend(&mut s, 100, None).unwrap().0, "the leaf covering 100");
        assert_eq!(t.remove(&mut s, 5).unwrap().value, Some(5));
        assert_eq!(s.written.len(), 1, "a removal writes its leaf only");
        assert_eq!(t.get(&mut s, 5).unwrap().value, None, "own removal visible");
        s.commit();
        assert_eq!(verify(&s, t).len(), 19);
    }

    #[test]
    fn shape_bounds() {
        assert_eq!(Shape::new(2).unwrap_err(), "an index node holds 3 to 64 keys, not 2");
        assert!(Shape::new(65).is_err());
        assert_eq!(Shape::new(30).unwrap().bytes(), (3 + 60 + 1) * 8);
    }
}
