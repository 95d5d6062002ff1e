//! The comparison printed after a run of several protocols: the median run of each, the table
//! with ratios to the best, which protocols the noise does not separate, nocc's lost work, and
//! the same as JSON.

use super::*;
use crate::experiment::distinguish::{self, Standing};

/// Each row's standing among the others (rank interval, overlapping rows).
fn standings(rows: &[Row<'_>]) -> Vec<Option<Standing>> {
    let samples: Vec<Vec<f64>> =
        rows.iter().map(|r| r.runs.iter().map(|x| x.throughput).collect()).collect();
    distinguish::standings(&samples)
}

/// The run with the median throughput.
pub(in crate::cli) fn median(runs: &[RunReport]) -> &RunReport {
    let mut idx: Vec<usize> = (0..runs.len()).collect();
    idx.sort_by(|&a, &b| runs[a].throughput.total_cmp(&runs[b].throughput));
    &runs[idx[idx.len() / 2]]
}

/// A row of the comparison: a contender's runs and the medians it is compared with.
pub(super) struct Row<'a> {
    /// The protocol, with its log choice when several are compared.
    pub(super) label: String,
    pub(super) runs: &'a [RunReport],
    /// nocc's median throughput under the same log choice.
    pub(super) vs_nocc: Option<f64>,
    /// The same protocol's median throughput without logging, when `--log` lists `off` beside
    /// log managers.
    pub(super) vs_off: Option<f64>,
}

/// The comparison table of each contender's median run, with the spread of its repeats.
pub(super) fn comparison(rows: &[Row<'_>]) -> String {
    let medians: Vec<&RunReport> = rows.iter().map(|r| median(r.runs)).collect();
    let repeats = rows.iter().map(|r| r.runs.len()).max().unwrap_or(1);
    let mut s = format!(
        "\nComparison (median of {repeats} run{} per {}{}):\n",
        if repeats == 1 { "" } else { "s" },
        if rows.iter().any(|r| r.vs_off.is_some() || r.label.contains(' ')) {
            "protocol and log"
        } else {
            "protocol"
        },
        if repeats > 1 { "; spread = (max - min) / median txn/s" } else { "" }
    );
    let headline = medians.iter().find_map(|r| r.headline.as_ref()).map(|h| h.name.clone());
    // The headline column (TPC-C: new orders per second) only for workloads that have one.
    // As wide as its title with two spaces before it (TPC-E's "trade-result/s").
    let head_w = headline.as_ref().map_or(14, |n| (n.len() + 4).max(14));
    let head_col =
        headline.as_ref().map(|n| format!("{:>head_w$}", format!("{n}/s"))).unwrap_or_default();
    let spread_col = if repeats > 1 { format!("{:>8}", "spread") } else { String::new() };
    let standing = standings(rows);
    let rank_col = if repeats > 1 { format!("{:>7}", "rank") } else { String::new() };
    let off_col = if rows.iter().any(|r| r.vs_off.is_some()) {
        format!("{:>10}", "vs off")
    } else {
        String::new()
    };
    let width = rows.iter().map(|r| r.label.len() + 2).max().unwrap_or(0).max(13);
    let _ = writeln!(
        s,
        "  {:<width$}{:>14}{spread_col}{rank_col}{head_col}{:>10}{off_col}{:>13}{:>11}{:>11}",
        "protocol", "txn/s", "vs nocc", "abort ratio", "p50 us", "p99 us"
    );
    let ratio = |r: &RunReport, base: Option<f64>| {
        base.map(|b| format!("{:.3}", r.throughput / b)).unwrap_or_else(|| "-".into())
    };
    for (k, (r, row)) in medians.iter().zip(rows).enumerate() {
        let rank = match (&standing[k], repeats > 1) {
            (Some(st), true) => format!("{:>7}", st.rank_text()),
            (None, true) => format!("{:>7}", "-"),
            (_, false) => String::new(),
        };
        let head = match (&headline, &r.headline) {
            (Some(_), Some(h)) => format!("{:>head_w$.0}", h.throughput),
            (Some(_), None) => format!("{:>head_w$}", "-"),
            (None, _) => String::new(),
        };
        let spread = if repeats > 1 {
            let (lo, hi) = row.runs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| {
                (lo.min(x.throughput), hi.max(x.throughput))
            });
            format!(
                "{:>7.1}%",
                if r.throughput > 0.0 { (hi - lo) / r.throughput * 100.0 } else { 0.0 }
            )
        } else {
            String::new()
        };
        let off = if off_col.is_empty() {
            String::new()
        } else {
            format!("{:>10}", ratio(r, row.vs_off))
        };
        let _ = writeln!(
            s,
            "  {:<width$}{:>14.0}{spread}{rank}{head}{:>10}{off}{:>13.4}{:>11.1}{:>11.1}",
            row.label,
            r.throughput,
            ratio(r, row.vs_nocc),
            r.abort_ratio,
            r.latency.p50_us,
            r.latency.p99_us
        );
    }
    let note = noise_note(rows, &standing, repeats);
    if !note.is_empty() {
        s.push('\n');
        s.push_str(&note);
    }
    for r in medians.iter().filter(|r| r.protocol == "nocc") {
        if let Some(note) = lost_work(r) {
            s.push_str(&note);
            break;
        }
    }
    s
}

/// Which rows the noise does not separate (their runs' ranges overlap), with the repeats that
/// would; with one run each, that nothing says which differences exceed the noise.
fn noise_note(rows: &[Row<'_>], standing: &[Option<Standing>], repeats: usize) -> String {
    if rows.len() < 2 {
        return String::new();
    }
    if repeats < 2 {
        return "  note: one run per protocol: nothing here says which differences exceed the \
                machine's noise; --repeat 3 or more measures the spread and ranks them\n"
            .into();
    }
    // Each pair once, under the first of the two.
    let mut lines = Vec::new();
    for (i, st) in standing.iter().enumerate() {
        let later: Vec<String> = st
            .iter()
            .flat_map(|s| &s.ties)
            .filter(|&&(j, _)| j > i)
            .map(|&(j, n)| match n {
                Some(n) => format!("{} {n}", rows[j].label),
                None => format!("{} >{}", rows[j].label, distinguish::MAX_REPEATS),
            })
            .collect();
        if !later.is_empty() {
            lines.push(format!("    {}: {}\n", rows[i].label, later.join(", ")));
        }
    }
    if lines.is_empty() {
        return "  rank: no two protocols' ranges of runs overlap: each difference exceeds the \
                noise measured\n"
            .into();
    }
    format!(
        "  rank: where a protocol could stand; a range (2-5) where its runs' range overlaps \
         others'. Not distinguishable here, with the repeats estimated to separate each pair \
         (>{}: not worth it):\n{}",
        distinguish::MAX_REPEATS,
        lines.concat()
    )
}

/// A warning when nocc, the baseline, ended at least 1 % of its transactions for good with a
/// missing row: without concurrency control its concurrent transactions lost updates (TPC-C's
/// NewOrder gets an order id another one already used), so its throughput counts work a
/// correct engine would have done, or dropped work a correct engine must do.
pub(super) fn lost_work(nocc: &RunReport) -> Option<String> {
    let dropped = nocc.aborts.get(AbortReason::MissingRow.name()).copied().unwrap_or(0);
    let ended = nocc.commits + dropped;
    (ended > 0 && dropped * 100 >= ended).then(|| {
        format!(
            "  note: nocc ended {dropped} transactions ({:.1} % of those measured) with a missing \
             row:\n        without concurrency control, concurrent transactions lost updates, so \
             'vs nocc' is not a baseline for this run\n",
            dropped as f64 * 100.0 / ended as f64
        )
    })
}

pub(super) fn json_output(rows: &[Row<'_>]) -> serde_json::Value {
    let standing = standings(rows);
    let summary = |k: usize, row: &Row<'_>, m: &RunReport| {
        let (lo, hi) = row
            .runs
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x.throughput), hi.max(x.throughput)));
        let mut v = serde_json::json!({
            "label": row.label,
            "median_of": row.runs.len(),
            "throughput_min": lo,
            "throughput_max": hi,
            "vs_nocc": row.vs_nocc.map(|b| m.throughput / b),
        });
        if let Some(off) = row.vs_off {
            v["vs_log_off"] = (m.throughput / off).into();
        }
        if let Some(st) = standing.get(k).and_then(Option::as_ref).filter(|_| rows.len() > 1) {
            v["rank"] = serde_json::json!([st.rank.0, st.rank.1]);
            v["not_distinguishable_from"] = st
                .ties
                .iter()
                .map(
                    |&(j, n)| serde_json::json!({"label": rows[j].label, "repeats_to_separate": n}),
                )
                .collect();
        }
        v
    };
    if let [row] = rows {
        let m = median(row.runs);
        let mut v = serde_json::to_value(m).expect("serializable");
        v["summary"] = summary(0, row, m);
        if row.runs.len() > 1 {
            v["runs"] = serde_json::to_value(row.runs).expect("serializable");
            v["median_of"] = row.runs.len().into();
        }
        v
    } else {
        let comparison: Vec<serde_json::Value> = rows
            .iter()
            .enumerate()
            .map(|(k, row)| {
                let m = median(row.runs);
                let mut v = serde_json::to_value(m).expect("serializable");
                v["summary"] = summary(k, row, m);
                v
            })
            .collect();
        serde_json::json!({
            "comparison": comparison,
            "runs": rows.iter().flat_map(|r| r.runs).collect::<Vec<_>>(),
        })
    }
}
