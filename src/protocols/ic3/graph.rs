//! The SC-graphs IC3's workers run on, and changing the mix while they run (online analysis,
//! §4.5).
//!
//! A [`Graph`] is what the runtime needs of an analysis: for each type that runs piece by piece
//! on it, its merged pieces (validated and committed as one), each made of *sub-pieces* (waited
//! for one by one; one sub-piece, the merged piece itself, except on a transitional graph), and
//! for each sub-piece how it waits for a dependency of each type ([`Rule`]). Every other type
//! runs directly (one OCC unit over committed data: see `worker`), which is serializable
//! whatever the graphs.
//!
//! **Waits in template pieces.** A context publishes its progress as the number of template
//! pieces its committed merged pieces cover (`txn`), so a rule names a *template* piece of the
//! dependency's type: "wait until it has committed the merged piece that holds template piece
//! `j`", `j` being the last template piece of that type that conflicts with the waiting
//! sub-piece (case 2 of Algorithm 1). On the dependency's own graph that is its partner piece;
//! on a coarser graph the merged piece around it, on a finer one the piece that holds `j`:
//! whichever graph the dependency runs on, the rule waits until it has committed everything of
//! it that conflicts with the sub-piece. Which template pieces conflict does not depend on the
//! mix (`scgraph::Analysis::of_types`). A rendezvous piece (§4.2) is waited for only when the
//! dependency runs on the same graph; otherwise, and where there is neither, the rule waits for
//! the dependency's end (case 3): waiting longer never breaks what the analysis promised.
//!
//! **Changing the mix** ([`set_mix`]) from graph `A` to the new mix's graph `B`
//! without stopping the workers, as §4.5 says:
//!
//! 1. publish the transitional graph `T`: the types common to both mixes run with the coarser
//!    chopping's pieces as merged pieces and the finer one's as sub-pieces (Fig. 10; when the
//!    choppings agree, simply the pieces), constrained against every type of both mixes; the
//!    other types (added or removed) run directly;
//! 2. wait until no attempt runs on `A` (workers that begin load the current graph; see
//!    `txn::TxnCtx::begin` for why none is missed);
//! 3. publish `B`.
//!
//! `A` and `B` never run at once. `T` runs beside each: beside the finer graph its sub-pieces
//! keep the order that graph enforces (a sub-piece waits for the dependencies its earlier
//! sub-pieces found, and the merged piece's commit refuses a dependency on an unfinished
//! transaction that none of its waits covered: see `worker`), and beside the coarser one its
//! merged pieces validate and commit as that graph's do. The paper adds and removes a type so;
//! the same three steps serve any change of the mix. A change first waits until no attempt runs
//! on a graph older than the current one, so at most two graphs ever run at once (which the
//! contexts' graph field, a version modulo `txn::GRAPH_VERSIONS`, tells apart).
//!
//! Graphs are kept for the protocol's life once published (a worker's attempt holds a plain
//! pointer to its graph): a mix change costs a few kilobytes.

use super::txn::{Contexts, GRAPH_VERSIONS};
use super::Declared;
use crate::engine::scgraph::{Analysis, Deferral, Granularity, Nested};
use crate::engine::{AccessMode, TxnType};
use crate::storage::projection::Columns;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How a sub-piece waits for a dependency of one type (Algorithm 1, §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Until it has committed the merged piece that holds its template piece `.0` (case 2, or
    /// a rendezvous piece).
    Piece(usize),
    /// Until it is over (case 3).
    End,
}

/// A sub-piece: template pieces waited for together.
#[derive(Clone, Debug)]
pub(crate) struct SubPiece {
    /// Its template pieces.
    pub(crate) range: Range<usize>,
    /// Whether it has a C-edge at all (case 1 when not: it waits for nobody).
    pub(crate) conflicting: bool,
    /// Per workload type: how it waits for a dependency of that type on the same graph.
    pub(crate) same: Box<[Rule]>,
    /// Per workload type: how it waits for a dependency of that type on another graph.
    pub(crate) cross: Box<[Rule]>,
}

/// A merged piece: validated and committed as one.
#[derive(Clone, Debug)]
pub(crate) struct MergedPiece {
    /// Its template pieces.
    pub(crate) range: Range<usize>,
    /// Its sub-pieces, in order (the first starts it, the last ends it).
    pub(crate) subs: Vec<SubPiece>,
    /// The tables its template pieces declare (see [`Declared`]).
    pub(crate) tables: Vec<Declared>,
}

/// How one type runs on a graph.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Its merged pieces, in order.
    pub(crate) pieces: Vec<MergedPiece>,
    /// Per template piece: its merged piece and its sub-piece there.
    at: Vec<(u16, u16)>,
}

impl Plan {
    /// The merged piece and sub-piece that template piece `p` belongs to (`None` beyond the
    /// template).
    pub(crate) fn at(&self, p: usize) -> Option<(usize, usize)> {
        self.at.get(p).map(|&(m, s)| (usize::from(m), usize::from(s)))
    }
}

/// An SC-graph as the runtime uses it (see the module docs).
pub(crate) struct Graph {
    /// The graph's version: 0 for the first, one more for each published after it.
    pub(crate) version: u64,
    /// The mix it runs (workload type indices; a transitional graph's: the new mix).
    pub(crate) mix: Vec<usize>,
    /// Per workload type: how it runs typed here, `None` when it runs directly.
    pub(crate) plans: Vec<Option<Plan>>,
}

impl Graph {
    /// The version as contexts keep it.
    pub(crate) fn tag(&self) -> u64 {
        self.version % GRAPH_VERSIONS
    }
}

/// What the graphs are built from: the workload's templates and the analysis options.
pub(crate) struct Templates {
    pub(crate) types: Vec<TxnType>,
    pub(crate) granularity: Granularity,
    pub(crate) deferral: Deferral,
    /// The analysis of every type (decides the deferred accumulations and conflicts, the same
    /// for every mix).
    pub(crate) full: Analysis,
}

impl Templates {
    /// The analysis of mix `mix`.
    pub(crate) fn analyse(&self, mix: &[usize]) -> Analysis {
        Analysis::of_types(&self.types, mix, self.granularity, self.deferral)
    }

    /// The last template piece of type `u` that conflicts with one of template pieces `r` of
    /// type `t`.
    fn last_conflict(&self, t: usize, r: &Range<usize>, u: usize) -> Option<usize> {
        let n = self.types[u].pieces.len();
        (0..n).rev().find(|&q| r.clone().any(|p| self.full.conflicts(&self.types, t, p, u, q)))
    }

    /// The tables template pieces `r` of type `t` declare.
    fn declared(&self, t: usize, r: &Range<usize>) -> Vec<Declared> {
        let tpl = &self.types[t];
        let mut tables: Vec<Declared> = Vec::new();
        for x in r.clone().flat_map(|p| tpl.pieces[p].accesses.iter()) {
            let mode = self.full.effective(x);
            let write = mode == Some(AccessMode::Write);
            let tracked = mode.is_some();
            let deferred = x.mode == AccessMode::Accumulate && mode.is_none();
            let accumulates: Columns = if deferred { x.columns } else { 0 };
            match tables.iter_mut().find(|d| d.table == x.table) {
                Some(d) => {
                    d.write |= write;
                    d.tracked |= tracked;
                    d.accumulates |= accumulates;
                }
                None => tables.push(Declared { table: x.table, write, tracked, accumulates }),
            }
        }
        tables
    }

    /// A sub-piece of type `t` over template pieces `r`, constrained against the types `live`
    /// (workload indices); `rendezvous` gives, per workload type, the template piece ending the
    /// rendezvous piece the graph's analysis names there, if any.
    fn sub_piece(
        &self,
        t: usize,
        r: Range<usize>,
        live: &[usize],
        rendezvous: impl Fn(usize) -> Option<usize>,
    ) -> SubPiece {
        let n = self.types.len();
        let mut same = vec![Rule::End; n];
        let mut cross = vec![Rule::End; n];
        let mut conflicting = false;
        for &u in live {
            match self.last_conflict(t, &r, u) {
                Some(j) => {
                    conflicting = true;
                    same[u] = Rule::Piece(j);
                    cross[u] = Rule::Piece(j);
                }
                None => {
                    if let Some(j) = rendezvous(u) {
                        same[u] = Rule::Piece(j);
                    }
                }
            }
        }
        SubPiece { range: r, conflicting, same: same.into(), cross: cross.into() }
    }

    /// Per template piece of `pieces`: its merged piece and sub-piece.
    fn plan(pieces: Vec<MergedPiece>) -> Plan {
        let mut at = Vec::new();
        for (m, piece) in pieces.iter().enumerate() {
            for (s, sub) in piece.subs.iter().enumerate() {
                at.extend(sub.range.clone().map(|_| (m as u16, s as u16)));
            }
        }
        Plan { pieces, at }
    }

    /// The graph of analysis `a` (of mix `mix`), version `version`; rendezvous pieces unless
    /// `rendezvous` is off.
    pub(crate) fn graph(
        &self,
        a: &Analysis,
        mix: &[usize],
        version: u64,
        rendezvous: bool,
    ) -> Graph {
        let live: Vec<usize> = a.types.iter().map(|c| c.txn_type).collect();
        let mut plans = vec![None; self.types.len()];
        for (ta, c) in a.types.iter().enumerate() {
            let t = c.txn_type;
            let pieces = (0..c.pieces.len())
                .map(|m| {
                    let r = c.pieces[m].clone();
                    let rdv = |u: usize| {
                        let ua = a.analysed(u)?;
                        let q = a.rendezvous(ta, m, ua).filter(|_| rendezvous)?;
                        Some(a.types[ua].pieces[q].end - 1)
                    };
                    let sub = self.sub_piece(t, r.clone(), &live, rdv);
                    MergedPiece { tables: self.declared(t, &r), range: r, subs: vec![sub] }
                })
                .collect();
            plans[t] = Some(Self::plan(pieces));
        }
        Graph { version, mix: mix.to_vec(), plans }
    }

    /// The transitional graph between analyses `a` and `b` (of the new mix `mix`), version
    /// `version`: the common types with nested pieces, constrained against both mixes' types,
    /// with no rendezvous pieces.
    fn transitional(&self, a: &Analysis, b: &Analysis, mix: &[usize], version: u64) -> Graph {
        let mut live: Vec<usize> = a.types.iter().chain(&b.types).map(|c| c.txn_type).collect();
        live.sort_unstable();
        live.dedup();
        let mut plans = vec![None; self.types.len()];
        for Nested { txn_type: t, pieces, .. } in a.transition(b).nested {
            let pieces = pieces
                .into_iter()
                .map(|(r, subs)| {
                    let subs =
                        subs.into_iter().map(|s| self.sub_piece(t, s, &live, |_| None)).collect();
                    MergedPiece { tables: self.declared(t, &r), range: r, subs }
                })
                .collect();
            plans[t] = Some(Self::plan(pieces));
        }
        Graph { version, mix: mix.to_vec(), plans }
    }
}

/// The published graphs and the current one.
pub(crate) struct Graphs {
    /// Every graph published, kept for the protocol's life (see the module docs); boxed, so
    /// that `current` and the workers' pointers stay valid when the vector grows.
    #[allow(clippy::vec_box)]
    published: Mutex<Vec<Box<Graph>>>,
    /// The graph attempts begin on: one of `published`.
    current: AtomicPtr<Graph>,
    /// A stop-the-world change is under way: no attempt begins ([`stop_the_world`]).
    stopped: AtomicBool,
}

impl Graphs {
    /// Graphs whose first is `first`.
    pub(crate) fn new(first: Graph) -> Self {
        let mut first = Box::new(first);
        let current = AtomicPtr::new(&mut *first);
        Graphs { published: Mutex::new(vec![first]), current, stopped: AtomicBool::new(false) }
    }

    /// The graph attempts begin on now.
    #[inline]
    pub(crate) fn current(&self) -> &Graph {
        // SeqCst (Acquire for the graph's contents, which `publish` wrote before its store):
        // see `txn::TxnCtx::begin`.
        let g = self.current.load(Ordering::SeqCst);
        // SAFETY: `current` always points to a graph in `published`, boxed (it never moves)
        // and never dropped before `self`.
        unsafe { &*g }
    }

    /// Whether a stop-the-world change is under way: an attempt that began must end at once
    /// and wait until it is over ([`stop_the_world`]).
    #[inline]
    pub(crate) fn stopped(&self) -> bool {
        // SeqCst: a worker stores its context's state (`txn::TxnCtx::begin`) and then loads
        // this; the change stores it and then loads every context's state: either the worker
        // sees the world stopped, or the change sees its attempt and waits for it.
        self.stopped.load(Ordering::SeqCst)
    }

    /// Publishes `g` as the current graph (the caller holds `published`).
    #[allow(clippy::vec_box)] // see `published`
    fn publish(&self, published: &mut Vec<Box<Graph>>, g: Graph) {
        let mut g = Box::new(g);
        let p: *mut Graph = &mut *g;
        published.push(g);
        // SeqCst: see `current`.
        self.current.store(p, Ordering::SeqCst);
    }
}

/// Waits until no context runs an attempt on graph version `tag` (modulo
/// [`GRAPH_VERSIONS`]). Attempts end on their own (a typed attempt waits only for others
/// that began before it), so this ends; the sleep leaves the cores to them.
fn drain(contexts: &Contexts, tag: u64) {
    while contexts.states().any(|s| s.runs_on(tag)) {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Changes the mix to `mix` (valid type indices; see the module docs); the caller is not
/// inside an attempt of this protocol's. Blocks until the new mix's graph is current; workers
/// keep running meanwhile.
pub(crate) fn set_mix(
    graphs: &Graphs,
    contexts: &Contexts,
    templates: &Templates,
    rendezvous: bool,
    mix: &[usize],
) {
    debug_assert!(mix.iter().all(|&t| t < templates.types.len()), "checked by Database::set_mix");
    let mut mix = mix.to_vec();
    mix.sort_unstable();
    mix.dedup();
    let mut published = graphs.published.lock().unwrap_or_else(|e| e.into_inner());
    let from = published.last().expect("a first graph");
    let version = from.version;
    // At most two graphs at once: the last change's transitional graph drains first.
    if version > 0 {
        drain(contexts, (version - 1) % GRAPH_VERSIONS);
    }
    if from.mix == mix {
        return;
    }
    let old = templates.analyse(&from.mix);
    let new = templates.analyse(&mix);
    let t = templates.transitional(&old, &new, &mix, version + 1);
    graphs.publish(&mut published, t);
    drain(contexts, version % GRAPH_VERSIONS);
    let g = templates.graph(&new, &mix, version + 2, rendezvous);
    graphs.publish(&mut published, g);
}

/// Changes the mix to `mix` the way the paper's baseline does (§6.9, "stop the world"): no
/// attempt begins meanwhile, every running one (typed or direct) ends, the new mix's graph is
/// analysed and published, and attempts begin again, on it. Two graphs never run at once, so
/// there is no transitional graph; the workers stand still for as long as the longest running
/// attempt takes to end, plus the analysis.
pub(crate) fn stop_the_world(
    graphs: &Graphs,
    contexts: &Contexts,
    templates: &Templates,
    rendezvous: bool,
    mix: &[usize],
) {
    let mut mix = mix.to_vec();
    mix.sort_unstable();
    mix.dedup();
    let mut published = graphs.published.lock().unwrap_or_else(|e| e.into_inner());
    let from = published.last().expect("a first graph");
    if from.mix == mix {
        return;
    }
    let version = from.version;
    // SeqCst: see `Graphs::stopped`.
    graphs.stopped.store(true, Ordering::SeqCst);
    while contexts.states().any(|s| s.runs()) {
        std::thread::sleep(Duration::from_micros(50));
    }
    let new = templates.analyse(&mix);
    let g = templates.graph(&new, &mix, version + 1, rendezvous);
    graphs.publish(&mut published, g);
    graphs.stopped.store(false, Ordering::SeqCst);
}

/// A type's merged pieces with their sub-pieces.
#[cfg(test)]
pub(crate) type Shape = Vec<(Range<usize>, Vec<Range<usize>>)>;

/// The choppings a graph gives its types, for tests and printing: per workload type, its merged
/// pieces with their sub-pieces (template piece ranges).
#[cfg(test)]
pub(crate) fn shape(g: &Graph) -> Vec<Option<Shape>> {
    g.plans
        .iter()
        .map(|p| {
            p.as_ref().map(|p| {
                p.pieces
                    .iter()
                    .map(|m| (m.range.clone(), m.subs.iter().map(|s| s.range.clone()).collect()))
                    .collect()
            })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // vectors of sub-pieces
mod tests {
    use super::*;
    use crate::engine::procedure::{Piece, TableAccess};
    use crate::engine::ALL_COLUMNS;
    use crate::storage::TableId;

    const fn w(t: u32) -> TableAccess {
        TableAccess { table: TableId(t), mode: AccessMode::Write, columns: ALL_COLUMNS }
    }
    const fn r(t: u32) -> TableAccess {
        TableAccess { table: TableId(t), mode: AccessMode::Read, columns: ALL_COLUMNS }
    }
    static AB: [Piece; 2] =
        [Piece { name: "a", accesses: &[w(0)] }, Piece { name: "b", accesses: &[w(1)] }];
    static BA: [Piece; 2] =
        [Piece { name: "b", accesses: &[w(1)] }, Piece { name: "a", accesses: &[w(0)] }];
    /// Reads table 1 (which `AB`'s second piece writes), then writes table 2 (which only its
    /// twin touches).
    static RC: [Piece; 2] =
        [Piece { name: "r", accesses: &[r(1)] }, Piece { name: "c", accesses: &[w(2)] }];

    fn templates(types: &[TxnType]) -> Templates {
        let full = Analysis::with_options(types, Granularity::Table, Deferral::Columns);
        Templates {
            types: types.to_vec(),
            granularity: Granularity::Table,
            deferral: Deferral::Columns,
            full,
        }
    }

    /// Figure 9's types: on `AB`'s graph alone, `AB`'s second piece waits for a dependency of
    /// `AB` until it has committed its template piece 1; on the transitional graph towards the
    /// mix with `BA`, `AB` is one merged piece of two sub-pieces, constrained against both
    /// types, and `BA` runs directly; on the new graph both are one piece.
    #[test]
    fn figure_9_graphs_and_their_rules() {
        let types = [TxnType { name: "AB", pieces: &AB }, TxnType { name: "BA", pieces: &BA }];
        let tp = templates(&types);
        let (a, b) = (tp.analyse(&[0]), tp.analyse(&[0, 1]));
        let old = tp.graph(&a, &[0], 0, true);
        assert_eq!(shape(&old)[0], Some(vec![(0..1, vec![0..1]), (1..2, vec![1..2])]));
        assert_eq!(shape(&old)[1], None, "not in the mix: runs directly");
        let second = &old.plans[0].as_ref().unwrap().pieces[1].subs[0];
        assert!(second.conflicting);
        assert_eq!(second.same[0], Rule::Piece(1));
        assert_eq!(second.same[1], Rule::End, "a type outside the mix: its end");
        let t = tp.transitional(&a, &b, &[0, 1], 1);
        assert_eq!(shape(&t)[0], Some(vec![(0..2, vec![0..1, 1..2])]));
        assert_eq!(shape(&t)[1], None, "added: runs directly until the new graph");
        let plan = t.plans[0].as_ref().unwrap();
        assert_eq!(plan.at(1), Some((0, 1)));
        let (s0, s1) = (&plan.pieces[0].subs[0], &plan.pieces[0].subs[1]);
        assert_eq!((s0.same[0], s0.same[1]), (Rule::Piece(0), Rule::Piece(1)));
        assert_eq!((s1.same[0], s1.same[1]), (Rule::Piece(1), Rule::Piece(0)));
        assert_eq!(s1.cross[1], Rule::Piece(0), "BA's first piece writes B");
        let new = tp.graph(&b, &[0, 1], 2, true);
        assert_eq!(shape(&new)[0], Some(vec![(0..2, vec![0..2])]));
        assert_eq!(shape(&new)[1], Some(vec![(0..2, vec![0..2])]));
        assert_eq!(new.plans[1].as_ref().unwrap().pieces[0].subs[0].same[0], Rule::Piece(1));
    }

    /// A rendezvous piece is waited for only on the dependency's own graph; elsewhere its end.
    /// `RC`'s first piece reads B, which `AB`'s second piece writes; its second piece conflicts
    /// with its twin's only. `AB`'s first piece has no C-edge with `RC`, whose piece 0
    /// conflicts with a later piece of `AB`'s: the rendezvous.
    #[test]
    fn rendezvous_pieces_only_on_the_same_graph() {
        let types = [TxnType { name: "AB", pieces: &AB }, TxnType { name: "RC", pieces: &RC }];
        let tp = templates(&types);
        let a = tp.analyse(&[0, 1]);
        let g = tp.graph(&a, &[0, 1], 0, true);
        let first = &g.plans[0].as_ref().unwrap().pieces[0].subs[0];
        assert_eq!(first.same[1], Rule::Piece(0), "RC's rendezvous piece");
        assert_eq!(first.cross[1], Rule::End);
        let off = tp.graph(&a, &[0, 1], 0, false);
        assert_eq!(off.plans[0].as_ref().unwrap().pieces[0].subs[0].same[1], Rule::End);
        let last = &g.plans[1].as_ref().unwrap().pieces[1].subs[0];
        assert_eq!(last.same[1], Rule::Piece(1), "its twin's partner piece");
        assert_eq!(last.same[0], Rule::End, "no C-edge with AB, no later piece: case 3");
    }
}
