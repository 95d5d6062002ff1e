//! What a figure shows, computed from results records before anything is drawn: one series per
//! protocol (and per combination of the other varied parameters), one point per value of the x
//! parameter, with the median of the repeats and their min and max.

use super::results::{median_min_max, Record, Values};

/// What to plot.
#[derive(Clone, Debug, Default)]
pub struct FigureSpec {
    /// The varied parameter on the x axis.
    pub x: String,
    /// The statistic on the y axis (see [`Record::metric`]).
    pub y: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// Only records whose point has these parameter values.
    pub filter: Vec<(String, String)>,
    /// A title instead of the generated one.
    pub title: Option<String>,
}

/// One point of a series.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Position on the x axis (the value, or its index for a categorical axis).
    pub x: f64,
    /// The x value as recorded.
    pub x_text: String,
    /// Median over the repeats.
    pub median: f64,
    /// Smallest repeat.
    pub min: f64,
    /// Largest repeat.
    pub max: f64,
    /// Repeats measured.
    pub runs: usize,
}

/// One line.
#[derive(Clone, Debug)]
pub struct Series {
    /// The protocol (it picks the colour).
    pub protocol: String,
    /// The other varied parameters' values on this line.
    pub others: Vec<(String, String)>,
    /// Legend text.
    pub label: String,
    /// Points in x order.
    pub points: Vec<Point>,
}

/// A figure ready to draw.
#[derive(Clone, Debug)]
pub struct Figure {
    /// Title.
    pub title: String,
    /// x axis label, with units.
    pub x_label: String,
    /// y axis label, with units.
    pub y_label: String,
    /// The x values' names when they are not numbers (the axis then shows them in order).
    pub categories: Option<Vec<String>>,
    /// Logarithmic axes.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
    /// What the reader needs to know: repeats, error bars, what was fixed.
    pub notes: Vec<String>,
}

/// The x axis that shows the runs' timelines (`run --timeline`) instead of a varied parameter:
/// throughput per interval against the time since the window began, one line per protocol and
/// combination of the varied parameters.
pub const TIME: &str = "time";

/// The figure of the records' timelines ([`TIME`]): the i-th point of a line is the median of
/// the repeats' i-th intervals, at the median of their ends.
fn timeline(records: &[Record], spec: &FigureSpec) -> Result<Figure, String> {
    if spec.y != "throughput" {
        return Err(format!(
            "--y {}: a timeline holds throughput only (--x time needs --y throughput)",
            spec.y
        ));
    }
    if spec.log_x {
        return Err("--log-x: the time axis starts at 0".into());
    }
    for (name, value) in &spec.filter {
        if !records.iter().any(|r| r.sweep.def.grid.iter().any(|a| a.name == *name)) {
            return Err(format!("--where {name}={value}: the results do not vary {name}"));
        }
    }
    let kept: Vec<&Record> = records
        .iter()
        .filter(|r| spec.filter.iter().all(|(n, v)| r.param(n) == Some(v.as_str())))
        .filter(|r| r.value["timeline"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    if kept.is_empty() {
        return Err("--x time: no result has a timeline (run with --timeline SECONDS)".into());
    }
    // Per line, per interval: the repeats' interval ends and throughputs.
    type Intervals = Vec<(Vec<f64>, Vec<f64>)>;
    let mut lines: Vec<(String, Values, Intervals)> = Vec::new();
    for r in &kept {
        let at = match lines.iter().position(|(p, v, _)| *p == r.protocol && *v == r.sweep.values) {
            Some(at) => at,
            None => {
                lines.push((r.protocol.clone(), r.sweep.values.clone(), Vec::new()));
                lines.len() - 1
            }
        };
        let intervals = &mut lines[at].2;
        let points = r.value["timeline"].as_array().expect("kept above");
        for (i, p) in points.iter().enumerate() {
            let (Some(t), Some(y)) = (p["t"].as_f64(), p["throughput"].as_f64()) else {
                return Err(format!(
                    "{}:{}: a timeline point without t or throughput",
                    r.file, r.line
                ));
            };
            if intervals.len() == i {
                intervals.push((Vec::new(), Vec::new()));
            }
            intervals[i].0.push(t);
            intervals[i].1.push(y);
        }
    }
    let series: Vec<Raw> = lines
        .into_iter()
        .map(|(protocol, values, intervals)| {
            let pts = intervals
                .into_iter()
                .map(|(mut ts, ys)| (format!("{:.2}", median_min_max(&mut ts).0), ys))
                .collect();
            (protocol, values, pts)
        })
        .collect();
    let position = |text: &str| text.parse::<f64>().expect("formatted from a number");
    let x_label = "time since the window began (s)".to_string();
    let y_label = metric_label(&spec.y, &kept);
    Ok(finish(&kept, spec, series, position, None, x_label, y_label))
}

/// The axis label of a parameter, with its unit.
pub fn param_label(name: &str) -> String {
    match name {
        "threads" => "worker threads".into(),
        "theta" => "skew (Zipf θ)".into(),
        "read-ratio" => "read ratio".into(),
        "payload" => "payload (bytes)".into(),
        "records" => "records (table size)".into(),
        "ops" => "operations per transaction".into(),
        "warehouses" => "warehouses".into(),
        "customers" => "customers".into(),
        "spin-us" => "spin per transaction (µs)".into(),
        "long-txn-delay-us" => "long transaction's delay (µs)".into(),
        "backoff-us" => "maximum backoff (µs)".into(),
        "epoch-ms" => "epoch (ms)".into(),
        other => other.into(),
    }
}

/// The axis label of a statistic, with its unit.
pub fn metric_label(name: &str, records: &[&Record]) -> String {
    let latency = |p: &str| match p {
        "p50_us" => Some("p50 latency (µs)"),
        "p99_us" => Some("p99 latency (µs)"),
        "p999_us" => Some("p99.9 latency (µs)"),
        "max_us" => Some("maximum latency (µs)"),
        "mean_us" => Some("mean latency (µs)"),
        _ => None,
    };
    if let Some(l) = latency(name) {
        return l.into();
    }
    match name {
        "throughput" => return "throughput (txn/s)".into(),
        "abort_ratio" => return "abort ratio (aborts / attempts)".into(),
        "backoff_share" => return "share of time in backoff".into(),
        "headline" => {
            let n = records.iter().find_map(|r| r.value["headline"]["name"].as_str());
            return format!("{} (txn/s)", n.unwrap_or("headline"));
        }
        _ => {}
    }
    if let Some((a, b)) = name.split_once('.') {
        if a == "aborts" {
            return format!("{b} aborts");
        }
        if let Some(part) = b.strip_suffix("_us").filter(|_| a == "breakdown") {
            return format!("{part} time per commit (µs)");
        }
        if b == "throughput" {
            return format!("{a} throughput (txn/s)");
        }
        if let Some(l) = latency(b) {
            return format!("{a} {l}");
        }
    }
    name.into()
}

/// Computes the figure `spec` asks for from `records`.
pub fn figure(records: &[Record], spec: &FigureSpec) -> Result<Figure, String> {
    if spec.x == TIME {
        return timeline(records, spec);
    }
    let varied: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for r in records {
            for a in &r.sweep.def.grid {
                if !v.contains(&a.name) {
                    v.push(a.name.clone());
                }
            }
        }
        v
    };
    let x_name = spec.x.trim_start_matches('-').replace('_', "-");
    if !varied.contains(&x_name) {
        return Err(format!(
            "--x {}: the results do not vary it (they vary: {})",
            spec.x,
            varied.join(", ")
        ));
    }
    for (name, value) in &spec.filter {
        if !varied.contains(name) {
            return Err(format!(
                "--where {name}={value}: the results do not vary {name} (they vary: {})",
                varied.join(", ")
            ));
        }
    }
    let kept: Vec<&Record> = records
        .iter()
        .filter(|r| r.param(&x_name).is_some())
        .filter(|r| spec.filter.iter().all(|(n, v)| r.param(n) == Some(v.as_str())))
        .collect();
    if kept.is_empty() {
        return Err("no results match --where".into());
    }
    if !kept.iter().any(|r| r.metric(&spec.y).is_some()) {
        let types: Vec<&str> = kept[0].value["per_type"]
            .as_array()
            .map(|ts| ts.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        if let Some((ty, _)) = spec.y.split_once('.').filter(|(t, _)| !types.contains(t)) {
            if ty != "aborts" && !kept[0].value[ty].is_object() {
                return Err(format!(
                    "--y {}: no transaction type {ty} (the results' types: {})",
                    spec.y,
                    types.join(", ")
                ));
            }
        }
        return Err(format!(
            "--y {}: no record has this statistic (try throughput, abort_ratio, p99_us, headline, \
             TYPE.throughput, TYPE.p99_us, aborts.REASON)",
            spec.y
        ));
    }
    // The x values in the order the sweeps listed them; numeric when all of them are numbers.
    let mut xs: Vec<String> = Vec::new();
    for r in &kept {
        for a in r.sweep.def.grid.iter().filter(|a| a.name == x_name) {
            for v in &a.values {
                if !xs.contains(v) {
                    xs.push(v.clone());
                }
            }
        }
    }
    let numeric: Option<Vec<f64>> = xs.iter().map(|v| v.parse::<f64>().ok()).collect();
    let categorical = numeric.is_none();
    if spec.log_x && (categorical || numeric.as_ref().is_some_and(|n| n.iter().any(|v| *v <= 0.0)))
    {
        return Err(format!("--log-x: {x_name} has values that are not positive numbers"));
    }
    let position = |text: &str| -> f64 {
        match &numeric {
            Some(_) => text.parse().expect("checked numeric"),
            None => xs.iter().position(|v| v == text).expect("collected above") as f64,
        }
    };
    // Series keyed by protocol and the other parameters' values, in order of appearance.
    let mut series: Vec<Raw> = Vec::new();
    for r in &kept {
        let Some(y) = r.metric(&spec.y) else { continue };
        let others: Vec<(String, String)> =
            r.sweep.values.iter().filter(|(n, _)| *n != x_name).cloned().collect();
        let x = r.param(&x_name).expect("kept above").to_string();
        let at = match series.iter().position(|(p, o, _)| *p == r.protocol && *o == others) {
            Some(at) => at,
            None => {
                series.push((r.protocol.clone(), others, Vec::new()));
                series.len() - 1
            }
        };
        let pts = &mut series[at].2;
        match pts.iter_mut().find(|(v, _)| *v == x) {
            Some((_, ys)) => ys.push(y),
            None => pts.push((x, vec![y])),
        }
    }
    let x_label = param_label(&x_name);
    let y_label = metric_label(&spec.y, &kept);
    let categories = categorical.then(|| xs.clone());
    Ok(finish(&kept, spec, series, position, categories, x_label, y_label))
}

/// (protocol, the line's parameter values, [(x value, the repeats' y values)])
type Raw = (String, Values, Vec<(String, Vec<f64>)>);

/// The figure of `series` gathered from `kept`: medians and ranges per point, labels, notes.
fn finish(
    kept: &[&Record],
    spec: &FigureSpec,
    series: Vec<Raw>,
    position: impl Fn(&str) -> f64,
    categories: Option<Vec<String>>,
    x_label: String,
    y_label: String,
) -> Figure {
    // Several values of another parameter make several lines per protocol: name them.
    let distinct_others = {
        let mut seen: Vec<&Vec<(String, String)>> = Vec::new();
        for (_, o, _) in &series {
            if !seen.contains(&o) {
                seen.push(o);
            }
        }
        seen.len()
    };
    let mut max_runs = 0;
    let mut min_runs = usize::MAX;
    let series: Vec<Series> = series
        .into_iter()
        .map(|(protocol, others, pts)| {
            let mut points: Vec<Point> = pts
                .into_iter()
                .map(|(x_text, mut ys)| {
                    let (median, min, max) = median_min_max(&mut ys);
                    max_runs = max_runs.max(ys.len());
                    min_runs = min_runs.min(ys.len());
                    Point { x: position(&x_text), x_text, median, min, max, runs: ys.len() }
                })
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            let label = if distinct_others > 1 {
                let o: Vec<String> = others.iter().map(|(n, v)| format!("{n}={v}")).collect();
                format!("{protocol} ({})", o.join(", "))
            } else {
                protocol.clone()
            };
            Series { protocol, others, label, points }
        })
        .collect();
    let workload = kept[0].value["workload"].as_str().unwrap_or("?").to_string();
    let mut notes = Vec::new();
    notes.push(if max_runs > 1 {
        let runs = if min_runs == max_runs {
            format!("{max_runs}")
        } else {
            format!("{min_runs} to {max_runs}")
        };
        format!("Each point is the median of {runs} runs; bars span the smallest to the largest.")
    } else {
        "One run per point (no error bars: run the sweep with --repeat for them).".into()
    });
    if let Some(first) = series.first().filter(|s| distinct_others == 1 && !s.others.is_empty()) {
        let o: Vec<String> = first.others.iter().map(|(n, v)| format!("{n}={v}")).collect();
        notes.push(format!("Fixed: {}.", o.join(", ")));
    }
    if !spec.filter.is_empty() {
        let f: Vec<String> = spec.filter.iter().map(|(n, v)| format!("{n}={v}")).collect();
        notes.push(format!("Only points with {}.", f.join(", ")));
    }
    let base: Vec<&str> = kept[0].sweep.def.base.iter().map(String::as_str).collect();
    notes.push(format!(
        "Run flags: {}.",
        if base.is_empty() { "defaults".to_string() } else { base.join(" ") }
    ));
    Figure {
        title: spec.title.clone().unwrap_or_else(|| format!("{workload}: {y_label} by {x_label}")),
        x_label,
        y_label,
        categories,
        log_x: spec.log_x,
        log_y: spec.log_y,
        series,
        notes,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::experiment::results::{Axis, SweepDef, SweepPos};

    /// A synthetic record of `protocol` at the point `values` of a sweep over `grid`.
    pub(crate) fn rec(
        grid: &[(&str, &[&str])],
        values: &[(&str, &str)],
        protocol: &str,
        repeat: u32,
        throughput: f64,
    ) -> Record {
        let def = SweepDef {
            base: vec!["--records".into(), "1000".into()],
            grid: grid
                .iter()
                .map(|(n, vs)| Axis {
                    name: n.to_string(),
                    values: vs.iter().map(|v| v.to_string()).collect(),
                })
                .collect(),
        };
        let point = (0..def.points())
            .find(|&i| def.point(i).iter().zip(values).all(|((n, v), (m, w))| n == m && v == w))
            .expect("the values are a point of the grid");
        let values: Vec<(String, String)> =
            values.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        Record {
            file: "synthetic".into(),
            line: 1,
            protocol: protocol.into(),
            repeat,
            value: serde_json::json!({
                "protocol": protocol, "workload": "ycsb", "throughput": throughput,
                "abort_ratio": throughput / 1e7, "latency": {"p99_us": 10.0},
            }),
            sweep: SweepPos { def, point, values },
        }
    }

    #[test]
    fn medians_minima_and_maxima_per_protocol_and_x() {
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2", "4"])];
        let mut rs = Vec::new();
        for (t, base) in [("1", 100.0), ("2", 200.0), ("4", 400.0)] {
            for (k, f) in [0.9, 1.0, 1.3].iter().enumerate() {
                rs.push(rec(g, &[("threads", t)], "silo", k as u32, base * f));
                rs.push(rec(g, &[("threads", t)], "nocc", k as u32, 2.0 * base));
            }
        }
        let f = figure(
            &rs,
            &FigureSpec { x: "threads".into(), y: "throughput".into(), ..Default::default() },
        )
        .unwrap();
        assert_eq!(f.series.len(), 2);
        let silo = &f.series[0];
        assert_eq!(silo.label, "silo");
        assert_eq!(silo.points.iter().map(|p| p.x).collect::<Vec<_>>(), [1.0, 2.0, 4.0]);
        assert_eq!(silo.points[1].median, 200.0);
        assert_eq!(silo.points[1].min, 180.0);
        assert_eq!(silo.points[1].max, 260.0);
        assert_eq!(silo.points[1].runs, 3);
        assert_eq!(f.x_label, "worker threads");
        assert_eq!(f.y_label, "throughput (txn/s)");
        assert!(f.categories.is_none());
        assert!(f.notes[0].contains("median of 3 runs"), "{:?}", f.notes);
    }

    #[test]
    fn another_varied_parameter_splits_lines_or_filters() {
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2"]), ("theta", &["0", "0.9"])];
        let mut rs = Vec::new();
        for t in ["1", "2"] {
            for th in ["0", "0.9"] {
                rs.push(rec(g, &[("threads", t), ("theta", th)], "silo", 0, 1.0));
            }
        }
        let spec = FigureSpec { x: "threads".into(), y: "throughput".into(), ..Default::default() };
        let f = figure(&rs, &spec).unwrap();
        let labels: Vec<&str> = f.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["silo (theta=0)", "silo (theta=0.9)"]);
        let only = FigureSpec { filter: vec![("theta".into(), "0.9".into())], ..spec.clone() };
        let f = figure(&rs, &only).unwrap();
        assert_eq!(f.series.len(), 1);
        assert_eq!(f.series[0].label, "silo");
        assert!(f.notes.iter().any(|n| n == "Fixed: theta=0.9."), "{:?}", f.notes);
    }

    #[test]
    fn bad_axes_and_statistics_are_named() {
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2"])];
        let rs = vec![rec(g, &[("threads", "1")], "silo", 0, 1.0)];
        let spec = |x: &str, y: &str| FigureSpec { x: x.into(), y: y.into(), ..Default::default() };
        assert_eq!(
            figure(&rs, &spec("theta", "throughput")).err().unwrap(),
            "--x theta: the results do not vary it (they vary: threads)"
        );
        assert!(figure(&rs, &spec("threads", "speed")).err().unwrap().starts_with("--y speed:"));
        let categories: &[(&str, &[&str])] = &[("backoff", &["none", "fixed"])];
        let rs = vec![
            rec(categories, &[("backoff", "none")], "silo", 0, 1.0),
            rec(categories, &[("backoff", "fixed")], "silo", 0, 2.0),
        ];
        let f = figure(&rs, &spec("backoff", "throughput")).unwrap();
        assert_eq!(f.categories, Some(vec!["none".to_string(), "fixed".to_string()]));
        assert_eq!(f.series[0].points.iter().map(|p| p.x).collect::<Vec<_>>(), [0.0, 1.0]);
        let log = FigureSpec { log_x: true, ..spec("backoff", "throughput") };
        assert!(figure(&rs, &log).is_err());
    }

    /// `--x time` draws each run's timeline: a line per protocol and value of the varied
    /// parameters, the i-th point the median of the repeats' i-th intervals.
    #[test]
    fn timelines_are_drawn_against_time() {
        let g: &[(&str, &[&str])] = &[("opt", &["ic3:online=on", "ic3:online=off"])];
        let with = |opt: &str, repeat: u32, ys: &[f64]| {
            let mut r = rec(g, &[("opt", opt)], "ic3", repeat, 1.0);
            let pts: Vec<_> = ys
                .iter()
                .enumerate()
                .map(|(i, y)| serde_json::json!({"t": 0.1 * (i + 1) as f64, "throughput": y}))
                .collect();
            r.value["timeline"] = serde_json::Value::Array(pts);
            r
        };
        let rs = vec![
            with("ic3:online=on", 0, &[10.0, 20.0]),
            with("ic3:online=on", 1, &[30.0, 40.0]),
            with("ic3:online=on", 2, &[20.0, 60.0]),
            with("ic3:online=off", 0, &[5.0, 6.0]),
        ];
        let spec = FigureSpec { x: TIME.into(), y: "throughput".into(), ..Default::default() };
        let f = figure(&rs, &spec).unwrap();
        assert_eq!(f.x_label, "time since the window began (s)");
        assert_eq!(f.categories, None);
        let labels: Vec<&str> = f.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["ic3 (opt=ic3:online=on)", "ic3 (opt=ic3:online=off)"]);
        let on: Vec<(f64, f64, f64, f64)> =
            f.series[0].points.iter().map(|p| (p.x, p.median, p.min, p.max)).collect();
        assert_eq!(on, [(0.1, 20.0, 10.0, 30.0), (0.2, 40.0, 20.0, 60.0)]);
        assert_eq!(f.series[1].points.iter().map(|p| p.median).collect::<Vec<_>>(), [5.0, 6.0]);
        let only = FigureSpec { filter: vec![("opt".into(), "ic3:online=off".into())], ..spec };
        assert_eq!(figure(&rs, &only).unwrap().series.len(), 1);
        let p99 = FigureSpec { y: "p99_us".into(), ..only.clone() };
        assert_eq!(
            figure(&rs, &p99).err().unwrap(),
            "--y p99_us: a timeline holds throughput only (--x time needs --y throughput)"
        );
        let plain = vec![rec(g, &[("opt", "ic3:online=on")], "ic3", 0, 1.0)];
        assert_eq!(
            figure(&plain, &only).err().unwrap(),
            "--x time: no result has a timeline (run with --timeline SECONDS)"
        );
    }
}

#[cfg(test)]
mod label_tests {
    use super::metric_label;

    /// Statistics are labelled with their units, the breakdown's parts as time per commit.
    #[test]
    fn statistics_are_labelled_with_their_units() {
        let cases = [
            ("throughput", "throughput (txn/s)"),
            ("p99_us", "p99 latency (µs)"),
            ("NewOrder.p99_us", "NewOrder p99 latency (µs)"),
            ("aborts.read-validation", "read-validation aborts"),
            ("breakdown.read_us", "read time per commit (µs)"),
            ("breakdown.total_us", "total time per commit (µs)"),
            ("versions.alive", "versions.alive"),
        ];
        for (name, label) in cases {
            assert_eq!(metric_label(name, &[]), label, "{name}");
        }
    }
}
