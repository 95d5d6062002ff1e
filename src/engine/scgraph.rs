//! Static conflict analysis of a workload's transaction templates: the SC-graph of transaction
//! chopping (Shasha et al., TODS 1995) as IC3 builds and uses it (Wang et al., SIGMOD 2016,
//! §3.1, §3.3, §4.2, §5.1).
//!
//! **The graph.** Every transaction type that writes ([`TxnType`] templates whose pieces
//! declare a write access; read-only types run on snapshots, as in IC3 and Silo, and take no
//! part) appears as *two instances*, each a chain of its template's pieces joined by
//! S(ibling)-edges in execution order. Two pieces of different instances (the two instances of
//! one type included) are joined by a C(onflict)-edge when they access a common column of a
//! common table and at least one of the two writes it. A cycle through both kinds of edges (an
//! SC-cycle) is where interleaving pieces may break serializability; IC3's runtime constrains
//! the pieces on such cycles instead of merging them away, as chopping would.
//!
//! **Merging deadlock-prone cycles (§3.3).** Some SC-cycles cannot be constrained without a
//! deadlock: those whose conflicting pieces reach common tables in different orders, or
//! several of whose conflicting pieces of one transaction touch a common table. IC3 removes
//! them by combining pieces:
//!
//! 1. S-edges are directed in execution order;
//! 2. pieces joined by C-edges, transitively, become one vertex;
//! 3. vertices on a common directed cycle are merged until the graph is acyclic (here in one
//!    step: the strongly connected components of the vertex graph);
//! 4. the pieces of one instance in a merged vertex are combined into one piece.
//!
//! Step 3 also makes a combined piece contiguous: a piece between two pieces of one vertex has
//! an S-edge from the vertex and one back to it, so it is on the cycle. The construction is
//! symmetric in the two instances of a type, so both are chopped alike, and the result is
//! described per type ([`Chopping`]).
//!
//! **What the runtime asks.** After merging, all the pieces of one instance that share a
//! C-edge with a given piece lie in that piece's vertex, so they were combined: a piece `p` of
//! type `T` conflicts with *at most one* piece of any type `T'` ([`Analysis::partner`]; IC3's
//! case 2, Algorithm 1 line 6). When it conflicts with none of `T'`, the *rendezvous piece*
//! (§4.2) is a piece of `T'` that conflicts with a later piece of `T`: once it has committed,
//! `T'` forms no new conflict with `T` through `p`, so `p` waits for it instead of `T'`'s
//! commit ([`Analysis::rendezvous`]; the earliest such piece, the shortest wait; IC3's paper
//! does not say which of several to take).
//!
//! **Commutative accumulations (§4.3).** An accumulate access ([`AccessMode::Accumulate`],
//! `Tx::accumulate`) is *deferred*, applied at the transaction's commit and left out of the
//! C-edges, when the analysis shows nothing it could fail to commute with ([`Deferral`]): no
//! analysed template reads its columns, or writes them otherwise (inserts and deletes write
//! every column), or, for a runtime that cannot apply an accumulation under another
//! transaction's uncommitted write of the same row ([`Deferral::Rows`]), writes its table at
//! all. Read-only types are not
//! analysed: they read committed data, into which a deferred accumulation goes at its
//! transaction's commit point. An accumulation that cannot be deferred counts as a write of
//! its columns and runs in its piece. The paper leaves out C-edges between any two
//! commutative operations; deferring them all, and only where that is safe, is the same edge
//! set where it matters (TPC-C's W_YTD) and correct everywhere else.
//!
//! **Untracked reads.** A read access of columns that no analysed template writes or
//! accumulates into (TPC-C's ITEM, W_TAX, D_TAX, C_DISCOUNT, ...) takes no part in C-edges, at
//! either granularity: only transactions outside the templates could change such a column, so
//! the runtime need not track the read (IC3 leaves it out of its accessor lists and guards
//! against those other writers instead: see `protocols::ic3`). At column granularity it had no
//! edge anyway; at table granularity it would otherwise conflict with every write of the table.
//! Like the deferrals, which columns are written is decided over all the workload's types.
//!
//! **Changing the mix (§4.5).** [`Analysis::of_types`] analyses a mix of some of the
//! workload's types, and [`Analysis::transition`] says how transactions running on one mix's
//! graph move to another's without stopping: side by side, or through the transitional graph
//! ([`Transition`]). Adding a type only adds C-edges, so pieces only merge; removing one only
//! splits them, so the transitional graph of a removal is that of the addition it undoes.
//!
//! The graphs are small (two instances of a handful of types with a few pieces each), so
//! vertex reachability is a plain transitive closure rather than a graph library's SCC.

use super::procedure::{AccessMode, TableAccess, TxnType};
use crate::storage::projection::Columns;
use crate::storage::TableId;
use std::fmt::Write as _;
use std::ops::Range;

/// One transaction type's pieces after merging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chopping {
    /// The type's index in the workload's [`TxnType`] table.
    pub txn_type: usize,
    /// The type's name.
    pub name: &'static str,
    /// The pieces in execution order, each a range of the template's pieces.
    pub pieces: Vec<Range<usize>>,
}

impl Chopping {
    /// The piece that template piece `template_piece` belongs to.
    pub fn piece_of(&self, template_piece: usize) -> usize {
        self.pieces.iter().position(|r| r.contains(&template_piece)).expect("a template piece")
    }
}

/// A transaction type's pieces on a transitional SC-graph (§4.5): outer pieces, each validated
/// and committed as one, and inside each the sub-pieces whose C-edges are enforced (waited
/// for, and dependencies tracked, at each sub-piece's end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nested {
    /// The type's index in the workload's [`TxnType`] table.
    pub txn_type: usize,
    /// The type's name.
    pub name: &'static str,
    /// The outer pieces in order, each with its sub-pieces, as ranges of template pieces.
    pub pieces: Vec<(Range<usize>, Vec<Range<usize>>)>,
}

/// How a running workload moves from one analysis to another (IC3 §4.5): from one mix of its
/// types to another, while transactions run, without stopping them.
///
/// When no type common to both analyses is chopped differently and one graph's C-edges include
/// the other's (adding a type that merges nothing, Fig. 8; removing one that splits nothing),
/// transactions may run on either graph side by side until every worker has moved to the new
/// one: `compatible`. Otherwise the common types run on the *transitional* graph until then:
/// each outer piece is a piece of the coarser chopping (the pieces merged in either graph),
/// made of sub-pieces of the finer (Fig. 10): sub-pieces keep the order the old graph
/// enforces among its transactions, and the outer pieces commit as the new graph's do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The types both analyses analyse, on the transitional graph.
    pub nested: Vec<Nested>,
    /// Whether both graphs may be used side by side (see above).
    pub compatible: bool,
}

impl Transition {
    /// The transition in words: whether the graphs can run side by side, else each common
    /// type's outer pieces and their sub-pieces (named by template piece).
    pub fn text(&self, types: &[TxnType]) -> String {
        let mut s = String::new();
        if self.compatible {
            s.push_str("compatible: no common type is chopped differently and one graph's C-edges include the other's; transactions run on either graph until every worker uses the new one\n");
            return s;
        }
        s.push_str("transitional SC-graph: the common types run with these outer pieces (committed as one) and sub-pieces (constrained one by one) until every worker uses the new graph\n");
        for n in &self.nested {
            let tpl = &types[n.txn_type];
            let _ = writeln!(s, "  {}:", n.name);
            for (p, (outer, subs)) in n.pieces.iter().enumerate() {
                let names = |r: &Range<usize>| {
                    r.clone().map(|x| tpl.pieces[x].name).collect::<Vec<_>>().join(" + ")
                };
                let inner: Vec<String> = subs.iter().map(|r| format!("[{}]", names(r))).collect();
                let _ = writeln!(s, "    piece {p}: {}", inner.join(" "));
                debug_assert_eq!(outer.start, subs[0].start);
            }
        }
        s
    }
}

/// A C-edge between pieces of two analysed types (indices into [`Analysis::types`]): piece `a.1`
/// of type `a.0` and piece `b.1` of type `b.0`, with `a <= b`; `a.0 == b.0` for a conflict
/// between the two instances of one type (then `a == b` is a piece conflicting with itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CEdge {
    /// One end: (analysed type, piece).
    pub a: (usize, usize),
    /// The other end.
    pub b: (usize, usize),
}

/// What two accesses must share to conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Granularity {
    /// A column of a table (the paper's analysis, §5.1).
    Column,
    /// A table: what a runtime that tracks conflicts per record (not per column) needs, so
    /// that every dependency it finds between two pieces has a C-edge behind it (IC3 here).
    Table,
}

/// Which commutative accumulations the analysis defers to commit (§4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Deferral {
    /// Those into columns that no analysed template reads or writes otherwise: the runtime
    /// applies them under uncommitted writes of the row's other columns (IC3 without
    /// snapshots; the paper's per-column analysis).
    #[cfg_attr(feature = "cli", value(name = "on"))]
    #[serde(rename = "on")]
    Columns,
    /// Those into tables that no analysed template writes otherwise (nor reads the columns
    /// of): for a runtime that cannot apply an accumulation under another transaction's
    /// uncommitted write of the row (IC3 with snapshots).
    #[serde(rename = "rows")]
    Rows,
    /// None: every accumulation counts as a write of its columns (IC3's factor analysis,
    /// §6.5).
    #[serde(rename = "off")]
    Off,
}

impl Deferral {
    /// The command-line word.
    pub fn name(self) -> &'static str {
        match self {
            Deferral::Columns => "on",
            Deferral::Rows => "rows",
            Deferral::Off => "off",
        }
    }
}

impl Granularity {
    /// The command-line word.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Column => "column",
            Granularity::Table => "table",
        }
    }
}

/// The analysis of a workload's templates (see the module docs).
#[derive(Clone, Debug)]
pub struct Analysis {
    /// What two accesses must share to conflict.
    pub granularity: Granularity,
    /// The analysed types (those that write), in template order, with their pieces.
    pub types: Vec<Chopping>,
    /// The types left out: they write nothing (run on snapshots).
    pub read_only: Vec<&'static str>,
    /// The C-edges between pieces, sorted, each once.
    pub edges: Vec<CEdge>,
    /// The tables whose accumulations are deferred to commit and left out of the C-edges
    /// (see the module docs), sorted.
    pub deferred: Vec<TableId>,
    /// The tables with accumulations that count as writes instead, sorted.
    pub not_deferred: Vec<TableId>,
    /// Per table id: the columns the analysed templates of every mix write or accumulate into
    /// (reads of other columns are untracked: see the module docs).
    written: Vec<Columns>,
    /// Per table id: the columns the deferred accumulations into it change (0 where none is
    /// deferred).
    deferred_columns: Vec<Columns>,
    /// Per analysed type, per piece, per analysed type: the piece it conflicts with there.
    partner: Vec<Vec<Vec<Option<usize>>>>,
    /// Per analysed type, per piece, per analysed type: its rendezvous piece there.
    rendezvous: Vec<Vec<Vec<Option<usize>>>>,
    /// The table names, for printing (indexed by table id), if given.
    table_names: Vec<String>,
}

/// A C-edge between (workload type, piece) ends, the smaller end first.
type WorkloadEdge = ((usize, usize), (usize, usize));

/// A piece of one of the two instances: (analysed type, instance 0 or 1, template piece).
type Node = (usize, usize, usize);

impl Analysis {
    /// Analyses the templates `types` (indexed like the workload's) at column granularity.
    pub fn new(types: &[TxnType]) -> Self {
        Self::with_granularity(types, Granularity::Column)
    }

    /// Analyses the templates `types` with conflicts at granularity `g`, deferring the
    /// accumulations that can be ([`Deferral::Columns`]).
    pub fn with_granularity(types: &[TxnType], g: Granularity) -> Self {
        Self::with_options(types, g, Deferral::Columns)
    }

    /// Analyses the templates `types` with conflicts at granularity `g`, deferring the
    /// accumulations `deferral` says.
    pub fn with_options(types: &[TxnType], g: Granularity, deferral: Deferral) -> Self {
        let all: Vec<usize> = (0..types.len()).collect();
        Self::of_types(types, &all, g, deferral)
    }

    /// [`Analysis::with_options`] of the workload's types `subset` only (indices into
    /// `types`, which keep indexing the workload's types): a mix that runs some of them.
    ///
    /// Which accumulations are deferred is decided over *all* the workload's types, not the
    /// mix's: then no change of the mix changes it, and so neither which template pieces
    /// conflict ([`Analysis::conflicts`]). (A transaction still deferring an accumulation into
    /// a table that a type added meanwhile reads would break what the analysis promised.)
    pub fn of_types(
        types: &[TxnType],
        subset: &[usize],
        g: Granularity,
        deferral: Deferral,
    ) -> Self {
        let writing: Vec<usize> = (0..types.len()).filter(|t| writes(&types[*t])).collect();
        let analysed: Vec<usize> = writing.iter().copied().filter(|t| subset.contains(t)).collect();
        let (deferred, not_deferred) = deferrals(types, &writing, deferral);
        let mut deferred_columns = columns_by(types, &writing, |m| m == AccessMode::Accumulate);
        let written = columns_by(types, &writing, |m| m != AccessMode::Read);
        for (t, c) in deferred_columns.iter_mut().enumerate() {
            if deferred.binary_search(&TableId(t as u32)).is_err() {
                *c = 0;
            }
        }
        let effects = Effects { deferred: &deferred, written: &written };
        let conflict =
            |a: &TxnType, p: usize, b: &TxnType, q: usize| conflict(a, p, b, q, g, effects);
        let read_only = (0..types.len())
            .filter(|t| subset.contains(t) && !analysed.contains(t))
            .map(|t| types[t].name)
            .collect();
        let tpl = |a: usize| &types[analysed[a]];
        // Nodes: every template piece of both instances of every analysed type.
        let mut nodes: Vec<Node> = Vec::new();
        for a in 0..analysed.len() {
            for i in 0..2 {
                nodes.extend((0..tpl(a).pieces.len()).map(|p| (a, i, p)));
            }
        }
        let index = |n: Node| nodes.iter().position(|&m| m == n).expect("a node");
        // Step 2: pieces joined by C-edges, transitively, form one vertex (union-find).
        let mut parent: Vec<usize> = (0..nodes.len()).collect();
        fn find(parent: &mut [usize], x: usize) -> usize {
            let mut r = x;
            while parent[r] != r {
                r = parent[r];
            }
            parent[x] = r;
            r
        }
        for x in 0..nodes.len() {
            for y in x + 1..nodes.len() {
                let (n, m) = (nodes[x], nodes[y]);
                if (n.0, n.1) != (m.0, m.1) && conflict(tpl(n.0), n.2, tpl(m.0), m.2) {
                    let (rx, ry) = (find(&mut parent, x), find(&mut parent, y));
                    parent[rx] = ry;
                }
            }
        }
        let vertex: Vec<usize> = (0..nodes.len()).map(|x| find(&mut parent, x)).collect();
        // Step 3: the vertices on a common directed cycle of S-edges merge (mutual
        // reachability in the transitive closure of the vertex graph).
        let n = nodes.len();
        let mut reach = vec![vec![false; n]; n];
        for x in 0..n {
            reach[vertex[x]][vertex[x]] = true;
            let (a, i, p) = nodes[x];
            if p + 1 < tpl(a).pieces.len() {
                reach[vertex[x]][vertex[index((a, i, p + 1))]] = true;
            }
        }
        for k in 0..n {
            let via = reach[k].clone();
            for row in reach.iter_mut().filter(|row| row[k]) {
                for (r, &v) in row.iter_mut().zip(&via) {
                    *r |= v;
                }
            }
        }
        // The merged vertex of a node: the smallest vertex on a common cycle with its own.
        let merged: Vec<usize> = (0..n)
            .map(|x| (0..n).find(|&v| reach[vertex[x]][v] && reach[v][vertex[x]]).expect("itself"))
            .collect();
        // Step 4: an instance's consecutive pieces in one merged vertex form one piece (instance
        // 0 stands for both: the construction is symmetric).
        let choppings: Vec<Chopping> = (0..analysed.len())
            .map(|a| {
                let mut pieces: Vec<Range<usize>> = Vec::new();
                for p in 0..tpl(a).pieces.len() {
                    let v = merged[index((a, 0, p))];
                    match pieces.last_mut() {
                        Some(r) if merged[index((a, 0, r.start))] == v => r.end = p + 1,
                        _ => pieces.push(p..p + 1),
                    }
                }
                Chopping { txn_type: analysed[a], name: tpl(a).name, pieces }
            })
            .collect();
        // C-edges between the final pieces.
        let mut edges = Vec::new();
        for (a, ca) in choppings.iter().enumerate() {
            for (b, cb) in choppings.iter().enumerate().skip(a) {
                for (p, rp) in ca.pieces.iter().enumerate() {
                    for (q, rq) in cb.pieces.iter().enumerate() {
                        if (a, p) > (b, q) {
                            continue;
                        }
                        let hit =
                            rp.clone().any(|x| rq.clone().any(|y| conflict(tpl(a), x, tpl(b), y)));
                        if hit {
                            edges.push(CEdge { a: (a, p), b: (b, q) });
                        }
                    }
                }
            }
        }
        edges.sort();
        let mut analysis = Analysis {
            granularity: g,
            types: choppings,
            read_only,
            edges,
            deferred,
            not_deferred,
            written,
            deferred_columns,
            partner: Vec::new(),
            rendezvous: Vec::new(),
            table_names: Vec::new(),
        };
        analysis.tabulate();
        analysis
    }

    /// Whether template piece `p` of the workload's type `t` and template piece `q` of its type
    /// `u` conflict (`types` being the templates the analysis was made of): whether a C-edge
    /// joins them in any graph that has both. The same whatever the mix (see
    /// [`Analysis::of_types`]).
    pub fn conflicts(&self, types: &[TxnType], t: usize, p: usize, u: usize, q: usize) -> bool {
        conflict(&types[t], p, &types[u], q, self.granularity, self.effects())
    }

    fn effects(&self) -> Effects<'_> {
        Effects { deferred: &self.deferred, written: &self.written }
    }

    /// The columns of `table` that analysed templates (of any mix) write or accumulate into: a
    /// read of none of them is untracked (see the module docs).
    pub fn written(&self, table: TableId) -> Columns {
        self.written.get(table.index()).copied().unwrap_or(0)
    }

    /// Whether the accumulations into `table` are deferred to commit.
    pub fn defers(&self, table: TableId) -> bool {
        self.deferred.binary_search(&table).is_ok()
    }

    /// The columns of `table` that deferred accumulations change (0 where none is deferred):
    /// no analysed template reads them or writes them otherwise.
    pub fn deferred_columns(&self, table: TableId) -> Columns {
        self.deferred_columns.get(table.index()).copied().unwrap_or(0)
    }

    /// How analysed templates' access `a` takes part in conflicts: `None` for a deferred
    /// accumulation or an untracked read (none), an accumulation that is not deferred as a
    /// write.
    pub fn effective(&self, a: &TableAccess) -> Option<AccessMode> {
        effective(a, self.effects())
    }

    /// The C-edges with their ends named by workload type (not analysed type), sorted.
    fn workload_edges(&self) -> Vec<WorkloadEdge> {
        let named = |(a, p): (usize, usize)| (self.types[a].txn_type, p);
        let mut e: Vec<_> = self
            .edges
            .iter()
            .map(|e| {
                let (x, y) = (named(e.a), named(e.b));
                (x.min(y), x.max(y))
            })
            .collect();
        e.sort_unstable();
        e
    }

    /// How a running workload moves from this analysis to `next` (of the same workload's
    /// types, another mix: §4.5). See [`Transition`].
    pub fn transition(&self, next: &Analysis) -> Transition {
        let mut nested = Vec::new();
        let mut same_pieces = true;
        for old in &self.types {
            let Some(new) = next.types.iter().find(|c| c.txn_type == old.txn_type) else {
                continue;
            };
            same_pieces &= old.pieces == new.pieces;
            // A boundary between template pieces bounds an outer piece when both choppings
            // have it, a sub-piece when either has it.
            let starts = |c: &Chopping| c.pieces.iter().map(|r| r.start).collect::<Vec<_>>();
            let (a, b) = (starts(old), starts(new));
            let end = old.pieces.last().map_or(0, |r| r.end);
            let cut = |bounds: Vec<usize>| -> Vec<Range<usize>> {
                let mut bounds = bounds;
                bounds.push(end);
                bounds.windows(2).map(|w| w[0]..w[1]).collect()
            };
            let outer = cut(a.iter().copied().filter(|k| b.contains(k)).collect());
            let mut all: Vec<usize> = a.iter().chain(&b).copied().collect();
            all.sort_unstable();
            all.dedup();
            let sub = cut(all);
            let pieces = outer
                .into_iter()
                .map(|o| {
                    let inner = sub.iter().filter(|s| o.contains(&s.start)).cloned().collect();
                    (o, inner)
                })
                .collect();
            nested.push(Nested { txn_type: old.txn_type, name: old.name, pieces });
        }
        let (old_edges, new_edges) = (self.workload_edges(), next.workload_edges());
        let within = |x: &[WorkloadEdge], y: &[WorkloadEdge]| x.iter().all(|e| y.contains(e));
        let compatible =
            same_pieces && (within(&old_edges, &new_edges) || within(&new_edges, &old_edges));
        Transition { nested, compatible }
    }

    /// Names the tables (by table id) in what [`Analysis::text`] and [`Analysis::dot`] print.
    pub fn with_table_names(mut self, names: Vec<String>) -> Self {
        self.table_names = names;
        self
    }

    /// Fills the runtime's tables from the C-edges.
    fn tabulate(&mut self) {
        let k = self.types.len();
        let blank = |t: &Chopping| vec![vec![None; k]; t.pieces.len()];
        self.partner = self.types.iter().map(blank).collect();
        self.rendezvous = self.types.iter().map(blank).collect();
        for e in &self.edges {
            for (x, y) in [(e.a, e.b), (e.b, e.a)] {
                let slot = &mut self.partner[x.0][x.1][y.0];
                debug_assert!(slot.is_none_or(|q| q == y.1), "merging left two partners");
                *slot = Some(y.1);
            }
        }
        for t in 0..k {
            for p in 0..self.types[t].pieces.len() {
                for u in 0..k {
                    if self.partner[t][p][u].is_some() {
                        continue;
                    }
                    // The earliest piece of `u` that conflicts with a later piece of `t`.
                    let later = p + 1..self.types[t].pieces.len();
                    self.rendezvous[t][p][u] = later.filter_map(|q| self.partner[t][q][u]).min();
                }
            }
        }
    }

    /// The analysed type of the workload's type `txn_type`, if it is analysed.
    pub fn analysed(&self, txn_type: usize) -> Option<usize> {
        self.types.iter().position(|c| c.txn_type == txn_type)
    }

    /// Whether piece `p` of analysed type `t` has a C-edge at all (IC3's case 1 when not).
    pub fn conflicting(&self, t: usize, p: usize) -> bool {
        self.partner[t][p].iter().any(Option::is_some)
    }

    /// The piece of analysed type `u` that piece `p` of analysed type `t` conflicts with, if
    /// any (at most one; see the module docs).
    pub fn partner(&self, t: usize, p: usize, u: usize) -> Option<usize> {
        self.partner[t][p][u]
    }

    /// The rendezvous piece in analysed type `u` of piece `p` of analysed type `t`, when `p`
    /// has no partner there (see the module docs).
    pub fn rendezvous(&self, t: usize, p: usize, u: usize) -> Option<usize> {
        self.rendezvous[t][p][u]
    }

    fn table_name(&self, t: u32) -> String {
        self.table_names.get(t as usize).cloned().unwrap_or_else(|| format!("table {t}"))
    }

    /// The analysis in words: each type's pieces (and the template pieces merged into each),
    /// the C-edges and the rendezvous pieces.
    pub fn text(&self, types: &[TxnType]) -> String {
        let mut s = String::new();
        let (before, after): (usize, usize) = self
            .types
            .iter()
            .map(|c| (types[c.txn_type].pieces.len(), c.pieces.len()))
            .fold((0, 0), |(x, y), (a, b)| (x + a, y + b));
        let _ = writeln!(
            s,
            "{} transaction types analysed (conflicts per {}), {before} template pieces -> \
             {after} pieces after merging deadlock-prone cycles; {} C-edges",
            self.types.len(),
            self.granularity.name(),
            self.edges.len()
        );
        if !self.read_only.is_empty() {
            let _ = writeln!(
                s,
                "read-only (run on snapshots, not analysed): {}",
                self.read_only.join(", ")
            );
        }
        let names = |ts: &[TableId]| -> String {
            ts.iter().map(|t| self.table_name(t.0)).collect::<Vec<_>>().join(", ")
        };
        if !self.deferred.is_empty() {
            let _ = writeln!(
                s,
                "accumulations applied at commit, outside the C-edges (a:): {}",
                names(&self.deferred)
            );
        }
        if !self.not_deferred.is_empty() {
            let _ = writeln!(
                s,
                "accumulations run as writes (the table is read or written otherwise): {}",
                names(&self.not_deferred)
            );
        }
        let mut untracked: Vec<TableId> = self
            .types
            .iter()
            .flat_map(|c| types[c.txn_type].pieces.iter().flat_map(|p| p.accesses))
            .filter(|a| a.mode == AccessMode::Read && self.effective(a).is_none())
            .map(|a| a.table)
            .collect();
        untracked.sort_unstable();
        untracked.dedup();
        if !untracked.is_empty() {
            let _ = writeln!(
                s,
                "reads of columns no template writes, untracked and outside the C-edges (u:): {}",
                names(&untracked)
            );
        }
        for (t, c) in self.types.iter().enumerate() {
            let tpl = &types[c.txn_type];
            let _ = writeln!(
                s,
                "\n{} ({} template pieces -> {}):",
                c.name,
                tpl.pieces.len(),
                c.pieces.len()
            );
            for (p, r) in c.pieces.iter().enumerate() {
                let names: Vec<&str> = r.clone().map(|x| tpl.pieces[x].name).collect();
                let merged = if r.len() > 1 { "  (merged)" } else { "" };
                let mut tables: Vec<String> = r
                    .clone()
                    .flat_map(|x| tpl.pieces[x].accesses.iter())
                    .map(|a| {
                        let m = match (a.mode, self.effective(a)) {
                            (AccessMode::Read, None) => "u",
                            (_, None) => "a",
                            (_, Some(AccessMode::Read)) => "r",
                            (_, Some(_)) => "w",
                        };
                        format!("{m}:{}", self.table_name(a.table.0))
                    })
                    .collect();
                tables.dedup();
                let _ = writeln!(
                    s,
                    "  piece {p}: {}{merged}  [{}]",
                    names.join(" + "),
                    tables.join(" ")
                );
                let conflicts: Vec<String> = (0..self.types.len())
                    .filter_map(|u| {
                        self.partner(t, p, u).map(|q| format!("{}/{q}", self.types[u].name))
                    })
                    .collect();
                if conflicts.is_empty() {
                    let _ = writeln!(s, "    no C-edge: runs unconstrained");
                } else {
                    let _ = writeln!(s, "    C-edges: {}", conflicts.join(", "));
                }
                let rv: Vec<String> = (0..self.types.len())
                    .filter_map(|u| {
                        self.rendezvous(t, p, u).map(|q| format!("{}/{q}", self.types[u].name))
                    })
                    .collect();
                if !rv.is_empty() && !conflicts.is_empty() {
                    let _ = writeln!(s, "    rendezvous: {}", rv.join(", "));
                }
            }
        }
        s
    }

    /// The SC-graph in Graphviz's DOT language: two instances per type, S-edges within them,
    /// C-edges (dashed) between them, each piece labelled with the template pieces it holds.
    pub fn dot(&self, types: &[TxnType]) -> String {
        let mut s = String::from("graph sc {\n  rankdir=LR;\n  node [shape=box];\n");
        for (t, c) in self.types.iter().enumerate() {
            let tpl = &types[c.txn_type];
            for i in 0..2 {
                let prime = if i == 0 { "" } else { "'" };
                let _ =
                    writeln!(s, "  subgraph cluster_{t}_{i} {{\n    label=\"{}{prime}\";", c.name);
                for (p, r) in c.pieces.iter().enumerate() {
                    let names: Vec<&str> = r.clone().map(|x| tpl.pieces[x].name).collect();
                    let _ = writeln!(s, "    n{t}_{i}_{p} [label=\"{}\"];", names.join("+"));
                }
                for p in 1..c.pieces.len() {
                    let _ = writeln!(s, "    n{t}_{i}_{} -- n{t}_{i}_{p};", p - 1);
                }
                s.push_str("  }\n");
            }
        }
        for e in &self.edges {
            let (a, b) = (e.a, e.b);
            // Between the two instances: a -- b' (and b -- a' for two pieces of one type).
            let _ = writeln!(s, "  n{}_0_{} -- n{}_1_{} [style=dashed];", a.0, a.1, b.0, b.1);
            if a.0 != b.0 {
                let _ = writeln!(s, "  n{}_0_{} -- n{}_1_{} [style=dashed];", b.0, b.1, a.0, a.1);
            } else if a.1 != b.1 {
                let _ = writeln!(s, "  n{}_0_{} -- n{}_1_{} [style=dashed];", a.0, b.1, a.0, a.1);
            }
        }
        s.push_str("}\n");
        s
    }
}

/// Whether a template writes anything (an accumulation is a write).
fn writes(t: &TxnType) -> bool {
    t.pieces.iter().flat_map(|p| p.accesses.iter()).any(|a| a.mode != AccessMode::Read)
}

/// The tables whose accumulations the analysed types `analysed` of `types` may defer (as
/// `deferral` allows), and the others with accumulations; see the module docs.
fn deferrals(
    types: &[TxnType],
    analysed: &[usize],
    deferral: Deferral,
) -> (Vec<TableId>, Vec<TableId>) {
    let accesses =
        || analysed.iter().flat_map(|&t| types[t].pieces.iter().flat_map(|p| p.accesses.iter()));
    let mut tables: Vec<TableId> =
        accesses().filter(|a| a.mode == AccessMode::Accumulate).map(|a| a.table).collect();
    tables.sort_unstable();
    tables.dedup();
    tables.into_iter().partition(|&t| {
        let summed = accesses()
            .filter(|a| a.table == t && a.mode == AccessMode::Accumulate)
            .fold(0, |m, a| m | a.columns);
        deferral != Deferral::Off
            && !accesses().filter(|a| a.table == t).any(|a| match a.mode {
                AccessMode::Accumulate => false,
                AccessMode::Read => a.columns & summed != 0,
                AccessMode::Write => deferral == Deferral::Rows || a.columns & summed != 0,
            })
    })
}

/// Per table id, the columns the analysed types `analysed` of `types` touch by the access
/// modes `mode` picks.
fn columns_by(
    types: &[TxnType],
    analysed: &[usize],
    mode: impl Fn(AccessMode) -> bool,
) -> Vec<Columns> {
    let mut written: Vec<Columns> = Vec::new();
    let accesses = analysed.iter().flat_map(|&t| types[t].pieces.iter().flat_map(|p| p.accesses));
    for a in accesses.filter(|a| mode(a.mode)) {
        let t = a.table.index();
        written.resize(written.len().max(t + 1), 0);
        written[t] |= a.columns;
    }
    written
}

/// What decides how an access takes part in conflicts: the deferred tables, sorted, and the
/// columns written per table.
#[derive(Clone, Copy)]
struct Effects<'a> {
    deferred: &'a [TableId],
    written: &'a [Columns],
}

/// How access `a` takes part in conflicts (see [`Analysis::effective`]).
fn effective(a: &TableAccess, e: Effects<'_>) -> Option<AccessMode> {
    match a.mode {
        AccessMode::Accumulate if e.deferred.binary_search(&a.table).is_ok() => None,
        AccessMode::Accumulate => Some(AccessMode::Write),
        // (A read of no column, of the row's presence, is tracked.)
        AccessMode::Read
            if a.columns != 0
                && a.columns & e.written.get(a.table.index()).copied().unwrap_or(0) == 0 =>
        {
            None
        }
        m => Some(m),
    }
}

/// Whether template piece `p` of `a` and template piece `q` of `b` conflict: a common column of
/// a common table (a common table at table granularity), one of them writing it; deferred
/// accumulations and untracked reads take no part.
fn conflict(a: &TxnType, p: usize, b: &TxnType, q: usize, g: Granularity, e: Effects<'_>) -> bool {
    a.pieces[p].accesses.iter().any(|x| {
        b.pieces[q].accesses.iter().any(|y| {
            let (Some(mx), Some(my)) = (effective(x, e), effective(y, e)) else {
                return false;
            };
            x.table == y.table
                && (g == Granularity::Table || x.columns & y.columns != 0)
                && (mx == AccessMode::Write || my == AccessMode::Write)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::procedure::{Piece, TableAccess};
    use crate::engine::ALL_COLUMNS;
    use crate::storage::TableId;

    const fn r(t: u32) -> TableAccess {
        TableAccess { table: TableId(t), mode: AccessMode::Read, columns: ALL_COLUMNS }
    }
    const fn w(t: u32) -> TableAccess {
        TableAccess { table: TableId(t), mode: AccessMode::Write, columns: ALL_COLUMNS }
    }
    const fn cols(t: u32, mode: AccessMode, columns: u64) -> TableAccess {
        TableAccess { table: TableId(t), mode, columns }
    }

    fn ranges(a: &Analysis, t: usize) -> Vec<Range<usize>> {
        a.types[t].pieces.clone()
    }

    /// Figure 2: one type, R(Tab1) W(Tab1) R(Tab2) W(Tab2), one operation per piece. Both
    /// operations on a table conflict across the instances, so each table's two pieces merge
    /// (Fig. 2b); the two merged pieces keep an SC-cycle (each conflicts with its twin), which
    /// IC3 constrains at run time rather than merging.
    #[test]
    fn figure_2_merges_each_tables_pieces() {
        static P: [Piece; 4] = [
            Piece { name: "R(A)", accesses: &[r(1)] },
            Piece { name: "W(A)", accesses: &[w(1)] },
            Piece { name: "R(B)", accesses: &[r(2)] },
            Piece { name: "W(B)", accesses: &[w(2)] },
        ];
        let types = [TxnType { name: "T", pieces: &P }];
        let a = Analysis::new(&types);
        assert_eq!(ranges(&a, 0), vec![0..2, 2..4]);
        assert_eq!(a.edges, vec![CEdge { a: (0, 0), b: (0, 0) }, CEdge { a: (0, 1), b: (0, 1) }]);
        assert_eq!(a.partner(0, 0, 0), Some(0));
        assert_eq!(a.partner(0, 1, 0), Some(1));
        assert!(a.conflicting(0, 0) && a.conflicting(0, 1));
        assert_eq!(a.rendezvous(0, 0, 0), None, "a partner, no rendezvous");
    }

    /// Figure 3: T1 reaches Tab1 then Tab2, T2 the other way round (and both touch Tab3 last,
    /// without conflict): a deadlock-prone cycle, so each type's two conflicting pieces merge;
    /// the unconflicted piece stays apart and unconstrained.
    #[test]
    fn figure_3_merges_a_deadlock_prone_cycle() {
        static T1: [Piece; 3] = [
            Piece { name: "R1(A)", accesses: &[r(1)] },
            Piece { name: "W1(B)", accesses: &[w(2)] },
            Piece { name: "R1(C)", accesses: &[r(3)] },
        ];
        static T2: [Piece; 3] = [
            Piece { name: "R2(B)", accesses: &[r(2)] },
            Piece { name: "W2(A)", accesses: &[w(1)] },
            Piece { name: "R2(C)", accesses: &[r(3)] },
        ];
        let types = [TxnType { name: "T1", pieces: &T1 }, TxnType { name: "T2", pieces: &T2 }];
        let a = Analysis::new(&types);
        assert_eq!(ranges(&a, 0), vec![0..2, 2..3]);
        assert_eq!(ranges(&a, 1), vec![0..2, 2..3]);
        assert!(
            !a.conflicting(0, 1) && !a.conflicting(1, 1),
            "reads of Tab3 conflict with nothing"
        );
        assert_eq!(a.partner(0, 0, 1), Some(0));
        assert_eq!(a.partner(0, 0, 0), Some(0), "W1(B) meets its twin");
    }

    /// Without the cycle (both types reach Tab1 before Tab2) nothing merges: the SC-cycle is
    /// one IC3 constrains.
    #[test]
    fn a_consistent_order_merges_nothing() {
        static T1: [Piece; 2] = [
            Piece { name: "W1(A)", accesses: &[w(1)] },
            Piece { name: "W1(B)", accesses: &[w(2)] },
        ];
        static T2: [Piece; 2] = [
            Piece { name: "R2(A)", accesses: &[r(1)] },
            Piece { name: "W2(B)", accesses: &[w(2)] },
        ];
        let types = [TxnType { name: "T1", pieces: &T1 }, TxnType { name: "T2", pieces: &T2 }];
        let a = Analysis::new(&types);
        assert_eq!(ranges(&a, 0), vec![0..1, 1..2]);
        assert_eq!(ranges(&a, 1), vec![0..1, 1..2]);
        assert_eq!(a.partner(1, 1, 0), Some(1));
        assert_eq!(a.partner(1, 0, 1), None, "two readers do not conflict");
        assert_eq!(a.partner(1, 0, 0), Some(0), "a reader meets the writer");
        assert!(a.read_only.is_empty());
    }

    /// Figure 6: T1 = P1 P2 P3, T2 = P1 P2, where T1's P3 conflicts with T2's P2 and T1's P2
    /// conflicts with nothing of T2: T2's P2 is the rendezvous piece of T1's P2 (and of its P1).
    #[test]
    fn figure_6_finds_the_rendezvous_piece() {
        static T1: [Piece; 3] = [
            Piece { name: "T1.P1", accesses: &[w(1)] },
            Piece { name: "T1.P2", accesses: &[w(2)] },
            Piece { name: "T1.P3", accesses: &[w(3)] },
        ];
        static T2: [Piece; 2] = [
            Piece { name: "T2.P1", accesses: &[w(4)] },
            Piece { name: "T2.P2", accesses: &[r(3)] },
        ];
        let types = [TxnType { name: "T1", pieces: &T1 }, TxnType { name: "T2", pieces: &T2 }];
        let a = Analysis::new(&types);
        assert_eq!(ranges(&a, 0), vec![0..1, 1..2, 2..3]);
        assert_eq!(a.partner(0, 1, 1), None);
        assert_eq!(a.rendezvous(0, 1, 1), Some(1), "T2's P2");
        assert_eq!(a.rendezvous(0, 0, 1), Some(1));
        assert_eq!(a.partner(0, 2, 1), Some(1));
        assert_eq!(a.rendezvous(0, 2, 1), None, "no later piece");
        assert!(a.text(&types).contains("rendezvous: T2/1"), "{}", a.text(&types));
    }

    /// Two pieces of one type that touch a common table, conflicting: they merge with
    /// everything between them (the piece in between lies on the cycle).
    #[test]
    fn pieces_of_one_table_merge_with_what_lies_between() {
        static T: [Piece; 4] = [
            Piece { name: "a", accesses: &[w(1)] },
            Piece { name: "b", accesses: &[r(2)] },
            Piece { name: "c", accesses: &[r(1)] },
            Piece { name: "d", accesses: &[w(3)] },
        ];
        let types = [TxnType { name: "T", pieces: &T }];
        let a = Analysis::new(&types);
        assert_eq!(ranges(&a, 0), vec![0..3, 3..4]);
        assert_eq!(a.types[0].piece_of(1), 0);
        assert_eq!(a.types[0].piece_of(3), 1);
    }

    /// Conflicts are per column: pieces writing different columns of a table do not
    /// conflict; read-only types are left out.
    #[test]
    fn conflicts_are_per_column_and_read_only_types_are_left_out() {
        static T1: [Piece; 2] = [
            Piece { name: "ytd", accesses: &[cols(1, AccessMode::Write, 0b01)] },
            Piece { name: "x", accesses: &[w(2)] },
        ];
        static T2: [Piece; 2] = [
            Piece { name: "name", accesses: &[cols(1, AccessMode::Write, 0b10)] },
            Piece { name: "y", accesses: &[w(3)] },
        ];
        static RO: [Piece; 1] = [Piece { name: "all", accesses: &[r(1), r(2)] }];
        let types = [
            TxnType { name: "T1", pieces: &T1 },
            TxnType { name: "T2", pieces: &T2 },
            TxnType { name: "report", pieces: &RO },
        ];
        let a = Analysis::new(&types);
        assert_eq!(a.read_only, vec!["report"]);
        assert_eq!(a.analysed(2), None);
        assert_eq!(a.partner(0, 0, 1), None, "disjoint columns");
        assert_eq!(a.partner(0, 0, 0), Some(0), "the writer meets its twin");
        assert_eq!(a.partner(1, 0, 0), None);
        let dot = a.dot(&types);
        assert!(dot.starts_with("graph sc {") && dot.contains("style=dashed"), "{dot}");
        // Per table, the two pieces on table 1 conflict (one writes it): what a runtime that
        // tracks records needs.
        let t = Analysis::with_granularity(&types, Granularity::Table);
        assert_eq!(t.partner(0, 0, 1), Some(0));
        assert!(t.conflicting(1, 0));
        assert!(t.text(&types).contains("(conflicts per table)"), "{}", t.text(&types));
    }

    /// A read of columns no analysed template writes (or accumulates into) takes no part in
    /// C-edges at either granularity, so it need not be tracked; a read of a written column,
    /// or of no column (the row's presence), is tracked, per table at table granularity.
    #[test]
    fn reads_of_columns_no_template_writes_are_untracked() {
        use AccessMode::{Accumulate as A, Read as R, Write as W};
        static T1: [Piece; 2] = [
            Piece { name: "ytd", accesses: &[cols(1, W, 0b001), cols(1, A, 0b100)] },
            Piece { name: "x", accesses: &[w(2)] },
        ];
        static T2: [Piece; 4] = [
            Piece { name: "name", accesses: &[cols(1, R, 0b010), r(5)] },
            Piece { name: "sum", accesses: &[cols(1, R, 0b100)] },
            Piece { name: "exists", accesses: &[cols(1, R, 0)] },
            Piece { name: "y", accesses: &[w(3)] },
        ];
        static RO: [Piece; 1] = [Piece { name: "all", accesses: &[cols(1, W, 0b010)] }];
        let types = [TxnType { name: "T1", pieces: &T1 }, TxnType { name: "T2", pieces: &T2 }];
        for g in [Granularity::Table, Granularity::Column] {
            let a = Analysis::with_granularity(&types, g);
            assert_eq!(a.written(TableId(1)), 0b101, "written and accumulated columns");
            assert_eq!(a.written(TableId(5)), 0);
            assert_eq!(a.effective(&T2[0].accesses[0]), None, "{g:?}");
            assert_eq!(a.effective(&T2[0].accesses[1]), None, "a table nobody writes");
            assert_eq!(a.effective(&T2[1].accesses[0]), Some(R), "an accumulated column");
            assert_eq!(a.effective(&T2[2].accesses[0]), Some(R), "presence");
            assert!(!a.conflicting(1, 0), "{g:?}: the untracked read has no C-edge");
            assert!(a.text(&types).contains("piece 0: name  [u:table 1 u:table 5]"));
        }
        let t = Analysis::with_granularity(&types, Granularity::Table);
        // The accumulation into table 1 is not deferred (a read of its column), so the read
        // of it conflicts; so does the read of presence, per table.
        assert!(t.conflicting(1, 1) && t.conflicting(1, 2));
        let text = t.text(&types);
        assert!(
            text.contains("untracked and outside the C-edges (u:): table 1, table 5"),
            "{text}"
        );
        // A type that writes the column makes the read tracked, whatever the mix: which
        // columns are written is decided over all the workload's types.
        let with = [types[0], types[1], TxnType { name: "names", pieces: &RO }];
        let only = Analysis::of_types(&with, &[0, 1], Granularity::Table, Deferral::Columns);
        assert_eq!(only.written(TableId(1)), 0b111);
        assert_eq!(only.effective(&T2[0].accesses[0]), Some(R));
        assert!(only.conflicting(1, 0), "with T1's write of table 1");
    }

    /// §4.3: accumulations are deferred, and take no part in C-edges, only where nothing
    /// they could fail to commute with exists: no analysed read of their columns, no other
    /// write of their columns (of their table, for a runtime that defers by rows).
    #[test]
    fn accumulations_are_deferred_only_where_they_commute_with_everything() {
        use AccessMode::{Accumulate as A, Read as R, Write as W};
        // Table 1: one column accumulated, another read. Table 2: accumulated, and another
        // column written. Table 3: accumulated, and the same column read.
        static PAY: [Piece; 3] = [
            Piece { name: "one", accesses: &[cols(1, R, 0b10), cols(1, A, 0b01)] },
            Piece { name: "two", accesses: &[cols(2, A, 0b01)] },
            Piece { name: "three", accesses: &[cols(3, A, 0b01)] },
        ];
        static OTHER: [Piece; 2] = [
            Piece { name: "two", accesses: &[cols(2, W, 0b10)] },
            Piece { name: "three", accesses: &[cols(3, R, 0b01), cols(4, W, 0b1)] },
        ];
        let types =
            [TxnType { name: "pay", pieces: &PAY }, TxnType { name: "other", pieces: &OTHER }];
        let t = Analysis::with_options(&types, Granularity::Table, Deferral::Rows);
        assert_eq!(t.deferred, vec![TableId(1)]);
        assert_eq!(t.not_deferred, vec![TableId(2), TableId(3)]);
        assert_eq!((t.deferred_columns(TableId(1)), t.deferred_columns(TableId(2))), (0b01, 0));
        assert!(t.defers(TableId(1)) && !t.defers(TableId(2)));
        assert!(!t.conflicting(0, 0), "a deferred accumulation and a read of another column");
        assert_eq!(t.partner(0, 1, 1), Some(0), "an accumulation that is not deferred writes");
        assert_eq!(t.partner(0, 1, 0), Some(1), "and meets its twin");
        assert_eq!(t.effective(&PAY[0].accesses[1]), None);
        assert_eq!(t.effective(&PAY[1].accesses[0]), Some(W));
        let text = t.text(&types);
        assert!(
            text.contains("accumulations applied at commit, outside the C-edges (a:): table 1"),
            "{text}"
        );
        assert!(text.contains("piece 0: one  [u:table 1 a:table 1]"), "{text}");
        // Per column, the write of another column of table 2 does not stop it, at either
        // granularity of conflicts.
        for g in [Granularity::Column, Granularity::Table] {
            let c = Analysis::with_granularity(&types, g);
            assert_eq!(c.deferred, vec![TableId(1), TableId(2)], "{g:?}");
            assert_eq!(c.deferred_columns(TableId(2)), 0b01);
            assert!(!c.conflicting(0, 1) && c.conflicting(0, 2), "{g:?}");
            assert_eq!(c.effective(&PAY[1].accesses[0]), None);
        }
        // Without deferring every accumulation is a write.
        let off = Analysis::with_options(&types, Granularity::Table, Deferral::Off);
        assert!(off.deferred.is_empty() && off.not_deferred.len() == 3);
        assert_eq!(off.partner(0, 0, 0), Some(0));
        // A type that only accumulates writes: it is analysed.
        static ONLY: [Piece; 1] = [Piece { name: "acc", accesses: &[cols(1, A, 0b01)] }];
        let only = [TxnType { name: "only", pieces: &ONLY }];
        let a = Analysis::with_granularity(&only, Granularity::Table);
        assert!(a.read_only.is_empty() && a.deferred == vec![TableId(1)]);
        assert!(a.edges.is_empty(), "deferred accumulations commute with each other");
    }

    /// Figure 8: T1 updates Tab1 then reads Tab2; T2, added while T1 runs, updates both in the
    /// same order. Nothing merges and the new graph's C-edges include the old: T1's
    /// transactions may run on either graph side by side.
    #[test]
    fn figure_8_adding_a_type_that_merges_nothing_is_compatible() {
        static T1: [Piece; 2] = [
            Piece { name: "W1(A)", accesses: &[w(1)] },
            Piece { name: "R1(B)", accesses: &[r(2)] },
        ];
        static T2: [Piece; 2] = [
            Piece { name: "W2(A)", accesses: &[w(1)] },
            Piece { name: "W2(B)", accesses: &[w(2)] },
        ];
        let types = [TxnType { name: "T1", pieces: &T1 }, TxnType { name: "T2", pieces: &T2 }];
        let old = Analysis::of_types(&types, &[0], Granularity::Column, Deferral::Columns);
        let new = Analysis::with_granularity(&types, Granularity::Column);
        assert_eq!((old.types.len(), new.types.len()), (1, 2));
        assert_eq!(ranges(&old, 0), ranges(&new, 0));
        assert!(old.edges.len() < new.edges.len());
        let t = old.transition(&new);
        assert!(t.compatible, "{t:?}");
        assert_eq!(t.nested.len(), 1, "T1 only: T2 runs on the new graph");
        let one = |r: Range<usize>| (r.clone(), [r].to_vec());
        assert_eq!(t.nested[0].pieces, vec![one(0..1), one(1..2)]);
        assert!(t.text(&types).starts_with("compatible:"));
        assert!(new.transition(&old).compatible, "removing T2 again splits nothing");
    }

    /// Figures 9 and 10: T2 reaches the tables in the opposite order, so adding it merges
    /// T1's two pieces into one (Fig. 9b). T1's transactions on the old graph commit each
    /// update apart, those on the new one both at once, unconstrained by the old ones (the
    /// cycle of Fig. 9c): until every worker uses the new graph, T1 runs on the transitional
    /// graph, its one piece made of the two old pieces as sub-pieces (Fig. 10). Removing T2
    /// goes back through the same graph.
    #[test]
    fn figures_9_and_10_a_merge_needs_the_transitional_graph() {
        static T1: [Piece; 2] = [
            Piece { name: "W1(A)", accesses: &[w(1)] },
            Piece { name: "W1(B)", accesses: &[w(2)] },
        ];
        static T2: [Piece; 2] = [
            Piece { name: "W2(B)", accesses: &[w(2)] },
            Piece { name: "W2(A)", accesses: &[w(1)] },
        ];
        let types = [TxnType { name: "T1", pieces: &T1 }, TxnType { name: "T2", pieces: &T2 }];
        let old = Analysis::of_types(&types, &[0], Granularity::Column, Deferral::Columns);
        let new = Analysis::with_granularity(&types, Granularity::Column);
        assert_eq!(ranges(&old, 0), vec![0..1, 1..2]);
        assert_eq!(ranges(&new, 0), vec![0..2], "Fig. 9b");
        assert_eq!(ranges(&new, 1), vec![0..2]);
        let t = old.transition(&new);
        assert!(!t.compatible);
        let fig10 =
            vec![Nested { txn_type: 0, name: "T1", pieces: vec![(0..2, vec![0..1, 1..2])] }];
        assert_eq!(t.nested, fig10);
        let text = t.text(&types);
        assert!(text.contains("  T1:\n    piece 0: [W1(A)] [W1(B)]\n"), "{text}");
        assert_eq!(new.transition(&old).nested, fig10, "removing T2");
        // A subset keeps the workload's type indices, and lists only its own types.
        let only_t2 = Analysis::of_types(&types, &[1], Granularity::Column, Deferral::Columns);
        assert_eq!(only_t2.types[0].txn_type, 1);
        assert!(old.transition(&only_t2).nested.is_empty(), "no common type");
    }
}
