//! The direct serialization graph: edges in compressed rows, strongly connected components
//! (iterative Tarjan, so millions of transactions need no deep recursion) and short cycles
//! (breadth-first search inside one component).

use super::AnomalyClass;
use std::fmt;

/// An edge kind of the direct serialization graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum EdgeKind {
    /// Write-write: the target installed the next version after the source's.
    Ww = 0,
    /// Write-read: the target read the source's version.
    Wr = 1,
    /// Read-write (anti-dependency): the target replaced the version the source read.
    Rw = 2,
    /// Write-read on a predicate: the target's range read observed the source's insert/delete.
    PredWr = 3,
    /// Read-write on a predicate: the target's insert/delete changed a range the source read.
    PredRw = 4,
}

impl EdgeKind {
    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::PredWr => "wr(predicate)",
            EdgeKind::PredRw => "rw(predicate)",
        })
    }
}

/// One edge of a reported cycle.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CycleStep {
    /// Source transaction id.
    pub from: u64,
    /// Target transaction id.
    pub to: u64,
    /// Edge kind.
    pub kind: EdgeKind,
    /// Table of the key the edge is about.
    pub table: u32,
    /// The key.
    pub key: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: u32,
    to: u32,
    kind: EdgeKind,
    table: u32,
    key: u64,
}

/// Edges examined per component and class when looking for a cycle through a given edge; bounds
/// the work on huge components (a history without any isolation is one big component).
const EDGES_PER_COMPONENT: usize = 16;

/// The graph over committed transactions.
pub struct Graph {
    ids: Vec<u64>,
    edges: Vec<Edge>,
    /// `edges[start[n]..start[n + 1]]` leave node `n` (after `finish`).
    start: Vec<usize>,
}

const WW: u8 = EdgeKind::Ww.bit();
const WR: u8 = EdgeKind::Wr.bit() | EdgeKind::PredWr.bit();
const RW: u8 = EdgeKind::Rw.bit();
const PRW: u8 = EdgeKind::PredRw.bit();

impl Graph {
    /// A graph whose node `i` is the transaction with id `ids[i]`.
    pub fn new(ids: Vec<u64>) -> Self {
        Graph { ids, edges: Vec::new(), start: Vec::new() }
    }

    /// Adds an edge (duplicates are merged by `finish`).
    pub fn edge(&mut self, from: u32, to: u32, kind: EdgeKind, table: u32, key: u64) {
        debug_assert!(
            from != to && (from as usize) < self.ids.len() && (to as usize) < self.ids.len()
        );
        self.edges.push(Edge { from, to, kind, table, key });
    }

    /// Sorts the edges into rows.
    pub fn finish(&mut self) {
        self.edges.sort_unstable();
        self.edges.dedup();
        let n = self.ids.len();
        self.start = vec![0; n + 1];
        for e in &self.edges {
            self.start[e.from as usize + 1] += 1;
        }
        for i in 0..n {
            self.start[i + 1] += self.start[i];
        }
    }

    /// Edges per kind.
    pub fn counts(&self) -> [u64; 5] {
        let mut c = [0; 5];
        for e in &self.edges {
            c[e.kind as usize] += 1;
        }
        c
    }

    fn out(&self, n: u32) -> &[Edge] {
        &self.edges[self.start[n as usize]..self.start[n as usize + 1]]
    }

    /// Component id of every node in the subgraph of edges in `mask` (iterative Tarjan), and the
    /// size of each component.
    fn components(&self, mask: u8) -> (Vec<u32>, Vec<u32>) {
        let n = self.ids.len();
        const NONE: u32 = u32::MAX;
        let mut index = vec![NONE; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut comp = vec![NONE; n];
        let mut sizes = Vec::new();
        let mut stack = Vec::new();
        // (node, next edge offset)
        let mut call: Vec<(u32, usize)> = Vec::new();
        let mut next = 0u32;
        for root in 0..n as u32 {
            if index[root as usize] != NONE {
                continue;
            }
            call.push((root, self.start[root as usize]));
            index[root as usize] = next;
            low[root as usize] = next;
            next += 1;
            stack.push(root);
            on_stack[root as usize] = true;
            while let Some(&mut (v, ref mut at)) = call.last_mut() {
                let end = self.start[v as usize + 1];
                let mut descended = false;
                while *at < end {
                    let e = self.edges[*at];
                    *at += 1;
                    if e.kind.bit() & mask == 0 {
                        continue;
                    }
                    let w = e.to as usize;
                    if index[w] == NONE {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(e.to);
                        on_stack[w] = true;
                        call.push((e.to, self.start[w]));
                        descended = true;
                        break;
                    } else if on_stack[w] {
                        low[v as usize] = low[v as usize].min(index[w]);
                    }
                }
                if descended {
                    continue;
                }
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent as usize] = low[parent as usize].min(low[v as usize]);
                }
                if low[v as usize] == index[v as usize] {
                    let c = sizes.len() as u32;
                    let mut size = 0;
                    loop {
                        let w = stack.pop().expect("Tarjan stack holds the component");
                        on_stack[w as usize] = false;
                        comp[w as usize] = c;
                        size += 1;
                        if w == v {
                            break;
                        }
                    }
                    sizes.push(size);
                }
            }
        }
        (comp, sizes)
    }

    /// Shortest path from `src` to `dst` over edges in `mask` that stay inside component `c`.
    fn path(
        &self,
        src: u32,
        dst: u32,
        mask: u8,
        comp: &[u32],
        c: u32,
        seen: &mut Vec<u32>,
    ) -> Option<Vec<Edge>> {
        // `seen` holds each reached node's predecessor edge (MAX = unseen) and is reset only
        // where this search wrote, so that many searches in small components of a big graph
        // cost what they visit, not the graph's size each.
        let n = self.ids.len();
        if seen.len() != n {
            seen.clear();
            seen.resize(n, u32::MAX);
        }
        const ROOT: u32 = u32::MAX - 1;
        seen[src as usize] = ROOT;
        // The queue doubles as the list of reached nodes.
        let mut queue = vec![src];
        let mut head = 0;
        let mut found = None;
        while head < queue.len() {
            let v = queue[head];
            head += 1;
            if v == dst {
                let mut path = Vec::new();
                let mut at = dst;
                while seen[at as usize] != ROOT {
                    let e = self.edges[seen[at as usize] as usize];
                    path.push(e);
                    at = e.from;
                }
                path.reverse();
                found = Some(path);
                break;
            }
            let base = self.start[v as usize];
            for (i, e) in self.out(v).iter().enumerate() {
                if e.kind.bit() & mask == 0
                    || comp[e.to as usize] != c
                    || seen[e.to as usize] != u32::MAX
                {
                    continue;
                }
                seen[e.to as usize] = (base + i) as u32;
                queue.push(e.to);
            }
        }
        for v in queue {
            seen[v as usize] = u32::MAX;
        }
        found
    }

    fn steps(&self, edges: &[Edge]) -> Vec<CycleStep> {
        edges
            .iter()
            .map(|e| CycleStep {
                from: self.ids[e.from as usize],
                to: self.ids[e.to as usize],
                kind: e.kind,
                table: e.table,
                key: e.key,
            })
            .collect()
    }

    /// A cycle through edge `e` (closing path over `mask` inside component `c`).
    fn cycle_through(
        &self,
        e: Edge,
        mask: u8,
        comp: &[u32],
        c: u32,
        seen: &mut Vec<u32>,
    ) -> Option<Vec<Edge>> {
        let mut back = self.path(e.to, e.from, mask, comp, c, seen)?;
        back.insert(0, e);
        Some(back)
    }

    /// Edges inside non-trivial components of `comp` whose kind is in `kinds`, grouped by
    /// component, at most `EDGES_PER_COMPONENT` per component.
    fn inner_edges(&self, comp: &[u32], sizes: &[u32], kinds: u8) -> Vec<(u32, Vec<Edge>)> {
        let mut by: std::collections::BTreeMap<u32, Vec<Edge>> = Default::default();
        for e in &self.edges {
            let c = comp[e.from as usize];
            if e.kind.bit() & kinds != 0 && c == comp[e.to as usize] && sizes[c as usize] > 1 {
                let v = by.entry(c).or_default();
                if v.len() < EDGES_PER_COMPONENT {
                    v.push(*e);
                }
            }
        }
        by.into_iter().collect()
    }

    /// Every cycle class present: `(class, components showing it, one short cycle)`.
    pub fn cycles(&self) -> Vec<(AnomalyClass, u64, Vec<CycleStep>)> {
        let mut out: Vec<(AnomalyClass, u64, Vec<CycleStep>)> = Vec::new();
        let mut seen = Vec::new();
        let note = |class: AnomalyClass,
                    cycle: Vec<CycleStep>,
                    out: &mut Vec<(AnomalyClass, u64, Vec<CycleStep>)>| {
            match out.iter_mut().find(|o| o.0 == class) {
                Some(o) => {
                    o.1 += 1;
                    if cycle.len() < o.2.len() {
                        o.2 = cycle;
                    }
                }
                None => out.push((class, 1, cycle)),
            }
        };
        // G0: ww only.
        let (comp, sizes) = self.components(WW);
        for (c, edges) in self.inner_edges(&comp, &sizes, WW) {
            if let Some(cy) = self.cycle_through(edges[0], WW, &comp, c, &mut seen) {
                note(AnomalyClass::G0, self.steps(&cy), &mut out);
            }
        }
        // G1c: ww + wr, through at least one wr.
        let (comp, sizes) = self.components(WW | WR);
        for (c, edges) in self.inner_edges(&comp, &sizes, WR) {
            if let Some(cy) =
                edges.iter().find_map(|&e| self.cycle_through(e, WW | WR, &comp, c, &mut seen))
            {
                note(AnomalyClass::G1c, self.steps(&cy), &mut out);
            }
        }
        // Item anti-dependencies: lost update, G-single, G2-item.
        let mask = WW | WR | RW;
        let (comp, sizes) = self.components(mask);
        for (c, edges) in self.inner_edges(&comp, &sizes, RW) {
            let mut found = [false; 3];
            for &e in &edges {
                let lost = self.out(e.to).iter().find(|b| {
                    b.to == e.from && b.kind == EdgeKind::Ww && b.table == e.table && b.key == e.key
                });
                if let Some(b) = lost {
                    if !found[0] {
                        found[0] = true;
                        note(AnomalyClass::LostUpdate, self.steps(&[e, *b]), &mut out);
                    }
                } else if let Some(cy) = self.cycle_through(e, WW | WR, &comp, c, &mut seen) {
                    if !found[1] {
                        found[1] = true;
                        note(AnomalyClass::GSingle, self.steps(&cy), &mut out);
                    }
                } else if let Some(cy) = self.cycle_through(e, mask, &comp, c, &mut seen) {
                    if !found[2] {
                        found[2] = true;
                        note(AnomalyClass::G2Item, self.steps(&cy), &mut out);
                    }
                }
            }
        }
        // G2: through a predicate anti-dependency.
        let all = mask | PRW;
        let (comp, sizes) = self.components(all);
        for (c, edges) in self.inner_edges(&comp, &sizes, PRW) {
            if let Some(cy) =
                edges.iter().find_map(|&e| self.cycle_through(e, all, &comp, c, &mut seen))
            {
                note(AnomalyClass::G2, self.steps(&cy), &mut out);
            }
        }
        out
    }
}
