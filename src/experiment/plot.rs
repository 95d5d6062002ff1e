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
    // Lines of one protocol at different values of the other parameters get different markers.
    let mut markers = Vec::with_capacity(fig.series.len());
    for (i, s) in fig.series.iter().enumerate() {
        markers.push(fig.series[..i].iter().filter(|t| t.protocol == s.protocol).count() % 3);
    }
    // The legend gets its own column to the right, so that it never hides a point.
    let longest = fig.series.iter().map(|s| s.label.chars().count()).max().unwrap_or(0);
    let legend_w = (longest as u32 * 8 + 48).clamp(110, 330);
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
    let placed = match (fig.log_x, fig.log_y) {
        (false, false) => {
            let c = builder.build_cartesian_2d(x, y).map_err(err)?;
            plot_on(c, fig, &markers)
        }
        (true, false) => {
            let c = builder.build_cartesian_2d(x.log_scale(), y).map_err(err)?;
            plot_on(c, fig, &markers)
        }
        (false, true) => {
            let c = builder.build_cartesian_2d(x, y.log_scale()).map_err(err)?;
            plot_on(c, fig, &markers)
        }
        (true, true) => {
            let c = builder.build_cartesian_2d(x.log_scale(), y.log_scale()).map_err(err)?;
            plot_on(c, fig, &markers)
        }
    }?;
    for (i, s) in fig.series.iter().enumerate() {
        let colour = colour(&s.protocol);
        let y = 56 + 22 * i as i32;
        let line = PathElement::new(vec![(4, y), (28, y)], colour.stroke_width(2));
        legend_area.draw(&line).map_err(err)?;
        match markers[i] {
            0 => legend_area.draw(&Circle::new((16, y), 4, colour.filled())),
            1 => legend_area.draw(&TriangleMarker::new((16, y), 6, colour.filled())),
            _ => legend_area.draw(&Cross::new((16, y), 5, colour.stroke_width(2))),
        }
        .map_err(err)?;
        let label = Text::new(s.label.clone(), (36, y - 7), (FAMILY, 13).into_font());
        legend_area.draw(&label).map_err(err)?;
    }
    Ok(placed)
}

/// Draws the mesh, the lines, the markers, the error bars and the legend on `chart`.
fn plot_on<'a, DB: DrawingBackend + 'a, X, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    fig: &Figure,
    markers: &[usize],
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
        .axis_desc_style((FAMILY, 15))
        .label_style((FAMILY, 13))
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
        let marker = markers[i];
        let line: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.median)).collect();
        chart.draw_series(LineSeries::new(line, colour.stroke_width(2))).map_err(err)?;
        chart
            .draw_series(s.points.iter().filter(|p| p.max > p.min).map(|p| {
                ErrorBar::new_vertical(p.x, p.min, p.median, p.max, colour.stroke_width(1), 8)
            }))
            .map_err(err)?;
        for p in &s.points {
            let at = (p.x, p.median);
            match marker {
                0 => chart.draw_series(std::iter::once(Circle::new(at, 4, colour.filled()))),
                1 => {
                    chart.draw_series(std::iter::once(TriangleMarker::new(at, 6, colour.filled())))
                }
                _ => chart.draw_series(std::iter::once(Cross::new(at, 5, colour.stroke_width(2)))),
            }
            .map_err(err)?;
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
        // Every point has a marker in the SVG at its place.
        let drawn = circles(&out.text);
        for p in &out.placed {
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
