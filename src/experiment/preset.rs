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
//! A claim that needs many cores (`needs_cores`, with `why` it does) is judged on what was run:
//! when the points it reads ran fewer threads than that, or ran on a machine with fewer cores,
//! it is reported as not observable, saying which was lacking, with what was measured anyway: a
//! many-core effect is not refuted by a 2-core machine.
//!
//! Presets scale to the machine they run on ([`Preset::for_machine`]): a value may be written
//! relative to the cores (`cores`, `4*cores`, `cores/2`) and a varied list may end in a
//! progression up to such a value (`1,2,4,...,cores`; `2,4,6,...,4*cores`), wherever a preset
//! gives values (its flags, its varied lists, a claim's `at`, `from`, `to` and `baseline`, a
//! figure's `where`). `presets/README.md` documents the format.

use super::figure::FigureSpec;
use super::results::{median_min_max, Record, Values};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The presets shipped with txlab: (file name, contents).
pub const SHIPPED: [(&str, &str); 38] = [
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
    ("ermia-tpce-contention", include_str!("../../presets/ermia-tpce-contention.toml")),
    ("ermia-tpce-threads", include_str!("../../presets/ermia-tpce-threads.toml")),
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
    ("ic3-tpce", include_str!("../../presets/ic3-tpce.toml")),
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

/// The value of `term` when it is written relative to the machine's `cores`: `cores`,
/// `K*cores`, `cores*K` or `cores/K` (at least 1); `None` for any other text.
pub fn relative(term: &str, cores: usize) -> Option<usize> {
    let t: String = term.chars().filter(|c| !c.is_whitespace()).collect();
    let factor = |k: &str| k.parse::<usize>().ok().filter(|&k| k > 0);
    if t == "cores" {
        Some(cores)
    } else if let Some(k) = t.strip_suffix("*cores") {
        factor(k).map(|k| k * cores)
    } else if let Some(k) = t.strip_prefix("cores*") {
        factor(k).map(|k| k * cores)
    } else if let Some(k) = t.strip_prefix("cores/") {
        factor(k).map(|k| (cores / k).max(1))
    } else {
        None
    }
}

/// `term` resolved for a machine with `cores` cores (unchanged unless it is relative).
fn resolve(term: &str, cores: usize) -> String {
    relative(term, cores).map_or_else(|| term.to_string(), |n| n.to_string())
}

/// A varied list resolved for a machine with `cores` cores: relative terms become numbers, and
/// a progression `A,B,C,...,END` (three terms or more, geometric with a whole ratio or
/// arithmetic, before `...`) continues up to END, which is included; terms above END are
/// dropped, as are repeated values.
pub fn expand(list: &str, cores: usize) -> Result<String, String> {
    let sep = if list.contains(';') { ';' } else { ',' };
    let terms: Vec<&str> = list.split(sep).map(str::trim).collect();
    let Some(dots) = terms.iter().position(|t| *t == "...") else {
        let out: Vec<String> = dedup(terms.iter().map(|t| resolve(t, cores)));
        return Ok(out.join(&sep.to_string()));
    };
    let bad = |why: &str| Err(format!("`{list}`: {why}"));
    if dots + 2 != terms.len() {
        return bad("`...` must be followed by exactly one value, the last");
    }
    if dots < 3 {
        return bad("`...` needs three values before it to show the progression");
    }
    let number = |t: &str| relative(t, cores).or_else(|| t.parse::<usize>().ok());
    let mut head = Vec::new();
    for t in &terms[..dots] {
        match number(t) {
            Some(n) => head.push(n),
            None => return bad(&format!("`{t}` is not a whole number, cores, K*cores or cores/K")),
        }
    }
    let Some(end) = number(terms[dots + 1]) else {
        return bad(&format!(
            "the last value `{}` is not a whole number or relative to cores",
            terms[dots + 1]
        ));
    };
    let (a, b, c) = (head[dots - 3], head[dots - 2], head[dots - 1]);
    // The step: a whole ratio (1,2,4) or a difference (2,4,6).
    let (ratio, diff) = if a > 0 && b % a == 0 && b / a >= 2 && c == b * (b / a) {
        (b / a, 0)
    } else if b > a && c > b && c - b == b - a {
        (1, b - a)
    } else {
        return bad("the values before `...` are neither a progression with a whole ratio nor evenly spaced");
    };
    let next = |x: usize| x * ratio + diff;
    let mut values: Vec<usize> = head.iter().copied().filter(|&v| v <= end).collect();
    let mut x = c;
    while next(x) <= end {
        x = next(x);
        values.push(x);
    }
    if values.last() != Some(&end) {
        values.push(end);
    }
    let out = dedup(values.iter().map(usize::to_string));
    Ok(out.join(","))
}

fn dedup(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
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

/// The preset in file `path` (a user's preset, in the shipped presets' format), named after the
/// file's stem.
pub fn from_file(path: &std::path::Path) -> Result<(String, Preset), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--file {}: {e}", path.display()))?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("--file {}: the file needs a name", path.display()))?
        .to_string();
    let mut p = parse(&path.display().to_string(), &text)?;
    // A declarative workload named by a relative path is beside the preset, wherever txlab
    // runs from.
    let dir = path.parent().unwrap_or(std::path::Path::new(""));
    let beside = |w: &str| match w.strip_prefix("spec:") {
        Some(f) if std::path::Path::new(f).is_relative() => {
            format!("spec:{}", dir.join(f).display())
        }
        _ => w.to_string(),
    };
    let mut workload_next = false;
    for f in &mut p.flags {
        if workload_next {
            *f = beside(f);
        } else if let Some(w) = f.strip_prefix("--workload=") {
            *f = format!("--workload={}", beside(w));
        }
        workload_next = f == "-w" || f == "--workload";
    }
    for (name, values) in &mut p.vary {
        if name == "workload" {
            let sep = if values.contains(';') { ";" } else { "," };
            *values = values.split(sep).map(|v| beside(v.trim())).collect::<Vec<_>>().join(sep);
        }
    }
    Ok((name, p))
}

impl Preset {
    /// The `--vary` arguments of its sweep.
    pub fn vary_args(&self) -> Vec<String> {
        self.vary.iter().map(|(n, v)| format!("{n}={v}")).collect()
    }

    /// The preset with a user's overrides: `vary` replaces the values of parameters the preset
    /// varies, `set` gives fixed `run` flags a value (replacing the preset's, or added).
    pub fn with_overrides(
        mut self,
        vary: &[(String, String)],
        set: &[(String, String)],
    ) -> Result<Preset, String> {
        for (name, values) in vary {
            match self.vary.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v = values.clone(),
                None => {
                    let varied: Vec<&str> = self.vary.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(format!(
                        "--vary {name}: the preset does not vary {name} (it varies {}); give a \
                         fixed value with --set {name}=VALUE",
                        varied.join(", ")
                    ));
                }
            }
        }
        for (name, value) in set {
            if self.vary.iter().any(|(n, _)| n == name) {
                return Err(format!(
                    "--set {name}: the preset varies {name}; give its values with --vary \
                     {name}=V1,V2,..."
                ));
            }
            let short = match name.as_str() {
                "protocol" => Some("-p"),
                "workload" => Some("-w"),
                "duration" => Some("-d"),
                "threads" => Some("-t"),
                _ => None,
            };
            let long = format!("--{name}");
            let at = self.flags.iter().position(|f| *f == long || Some(f.as_str()) == short);
            match at {
                Some(i) if i + 1 < self.flags.len() => self.flags[i + 1] = value.clone(),
                _ => self.flags.extend([long, value.clone()]),
            }
        }
        Ok(self)
    }

    /// The preset for a machine with `cores` cores: every value written relative to the cores
    /// resolved, every progression expanded.
    pub fn for_machine(mut self, cores: usize) -> Result<Preset, String> {
        for f in self.flags.iter_mut() {
            *f = resolve(f, cores);
        }
        for (name, values) in self.vary.iter_mut() {
            *values = expand(values, cores).map_err(|e| format!("vary {name} {e}"))?;
        }
        for c in self.claims.iter_mut() {
            for values in c.at.values_mut() {
                *values = dedup(values.iter().map(|v| resolve(v, cores)));
            }
            for v in c.baseline.values_mut().chain(c.from.iter_mut()).chain(c.to.iter_mut()) {
                *v = resolve(v, cores);
            }
        }
        for f in self.figures.iter_mut() {
            for v in f.filter.values_mut() {
                *v = resolve(v, cores);
            }
        }
        Ok(self)
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

/// Checks `claim` against `records`. A claim that needs cores is not observable when the
/// records it reads ran fewer threads, or on fewer cores, than it needs.
pub fn check(claim: &Claim, records: &[Record]) -> Verdict {
    let verdict = if let Some((a, b)) = &claim.ratio {
        check_ratio(claim, a, b, records)
    } else {
        check_trend(claim, records)
    };
    if claim.needs_cores == 0 {
        return verdict;
    }
    let observed = match &verdict {
        Verdict::Holds(d) | Verdict::Fails(d) => d.clone(),
        _ => return verdict,
    };
    match lacking(claim, records) {
        Some(lack) => Verdict::NotObservable(format!(
            "{} (needs {} cores; {lack}); measured anyway: {observed}",
            claim.why, claim.needs_cores
        )),
        None => verdict,
    }
}

/// What the runs `claim` reads lacked of the cores it needs: threads running at once, cores
/// to run them on, or both; `None` when they had enough of both.
fn lacking(claim: &Claim, records: &[Record]) -> Option<String> {
    let protocols: Vec<&str> = match (&claim.ratio, &claim.protocol) {
        (Some((a, b)), _) => vec![a, b],
        (None, Some(p)) => vec![p],
        (None, None) => vec![],
    };
    let read = records
        .iter()
        .filter(|r| protocols.contains(&r.protocol.as_str()) && selected(claim, &r.sweep.values));
    let (mut threads, mut cores) = (0, usize::MAX);
    for r in read {
        threads = threads.max(r.value["threads"].as_u64().unwrap_or(0) as usize);
        cores = cores.min(r.value["machine"]["cores"].as_u64().unwrap_or(0) as usize);
    }
    let mut lack = Vec::new();
    if threads < claim.needs_cores {
        lack.push(format!("the runs it reads ran at most {threads} threads"));
    }
    if cores < claim.needs_cores {
        lack.push(format!("they ran on {cores} cores"));
    }
    (!lack.is_empty()).then(|| lack.join(" and "))
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

    #[test]
    fn a_preset_files_declarative_workloads_are_read_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.toml");
        std::fs::write(
            &path,
            r#"
title = "t"
source = "s"
about = "a"
flags = ["-p", "silo", "-w", "spec:w.toml", "--duration", "1"]
vary = [["workload", "spec:a.toml,spec:/abs/b.toml,ycsb"]]
"#,
        )
        .unwrap();
        let (name, p) = from_file(&path).unwrap();
        assert_eq!(name, "mine");
        let beside = |f: &str| format!("spec:{}", dir.path().join(f).display());
        assert_eq!(p.flags[3], beside("w.toml"));
        assert_eq!(
            p.vary[0].1,
            format!("{},spec:/abs/b.toml,ycsb", beside("a.toml")),
            "relative paths only"
        );
    }

    /// Synthetic results for `preset`: every point and protocol, one run each, with `value`
    /// giving each (protocol, point values) its statistic.
    /// A statistic's value for a protocol at a point.
    type ValueOf<'a> = &'a dyn Fn(&str, &[(String, String)]) -> f64;

    /// Each run's `threads` is its point's, else the preset's `--threads`; it ran on `cores`.
    fn synthetic(preset: &Preset, value: ValueOf<'_>, cores: usize) -> Vec<Record> {
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
                let fixed = preset.flags.iter().position(|f| f == "--threads" || f == "-t");
                let threads = point
                    .iter()
                    .find(|(n, _)| n == "threads")
                    .map(|(_, t)| t.as_str())
                    .or_else(|| fixed.map(|i| preset.flags[i + 1].as_str()))
                    .map_or(cores, |t| t.parse().expect("a number of threads"));
                r.value["threads"] = threads.into();
                r.value["machine"]["cores"] = cores.into();
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
            // Every point must be a valid `run` command line (validated, nothing loaded), on
            // small and large machines alike.
            for cores in [1, 2, 16, 64] {
                let p = parse(name, text).unwrap().for_machine(cores).unwrap();
                let sweep = crate::cli::validate_sweep(&p.flags, &p.vary_args());
                assert!(sweep.is_ok(), "preset {name}, {cores} cores: {}", sweep.err().unwrap());
                for f in &p.figures {
                    let varied = p.vary.iter().any(|(n, _)| *n == f.x);
                    let timeline = f.x == super::super::figure::TIME
                        && p.flags.iter().any(|a| a == "--timeline");
                    assert!(varied || timeline, "preset {name}: figure x {}", f.x);
                    // A figure's filter names values the sweep runs.
                    for (n, v) in &f.filter {
                        let axis = p.vary.iter().find(|(a, _)| a == n);
                        let runs = axis.is_none_or(|(_, vs)| vs.split([',', ';']).any(|x| x == v));
                        assert!(runs, "preset {name}, {cores} cores: figure where {n}={v}");
                    }
                }
                assert!(!p.claims.is_empty(), "preset {name} checks no claim");
            }
        }
    }

    #[test]
    fn every_claim_of_every_preset_is_checked_both_ways() {
        for (name, text) in SHIPPED {
            let raw = parse(name, text).unwrap();
            for (k, c) in raw.claims.iter().enumerate() {
                // On a machine with the cores the claim needs (2 at least: some presets fix
                // more threads than one core holds).
                let cores = c.needs_cores.max(2);
                let p = raw.clone().for_machine(cores).unwrap();
                let c = &p.claims[k];
                let yes = synthetic(&p, &designed(c, true, &p), cores);
                let v = check(c, &yes);
                assert!(matches!(v, Verdict::Holds(_)), "preset {name}, `{}`: {v:?}", c.text);
                let no = synthetic(&p, &designed(c, false, &p), cores);
                let v = check(c, &no);
                assert!(matches!(v, Verdict::Fails(_)), "preset {name}, `{}`: {v:?}", c.text);
                if c.needs_cores > 1 {
                    let fewer = synthetic(&p, &designed(c, true, &p), c.needs_cores - 1);
                    let v = check(c, &fewer);
                    let Verdict::NotObservable(d) = &v else { panic!("preset {name}: {v:?}") };
                    let lack = format!("they ran on {} cores", c.needs_cores - 1);
                    assert!(d.contains(&lack), "preset {name}: {d}");
                }
            }
        }
    }

    /// A many-core claim is judged on the threads its points ran and the cores they ran on,
    /// not on the machine that checks it.
    #[test]
    fn a_claim_that_needs_cores_is_judged_on_the_runs_it_reads() {
        let p = parse(
            "t",
            r#"
title = "T"
source = "S"
about = "A"
flags = ["-p", "tictoc"]
vary = [["threads", "1,2,4,...,cores"]]
[[claim]]
text = "tictoc peaks"
trend = "peaks-inside"
protocol = "tictoc"
along = "threads"
needs_cores = 32
why = "conflicts need many threads"
"#,
        )
        .unwrap();
        let peak = |_: &str, pt: &[(String, String)]| {
            let t: f64 = pt[0].1.parse().unwrap();
            1000.0 - (t - 16.0).abs()
        };
        // A 64-core machine ran 1..64 threads: observable, and it holds.
        let big = p.clone().for_machine(64).unwrap();
        assert_eq!(big.vary[0].1, "1,2,4,8,16,32,64");
        assert!(matches!(check(&big.claims[0], &synthetic(&big, &peak, 64)), Verdict::Holds(_)));
        // The same machine told to run 1..8 threads: the threads were lacking.
        let few = p.clone().with_overrides(&[("threads".into(), "1,2,4,8".into())], &[]).unwrap();
        let few = few.for_machine(64).unwrap();
        let Verdict::NotObservable(d) = check(&few.claims[0], &synthetic(&few, &peak, 64)) else {
            panic!("8 threads cannot show a 32-core effect");
        };
        assert!(
            d.starts_with(
                "conflicts need many threads (needs 32 cores; the runs it reads ran at most 8 \
                 threads); measured anyway: tictoc throughput: "
            ),
            "{d}"
        );
        // 16 to 64 threads on 2 cores: the cores were lacking.
        let many = p.with_overrides(&[("threads".into(), "16,32,64".into())], &[]).unwrap();
        let many = many.for_machine(2).unwrap();
        let Verdict::NotObservable(d) = check(&many.claims[0], &synthetic(&many, &peak, 2)) else {
            panic!("2 cores cannot show a 32-core effect");
        };
        assert!(d.starts_with("conflicts need many threads (needs 32 cores; they ran on 2 cores)"));
    }

    #[test]
    fn values_relative_to_the_cores_resolve_for_the_machine() {
        assert_eq!(relative("cores", 6), Some(6));
        assert_eq!(relative("4*cores", 6), Some(24));
        assert_eq!(relative("cores * 2", 6), Some(12));
        assert_eq!(relative("cores/4", 2), Some(1));
        assert_eq!(relative("0*cores", 2), None);
        assert_eq!(relative("corez", 2), None);
        assert_eq!(expand("1,2,4,...,cores", 2).unwrap(), "1,2");
        assert_eq!(expand("1,2,4,...,cores", 6).unwrap(), "1,2,4,6");
        assert_eq!(expand("1,2,4,...,4*cores", 2).unwrap(), "1,2,4,8");
        assert_eq!(expand("1,2,4,...,cores", 1).unwrap(), "1");
        assert_eq!(expand("2,4,6,...,12", 1).unwrap(), "2,4,6,8,10,12");
        assert_eq!(expand("cores,2*cores,4*cores", 2).unwrap(), "2,4,8");
        assert_eq!(expand("1,cores,4*cores", 1).unwrap(), "1,4");
        assert_eq!(expand("0,0.5,0.99", 8).unwrap(), "0,0.5,0.99");
        assert_eq!(expand("a=1;b=2", 8).unwrap(), "a=1;b=2");
        assert_eq!(
            expand("1,2,...,8", 2).err().unwrap(),
            "`1,2,...,8`: `...` needs three values before it to show the progression"
        );
        assert_eq!(
            expand("1,2,5,...,8", 2).err().unwrap(),
            "`1,2,5,...,8`: the values before `...` are neither a progression with a whole \
             ratio nor evenly spaced"
        );
        assert_eq!(
            expand("1,2,4,...,many", 2).err().unwrap(),
            "`1,2,4,...,many`: the last value `many` is not a whole number or relative to cores"
        );
        let p = parse(
            "t",
            r#"
title = "T"
source = "S"
about = "A"
flags = ["-p", "silo", "--threads", "2*cores"]
vary = [["theta", "0,0.9"]]
[[figure]]
x = "theta"
y = "throughput"
where = { theta = "0" }
[[claim]]
text = "x"
ratio = ["silo", "silo"]
at = { theta = ["0.9"] }
min = 1.0
"#,
        )
        .unwrap();
        let p = p.for_machine(8).unwrap();
        assert_eq!(p.flags, ["-p", "silo", "--threads", "16"]);
        let set = p.clone().with_overrides(&[], &[("threads".into(), "3".into())]).unwrap();
        assert_eq!(set.flags, ["-p", "silo", "--threads", "3"]);
        let added = p.clone().with_overrides(&[], &[("records".into(), "10".into())]).unwrap();
        assert_eq!(added.flags, ["-p", "silo", "--threads", "16", "--records", "10"]);
        let protocols = p.clone().with_overrides(&[], &[("protocol".into(), "tictoc".into())]);
        assert_eq!(protocols.unwrap().flags[..2], ["-p", "tictoc"]);
        assert_eq!(
            p.clone().with_overrides(&[], &[("theta".into(), "0.5".into())]).err().unwrap(),
            "--set theta: the preset varies theta; give its values with --vary theta=V1,V2,..."
        );
        assert_eq!(
            p.with_overrides(&[("threads".into(), "1,2".into())], &[]).err().unwrap(),
            "--vary threads: the preset does not vary threads (it varies theta); give a fixed \
             value with --set threads=VALUE"
        );
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
        let rs = synthetic(
            &p,
            &|proto, pt| {
                let hot = pt[0].1 == "0.99";
                match (proto, hot) {
                    ("silo", false) => 2_000_000.0,
                    ("silo", true) => 1_310_000.0,
                    (_, false) => 1_900_000.0,
                    (_, true) => 1_000_000.0,
                }
            },
            2,
        );
        assert_eq!(
            check(&p.claims[0], &rs),
            Verdict::Holds(
                "silo / 2pl-nowait throughput: 1.31x at theta=0.99 (needed: at least 1)".into()
            )
        );
        assert_eq!(
            check(&p.claims[1], &rs),
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
        let rs = synthetic(&f, &|_, pt| if pt[0].1.ends_with("on") { 1e6 } else { 0.9e6 }, 2);
        assert_eq!(
            check(&f.claims[0], &rs),
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
