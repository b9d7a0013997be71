//! Tests of the state digest (`state::digest`): here, beside the store, because they build
//! their states with command lines (`cmd::run_line`), which `state` may not use.

use bytes::Bytes;

use crate::cmd::run_line;
use crate::state::digest::StateDigest;
use crate::state::{Entry, Keyspace, PopKind, PopWaiter, Value, WaiterId};

fn hex(d: StateDigest) -> String {
    hex::encode(d)
}

/// A keyspace with something in every part of the state.
fn populated() -> Keyspace {
    let mut ks = Keyspace::default();
    ks.clock_mut().advance(3, 7, 1_000);
    for line in [
        "SET s v PX 5000",
        "HSET h b 1 a 2",
        "RPUSH l x y",
        "SADD st m n",
        "ZADD z 1 a 2 b",
        "LOCK lk a PX 1000 DELAY 10",
        "FENCEDSET r v 5",
    ] {
        run_line(&mut ks, line, 0);
    }
    ks.cache_script("ab".into(), Bytes::from_static(b"return 1"));
    let (key, owner) = (Bytes::from_static(b"lk"), Bytes::from_static(b"b"));
    let id = WaiterId {
        node: 1,
        boot: 2,
        seq: 3,
    };
    let wait = crate::state::Acquire {
        key: &key,
        owner: &owner,
        ttl_ms: 100,
        delay_ms: 0,
        wait: Some((id, Some(900))),
    };
    ks.lock_acquire(wait, 0, 100);
    ks.pop_enqueue(PopWaiter {
        id,
        kind: PopKind::List,
        deadline: None,
        cmd: Bytes::from_static(b"cmd"),
        keys: vec![Bytes::from_static(b"q")],
    });
    let rules = [Bytes::from_static(b"on"), Bytes::from_static(b"~k*")];
    let catalog = crate::cmd::acl::TableCatalog;
    ks.users_mut()
        .set_user("alice", &rules, &catalog)
        .expect("rules");
    ks
}

/// Equal states digest equally whatever order they were built in (sorted parts), and the
/// pending-change bookkeeping is not part of the digest.
#[test]
fn the_digest_is_a_function_of_the_state_only() {
    let a = populated();
    let mut b = populated();
    assert_eq!(hex(a.digest()), hex(b.digest()));
    b.take_changes(|_| ());
    b.take_events();
    b.set_notify_flags(u32::MAX);
    assert_eq!(a.digest(), b.digest());
    // The same keys written in the other order (with the same revisions) digest equally.
    let mut x = Keyspace::default();
    let mut y = Keyspace::default();
    x.set_str(
        Bytes::from_static(b"a"),
        Bytes::from_static(b"1"),
        None,
        1,
        0,
    );
    x.set_str(
        Bytes::from_static(b"b"),
        Bytes::from_static(b"2"),
        None,
        2,
        0,
    );
    y.set_str(
        Bytes::from_static(b"b"),
        Bytes::from_static(b"2"),
        None,
        2,
        0,
    );
    y.set_str(
        Bytes::from_static(b"a"),
        Bytes::from_static(b"1"),
        None,
        1,
        0,
    );
    assert_eq!(x.digest(), y.digest());
}

type EntryChange = fn(&mut Entry);
type StateChange = fn(&mut Keyspace);

/// `populated()` with `key`'s entry written again after `change` (a rewrite alone
/// moves `modified`, so the unchanged rewrite is the baseline).
fn rewritten(key: &'static str, change: fn(&mut Entry)) -> StateDigest {
    let mut ks = populated();
    let mut e = ks.get(key.as_bytes(), 0).cloned().expect("stored");
    change(&mut e);
    ks.insert(Bytes::from_static(key.as_bytes()), e);
    ks.digest()
}

/// Every part of the state changes the digest: a change anywhere is seen.
#[test]
fn a_change_in_any_part_changes_the_digest() {
    let entry_changes: &[(&str, &'static str, EntryChange)] = &[
        ("value", "s", |e| {
            e.value = Value::Str(Bytes::from_static(b"w"))
        }),
        ("deadline", "s", |e| {
            e.expire_at = e.expire_at.map(|t| t + 1)
        }),
        ("no deadline", "s", |e| e.expire_at = None),
        ("token", "s", |e| e.token += 1),
        ("hash order", "h", |e| {
            if let Value::Hash(h) = &mut e.value {
                h.swap_indices(0, 1);
            }
        }),
        ("set order", "st", |e| {
            if let Value::Set(s) = &mut e.value {
                s.swap_indices(0, 1);
            }
        }),
        ("list element", "l", |e| {
            if let Value::List(l) = &mut e.value {
                l[1] = Bytes::from_static(b"z");
            }
        }),
        ("score", "z", |e| {
            if let Value::ZSet(z) = &mut e.value {
                z.insert(Bytes::from_static(b"a"), 1.5);
            }
        }),
    ];
    let same = rewritten("s", |_| {});
    assert_eq!(same, rewritten("s", |_| {}));
    for (what, key, change) in entry_changes {
        let base = rewritten(key, |_| {});
        assert_ne!(
            rewritten(key, *change),
            base,
            "{what} did not change the digest"
        );
    }
    // `modified` alone: the same rewrite before or after the same revision bump.
    let (mut x, mut y) = (populated(), populated());
    let e = x.get(b"s", 0).cloned().expect("s");
    x.bump_revision();
    x.insert(Bytes::from_static(b"s"), e.clone());
    y.insert(Bytes::from_static(b"s"), e);
    y.bump_revision();
    assert_ne!(x.digest(), y.digest(), "modified did not change the digest");
    let base = populated().digest();
    let changes: &[(&str, StateChange)] = &[
        ("revision", |ks| {
            ks.bump_revision();
        }),
        ("clock", |ks| {
            ks.clock_mut().advance(3, 7, 1_001);
        }),
        ("fence", |ks| ks.raise_fence(&Bytes::from_static(b"r"), 6)),
        ("lock queue", |ks| {
            let key = Bytes::from_static(b"lk");
            let mut metas = ks.lock_metas().clone();
            metas.get_mut(&key).expect("a queue").queue[0].ttl_ms += 1;
            ks.set_lock_metas(metas);
        }),
        ("lock delay", |ks| {
            let key = Bytes::from_static(b"lk");
            let mut metas = ks.lock_metas().clone();
            metas.get_mut(&key).expect("a record").blocked_until += 1;
            ks.set_lock_metas(metas);
        }),
        ("pop queue", |ks| {
            let id = WaiterId {
                node: 1,
                boot: 2,
                seq: 3,
            };
            ks.pop_remove(&[Bytes::from_static(b"q")], id);
        }),
        ("script", |ks| {
            ks.cache_script("x".into(), Bytes::from_static(b"return 2"))
        }),
        ("budget", |ks| ks.set_script_budget(5)),
        ("user", |ks| {
            let rules = [Bytes::from_static(b"off")];
            let catalog = crate::cmd::acl::TableCatalog;
            ks.users_mut()
                .set_user("alice", &rules, &catalog)
                .expect("rules");
        }),
    ];
    for (what, change) in changes {
        let mut ks = populated();
        change(&mut ks);
        assert_ne!(ks.digest(), base, "{what} did not change the digest");
    }
}

/// The value digest covers the value only, as Redis's DEBUG DIGEST-VALUE does.
#[test]
fn value_digests_compare_values() {
    let mut ks = Keyspace::default();
    run_line(&mut ks, "SET a v", 0);
    run_line(&mut ks, "SET b v PX 100", 0);
    run_line(&mut ks, "SET c w", 0);
    run_line(&mut ks, "RPUSH l v", 0);
    let d = |k: &[u8]| ks.digest_value(k);
    assert!(d(b"a").is_some());
    assert_eq!(d(b"a"), d(b"b"));
    assert_ne!(d(b"a"), d(b"c"));
    assert_ne!(d(b"a"), d(b"l"), "a list is not a string");
    assert_eq!(d(b"missing"), None);
}
