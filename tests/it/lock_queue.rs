//! Fair waiting (`LOCK ... WAIT`), lock-delay (`DELAY`, `--lock-delay-ms`) and lock events,
//! against real processes: waiters on every node of a cluster are served once each, in
//! arrival order; a waiter that times out or hangs up is skipped and never keeps a grant; a
//! leader crash loses no waiter and repeats no token; a lock-delay holds a paused holder's
//! key for TTL + delay; a subscriber on a follower sees the lock's events.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::{
    decode2, encode, info_field, info_text, show, signal, try_int, wait_for, Conn, Server,
};

/// The LOCKINFO fields of `key` as (name, value) text pairs (RESP2), or None for nil.
fn lockinfo(c: &mut Conn, key: &str) -> Option<Vec<(String, String)>> {
    use redis_protocol::resp2::types::OwnedFrame;
    let r = c.cmd(&["LOCKINFO", key]);
    let OwnedFrame::Array(items) = decode2(&r) else {
        assert_eq!(r, b"$-1\r\n", "LOCKINFO {key}: {}", show(&r));
        return None;
    };
    let text = |f: &OwnedFrame| match f {
        OwnedFrame::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        OwnedFrame::Integer(i) => i.to_string(),
        OwnedFrame::Null => "nil".into(),
        other => panic!("LOCKINFO field {other:?}"),
    };
    Some(
        items
            .chunks(2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
    )
}

/// One LOCKINFO field of `key` ("0" for a missing waiters/delay field, None for nil).
fn lockinfo_field(c: &mut Conn, key: &str, field: &str) -> Option<String> {
    let fields = lockinfo(c, key)?;
    Some(
        fields
            .into_iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v)
            .unwrap_or_else(|| "0".into()),
    )
}

fn waiters(c: &mut Conn, key: &str) -> u64 {
    lockinfo_field(c, key, "waiters").map_or(0, |v| v.parse().expect("waiters"))
}

fn token(r: &[u8], what: &str) -> i64 {
    try_int(r).unwrap_or_else(|| panic!("{what}: expected a token, got {}", show(r)))
}

/// INFO `blocked_clients` of node `id`.
fn blocked_clients(cluster: &Cluster, id: u64) -> u64 {
    let mut c = cluster.conn(id);
    let text = info_text(&c.c("INFO clients"), 2);
    info_field(&text, "blocked_clients")
        .and_then(|v| v.parse().ok())
        .expect("INFO blocked_clients")
}

/// 20 clients spread over the three nodes queue one after another; each is granted the lock
/// once, in the order it joined, with a token above every earlier one, and INFO counts them
/// as blocked while they wait.
#[test]
fn twenty_waiters_on_every_node_are_served_once_in_arrival_order() {
    const N: usize = 20;
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let mut holder = cluster.conn(leader);
    let first = token(&holder.c("LOCK q holder PX 60000"), "holder");
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for i in 0..N {
        let node = (i as u64 % 3) + 1;
        let port = cluster.port(node);
        let served = served.clone();
        threads.push(thread::spawn(move || {
            let mut c = Conn::connect(port);
            let owner = format!("w{i}");
            let r = c.cmd(&["LOCK", "q", &owner, "PX", "10000", "WAIT", "0"]);
            let t = token(&r, &owner);
            served.lock().unwrap().push((i, t));
            assert_eq!(
                c.cmd(&["UNLOCK", "q", &owner]),
                b":1\r\n",
                "{owner} unlocks"
            );
        }));
        // The next one starts only once this one is in the queue: that is arrival order.
        wait_for(
            Duration::from_secs(10),
            &format!("waiter {i} queued"),
            || (waiters(&mut holder, "q") == i as u64 + 1).then_some(()),
        );
    }
    let blocked: u64 = (1..=3).map(|id| blocked_clients(&cluster, id)).sum();
    assert_eq!(
        blocked, N as u64,
        "INFO blocked_clients over the three nodes"
    );
    assert_eq!(holder.c("UNLOCK q holder"), b":1\r\n");
    for t in threads {
        t.join().expect("a waiter failed");
    }
    let mut served = served.lock().unwrap().clone();
    served.sort_by_key(|(_, t)| *t);
    let order: Vec<usize> = served.iter().map(|(i, _)| *i).collect();
    assert_eq!(
        order,
        (0..N).collect::<Vec<_>>(),
        "grant order (by token): {served:?}"
    );
    let mut last = first;
    for (i, t) in &served {
        assert!(*t > last, "waiter {i}'s token {t} is not above {last}");
        last = *t;
    }
    assert_eq!(lockinfo(&mut holder, "q"), None, "free, nobody waiting");
    for id in 1..=3 {
        wait_for(Duration::from_secs(5), "blocked_clients back to 0", || {
            (blocked_clients(&cluster, id) == 0).then_some(())
        });
    }
}

/// A waiter whose WAIT runs out gets nil and leaves the queue; one that hangs up is skipped;
/// and when a client hangs up just as the lock is released to it, the grant does not stay
/// with the closed connection: the next waiter gets the lock within moments, not after the
/// dead grant's 60 s lease.
#[test]
fn waiters_that_time_out_or_hang_up_never_keep_the_lock() {
    let srv = Server::start();
    let mut a = srv.conn();
    token(&a.c("LOCK t a PX 60000"), "a");

    let mut b = srv.conn();
    let start = Instant::now();
    assert_eq!(
        b.c("LOCK t b PX 60000 WAIT 300"),
        b"$-1\r\n",
        "WAIT 300 runs out"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(290),
        "{:?}",
        start.elapsed()
    );
    wait_for(Duration::from_secs(5), "b left the queue", || {
        (waiters(&mut a, "t") == 0).then_some(())
    });

    // c waits, then hangs up: it leaves the queue through the log.
    let mut c = srv.conn();
    c.send(&["LOCK", "t", "c", "PX", "60000", "WAIT", "0"]);
    wait_for(Duration::from_secs(5), "c queued", || {
        (waiters(&mut a, "t") == 1).then_some(())
    });
    drop(c);
    wait_for(Duration::from_secs(5), "c left the queue", || {
        (waiters(&mut a, "t") == 0).then_some(())
    });

    // Rounds of: x waits with y behind it; the holder releases as x hangs up. Whichever is
    // applied first, y ends up holding the lock.
    let mut holder = "a".to_string();
    for round in 0..5 {
        let mut x = srv.conn();
        let xo = format!("x{round}");
        x.send(&["LOCK", "t", &xo, "PX", "60000", "WAIT", "0"]);
        wait_for(Duration::from_secs(5), "x queued", || {
            (waiters(&mut a, "t") == 1).then_some(())
        });
        let port = srv.port();
        let yo = format!("y{round}");
        let y = thread::spawn(move || {
            let mut y = Conn::connect(port);
            let r = y.cmd(&["LOCK", "t", &yo, "PX", "60000", "WAIT", "20000"]);
            (y, token(&r, &yo))
        });
        wait_for(Duration::from_secs(5), "y queued", || {
            (waiters(&mut a, "t") == 2).then_some(())
        });
        a.send(&["UNLOCK", "t", &holder]);
        drop(x);
        assert_eq!(a.read_reply(), b":1\r\n", "round {round}: {holder} unlocks");
        let (_y, t) = y.join().expect("y is granted the lock");
        let info = lockinfo(&mut a, "t").expect("held");
        assert_eq!(info[0].1, format!("y{round}"), "round {round}: {info:?}");
        assert_eq!(info[1].1, t.to_string());
        holder = format!("y{round}");
    }
}

/// The leader is killed while eight clients wait, two of them connected to it (they retry on
/// another node with the same owner, which keeps their place). The holder's lease runs out
/// under the new leader, and every waiter is served exactly once, with no token repeated.
#[test]
fn every_waiter_is_served_once_across_a_leader_kill() {
    let mut cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let mut watcher = cluster.conn(followers[0]);
    let mut holder = cluster.conn(leader);
    token(&holder.c("LOCK lk holder PX 3000"), "holder");
    let ports: Vec<u16> = (1..=3).map(|id| cluster.port(id)).collect();
    let leader_port = cluster.port(leader);
    let mut threads = Vec::new();
    for i in 0..8u64 {
        let first = if i < 2 {
            leader
        } else {
            followers[(i % 2) as usize]
        };
        let ports = ports.clone();
        let start_port = cluster.port(first);
        threads.push(thread::spawn(move || {
            let owner = format!("w{i}");
            let mut port = start_port;
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                assert!(Instant::now() < deadline, "{owner} was never served");
                let Ok(mut c) = Conn::try_connect(port) else {
                    port = next_port(&ports, port, leader_port);
                    continue;
                };
                if c.try_send_raw(&encode(&["LOCK", "lk", &owner, "PX", "500", "WAIT", "0"]))
                    .is_err()
                {
                    port = next_port(&ports, port, leader_port);
                    continue;
                }
                match c.try_read_reply() {
                    Ok(r) if try_int(&r).is_some() => {
                        let t = try_int(&r).unwrap_or_default();
                        // Release it (retrying through an election) so the next one goes.
                        for _ in 0..100 {
                            match Conn::try_connect(port)
                                .map(|mut u| u.cmd(&["UNLOCK", "lk", &owner]))
                            {
                                Ok(r) if r == b":1\r\n" || r == b":0\r\n" => return (owner, t),
                                _ => thread::sleep(Duration::from_millis(100)),
                            }
                        }
                        return (owner, t);
                    }
                    // An error (no leader yet, outcome unknown) or a closed connection:
                    // ask again, elsewhere if the node is gone.
                    Ok(_) => thread::sleep(Duration::from_millis(100)),
                    Err(_) => port = next_port(&ports, port, leader_port),
                }
            }
        }));
    }
    wait_for(Duration::from_secs(10), "eight waiters queued", || {
        (waiters(&mut watcher, "lk") == 8).then_some(())
    });
    drop(holder);
    cluster.kill9(leader);
    let mut served: Vec<(String, i64)> = threads
        .into_iter()
        .map(|t| t.join().expect("a waiter failed"))
        .collect();
    served.sort_by_key(|(_, t)| *t);
    let mut tokens: Vec<i64> = served.iter().map(|(_, t)| *t).collect();
    tokens.dedup();
    assert_eq!(tokens.len(), 8, "a token was repeated: {served:?}");
    let mut owners: Vec<&String> = served.iter().map(|(o, _)| o).collect();
    owners.sort();
    owners.dedup();
    assert_eq!(owners.len(), 8, "{served:?}");
}

/// The next port to try after `port` failed, skipping the killed leader's.
fn next_port(ports: &[u16], port: u16, dead: u16) -> u16 {
    thread::sleep(Duration::from_millis(50));
    let alive: Vec<u16> = ports.iter().copied().filter(|p| *p != dead).collect();
    let i = alive.iter().position(|p| *p == port).map_or(0, |i| i + 1);
    alive[i % alive.len()]
}

/// A holder process renews its 1.5 s lease every 100 ms and is SIGSTOPped. With DELAY 1500,
/// nobody is granted the key before its lease has run out and 1.5 s more have passed; during
/// the delay LOCKINFO shows it and a LOCK without WAIT gets nil.
#[test]
fn a_lock_delay_keeps_a_paused_holders_key_until_ttl_plus_delay() {
    let srv = Server::start();
    let port = srv.port().to_string();
    let script = "redis-cli -p $P LOCK d holder PX 1500 DELAY 1500 >/dev/null; \
                  while :; do redis-cli -p $P RENEW d holder PX 1500 >/dev/null; sleep 0.1; done";
    let mut proc = Command::new("sh")
        .args(["-c", script])
        .env("P", &port)
        .stdout(Stdio::null())
        .spawn()
        .expect("sh and redis-cli");
    let mut c = srv.conn();
    wait_for(Duration::from_secs(10), "the holder holds d", || {
        (lockinfo_field(&mut c, "d", "owner").as_deref() == Some("holder")).then_some(())
    });
    thread::sleep(Duration::from_millis(300));
    let p = srv.port();
    let waiter = thread::spawn(move || {
        let mut w = Conn::connect(p);
        let r = w.c("LOCK d w PX 1000 WAIT 15000");
        (r, Instant::now())
    });
    wait_for(Duration::from_secs(5), "w queued", || {
        (waiters(&mut c, "d") == 1).then_some(())
    });
    signal(proc.id(), "STOP");
    // A RENEW already under way finishes; after it, the lease left is what LOCKINFO reads.
    // The read happens after `asked`, so the lease ends no earlier than `asked + pttl`.
    thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let pttl: u64 = lockinfo_field(&mut c, "d", "pttl")
        .expect("still held")
        .parse()
        .expect("pttl");
    assert!(pttl > 0, "the lease is still running");
    // In the delay: free, but not grantable.
    wait_for(Duration::from_secs(5), "the lease to run out", || {
        (lockinfo_field(&mut c, "d", "owner").as_deref() == Some("nil")).then_some(())
    });
    let delay: u64 = lockinfo_field(&mut c, "d", "delay")
        .expect("a lock record")
        .parse()
        .expect("delay");
    assert!(delay > 0 && delay <= 1500, "remaining delay {delay}");
    assert_eq!(
        c.c("LOCK d other PX 1000"),
        b"$-1\r\n",
        "no grant in the delay"
    );
    let (r, granted) = waiter.join().expect("waiter");
    assert!(
        try_int(&r).is_some(),
        "w is granted d after the delay: {}",
        show(&r)
    );
    let waited = granted.duration_since(asked);
    let least = Duration::from_millis(pttl + 1500 - 5); // ms rounding
    assert!(
        waited >= least,
        "granted {waited:?} after a read that left {pttl} ms of lease (at least {least:?})"
    );
    signal(proc.id(), "CONT");
    let _ = proc.kill();
    let _ = proc.wait();
}

/// `--lock-delay-ms` applies to LOCKs that give no DELAY (and not after UNLOCK).
#[test]
fn the_default_lock_delay_applies_to_plain_locks() {
    let srv = Server::start_with(&["--lock-delay-ms", "800"]);
    let mut c = srv.conn();
    token(&c.c("LOCK p a PX 1000"), "a");
    assert_eq!(c.c("UNLOCK p a"), b":1\r\n");
    token(&c.c("LOCK p b PX 200"), "b right after an UNLOCK");
    let start = Instant::now();
    let r = c.c("LOCK p c PX 1000 WAIT 5000");
    token(&r, "c");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "granted {:?} after b's 200 ms lease began",
        start.elapsed()
    );
}

/// Lock events reach a subscriber on a follower, in keyspace-notification form: granted,
/// renewed, released, and expired (without any client touching the key).
#[test]
fn lock_events_reach_a_subscriber_on_a_follower() {
    let cluster = Cluster::start(3, &[]);
    let leader = cluster.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let mut sub = cluster.conn(follower);
    sub.c("SUBSCRIBE __keyspace@0__:ev");
    sub.c("PSUBSCRIBE __keyevent@0__:lock_*");
    let mut c = cluster.conn(leader);
    let t1 = token(&c.c("LOCK ev a PX 60000"), "a");
    assert_eq!(try_int(&c.c("RENEW ev a PX 60000")), Some(t1));
    assert_eq!(c.c("UNLOCK ev a"), b":1\r\n");
    let t2 = token(&c.c("LOCK ev b PX 300"), "b");
    let want = [
        ("lock_granted", t1, "a"),
        ("lock_renewed", t1, "a"),
        ("lock_released", t1, "a"),
        ("lock_granted", t2, "b"),
        ("lock_expired", t2, "b"),
    ];
    for (event, t, owner) in want {
        let m = sub.read_reply();
        let text = show(&m);
        let body = format!("{event} {t} {owner}");
        assert!(
            as_bulk_tail(&m).as_deref() == Some(body.as_bytes()),
            "keyspace message for {event}: {text}"
        );
        assert!(text.contains("__keyspace@0__:ev"), "{text}");
        let m = sub.read_reply();
        let text = show(&m);
        assert!(
            text.contains(&format!("__keyevent@0__:{event}"))
                && as_bulk_tail(&m).as_deref() == Some(&b"ev"[..]),
            "keyevent message for {event}: {text}"
        );
    }
}

/// The last element of a pub/sub message (its payload).
fn as_bulk_tail(m: &[u8]) -> Option<Vec<u8>> {
    use redis_protocol::resp2::types::OwnedFrame;
    match decode2(m) {
        OwnedFrame::Array(items) => match items.last() {
            Some(OwnedFrame::BulkString(b)) => Some(b.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// CLIENT UNBLOCK wakes a `LOCK ... WAIT` client as its timeout would (nil) or with
/// Redis's UNBLOCKED error, and the waiter leaves the queue: the lock is never granted to it.
#[test]
fn client_unblock_ends_a_lock_wait() {
    let pal = Server::start();
    let mut holder = pal.conn();
    token(&holder.c("LOCK uq holder PX 60000"), "holder");
    for (how, want) in [
        ("TIMEOUT", &b"$-1\r\n"[..]),
        (
            "ERROR",
            &b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"[..],
        ),
    ] {
        let mut w = pal.conn();
        let id = try_int(&w.c("CLIENT ID")).expect("CLIENT ID");
        w.send(&crate::common::words("LOCK uq waiter PX 1000 WAIT 0"));
        wait_for(Duration::from_secs(10), "the waiter in the queue", || {
            (waiters(&mut holder, "uq") == 1).then_some(())
        });
        assert_eq!(
            holder.c(&format!("CLIENT UNBLOCK {id} {how}")),
            b":1\r\n",
            "CLIENT UNBLOCK {how}"
        );
        assert_eq!(w.read_reply(), want, "the waiter's reply ({how})");
        wait_for(Duration::from_secs(10), "the queue to empty", || {
            (waiters(&mut holder, "uq") == 0).then_some(())
        });
    }
    // Released: nobody was queued, so the key is free for a newcomer.
    assert_eq!(holder.c("UNLOCK uq holder"), b":1\r\n");
    let mut late = pal.conn();
    token(&late.c("LOCK uq late PX 1000"), "a newcomer gets the lock");
}
