//! The Redis Cluster facade against a real three-node cluster: every CLUSTER subcommand's
//! reply shape on every node, the announced addresses, KEYSLOT compared with a real
//! redis-server in cluster mode, node names stable across a restart, and the cluster-down
//! answers without a quorum.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis_protocol::resp2::types::OwnedFrame as F2;
use redis_protocol::resp3::types::OwnedFrame as F3;

use crate::common::cluster::Cluster;
use crate::common::{as_bulk, decode2, decode3, wait_for, Conn, RedisServer};

/// The port node 3 announces instead of its own (nothing listens there).
const ANNOUNCED_PORT: u16 = 6999;

fn start() -> Cluster {
    let flags = vec![
        "--announce-ip".to_string(),
        "127.0.0.1".to_string(),
        "--announce-port".to_string(),
        ANNOUNCED_PORT.to_string(),
    ];
    Cluster::start_with(3, &[], BTreeMap::from([(3, flags)]))
}

fn text(reply: &[u8]) -> String {
    String::from_utf8_lossy(&as_bulk(reply).expect("a bulk reply")).into_owned()
}

fn bulk(f: &F2) -> String {
    match f {
        F2::BulkString(b) | F2::SimpleString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

fn int(f: &F2) -> i64 {
    match f {
        F2::Integer(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn array(f: &F2) -> &[F2] {
    match f {
        F2::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

/// The port cluster clients are told for node `id`.
fn announced(c: &Cluster, id: u64) -> i64 {
    if id == 3 {
        ANNOUNCED_PORT.into()
    } else {
        c.port(id).into()
    }
}

fn is_name(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A flat RESP2 map (`k1 v1 k2 v2 ...`) as pairs of key text and value.
fn pairs(f: &F2) -> BTreeMap<String, F2> {
    array(f)
        .chunks(2)
        .map(|kv| (bulk(&kv[0]), kv[1].clone()))
        .collect()
}

#[test]
fn every_subcommand_answers_with_redis_shapes_on_every_node() {
    let c = start();
    let leader = c.wait_leader(&[1, 2, 3]);
    let names: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, text(&c.conn(id).c("CLUSTER MYID"))))
        .collect();
    assert!(names.values().all(|n| is_name(n)), "{names:?}");
    assert_eq!(names.values().collect::<BTreeSet<_>>().len(), 3);
    let by_name: BTreeMap<&str, u64> = names.iter().map(|(id, n)| (n.as_str(), *id)).collect();

    for id in 1..=3u64 {
        let mut conn = c.conn(id);

        let info = text(&conn.c("CLUSTER INFO"));
        for field in [
            "cluster_enabled:1\r\n",
            "cluster_state:ok\r\n",
            "cluster_slots_assigned:16384\r\n",
            "cluster_slots_ok:16384\r\n",
            "cluster_slots_fail:0\r\n",
            "cluster_known_nodes:3\r\n",
            "cluster_size:1\r\n",
        ] {
            assert!(info.contains(field), "node {id}: {field:?} not in {info:?}");
        }

        // SLOTS: one range, the leader first, then both replicas, each [ip, port, id, {}].
        let slots = decode2(&conn.c("CLUSTER SLOTS"));
        let ranges = array(&slots);
        assert_eq!(ranges.len(), 1, "node {id}: {slots:?}");
        let range = array(&ranges[0]);
        assert_eq!((int(&range[0]), int(&range[1])), (0, 16383));
        assert_eq!(
            range.len(),
            5,
            "node {id}: master and two replicas: {range:?}"
        );
        let mut seen = BTreeSet::new();
        for (i, node) in range[2..].iter().enumerate() {
            let node = array(node);
            assert_eq!(node.len(), 4, "{node:?}");
            assert_eq!(bulk(&node[0]), "127.0.0.1");
            let nid = by_name[bulk(&node[2]).as_str()];
            assert_eq!(int(&node[1]), announced(&c, nid), "node {nid}'s port");
            assert_eq!(node[3], F2::Array(vec![]));
            assert_eq!(i == 0, nid == leader, "the master is listed first");
            seen.insert(nid);
        }
        assert_eq!(seen, BTreeSet::from([1, 2, 3]));

        // SHARDS: one shard with every slot; RESP3 maps, RESP2 flat pairs.
        let shards = decode2(&conn.c("CLUSTER SHARDS"));
        let shard = pairs(&array(&shards)[0]);
        let slot_ints: Vec<i64> = array(&shard["slots"]).iter().map(int).collect();
        assert_eq!(slot_ints, [0, 16383]);
        let nodes = array(&shard["nodes"]);
        assert_eq!(nodes.len(), 3);
        for n in nodes {
            let n = pairs(n);
            let keys: Vec<&str> = n.keys().map(String::as_str).collect();
            let mut want = vec![
                "endpoint",
                "health",
                "id",
                "ip",
                "port",
                "replication-offset",
                "role",
            ];
            want.sort();
            assert_eq!(keys, want);
            let nid = by_name[bulk(&n["id"]).as_str()];
            let role = if nid == leader { "master" } else { "replica" };
            assert_eq!(bulk(&n["role"]), role);
            assert_eq!(bulk(&n["health"]), "online");
            assert_eq!(int(&n["port"]), announced(&c, nid));
        }

        // NODES: one line per node; this node is `myself`; the master serves 0-16383.
        let nodes = text(&conn.c("CLUSTER NODES"));
        let lines: Vec<&str> = nodes.lines().collect();
        assert_eq!(lines.len(), 3, "{nodes}");
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            let nid = by_name[f[0]];
            assert_eq!(
                f[1],
                format!(
                    "127.0.0.1:{}@{}",
                    announced(&c, nid),
                    c.nodes[&nid].peer_port
                )
            );
            assert_eq!(f[2].split(',').any(|x| x == "myself"), nid == id, "{line}");
            if nid == leader {
                assert!(f[2].ends_with("master") && f[3] == "-", "{line}");
                assert_eq!(f[8..], ["0-16383"], "{line}");
            } else {
                assert!(f[2].ends_with("slave") && f[3] == names[&leader], "{line}");
                assert_eq!(f.len(), 8, "{line}");
            }
            assert_eq!(f[7], "connected");
        }

        for cmd in ["READONLY", "READWRITE", "ASKING"] {
            assert_eq!(conn.c(cmd), b"+OK\r\n", "{cmd}");
        }
    }

    // RESP3: SHARDS is an array of maps, INFO a verbatim string.
    let mut conn = c.conn(1);
    conn.c("HELLO 3");
    match decode3(&conn.c("CLUSTER SHARDS")) {
        F3::Array { data, .. } => assert!(matches!(data[0], F3::Map { .. }), "{data:?}"),
        other => panic!("{other:?}"),
    }
    assert!(conn.c("CLUSTER INFO").starts_with(b"="));
}

#[test]
fn keys_in_slots_and_writes_through_a_readonly_follower() {
    let c = start();
    let leader = c.wait_leader(&[1, 2, 3]);
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let mut f = c.conn(follower);
    assert_eq!(f.c("READONLY"), b"+OK\r\n");
    for key in ["{user1}.a", "{user1}.b", "{user1}.c", "other"] {
        assert_eq!(f.c(&format!("SET {key} v")), b"+OK\r\n", "{key}");
    }
    let slot = crate::common::as_int(&f.c("CLUSTER KEYSLOT {user1}.zzz"));
    // The writes went through the log: the leader holds them.
    let mut l = c.conn(leader);
    assert_eq!(l.c("GET {user1}.b"), b"$1\r\nv\r\n");
    for conn in [&mut f, &mut l] {
        assert_eq!(
            conn.c(&format!("CLUSTER COUNTKEYSINSLOT {slot}")),
            b":3\r\n"
        );
        assert_eq!(
            conn.c(&format!("CLUSTER GETKEYSINSLOT {slot} 2")),
            b"*2\r\n$9\r\n{user1}.a\r\n$9\r\n{user1}.b\r\n"
        );
    }
    assert_eq!(
        f.c("CLUSTER COUNTKEYSINSLOT 16384"),
        b"-ERR Invalid slot\r\n"
    );
    assert_eq!(
        f.c("CLUSTER GETKEYSINSLOT 0 -1"),
        b"-ERR Invalid slot or number of keys\r\n"
    );
}

/// CLUSTER KEYSLOT, with and without hash tags, as a real redis-server in cluster mode
/// computes it.
#[test]
fn keyslot_matches_redis() {
    let redis = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ]);
    let server = crate::common::Server::start();
    let (mut want, mut got) = (redis.conn(), server.conn());
    let mut keys: Vec<String> = [
        "",
        "foo",
        "bar",
        "{",
        "}",
        "{}",
        "{}x",
        "x{}",
        "{a}",
        "{a}b",
        "b{a}",
        "a{b}{c}",
        "{{a}}",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "{user1000}.following",
        "{user1000}.followers",
        "lock:{order:42}",
        "fence:{order:42}",
        "\u{e9}t\u{e9}",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    keys.extend((0..200).map(|i| format!("key:{i}:{}", i * 7919)));
    for key in &keys {
        let args = ["CLUSTER", "KEYSLOT", key.as_str()];
        assert_eq!(got.cmd(&args), want.cmd(&args), "KEYSLOT {key:?}");
    }
    for line in [
        "CLUSTER KEYSLOT",
        "CLUSTER KEYSLOT a b",
        "CLUSTER COUNTKEYSINSLOT -1",
    ] {
        assert_eq!(got.c(line), want.c(line), "{line}");
    }
}

#[test]
fn node_names_survive_a_restart() {
    let mut c = start();
    c.wait_leader(&[1, 2, 3]);
    let before: Vec<String> = (1..=3)
        .map(|id| text(&c.conn(id).c("CLUSTER MYID")))
        .collect();
    c.restart(2);
    c.wait_leader(&[1, 2, 3]);
    let after: Vec<String> = (1..=3)
        .map(|id| text(&c.conn(id).c("CLUSTER MYID")))
        .collect();
    assert_eq!(before, after);
    // Every node names node 2 the same way.
    let nodes = text(&c.conn(1).c("CLUSTER NODES"));
    assert!(nodes.lines().any(|l| l.starts_with(&before[1])), "{nodes}");
}

/// Without a quorum there is no leader: the cluster is down, as Redis reports it.
#[test]
fn without_a_leader_the_cluster_is_down() {
    let mut c = start();
    c.wait_leader(&[1, 2, 3]);
    c.kill9(2);
    c.kill9(3);
    let mut conn: Conn = c.conn(1);
    let info = wait_for(Duration::from_secs(30), "cluster_state:fail", || {
        let info = text(&conn.c("CLUSTER INFO"));
        info.contains("cluster_state:fail\r\n").then_some(info)
    });
    assert!(info.contains("cluster_slots_ok:0\r\n"), "{info}");
    assert_eq!(conn.c("CLUSTER SLOTS"), b"*0\r\n");
    assert_eq!(conn.c("CLUSTER SHARDS"), b"*0\r\n");
    let nodes = text(&conn.c("CLUSTER NODES"));
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    assert!(!nodes.contains("0-16383"), "{nodes}");
    // The two stopped nodes do not answer: flagged as failed.
    assert_eq!(nodes.matches(",fail ").count(), 2, "{nodes}");
}
