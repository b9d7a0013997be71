//! The geohash arithmetic behind the GEO commands, as Redis 7.0 computes it (`geohash.c`,
//! `geohash_helper.c`): a point is a 52-bit interleaved hash (26 bits of latitude in the
//! even bits, 26 of longitude in the odd bits) stored as a sorted-set score, distances are
//! haversine on Redis's sphere, and a search visits the score ranges of a cell and its eight
//! neighbours at a step chosen from the search's size. Every float operation follows Redis's
//! order, so scores, cells and distances come out bit-identical on the same platform.

/// Redis's earth radius, in metres.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
/// The highest step (26 bits per coordinate).
pub const STEP_MAX: u8 = 26;
/// Longitude limits.
pub const LONG_MIN: f64 = -180.0;
/// Longitude limits.
pub const LONG_MAX: f64 = 180.0;
/// Latitude limits (Web Mercator's).
pub const LAT_MIN: f64 = -85.05112878;
/// Latitude limits (Web Mercator's).
pub const LAT_MAX: f64 = 85.05112878;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

/// A cell: `step` bits per coordinate, interleaved. The zero cell (bits and step 0) is
/// Redis's "skip this neighbour".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cell {
    /// The interleaved bits.
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

/// A cell's extent, in degrees: `[min, max]` of longitude and of latitude.
#[derive(Clone, Copy, Debug)]
pub struct Area {
    /// Longitude min, max.
    pub lon: (f64, f64),
    /// Latitude min, max.
    pub lat: (f64, f64),
}

/// Spreads the low 32 bits of `v` to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `v` into 32 bits.
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    (x | (x >> 16)) as u32
}

/// Encodes a point in the given ranges at `step`, or None outside Redis's limits.
pub fn encode(
    lon_range: (f64, f64),
    lat_range: (f64, f64),
    lon: f64,
    lat: f64,
    step: u8,
) -> Option<Cell> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * scale;
    let lon_off = (lon - lon_range.0) / (lon_range.1 - lon_range.0) * scale;
    // C converts the offsets to uint32_t (truncating) before interleaving.
    let bits = spread(lat_off as u32) | (spread(lon_off as u32) << 1);
    Some(Cell { bits, step })
}

/// Encodes a point in Redis's ranges at `step`.
pub fn encode_wgs84(lon: f64, lat: f64, step: u8) -> Option<Cell> {
    encode((LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX), lon, lat, step)
}

/// The 52-bit score of a point (GEOADD), or None outside the limits.
pub fn score_of(lon: f64, lat: f64) -> Option<f64> {
    encode_wgs84(lon, lat, STEP_MAX).map(|c| align52(c) as f64)
}

/// A cell's bits shifted to a 52-bit score.
pub fn align52(c: Cell) -> u64 {
    c.bits << (52 - 2 * c.step as u32)
}

/// A cell's extent in Redis's ranges.
pub fn decode(c: Cell) -> Area {
    let (lat_min, lat_max) = (LAT_MIN, LAT_MAX);
    let (lon_min, lon_max) = (LONG_MIN, LONG_MAX);
    let lat_scale = lat_max - lat_min;
    let lon_scale = lon_max - lon_min;
    let (ilat, ilon) = (squash(c.bits), squash(c.bits >> 1));
    // C adds 1 in uint32_t arithmetic (it wraps for the scores of no real point).
    let (ilat1, ilon1) = (ilat.wrapping_add(1) as f64, ilon.wrapping_add(1) as f64);
    let (ilat, ilon) = (ilat as f64, ilon as f64);
    let div = (1u64 << c.step) as f64;
    Area {
        lat: (
            lat_min + (ilat / div) * lat_scale,
            lat_min + (ilat1 / div) * lat_scale,
        ),
        lon: (
            lon_min + (ilon / div) * lon_scale,
            lon_min + (ilon1 / div) * lon_scale,
        ),
    }
}

/// The bits of a score as C's `(uint64_t)score` gives them on x86-64 (a score not written
/// by GEOADD decodes to some clamped point, as in Redis).
fn score_bits(score: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let trunc = |x: f64| -> u64 {
        // cvttsd2si: out of range (or NaN) gives the "integer indefinite" value.
        if x.is_nan() || !(-TWO63..TWO63).contains(&x) {
            1 << 63
        } else {
            x as i64 as u64
        }
    };
    if score >= TWO63 {
        trunc(score - TWO63) ^ (1 << 63)
    } else {
        trunc(score)
    }
}

/// The point a score stands for: the centre of its step-26 cell, clamped to the limits.
pub fn point_of(score: f64) -> (f64, f64) {
    let a = decode(Cell {
        bits: score_bits(score),
        step: STEP_MAX,
    });
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

fn deg_rad(d: f64) -> f64 {
    d * D_R
}

fn rad_deg(r: f64) -> f64 {
    r / D_R
}

/// Haversine distance in metres (`geohashGetDistance`).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lat1r, lon1r) = (deg_rad(lat1), deg_rad(lon1));
    let (lat2r, lon2r) = (deg_rad(lat2), deg_rad(lon2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let v = ((lon2r - lon1r) / 2.0).sin();
    2.0 * EARTH_RADIUS_M * (u * u + lat1r.cos() * lat2r.cos() * v * v).sqrt().asin()
}

/// A search area: a circle of `radius`, or a `width` x `height` box, in the unit of
/// `conversion` (metres per unit), centred on `lon`, `lat`.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Centre longitude.
    pub lon: f64,
    /// Centre latitude.
    pub lat: f64,
    /// Metres per unit.
    pub conversion: f64,
    /// The circle's radius, or None for a box.
    pub radius: Option<f64>,
    /// The box's width and height.
    pub box_wh: (f64, f64),
}

impl Shape {
    /// The distance in metres from the centre to the point, if the point is inside.
    pub fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.radius {
            Some(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r * self.conversion).then_some(d)
            }
            None => {
                let (w, h) = (
                    self.box_wh.0 * self.conversion,
                    self.box_wh.1 * self.conversion,
                );
                let lon_d = distance(lon, lat, self.lon, lat);
                let lat_d = distance(lon, lat, lon, self.lat);
                if lon_d > w / 2.0 || lat_d > h / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// `geohashBoundingBox`: min lon, min lat, max lon, max lat.
    fn bounds(&self) -> [f64; 4] {
        let (h, w) = match self.radius {
            Some(r) => (r * self.conversion, r * self.conversion),
            None => (
                self.conversion * (self.box_wh.1 / 2.0),
                self.conversion * (self.box_wh.0 / 2.0),
            ),
        };
        let lat_delta = rad_deg(h / EARTH_RADIUS_M);
        let top = rad_deg(w / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let bottom = rad_deg(w / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let d = if self.lat < 0.0 { bottom } else { top };
        [
            self.lon - d,
            self.lat - lat_delta,
            self.lon + d,
            self.lat + lat_delta,
        ]
    }

    /// The radius used to pick the step: the circle's, or the box's half diagonal; metres.
    fn radius_m(&self) -> f64 {
        let r = match self.radius {
            Some(r) => r,
            None => {
                let (w, h) = (self.box_wh.0 / 2.0, self.box_wh.1 / 2.0);
                (w * w + h * h).sqrt()
            }
        };
        r * self.conversion
    }
}

/// `geohashEstimateStepsByRadius`.
fn steps_for(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return STEP_MAX;
    }
    let (mut range, mut step) = (range_m, 1i32);
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP_MAX as i32) as u8
}

/// Moves a cell one step along an axis (`geohash_move_x`/`_y`): `axis` masks the moving
/// coordinate's bits (odd bits: longitude, even bits: latitude). The other coordinate's bits
/// are filled with ones so that a carry or borrow crosses them.
fn move_on(c: Cell, d: i8, axis: u64) -> Cell {
    if d == 0 {
        return c;
    }
    let shift = 64 - 2 * c.step as u32;
    let fixed = c.bits & !axis;
    let zz = !axis >> shift;
    let mut m = c.bits & axis;
    m = if d > 0 {
        m.wrapping_add(zz + 1)
    } else {
        (m | zz).wrapping_sub(zz + 1)
    };
    m &= axis >> shift;
    Cell {
        bits: m | fixed,
        ..c
    }
}

fn move_x(c: Cell, d: i8) -> Cell {
    move_on(c, d, 0xaaaa_aaaa_aaaa_aaaa)
}

fn move_y(c: Cell, d: i8) -> Cell {
    move_on(c, d, 0x5555_5555_5555_5555)
}

/// The cells a search visits, in Redis's order (the centre cell, then N, S, E, W, NE, NW,
/// SE, SW), zero cells for neighbours it skips.
pub fn search_cells(shape: &Shape) -> [Cell; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = shape.bounds();
    let mut steps = steps_for(shape.radius_m(), shape.lat);
    let around = |steps: u8| {
        let c = encode_wgs84(shape.lon, shape.lat, steps).unwrap_or_default();
        let n = |dx: i8, dy: i8| move_y(move_x(c, dx), dy);
        // Order: centre, north, south, east, west, NE, NW, SE, SW.
        [
            c,
            n(0, 1),
            n(0, -1),
            n(1, 0),
            n(-1, 0),
            n(1, 1),
            n(-1, 1),
            n(1, -1),
            n(-1, -1),
        ]
    };
    let mut cells = around(steps);
    let too_coarse = decode(cells[1]).lat.1 < max_lat
        || decode(cells[2]).lat.0 > min_lat
        || decode(cells[3]).lon.1 < max_lon
        || decode(cells[4]).lon.0 > min_lon;
    if steps > 1 && too_coarse {
        steps -= 1;
        cells = around(steps);
    }
    if steps >= 2 {
        let area = decode(cells[0]);
        let mut drop = |idx: &[usize]| idx.iter().for_each(|&i| cells[i] = Cell::default());
        if area.lat.0 < min_lat {
            drop(&[2, 8, 7]);
        }
        if area.lat.1 > max_lat {
            drop(&[1, 5, 6]);
        }
        if area.lon.0 < min_lon {
            drop(&[4, 8, 6]);
        }
        if area.lon.1 > max_lon {
            drop(&[3, 7, 5]);
        }
    }
    cells
}

/// The score range `[min, max)` that holds a cell's points.
pub fn score_range(c: Cell) -> (f64, f64) {
    let min = align52(c);
    let max = align52(Cell {
        bits: c.bits + 1,
        step: c.step,
    });
    (min as f64, max as f64)
}

/// The standard 11-character geohash of a score (GEOHASH): the point re-encoded in the
/// -90..90 latitude range.
pub fn geohash_string(score: f64) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = point_of(score);
    let bits = encode((-180.0, 180.0), (-90.0, 90.0), lon, lat, STEP_MAX)
        .unwrap_or_default()
        .bits;
    (0..11)
        .map(|i| {
            let idx = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

/// A coordinate as Redis replies it (`addReplyHumanLongDouble`): `%.17Lf` with trailing
/// zeros and a trailing dot removed, `-0` as `0`.
pub fn human(v: f64) -> String {
    let s = format!("{v:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_as_redis_scores_and_prints_it() {
        // Redis: GEOADD Sicily 13.361389 38.115556 Palermo -> score 3479099956230698.
        let s = score_of(13.361389, 38.115556).unwrap();
        assert_eq!(s, 3479099956230698.0);
        let (lon, lat) = point_of(s);
        assert_eq!(human(lon), "13.36138933897018433");
        assert_eq!(human(lat), "38.11555639549629859");
        assert_eq!(geohash_string(s), "sqc8b49rny0");
        let catania = score_of(15.087269, 37.502669).unwrap();
        let (lon2, lat2) = point_of(catania);
        assert_eq!(
            format!("{:.4}", distance(lon, lat, lon2, lat2)),
            "166274.1516"
        );
    }

    #[test]
    fn out_of_range_points_have_no_score() {
        assert!(score_of(180.0001, 0.0).is_none());
        assert!(score_of(0.0, 85.06).is_none());
        assert!(score_of(-180.0, -85.05112878).is_some());
    }
}
