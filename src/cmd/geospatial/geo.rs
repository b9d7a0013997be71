//! Geospatial indexes, Redis 7.0's GEO family on sorted sets, the point commands:
//! `GEOADD key [NX|XX] [CH] longitude latitude member [...]`, `GEOPOS key [member ...]`,
//! `GEODIST key member1 member2 [M|KM|FT|MI]` and `GEOHASH key [member ...]`.
//!
//! A point is a member whose score is its 52-bit geohash ([`crate::algo::geohash`]), so GEOADD is
//! a ZADD (it is parsed into [`crate::cmd::zset::ZAdd`]) and every sorted-set command works on a
//! geo key. The searches live in `geosearch.rs`; this file has the point commands and the
//! argument parsers they share.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::algo::geohash;
use crate::cmd::registry::flags::{READ, WRITE};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::zset::{parse_float, NOT_FLOAT};
use crate::cmd::{Command, Request};
use crate::resp::args::syntax_error;
use crate::resp::{Args, Reply};
use crate::state::zset::Float;
use crate::state::Keyspace;

const G: &str = "geo";

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("geoadd", -5, WRITE, ONE_KEY, parse_geoadd)
        .key_specs("RW,update@i1/r0,1,0")
        .args("key:key condition@(NX|XX)? change@CH? longitude_latitude_member@{longitude:double latitude:double member}*").docs(
        "Add points (longitude, latitude, member) to a geospatial sorted set",
        "3.2.0",
        G,
    ),
    Spec::new("geopos", -2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member*").docs(
        "Return the coordinates of geospatial members",
        "3.2.0",
        G,
    ),
    Spec::new("geodist", -4, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member1 member2 unit@(M|KM|FT|MI)?").docs(
        "Return the distance between two geospatial members",
        "3.2.0",
        G,
    ),
    Spec::new("geohash", -2, READ, ONE_KEY, parse_read)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member*").docs(
        "Return the standard geohash strings of geospatial members",
        "3.2.0",
        G,
    ),
];

pub(super) const NO_MEMBER: &str = "ERR could not decode requested zset member";

/// Parses GEOADD into the ZADD it is: `[NX|XX] [CH]` flags, then triplets whose
/// coordinates become scores.
pub fn parse_geoadd(args: &mut Args) -> Result<Request, Reply> {
    let key = args.arg()?;
    let rest = args.rest();
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut first = 0;
    for a in &rest {
        match a.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"CH" => ch = true,
            _ => break,
        }
        first += 1;
    }
    let triplets = &rest[first..];
    if !triplets.len().is_multiple_of(3) || (nx && xx) || triplets.is_empty() {
        return Err(syntax_error());
    }
    let mut pairs = Vec::with_capacity(triplets.len() / 3);
    for t in triplets.chunks(3) {
        let (lon, lat) = parse_lonlat(&t[0], &t[1])?;
        let score = geohash::score_of(lon, lat).ok_or_else(|| bad_pair(lon, lat))?;
        pairs.push((Float(score), t[2].clone()));
    }
    Ok(Request::Data(Command::ZAdd(crate::cmd::zset::ZAdd {
        key,
        pairs,
        nx,
        xx,
        gt: false,
        lt: false,
        ch,
        incr: false,
    })))
}

fn bad_pair(lon: f64, lat: f64) -> Reply {
    Reply::err(format!(
        "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
    ))
}

/// Parses a longitude and a latitude (`extractLongLatOrReply`).
pub(super) fn parse_lonlat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Reply> {
    let lon = parse_float(lon).ok_or_else(|| Reply::err(NOT_FLOAT))?;
    let lat = parse_float(lat).ok_or_else(|| Reply::err(NOT_FLOAT))?;
    let ok_lon = (geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon);
    let ok_lat = (geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat);
    if !ok_lon || !ok_lat {
        return Err(bad_pair(lon, lat));
    }
    Ok((lon, lat))
}

/// Metres per unit (`extractUnitOrReply`).
fn parse_unit(u: &[u8]) -> Result<f64, Reply> {
    match u.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(Reply::err(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

/// A non-negative number with its own "need numeric" text.
fn parse_size(b: &[u8], what: &str) -> Result<f64, Reply> {
    parse_float(b).ok_or_else(|| Reply::err(format!("ERR need numeric {what}")))
}

/// `radius unit`: the radius and metres per unit (`extractDistanceOrReply`).
pub(super) fn parse_radius(r: &[u8], unit: &[u8]) -> Result<(f64, f64), Reply> {
    let r = parse_size(r, "radius")?;
    if r < 0.0 {
        return Err(Reply::err("ERR radius cannot be negative"));
    }
    Ok((r, parse_unit(unit)?))
}

/// `width height unit` (`extractBoxOrReply`).
pub(super) fn parse_box(w: &[u8], h: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), Reply> {
    let w = parse_size(w, "width")?;
    let h = parse_size(h, "height")?;
    if h < 0.0 || w < 0.0 {
        return Err(Reply::err("ERR height or width cannot be negative"));
    }
    Ok((w, h, parse_unit(unit)?))
}

/// What a GEOPOS, GEODIST or GEOHASH reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GeoQuery {
    /// GEOPOS members.
    Pos(Vec<Bytes>),
    /// GEOHASH members.
    Hash(Vec<Bytes>),
    /// GEODIST a b, in metres per unit.
    Dist(Bytes, Bytes, Float),
}

/// GEOPOS, GEODIST and GEOHASH.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeoRead {
    /// The key.
    pub key: Bytes,
    /// What is read.
    pub query: GeoQuery,
}

/// Parses GEOPOS, GEODIST and GEOHASH.
pub fn parse_read(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let key = args.arg()?;
    let rest = args.rest();
    let query = match name.as_str() {
        "geopos" => GeoQuery::Pos(rest),
        "geohash" => GeoQuery::Hash(rest),
        _ => {
            let unit = match rest.len() {
                2 => 1.0,
                3 => parse_unit(&rest[2])?,
                _ => return Err(syntax_error()),
            };
            GeoQuery::Dist(rest[0].clone(), rest[1].clone(), Float(unit))
        }
    };
    Ok(Request::Data(Command::GeoRead(GeoRead { key, query })))
}

/// A distance as Redis replies it (`%.4f`, a bulk string in both protocols).
pub(super) fn dist_reply(d: f64) -> Reply {
    Reply::bulk(format!("{d:.4}"))
}

/// A point's coordinates as Redis replies them.
pub(super) fn coords(lon: f64, lat: f64) -> Reply {
    Reply::Array(vec![
        Reply::DoubleText(geohash::human(lon)),
        Reply::DoubleText(geohash::human(lat)),
    ])
}

impl Replicated for GeoRead {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((&["geopos", "geodist", "geohash"], one(&self.key), none()))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the read at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let z = match ks.get_zset(&self.key, now) {
            Err(e) => return e.into(),
            Ok(z) => z,
        };
        let score = |m: &[u8]| z.and_then(|z| z.score(m));
        match &self.query {
            GeoQuery::Pos(members) => Reply::Array(
                members
                    .iter()
                    .map(|m| match score(m) {
                        None => Reply::NilArray,
                        Some(s) => {
                            let (lon, lat) = geohash::point_of(s);
                            coords(lon, lat)
                        }
                    })
                    .collect(),
            ),
            GeoQuery::Hash(members) => Reply::Array(
                members
                    .iter()
                    .map(|m| {
                        score(m).map_or(Reply::Nil, |s| Reply::bulk(geohash::geohash_string(s)))
                    })
                    .collect(),
            ),
            GeoQuery::Dist(a, b, Float(unit)) => match (score(a), score(b)) {
                (Some(sa), Some(sb)) => {
                    let (lon1, lat1) = geohash::point_of(sa);
                    let (lon2, lat2) = geohash::point_of(sb);
                    dist_reply(geohash::distance(lon1, lat1, lon2, lat2) / unit)
                }
                _ => Reply::Nil,
            },
        }
    }
}
