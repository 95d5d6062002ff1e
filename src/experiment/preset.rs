//! Paper-figure presets: experiments defined as data (TOML files in `presets/`, compiled into
//! txlab), each a sweep, the figures to draw, and the paper's claims as explicit checks.
//!
//! A claim is one of two kinds, evaluated on the medians of the repeats:
//! - **ratio**: protocol A's statistic over protocol B's, at the points `at` selects (a list of
//!   values per parameter; parameters not named: every value), must lie in `[min, max]`.
//! - **trend**: one protocol's statistic along a parameter (optionally from..to), at every
//!   combination of the other parameters `at` selects, is `increasing`, `decreasing` (each step
//!   may go against the trend by `tolerance`, relative, default 5 %), or `peaks-inside` (the
//!   largest value is at neither end).
//!
//! A claim that needs more cores than the machine has (`needs_cores`, with `why` it does) is
//! reported as not observable here, with what was measured anyway: a many-core effect is not
//! refuted by a 2-core machine.

use super::figure::FigureSpec;
use super::results::{median_min_max, Record, Values};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The presets shipped with txlab: (file name, contents).
pub const SHIPPED: [(&str, &str); 35] = [
    ("ccbench-skew", include_str!("../../presets/ccbench-skew.toml")),
    ("ccbench-read-ratio", include_str!("../../presets/ccbench-read-ratio.toml")),
    ("ccbench-payload", include_str!("../../presets/ccbench-payload.toml")),
    ("ccbench-cardinality", include_str!("../../presets/ccbench-cardinality.toml")),
    ("ccbench-wait-nowait", include_str!("../../presets/ccbench-wait-nowait.toml")),
    ("ccbench-tictoc-read-only", include_str!("../../presets/ccbench-tictoc-read-only.toml")),
    ("ccbench-tictoc-medium", include_str!("../../presets/ccbench-tictoc-medium.toml")),
    ("ccbench-tictoc-high", include_str!("../../presets/ccbench-tictoc-high.toml")),
    ("ccbench-occ-nowait", include_str!("../../presets/ccbench-occ-nowait.toml")),
    ("tpcc-warehouses", include_str!("../../presets/tpcc-warehouses.toml")),
    ("ccbench-rapidgc", include_str!("../../presets/ccbench-rapidgc.toml")),
    ("ccbench-aggressive-gc", include_str!("../../presets/ccbench-aggressive-gc.toml")),
    ("ccbench-mvcc-skew", include_str!("../../presets/ccbench-mvcc-skew.toml")),
    ("ccbench-breakdown", include_str!("../../presets/ccbench-breakdown.toml")),
    ("ccbench-sv-breakdown", include_str!("../../presets/ccbench-sv-breakdown.toml")),
    ("ermia-analytic", include_str!("../../presets/ermia-analytic.toml")),
    ("cicada-ycsb-contended", include_str!("../../presets/cicada-ycsb-contended.toml")),
    ("cicada-ycsb-skew", include_str!("../../presets/cicada-ycsb-skew.toml")),
    ("cicada-ycsb-1op", include_str!("../../presets/cicada-ycsb-1op.toml")),
    ("cicada-timestamps", include_str!("../../presets/cicada-timestamps.toml")),
    ("cicada-factors", include_str!("../../presets/cicada-factors.toml")),
    ("cicada-gc-interval", include_str!("../../presets/cicada-gc-interval.toml")),
    ("cicada-backoff", include_str!("../../presets/cicada-backoff.toml")),
    ("cicada-index", include_str!("../../presets/cicada-index.toml")),
    ("bohm-cc-split", include_str!("../../presets/bohm-cc-split.toml")),
    ("bohm-ycsb-10rmw", include_str!("../../presets/bohm-ycsb-10rmw.toml")),
    ("bohm-ycsb-2rmw8r", include_str!("../../presets/bohm-ycsb-2rmw8r.toml")),
    ("bohm-long-reads", include_str!("../../presets/bohm-long-reads.toml")),
    ("bohm-smallbank", include_str!("../../presets/bohm-smallbank.toml")),
    ("ic3-micro-contention", include_str!("../../presets/ic3-micro-contention.toml")),
    ("ic3-micro-threads", include_str!("../../presets/ic3-micro-threads.toml")),
    ("ic3-user-aborts", include_str!("../../presets/ic3-user-aborts.toml")),
    ("ic3-tpcc", include_str!("../../presets/ic3-tpcc.toml")),
    ("ic3-factors", include_str!("../../presets/ic3-factors.toml")),
    ("ic3-online", include_str!("../../presets/ic3-online.toml")),
];

/// One experiment.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// The figure reproduced ("CCBench Fig. 11: effect of skew").
    pub title: String,
    /// Where the claim comes from (paper, section).
    pub source: String,
    /// What the experiment shows and how it departs from the paper's setting.
    pub about: String,
    /// `run` flags common to every point.
    pub flags: Vec<String>,
    /// Varied parameters: name and values, as `--vary` takes them (`["theta", "0,0.5,0.9"]`).
    pub vary: Vec<(String, String)>,
    /// Figures to draw.
    #[serde(default, rename = "figure")]
    pub figures: Vec<FigureDef>,
    /// The claims checked.
    #[serde(default, rename = "claim")]
    pub claims: Vec<Claim>,
}

/// A figure of a preset.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureDef {
    /// The varied parameter on the x axis, or `time` for the runs' timelines.
    pub x: String,
    /// The statistic on the y axis.
    pub y: String,
    /// Logarithmic x axis.
    #[serde(default)]
    pub log_x: bool,
    /// Logarithmic y axis.
    #[serde(default)]
    pub log_y: bool,
    /// Only points with these values.
    #[serde(default, rename = "where")]
    pub filter: BTreeMap<String, String>,
}

impl FigureDef {
    /// The figure to draw.
    pub fn spec(&self) -> FigureSpec {
        FigureSpec {
            x: self.x.clone(),
            y: self.y.clone(),
            log_x: self.log_x,
            log_y: self.log_y,
            filter: self.filter.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            title: None,
        }
    }
}

/// A trend's direction.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Trend {
    /// Each step rises (within the tolerance).
    Increasing,
    /// Each step falls (within the tolerance).
    Decreasing,
    /// The largest value is at neither end.
    PeaksInside,
}

/// One claim of the paper, as a check.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// The claim in words.
    pub text: String,
    /// The statistic compared (see [`Record::metric`]); throughput by default.
    #[serde(default = "throughput")]
    pub metric: String,
    /// Ratio claim: `[A, B]`, the ratio A / B.
    pub ratio: Option<(String, String)>,
    /// Ratio claim: the smallest ratio that holds.
    pub min: Option<f64>,
    /// Ratio claim: the largest ratio that holds.
    pub max: Option<f64>,
    /// Trend claim: the direction.
    pub trend: Option<Trend>,
    /// Trend claim: the protocol.
    pub protocol: Option<String>,
    /// Trend claim: the parameter along which.
    pub along: Option<String>,
    /// Trend claim: the first value of `along` considered.
    pub from: Option<String>,
    /// Trend claim: the last value of `along` considered.
    pub to: Option<String>,
    /// Trend claim: how far (relative) a step may go against the trend.
    #[serde(default = "tolerance")]
    pub tolerance: f64,
    /// The points considered: values per parameter (others: all).
    #[serde(default)]
    pub at: BTreeMap<String, Vec<String>>,
    /// Ratio claim: B is taken at A's point with these parameters set to these values (a
    /// factor analysis: `ratio = ["cicada", "cicada"]`, `at = { opt = ["cicada:sort=off"] }`,
    /// `baseline = { opt = "cicada:sort=on" }`); without it, at A's point.
    #[serde(default)]
    pub baseline: BTreeMap<String, String>,
    /// Cores the effect needs to show.
    #[serde(default)]
    pub needs_cores: usize,
    /// Why it needs them.
    #[serde(default)]
    pub why: String,
}

fn throughput() -> String {
    "throughput".into()
}

fn tolerance() -> f64 {
    0.05
}

/// What checking a claim found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The claim held; what was observed.
    Holds(String),
    /// It did not; what was observed.
    Fails(String),
    /// The machine cannot show it; why, and what was observed anyway.
    NotObservable(String),
    /// The results lack the points the claim needs.
    NoData(String),
}

impl Verdict {
    /// The verdict's word and CSS class.
    pub fn word(&self) -> (&'static str, &'static str) {
        match self {
            Verdict::Holds(_) => ("holds", "holds"),
            Verdict::Fails(_) => ("does not hold", "fails"),
            Verdict::NotObservable(_) => ("not observable on this machine", "unobservable"),
            Verdict::NoData(_) => ("no data", "fails"),
        }
    }

    /// What was observed.
    pub fn detail(&self) -> &str {
        match self {
            Verdict::Holds(d)
            | Verdict::Fails(d)
            | Verdict::NotObservable(d)
            | Verdict::NoData(d) => d,
        }
    }
}

/// Parses a preset file.
pub fn parse(name: &str, text: &str) -> Result<Preset, String> {
    let p: Preset = toml::from_str(text).map_err(|e| format!("preset {name}: {e}"))?;
    if !p.flags.iter().any(|f| f == "-p" || f == "--protocol") {
        return Err(format!("preset {name}: flags must list the protocols (-p)"));
    }
    for c in &p.claims {
        let ratio = c.ratio.is_some();
        let trend = c.trend.is_some();
        if ratio == trend {
            return Err(format!("preset {name}: claim `{}` needs either ratio or trend", c.text));
        }
        if ratio && c.min.is_none() && c.max.is_none() {
            return Err(format!("preset {name}: ratio claim `{}` needs min or max", c.text));
        }
        if trend && (c.protocol.is_none() || c.along.is_none()) {
            return Err(format!(
                "preset {name}: trend claim `{}` needs protocol and along",
                c.text
            ));
        }
        if !c.baseline.is_empty() && !ratio {
            return Err(format!("preset {name}: claim `{}` has a baseline but no ratio", c.text));
        }
        if let Some(unknown) = c.baseline.keys().find(|k| !p.vary.iter().any(|(n, _)| n == *k)) {
            return Err(format!(
                "preset {name}: claim `{}` sets baseline {unknown}, which the preset does not vary",
                c.text
            ));
        }
        if c.needs_cores > 0 && c.why.is_empty() {
            return Err(format!("preset {name}: claim `{}` needs cores but says not why", c.text));
        }
    }
    Ok(p)
}

/// The shipped preset called `name`.
pub fn shipped(name: &str) -> Result<Preset, String> {
    match SHIPPED.iter().find(|(n, _)| *n == name) {
        Some((n, text)) => parse(n, text),
        None => Err(format!(
            "no preset {name} (presets: {})",
            SHIPPED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        )),
    }
}

impl Preset {
    /// The `--vary` arguments of its sweep.
    pub fn vary_args(&self) -> Vec<String> {
        self.vary.iter().map(|(n, v)| format!("{n}={v}")).collect()
    }
}

/// Medians of `metric` per (protocol, point values) over `records`.
fn medians(records: &[Record], metric: &str) -> Vec<(String, Values, f64)> {
    let mut groups: Vec<(String, Values, Vec<f64>)> = Vec::new();
    for r in records {
        let Some(v) = r.metric(metric) else { continue };
        match groups.iter_mut().find(|(p, vals, _)| *p == r.protocol && *vals == r.sweep.values) {
            Some((_, _, vs)) => vs.push(v),
            None => groups.push((r.protocol.clone(), r.sweep.values.clone(), vec![v])),
        }
    }
    groups.into_iter().map(|(p, vals, mut vs)| (p, vals, median_min_max(&mut vs).0)).collect()
}

fn selected(claim: &Claim, values: &[(String, String)]) -> bool {
    claim.at.iter().all(|(name, allowed)| {
        values.iter().find(|(n, _)| n == name).is_none_or(|(_, v)| allowed.contains(v))
    })
}

fn point_text(values: &[(String, String)], skip: Option<&str>) -> String {
    let v: Vec<String> = values
        .iter()
        .filter(|(n, _)| Some(n.as_str()) != skip)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    v.join(" ")
}

fn num(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.abs() >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Checks `claim` against `records` measured on a machine with `cores` cores.
pub fn check(claim: &Claim, records: &[Record], cores: usize) -> Verdict {
    let verdict = if let Some((a, b)) = &claim.ratio {
        check_ratio(claim, a, b, records)
    } else {
        check_trend(claim, records)
    };
    match verdict {
        Verdict::Holds(d) | Verdict::Fails(d) if claim.needs_cores > cores => {
            Verdict::NotObservable(format!(
                "{} ({cores} cores here, {} needed); measured anyway: {d}",
                claim.why, claim.needs_cores
            ))
        }
        v => v,
    }
}

fn check_ratio(claim: &Claim, a: &str, b: &str, records: &[Record]) -> Verdict {
    let m = medians(records, &claim.metric);
    let mut seen = Vec::new();
    let mut ok = true;
    for (p, vals, va) in &m {
        if p != a || !selected(claim, vals) {
            continue;
        }
        let base: Values = vals
            .iter()
            .map(|(n, v)| (n.clone(), claim.baseline.get(n).unwrap_or(v).clone()))
            .collect();
        let Some((_, _, vb)) = m.iter().find(|(q, w, _)| q == b && *w == base) else { continue };
        let r = if *vb == 0.0 { f64::INFINITY } else { va / vb };
        let good = claim.min.is_none_or(|lo| r >= lo) && claim.max.is_none_or(|hi| r <= hi);
        ok &= good;
        seen.push(format!("{r:.2}x at {}", point_text(vals, None)));
    }
    if seen.is_empty() {
        return Verdict::NoData(format!("no point has both {a} and {b} measured"));
    }
    let bound = match (claim.min, claim.max) {
        (Some(lo), Some(hi)) => format!("between {lo} and {hi}"),
        (Some(lo), None) => format!("at least {lo}"),
        (None, Some(hi)) => format!("at most {hi}"),
        (None, None) => String::new(),
    };
    let b = if claim.baseline.is_empty() {
        b.to_string()
    } else {
        let at: Vec<String> = claim.baseline.iter().map(|(n, v)| format!("{n}={v}")).collect();
        format!("{b} at {}", at.join(" "))
    };
    let d = format!("{a} / {b} {}: {} (needed: {bound})", claim.metric, seen.join(", "));
    if ok {
        Verdict::Holds(d)
    } else {
        Verdict::Fails(d)
    }
}

fn check_trend(claim: &Claim, records: &[Record]) -> Verdict {
    let (Some(trend), Some(protocol), Some(along)) = (claim.trend, &claim.protocol, &claim.along)
    else {
        return Verdict::NoData("the claim names no trend".into());
    };
    let m = medians(records, &claim.metric);
    // The order of `along`'s values, as the sweep lists them.
    let order: Vec<String> = records
        .iter()
        .flat_map(|r| r.sweep.def.grid.iter())
        .find(|a| a.name == *along)
        .map(|a| a.values.clone())
        .unwrap_or_default();
    let lo = claim.from.as_ref().and_then(|f| order.iter().position(|v| v == f)).unwrap_or(0);
    let hi = claim
        .to
        .as_ref()
        .and_then(|t| order.iter().position(|v| v == t))
        .unwrap_or(order.len().saturating_sub(1));
    // Lines: the other parameters' values.
    let mut lines: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for (p, vals, v) in &m {
        if p != protocol || !selected(claim, vals) {
            continue;
        }
        let Some((_, x)) = vals.iter().find(|(n, _)| n == along) else { continue };
        let Some(at) = order.iter().position(|o| o == x) else { continue };
        if at < lo || at > hi {
            continue;
        }
        let key = point_text(vals, Some(along));
        match lines.iter_mut().find(|(k, _)| *k == key) {
            Some((_, pts)) => pts.push((x.clone(), *v)),
            None => lines.push((key, vec![(x.clone(), *v)])),
        }
    }
    let mut ok = true;
    let mut seen = Vec::new();
    let mut any = false;
    for (key, mut pts) in lines {
        pts.sort_by_key(|(x, _)| order.iter().position(|o| o == x));
        if pts.len() < 2 {
            continue;
        }
        any = true;
        let ys: Vec<f64> = pts.iter().map(|(_, y)| *y).collect();
        let t = claim.tolerance;
        let good = match trend {
            Trend::Increasing => {
                ys.windows(2).all(|w| w[1] >= w[0] * (1.0 - t)) && ys[ys.len() - 1] > ys[0]
            }
            Trend::Decreasing => {
                ys.windows(2).all(|w| w[1] <= w[0] * (1.0 + t)) && ys[ys.len() - 1] < ys[0]
            }
            Trend::PeaksInside => {
                let top = ys.iter().cloned().fold(f64::MIN, f64::max);
                ys[0] < top && ys[ys.len() - 1] < top
            }
        };
        ok &= good;
        let path: Vec<String> =
            pts.iter().map(|(x, y)| format!("{} at {along}={x}", num(*y))).collect();
        let at = if key.is_empty() { String::new() } else { format!(" ({key})") };
        seen.push(format!("{}{at}", path.join(" → ")));
    }
    if !any {
        return Verdict::NoData(format!("{protocol} has fewer than two points along {along}"));
    }
    let d = format!("{protocol} {}: {}", claim.metric, seen.join("; "));
    if ok {
        Verdict::Holds(d)
    } else {
        Verdict::Fails(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::figure::tests::rec;

    /// Synthetic results for `preset`: every point and protocol, one run each, with `value`
    /// giving each (protocol, point values) its statistic.
    /// A statistic's value for a protocol at a point.
    type ValueOf<'a> = &'a dyn Fn(&str, &[(String, String)]) -> f64;

    fn synthetic(preset: &Preset, value: ValueOf<'_>) -> Vec<Record> {
        let owned: Vec<(String, Vec<String>)> = preset
            .vary
            .iter()
            .map(|(n, v)| {
                let sep = if v.contains(';') { ';' } else { ',' };
                (n.clone(), v.split(sep).map(|s| s.trim().to_string()).collect())
            })
            .collect();
        let protocols = protocols_of(preset);
        let vals: Vec<Vec<&str>> =
            owned.iter().map(|(_, v)| v.iter().map(String::as_str).collect()).collect();
        let grid: Vec<(&str, &[&str])> =
            owned.iter().zip(&vals).map(|((n, _), v)| (n.as_str(), v.as_slice())).collect();
        let def = crate::experiment::results::SweepDef {
            base: vec![],
            grid: owned
                .iter()
                .map(|(n, v)| crate::experiment::results::Axis {
                    name: n.clone(),
                    values: v.clone(),
                })
                .collect(),
        };
        let mut out = Vec::new();
        for i in 0..def.points() {
            let point = def.point(i);
            let refs: Vec<(&str, &str)> =
                point.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            for p in &protocols {
                let v = value(p, &point);
                let mut r = rec(&grid, &refs, p, 0, v);
                // The statistic under test, whatever its name.
                for c in &preset.claims {
                    set_metric(&mut r.value, &c.metric, v);
                }
                out.push(r);
            }
        }
        out
    }

    fn set_metric(v: &mut serde_json::Value, metric: &str, x: f64) {
        match metric {
            "throughput" | "abort_ratio" => v[metric] = x.into(),
            m if m.ends_with("_us") => v["latency"][m] = x.into(),
            m if m.starts_with("aborts.") => v["aborts"][&m["aborts.".len()..]] = x.into(),
            // A dotted path (`history_check.committed`, or `TYPE.stat`, which
            // `Record::metric` falls back to reading as a path when there is no per-type list).
            m => {
                let mut at = v;
                for part in m.split('.') {
                    at = &mut at[part];
                }
                *at = x.into();
            }
        }
    }

    fn protocols_of(preset: &Preset) -> Vec<String> {
        let at = preset.flags.iter().position(|f| f == "-p" || f == "--protocol").expect("-p");
        preset.flags[at + 1].split(',').map(str::to_string).collect()
    }

    /// A value that makes `claim` hold (`holds`) or fail, at this protocol and point.
    fn designed(
        claim: &Claim,
        holds: bool,
        preset: &Preset,
    ) -> impl Fn(&str, &[(String, String)]) -> f64 {
        let claim = claim.clone();
        let order: Vec<String> = claim
            .along
            .as_ref()
            .and_then(|a| preset.vary.iter().find(|(n, _)| n == a))
            .map(|(_, v)| v.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();
        move |p: &str, point: &[(String, String)]| {
            if let Some((a, _)) = &claim.ratio {
                let target = match (claim.min, claim.max) {
                    (Some(lo), Some(hi)) => {
                        if holds {
                            (lo + hi) / 2.0
                        } else {
                            hi * 2.0
                        }
                    }
                    (Some(lo), None) => {
                        if holds {
                            lo * 1.5 + 0.1
                        } else {
                            lo * 0.5
                        }
                    }
                    (None, Some(hi)) => {
                        if holds {
                            hi * 0.5
                        } else {
                            hi * 2.0 + 0.1
                        }
                    }
                    (None, None) => 1.0,
                };
                // With a baseline, A's points other than the baseline's are the numerators.
                let at_baseline = !claim.baseline.is_empty()
                    && claim
                        .baseline
                        .iter()
                        .all(|(k, v)| point.iter().any(|(n, w)| n == k && w == v));
                return if p == a && !at_baseline { 1000.0 * target } else { 1000.0 };
            }
            let along = claim.along.as_deref().unwrap_or("");
            let x = point.iter().find(|(n, _)| n == along).map(|(_, v)| v.as_str()).unwrap_or("");
            let i = order.iter().position(|o| o == x).unwrap_or(0) as f64;
            let n = order.len() as f64;
            let shape = match (claim.trend, holds) {
                (Some(Trend::Increasing), true) | (Some(Trend::Decreasing), false) => i,
                (Some(Trend::Decreasing), true) | (Some(Trend::Increasing), false) => n - i,
                (Some(Trend::PeaksInside), true) => n - (i - (n - 1.0) / 2.0).abs(),
                _ => i,
            };
            1000.0 + 100.0 * shape
        }
    }

    #[test]
    fn every_preset_parses_and_names_only_run_flags_that_exist() {
        for (name, text) in SHIPPED {
            let p = parse(name, text).unwrap();
            // Every point must be a valid `run` command line (validated, nothing loaded).
            let sweep = crate::cli::validate_sweep(&p.flags, &p.vary_args());
            assert!(sweep.is_ok(), "preset {name}: {}", sweep.err().unwrap_or_default());
            for f in &p.figures {
                let varied = p.vary.iter().any(|(n, _)| *n == f.x);
                let timeline =
                    f.x == super::super::figure::TIME && p.flags.iter().any(|a| a == "--timeline");
                assert!(varied || timeline, "preset {name}: figure x {}", f.x);
            }
            assert!(!p.claims.is_empty(), "preset {name} checks no claim");
        }
    }

    #[test]
    fn every_claim_of_every_preset_is_checked_both_ways() {
        for (name, text) in SHIPPED {
            let p = parse(name, text).unwrap();
            for c in &p.claims {
                let cores = c.needs_cores.max(1);
                let yes = synthetic(&p, &designed(c, true, &p));
                let v = check(c, &yes, cores);
                assert!(matches!(v, Verdict::Holds(_)), "preset {name}, `{}`: {v:?}", c.text);
                let no = synthetic(&p, &designed(c, false, &p));
                let v = check(c, &no, cores);
                assert!(matches!(v, Verdict::Fails(_)), "preset {name}, `{}`: {v:?}", c.text);
                if c.needs_cores > 1 {
                    let v = check(c, &yes, c.needs_cores - 1);
                    assert!(matches!(v, Verdict::NotObservable(_)), "preset {name}: {v:?}");
                }
            }
        }
    }

    #[test]
    fn verdicts_say_what_was_observed() {
        let p = parse(
            "t",
            r#"
title = "T"
source = "S"
about = "A"
flags = ["-p", "silo,2pl-nowait"]
vary = [["theta", "0,0.99"]]
[[claim]]
text = "silo beats 2pl at high skew"
ratio = ["silo", "2pl-nowait"]
at = { theta = ["0.99"] }
min = 1.0
[[claim]]
text = "silo falls with skew"
trend = "decreasing"
protocol = "silo"
along = "theta"
"#,
        )
        .unwrap();
        let rs = synthetic(&p, &|proto, pt| {
            let hot = pt[0].1 == "0.99";
            match (proto, hot) {
                ("silo", false) => 2_000_000.0,
                ("silo", true) => 1_310_000.0,
                (_, false) => 1_900_000.0,
                (_, true) => 1_000_000.0,
            }
        });
        assert_eq!(
            check(&p.claims[0], &rs, 2),
            Verdict::Holds(
                "silo / 2pl-nowait throughput: 1.31x at theta=0.99 (needed: at least 1)".into()
            )
        );
        assert_eq!(
            check(&p.claims[1], &rs, 2),
            Verdict::Holds("silo throughput: 2.00M at theta=0 → 1.31M at theta=0.99".into())
        );
        let f = parse(
            "f",
            r#"
title = "T"
source = "S"
about = "A"
flags = ["-p", "cicada"]
vary = [["opt", "cicada:sort=on,cicada:sort=off"]]
[[claim]]
text = "sorting pays"
ratio = ["cicada", "cicada"]
at = { opt = ["cicada:sort=off"] }
baseline = { opt = "cicada:sort=on" }
max = 1.0
"#,
        )
        .unwrap();
        let rs = synthetic(&f, &|_, pt| if pt[0].1.ends_with("on") { 1e6 } else { 0.9e6 });
        assert_eq!(
            check(&f.claims[0], &rs, 2),
            Verdict::Holds(
                "cicada / cicada at opt=cicada:sort=on throughput: 0.90x at opt=cicada:sort=off \
                 (needed: at most 1)"
                    .into()
            )
        );
        let text = r#"
title = "T"
source = "S"
about = "A"
flags = ["-p", "cicada"]
vary = [["theta", "0,0.9"]]
[[claim]]
text = "x"
ratio = ["cicada", "cicada"]
baseline = { opt = "cicada:sort=on" }
max = 1.0
"#;
        assert_eq!(
            parse("u", text).err().unwrap(),
            "preset u: claim `x` sets baseline opt, which the preset does not vary"
        );
        let bad = parse("b", "title = 1").err().unwrap();
        assert!(bad.starts_with("preset b:"), "{bad}");
        let missing = shipped("nope").err().unwrap();
        assert!(missing.starts_with("no preset nope (presets: ccbench-skew"), "{missing}");
    }
}
