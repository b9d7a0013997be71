//! Plots as PNG files, written without any crate: an RGB canvas with a few drawing primitives
//! (filled rectangles, thick lines, a 3x5 pixel font) and a PNG encoder. The chaos suite draws
//! its timelines with it (tests/it/chaos/plot.rs), and `palisade-bench` its client-count charts.
//!
//! The encoder compresses only runs of a repeated pixel (deflate with the fixed Huffman code,
//! every match at distance 3). Charts are mostly runs of background, grid and bars, so a
//! 1000x800 chart takes tens of kilobytes instead of 2.4 MB.

use std::path::Path;

/// An RGB colour.
pub type Rgb = [u8; 3];

/// A `w` x `h` image, RGB, rows top to bottom. Drawing outside it is clipped.
pub struct Canvas {
    /// Width in pixels.
    pub w: usize,
    /// Height in pixels.
    pub h: usize,
    px: Vec<u8>,
}

impl Canvas {
    /// A canvas filled with `background`.
    pub fn new(w: usize, h: usize, background: Rgb) -> Canvas {
        Canvas {
            w,
            h,
            px: background.repeat(w * h),
        }
    }

    /// The colour at (x, y), or None outside the canvas.
    pub fn get(&self, x: usize, y: usize) -> Option<Rgb> {
        (x < self.w && y < self.h).then(|| {
            let i = (y * self.w + x) * 3;
            [self.px[i], self.px[i + 1], self.px[i + 2]]
        })
    }

    /// Sets one pixel.
    pub fn set(&mut self, x: usize, y: usize, c: Rgb) {
        if x < self.w && y < self.h {
            let i = (y * self.w + x) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    /// Fills the rectangle [x0, x1) x [y0, y1).
    pub fn rect(&mut self, x0: usize, y0: usize, x1: usize, y1: usize, c: Rgb) {
        for y in y0..y1.min(self.h) {
            for x in x0..x1.min(self.w) {
                self.set(x, y, c);
            }
        }
    }

    /// A straight line from (x0, y0) to (x1, y1), `width` pixels thick (a square pen).
    pub fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), width: usize, c: Rgb) {
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).max(1);
        let half = (width / 2) as i64;
        for i in 0..=steps {
            let x = x0 + (x1 - x0) * i / steps - half;
            let y = y0 + (y1 - y0) * i / steps - half;
            if x + (width as i64) > 0 && y + (width as i64) > 0 {
                let (xs, ys) = (x.max(0) as usize, y.max(0) as usize);
                let (xe, ye) = ((x + width as i64) as usize, (y + width as i64) as usize);
                self.rect(xs, ys, xe, ye, c);
            }
        }
    }

    /// Writes `s` with its top-left corner at (x, y), each font pixel `scale` x `scale`.
    /// Lower case is drawn as upper case; characters without a glyph are drawn as boxes.
    pub fn text(&mut self, x: usize, y: usize, s: &str, scale: usize, c: Rgb) {
        for (i, ch) in s.chars().enumerate() {
            let gx = x + i * 4 * scale;
            for (row, bits) in glyph(ch).iter().enumerate() {
                for col in 0..3 {
                    if bits & (0b100 >> col) != 0 {
                        let (px, py) = (gx + col * scale, y + row * scale);
                        self.rect(px, py, px + scale, py + scale, c);
                    }
                }
            }
        }
    }

    /// The width in pixels of `s` written by [`Canvas::text`] at `scale`.
    pub fn text_width(s: &str, scale: usize) -> usize {
        (s.chars().count() * 4).saturating_sub(1) * scale
    }

    /// The image as a PNG file.
    pub fn png(&self) -> Vec<u8> {
        encode_png(self.w, self.h, &self.px)
    }

    /// Writes the image to `path` as a PNG file.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.png())
    }
}

/// The 3x5 glyph of `ch`: five rows, three bits each, the leftmost pixel in the high bit.
fn glyph(ch: char) -> [u8; 5] {
    match ch.to_ascii_uppercase() {
        ' ' => [0, 0, 0, 0, 0],
        '0' => [0b111, 0b101, 0b101, 0b101, 0b111],
        '1' => [0b010, 0b110, 0b010, 0b010, 0b111],
        '2' => [0b111, 0b001, 0b111, 0b100, 0b111],
        '3' => [0b111, 0b001, 0b111, 0b001, 0b111],
        '4' => [0b101, 0b101, 0b111, 0b001, 0b001],
        '5' => [0b111, 0b100, 0b111, 0b001, 0b111],
        '6' => [0b111, 0b100, 0b111, 0b101, 0b111],
        '7' => [0b111, 0b001, 0b001, 0b010, 0b010],
        '8' => [0b111, 0b101, 0b111, 0b101, 0b111],
        '9' => [0b111, 0b101, 0b111, 0b001, 0b111],
        'A' => [0b010, 0b101, 0b111, 0b101, 0b101],
        'B' => [0b110, 0b101, 0b110, 0b101, 0b110],
        'C' => [0b011, 0b100, 0b100, 0b100, 0b011],
        'D' => [0b110, 0b101, 0b101, 0b101, 0b110],
        'E' => [0b111, 0b100, 0b110, 0b100, 0b111],
        'F' => [0b111, 0b100, 0b110, 0b100, 0b100],
        'G' => [0b011, 0b100, 0b101, 0b101, 0b011],
        'H' => [0b101, 0b101, 0b111, 0b101, 0b101],
        'I' => [0b111, 0b010, 0b010, 0b010, 0b111],
        'J' => [0b001, 0b001, 0b001, 0b101, 0b010],
        'K' => [0b101, 0b101, 0b110, 0b101, 0b101],
        'L' => [0b100, 0b100, 0b100, 0b100, 0b111],
        'M' => [0b101, 0b111, 0b111, 0b101, 0b101],
        'N' => [0b110, 0b101, 0b101, 0b101, 0b101],
        'O' => [0b010, 0b101, 0b101, 0b101, 0b010],
        'P' => [0b110, 0b101, 0b110, 0b100, 0b100],
        'Q' => [0b010, 0b101, 0b101, 0b110, 0b011],
        'R' => [0b110, 0b101, 0b110, 0b101, 0b101],
        'S' => [0b011, 0b100, 0b010, 0b001, 0b110],
        'T' => [0b111, 0b010, 0b010, 0b010, 0b010],
        'U' => [0b101, 0b101, 0b101, 0b101, 0b111],
        'V' => [0b101, 0b101, 0b101, 0b101, 0b010],
        'W' => [0b101, 0b101, 0b111, 0b111, 0b101],
        'X' => [0b101, 0b101, 0b010, 0b101, 0b101],
        'Y' => [0b101, 0b101, 0b010, 0b010, 0b010],
        'Z' => [0b111, 0b001, 0b010, 0b100, 0b111],
        '.' => [0, 0, 0, 0, 0b010],
        ',' => [0, 0, 0, 0b010, 0b100],
        ':' => [0, 0b010, 0, 0b010, 0],
        '-' => [0, 0, 0b111, 0, 0],
        '_' => [0, 0, 0, 0, 0b111],
        '=' => [0, 0b111, 0, 0b111, 0],
        '/' => [0b001, 0b001, 0b010, 0b100, 0b100],
        '(' => [0b001, 0b010, 0b010, 0b010, 0b001],
        ')' => [0b100, 0b010, 0b010, 0b010, 0b100],
        '%' => [0b101, 0b001, 0b010, 0b100, 0b101],
        _ => [0b111, 0b101, 0b101, 0b101, 0b111],
    }
}

/// A truecolour (8-bit RGB) PNG of a `w` x `h` image. `rgb` holds the rows top to bottom,
/// 3 bytes per pixel.
pub fn encode_png(w: usize, h: usize, rgb: &[u8]) -> Vec<u8> {
    assert_eq!(rgb.len(), w * h * 3, "pixel data does not match {w}x{h}");
    let mut raw = Vec::with_capacity(h * (w * 3 + 1));
    for row in rgb.chunks(w * 3) {
        raw.push(0); // filter type: none
        raw.extend_from_slice(row);
    }
    let mut z = vec![0x78, 0x01];
    z.extend_from_slice(&deflate_runs(&raw));
    z.extend_from_slice(&adler32(&raw).to_be_bytes());
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&(w as u32).to_be_bytes());
    ihdr.extend_from_slice(&(h as u32).to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = PNG_SIGNATURE.to_vec();
    for (ty, data) in [(b"IHDR", &ihdr[..]), (b"IDAT", &z[..]), (b"IEND", &[][..])] {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut chunk = ty.to_vec();
        chunk.extend_from_slice(data);
        out.extend_from_slice(&chunk);
        out.extend_from_slice(&crc32(&chunk).to_be_bytes());
    }
    out
}

/// Bits in deflate's order: values least significant bit first, Huffman codes most
/// significant bit first.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u32,
    n: u32,
}

impl Bits {
    fn put(&mut self, v: u32, n: u32) {
        self.acc |= v << self.n;
        self.n += n;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    fn code(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }

    /// A literal/length symbol in the fixed Huffman code (RFC 1951, 3.2.6).
    fn symbol(&mut self, s: u32) {
        match s {
            0..=143 => self.code(0x30 + s, 8),
            144..=255 => self.code(0x190 + s - 144, 9),
            256..=279 => self.code(s - 256, 7),
            _ => self.code(0xC0 + s - 280, 8),
        }
    }
}

/// Deflate's match lengths: the first length of each length symbol (257..=285), and its extra
/// bits.
const LEN_BASE: [u32; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u32; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];

/// One final deflate block with the fixed Huffman code, in which every run of a repeated
/// 3-byte pixel becomes matches at distance 3 and everything else stays literal.
fn deflate_runs(data: &[u8]) -> Vec<u8> {
    let mut b = Bits::default();
    b.put(1, 1); // final block
    b.put(1, 2); // fixed Huffman code
    let mut i = 0;
    while i < data.len() {
        let mut len = 0;
        if i >= 3 {
            while len < 258 && i + len < data.len() && data[i + len] == data[i + len - 3] {
                len += 1;
            }
        }
        if len >= 3 {
            let k = LEN_BASE
                .iter()
                .rposition(|&base| base <= len as u32)
                .unwrap_or(0);
            b.symbol(257 + k as u32);
            b.put(len as u32 - LEN_BASE[k], LEN_EXTRA[k]);
            b.code(2, 5); // distance 3: distance code 2, no extra bits
            i += len;
        } else {
            b.symbol(data[i] as u32);
            i += 1;
        }
    }
    b.symbol(256); // end of block
    b.put(0, 7); // pad to a whole byte
    b.out
}

/// The eight bytes every PNG file starts with.
pub const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// The zlib checksum of `data`.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + x as u32) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

/// The CRC-32 (IEEE) that PNG chunks carry.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_reference_values() {
        // CRC of the IEND chunk type, as every PNG file ends with it.
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn adler32_matches_the_reference_value() {
        // From RFC 1950's definition; the classic example string.
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    /// Walks the chunks of `png`, checking every CRC, and returns (type, data) pairs.
    fn chunks(png: &[u8]) -> Vec<([u8; 4], Vec<u8>)> {
        assert_eq!(png[..8], PNG_SIGNATURE);
        let mut out = Vec::new();
        let mut i = 8;
        while i < png.len() {
            let len = u32::from_be_bytes(png[i..i + 4].try_into().unwrap()) as usize;
            let body = &png[i + 4..i + 8 + len];
            let crc = u32::from_be_bytes(png[i + 8 + len..i + 12 + len].try_into().unwrap());
            assert_eq!(crc32(body), crc, "bad CRC on chunk {:?}", &body[..4]);
            out.push((body[..4].try_into().unwrap(), body[4..].to_vec()));
            i += 12 + len;
        }
        assert_eq!(i, png.len(), "trailing bytes");
        out
    }

    /// An independent inflater for one fixed-Huffman block (all this encoder writes), written
    /// from RFC 1950/1951 with the code lengths' ranges rather than the encoder's tables;
    /// checks the zlib wrapper and the Adler-32.
    fn inflate(z: &[u8]) -> Vec<u8> {
        assert_eq!(z[0] & 0x0F, 8, "deflate");
        assert_eq!(
            ((z[0] as u16) << 8 | z[1] as u16) % 31,
            0,
            "zlib header check"
        );
        let mut pos = 16; // bit position
        let mut bit = || {
            let b = (z[pos / 8] >> (pos % 8)) & 1;
            pos += 1;
            b as u32
        };
        let bits = |n: u32, bit: &mut dyn FnMut() -> u32| (0..n).fold(0, |v, i| v | bit() << i);
        assert_eq!(bits(3, &mut bit), 0b011, "one final block with fixed codes");
        let mut out: Vec<u8> = Vec::new();
        loop {
            // Fixed code: 7-bit codes 0..=23, 8-bit 48..=191 and 192..=199, 9-bit 400..=511.
            let mut code = 0;
            for _ in 0..7 {
                code = code << 1 | bit();
            }
            let sym = if code <= 23 {
                256 + code
            } else {
                code = code << 1 | bit();
                match code {
                    48..=191 => code - 48,
                    192..=199 => 280 + code - 192,
                    _ => 144 + (code << 1 | bit()) - 400,
                }
            };
            match sym {
                0..=255 => out.push(sym as u8),
                256 => break,
                _ => {
                    let k = (sym - 257) as usize;
                    let (base, extra) = match k {
                        0..=7 => (k as u32 + 3, 0),
                        28 => (258, 0),
                        _ => {
                            let e = (k as u32 - 4) / 4;
                            (((4 + (k as u32 - 4) % 4) << e) + 3, e)
                        }
                    };
                    let len = base + bits(extra, &mut bit);
                    let mut d = 0;
                    for _ in 0..5 {
                        d = d << 1 | bit();
                    }
                    assert!(d < 4, "only short distances are expected");
                    let dist = d as usize + 1;
                    for _ in 0..len {
                        out.push(out[out.len() - dist]);
                    }
                }
            }
        }
        let end = pos.div_ceil(8);
        assert_eq!(z[end..], adler32(&out).to_be_bytes());
        out
    }

    #[test]
    fn png_round_trips_through_a_strict_reader() {
        // Runs, lines, and a noisy stretch that has to stay literal.
        let (w, h) = (300, 100);
        let mut c = Canvas::new(w, h, [255, 255, 255]);
        c.rect(10, 20, 40, 30, [200, 10, 30]);
        c.line((0, 99), (299, 0), 3, [0, 0, 255]);
        for x in 0..300 {
            c.set(x, 60, [(x * 7) as u8, (x * 13) as u8, (x * 31) as u8]);
        }
        let png = c.png();
        assert!(
            png.len() < 20_000,
            "runs are compressed: {} bytes",
            png.len()
        );
        let chunks = chunks(&png);
        let types: Vec<&[u8]> = chunks.iter().map(|(t, _)| &t[..]).collect();
        assert_eq!(types, [b"IHDR", b"IDAT", b"IEND"]);
        assert_eq!(chunks[0].1, [0, 0, 1, 44, 0, 0, 0, 100, 8, 2, 0, 0, 0]);
        let raw = inflate(&chunks[1].1);
        assert_eq!(raw.len(), h * (w * 3 + 1));
        // Each scanline: filter byte 0, then the pixels as drawn.
        let row = |y: usize| &raw[y * (w * 3 + 1)..(y + 1) * (w * 3 + 1)];
        assert!((0..h).all(|y| row(y)[0] == 0));
        assert_eq!(row(25)[1 + 3 * 10..1 + 3 * 11], [200, 10, 30]);
        assert_eq!(row(25)[1 + 3 * 9..1 + 3 * 10], [255, 255, 255]);
        assert_eq!(row(5)[1..4], [255, 255, 255]);
        assert_eq!(
            row(60)[1 + 3 * 299..],
            [(299 * 7) as u8, (299 * 13) as u8, (299 * 31) as u8]
        );
        assert_eq!(row(99)[1..4], [0, 0, 255]);
    }

    #[test]
    fn drawing_is_clipped_and_lines_reach_both_ends() {
        let mut c = Canvas::new(20, 10, [0, 0, 0]);
        c.rect(15, 5, 100, 100, [1, 2, 3]);
        assert_eq!(c.get(19, 9), Some([1, 2, 3]));
        assert_eq!(c.get(14, 9), Some([0, 0, 0]));
        assert_eq!(c.get(20, 0), None);
        c.line((-5, -5), (30, 30), 1, [9, 9, 9]);
        assert_eq!(c.get(0, 0), Some([9, 9, 9]));
        assert_eq!(c.get(9, 9), Some([9, 9, 9]));
        c.line((2, 8), (17, 1), 1, [7, 7, 7]);
        assert_eq!(c.get(2, 8), Some([7, 7, 7]));
        assert_eq!(c.get(17, 1), Some([7, 7, 7]));
    }

    #[test]
    fn text_draws_glyphs_and_reports_its_width() {
        let mut c = Canvas::new(40, 12, [255, 255, 255]);
        c.text(1, 1, "10", 2, [0, 0, 0]);
        // '1' has its top-middle pixel set, '0' its top-left; the gap between them is white.
        assert_eq!(c.get(1 + 2, 1), Some([0, 0, 0]));
        assert_eq!(c.get(1, 1), Some([255, 255, 255]));
        assert_eq!(c.get(1 + 8, 1), Some([0, 0, 0]));
        assert_eq!(c.get(1 + 6, 1), Some([255, 255, 255]));
        assert_eq!(Canvas::text_width("10", 2), 14);
        assert_eq!(Canvas::text_width("", 2), 0);
        // Lower case is drawn like upper case.
        assert_eq!(glyph('k'), glyph('K'));
    }
}
