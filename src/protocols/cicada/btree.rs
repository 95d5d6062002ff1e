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
        // Relaxed: a node's words are read from the version the transaction sees (its private copy,
        // or a committed version reached through Acquire loads and validated at commit), written
        // only in a private copy before it is published.
        self.w[i].load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn set(self, i: usize, v: u64) {
        // Relaxed: only a private copy is written; its commit publishes it (Release).
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
mod tests;
