//! The timeline plot of a run, as a PNG drawn with `plotters`. Throughput is on top (completed
//! operations per second, per second or per few seconds on long runs; ok in green, refused in
//! orange, unknown in red, stacked). The latency of every operation is below (log scale,
//! 0.1 ms to 10 s). Fault windows are shaded across both (one colour per fault kind; client
//! pauses as a thin band at the very top). The legend on the right names the outcomes and the
//! fault kinds of the run.

use std::collections::BTreeMap;
use std::path::Path;

use palisade_bench::chart::{register_font, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::history::{Op, Outcome};
use super::nemesis::{Applied, Kind};

const SIZE: (u32, u32) = (1400, 700);
/// Width of the legend strip on the right.
const LEGEND: u32 = 200;
const INK: RGBColor = RGBColor(30, 30, 30);
/// Latency axis, in ms: 0.1 ms to 10 s.
const LATENCY_MS: (f64, f64) = (0.1, 10_000.0);

fn fault_colour(k: Kind) -> RGBColor {
    let [r, g, b] = match k {
        Kind::Kill => [255, 214, 214],
        Kind::PauseNode => [255, 236, 200],
        Kind::Partition => [214, 226, 255],
        Kind::IsolateLeader => [200, 240, 255],
        Kind::Bridge => [232, 214, 255],
        Kind::Delay => [236, 236, 236],
        Kind::Replace => [214, 255, 224],
        Kind::SnapshotCrash => [255, 200, 240],
        Kind::PauseClient => [120, 120, 120],
    };
    RGBColor(r, g, b)
}

fn fault_name(k: Kind) -> &'static str {
    match k {
        Kind::Kill => "kill -9 a node",
        Kind::PauseNode => "pause a node",
        Kind::Partition => "partition",
        Kind::IsolateLeader => "isolate the leader",
        Kind::Bridge => "bridge",
        Kind::Delay => "peer delay",
        Kind::Replace => "replace a member",
        Kind::SnapshotCrash => "crash in snapshot",
        Kind::PauseClient => "pause a client (band)",
    }
}

/// The outcomes in stacking order (as [`slot`] numbers them), with their bar and dot colours.
const OUTCOMES: [(&str, RGBColor, RGBColor); 3] = [
    ("ok", RGBColor(40, 160, 60), RGBColor(30, 90, 200)),
    ("refused", RGBColor(240, 150, 30), RGBColor(240, 150, 30)),
    ("unknown", RGBColor(220, 40, 40), RGBColor(220, 40, 40)),
];

fn slot(o: &Outcome) -> usize {
    match o {
        Outcome::Ok => 0,
        Outcome::Fail => 1,
        Outcome::Unknown => 2,
    }
}

/// Draws the timeline of `ops` and `faults` (times in µs) into `path`.
pub fn timeline(path: &Path, ops: &[Op], faults: &[Applied], end_us: u64) {
    register_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(&root, ops, faults, end_us).expect("draw the timeline");
    root.present().expect("write timeline png");
}

type Result = std::result::Result<(), Box<dyn std::error::Error>>;

/// What a panel draws: the operations and faults of the run, and its length in seconds.
struct Run<'a> {
    ops: &'a [Op],
    faults: &'a [Applied],
    end_s: f64,
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    ops: &[Op],
    faults: &[Applied],
    end_us: u64,
) -> Result
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let run = Run {
        ops,
        faults,
        end_s: end_us.max(1) as f64 / 1e6,
    };
    let (plots, side) = root.split_horizontally(SIZE.0 - LEGEND);
    let (top, bottom) = plots.split_vertically(SIZE.1 * 2 / 5);
    throughput(&top, &run)?;
    latency(&bottom, &run)?;
    legend(&side, faults)
}

/// Shades the window of each fault (but client pauses) over the whole height, `lo..hi`, of a
/// panel.
fn shade<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    faults: &[Applied],
    (lo, hi): (f64, f64),
) -> Result
where
    DB::ErrorType: 'static,
{
    let windows = faults.iter().filter(|f| f.kind != Kind::PauseClient);
    chart.draw_series(windows.map(|f| {
        let (x0, x1) = (f.start_us as f64 / 1e6, f.end_us as f64 / 1e6);
        Rectangle::new([(x0, lo), (x1, hi)], fault_colour(f.kind).filled())
    }))?;
    Ok(())
}

fn throughput<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, run: &Run) -> Result
where
    DB::ErrorType: 'static,
{
    let Run { ops, faults, end_s } = *run;
    // Whole seconds per bar, so that each bar is at least 4 pixels wide.
    let bucket_s = ((end_s as u64) * 4 / u64::from(SIZE.0 - LEGEND)).max(1);
    let mut per_bucket: BTreeMap<u64, [usize; 3]> = BTreeMap::new();
    for op in ops {
        per_bucket.entry(op.ret / 1_000_000 / bucket_s).or_default()[slot(&op.outcome)] += 1;
    }
    let rate = |n: usize| n as f64 / bucket_s as f64;
    let max = per_bucket
        .values()
        .map(|v| rate(v.iter().sum()))
        .fold(1.0, f64::max);
    let y_max = max * 1.1;
    let y_desc = match bucket_s {
        1 => "completed ops/s".to_string(),
        n => format!("completed ops/s (per {n} s)"),
    };
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_bottom(0)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end_s, 0.0..y_max)?;
    shade(&mut chart, faults, (0.0, y_max))?;
    let band = y_max * 0.96;
    chart.draw_series(
        faults
            .iter()
            .filter(|f| f.kind == Kind::PauseClient)
            .map(|f| {
                let (x0, x1) = (f.start_us as f64 / 1e6, f.end_us as f64 / 1e6);
                Rectangle::new([(x0, band), (x1, y_max)], fault_colour(f.kind).filled())
            }),
    )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(220, 220, 220))
        .axis_style(INK.stroke_width(1))
        .set_all_tick_mark_size(5)
        .y_desc(y_desc)
        .x_labels(0)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 14).into_font().color(&INK))
        .axis_desc_style((FONT, 16).into_font().color(&INK))
        .draw()?;
    for (b, counts) in per_bucket {
        let (t0, t1) = (
            (b * bucket_s) as f64,
            (((b + 1) * bucket_s) as f64).min(end_s),
        );
        let mut y = 0.0;
        for (i, n) in counts.iter().enumerate() {
            let dy = rate(*n);
            let mut bar = Rectangle::new([(t0, y), (t1, y + dy)], OUTCOMES[i].1.filled());
            bar.set_margin(0, 0, 0, 1);
            chart.draw_series([bar])?;
            y += dy;
        }
    }
    Ok(())
}

fn latency<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, run: &Run) -> Result
where
    DB::ErrorType: 'static,
{
    let Run { ops, faults, end_s } = *run;
    let (lo, hi) = LATENCY_MS;
    let decades: Vec<f64> = (-1..=4).map(|d| 10f64.powi(d)).collect();
    let y = (lo..hi).log_scale().with_key_points(decades);
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..end_s, y)?;
    shade(&mut chart, faults, (lo, hi))?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(210, 210, 210))
        .axis_style(INK.stroke_width(1))
        .set_all_tick_mark_size(5)
        .x_desc("time since the run began, s")
        .y_desc("latency, ms (log scale)")
        .x_labels(15)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| match *v {
            v if v < 1.0 => format!("{v}"),
            v => format!("{v:.0}"),
        })
        .label_style((FONT, 14).into_font().color(&INK))
        .axis_desc_style((FONT, 16).into_font().color(&INK))
        .draw()?;
    chart.draw_series(ops.iter().map(|op| {
        let ms = (op.ret.saturating_sub(op.inv) as f64 / 1000.0).clamp(lo, hi);
        let colour = OUTCOMES[slot(&op.outcome)].2;
        EmptyElement::at((op.ret as f64 / 1e6, ms))
            + Rectangle::new([(-1, -1), (1, 1)], colour.filled())
    }))?;
    Ok(())
}

/// The legend: the outcomes (bar colour, then dot colour), then the fault kinds of this run.
fn legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, faults: &[Applied]) -> Result
where
    DB::ErrorType: 'static,
{
    let font = (FONT, 15).into_font().color(&INK);
    let mut y = 20;
    area.draw(&Text::new("outcome (bar, dot)", (10, y), font.clone()))?;
    for (name, bar, dot) in OUTCOMES {
        y += 24;
        area.draw(&Rectangle::new([(10, y), (26, y + 14)], bar.filled()))?;
        area.draw(&Rectangle::new([(32, y + 4), (38, y + 10)], dot.filled()))?;
        area.draw(&Text::new(name, (46, y), font.clone()))?;
    }
    let mut kinds: Vec<Kind> = faults.iter().map(|f| f.kind).collect();
    kinds.sort_by_key(|k| fault_name(*k));
    kinds.dedup();
    y += 44;
    area.draw(&Text::new("faults (shaded)", (10, y), font.clone()))?;
    for k in kinds {
        y += 24;
        area.draw(&Rectangle::new(
            [(10, y), (38, y + 14)],
            fault_colour(k).filled(),
        ))?;
        area.draw(&Text::new(fault_name(k), (46, y), font.clone()))?;
    }
    Ok(())
}
