//! Results files: JSON lines, one record per measured run.
//!
//! A record is everything `run --json` reports for one run (throughput, abort ratio, latency,
//! aborts by reason, per-type figures, the full configuration, git revision, compiler, machine,
//! timestamp) plus `format` and `sweep`: the sweep's definition (its base flags and grid), this
//! point's values, the point's index and the repeat's index. Lines are appended and flushed one
//! run at a time, so an interrupted sweep loses at most the run in progress, and `--resume`
//! knows from the file which runs are done.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;

/// The record layout this txlab writes; readers refuse other layouts with a clear message.
pub const FORMAT: u64 = 1;

/// A point's parameter values, as (name, value) in the grid's order.
pub type Values = Vec<(String, String)>;

/// One parameter a sweep varies, with its values in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Axis {
    /// The `run` flag's name, without dashes (`threads`, `theta`, `read-ratio`).
    pub name: String,
    /// Its values as given on the command line.
    pub values: Vec<String>,
}

/// A sweep's definition: every record carries it, so that resuming and merging can tell the
/// sweep a file belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepDef {
    /// The `run` flags common to every point.
    pub base: Vec<String>,
    /// The varied parameters; points are their cross product, the first one outermost.
    pub grid: Vec<Axis>,
}

impl SweepDef {
    /// The number of points.
    pub fn points(&self) -> usize {
        self.grid.iter().map(|a| a.values.len()).product()
    }

    /// Point `i`'s values, one per axis.
    pub fn point(&self, mut i: usize) -> Vec<(String, String)> {
        let mut out = vec![(String::new(), String::new()); self.grid.len()];
        for (k, axis) in self.grid.iter().enumerate().rev() {
            let n = axis.values.len();
            out[k] = (axis.name.clone(), axis.values[i % n].clone());
            i /= n;
        }
        out
    }
}

/// Where a record sits in its sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPos {
    /// The sweep.
    #[serde(flatten)]
    pub def: SweepDef,
    /// This point's index in the cross product.
    pub point: usize,
    /// This point's values, as (name, value) in the grid's order.
    pub values: Values,
}

/// Where a run was measured: the build's git revision and kind, and the machine. Runs of
/// different origins do not belong in one results file (a resumed sweep and a preset run again
/// refuse to mix them); a report names each origin its runs came from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    /// The git revision (`-dirty` when the tree had uncommitted changes).
    pub revision: String,
    /// The build kind (`crate::engine::report::build_name`; `unrecorded` before builds were).
    pub build: String,
    /// CPU model, cores and memory.
    pub machine: String,
}

impl Origin {
    /// The origin recorded in a run's record.
    pub fn of(v: &serde_json::Value) -> Origin {
        let text = |v: &serde_json::Value, missing: &str| match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => missing.to_string(),
            other => other.to_string(),
        };
        let m = &v["machine"];
        Origin {
            revision: text(&v["git_revision"], "unknown"),
            build: text(&v["build"], "unrecorded"),
            // Numbers as this binary formats them (JSON writes 24 GiB as `24.0`).
            machine: format!(
                "{} ({} cores, {} GiB)",
                text(&m["cpu"], "unknown CPU"),
                m["cores"].as_u64().map_or("?".into(), |c| c.to_string()),
                m["memory_gib"].as_f64().map_or("?".into(), |g| g.to_string())
            ),
        }
    }

    /// This binary on this machine.
    pub fn current() -> Origin {
        let m = crate::engine::report::Machine::current();
        Origin {
            revision: env!("TXLAB_GIT_REVISION").into(),
            build: crate::engine::report::build_name().into(),
            machine: format!("{} ({} cores, {} GiB)", m.cpu, m.cores, m.memory_gib),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "revision {} ({} build) on {}", self.revision, self.build, self.machine)
    }
}

/// A record read back from a results file.
#[derive(Clone, Debug)]
pub struct Record {
    /// The file it came from.
    pub file: String,
    /// Its line number (1-based).
    pub line: usize,
    /// Protocol name.
    pub protocol: String,
    /// Which repeat of its point and protocol (0-based).
    pub repeat: u32,
    /// The point.
    pub sweep: SweepPos,
    /// The whole record.
    pub value: serde_json::Value,
}

impl Record {
    /// The value of parameter `name` at this record's point, if the sweep varied it.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.sweep.values.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// A statistic by name: `throughput`, `abort_ratio`, `p50_us` `p99_us` `p999_us` `max_us`
    /// `mean_us` (latency), `headline` (the workload's headline rate, TPC-C's NewOrder),
    /// `TYPE.throughput` or `TYPE.p99_us` (a transaction type's), `aborts.REASON`, or any dotted
    /// path to a number in the record (`backoff_share`, `history_check.committed`).
    pub fn metric(&self, name: &str) -> Option<f64> {
        let v = &self.value;
        if let Some(l) = v["latency"].get(name) {
            return l.as_f64();
        }
        if name == "headline" {
            return v["headline"]["throughput"].as_f64();
        }
        if let Some((ty, stat)) = name.split_once('.') {
            if let Some(types) = v["per_type"].as_array() {
                if let Some(t) = types.iter().find(|t| t["name"] == ty) {
                    return t.get(stat).or_else(|| t["latency"].get(stat)).and_then(|x| x.as_f64());
                }
            }
            if ty == "aborts" {
                // Reasons with no abort are left out of the record.
                return Some(v["aborts"].get(stat).and_then(|x| x.as_f64()).unwrap_or(0.0));
            }
        }
        let mut at = v;
        for part in name.split('.') {
            at = at.get(part)?;
        }
        at.as_f64()
    }
}

/// Makes a results record from a run's report and its place in a sweep.
pub fn record(report: &crate::engine::RunReport, pos: &SweepPos) -> serde_json::Value {
    let mut v = serde_json::to_value(report).expect("reports serialize");
    v["format"] = FORMAT.into();
    v["sweep"] = serde_json::to_value(pos).expect("plain data serializes");
    v
}

/// Appends one record as a line and flushes it to the file.
pub fn append(file: &mut impl Write, record: &serde_json::Value) -> std::io::Result<()> {
    let mut line = serde_json::to_string(record).expect("JSON values serialize");
    line.push('\n');
    // One write per line: a kill leaves at most this line partly written.
    file.write_all(line.as_bytes())?;
    file.flush()
}

/// What reading a results file found.
pub struct Read {
    /// The records.
    pub records: Vec<Record>,
    /// Bytes of the file that hold complete records; less than its length when the last line
    /// was cut off (a sweep killed while writing it).
    pub complete_len: u64,
}

/// Reads a results file. A bad line is an error naming the file and line, except a cut-off last
/// line with `allow_cut_tail` (resuming a killed sweep), which is dropped.
pub fn read(path: &Path, allow_cut_tail: bool) -> Result<Read, String> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut reader = std::io::BufReader::new(file);
    let mut records = Vec::new();
    let mut complete_len = 0u64;
    let mut buf = String::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        let n = reader.read_line(&mut buf).map_err(|e| format!("{name}: {e}"))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let cut = !buf.ends_with('\n');
        let text = buf.trim();
        if text.is_empty() {
            complete_len += n as u64;
            continue;
        }
        match parse(&name, line_no, text) {
            Ok(r) => {
                records.push(r);
                complete_len += n as u64;
            }
            Err(_) if cut && allow_cut_tail => break,
            Err(e) => return Err(e),
        }
    }
    Ok(Read { records, complete_len })
}

/// Reads several results files into one list.
pub fn read_all(paths: &[std::path::PathBuf]) -> Result<Vec<Record>, String> {
    let mut all = Vec::new();
    for p in paths {
        all.extend(read(p, false)?.records);
    }
    if all.is_empty() {
        return Err(format!(
            "{}: no results in {}",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            if paths.len() == 1 { "the file" } else { "these files" }
        ));
    }
    Ok(all)
}

fn parse(file: &str, line: usize, text: &str) -> Result<Record, String> {
    let at = || format!("{file} line {line}");
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{}: not a JSON record ({e})", at()))?;
    if !value.is_object() {
        return Err(format!("{}: not a JSON object", at()));
    }
    let writer = value["txlab_version"].as_str().unwrap_or("an unknown version").to_string();
    let missing = |field: &str| {
        format!(
            "{}: missing field `{field}` (written by txlab {writer}; this txlab {} reads results \
             format {FORMAT})",
            at(),
            env!("CARGO_PKG_VERSION")
        )
    };
    match value.get("format").map(|f| f.as_u64()) {
        None => return Err(missing("format")),
        Some(Some(FORMAT)) => {}
        Some(f) => {
            return Err(format!(
                "{}: results format {} (written by txlab {writer}); this txlab {} reads format \
                 {FORMAT}",
                at(),
                f.map(|f| f.to_string()).unwrap_or_else(|| "?".into()),
                env!("CARGO_PKG_VERSION")
            ))
        }
    }
    for field in ["protocol", "throughput", "abort_ratio", "repeat", "config", "sweep"] {
        if value.get(field).is_none() {
            return Err(missing(field));
        }
    }
    let sweep: SweepPos = serde_json::from_value(value["sweep"].clone())
        .map_err(|e| format!("{}: bad `sweep` field ({e})", at()))?;
    if sweep.point >= sweep.def.points().max(1) {
        return Err(format!("{}: point {} is outside its sweep", at(), sweep.point));
    }
    Ok(Record {
        file: file.to_string(),
        line,
        protocol: value["protocol"].as_str().ok_or_else(|| missing("protocol"))?.to_string(),
        repeat: value["repeat"].as_u64().ok_or_else(|| missing("repeat"))? as u32,
        sweep,
        value,
    })
}

/// The median of `xs` (not empty), and its minimum and maximum.
pub fn median_min_max(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let median = if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 };
    (median, xs[0], xs[n - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> SweepDef {
        SweepDef {
            base: vec!["--records".into(), "1000".into()],
            grid: vec![
                Axis { name: "threads".into(), values: vec!["1".into(), "2".into()] },
                Axis { name: "theta".into(), values: vec!["0".into(), "0.5".into(), "0.9".into()] },
            ],
        }
    }

    #[test]
    fn points_are_the_cross_product_first_axis_outermost() {
        let d = def();
        assert_eq!(d.points(), 6);
        let names: Vec<String> = (0..6)
            .map(|i| d.point(i).iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>().join("/"))
            .collect();
        assert_eq!(names, ["1/0", "1/0.5", "1/0.9", "2/0", "2/0.5", "2/0.9"]);
    }

    fn line(extra: serde_json::Value) -> String {
        let mut v = serde_json::json!({
            "format": 1, "txlab_version": "0.1.0", "protocol": "silo", "throughput": 5.0,
            "abort_ratio": 0.5, "repeat": 0, "config": {},
            "latency": {"p99_us": 7.0},
            "per_type": [{"name": "NewOrder", "throughput": 3.0, "latency": {"p99_us": 9.0}}],
            "aborts": {"lock-conflict": 4},
            "sweep": {"base": [], "grid": [{"name": "threads", "values": ["1", "2"]}],
                      "point": 1, "values": [["threads", "2"]]},
        });
        for (k, x) in extra.as_object().unwrap() {
            if x.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = x.clone();
            }
        }
        v.to_string()
    }

    fn read_text(text: &str, cut: bool) -> Result<Read, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(&p, text).unwrap();
        read(&p, cut).map_err(|e| e.replace(&p.display().to_string(), "FILE"))
    }

    #[test]
    fn metrics_are_found_by_name() {
        let r = read_text(&(line(serde_json::json!({})) + "\n"), false).unwrap();
        let r = &r.records[0];
        assert_eq!(r.metric("throughput"), Some(5.0));
        assert_eq!(r.metric("p99_us"), Some(7.0));
        assert_eq!(r.metric("NewOrder.throughput"), Some(3.0));
        assert_eq!(r.metric("NewOrder.p99_us"), Some(9.0));
        assert_eq!(r.metric("aborts.lock-conflict"), Some(4.0));
        assert_eq!(r.metric("aborts.wait-die"), Some(0.0));
        assert_eq!(r.metric("nothing"), None);
        assert_eq!(r.param("threads"), Some("2"));
    }

    #[test]
    fn a_corrupt_line_is_an_error_with_its_number() {
        let good = line(serde_json::json!({}));
        let e = read_text(&format!("{good}\n{{\"format\": 1, \n{good}\n"), false).err().unwrap();
        assert!(e.starts_with("FILE line 2: not a JSON record"), "{e}");
    }

    #[test]
    fn a_record_of_another_version_names_what_is_missing() {
        let old = line(serde_json::json!({"format": null, "txlab_version": "0.0.9"}));
        let e = read_text(&(old + "\n"), false).err().unwrap();
        assert_eq!(
            e,
            format!(
                "FILE line 1: missing field `format` (written by txlab 0.0.9; this txlab {} reads \
                 results format 1)",
                env!("CARGO_PKG_VERSION")
            )
        );
        let newer = line(serde_json::json!({"format": 2}));
        let e = read_text(&(newer + "\n"), false).err().unwrap();
        assert!(e.contains("results format 2"), "{e}");
        let no_sweep = line(serde_json::json!({"sweep": null}));
        let e = read_text(&(no_sweep + "\n"), false).err().unwrap();
        assert!(e.contains("missing field `sweep`"), "{e}");
    }

    #[test]
    fn a_cut_off_last_line_is_dropped_only_when_resuming() {
        let good = line(serde_json::json!({})) + "\n";
        let text = format!("{good}{}", &good[..good.len() / 2]);
        let r = read_text(&text, true).unwrap();
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.complete_len, good.len() as u64);
        assert!(read_text(&text, false).is_err());
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median_min_max(&mut [3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(median_min_max(&mut [4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
    }
}
