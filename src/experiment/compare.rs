//! Two results files side by side (`txlab compare A B`): for every point and protocol both
//! measured, the ratio of B's median to A's, and the range the repeats allow (B's smallest over
//! A's largest to B's largest over A's smallest). For before/after measurements of a change.

use super::results::{median_min_max, Record};
use std::fmt::Write as _;

/// One point and protocol measured in both files.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The point's parameter values (`threads=2 theta=0.9`).
    pub point: String,
    /// The protocol.
    pub protocol: String,
    /// A's median, and its repeats' count.
    pub a: (f64, usize),
    /// B's median, and its repeats' count.
    pub b: (f64, usize),
    /// B's median over A's.
    pub ratio: f64,
    /// The smallest ratio the repeats allow (B's minimum over A's maximum).
    pub low: f64,
    /// The largest (B's maximum over A's minimum).
    pub high: f64,
}

/// A comparison of two sets of records on one statistic.
pub struct Comparison {
    /// Rows in A's order.
    pub rows: Vec<Row>,
    /// What did not match up.
    pub notes: Vec<String>,
}

type Key = (String, String);

fn key(r: &Record) -> Key {
    let point: Vec<String> = r.sweep.values.iter().map(|(n, v)| format!("{n}={v}")).collect();
    (point.join(" "), r.protocol.clone())
}

fn groups(records: &[Record], metric: &str) -> Vec<(Key, Vec<f64>)> {
    let mut out: Vec<(Key, Vec<f64>)> = Vec::new();
    for r in records {
        let Some(v) = r.metric(metric) else { continue };
        let k = key(r);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, vs)) => vs.push(v),
            None => out.push((k, vec![v])),
        }
    }
    out
}

/// Compares `b` with `a` on `metric`.
pub fn compare(a: &[Record], b: &[Record], metric: &str) -> Result<Comparison, String> {
    let ga = groups(a, metric);
    let gb = groups(b, metric);
    if ga.is_empty() || gb.is_empty() {
        return Err(format!("--metric {metric}: the results have no such statistic"));
    }
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (k, mut va) in ga.iter().cloned() {
        let Some((_, vb)) = gb.iter().find(|(g, _)| *g == k) else {
            notes.push(format!("only in A: {} {}", k.1, k.0));
            continue;
        };
        let mut vb = vb.clone();
        let (ma, lo_a, hi_a) = median_min_max(&mut va);
        let (mb, lo_b, hi_b) = median_min_max(&mut vb);
        let div = |x: f64, y: f64| if y == 0.0 { f64::NAN } else { x / y };
        rows.push(Row {
            point: k.0.clone(),
            protocol: k.1.clone(),
            a: (ma, va.len()),
            b: (mb, vb.len()),
            ratio: div(mb, ma),
            low: div(lo_b, hi_a),
            high: div(hi_b, lo_a),
        });
    }
    for (k, _) in &gb {
        if !ga.iter().any(|(g, _)| g == k) {
            notes.push(format!("only in B: {} {}", k.1, k.0));
        }
    }
    if rows.is_empty() {
        return Err("the two files have no point and protocol in common".into());
    }
    let flags = |rs: &[Record]| rs.first().map(|r| r.sweep.def.base.join(" ")).unwrap_or_default();
    if flags(a) != flags(b) {
        notes.push(format!("the run flags differ: A `{}`, B `{}`", flags(a), flags(b)));
    }
    let rev = |rs: &[Record]| {
        let mut v: Vec<&str> = rs.iter().filter_map(|r| r.value["git_revision"].as_str()).collect();
        v.dedup();
        v.join(", ")
    };
    notes.push(format!("revisions: A {}, B {}", rev(a), rev(b)));
    Ok(Comparison { rows, notes })
}

impl Comparison {
    /// The comparison as a table.
    pub fn table(&self, metric: &str) -> String {
        let mut s = String::new();
        let w = self.rows.iter().map(|r| r.point.len()).max().unwrap_or(5).max(5);
        let _ = writeln!(
            s,
            "{:<w$}  {:<13}{:>14}{:>14}{:>9}  {:<17}{:>6}",
            "point",
            "protocol",
            format!("A {metric}"),
            format!("B {metric}"),
            "B/A",
            "range",
            "runs"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<w$}  {:<13}{:>14}{:>14}{:>9.3}  {:<17}{:>6}",
                r.point,
                r.protocol,
                fmt(r.a.0),
                fmt(r.b.0),
                r.ratio,
                format!("{:.3} to {:.3}", r.low, r.high),
                format!("{}/{}", r.a.1, r.b.1),
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::figure::tests::rec;

    #[test]
    fn ratios_and_their_spread_point_by_point() {
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2"])];
        let a = vec![
            rec(g, &[("threads", "1")], "silo", 0, 100.0),
            rec(g, &[("threads", "1")], "silo", 1, 110.0),
            rec(g, &[("threads", "1")], "silo", 2, 90.0),
            rec(g, &[("threads", "2")], "silo", 0, 200.0),
        ];
        let b = vec![
            rec(g, &[("threads", "1")], "silo", 0, 150.0),
            rec(g, &[("threads", "1")], "silo", 1, 160.0),
            rec(g, &[("threads", "1")], "silo", 2, 140.0),
            rec(g, &[("threads", "1")], "nocc", 0, 1.0),
        ];
        let c = compare(&a, &b, "throughput").unwrap();
        assert_eq!(c.rows.len(), 1);
        let r = &c.rows[0];
        assert_eq!((r.point.as_str(), r.protocol.as_str()), ("threads=1", "silo"));
        assert_eq!(r.ratio, 1.5);
        assert!((r.low - 140.0 / 110.0).abs() < 1e-12 && (r.high - 160.0 / 90.0).abs() < 1e-12);
        assert!(c.notes.iter().any(|n| n == "only in A: silo threads=2"), "{:?}", c.notes);
        assert!(c.notes.iter().any(|n| n == "only in B: nocc threads=1"), "{:?}", c.notes);
        let t = c.table("throughput");
        assert!(t.contains("1.500"), "{t}");
        assert!(compare(&a, &b, "nothing").is_err());
    }
}
