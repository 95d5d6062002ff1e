//! One self-contained HTML report of results records: every figure as inline SVG, the claims
//! checked (for presets), a results table, the configuration, the machine and the build. No
//! script, no style sheet or font from the network: the file opens offline, in any browser.

use super::figure::{figure, FigureSpec};
use super::plot;
use super::results::{median_min_max, Origin, Record};
use askama::Template;

/// A claim's verdict, for the report's claims table.
#[derive(Clone, Debug)]
pub struct ClaimRow {
    /// The claim.
    pub claim: String,
    /// "holds", "does not hold", "not observable here".
    pub verdict: String,
    /// CSS class for the verdict.
    pub class: &'static str,
    /// What was observed.
    pub detail: String,
}

/// What a report shows beyond the records themselves.
#[derive(Clone, Debug, Default)]
pub struct Extra {
    /// Title (default: "txlab results").
    pub title: Option<String>,
    /// A paragraph under the title (a preset's source and setting).
    pub intro: Option<String>,
    /// Figures to draw (default: every statistic of interest against every varied parameter).
    pub figures: Vec<FigureSpec>,
    /// Claims and verdicts (presets).
    pub claims: Vec<ClaimRow>,
    /// Sections of prose and tables before the figures (`txlab advise`'s recommendation).
    pub sections: Vec<Section>,
}

/// A section of a report: a heading, paragraphs and tables.
#[derive(Clone, Debug, Default)]
pub struct Section {
    /// The heading.
    pub heading: String,
    /// Paragraphs of text, in order.
    pub paragraphs: Vec<String>,
    /// Tables after them.
    pub tables: Vec<Table>,
}

/// A table of text cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Its title (a third-level heading).
    pub title: String,
    /// Column headings.
    pub head: Vec<String>,
    /// Rows of cells, as many as the headings.
    pub rows: Vec<Vec<String>>,
}

struct FigureView {
    title: String,
    svg: String,
    notes: Vec<String>,
}

impl FigureView {
    /// `fig` drawn as SVG to sit inline in HTML.
    fn of(fig: &super::figure::Figure) -> Result<FigureView, String> {
        let svg = plot::svg(fig, plot::SIZE)?;
        // The SVG's own XML declaration does not belong inside HTML.
        let text = match svg.text.find("<svg") {
            Some(at) => svg.text[at..].to_string(),
            None => svg.text,
        };
        Ok(FigureView { title: fig.title.clone(), svg: text, notes: fig.notes.clone() })
    }
}

struct RowView {
    point: String,
    protocol: String,
    runs: usize,
    median: String,
    min: String,
    max: String,
    abort_ratio: String,
    p99: String,
    /// The rank it could hold among the protocols at its point (`2-3` where ranges overlap).
    rank: String,
    /// The protocols at its point it is not distinguishable from, with the repeats estimated
    /// to separate them.
    ties: String,
    warnings: String,
}

struct SweepView {
    base: String,
    axes: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "report.html")]
struct Page {
    title: String,
    intro: String,
    version: &'static str,
    generated: String,
    sources: String,
    runs: usize,
    points: usize,
    protocols: Vec<(String, String)>,
    claims: Vec<ClaimRow>,
    sections: Vec<Section>,
    figures: Vec<FigureView>,
    rows: Vec<RowView>,
    sweeps: Vec<SweepView>,
    config: Vec<(String, String)>,
    machine: Vec<(String, String)>,
    /// Each origin (revision, build, machine) the runs came from, with its run count.
    origins: Vec<(String, usize)>,
}

/// The figures a report draws when none are given: for every parameter a sweep varies over
/// two or more values, throughput, abort ratio and p99 latency (and the workload's headline
/// rate when it has one) against it.
pub fn default_figures(records: &[Record]) -> Vec<FigureSpec> {
    let mut axes: Vec<String> = Vec::new();
    for r in records {
        for a in r.sweep.def.grid.iter().filter(|a| a.values.len() > 1) {
            if !axes.contains(&a.name) {
                axes.push(a.name.clone());
            }
        }
    }
    let headline = records.iter().any(|r| r.value["headline"].is_object());
    let mut ys = vec!["throughput", "abort_ratio", "p99_us"];
    if headline {
        ys.insert(1, "headline");
    }
    let mut out = Vec::new();
    for x in &axes {
        for y in &ys {
            out.push(FigureSpec { x: x.clone(), y: y.to_string(), ..Default::default() });
        }
    }
    out
}

/// Writes the report of `records` (read from `sources`).
pub fn html(records: &[Record], sources: &[String], extra: &Extra) -> Result<String, String> {
    // Figures asked for are drawn over every record; the default ones per sweep, so that the
    // runs of different sweeps (other workloads, other fixed flags) never share a line.
    let mut drawn: Vec<(Vec<FigureSpec>, Vec<Record>)> = Vec::new();
    if extra.figures.is_empty() {
        let mut defs = Vec::new();
        for r in records {
            if !defs.contains(&&r.sweep.def) {
                defs.push(&r.sweep.def);
            }
        }
        for def in defs {
            let own: Vec<Record> =
                records.iter().filter(|r| r.sweep.def == *def).cloned().collect();
            drawn.push((default_figures(&own), own));
        }
    } else {
        drawn.push((extra.figures.clone(), records.to_vec()));
    }
    let mut figures = Vec::new();
    for (specs, records) in &drawn {
        for spec in specs {
            figures.push(FigureView::of(&figure(records, spec)?)?);
        }
    }
    // One row per point and protocol, in the files' order.
    let mut groups: Vec<(String, String, Vec<&Record>)> = Vec::new();
    for r in records {
        let point: Vec<String> = r.sweep.values.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let point = point.join(" ");
        match groups.iter_mut().find(|(p, q, _)| *p == point && *q == r.protocol) {
            Some((_, _, rs)) => rs.push(r),
            None => groups.push((point, r.protocol.clone(), vec![r])),
        }
    }
    // Per point, each protocol's standing among the others (distinguish).
    let standing: Vec<Option<super::distinguish::Standing>> = {
        let mut out = vec![None; groups.len()];
        let mut points: Vec<&str> = Vec::new();
        for (p, _, _) in &groups {
            if !points.contains(&p.as_str()) {
                points.push(p);
            }
        }
        for point in points {
            let at: Vec<usize> = (0..groups.len()).filter(|&i| groups[i].0 == point).collect();
            let samples: Vec<Vec<f64>> = at
                .iter()
                .map(|&i| groups[i].2.iter().filter_map(|r| r.metric("throughput")).collect())
                .collect();
            if at.len() > 1 {
                for (k, st) in super::distinguish::standings(&samples).into_iter().enumerate() {
                    out[at[k]] = st.map(|mut st| {
                        // Indices among this point's protocols become indices of groups.
                        for t in st.ties.iter_mut() {
                            t.0 = at[t.0];
                        }
                        st
                    });
                }
            }
        }
        out
    };
    let rows = groups
        .iter()
        .enumerate()
        .map(|(g, (point, protocol, rs))| {
            let mut tp: Vec<f64> = rs.iter().filter_map(|r| r.metric("throughput")).collect();
            let mut ar: Vec<f64> = rs.iter().filter_map(|r| r.metric("abort_ratio")).collect();
            let mut p99: Vec<f64> = rs.iter().filter_map(|r| r.metric("p99_us")).collect();
            let med = |v: &mut Vec<f64>| {
                if v.is_empty() {
                    (f64::NAN, f64::NAN, f64::NAN)
                } else {
                    median_min_max(v)
                }
            };
            let (m, lo, hi) = med(&mut tp);
            let mut warnings: Vec<String> = rs
                .iter()
                .flat_map(|r| r.value["warnings"].as_array().cloned().unwrap_or_default())
                .filter_map(|w| w.as_str().map(str::to_string))
                .collect();
            warnings.sort();
            warnings.dedup();
            RowView {
                point: point.clone(),
                protocol: protocol.clone(),
                runs: rs.len(),
                median: format!("{m:.0}"),
                min: format!("{lo:.0}"),
                max: format!("{hi:.0}"),
                abort_ratio: format!("{:.4}", med(&mut ar).0),
                p99: format!("{:.1}", med(&mut p99).0),
                rank: standing[g].as_ref().map_or_else(String::new, |st| st.rank_text()),
                ties: standing[g].as_ref().map_or_else(String::new, |st| {
                    let t: Vec<String> = st
                        .ties
                        .iter()
                        .map(|&(j, n)| {
                            format!("{} ({})", groups[j].1, super::distinguish::repeats_text(n))
                        })
                        .collect();
                    t.join(", ")
                }),
                warnings: warnings.join("; "),
            }
        })
        .collect();
    let mut sweeps: Vec<SweepView> = Vec::new();
    let mut defs = Vec::new();
    for r in records {
        if !defs.contains(&&r.sweep.def) {
            defs.push(&r.sweep.def);
            sweeps.push(SweepView {
                base: if r.sweep.def.base.is_empty() {
                    "(defaults)".into()
                } else {
                    r.sweep.def.base.join(" ")
                },
                axes: r
                    .sweep
                    .def
                    .grid
                    .iter()
                    .map(|a| (a.name.clone(), a.values.join(", ")))
                    .collect(),
            });
        }
    }
    let mut protocols: Vec<(String, String)> = Vec::new();
    for r in records {
        if !protocols.iter().any(|(p, _)| *p == r.protocol) {
            protocols.push((r.protocol.clone(), plot::css_colour(&r.protocol)));
        }
    }
    let first = &records[0].value;
    let mut config = Vec::new();
    for part in ["run", "database", "workload"] {
        flatten(part, &first["config"][part], &mut config);
    }
    let distinct = |f: &dyn Fn(&serde_json::Value) -> String| {
        let mut v: Vec<String> = records.iter().map(|r| f(&r.value)).collect();
        v.sort();
        v.dedup();
        v.join("; ")
    };
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let machine = vec![
        ("CPU".to_string(), distinct(&|v| text(&v["machine"]["cpu"]))),
        ("cores".into(), distinct(&|v| text(&v["machine"]["cores"]))),
        ("memory (GiB)".into(), distinct(&|v| text(&v["machine"]["memory_gib"]))),
        ("kernel".into(), distinct(&|v| text(&v["machine"]["kernel"]))),
        ("OS".into(), distinct(&|v| text(&v["machine"]["os"]))),
        ("txlab".into(), distinct(&|v| text(&v["txlab_version"]))),
        ("git revision".into(), distinct(&|v| text(&v["git_revision"]))),
        ("compiler".into(), distinct(&|v| text(&v["rustc"]))),
        ("build".into(), distinct(&|v| Origin::of(v).build)),
        (
            "measured".into(),
            format!(
                "{} to {}",
                records.iter().filter_map(|r| r.value["timestamp"].as_str()).min().unwrap_or("?"),
                records.iter().filter_map(|r| r.value["timestamp"].as_str()).max().unwrap_or("?")
            ),
        ),
    ];
    let points = {
        let mut p: Vec<String> = groups.iter().map(|(p, _, _)| p.clone()).collect();
        p.dedup();
        p.sort();
        p.dedup();
        p.len()
    };
    let origins = origins(records).into_iter().map(|(o, n)| (o.to_string(), n)).collect();
    let page = Page {
        title: extra.title.clone().unwrap_or_else(|| "txlab results".into()),
        intro: extra.intro.clone().unwrap_or_default(),
        version: env!("CARGO_PKG_VERSION"),
        generated: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        sources: sources.join(", "),
        runs: records.len(),
        points,
        protocols,
        claims: extra.claims.clone(),
        sections: extra.sections.clone(),
        figures,
        rows,
        sweeps,
        config,
        machine,
        origins,
    };
    page.render().map_err(|e| format!("writing the report: {e}"))
}

/// One preset's part of `reproduce --all`'s report.
#[derive(Clone, Debug)]
pub struct PresetSection {
    /// The preset's name.
    pub name: String,
    /// The figure it reproduces.
    pub title: String,
    /// Where the claims come from.
    pub source: String,
    /// Its setting.
    pub about: String,
    /// Its own report, relative to the summary.
    pub link: String,
    /// Its claims' verdicts.
    pub claims: Vec<ClaimRow>,
    /// Its figures.
    pub figures: Vec<super::figure::Figure>,
}

struct SectionView {
    name: String,
    title: String,
    source: String,
    about: String,
    link: String,
    figures: Vec<FigureView>,
}

#[derive(Template)]
#[template(path = "summary.html")]
struct Summary {
    version: &'static str,
    generated: String,
    origin: String,
    tally: String,
    /// (preset, link, claim) for every claim of every preset.
    claims: Vec<(String, String, ClaimRow)>,
    sections: Vec<SectionView>,
}

/// How many claims hold, do not hold, cannot be observed here, and lack data, in words.
fn tally(sections: &[PresetSection]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for c in sections.iter().flat_map(|s| &s.claims) {
        match counts.iter_mut().find(|(w, _)| *w == c.verdict) {
            Some((_, n)) => *n += 1,
            None => counts.push((c.verdict.clone(), 1)),
        }
    }
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let parts: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
    format!("{total} claims of {} presets: {}", sections.len(), parts.join(", "))
}

/// The report of `reproduce --all`: every claim's verdict first, then each preset's figures,
/// each linking to the preset's own report (results tables, configuration).
pub fn summary_html(sections: &[PresetSection], origin: &Origin) -> Result<String, String> {
    let mut views = Vec::new();
    for s in sections {
        let mut figures = Vec::new();
        for fig in &s.figures {
            figures.push(FigureView::of(fig)?);
        }
        views.push(SectionView {
            name: s.name.clone(),
            title: s.title.clone(),
            source: s.source.clone(),
            about: s.about.clone(),
            link: s.link.clone(),
            figures,
        });
    }
    let page = Summary {
        version: env!("CARGO_PKG_VERSION"),
        generated: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        origin: origin.to_string(),
        tally: tally(sections),
        claims: sections
            .iter()
            .flat_map(|s| s.claims.iter().map(|c| (s.name.clone(), s.link.clone(), c.clone())))
            .collect(),
        sections: views,
    };
    page.render().map_err(|e| format!("writing the report: {e}"))
}

/// Every claim's verdict as a text table: preset, verdict, claim; then the tally.
pub fn claims_table(sections: &[PresetSection]) -> String {
    use std::fmt::Write as _;
    let width = sections.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let verdict = sections.iter().flat_map(|s| &s.claims).map(|c| c.verdict.len()).max();
    let verdict = verdict.unwrap_or(0);
    let mut out = String::new();
    for s in sections {
        for c in &s.claims {
            let _ = writeln!(out, "  {:<width$}  {:<verdict$}  {}", s.name, c.verdict, c.claim);
        }
    }
    let _ = writeln!(out, "{}", tally(sections));
    out
}

/// The origins of `records` (revision, build, machine), each with its run count, in order.
pub fn origins(records: &[Record]) -> Vec<(Origin, usize)> {
    let mut out: Vec<(Origin, usize)> = Vec::new();
    for r in records {
        let o = Origin::of(&r.value);
        match out.iter_mut().find(|(x, _)| *x == o) {
            Some((_, n)) => *n += 1,
            None => out.push((o, 1)),
        }
    }
    out.sort();
    out
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten(&format!("{prefix}.{k}"), x, out);
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::figure::tests::rec;

    fn records() -> Vec<Record> {
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2"]), ("theta", &["0", "0.9"])];
        let mut rs = Vec::new();
        for t in ["1", "2"] {
            for th in ["0", "0.9"] {
                for (k, p) in ["silo", "2pl-nowait"].iter().enumerate() {
                    rs.push(rec(g, &[("threads", t), ("theta", th)], p, 0, 100.0 * (k + 1) as f64));
                }
            }
        }
        rs
    }

    #[test]
    fn the_report_is_valid_html_with_every_figure_inline() {
        let rs = records();
        let claims = vec![ClaimRow {
            claim: "a < b & c".into(),
            verdict: "holds".into(),
            class: "holds",
            detail: "1.31x".into(),
        }];
        let html = html(&rs, &["r.jsonl".into()], &Extra { claims, ..Default::default() }).unwrap();
        let doc = scraper::Html::parse_document(&html);
        assert!(doc.errors.is_empty(), "HTML parse errors: {:?}", doc.errors);
        let sel = |s: &str| scraper::Selector::parse(s).unwrap();
        // Two varied parameters, three statistics each.
        assert_eq!(doc.select(&sel("figure svg")).count(), 6);
        assert_eq!(doc.select(&sel("figure figcaption")).count(), 6);
        // Nothing is fetched: no script, no external reference.
        assert_eq!(doc.select(&sel("script")).count(), 0);
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
        assert!(!html.contains("<?xml"));
        // The claim's text is escaped, the results table has a row per point and protocol.
        assert!(!html.contains("a < b & c"));
        let claim = doc.select(&sel("td")).next().unwrap().text().collect::<String>();
        assert_eq!(claim, "a < b & c");
        let rows = doc.select(&sel("table")).nth(1).unwrap().select(&sel("tr")).count();
        assert_eq!(rows, 1 + 8);
    }

    #[test]
    fn the_summary_puts_every_claim_first_and_links_each_preset() {
        let rs = records();
        let spec = FigureSpec { x: "threads".into(), y: "throughput".into(), ..Default::default() };
        let fig = figure(&rs, &spec).unwrap();
        let row = |claim: &str, verdict: &str, class| ClaimRow {
            claim: claim.into(),
            verdict: verdict.into(),
            class,
            detail: "observed".into(),
        };
        let sections = vec![
            PresetSection {
                name: "one".into(),
                title: "One & only".into(),
                source: "S".into(),
                about: "A".into(),
                link: "one/report.html".into(),
                claims: vec![
                    row("first", "holds", "holds"),
                    row("second", "does not hold", "fails"),
                ],
                figures: vec![fig.clone()],
            },
            PresetSection {
                name: "two".into(),
                title: "Two".into(),
                source: "S".into(),
                about: "A".into(),
                link: "two/report.html".into(),
                claims: vec![row("third", "holds", "holds")],
                figures: vec![fig],
            },
        ];
        let html = summary_html(&sections, &Origin::current()).unwrap();
        let doc = scraper::Html::parse_document(&html);
        assert!(doc.errors.is_empty(), "HTML parse errors: {:?}", doc.errors);
        let sel = |s: &str| scraper::Selector::parse(s).unwrap();
        // The claims table comes before any figure, a row per claim.
        let table = html.find("<table").unwrap();
        assert!(table < html.find("<figure").unwrap());
        assert_eq!(doc.select(&sel("table tr")).count(), 1 + 3);
        assert!(html.contains("3 claims of 2 presets: 2 holds, 1 does not hold"));
        assert_eq!(doc.select(&sel("figure svg")).count(), 2);
        let links: Vec<&str> =
            doc.select(&sel("a")).filter_map(|a| a.value().attr("href")).collect();
        assert!(links.contains(&"one/report.html") && links.contains(&"two/report.html"));
        assert_eq!(
            claims_table(&sections),
            "  one  holds          first\n  one  does not hold  second\n  two  holds          \
             third\n3 claims of 2 presets: 2 holds, 1 does not hold\n"
        );
    }

    #[test]
    fn protocols_whose_runs_overlap_are_marked_not_distinguishable() {
        let g: &[(&str, &[&str])] = &[("threads", &["1"])];
        let mut rs = Vec::new();
        for (p, runs) in [
            ("silo", [100.0, 104.0, 96.0]),
            ("tictoc", [101.0, 105.0, 99.0]),
            ("2pl-nowait", [50.0, 52.0, 48.0]),
        ] {
            for (k, tp) in runs.iter().enumerate() {
                rs.push(rec(g, &[("threads", "1")], p, k as u32, *tp));
            }
        }
        let html = html(&rs, &["r.jsonl".into()], &Extra::default()).unwrap();
        let doc = scraper::Html::parse_document(&html);
        let sel = |s: &str| scraper::Selector::parse(s).unwrap();
        let table = doc.select(&sel("#results ~ table")).next().unwrap();
        let cells: Vec<Vec<String>> = table
            .select(&sel("tr"))
            .skip(1)
            .map(|tr| tr.select(&sel("td")).map(|td| td.text().collect()).collect())
            .collect();
        let row = |p: &str| cells.iter().find(|c| c[1] == p).unwrap().clone();
        assert_eq!(row("silo")[6], "1-2");
        assert_eq!(row("tictoc")[6], "1-2");
        // 1 % apart in 4 % noise: not worth separating.
        assert_eq!(row("silo")[7], "tictoc (more than 100 repeats)");
        assert_eq!(row("tictoc")[7], "silo (more than 100 repeats)");
        assert_eq!(row("2pl-nowait")[6..8], ["3".to_string(), String::new()]);
    }

    /// Two sweeps over the same parameter (another workload, other fixed flags) get figures of
    /// their own: a line never joins the runs of different sweeps.
    #[test]
    fn the_default_figures_are_drawn_per_sweep() {
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2"])];
        let mut rs = Vec::new();
        for (base, tp) in [("1000", 100.0), ("2000", 900.0)] {
            for t in ["1", "2"] {
                let mut r = rec(g, &[("threads", t)], "silo", 0, tp);
                r.sweep.def.base = vec!["--records".into(), base.into()];
                rs.push(r);
            }
        }
        for spec in default_figures(&rs) {
            let lines = crate::experiment::figure::figure(&rs, &spec).unwrap().series.len();
            assert_eq!(lines, 1, "over all records, the sweeps would share one line");
        }
        let html = html(&rs, &["r.jsonl".into()], &Extra::default()).unwrap();
        let doc = scraper::Html::parse_document(&html);
        let sel = scraper::Selector::parse("figure svg").unwrap();
        assert_eq!(doc.select(&sel).count(), 2 * 3, "three statistics per sweep");
    }
}
