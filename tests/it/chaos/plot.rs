//! The timeline plot of a run, as a PNG (drawn with `palisade::plot`, no crate). Throughput is on top
//! (per second, or per few seconds on long runs; ok in green, refused in orange, unknown in
//! red, stacked). The latency of every operation is below (log scale, 0.1 ms to 10 s, grid
//! lines at each power of ten). Fault windows are shaded across both (one colour per fault
//! kind; client pauses as a thin band at the very top). Vertical grid lines mark every 10 s
//! (every minute on runs over 5 minutes, every 10 minutes over an hour).

use std::collections::BTreeMap;
use std::path::Path;

use palisade::plot::Canvas;

use super::history::{Op, Outcome};
use super::nemesis::{Applied, Kind};

const W: usize = 1200;
const H: usize = 600;
const MID: usize = 260; // bottom of the throughput panel
const BAND: usize = 12; // client-pause band at the top

fn fault_colour(k: Kind) -> [u8; 3] {
    match k {
        Kind::Kill => [255, 214, 214],
        Kind::PauseNode => [255, 236, 200],
        Kind::Partition => [214, 226, 255],
        Kind::IsolateLeader => [200, 240, 255],
        Kind::Bridge => [232, 214, 255],
        Kind::Delay => [236, 236, 236],
        Kind::Replace => [214, 255, 224],
        Kind::SnapshotCrash => [255, 200, 240],
        Kind::PauseClient => [120, 120, 120],
    }
}

/// Draws the timeline of `ops` and `faults` (times in µs) into `path`.
pub fn timeline(path: &Path, ops: &[Op], faults: &[Applied], end_us: u64) {
    let mut c = Canvas::new(W, H, [255, 255, 255]);
    let end = end_us.max(1);
    let x_of = |t: u64| ((t.min(end) as f64 / end as f64) * (W - 1) as f64) as usize;
    for f in faults {
        let (x0, x1) = (x_of(f.start_us), x_of(f.end_us).max(x_of(f.start_us) + 1));
        if f.kind == Kind::PauseClient {
            c.rect(x0, 0, x1, BAND, fault_colour(f.kind));
        } else {
            c.rect(x0, BAND, x1, H, fault_colour(f.kind));
        }
    }
    let end_s = end / 1_000_000;
    let grid_s = match end_s {
        0..=300 => 10,
        301..=3600 => 60,
        _ => 600,
    };
    for s in (0..=end_s).step_by(grid_s) {
        let x = x_of(s * 1_000_000);
        c.rect(x, BAND, x + 1, H, [200, 200, 200]);
    }
    c.rect(0, MID, W, MID + 2, [0, 0, 0]);
    throughput(&mut c, ops, end, &x_of);
    latency(&mut c, ops, &x_of);
    c.save(path).expect("write timeline png");
}

fn throughput(c: &mut Canvas, ops: &[Op], end: u64, x_of: &dyn Fn(u64) -> usize) {
    // Whole seconds per bar, so that each bar is at least 4 pixels wide.
    let bucket_s = (end / 1_000_000 * 4 / W as u64).max(1);
    let mut per_s: BTreeMap<u64, [usize; 3]> = BTreeMap::new();
    for op in ops {
        let slot = match op.outcome {
            Outcome::Ok => 0,
            Outcome::Fail => 1,
            Outcome::Unknown => 2,
        };
        per_s.entry(op.ret / 1_000_000 / bucket_s).or_default()[slot] += 1;
    }
    let max = per_s
        .values()
        .map(|v| v.iter().sum::<usize>())
        .max()
        .unwrap_or(1)
        .max(1);
    let h = (MID - BAND - 4) as f64;
    let colours = [[40, 160, 60], [240, 150, 30], [220, 40, 40]];
    for (b, counts) in per_s {
        let (t0, t1) = (b * bucket_s * 1_000_000, (b + 1) * bucket_s * 1_000_000);
        let (x0, x1) = (x_of(t0), x_of(t1.min(end)));
        let mut y = MID;
        for (i, n) in counts.iter().enumerate() {
            let dy = (*n as f64 / max as f64 * h) as usize;
            c.rect(x0 + 1, y - dy, x1.max(x0 + 2) - 1, y, colours[i]);
            y -= dy;
        }
    }
}

fn latency(c: &mut Canvas, ops: &[Op], x_of: &dyn Fn(u64) -> usize) {
    let (top, bottom) = (MID + 10, H - 10);
    // log10 of latency in ms: -1 (0.1 ms) .. 4 (10 s)
    let y_of = |ms: f64| {
        let l = ms.max(0.1).log10().min(4.0) + 1.0;
        bottom - (l / 5.0 * (bottom - top) as f64) as usize
    };
    for d in -1..=4 {
        let y = y_of(10f64.powi(d));
        c.rect(0, y, W, y + 1, [210, 210, 210]);
    }
    for op in ops {
        let ms = op.ret.saturating_sub(op.inv) as f64 / 1000.0;
        let colour = match op.outcome {
            Outcome::Ok => [30, 90, 200],
            Outcome::Fail => [240, 150, 30],
            Outcome::Unknown => [220, 40, 40],
        };
        let (x, y) = (x_of(op.ret), y_of(ms));
        c.rect(
            x.saturating_sub(1),
            y.saturating_sub(1),
            x + 1,
            y + 1,
            colour,
        );
    }
}
