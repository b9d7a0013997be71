//! The client-count chart: cycles/s (top panel) and p99 latency (bottom panel) against the
//! number of clients, one coloured line per target, drawn with `plotters`. All axes are
//! logarithmic: the targets differ by orders of magnitude (fsync per write or not). The
//! contention workload's chart is grants per client, one line per run of a method.

use std::path::Path;

use anyhow::Context;
use plotters::coord::combinators::{BindKeyPoints, LogCoord, WithKeyPoints};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::Summary;

/// Width and height of the chart, in pixels.
pub const SIZE: (u32, u32) = (1000, 800);
/// Width of the legend strip on the right.
const LEGEND: u32 = 200;
const INK: RGBColor = RGBColor(30, 30, 30);
const GRID: RGBColor = RGBColor(200, 200, 200);
const MINOR: RGBColor = RGBColor(236, 236, 236);
/// The name under which the embedded font is registered with plotters.
pub const FONT: &str = "sans-serif";

/// Line colours, one per target in order.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A short label for an axis value: 950, 1.5K, 20K, 0.1.
pub fn label(v: f64) -> String {
    if v >= 1000.0 {
        let k = v / 1000.0;
        if (k - k.round()).abs() < 1e-9 {
            format!("{}K", k.round())
        } else {
            format!("{k:.1}K")
        }
    } else if v >= 1.0 || v == 0.0 {
        format!("{}", v.round())
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// The whole decades that hold the positive values of `v` (at least one decade).
pub fn decades(v: &[f64]) -> (i32, i32) {
    let pos = v.iter().cloned().filter(|x| *x > 0.0);
    let lo = pos.clone().fold(f64::MAX, f64::min);
    let hi = pos.fold(0.0, f64::max);
    if hi == 0.0 {
        return (0, 1);
    }
    let (lo, hi) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (lo, hi.max(lo + 1))
}

/// A log-scale value axis over the decades of `values`: a labelled grid line at each power
/// of ten, light ones at 2 and 5 times it.
fn value_axis(values: &[f64]) -> WithKeyPoints<LogCoord<f64>> {
    let (lo, hi) = decades(values);
    let major: Vec<f64> = (lo..=hi).map(|d| 10f64.powi(d)).collect();
    let minor: Vec<f64> = (lo..hi)
        .flat_map(|d| [2.0, 5.0].map(|m| m * 10f64.powi(d)))
        .collect();
    (major[0]..major[major.len() - 1])
        .log_scale()
        .with_key_points(major)
        .with_light_points(minor)
}

/// The client-count axis: log scale, a tick at each count that was run.
fn clients_axis(counts: &[usize]) -> WithKeyPoints<LogCoord<f64>> {
    let xs: Vec<f64> = counts.iter().map(|&n| n as f64).collect();
    let (lo, hi) = (xs[0], xs[xs.len() - 1]);
    // A margin of a fifth of the span (or a factor of 2) on each side keeps the end points
    // off the frame.
    let pad = if hi > lo { (hi / lo).powf(0.05) } else { 2.0 };
    ((lo / pad)..(hi * pad)).log_scale().with_key_points(xs)
}

/// Registers the embedded DejaVu Sans as plotters' `sans-serif` (ab_glyph needs a font
/// registered before any text is drawn; there is no system font lookup).
pub fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font, compiled in; a failure is a broken build.
        if plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_err()
        {
            panic!("the embedded DejaVu Sans font does not parse");
        }
    });
}

/// One panel: `value` of each target's rows against the client count.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rows: &[Summary],
    targets: &[String],
    counts: &[usize],
    (y_desc, value): (&str, fn(&Summary) -> f64),
) -> anyhow::Result<()> {
    let values: Vec<f64> = rows.iter().map(value).collect();
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(clients_axis(counts), value_axis(&values))
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    chart
        .configure_mesh()
        .bold_line_style(GRID)
        .light_line_style(MINOR)
        .axis_style(INK.stroke_width(2))
        .set_all_tick_mark_size(6)
        .x_desc("clients (concurrent connections)")
        .y_desc(y_desc)
        .x_label_formatter(&|v| format!("{v}"))
        .y_label_formatter(&|v| label(*v))
        .label_style((FONT, 15).into_font().color(&INK))
        .axis_desc_style((FONT, 17).into_font().color(&INK))
        .draw()
        .map_err(|e| anyhow::anyhow!("chart mesh: {e}"))?;
    for (i, t) in targets.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| &r.target == t)
            .map(|r| (r.clients as f64, value(r).max(f64::MIN_POSITIVE)))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(3)))
            .map_err(|e| anyhow::anyhow!("chart line: {e}"))?;
        // Squares of 9 pixels at each point, as backend coordinates around the data point.
        let squares = points
            .iter()
            .map(|&p| EmptyElement::at(p) + Rectangle::new([(-4, -4), (5, 5)], colour.filled()));
        chart
            .draw_series(squares)
            .map_err(|e| anyhow::anyhow!("chart points: {e}"))?;
    }
    Ok(())
}

/// The legend, in the strip on the right: a swatch and the name of each target, in order.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    targets: &[String],
) -> anyhow::Result<()> {
    let font = (FONT, 16).into_font().color(&INK);
    for (i, t) in targets.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let y = 30 + 30 * i as i32;
        area.draw(&PathElement::new(
            vec![(10, y), (40, y)],
            colour.stroke_width(3),
        ))
        .and_then(|_| area.draw(&Rectangle::new([(21, y - 4), (30, y + 5)], colour.filled())))
        .and_then(|_| area.draw(&Text::new(t.as_str(), (50, y - 9), font.clone())))
        .map_err(|e| anyhow::anyhow!("legend: {e}"))?;
    }
    Ok(())
}

/// Prepares `root` for a chart: the font registered, a white background, and `title` on
/// top; returns the area below the title.
fn canvas<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
) -> anyhow::Result<DrawingArea<DB, Shift>> {
    register_font();
    root.fill(&WHITE)
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    root.titled(title, (FONT, 26).into_font().color(&INK))
        .map_err(|e| anyhow::anyhow!("chart title: {e}"))
}

/// Draws the chart of `rows` for `targets` (in legend order) under `title` onto `root`.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[Summary],
    targets: &[String],
    title: &str,
) -> anyhow::Result<()> {
    let root = canvas(root, title)?;
    let mut counts: Vec<usize> = rows.iter().map(|r| r.clients).collect();
    counts.sort_unstable();
    counts.dedup();
    if counts.is_empty() {
        counts.push(1);
    }
    let (plots, side) = root.split_horizontally(root.dim_in_pixel().0 - LEGEND);
    let (top, bottom) = plots.split_vertically(plots.dim_in_pixel().1 / 2);
    let cycles: fn(&Summary) -> f64 = |r| r.ops_per_sec;
    let p99: fn(&Summary) -> f64 = |r| r.p99_ms;
    panel(
        &top,
        rows,
        targets,
        &counts,
        ("cycles/s (median of rounds, log scale)", cycles),
    )?;
    panel(
        &bottom,
        rows,
        targets,
        &counts,
        ("p99 latency, ms (log scale)", p99),
    )?;
    legend(&side, targets)?;
    root.present().map_err(|e| anyhow::anyhow!("chart: {e}"))
}

/// Draws the chart into the PNG file `path`.
pub fn save(path: &Path, rows: &[Summary], targets: &[String], title: &str) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(&root, rows, targets, title).with_context(|| format!("writing {}", path.display()))
}

/// One line of the grants chart: a run's name and its grants per client.
pub type GrantLine = (String, Vec<u64>);

/// Draws the contention workload's chart onto `root`: grants per client in the timed window
/// (linear axes), one coloured line per run in `lines`. Clients marked in `on_leader` get a
/// `*` on the client axis.
pub fn draw_grants<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lines: &[GrantLine],
    on_leader: &[bool],
    title: &str,
) -> anyhow::Result<()> {
    let root = canvas(root, title)?;
    let clients = lines.iter().map(|(_, g)| g.len()).max().unwrap_or(1).max(1);
    let top = lines
        .iter()
        .flat_map(|(_, g)| g.iter().copied())
        .max()
        .unwrap_or(0);
    let (plot, side) = root.split_horizontally(root.dim_in_pixel().0 - LEGEND);
    let mut chart = ChartBuilder::on(&plot)
        .margin(10)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5..clients as f64 - 0.5, 0.0..(top.max(1) as f64 * 1.1))
        .map_err(|e| anyhow::anyhow!("chart: {e}"))?;
    let x_label = |v: &f64| {
        let i = v.round() as usize;
        let star = if on_leader.get(i) == Some(&true) {
            "*"
        } else {
            ""
        };
        format!("{i}{star}")
    };
    chart
        .configure_mesh()
        .bold_line_style(GRID)
        .light_line_style(MINOR)
        .axis_style(INK.stroke_width(2))
        .set_all_tick_mark_size(6)
        .x_labels(clients.min(64))
        .x_desc("client (* = connected to the leader)")
        .y_desc("grants in the timed window")
        .x_label_formatter(&x_label)
        .y_label_formatter(&|v| label(*v))
        .label_style((FONT, 15).into_font().color(&INK))
        .axis_desc_style((FONT, 17).into_font().color(&INK))
        .draw()
        .map_err(|e| anyhow::anyhow!("chart mesh: {e}"))?;
    for (i, (_, grants)) in lines.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let points: Vec<(f64, f64)> = grants
            .iter()
            .enumerate()
            .map(|(c, &g)| (c as f64, g as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(3)))
            .map_err(|e| anyhow::anyhow!("chart line: {e}"))?;
        let squares = points
            .iter()
            .map(|&p| EmptyElement::at(p) + Rectangle::new([(-4, -4), (5, 5)], colour.filled()));
        chart
            .draw_series(squares)
            .map_err(|e| anyhow::anyhow!("chart points: {e}"))?;
    }
    let names: Vec<String> = lines.iter().map(|(n, _)| n.clone()).collect();
    legend(&side, &names)?;
    root.present().map_err(|e| anyhow::anyhow!("chart: {e}"))
}

/// Draws the grants chart into the PNG file `path`.
pub fn save_grants(
    path: &Path,
    lines: &[GrantLine],
    on_leader: &[bool],
    title: &str,
) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, (SIZE.0, SIZE.1 / 2 + 100)).into_drawing_area();
    draw_grants(&root, lines, on_leader, title)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_cover_the_values() {
        assert_eq!(decades(&[150.0, 4200.0]), (2, 4));
        assert_eq!(decades(&[0.17, 92.0]), (-1, 2));
        assert_eq!(decades(&[100.0]), (2, 3), "at least one decade");
        assert_eq!(decades(&[0.0, -1.0]), (0, 1), "no positive values");
        assert_eq!(decades(&[0.0, 20.0]), (1, 2), "zeros are ignored");
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(label(0.0), "0");
        assert_eq!(label(950.0), "950");
        assert_eq!(label(1500.0), "1.5K");
        assert_eq!(label(20_000.0), "20K");
        assert_eq!(label(0.1), "0.1");
        assert_eq!(label(0.01), "0.01");
    }

    #[test]
    fn chart_draws_each_target_in_its_colour() {
        let row = |t: &str, clients, ops, p99_ms| Summary {
            target: t.into(),
            clients,
            rounds: 1,
            ops_per_sec: ops,
            p50_ms: 1.0,
            p99_ms,
            ..Summary::default()
        };
        let rows = vec![
            row("a", 1, 100.0, 1.0),
            row("b", 1, 50.0, 10.0),
            row("a", 16, 1000.0, 2.0),
            row("b", 16, 500.0, 20.0),
        ];
        let (w, h) = SIZE;
        let mut buf = vec![0u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, SIZE).into_drawing_area();
            draw(&root, &rows, &["a".into(), "b".into()], "test").unwrap();
        }
        // Pixels of `colour` in the rows from `y0` to `y1`, left of the legend.
        let count = |colour: RGBColor, (y0, y1): (u32, u32)| {
            (y0..y1)
                .flat_map(|y| (0..w - LEGEND).map(move |x| ((y * w + x) * 3) as usize))
                .filter(|&i| buf[i..i + 3] == [colour.0, colour.1, colour.2])
                .count()
        };
        // A line and points in each panel for each target.
        for panel in [(0, h / 2), (h / 2, h)] {
            assert!(count(PALETTE[0], panel) > 300, "{panel:?}");
            assert!(count(PALETTE[1], panel) > 300, "{panel:?}");
            assert_eq!(count(PALETTE[2], panel), 0, "{panel:?}");
        }
        // Some text was drawn (title, labels): dark pixels outside the lines.
        assert!(count(INK, (0, h)) > 1000);
    }

    #[test]
    fn grants_chart_draws_each_run_in_its_colour() {
        let lines = vec![
            ("poll".to_string(), vec![10, 40, 25, 5]),
            ("queue".to_string(), vec![20, 21, 19, 20]),
        ];
        let (w, h) = (SIZE.0, SIZE.1 / 2);
        let mut buf = vec![0u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            draw_grants(&root, &lines, &[true, false, false, true], "test").unwrap();
        }
        let count = |colour: RGBColor| {
            buf.chunks(3)
                .filter(|p| *p == [colour.0, colour.1, colour.2])
                .count()
        };
        assert!(count(PALETTE[0]) > 300 && count(PALETTE[1]) > 300);
        assert_eq!(count(PALETTE[2]), 0);
    }
}
