//! The serializability checker: a recorded [`History`] in, the anomalies it shows out.
//!
//! It builds Adya's direct serialization graph over the committed transactions: `ww` (one
//! installed the version the other overwrote), `wr` (one read the other's version) and `rw`
//! (anti-dependency: one read a version the other replaced), on items, and `wr`/`rw` on
//! predicates (a range read that did not see a key another transaction inserted or deleted).
//! Cycles are found with an iterative strongly-connected-components pass, level by level, so that
//! each anomaly class is reported with a short concrete cycle:
//!
//! | class | what | found as |
//! |---|---|---|
//! | G0 | dirty write | a cycle of `ww` edges; or a committed version installed over an aborted one |
//! | G1a | aborted read | a committed transaction read a version of one that aborted |
//! | G1b | intermediate read | it read a version its writer overwrote itself |
//! | G1c | circular information flow | a cycle of `ww`/`wr` edges |
//! | lost update | | a version overwritten by two committed transactions; a 2-cycle `rw` + `ww` on one key |
//! | G-single | read skew | a cycle with exactly one item anti-dependency |
//! | G2-item | write skew | a cycle with two or more item anti-dependencies |
//! | G2 | phantom | a cycle that needs a predicate anti-dependency |
//! | invented | | a read of a version nobody wrote, or of an absent state a key never had |
//!
//! **Columns.** Reads and writes name the columns they observed or changed (every one, unless
//! a protocol says fewer: IC3's accumulations deferred to commit change one). A read depends
//! (`wr`) on the latest writer at or before the version it read *of each column it read*, and
//! anti-depends (`rw`) on the next writer after it of each such column; `ww` edges join a
//! key's consecutive versions whatever their columns. With whole-row writes this is the
//! plain per-key graph; with narrower ones, a read of other columns of a row no longer
//! depends on an accumulation between its versions, as none of its values came from it.
//!
//! Versions of a key are ordered by each write's `prev` (by their stamps for a protocol that
//! orders them so: `History::stamp_ordered`, Cicada); the incarnations of a key (deleted,
//! unlinked, inserted again as a new row) and the absent state a range read observed are placed
//! by the transactions' serialization timestamps (see [`super`]).

mod graph;

use super::{Event, History, Outcome, Stamp, INITIAL, UNBORN};
use graph::{EdgeKind, Graph};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;
use std::fmt;

pub use graph::CycleStep;

/// An anomaly class. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum AnomalyClass {
    /// Dirty write.
    G0,
    /// Aborted read.
    G1a,
    /// Intermediate read.
    G1b,
    /// Circular information flow.
    G1c,
    /// Lost update.
    LostUpdate,
    /// Read skew: a cycle with exactly one item anti-dependency.
    GSingle,
    /// Write skew: a cycle with two or more item anti-dependencies.
    G2Item,
    /// Phantom: a cycle that needs a predicate anti-dependency.
    G2,
    /// A read of a version or state that never existed.
    Invented,
}

impl AnomalyClass {
    /// Every class, most severe first.
    pub const ALL: [AnomalyClass; 9] = [
        AnomalyClass::Invented,
        AnomalyClass::G0,
        AnomalyClass::G1a,
        AnomalyClass::G1b,
        AnomalyClass::G1c,
        AnomalyClass::LostUpdate,
        AnomalyClass::GSingle,
        AnomalyClass::G2Item,
        AnomalyClass::G2,
    ];

    /// The short name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyClass::G0 => "G0 (dirty write)",
            AnomalyClass::G1a => "G1a (aborted read)",
            AnomalyClass::G1b => "G1b (intermediate read)",
            AnomalyClass::G1c => "G1c (circular information flow)",
            AnomalyClass::LostUpdate => "lost update",
            AnomalyClass::GSingle => "G-single (read skew)",
            AnomalyClass::G2Item => "G2-item (write skew)",
            AnomalyClass::G2 => "G2 (phantom)",
            AnomalyClass::Invented => "invented read",
        }
    }
}

impl fmt::Display for AnomalyClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every instance of one anomaly class found, with one example.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Anomaly {
    /// The class.
    pub class: AnomalyClass,
    /// Instances found (reads, forks, or strongly connected components, by class).
    pub count: u64,
    /// The first instance, in words.
    pub example: String,
    /// For cycle classes: one short cycle, each step an edge.
    pub cycle: Vec<CycleStep>,
}

/// What the checker found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Report {
    /// Transactions in the history.
    pub txns: usize,
    /// Committed transactions (the graph's nodes).
    pub committed: usize,
    /// Edges by kind: ww, wr, rw, predicate wr, predicate rw.
    pub edges: [u64; 5],
    /// One entry per class seen, most severe first.
    pub anomalies: Vec<Anomaly>,
}

impl Report {
    /// The classes seen.
    pub fn classes(&self) -> Vec<AnomalyClass> {
        self.anomalies.iter().map(|a| a.class).collect()
    }

    /// Whether `class` was seen.
    pub fn has(&self, class: AnomalyClass) -> bool {
        self.anomalies.iter().any(|a| a.class == class)
    }

    fn add(
        &mut self,
        class: AnomalyClass,
        example: impl FnOnce() -> String,
        cycle: Vec<CycleStep>,
    ) {
        if let Some(a) = self.anomalies.iter_mut().find(|a| a.class == class) {
            a.count += 1;
        } else {
            self.anomalies.push(Anomaly { class, count: 1, example: example(), cycle });
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} transactions ({} committed); edges ww {} wr {} rw {} predicate-wr {} predicate-rw {}",
            self.txns,
            self.committed,
            self.edges[0],
            self.edges[1],
            self.edges[2],
            self.edges[3],
            self.edges[4]
        )?;
        if self.anomalies.is_empty() {
            return writeln!(f, "no anomaly: the committed transactions are serializable");
        }
        for a in &self.anomalies {
            writeln!(f, "{}: {} found; e.g. {}", a.class, a.count, a.example)?;
            if !a.cycle.is_empty() {
                writeln!(f, "  cycle: {}", cycle_text(&a.cycle))?;
            }
        }
        Ok(())
    }
}

/// A cycle as `w0.5 -rw[t0 k17]-> w3.9 -ww[t0 k17]-> w0.5`: transactions, edge kinds, and the
/// table and key each edge is about.
pub fn cycle_text(cycle: &[CycleStep]) -> String {
    let Some(first) = cycle.first() else { return String::new() };
    let mut s = txn_name(first.from);
    for c in cycle {
        s.push_str(&format!(" -{}[t{} k{}]-> {}", c.kind, c.table, c.key, txn_name(c.to)));
    }
    s
}

/// A transaction id as `w<recorder>.<attempt>` when it has the recorder's shape.
pub fn txn_name(id: u64) -> String {
    let worker = id >> 40;
    if worker > 0 {
        format!("w{}.{}", worker - 1, id & ((1 << 40) - 1))
    } else {
        format!("t{id}")
    }
}

/// A version as recorded.
#[derive(Clone, Copy)]
struct Ver {
    txn: u32,
    prev: Stamp,
    present: bool,
    cols: u64,
    last_in_txn: bool,
    committed: bool,
}

/// One state in a key's version order.
#[derive(Clone, Copy)]
struct State {
    stamp: Stamp,
    writer: Option<u32>,
    present: bool,
    ts: u64,
    /// The columns its writer changed (every one for the loaded or unborn state).
    cols: u64,
    /// The first and last index of the run of consecutive states with these same columns
    /// (a read of other columns skips the run in one step).
    run: (u32, u32),
}

type VKey = (u32, u64, Stamp);
type Key = (u32, u64);

/// Checks `history`. See the module docs.
pub fn check(history: &History) -> Report {
    if history.aliases().is_empty() {
        check_resolved(history)
    } else {
        check_resolved(&history.resolved())
    }
}

/// [`check`] of a history without aliases.
fn check_resolved(history: &History) -> Report {
    let txns = history.txns();
    let mut report = Report { txns: txns.len(), ..Report::default() };
    let committed = |i: u32| txns[i as usize].outcome == Outcome::Committed;

    // 1. Every installed version, committed or not.
    let mut vers: HashMap<VKey, Ver> = HashMap::default();
    let mut seen_keys: Vec<Key> = Vec::new();
    for (i, t) in txns.iter().enumerate() {
        let events = history.events(t);
        seen_keys.clear();
        for e in events.iter().rev() {
            let Event::Write { table, key, stamp, prev, present, cols } = *e else { continue };
            let last_in_txn = !seen_keys.contains(&(table, key));
            if last_in_txn {
                seen_keys.push((table, key));
            }
            let v = Ver {
                txn: i as u32,
                prev,
                present,
                cols,
                last_in_txn,
                committed: t.outcome == Outcome::Committed,
            };
            if stamp == UNBORN || stamp == INITIAL || vers.insert((table, key, stamp), v).is_some()
            {
                report.add(
                    AnomalyClass::Invented,
                    || {
                        format!(
                            "{} installed version {stamp:#x} of t{table} k{key}, which another \
                             write also claims (or is reserved)",
                            txn_name(t.id)
                        )
                    },
                    Vec::new(),
                );
            }
        }
    }

    // A protocol that orders versions by stamp: each committed version follows the key's
    // committed version with the next smaller stamp (the smallest keeps its recorded `prev`).
    if history.stamp_ordered() {
        let mut by_key: HashMap<Key, Vec<Stamp>> = HashMap::default();
        for (&(table, key, stamp), v) in &vers {
            if v.committed {
                by_key.entry((table, key)).or_default().push(stamp);
            }
        }
        for ((table, key), mut stamps) in by_key {
            stamps.sort_unstable();
            for w in stamps.windows(2) {
                if let Some(v) = vers.get_mut(&(table, key, w[1])) {
                    v.prev = w[0];
                }
            }
        }
    }

    // 2. Committed version orders: successor links, skipping aborted versions.
    let resolve = |table: u32, key: u64, mut prev: Stamp| -> (Stamp, bool) {
        let mut dirty = false;
        for _ in 0..vers.len() + 1 {
            match vers.get(&(table, key, prev)) {
                Some(v) if !v.committed => {
                    dirty = true;
                    prev = v.prev;
                }
                _ => break,
            }
        }
        (prev, dirty)
    };
    let mut succ: HashMap<VKey, Stamp> = HashMap::default();
    let mut unborn_roots: HashMap<Key, Vec<Stamp>> = HashMap::default();
    let mut written: BTreeSet<Key> = BTreeSet::new();
    for (&(table, key, stamp), v) in &vers {
        if !v.committed {
            continue;
        }
        written.insert((table, key));
        let (prev, dirty) = resolve(table, key, v.prev);
        if dirty {
            let id = txns[v.txn as usize].id;
            report.add(
                AnomalyClass::G0,
                || {
                    format!(
                        "{} installed t{table} k{key} over a version of a transaction that aborted",
                        txn_name(id)
                    )
                },
                Vec::new(),
            );
        }
        if prev == UNBORN {
            unborn_roots.entry((table, key)).or_default().push(stamp);
            continue;
        }
        if let Some(&other) = succ.get(&(table, key, prev)) {
            let (a, b) =
                (txns[v.txn as usize].id, txns[vers[&(table, key, other)].txn as usize].id);
            report.add(
                AnomalyClass::LostUpdate,
                || {
                    format!(
                        "{} and {} both overwrote version {prev:#x} of t{table} k{key}",
                        txn_name(b),
                        txn_name(a)
                    )
                },
                Vec::new(),
            );
            continue;
        }
        succ.insert((table, key, prev), stamp);
    }
    let mut orders: HashMap<Key, Vec<State>> = HashMap::default();
    let mut pos: HashMap<VKey, usize> = HashMap::default();
    for &(table, key) in &written {
        let mut states = Vec::new();
        let follow = |states: &mut Vec<State>, mut s: Stamp| loop {
            let v = vers[&(table, key, s)];
            states.push(State {
                stamp: s,
                writer: Some(v.txn),
                present: v.present,
                ts: txns[v.txn as usize].ts,
                cols: v.cols,
                run: (0, 0),
            });
            match succ.get(&(table, key, s)) {
                // The length bound stops a corrupt cycle of prev links.
                Some(&n) if states.len() <= vers.len() => s = n,
                _ => break,
            }
        };
        let loaded = succ.get(&(table, key, INITIAL)).copied();
        states.push(State {
            stamp: if loaded.is_some() { INITIAL } else { UNBORN },
            writer: None,
            present: loaded.is_some(),
            ts: 0,
            cols: u64::MAX,
            run: (0, 0),
        });
        if let Some(first) = loaded {
            follow(&mut states, first);
        }
        let mut roots = unborn_roots.remove(&(table, key)).unwrap_or_default();
        roots.sort_by_key(|s| txns[vers[&(table, key, *s)].txn as usize].ts);
        for r in roots {
            follow(&mut states, r);
        }
        for (i, s) in states.iter().enumerate().skip(1) {
            pos.insert((table, key, s.stamp), i);
        }
        let mut lo = 0;
        for i in 0..states.len() {
            if states[i].cols != states[lo].cols {
                lo = i;
            }
            states[i].run.0 = lo as u32;
        }
        let mut hi = states.len() - 1;
        for i in (0..states.len()).rev() {
            if states[i].cols != states[hi].cols {
                hi = i;
            }
            states[i].run.1 = hi as u32;
        }
        orders.insert((table, key), states);
    }

    // 3. Edges.
    let mut node_of = vec![u32::MAX; txns.len()];
    let mut nodes = Vec::new();
    for (i, t) in txns.iter().enumerate() {
        if t.outcome == Outcome::Committed {
            node_of[i] = nodes.len() as u32;
            nodes.push(t.id);
        }
    }
    report.committed = nodes.len();
    let mut g = Graph::new(nodes);
    for (&(table, key), states) in &orders {
        for w in states.windows(2) {
            if let (Some(a), Some(b)) = (w[0].writer, w[1].writer) {
                if a != b {
                    g.edge(node_of[a as usize], node_of[b as usize], EdgeKind::Ww, table, key);
                }
            }
        }
    }
    // An observation of the columns `cols` of `states[i]` by node `r`: wr from the latest
    // writer of each of them at or before it, rw to the next writer of each after it. (The
    // first state changed every column, so the walk back ends there at the latest.)
    #[allow(clippy::too_many_arguments)]
    let observe = |g: &mut Graph,
                   states: &[State],
                   i: usize,
                   r: usize,
                   cols: u64,
                   predicate: bool,
                   table: u32,
                   key: u64| {
        let (wr, rw) = if predicate {
            (EdgeKind::PredWr, EdgeKind::PredRw)
        } else {
            (EdgeKind::Wr, EdgeKind::Rw)
        };
        let mut need = cols;
        let mut j = i;
        while need != 0 {
            let s = &states[j];
            if s.cols & need == 0 {
                j = s.run.0 as usize - 1;
                continue;
            }
            if let Some(w) = s.writer {
                if w as usize != r {
                    g.edge(node_of[w as usize], node_of[r], wr, table, key);
                }
            }
            need &= !s.cols;
            if j == 0 {
                break;
            }
            j -= 1;
        }
        let mut need = cols;
        let mut j = i + 1;
        while need != 0 && j < states.len() {
            let s = &states[j];
            if s.cols & need == 0 {
                j = s.run.1 as usize + 1;
                continue;
            }
            if let Some(w) = s.writer {
                if w as usize != r {
                    g.edge(node_of[r], node_of[w as usize], rw, table, key);
                }
            }
            need &= !s.cols;
            j += 1;
        }
    };
    // The absent state of a key that a transaction with timestamp `ts` observed: the latest one
    // at or before `ts`, else the first one.
    let absent_at = |states: &[State], ts: u64| -> Option<usize> {
        let before = states.iter().rposition(|s| !s.present && s.ts <= ts);
        before.or_else(|| states.iter().position(|s| !s.present))
    };
    let mut touched: Vec<Key> = Vec::new();
    for (r, t) in txns.iter().enumerate() {
        if t.outcome != Outcome::Committed {
            continue;
        }
        let events = history.events(t);
        touched.clear();
        for e in events {
            match *e {
                Event::Read { table, key, .. } | Event::Write { table, key, .. } => {
                    touched.push((table, key))
                }
                Event::Range { .. } => {}
            }
        }
        touched.sort_unstable();
        for e in events {
            match *e {
                Event::Read { table, key, stamp, cols } => {
                    let Some(states) = orders.get(&(table, key)) else {
                        if let Some(v) = vers.get(&(table, key, stamp)) {
                            if v.txn as usize != r && !committed(v.txn) {
                                report.add(
                                    AnomalyClass::G1a,
                                    || aborted_read(t.id, txns[v.txn as usize].id, table, key),
                                    Vec::new(),
                                );
                            }
                        } else if stamp != INITIAL && stamp != UNBORN {
                            report.add(
                                AnomalyClass::Invented,
                                || invented(t.id, stamp, table, key),
                                Vec::new(),
                            );
                        }
                        continue;
                    };
                    if stamp == UNBORN {
                        match absent_at(states, t.read_ts) {
                            Some(i) => observe(&mut g, states, i, r, cols, false, table, key),
                            None => report.add(
                                AnomalyClass::Invented,
                                || never_absent(t.id, table, key),
                                Vec::new(),
                            ),
                        }
                        continue;
                    }
                    if stamp == INITIAL {
                        if states[0].stamp == INITIAL {
                            observe(&mut g, states, 0, r, cols, false, table, key);
                        } else {
                            report.add(
                                AnomalyClass::Invented,
                                || invented(t.id, stamp, table, key),
                                Vec::new(),
                            );
                        }
                        continue;
                    }
                    match vers.get(&(table, key, stamp)) {
                        None => report.add(
                            AnomalyClass::Invented,
                            || invented(t.id, stamp, table, key),
                            Vec::new(),
                        ),
                        Some(v) if v.txn as usize == r => {}
                        Some(v) if !v.committed => report.add(
                            AnomalyClass::G1a,
                            || aborted_read(t.id, txns[v.txn as usize].id, table, key),
                            Vec::new(),
                        ),
                        Some(v) => {
                            if !v.last_in_txn {
                                let w = txns[v.txn as usize].id;
                                report.add(
                                    AnomalyClass::G1b,
                                    || {
                                        format!(
                                            "{} read t{table} k{key} as {} wrote it before \
                                             overwriting it itself",
                                            txn_name(t.id),
                                            txn_name(w)
                                        )
                                    },
                                    Vec::new(),
                                );
                            }
                            if let Some(&i) = pos.get(&(table, key, stamp)) {
                                observe(&mut g, states, i, r, cols, false, table, key);
                            }
                        }
                    }
                }
                Event::Range { table, lo, hi } => {
                    for &(_, key) in written.range((table, lo)..=(table, hi)) {
                        if touched.binary_search(&(table, key)).is_ok() {
                            continue;
                        }
                        let states = &orders[&(table, key)];
                        match absent_at(states, t.read_ts) {
                            Some(i) => observe(&mut g, states, i, r, u64::MAX, true, table, key),
                            None => report.add(
                                AnomalyClass::Invented,
                                || never_absent(t.id, table, key),
                                Vec::new(),
                            ),
                        }
                    }
                }
                Event::Write { .. } => {}
            }
        }
    }

    // 4. Cycles, level by level.
    g.finish();
    report.edges = g.counts();
    for (class, count, cycle) in g.cycles() {
        let ex = describe(&cycle);
        for _ in 0..count {
            report.add(class, || ex.clone(), cycle.clone());
        }
    }
    report.anomalies.sort_by_key(|a| AnomalyClass::ALL.iter().position(|c| *c == a.class));
    report
}

fn aborted_read(reader: u64, writer: u64, table: u32, key: u64) -> String {
    format!(
        "{} read t{table} k{key} as written by {}, which aborted",
        txn_name(reader),
        txn_name(writer)
    )
}

fn invented(reader: u64, stamp: Stamp, table: u32, key: u64) -> String {
    format!(
        "{} read version {stamp:#x} of t{table} k{key}, which no transaction wrote",
        txn_name(reader)
    )
}

fn never_absent(reader: u64, table: u32, key: u64) -> String {
    format!("{} observed t{table} k{key} absent, but it was never absent", txn_name(reader))
}

fn describe(cycle: &[CycleStep]) -> String {
    let mut s = format!("{} transactions in a cycle:", cycle.len());
    for c in cycle {
        s.push_str(&format!(" {} -{}-> {};", txn_name(c.from), c.kind, txn_name(c.to)));
    }
    s.pop();
    s
}

#[cfg(test)]
mod tests;
