//! Drawing figures with plotters: SVG (for files and the HTML report) and PNG, with the font
//! shipped in the repository (DejaVu Sans) so that nothing depends on the system's fonts.

use super::figure::Figure;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// DejaVu Sans (Bitstream Vera licence: assets/fonts/DejaVuSans.LICENSE).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

/// Default figure size in pixels.
pub const SIZE: (u32, u32) = (900, 520);

/// Colours by protocol name, the same in every figure: the protocols txlab has or will have
/// get fixed entries; any other name gets one by a hash of its name.
const PALETTE: [(&str, RGBColor); 14] = [
    ("nocc", RGBColor(127, 127, 127)),
    ("2pl-nowait", RGBColor(31, 119, 180)),
    ("2pl-waitdie", RGBColor(44, 160, 44)),
    ("silo", RGBColor(214, 39, 40)),
    ("tictoc", RGBColor(255, 127, 14)),
    ("mocc", RGBColor(148, 103, 189)),
    ("si", RGBColor(140, 86, 75)),
    ("ssn", RGBColor(23, 190, 207)),
    ("ssi", RGBColor(188, 189, 34)),
    ("hekaton", RGBColor(227, 119, 194)),
    ("cicada", RGBColor(0, 0, 0)),
    ("bohm", RGBColor(102, 51, 0)),
    ("ic3", RGBColor(0, 102, 102)),
    ("ermia", RGBColor(153, 0, 76)),
];

/// The colour of `protocol`'s lines.
pub fn colour(protocol: &str) -> RGBColor {
    match PALETTE.iter().find(|(n, _)| *n == protocol) {
        Some((_, c)) => *c,
        None => {
            // FNV-1a: stable across runs and builds, unlike std's hasher.
            let h = protocol.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            PALETTE[(h % PALETTE.len() as u64) as usize].1
        }
    }
}

/// The colour as CSS (`#rrggbb`).
pub fn css_colour(protocol: &str) -> String {
    let RGBColor(r, g, b) = colour(protocol);
    format!("#{r:02x}{g:02x}{b:02x}")
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and known to parse (a test draws with it).
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// Where a data point was drawn, in pixels (for tests and image maps).
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    /// Index of the series.
    pub series: usize,
    /// Data coordinates.
    pub x: f64,
    /// The median drawn.
    pub y: f64,
    /// Pixel coordinates of the marker's centre.
    pub px: i32,
    /// Pixel coordinates of the marker's centre.
    pub py: i32,
}

/// A drawn SVG and where its points are.
pub struct Svg {
    /// The SVG document.
    pub text: String,
    /// Every point's position.
    pub placed: Vec<Placed>,
}

/// Draws `fig` as SVG.
pub fn svg(fig: &Figure, size: (u32, u32)) -> Result<Svg, String> {
    register_font();
    let mut text = String::new();
    let placed = {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        let placed = draw(&root, fig)?;
        root.present().map_err(|e| format!("drawing the figure: {e}"))?;
        placed
    };
    Ok(Svg { text, placed })
}

/// Draws `fig` as a PNG file.
pub fn png(fig: &Figure, size: (u32, u32), path: &std::path::Path) -> Result<(), String> {
    register_font();
    let root = BitMapBackend::new(path, size).into_drawing_area();
    draw(&root, fig)?;
    root.present().map_err(|e| format!("{}: {e}", path.display()))
}

/// A number as an axis label: 1.5M, 250k, 0.25, 12.
pub fn human(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e9 {
        format!("{}G", trim(format!("{:.2}", v / 1e9)))
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.3}"))
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
) -> Result<Vec<Placed>, String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("drawing the figure: {e}");
    root.fill(&WHITE).map_err(err)?;
    let points = fig.series.iter().flat_map(|s| &s.points);
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for p in points {
        x_lo = x_lo.min(p.x);
        x_hi = x_hi.max(p.x);
        y_lo = y_lo.min(p.min);
        y_hi = y_hi.max(p.max);
    }
    if x_lo > x_hi {
        return Err("the figure has no points".into());
    }
    let x_range = if fig.categories.is_some() {
        (x_lo - 0.5, x_hi + 0.5)
    } else if fig.log_x {
        (x_lo / 1.3, x_hi * 1.3)
    } else {
        let pad = ((x_hi - x_lo) * 0.05).max(if x_hi == x_lo { 0.5 } else { 0.0 });
        (x_lo - pad, x_hi + pad)
    };
    let y_range = if fig.log_y {
        let lo = if y_lo > 0.0 {
            y_lo
        } else {
            fig.series
                .iter()
                .flat_map(|s| &s.points)
                .map(|p| p.min)
                .filter(|v| *v > 0.0)
                .fold(f64::MAX, f64::min)
        };
        if lo == f64::MAX {
            return Err("--log-y: every value is 0 or less".into());
        }
        (lo / 1.5, y_hi * 1.5)
    } else {
        let lo = y_lo.min(0.0);
        let hi = if y_hi <= lo { lo + 1.0 } else { y_hi + (y_hi - lo) * 0.08 };
        (lo, hi)
    };
    // Every line its own marker and dash, so that lines on top of each other stay apart.
    let styles: Vec<Style> = (0..fig.series.len()).map(Style::of).collect();
    // The legend gets its own column to the right, so that it never hides a point.
    let longest = fig.series.iter().map(|s| s.label.chars().count()).max().unwrap_or(0);
    let legend_w = (longest as u32 * 10 + 60).clamp(130, 380);
    let (w, _) = root.dim_in_pixel();
    let (plot_area, legend_area) = root.split_horizontally(w.saturating_sub(legend_w));
    let mut builder = ChartBuilder::on(&plot_area);
    builder
        .caption(&fig.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72);
    let x = x_range.0..x_range.1;
    let y = y_range.0..y_range.1;
    // Log axes get their ticks from `log_ticks` (plotters labels only powers of ten and what
    // follows them: one label, or none, on a range within a decade).
    let xs: Vec<f64> = fig.series.iter().flat_map(|s| &s.points).map(|p| p.x).collect();
    let x_ticks = log_ticks(x_range, &xs);
    let y_ticks = log_ticks(y_range, &[]);
    let placed = match (fig.log_x, fig.log_y) {
        (false, false) => {
            let c = builder.build_cartesian_2d(x, y).map_err(err)?;
            plot_on(c, fig, &styles)
        }
        (true, false) => {
            let c = builder
                .build_cartesian_2d(x.log_scale().with_key_points(x_ticks), y)
                .map_err(err)?;
            plot_on(c, fig, &styles)
        }
        (false, true) => {
            let c = builder
                .build_cartesian_2d(x, y.log_scale().with_key_points(y_ticks))
                .map_err(err)?;
            plot_on(c, fig, &styles)
        }
        (true, true) => {
            let c = builder
                .build_cartesian_2d(
                    x.log_scale().with_key_points(x_ticks),
                    y.log_scale().with_key_points(y_ticks),
                )
                .map_err(err)?;
            plot_on(c, fig, &styles)
        }
    }?;
    // Markers last, over every line, in pixels (the plot area starts at the root's corner, so
    // its pixels are the backend's).
    for p in &placed {
        let colour = colour(&fig.series[p.series].protocol);
        styles[p.series].draw_marker(&plot_area, (p.px, p.py), colour).map_err(err)?;
    }
    for (i, s) in fig.series.iter().enumerate() {
        let colour = colour(&s.protocol);
        let y = 56 + LEGEND_ROW * i as i32;
        let line = vec![(4, y), (40, y)];
        match styles[i].dash {
            None => legend_area.draw(&PathElement::new(line, colour.stroke_width(2))),
            Some((size, gap)) => legend_area.draw(&plotters::element::DashedPathElement::new(
                line,
                size,
                gap,
                colour.stroke_width(2),
            )),
        }
        .map_err(err)?;
        styles[i].draw_marker(&legend_area, (22, y), colour).map_err(err)?;
        let label = Text::new(s.label.clone(), (48, y - 8), (FAMILY, LEGEND_FONT).into_font());
        legend_area.draw(&label).map_err(err)?;
    }
    Ok(placed)
}

/// The legend's text size and row height, in pixels.
const LEGEND_FONT: u32 = 16;
const LEGEND_ROW: i32 = 26;

/// How a line is drawn beside its colour: a marker shape and a dash pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// 0 circle, 1 triangle, 2 square, 3 diamond, 4 cross.
    pub shape: usize,
    /// Dash and gap lengths in pixels; `None` for a solid line.
    pub dash: Option<(u32, u32)>,
}

impl Style {
    /// Line `i`'s style: five shapes, then the same with dashes, then dotted (15 distinct).
    pub fn of(i: usize) -> Style {
        let dash = match (i / 5) % 3 {
            0 => None,
            1 => Some((10, 5)),
            _ => Some((3, 4)),
        };
        Style { shape: i % 5, dash }
    }

    /// Draws the marker on `area`, centred on the pixel `at`.
    fn draw_marker<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        at: (i32, i32),
        colour: RGBColor,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let fill = colour.filled();
        let (x, y) = at;
        match self.shape {
            0 => area.draw(&Circle::new(at, 4, fill)),
            1 => area.draw(&TriangleMarker::new(at, 6, fill)),
            2 => area.draw(&Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], fill)),
            3 => {
                area.draw(&Polygon::new(vec![(x, y - 6), (x + 6, y), (x, y + 6), (x - 6, y)], fill))
            }
            _ => area.draw(&Cross::new(at, 5, colour.stroke_width(2))),
        }
    }
}

/// The ticks of a log axis over `range`: the data's own values when there are few (1, 2, 4,
/// 8 threads), else 1-2-5 steps of each decade, or every digit where those give fewer than
/// three, or only powers of ten (every other decade if needed) where they give too many.
pub fn log_ticks(range: (f64, f64), values: &[f64]) -> Vec<f64> {
    let (lo, hi) = (range.0.max(f64::MIN_POSITIVE), range.1);
    let mut own: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
    own.sort_by(f64::total_cmp);
    own.dedup();
    if (2..=12).contains(&own.len()) {
        return own;
    }
    let steps = |mults: &[f64], every: i32| {
        let mut out = Vec::new();
        let mut e = lo.log10().floor() as i32;
        while 10f64.powi(e) <= hi {
            if e % every == 0 {
                for m in mults {
                    let v = m * 10f64.powi(e);
                    if v >= lo && v <= hi {
                        out.push(v);
                    }
                }
            }
            e += 1;
        }
        out
    };
    let ticks = steps(&[1.0, 2.0, 5.0], 1);
    if ticks.len() < 3 {
        return steps(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], 1);
    }
    if ticks.len() > 12 {
        let decades = steps(&[1.0], 1);
        return if decades.len() > 12 { steps(&[1.0], 2) } else { decades };
    }
    ticks
}

/// Draws the mesh, the lines, the markers, the error bars and the legend on `chart`.
fn plot_on<'a, DB: DrawingBackend + 'a, X, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    fig: &Figure,
    styles: &[Style],
) -> Result<Vec<Placed>, String>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("drawing the figure: {e}");
    let categories = fig.categories.clone();
    let x_fmt = move |v: &f64| match &categories {
        Some(c) => {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < c.len() {
                c[i as usize].clone()
            } else {
                String::new()
            }
        }
        None => human(*v),
    };
    let y_fmt = |v: &f64| human(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&fig.x_label)
        .y_desc(&fig.y_label)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .axis_desc_style((FAMILY, 16))
        .label_style((FAMILY, 14))
        .light_line_style(RGBColor(235, 235, 235));
    if let Some(c) = &fig.categories {
        // One label per category (the axis runs from -0.5 to n - 0.5).
        mesh.x_labels(c.len() * 2 + 1);
    } else if !fig.log_x {
        // Whole-numbered parameters (threads, warehouses) get whole-numbered ticks.
        let xs: Vec<f64> = fig.series.iter().flat_map(|s| &s.points).map(|p| p.x).collect();
        let lo = xs.iter().cloned().fold(f64::MAX, f64::min);
        let hi = xs.iter().cloned().fold(f64::MIN, f64::max);
        if xs.iter().all(|x| x.fract() == 0.0) && hi - lo <= 12.0 {
            mesh.x_labels((hi - lo) as usize + 1);
        }
    }
    mesh.draw().map_err(err)?;
    let mut placed = Vec::new();
    for (i, s) in fig.series.iter().enumerate() {
        let colour = colour(&s.protocol);
        let style = styles[i];
        let line: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.median)).collect();
        match style.dash {
            None => chart.draw_series(LineSeries::new(line, colour.stroke_width(2))),
            Some((size, gap)) => {
                chart.draw_series(DashedLineSeries::new(line, size, gap, colour.stroke_width(2)))
            }
        }
        .map_err(err)?;
        chart
            .draw_series(s.points.iter().filter(|p| p.max > p.min).map(|p| {
                ErrorBar::new_vertical(p.x, p.min, p.median, p.max, colour.stroke_width(1), 8)
            }))
            .map_err(err)?;
        for p in &s.points {
            let at = (p.x, p.median);
            let (px, py) = chart.backend_coord(&at);
            placed.push(Placed { series: i, x: p.x, y: p.median, px, py });
        }
    }
    Ok(placed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::figure::tests::rec;
    use crate::experiment::figure::{figure, FigureSpec};

    /// The centres of the SVG's circles.
    fn circles(svg: &str) -> Vec<(i32, i32)> {
        let attr = |tag: &str, name: &str| -> i32 {
            let at = tag.find(&format!(" {name}=\"")).expect("attribute") + name.len() + 3;
            let end = tag[at..].find('"').expect("closing quote");
            tag[at..at + end].parse::<f64>().expect("number") as i32
        };
        svg.split("<circle").skip(1).map(|t| (attr(t, "cx"), attr(t, "cy"))).collect()
    }

    #[test]
    fn points_are_drawn_where_the_numbers_say() {
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2", "4"])];
        let rs = vec![
            rec(g, &[("threads", "1")], "silo", 0, 100.0),
            rec(g, &[("threads", "2")], "silo", 0, 200.0),
            rec(g, &[("threads", "4")], "silo", 0, 400.0),
            rec(g, &[("threads", "1")], "nocc", 0, 300.0),
            rec(g, &[("threads", "2")], "nocc", 0, 300.0),
            rec(g, &[("threads", "4")], "nocc", 0, 300.0),
        ];
        let spec = FigureSpec { x: "threads".into(), y: "throughput".into(), ..Default::default() };
        let fig = figure(&rs, &spec).unwrap();
        let out = svg(&fig, SIZE).unwrap();
        assert_eq!(out.placed.len(), 6);
        // Every point of the first line has its marker, a circle, in the SVG at its place.
        let drawn = circles(&out.text);
        for p in out.placed.iter().filter(|p| p.series == 0) {
            assert!(
                drawn.iter().any(|&(cx, cy)| (cx - p.px).abs() <= 1 && (cy - p.py).abs() <= 1),
                "no marker at {p:?} in {drawn:?}"
            );
        }
        // The mapping is linear: x = 1, 2, 4 are spaced 1 : 2, y = 100, 200, 400 likewise, and
        // larger values are higher (smaller pixel y).
        let silo: Vec<&Placed> = out.placed.iter().filter(|p| p.series == 0).collect();
        let dx1 = silo[1].px - silo[0].px;
        let dx2 = silo[2].px - silo[1].px;
        assert!((dx2 - 2 * dx1).abs() <= 2, "x spacing {dx1} then {dx2}");
        let dy1 = silo[0].py - silo[1].py;
        let dy2 = silo[1].py - silo[2].py;
        assert!(dy1 > 0 && (dy2 - 2 * dy1).abs() <= 2, "y spacing {dy1} then {dy2}");
        // nocc's constant 300 is one height, between silo's 200 and 400.
        let nocc: Vec<&Placed> = out.placed.iter().filter(|p| p.series == 1).collect();
        assert!(nocc.iter().all(|p| p.py == nocc[0].py));
        assert!(silo[1].py > nocc[0].py && nocc[0].py > silo[2].py);
        // Axis labels with units, the title, and the protocols' colours.
        assert!(out.text.contains("worker threads"));
        assert!(out.text.contains("throughput (txn/s)"));
        assert!(
            out.text.contains(&css_colour("silo").to_uppercase())
                || out.text.contains(&css_colour("silo"))
        );
    }

    #[test]
    fn log_axes_and_categories_draw() {
        let g: &[(&str, &[&str])] = &[("records", &["1000", "1000000"])];
        let rs = vec![
            rec(g, &[("records", "1000")], "silo", 0, 10.0),
            rec(g, &[("records", "1000000")], "silo", 0, 1000.0),
        ];
        let spec = FigureSpec {
            x: "records".into(),
            y: "throughput".into(),
            log_x: true,
            log_y: true,
            ..Default::default()
        };
        let out = svg(&figure(&rs, &spec).unwrap(), SIZE).unwrap();
        assert_eq!(out.placed.len(), 2);
        assert!(out.placed[1].px > out.placed[0].px && out.placed[1].py < out.placed[0].py);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.png");
        png(&figure(&rs, &spec).unwrap(), SIZE, &path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 1000);
    }

    #[test]
    fn every_line_has_its_own_marker_and_dash() {
        let styles: Vec<Style> = (0..15).map(Style::of).collect();
        for (i, st) in styles.iter().enumerate() {
            assert!(!styles[..i].contains(st), "line {i} looks like an earlier one");
        }
        assert_eq!(Style::of(0), Style { shape: 0, dash: None });
        assert_eq!(Style::of(6), Style { shape: 1, dash: Some((10, 5)) });
        // Two protocols on the same values: both lines are drawn, the second dashed from the
        // sixth line on, and the legend is readable (16 px).
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2"])];
        let mut rs = Vec::new();
        for p in ["silo", "tictoc", "mocc", "si", "nocc", "cicada"] {
            for t in ["1", "2"] {
                rs.push(rec(g, &[("threads", t)], p, 0, 100.0));
            }
        }
        let spec = FigureSpec { x: "threads".into(), y: "throughput".into(), ..Default::default() };
        let out = svg(&figure(&rs, &spec).unwrap(), SIZE).unwrap();
        // Lines 1 and 6 have circles (the sixth dashed): two points and a legend entry each.
        assert_eq!(circles(&out.text).len(), 2 * 3);
        assert!(out.text.contains("<rect") && out.text.contains("<polygon"), "squares, diamonds");
        assert!(out.text.contains("font-size=\"16"), "legend text size");
        let stroke = format!("stroke=\"{}\"", css_colour("cicada").to_uppercase());
        let dashes = out.text.matches(&stroke);
        assert!(dashes.count() > 3, "cicada's line is dashed: several segments");
    }

    #[test]
    fn log_axes_label_several_ticks() {
        // Within a decade: every digit.
        assert_eq!(
            log_ticks((400_000.0, 1_350_000.0), &[]),
            [400e3, 500e3, 600e3, 700e3, 800e3, 900e3, 1e6]
        );
        // Across decades: 1-2-5.
        assert_eq!(log_ticks((50.0, 1100.0), &[]), [50.0, 100.0, 200.0, 500.0, 1000.0]);
        // Many decades: powers of ten, every other one past 12.
        assert_eq!(log_ticks((1e3, 1e9), &[]), [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]);
        assert_eq!(log_ticks((1.0, 1e20), &[]).len(), 11);
        // Few values of the data: those.
        assert_eq!(log_ticks((0.7, 11.0), &[1.0, 2.0, 4.0, 8.0, 2.0]), [1.0, 2.0, 4.0, 8.0]);
        // Drawn: a log y axis over 600k-900k labels them.
        let g: &[(&str, &[&str])] = &[("threads", &["1", "2"])];
        let rs = vec![
            rec(g, &[("threads", "1")], "silo", 0, 600_000.0),
            rec(g, &[("threads", "2")], "silo", 0, 900_000.0),
        ];
        let spec = FigureSpec {
            x: "threads".into(),
            y: "throughput".into(),
            log_y: true,
            ..Default::default()
        };
        let out = svg(&figure(&rs, &spec).unwrap(), SIZE).unwrap();
        for label in ["500k", "600k", "700k", "800k", "900k", "1M"] {
            assert!(out.text.contains(&format!("\n{label}\n")), "{label} missing");
        }
    }

    #[test]
    fn colours_are_stable_and_distinct() {
        assert_eq!(css_colour("silo"), "#d62728");
        assert_eq!(colour("some-new-protocol"), colour("some-new-protocol"));
        let known: Vec<RGBColor> = PALETTE.iter().map(|(_, c)| *c).collect();
        for (i, c) in known.iter().enumerate() {
            assert!(!known[..i].contains(c));
        }
    }

    #[test]
    fn numbers_read_well_on_axes() {
        assert_eq!(human(1_500_000.0), "1.5M");
        assert_eq!(human(250_000.0), "250k");
        assert_eq!(human(0.25), "0.25");
        assert_eq!(human(12.0), "12");
        assert_eq!(human(0.0), "0");
    }
}
