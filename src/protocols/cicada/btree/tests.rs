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
    fn walk(s: &Store, t: BTree, id: NodeId, bounds: (Option<u64>, u64, NodeId), acc: &mut Acc) {
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
                        let want: Vec<_> = pending.range(key..=hi).map(|(k, v)| (*k, *v)).collect();
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
    let leaves: Vec<NodeId> = (0..=node(&s, t, x).count()).map(|j| node(&s, t, x).val(j)).collect();
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
