use super::*;

use crate::cmd::test_argv as argv;

fn node(id: u64, reachable: bool) -> ClusterNode {
    ClusterNode {
        id,
        name: node_name(7, id),
        ip: "127.0.0.1".into(),
        port: 7000 + id as u16,
        cport: 17000 + id as u16,
        offset: 10,
        reachable,
    }
}

fn topology(leader: Option<u64>) -> Topology {
    Topology {
        me: 2,
        leader,
        epoch: 3,
        cluster_id: 7,
        nodes: vec![node(1, true), node(2, true), node(3, false)],
    }
}

/// Values from redis-server 7 (`CLUSTER KEYSLOT`), hash tags included.
#[test]
fn key_slots_match_redis() {
    for (key, slot) in [
        ("", 0),
        ("foo", 12182),
        ("bar", 5061),
        ("{user1000}.following", 3443),
        ("{user1000}.followers", 3443),
        ("foo{}{bar}", 8363),
        ("foo{{bar}}zap", 4015),
        ("foo{bar}{zap}", 5061),
        ("{", 4092),
    ] {
        assert_eq!(key_slot(key.as_bytes()), slot, "{key:?}");
    }
}

#[test]
fn node_names_are_40_hex_and_stable() {
    let a = node_name(7, 1);
    assert_eq!(a.len(), 40);
    assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(a, node_name(7, 1));
    assert_ne!(a, node_name(7, 2));
    assert_ne!(a, node_name(8, 1));
}

#[test]
fn parse_errors_match_redis() {
    let p = |s: &str| crate::cmd::parse(argv(s)).err();
    assert_eq!(
        p("CLUSTER KEYSLOT"),
        Some(Reply::err(
            "ERR wrong number of arguments for 'cluster|keyslot' command"
        ))
    );
    assert_eq!(
        p("CLUSTER COUNTKEYSINSLOT 16384"),
        Some(Reply::err("ERR Invalid slot"))
    );
    assert_eq!(
        p("CLUSTER GETKEYSINSLOT 1 -1"),
        Some(Reply::err("ERR Invalid slot or number of keys"))
    );
    assert_eq!(
        p("CLUSTER MEET 1.2.3.4 7000"),
        Some(Reply::err(
            "ERR unknown subcommand 'MEET'. Try CLUSTER HELP."
        ))
    );
    assert!(matches!(
        crate::cmd::parse(argv("CLUSTER KEYSLOT {a}b")),
        Ok(Request::Conn(ConnCmd::Command(Reply::Int(15495))))
    ));
}

#[test]
fn slots_list_the_leader_then_reachable_replicas() {
    let Reply::Array(ranges) = topology(Some(1)).slots() else {
        panic!()
    };
    let Reply::Array(range) = &ranges[0] else {
        panic!()
    };
    assert_eq!(range.len(), 2 + 2, "node 3 is unreachable");
    assert_eq!(range[..2], [Reply::Int(0), Reply::Int(16383)]);
    assert_eq!(
        range[2],
        Reply::Array(vec![
            Reply::text("127.0.0.1"),
            Reply::Int(7001),
            Reply::text(&node_name(7, 1)),
            Reply::Map(vec![]),
        ])
    );
    assert_eq!(topology(None).slots(), Reply::Array(vec![]));
    assert_eq!(topology(None).shards(), Reply::Array(vec![]));
}

#[test]
fn nodes_and_info_text() {
    let t = topology(Some(1));
    let text = t.nodes_text();
    let lines: Vec<&str> = text.lines().collect();
    let (n1, n2) = (node_name(7, 1), node_name(7, 2));
    assert_eq!(
        lines[0],
        format!("{n1} 127.0.0.1:7001@17001 master - 0 0 3 connected 0-16383")
    );
    assert_eq!(
        lines[1],
        format!("{n2} 127.0.0.1:7002@17002 myself,slave {n1} 0 0 3 connected")
    );
    assert!(lines[2].contains(" slave,fail ") && lines[2].ends_with("disconnected"));
    assert!(t
        .info()
        .starts_with("cluster_enabled:1\r\ncluster_state:ok\r\n"));
    let down = topology(None).info();
    assert!(down.contains("cluster_state:fail\r\n") && down.contains("cluster_slots_ok:0\r\n"));
}

#[test]
fn slot_keys_count_and_list() {
    let mut ks = Keyspace::default();
    for line in ["SET {a}1 x", "SET {a}2 x", "SET b x"] {
        crate::cmd::run_line(&mut ks, line, 0);
    }
    let slot = key_slot(b"a");
    let q = |count| SlotKeys { slot, count }.query(&ks, 0);
    assert_eq!(q(None), Reply::Int(2));
    assert_eq!(q(Some(1)), Reply::Array(vec![Reply::bulk("{a}1")]));
    assert_eq!(q(Some(0)), Reply::Array(vec![]));
}
