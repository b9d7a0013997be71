//! Geospatial searches, Redis 7.0's `georadiusGeneric`: `GEOSEARCH key FROMMEMBER
//! member|FROMLONLAT lon lat BYRADIUS radius unit|BYBOX width height unit [ASC|DESC]
//! [COUNT n [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]`, `GEOSEARCHSTORE dst src ...
//! [STOREDIST]`, `GEORADIUS key lon lat radius unit [...] [STORE key] [STOREDIST key]`,
//! `GEORADIUSBYMEMBER key member radius unit [...]` and their `_RO` forms.
//!
//! The options are parsed when the search runs, after the source key's type check, as
//! Redis does (WRONGTYPE wins over a bad option; FROMMEMBER needs the key).

use std::cmp::Ordering;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::algo::geohash::{self, Shape};
use crate::algo::pqsort::pqsort;
use crate::cmd::geo::{coords, dist_reply, parse_box, parse_lonlat, parse_radius, NO_MEMBER};
use crate::cmd::keyspec::KeyFlags;
use crate::cmd::registry::flags::{READ, WRITE};
use crate::cmd::registry::{none, one, Replicated, Spec, Touches, ONE_KEY};
use crate::cmd::zset::store;
use crate::cmd::{Command, Ctx, Request};
use crate::resp::args::{parse_i64, syntax_error, NOT_INTEGER};
use crate::resp::{Args, Reply};
use crate::state::zset::{Float, ScoreBound, ScoreRange};
use crate::state::{Keyspace, ZSet};

const G: &str = "geo";
const WRITE_MOVABLE: &[&str] = &["write", "denyoom", "movablekeys"];

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[
    Spec::new("georadius", -6, WRITE_MOVABLE, ONE_KEY, parse_search)
        .key_specs("RO,access@i1/r0,1,0 OW,update@kSTORE,6/r0,1,0 OW,update@kSTOREDIST,6/r0,1,0")
        .args("key:key longitude:double latitude:double radius:double unit@(M|KM|FT|MI) WITHCOORD? WITHDIST? WITHHASH? {COUNT=count:integer ANY?}? order@(ASC|DESC)? STORE=key:key? STOREDIST=key:key?").docs(
        "Return (or store) the geospatial members within a radius of a point",
        "3.2.0",
        G,
    ),
    Spec::new(
        "georadiusbymember",
        -5,
        WRITE_MOVABLE,
        ONE_KEY,
        parse_search,
    )
        .key_specs("RO,access@i1/r0,1,0 OW,update@kSTORE,5/r0,1,0 OW,update@kSTOREDIST,5/r0,1,0")
        .args("key:key member radius:double unit@(M|KM|FT|MI) WITHCOORD? WITHDIST? WITHHASH? {COUNT=count:integer ANY?}? order@(ASC|DESC)? STORE=key:key? STOREDIST=key:key?")
    .docs(
        "Return (or store) the geospatial members within a radius of a member",
        "3.2.0",
        G,
    ),
    Spec::new("georadius_ro", -6, READ, ONE_KEY, parse_search)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key longitude:double latitude:double radius:double unit@(M|KM|FT|MI) WITHCOORD? WITHDIST? WITHHASH? {COUNT=count:integer ANY?}? order@(ASC|DESC)?").docs(
        "Return the geospatial members within a radius of a point (read-only)",
        "3.2.10",
        G,
    ),
    Spec::new("georadiusbymember_ro", -5, READ, ONE_KEY, parse_search)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key member radius:double unit@(M|KM|FT|MI) WITHCOORD? WITHDIST? WITHHASH? {COUNT=count:integer ANY?}? order@(ASC|DESC)?").docs(
        "Return the geospatial members within a radius of a member (read-only)",
        "3.2.10",
        G,
    ),
    Spec::new("geosearch", -7, READ, ONE_KEY, parse_search)
        .key_specs("RO,access@i1/r0,1,0")
        .args("key:key from@(FROMMEMBER=member|longitude_latitude@FROMLONLAT={longitude:double latitude:double}) by@(circle@{BYRADIUS=radius:double unit@(M|KM|FT|MI)}|box@{BYBOX=width:double height:double unit@(M|KM|FT|MI)}) order@(ASC|DESC)? {COUNT=count:integer ANY?}? WITHCOORD? WITHDIST? WITHHASH?").docs(
        "Return the geospatial members inside a circle or a box",
        "6.2.0",
        G,
    ),
    Spec::new("geosearchstore", -8, WRITE, (1, 2, 1), parse_search)
        .key_specs("OW,update@i1/r0,1,0 RO,access@i2/r0,1,0")
        .args("destination:key source:key from@(FROMMEMBER=member|longitude_latitude@FROMLONLAT={longitude:double latitude:double}) by@(circle@{BYRADIUS=radius:double unit@(M|KM|FT|MI)}|box@{BYBOX=width:double height:double unit@(M|KM|FT|MI)}) order@(ASC|DESC)? {COUNT=count:integer ANY?}? STOREDIST?").docs(
        "Store the geospatial members inside a circle or a box in another key",
        "6.2.0",
        G,
    ),
];

/// Which search command, for its argument layout and option rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Form {
    /// GEORADIUS(_RO): `lon lat radius unit`.
    Radius,
    /// GEORADIUSBYMEMBER(_RO): `member radius unit`.
    ByMember,
    /// GEOSEARCH: centre and shape as options.
    Search,
    /// GEOSEARCHSTORE: as GEOSEARCH, with STOREDIST.
    SearchStore,
}

/// A search as given; its options are parsed when it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchSpec {
    /// The command.
    pub form: Form,
    /// An `_RO` form (no STORE option).
    pub read_only: bool,
    /// The command's name as the client wrote it (for error texts).
    pub name: String,
    /// The source key.
    pub key: Bytes,
    /// GEOSEARCHSTORE's destination, or the key after GEORADIUS's STORE/STOREDIST.
    pub dst: Option<Bytes>,
    /// The arguments after the source key.
    pub args: Vec<Bytes>,
}

/// A point found by a search.
struct Found {
    member: Bytes,
    score: f64,
    lon: f64,
    lat: f64,
    /// Metres.
    dist: f64,
}

/// A search's options, once parsed.
#[derive(Default)]
struct Opts {
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    /// 0: unsorted, 1: ascending, -1: descending.
    sort: i8,
    count: u64,
    store: Option<Bytes>,
    store_dist: bool,
}

/// What a search produced: the points (sorted and cut to COUNT) and the options.
struct Outcome {
    points: Vec<Found>,
    opts: Opts,
    conversion: f64,
}

/// Parses GEORADIUS, GEORADIUSBYMEMBER, their `_RO` forms, GEOSEARCH and GEOSEARCHSTORE.
pub fn parse_search(args: &mut Args) -> Result<Request, Reply> {
    let name = args.name().to_string();
    let form = match name.as_str() {
        "georadius" | "georadius_ro" => Form::Radius,
        "georadiusbymember" | "georadiusbymember_ro" => Form::ByMember,
        "geosearch" => Form::Search,
        _ => Form::SearchStore,
    };
    let read_only = name.ends_with("_ro");
    let name = args.given_name().to_string();
    let mut dst = if form == Form::SearchStore {
        Some(args.arg()?)
    } else {
        None
    };
    let key = args.arg()?;
    let rest = args.rest();
    if matches!(form, Form::Radius | Form::ByMember) && !read_only {
        let opts = &rest[if form == Form::Radius { 4 } else { 3 }..];
        dst = store_key_at(opts).map(|i| opts[i].clone());
    }
    let spec = SearchSpec {
        form,
        read_only,
        name,
        key,
        dst,
        args: rest,
    };
    Ok(if spec.dst.is_some() {
        Request::Data(Command::GeoStore(GeoStore(spec)))
    } else {
        Request::Data(Command::GeoSearch(GeoSearch(spec)))
    })
}

/// Where GEORADIUS's STORE or STOREDIST key is among its options (`opts`, after the unit),
/// found by walking them as the search will (the last one wins); a search with one is a
/// write. The ACL check finds the destination with it too.
pub fn store_key_at(opts: &[Bytes]) -> Option<usize> {
    let mut found = None;
    let mut i = 0;
    while i < opts.len() {
        let more = i + 1 < opts.len();
        match opts[i].to_ascii_lowercase().as_slice() {
            b"count" if more => i += 1,
            b"store" | b"storedist" if more => {
                found = Some(i + 1);
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

impl SearchSpec {
    fn member_point(z: &ZSet, m: &[u8]) -> Result<(f64, f64), Reply> {
        z.score(m)
            .map(geohash::point_of)
            .ok_or_else(|| Reply::err(NO_MEMBER))
    }

    /// Parses the options (`georadiusGeneric`'s loop and checks) against the source `z`.
    fn parse(&self, z: Option<&ZSet>) -> Result<(Shape, Opts), Reply> {
        let a = &self.args;
        let mut shape = Shape {
            lon: 0.0,
            lat: 0.0,
            conversion: 1.0,
            radius: None,
            box_wh: (0.0, 0.0),
        };
        let base = match (self.form, z) {
            (Form::Radius, _) => {
                (shape.lon, shape.lat) = parse_lonlat(&a[0], &a[1])?;
                let (r, conv) = parse_radius(&a[2], &a[3])?;
                (shape.radius, shape.conversion) = (Some(r), conv);
                4
            }
            (Form::ByMember, None) => 3,
            (Form::ByMember, Some(z)) => {
                (shape.lon, shape.lat) = Self::member_point(z, &a[0])?;
                let (r, conv) = parse_radius(&a[1], &a[2])?;
                (shape.radius, shape.conversion) = (Some(r), conv);
                3
            }
            _ => 0,
        };
        let search = matches!(self.form, Form::Search | Form::SearchStore);
        let may_store = !search && !self.read_only;
        let mut o = Opts::default();
        let (mut from_member, mut from_loc, mut by_radius, mut by_box) =
            (false, false, false, false);
        let opts = &a[base..];
        let left = |i: usize| opts.len() - i - 1;
        let mut i = 0;
        while i < opts.len() {
            match opts[i].to_ascii_lowercase().as_slice() {
                b"withdist" => o.with_dist = true,
                b"withhash" => o.with_hash = true,
                b"withcoord" => o.with_coord = true,
                b"any" => o.any = true,
                b"asc" => o.sort = 1,
                b"desc" => o.sort = -1,
                b"count" if left(i) >= 1 => {
                    let n = parse_i64(&opts[i + 1]).ok_or_else(|| Reply::err(NOT_INTEGER))?;
                    if n <= 0 {
                        return Err(Reply::err("ERR COUNT must be > 0"));
                    }
                    o.count = n as u64;
                    i += 1;
                }
                w @ (b"store" | b"storedist") if left(i) >= 1 && may_store => {
                    o.store = Some(opts[i + 1].clone());
                    o.store_dist = w == b"storedist";
                    i += 1;
                }
                b"storedist" if self.form == Form::SearchStore => o.store_dist = true,
                b"frommember" if left(i) >= 1 && search && !from_loc => {
                    if let Some(z) = z {
                        (shape.lon, shape.lat) = Self::member_point(z, &opts[i + 1])?;
                    }
                    from_member = true;
                    i += 1;
                }
                b"fromlonlat" if left(i) >= 2 && search && !from_member => {
                    (shape.lon, shape.lat) = parse_lonlat(&opts[i + 1], &opts[i + 2])?;
                    from_loc = true;
                    i += 2;
                }
                b"byradius" if left(i) >= 2 && search && !by_box => {
                    let (r, conv) = parse_radius(&opts[i + 1], &opts[i + 2])?;
                    (shape.radius, shape.conversion) = (Some(r), conv);
                    by_radius = true;
                    i += 2;
                }
                b"bybox" if left(i) >= 3 && search && !by_radius => {
                    let (w, h, conv) = parse_box(&opts[i + 1], &opts[i + 2], &opts[i + 3])?;
                    (shape.box_wh, shape.conversion, shape.radius) = ((w, h), conv, None);
                    by_box = true;
                    i += 3;
                }
                _ => return Err(syntax_error()),
            }
            i += 1;
        }
        if self.form == Form::SearchStore {
            o.store = self.dst.clone();
        }
        if o.store.is_some() && (o.with_dist || o.with_hash || o.with_coord) {
            let who = if self.form == Form::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            };
            return Err(Reply::err(format!(
                "ERR {who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
            )));
        }
        if search && !(from_member || from_loc) {
            return Err(Reply::err(format!(
                "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
                self.name
            )));
        }
        if search && !(by_radius || by_box) {
            return Err(Reply::err(format!(
                "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
                self.name
            )));
        }
        if o.any && o.count == 0 {
            return Err(Reply::err("ERR the ANY argument requires COUNT argument"));
        }
        Ok((shape, o))
    }

    /// Runs the search on the source key at `now`.
    fn run(&self, ks: &Keyspace, now: u64) -> Result<Outcome, Reply> {
        let z = ks.get_zset(&self.key, now)?;
        let (shape, mut opts) = self.parse(z)?;
        let Some(z) = z else {
            return Ok(Outcome {
                points: Vec::new(),
                opts,
                conversion: shape.conversion,
            });
        };
        if opts.count != 0 && opts.sort == 0 && !opts.any {
            opts.sort = 1;
        }
        let limit = if opts.any { opts.count as usize } else { 0 };
        let mut points = scan(z, &shape, limit);
        let returned = match opts.count {
            0 => points.len(),
            n => points.len().min(n as usize),
        };
        if opts.sort != 0 {
            let desc = opts.sort < 0;
            let by_dist = |a: &Found, b: &Found| {
                let o = a.dist.partial_cmp(&b.dist).unwrap_or(Ordering::Equal);
                if desc {
                    o.reverse()
                } else {
                    o
                }
            };
            if returned == points.len() {
                // Stable, as glibc's qsort (a merge sort) is: ties keep scan order.
                points.sort_by(by_dist);
            } else if returned > 0 {
                pqsort(&mut points, 0, returned - 1, by_dist);
            }
        }
        points.truncate(returned);
        Ok(Outcome {
            points,
            opts,
            conversion: shape.conversion,
        })
    }
}

/// The points of `z` inside `shape`, in the order Redis visits them (`membersOfAllNeighbors`),
/// stopping at `limit` points when it is not 0 (ANY).
fn scan(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Found> {
    let cells = geohash::search_cells(shape);
    let mut out = Vec::new();
    let mut last = 0;
    for (i, cell) in cells.iter().enumerate() {
        if *cell == geohash::Cell::default() {
            continue;
        }
        // Redis compares with the last cell it searched, but never with the centre cell.
        if last != 0 && *cell == cells[last] {
            continue;
        }
        if limit != 0 && out.len() >= limit {
            break;
        }
        let (min, max) = geohash::score_range(*cell);
        let range = ScoreRange {
            min: ScoreBound {
                value: Float(min),
                exclusive: false,
            },
            max: ScoreBound {
                value: Float(max),
                exclusive: true,
            },
        };
        for (m, s) in z.by_score(&range) {
            let (lon, lat) = geohash::point_of(s);
            if let Some(dist) = shape.contains(lon, lat) {
                out.push(Found {
                    member: m.clone(),
                    score: s,
                    lon,
                    lat,
                    dist,
                });
                if limit != 0 && out.len() >= limit {
                    break;
                }
            }
        }
        last = i;
    }
    out
}

/// GEOSEARCH, GEORADIUS(BYMEMBER)(_RO) without STORE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeoSearch(pub SearchSpec);

impl Replicated for GeoSearch {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &[
                "geosearch",
                "georadius",
                "georadiusbymember",
                "georadius_ro",
                "georadiusbymember_ro",
            ],
            one(&self.0.key),
            none(),
        ))
    }

    fn is_read(&self) -> bool {
        true
    }

    /// Answers the search at `now`.
    fn query(&self, ks: &Keyspace, now: u64) -> Reply {
        let out = match self.0.run(ks, now) {
            Err(e) => return e,
            Ok(out) => out,
        };
        let o = &out.opts;
        let extra = o.with_dist || o.with_hash || o.with_coord;
        Reply::Array(
            out.points
                .iter()
                .map(|p| {
                    if !extra {
                        return Reply::Bulk(p.member.clone());
                    }
                    let mut item = vec![Reply::Bulk(p.member.clone())];
                    if o.with_dist {
                        item.push(dist_reply(p.dist / out.conversion));
                    }
                    if o.with_hash {
                        item.push(Reply::Int(p.score as i64));
                    }
                    if o.with_coord {
                        item.push(coords(p.lon, p.lat));
                    }
                    Reply::Array(item)
                })
                .collect(),
        )
    }
}

/// GEOSEARCHSTORE, and GEORADIUS(BYMEMBER) with STORE or STOREDIST.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeoStore(pub SearchSpec);

impl Replicated for GeoStore {
    fn forwarded(&self) -> Option<Touches<'_>> {
        Some((
            &["geosearchstore", "georadius", "georadiusbymember"],
            std::iter::once(self.0.key.as_ref())
                .chain(self.0.dst.as_deref())
                .collect(),
            none(),
        ))
    }

    /// The source is read, the destination written, whichever command it came from (their
    /// rows name the two in different orders).
    fn key_flags(&self) -> Option<Vec<KeyFlags>> {
        let dst = self
            .0
            .dst
            .as_ref()
            .map(|_| KeyFlags::OW.with(KeyFlags::UPDATE));
        Some(
            std::iter::once(KeyFlags::RO.with(KeyFlags::ACCESS))
                .chain(dst)
                .collect(),
        )
    }

    fn is_read(&self) -> bool {
        false
    }

    /// Stores the points found (scores, or distances with STOREDIST); an empty result
    /// deletes the destination.
    fn apply(&self, ks: &mut Keyspace, ctx: Ctx) -> Reply {
        let out = match self.0.run(ks, ctx.now) {
            Err(e) => return e,
            Ok(out) => out,
        };
        let Some(dst) = &out.opts.store else {
            return Reply::err("ERR internal: a store search without a destination");
        };
        let z: ZSet = out
            .points
            .iter()
            .map(|p| {
                let score = if out.opts.store_dist {
                    p.dist / out.conversion
                } else {
                    p.score
                };
                (p.member.clone(), score)
            })
            .collect();
        let event = match self.0.form {
            Form::Search | Form::SearchStore => "geosearchstore",
            _ => "georadiusstore",
        };
        store(ks, dst, z, ctx, event)
    }
}
