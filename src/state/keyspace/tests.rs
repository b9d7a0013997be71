use super::*;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Every lock is one entry: its size is most of a node's memory per lock
/// (docs/performance.md). An unboxed hash variant made it 112 bytes.
#[test]
fn entries_stay_compact() {
    assert!(std::mem::size_of::<Value>() <= 40);
    assert!(std::mem::size_of::<Entry>() <= 72);
}

/// A bulk load of keys in order rebuilds the tree as it grows, and the rebuilt tree holds
/// exactly what was inserted, in order, with the volatile count intact.
#[test]
fn a_growing_keyspace_is_rebuilt_without_losing_or_reordering_keys() {
    let mut ks = Keyspace::default();
    let n = 3 * COMPACT_MIN_GROWTH;
    for i in 0..n {
        let ttl = (i % 2 == 0).then_some(1_000_000);
        ks.set_str(b(&format!("lock:{i:08}")), b("owner"), ttl, i as u64 + 1, 0);
        ks.raise_fence(&b(&format!("res:{i:08}")), i as u64 + 1);
    }
    // The first mark is set at the first insert, then each rebuild moves it on by a
    // quarter of the tree plus the minimum growth.
    assert!(ks.compact_entries_at > n, "mark {}", ks.compact_entries_at);
    assert_eq!(ks.entries().len(), n);
    assert_eq!(ks.fences().len(), n);
    for (i, (k, e)) in ks.entries().iter().enumerate() {
        assert_eq!(k, &b(&format!("lock:{i:08}")));
        assert_eq!(e.token, i as u64 + 1);
    }
    assert_eq!(ks.fence(format!("res:{:08}", n - 1).as_bytes()), n as u64);
    assert_eq!(ks.volatile, n / 2);
    let mut mark = 0;
    compact_if_grown(&mut BTreeMap::<Bytes, u64>::new(), &mut mark);
    assert_eq!(mark, COMPACT_MIN_GROWTH, "an empty tree's first mark");
    let mut small: BTreeMap<Bytes, u64> = (0..10u64).map(|i| (b(&i.to_string()), i)).collect();
    let mut mark = 10;
    compact_if_grown(&mut small, &mut mark);
    assert_eq!(mark, 10 + 2 + COMPACT_MIN_GROWTH);
    assert_eq!(small.len(), 10);
}

/// The tree holds private, exact copies: a stored key or value that shared a buffer with
/// the command that wrote it would carry a 32-byte shared header for life (about 64 bytes
/// per lock; docs/performance.md). The store records a change from the stored entry in
/// place, without a clone; an overwrite keeps the stored key.
#[test]
fn stored_keys_and_values_share_no_buffer_with_their_writers() {
    fn value_ptr(e: &Entry) -> *const u8 {
        match &e.value {
            Value::Str(v) => v.as_ptr(),
            _ => std::ptr::null(),
        }
    }
    let mut ks = Keyspace::default();
    let (key, owner, res) = (b("lock:1"), b("owner-1"), b("res:1"));
    ks.set_str(key.clone(), owner.clone(), Some(1000), 1, 0);
    ks.raise_fence(&res, 1);
    let changes = ks.take_changes(value_ptr);
    let (k, e) = ks.entries().iter().next().expect("one entry");
    let Value::Str(v) = &e.value else {
        panic!("a string")
    };
    assert_eq!((k, v), (&key, &owner));
    assert_ne!(k.as_ptr(), key.as_ptr(), "key shares the command's buffer");
    assert_ne!(
        v.as_ptr(),
        owner.as_ptr(),
        "value shares the command's buffer"
    );
    assert_eq!(
        changes.entries,
        vec![(key.clone(), Some(v.as_ptr()))],
        "the store's record was not made from the stored entry in place"
    );
    let (fk, _) = ks.fences().iter().next().expect("one fence");
    assert_ne!(
        fk.as_ptr(),
        res.as_ptr(),
        "fence key shares the command's buffer"
    );

    // An overwrite replaces the entry and keeps the stored key.
    let stored_key = k.as_ptr();
    ks.set_str(key.clone(), b("owner-2"), None, 2, 0);
    let (k, e) = ks.entries().iter().next().expect("one entry");
    assert_eq!(
        k.as_ptr(),
        stored_key,
        "the overwrite replaced the stored key"
    );
    assert_eq!(e.value, Value::Str(b("owner-2")));
    assert_eq!(ks.volatile, 0, "the deadline went with the old entry");
}

#[test]
fn token_kept_for_same_owner_changed_for_new_owner() {
    let mut ks = Keyspace::default();
    ks.set_str(b("k"), b("A"), Some(100), 5, 0);
    ks.set_str(b("k"), b("A"), Some(200), 6, 50);
    assert_eq!(ks.get(b"k", 50).unwrap().token, 5);
    ks.set_str(b("k"), b("B"), None, 7, 60);
    assert_eq!(ks.get(b"k", 60).unwrap().token, 7);
}

#[test]
fn expiry_hides_and_index_tracks() {
    let mut ks = Keyspace::default();
    ks.set_str(b("a"), b("1"), Some(10), 1, 0);
    ks.set_str(b("b"), b("1"), None, 2, 0);
    assert!(ks.get(b"a", 9).is_some());
    assert!(ks.get(b"a", 10).is_none());
    assert_eq!(ks.expired_keys(10, None, 10, 100).0, vec![b("a")]);
    assert_eq!(ks.volatile_len(), 1);
    assert_eq!(ks.live_len(10), 1);
    assert!(ks.expire_lease(&b("a"), 10));
    assert!(!ks.expire_lease(&b("b"), 10));
    assert_eq!(ks.volatile_len(), 0);
    assert!(ks.expired_keys(100, None, 10, 100).0.is_empty());
}

/// The eviction sweep visits every key once per pass, resuming where it stopped and
/// wrapping around, and respects both the scan and the result limits.
#[test]
fn the_expiry_sweep_resumes_and_wraps() {
    let mut ks = Keyspace::default();
    for i in 0..10u64 {
        // Even keys expire at 5, odd ones never.
        let at = (i % 2 == 0).then_some(5);
        ks.set_str(b(&format!("k{i}")), b("v"), at, i + 1, 0);
    }
    let (found, next) = ks.expired_keys(10, None, 100, 4);
    assert_eq!(found, vec![b("k0"), b("k2")]);
    assert_eq!(next, Some(b("k3")));
    let (found, next) = ks.expired_keys(10, next.as_ref(), 100, 4);
    assert_eq!(found, vec![b("k4"), b("k6")]);
    assert_eq!(next, Some(b("k7")));
    // The rest of the pass, then it wraps to the start and stops before k7 again.
    let (found, next) = ks.expired_keys(10, next.as_ref(), 100, 100);
    assert_eq!(found, vec![b("k8"), b("k0"), b("k2"), b("k4"), b("k6")]);
    assert_eq!(next, None);
    // The result limit stops the sweep early, with a cursor after the last key seen.
    let (found, next) = ks.expired_keys(10, None, 1, 100);
    assert_eq!(found, vec![b("k0")]);
    assert_eq!(next, Some(b("k0")));
    // Nothing has expired yet: a full pass finds nothing.
    assert_eq!(ks.expired_keys(4, None, 100, 100), (vec![], None));
}

/// A rolled-back script leaves every fence as it found it: a raised one back at its old
/// token, a new one gone; a fence not raised (a lower or equal token) is not even recorded.
#[test]
fn a_rollback_restores_raised_and_new_fences() {
    let mut ks = Keyspace::default();
    ks.raise_fence(&b("old"), 10);
    ks.take_changes(Entry::clone);
    ks.begin_undo();
    ks.raise_fence(&b("old"), 12);
    ks.raise_fence(&b("old"), 11);
    ks.raise_fence(&b("new"), 5);
    ks.raise_fence(&b("zero"), 0);
    assert_eq!((ks.fence(b"old"), ks.fence(b"new")), (12, 5));
    ks.rollback_undo();
    assert_eq!(
        (ks.fence(b"old"), ks.fence(b"new"), ks.fence(b"zero")),
        (10, 0, 0)
    );
    let mut ch = ks.take_changes(Entry::clone).fences;
    ch.sort();
    assert_eq!(ch, vec![(b("new"), 0), (b("old"), 10)]);
    // Committed, the raise stays.
    ks.begin_undo();
    ks.raise_fence(&b("old"), 13);
    ks.commit_undo();
    assert_eq!(ks.fence(b"old"), 13);
}

#[test]
fn fences_only_rise_and_outlive_values() {
    let mut ks = Keyspace::default();
    ks.set_str(b("r"), b("v"), None, 1, 0);
    ks.raise_fence(&b("r"), 34);
    ks.raise_fence(&b("r"), 33);
    ks.remove(b"r", 0);
    assert_eq!(ks.fence(b"r"), 34);
    let ch = ks.take_changes(Entry::clone);
    assert_eq!(ch.fences, vec![(b("r"), 34)]);
    assert_eq!(ch.entries, vec![(b("r"), None)]);
}
