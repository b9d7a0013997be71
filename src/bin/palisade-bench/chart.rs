//! The client-count chart: cycles/s (top panel) and p99 latency (bottom panel) against the
//! number of clients, one coloured line per target, drawn with `palisade::plot`. All axes are
//! logarithmic: the targets differ by orders of magnitude (fsync per write or not).

use palisade::plot::{Canvas, Rgb};

use crate::report::Summary;

const W: usize = 1000;
const H: usize = 800;
const LEFT: usize = 90;
const RIGHT: usize = 760; // the legend is to the right of this
const TOP: (usize, usize) = (70, 370); // throughput panel, top and bottom
const BOTTOM: (usize, usize) = (450, 750); // latency panel
const INK: Rgb = [30, 30, 30];
const GRID: Rgb = [200, 200, 200];
const MINOR: Rgb = [236, 236, 236];

/// Line colours, one per target in order.
pub const PALETTE: [Rgb; 6] = [
    [31, 119, 180],
    [44, 160, 44],
    [214, 39, 40],
    [255, 127, 14],
    [148, 103, 189],
    [140, 86, 75],
];

/// Where client count `n` goes on the x axis, for counts from `lo` to `hi` (log scale; one
/// count sits in the middle).
pub fn x_of(n: usize, lo: usize, hi: usize) -> usize {
    let span = (RIGHT - LEFT - 60) as f64;
    if hi <= lo {
        return (LEFT + RIGHT) / 2;
    }
    let f = (n as f64 / lo as f64).ln() / (hi as f64 / lo as f64).ln();
    LEFT + 30 + (f.clamp(0.0, 1.0) * span).round() as usize
}

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

/// Draws the grid and labels of a log-scale y axis for `values` in the panel spanning
/// `top..bottom`, and returns the function that maps a value to its row.
fn log_axis(
    c: &mut Canvas,
    (top, bottom): (usize, usize),
    values: &[f64],
) -> impl Fn(f64) -> usize {
    let (lo, hi) = decades(values);
    let y_of = move |v: f64| {
        let f = (v.max(1e-9).log10() - lo as f64) / (hi - lo) as f64;
        bottom - (f.clamp(0.0, 1.0) * (bottom - top) as f64) as usize
    };
    for d in lo..=hi {
        let v = 10f64.powi(d);
        if d < hi {
            for m in [2.0, 5.0] {
                let y = y_of(m * v);
                c.rect(LEFT, y, RIGHT, y + 1, MINOR);
            }
        }
        let y = y_of(v);
        c.rect(LEFT, y, RIGHT, y + 1, GRID);
        let s = label(v);
        c.text(LEFT - 8 - Canvas::text_width(&s, 2), y - 5, &s, 2, INK);
    }
    y_of
}

/// Draws the chart of `rows` for `targets` (in legend order) under `title`.
pub fn clients_chart(rows: &[Summary], targets: &[String], title: &str) -> Canvas {
    let mut c = Canvas::new(W, H, [255, 255, 255]);
    c.text(LEFT, 16, title, 3, INK);
    let mut counts: Vec<usize> = rows.iter().map(|r| r.clients).collect();
    counts.sort_unstable();
    counts.dedup();
    let (lo, hi) = (*counts.first().unwrap_or(&1), *counts.last().unwrap_or(&1));
    let series = |t: &String| -> Vec<&Summary> {
        let mut v: Vec<&Summary> = rows.iter().filter(|r| &r.target == t).collect();
        v.sort_by_key(|r| r.clients);
        v
    };

    let ops: Vec<f64> = rows.iter().map(|r| r.ops_per_sec).collect();
    let y_ops = log_axis(&mut c, TOP, &ops);
    c.text(
        LEFT,
        TOP.0 - 22,
        "CYCLES/S (MEDIAN OF ROUNDS, LOG SCALE)",
        2,
        INK,
    );
    let p99s: Vec<f64> = rows.iter().map(|r| r.p99_ms).collect();
    let y_p99 = log_axis(&mut c, BOTTOM, &p99s);
    c.text(LEFT, BOTTOM.0 - 22, "P99 LATENCY MS (LOG SCALE)", 2, INK);

    // Axes and client-count ticks under each panel.
    for (top, bottom) in [TOP, BOTTOM] {
        c.rect(LEFT, top, LEFT + 2, bottom + 1, INK);
        c.rect(LEFT, bottom, RIGHT, bottom + 2, INK);
        for &n in &counts {
            let x = x_of(n, lo, hi);
            c.rect(x, bottom, x + 1, bottom + 6, INK);
            let s = n.to_string();
            c.text(x - Canvas::text_width(&s, 2) / 2, bottom + 10, &s, 2, INK);
        }
    }
    c.text(
        RIGHT - Canvas::text_width("CLIENTS", 2),
        BOTTOM.1 + 30,
        "CLIENTS",
        2,
        INK,
    );

    // One line per target, a square at each point, and the legend.
    for (i, t) in targets.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let s = series(t);
        let x = |r: &Summary| x_of(r.clients, lo, hi) as i64;
        let tops: Vec<(i64, i64)> = s
            .iter()
            .map(|r| (x(r), y_ops(r.ops_per_sec) as i64))
            .collect();
        let bottoms: Vec<(i64, i64)> = s.iter().map(|r| (x(r), y_p99(r.p99_ms) as i64)).collect();
        for pts in [tops, bottoms] {
            for w in pts.windows(2) {
                c.line(w[0], w[1], 3, colour);
            }
            for &(x, y) in &pts {
                let (x, y) = (x as usize, y as usize);
                c.rect(
                    x.saturating_sub(4),
                    y.saturating_sub(4),
                    x + 5,
                    y + 5,
                    colour,
                );
            }
        }
        let ly = TOP.0 + 10 + i * 30;
        c.rect(RIGHT + 20, ly, RIGHT + 44, ly + 10, colour);
        c.text(RIGHT + 52, ly, t, 2, INK);
    }
    c
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
    fn client_counts_are_spaced_on_a_log_scale() {
        let xs: Vec<usize> = [1, 4, 16, 64].iter().map(|&n| x_of(n, 1, 64)).collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]));
        // 1 -> 4, 4 -> 16 and 16 -> 64 are equal steps (within rounding).
        let d: Vec<i64> = xs.windows(2).map(|w| w[1] as i64 - w[0] as i64).collect();
        assert!(d.iter().all(|s| (s - d[0]).abs() <= 1), "{d:?}");
        assert_eq!(x_of(16, 16, 16), (LEFT + RIGHT) / 2);
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
            ratio: None,
            p99_ratio: None,
            errors: 0,
            busy: 0,
            ..Summary::default()
        };
        let rows = vec![
            row("a", 1, 100.0, 1.0),
            row("b", 1, 50.0, 10.0),
            row("a", 16, 1000.0, 2.0),
            row("b", 16, 500.0, 20.0),
        ];
        let c = clients_chart(&rows, &["a".into(), "b".into()], "TEST");
        let count = |colour: Rgb| {
            (0..H)
                .flat_map(|y| (0..W).map(move |x| (x, y)))
                .filter(|&(x, y)| c.get(x, y) == Some(colour))
                .count()
        };
        // Two lines (top and bottom panels) plus points and a legend swatch for each.
        assert!(count(PALETTE[0]) > 500);
        assert!(count(PALETTE[1]) > 500);
        assert_eq!(count(PALETTE[2]), 0);
        // The highest throughput point is at the top of the top panel, at 16 clients.
        assert_eq!(
            c.get(x_of(16, 1, 16), TOP.1 - (TOP.1 - TOP.0)),
            Some(PALETTE[0])
        );
        assert_eq!(&c.png()[..8], &palisade::plot::PNG_SIGNATURE);
    }
}
