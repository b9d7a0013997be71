//! Differential tests of the GEO commands against redis-server 7.0, in RESP2 and RESP3: the
//! raw reply bytes must be identical (scores, coordinates, distances, hashes, errors, search
//! results and their order), and the sorted sets GEOADD and the STORE forms leave behind
//! must hold the same scores.

use crate::common::cluster::Cluster;
use crate::common::{show, RedisServer};
use crate::differential::{diff, run_steps, same, same_args, Step};

fn lines(ls: &[&str]) -> Vec<Step> {
    ls.iter().map(|l| same(l)).collect()
}

/// GEOADD, GEOPOS, GEODIST and GEOHASH, with their options, edge coordinates and errors.
fn point_steps() -> Vec<Step> {
    lines(&[
        "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "ZRANGE Sicily 0 -1 WITHSCORES",
        "GEOADD Sicily 13.361389 38.115556 Palermo",
        "GEOADD Sicily CH 13.4 38.1 Palermo 12.758489 38.788135 edge1",
        "GEOADD Sicily NX 1 1 Palermo 17.241510 38.788135 edge2",
        "GEOADD Sicily XX CH 13.361389 38.115556 Palermo 1 1 ghost",
        "GEOADD Sicily xx nx 1 1 a",
        "GEOADD Sicily ch 1 1",
        "GEOADD Sicily 1 1 a 2",
        "GEOADD Sicily GT 1 1 a",
        "GEOADD Sicily nx ch xx 1",
        "GEOADD Sicily 181 0 bad",
        "GEOADD Sicily 0 85.06 bad",
        "GEOADD Sicily -180.5 -86 bad",
        "GEOADD Sicily inf 0 bad",
        "GEOADD Sicily abc 0 bad",
        "GEOADD Sicily 0 nan bad",
        "GEOADD Sicily 1 2",
        "GEOADD Sicily 1e300 0 bad",
        "GEOADD Sicily 0 -1e-300 tiny2",
        "GEOADD Sicily 1.5e1 +1 sci",
        "GEOADD Sicily 1 1e400 bad",
        "GEOPOS Sicily sci tiny2",
        "GEOADD edges 180 85.05112878 ne -180 -85.05112878 sw 180 -85.05112878 se -180 85.05112878 nw 0 0 origin -0 -0 negzero",
        "GEOADD edges 179.9999 0 east -179.9999 0 west 0.000001 0.000001 tiny",
        "ZRANGE edges 0 -1 WITHSCORES",
        "ZRANGE Sicily 0 -1 WITHSCORES",
        "GEOPOS Sicily Palermo Catania nosuch edge1",
        "GEOPOS edges ne sw se nw origin negzero east west tiny",
        "GEOPOS Sicily",
        "GEOPOS nokey a b",
        "GEODIST Sicily Palermo Catania",
        "GEODIST Sicily Palermo Catania km",
        "GEODIST Sicily Palermo Catania MI",
        "GEODIST Sicily Palermo Catania ft",
        "GEODIST Sicily Palermo Catania m",
        "GEODIST Sicily Palermo Catania yards",
        "GEODIST Sicily Palermo Catania km extra",
        "GEODIST Sicily Palermo nosuch",
        "GEODIST Sicily Palermo Palermo",
        "GEODIST nokey a b",
        "GEODIST edges east west km",
        "GEODIST edges ne sw",
        "GEOHASH Sicily Palermo Catania nosuch",
        "GEOHASH edges ne sw se nw origin east west tiny",
        "GEOHASH Sicily",
        "GEOHASH nokey a",
        // Scores GEOADD never writes still decode, as Redis decodes them.
        "ZADD odd -1 neg 1e300 big 5 five 0 zero 4503599627370495 max52",
        "GEOPOS odd neg big five zero max52",
        "GEOHASH odd neg big five zero max52",
        "GEODIST odd zero max52",
        "SET str v",
        "GEOADD str 1 1 a",
        "GEOPOS str a",
        "GEODIST str a b",
        "GEOHASH str a",
        "GEOSEARCH str FROMLONLAT 0 0 BYRADIUS 1 km",
        "GEOSEARCH str FROMLONLAT 0 0 BYRADIUS 1 parsec",
        "GEORADIUS str 0 0 1 km",
        "GEORADIUSBYMEMBER str a 1 km",
        "GEOSEARCHSTORE dst str FROMLONLAT 0 0 BYRADIUS 1 km",
        "TYPE Sicily",
    ])
}

#[test]
fn geo_points_resp2() {
    diff(2, &point_steps());
}

#[test]
fn geo_points_resp3() {
    diff(3, &point_steps());
}

/// The searches: every option, the option rules and their error texts, STORE forms.
fn search_steps() -> Vec<Step> {
    lines(&[
        "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 12.758489 38.788135 edge1 17.241510 38.788135 edge2",
        "GEOADD Sicily 15.087269 37.502669 Catania2 14.015482 37.554571 Enna",
        "GEORADIUS Sicily 15 37 200 km",
        "GEORADIUS Sicily 15 37 200 km ASC",
        "GEORADIUS Sicily 15 37 200 km DESC",
        "GEORADIUS Sicily 15 37 200 km WITHDIST",
        "GEORADIUS Sicily 15 37 200 km WITHCOORD",
        "GEORADIUS Sicily 15 37 200 km WITHHASH",
        "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC",
        "GEORADIUS Sicily 15 37 200 km withhash withdist desc count 2",
        "GEORADIUS Sicily 15 37 200 km COUNT 1",
        "GEORADIUS Sicily 15 37 200 km COUNT 2 ANY",
        "GEORADIUS Sicily 15 37 200 km COUNT 2 ANY DESC",
        "GEORADIUS Sicily 15 37 200 km ANY",
        "GEORADIUS Sicily 15 37 200 km COUNT 0",
        "GEORADIUS Sicily 15 37 200 km COUNT -1",
        "GEORADIUS Sicily 15 37 200 km COUNT x",
        "GEORADIUS Sicily 15 37 200 km COUNT",
        "GEORADIUS Sicily 15 37 200 mi",
        "GEORADIUS Sicily 15 37 650000 ft WITHDIST",
        "GEORADIUS Sicily 15 37 0 m",
        "GEORADIUS Sicily 15 37 -1 km",
        "GEORADIUS Sicily 15 37 x km",
        "GEORADIUS Sicily 15 37 1 lightyears",
        "GEORADIUS Sicily 200 37 1 km",
        "GEORADIUS Sicily x 37 1 km",
        "GEORADIUS Sicily 15 37 200 km FOO",
        "GEORADIUS Sicily 15 37 200 km FROMLONLAT 1 1",
        "GEORADIUS Sicily 15 37 200 km STORE dst",
        "ZRANGE dst 0 -1 WITHSCORES",
        "GEORADIUS Sicily 15 37 200 km STOREDIST dist COUNT 2 DESC",
        "ZRANGE dist 0 -1 WITHSCORES",
        "GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST",
        "GEORADIUS Sicily 15 37 1 km STORE dst",
        "EXISTS dst",
        "GEORADIUS nokey 15 37 200 km STORE dist",
        "EXISTS dist",
        "GEORADIUS nokey 15 37 200 km",
        "GEORADIUS_RO Sicily 15 37 200 km WITHDIST ASC",
        "GEORADIUS_RO Sicily 15 37 200 km STORE dst",
        "GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST ASC",
        "GEORADIUSBYMEMBER Sicily Palermo 100 km WITHCOORD",
        "GEORADIUSBYMEMBER Sicily nosuch 100 km",
        "GEORADIUSBYMEMBER Sicily Palermo -1 km",
        "GEORADIUSBYMEMBER nokey nosuch 100 km",
        "GEORADIUSBYMEMBER nokey nosuch 100 km COUNT 0",
        "GEORADIUSBYMEMBER Sicily Palermo 200 km STOREDIST dst ASC",
        "ZRANGE dst 0 -1 WITHSCORES",
        "GEORADIUSBYMEMBER_RO Sicily Catania 200 km ASC COUNT 3",
        "GEORADIUSBYMEMBER_RO Sicily Catania 200 km STOREDIST dst",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST WITHHASH",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 100 400 km DESC WITHDIST",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 100 km WITHDIST",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 200 200 km WITHDIST",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 100 mi WITHDIST COUNT 2",
        "GEOSEARCH Sicily FROMMEMBER nosuch BYRADIUS 100 km",
        "GEOSEARCH nokey FROMMEMBER nosuch BYRADIUS 100 km",
        "GEOSEARCH nokey FROMMEMBER nosuch BYRADIUS -1 km",
        "GEOSEARCH Sicily FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 1 km",
        "GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 15 37 BYRADIUS 1 km",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km BYBOX 1 1 km",
        "GEOSEARCH Sicily BYRADIUS 1 km ASC COUNT 1",
        "geosearch Sicily BYRADIUS 1 km ASC COUNT 1",
        "geosearch Sicily FROMLONLAT 15 37 ASC COUNT 1 WITHDIST",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX -1 1 km",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 x km",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX x 1 km",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 1 furlongs",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 1",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ANY",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 ANY",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE dst",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST",
        "GEOSEARCH Sicily FROMLONLAT 95 37 BYRADIUS 200 km",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1e3 Km COUNT 1 COUNT 2",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC DESC",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 0 km WITHDIST",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 0 0 m WITHDIST",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 20000 km ASC COUNT 2 WITHDIST",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km FROMLONLAT 1 1",
        "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km BYRADIUS 1 m",
        "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC COUNT 3",
        "ZRANGE dst 0 -1 WITHSCORES",
        "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC COUNT 3 STOREDIST",
        "ZRANGE dst 0 -1 WITHSCORES",
        "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 mi STOREDIST",
        "ZRANGE dst 0 -1 WITHSCORES",
        "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km WITHCOORD",
        "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE x",
        "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 1 m",
        "EXISTS dst",
        "SET dst v",
        "GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYRADIUS 1 m",
        "EXISTS dst",
        "GEOSEARCHSTORE dst nokey FROMLONLAT 15 37",
        "GEOSEARCHSTORE Sicily Sicily FROMMEMBER Palermo BYRADIUS 1 km",
        "ZRANGE Sicily 0 -1 WITHSCORES",
    ])
}

/// Equal distances: the order Redis's sorts leave them in, whole and cut by COUNT.
fn tie_steps() -> Vec<Step> {
    let mut steps = lines(&[
        "GEOADD ties 1 1 a 1 1 b 1 1 c 1 1 d 1 1 e 1 1 f 1 1 g 1 1 h 1 1 i 1 1 j",
        "GEOADD ties 1.001 1 k 0.999 1 l 1 1.001 m 1 0.999 n 1.002 1.002 o",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km ASC",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km DESC WITHDIST",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km ASC COUNT 3",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km DESC COUNT 4",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km COUNT 12 WITHDIST",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km COUNT 5 ANY",
        "GEOSEARCH ties FROMLONLAT 1 1 BYRADIUS 10 km COUNT 5 ANY DESC",
    ]);
    // Enough ties for the partial sort's median of medians (more than 40 points).
    let mut big = String::from("GEOADD many");
    for i in 0..90 {
        let lon = [2.0, 2.01, 1.99][i % 3];
        big.push_str(&format!(" {lon} 2 m{i}"));
    }
    steps.push(same(&big));
    for opts in [
        "ASC COUNT 1",
        "ASC COUNT 7",
        "ASC COUNT 29",
        "ASC COUNT 31",
        "DESC COUNT 45",
        "DESC COUNT 89",
        "ASC COUNT 90",
        "ASC",
        "DESC",
    ] {
        steps.push(same(&format!(
            "GEOSEARCH many FROMLONLAT 2.001 2 BYRADIUS 5 km {opts}"
        )));
    }
    // Through a script: coordinates become strings in RESP2, `{double=...}` in RESP3.
    for body in [
        "return redis.call('GEOPOS', 'ties', 'a', 'nosuch')",
        "redis.setresp(3); local p = redis.call('GEOPOS', 'ties', 'o'); return {tostring(p[1][1]['double']), tostring(p[1][2]['double'])}",
        "return redis.call('GEOSEARCH', 'ties', 'FROMMEMBER', 'o', 'BYRADIUS', '1', 'km', 'WITHCOORD', 'WITHDIST')",
        "return redis.call('GEODIST', 'ties', 'a', 'o', 'km')",
        "return redis.call('GEOSEARCHSTORE', 'out', 'ties', 'FROMMEMBER', 'o', 'BYRADIUS', '1', 'km')",
    ] {
        steps.push(same_args(&[b"EVAL", body.as_bytes(), b"0"]));
    }
    // GEORADIUS is a write command even without STORE; its _RO form and GEOSEARCH are not.
    for body in [
        "return redis.call('GEORADIUS', 'ties', '1', '1', '10', 'km', 'COUNT', '2')",
        "return redis.call('GEORADIUS_RO', 'ties', '1', '1', '10', 'km', 'COUNT', '2')",
        "return redis.call('GEOSEARCH', 'ties', 'FROMLONLAT', '1', '1', 'BYRADIUS', '10', 'km', 'COUNT', '2')",
        "return redis.call('GEOADD', 'ties', '1', '1', 'z')",
        // The same rule, outside the family: SORT without STORE.
        "return redis.call('SORT', 'nokey')",
    ] {
        steps.push(same_args(&[b"EVAL_RO", body.as_bytes(), b"0"]));
    }
    steps
}

#[test]
fn geo_ties_and_scripts_resp2() {
    diff(2, &tie_steps());
}

#[test]
fn geo_ties_and_scripts_resp3() {
    diff(3, &tie_steps());
}

#[test]
fn geo_searches_resp2() {
    diff(2, &search_steps());
}

#[test]
fn geo_searches_resp3() {
    diff(3, &search_steps());
}

/// A small deterministic generator (the same points on every run).
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Clouds of points around the poles' limits, the antimeridian, the equator and a city,
/// then searches of every shape and size over them: the cells visited, the points kept,
/// the order and the distances must all match Redis's.
fn cloud_steps() -> Vec<Step> {
    let mut rng = Lcg(7);
    let centres = [
        (13.36, 38.11, 1.0),
        (179.9, 0.5, 3.0),
        (-179.95, -10.0, 2.0),
        (0.0, 84.9, 1.0),
        (120.0, -84.9, 1.0),
        (0.0, 0.0, 0.5),
        (-73.98, 40.75, 0.05),
    ];
    let mut steps = Vec::new();
    for (k, (clon, clat, spread)) in centres.iter().enumerate() {
        let mut line = String::from("GEOADD cloud");
        for i in 0..60 {
            let lon = (clon + (rng.unit() - 0.5) * 2.0 * spread).clamp(-180.0, 180.0);
            let lat = (clat + (rng.unit() - 0.5) * 2.0 * spread).clamp(-85.05, 85.05);
            line.push_str(&format!(" {lon:.6} {lat:.6} p{k}_{i}"));
        }
        steps.push(same(&line));
    }
    steps.push(same("ZRANGE cloud 0 -1 WITHSCORES"));
    for (k, (clon, clat, spread)) in centres.iter().enumerate() {
        let km = spread * 111.0;
        for scale in [0.05, 0.3, 0.8, 1.5, 40.0] {
            let r = km * scale;
            steps.push(same(&format!(
                "GEOSEARCH cloud FROMLONLAT {clon} {clat} BYRADIUS {r:.3} km WITHDIST WITHHASH"
            )));
            steps.push(same(&format!(
                "GEOSEARCH cloud FROMLONLAT {clon} {clat} BYBOX {:.3} {:.3} km ASC WITHCOORD WITHDIST",
                r * 2.0,
                r
            )));
            steps.push(same(&format!(
                "GEORADIUS cloud {clon} {clat} {:.3} mi DESC COUNT 7 WITHDIST",
                r / 1.609
            )));
            steps.push(same(&format!(
                "GEOSEARCH cloud FROMMEMBER p{k}_3 BYRADIUS {r:.3} km COUNT 5 ANY WITHDIST"
            )));
        }
        steps.push(same(&format!(
            "GEOSEARCHSTORE out{k} cloud FROMMEMBER p{k}_0 BYBOX {km} {km} km STOREDIST"
        )));
        steps.push(same(&format!("ZRANGE out{k} 0 -1 WITHSCORES")));
    }
    steps.push(same(
        "GEOSEARCH cloud FROMLONLAT 0 0 BYRADIUS 20000 km COUNT 3",
    ));
    steps.push(same("GEORADIUS cloud 0 0 6000 km"));
    steps.push(same(
        "GEOSEARCH cloud FROMLONLAT 180 85.05112878 BYBOX 3000 500 km",
    ));
    steps
}

#[test]
fn geo_clouds_resp2() {
    diff(2, &cloud_steps());
}

#[test]
fn geo_clouds_resp3() {
    diff(3, &cloud_steps());
}

/// Through a follower of a 3-node cluster (searches forwarded to the leader and their
/// replies, coordinates included, sent back), in RESP3: the same bytes as redis-server.
#[test]
fn geo_through_a_follower() {
    let redis = RedisServer::start();
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = if leader == 1 { 2 } else { 1 };
    let (mut rc, mut pc) = (redis.conn(), cluster.conn(follower));
    for c in [&mut rc, &mut pc] {
        let r = c.c("HELLO 3");
        assert!(r.starts_with(b"%"), "HELLO 3: {}", show(&r));
    }
    let steps = lines(&[
        "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "GEOPOS Sicily Palermo nosuch",
        "GEODIST Sicily Palermo Catania km",
        "GEOHASH Sicily Palermo",
        "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 200 km ASC WITHCOORD WITHDIST WITHHASH",
        "GEORADIUS Sicily 15 37 200 km STOREDIST d",
        "ZRANGE d 0 -1 WITHSCORES",
        "GEOSEARCHSTORE d2 Sicily FROMLONLAT 15 37 BYBOX 300 300 km",
        "ZRANGE d2 0 -1 WITHSCORES",
        "GEORADIUS_RO Sicily 15 37 200 km WITHDIST",
    ]);
    let bad = run_steps(&steps, &mut rc, &mut pc);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
