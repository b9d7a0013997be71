use std::collections::VecDeque;

use serde::Serialize;

use super::*;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn id(seq: u64) -> WaiterId {
    WaiterId {
        node: 1,
        boot: 7,
        seq,
    }
}

/// A LOCK at `now` with revision `rev`; waits (for ever) as waiter `seq` if given.
fn lock(
    ks: &mut Keyspace,
    owner: &str,
    ttl: u64,
    delay: u64,
    seq: Option<u64>,
    now: u64,
    rev: u64,
) -> Acquired {
    let (key, owner) = (b("k"), b(owner));
    let a = Acquire {
        key: &key,
        owner: &owner,
        ttl_ms: ttl,
        delay_ms: delay,
        wait: seq.map(|s| (id(s), None)),
    };
    ks.lock_acquire(a, now, rev)
}

fn holder(ks: &Keyspace, now: u64) -> Option<(Bytes, u64)> {
    ks.get(b"k", now).map(|e| match &e.value {
        Value::Str(v) => (v.clone(), e.token),
        _ => panic!("not a lock"),
    })
}

/// The grants (owner, token, waiter) among the recorded events.
fn grants(ks: &mut Keyspace) -> Vec<(Bytes, u64, Option<u64>)> {
    ks.take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Lock {
                kind: LockEventKind::Granted,
                owner,
                token,
                waiter,
                ..
            } => Some((owner, token, waiter.map(|w| w.seq))),
            _ => None,
        })
        .collect()
}

#[test]
fn a_release_grants_the_queue_in_arrival_order_with_rising_tokens() {
    let mut ks = Keyspace::default();
    assert_eq!(
        lock(&mut ks, "a", 1000, 0, None, 0, 1),
        Acquired::Granted(1)
    );
    assert_eq!(lock(&mut ks, "b", 1000, 0, Some(2), 1, 2), Acquired::Queued);
    assert_eq!(lock(&mut ks, "c", 1000, 0, Some(3), 2, 3), Acquired::Queued);
    // Without a waiter, a LOCK neither waits nor jumps the queue.
    assert_eq!(lock(&mut ks, "d", 1000, 0, None, 3, 4), Acquired::Busy);
    assert_eq!(ks.lock_queue(b"k", 3), (2, 0));
    assert_eq!(grants(&mut ks), vec![(b("a"), 1, None)]);

    assert!(ks.lock_release(&b("k"), b"a", 4, 5));
    assert_eq!(
        holder(&ks, 4),
        Some((b("b"), 5)),
        "granted in the same entry"
    );
    assert_eq!(grants(&mut ks), vec![(b("b"), 5, Some(2))]);
    assert!(
        !ks.lock_release(&b("k"), b"a", 5, 6),
        "a no longer holds it"
    );
    assert!(ks.lock_release(&b("k"), b"b", 6, 7));
    assert_eq!(holder(&ks, 6), Some((b("c"), 7)));
    assert!(ks.lock_release(&b("k"), b"c", 7, 8));
    assert_eq!(holder(&ks, 7), None);
    assert!(
        ks.lock_meta(b"k").is_none(),
        "an empty queue leaves no record"
    );
}

#[test]
fn an_expired_lease_goes_to_the_first_waiter_and_skips_waits_that_ran_out() {
    let mut ks = Keyspace::default();
    lock(&mut ks, "a", 100, 0, None, 0, 1);
    let (key, x, y) = (b("k"), b("x"), b("y"));
    // x waits until 50 (cluster time), y for ever.
    let wait = |owner, seq, until| Acquire {
        key: &key,
        owner,
        ttl_ms: 500,
        delay_ms: 0,
        wait: Some((id(seq), until)),
    };
    assert_eq!(
        ks.lock_acquire(wait(&x, 2, Some(50)), 10, 2),
        Acquired::Queued
    );
    assert_eq!(ks.lock_acquire(wait(&y, 3, None), 20, 3), Acquired::Queued);
    assert_eq!(
        ks.locks_due(99, 10),
        Vec::<Bytes>::new(),
        "nothing to do yet"
    );
    assert_eq!(ks.locks_due(100, 10), vec![b("k")]);
    ks.take_events();
    // The leader's eviction entry at 100 expires a's lease and grants y (x's wait ended).
    assert!(ks.expire_lease(&b("k"), 100));
    assert!(ks.settle_lock(&b("k"), 100, 4));
    assert_eq!(holder(&ks, 100), Some((b("y"), 4)));
    let kinds: Vec<_> = ks
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Lock { kind, owner, .. } => Some((kind, owner)),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (LockEventKind::Expired, b("a")),
            (LockEventKind::Granted, b("y"))
        ]
    );
    assert_eq!(ks.get(b"k", 100).and_then(|e| e.expire_at), Some(600));
}

#[test]
fn a_lock_delay_holds_the_key_after_an_expiry_but_not_after_an_unlock() {
    let mut ks = Keyspace::default();
    lock(&mut ks, "a", 100, 300, None, 0, 1);
    assert_eq!(lock(&mut ks, "b", 100, 0, Some(2), 10, 2), Acquired::Queued);
    // a's lease ends at 100; nobody gets the key before 400.
    ks.settle_lock(&b("k"), 150, 3);
    assert_eq!(holder(&ks, 150), None);
    assert_eq!(ks.lock_queue(b"k", 150), (1, 250));
    assert_eq!(lock(&mut ks, "c", 100, 0, None, 200, 4), Acquired::Busy);
    assert_eq!(ks.locks_due(399, 10), Vec::<Bytes>::new());
    assert_eq!(ks.locks_due(400, 10), vec![b("k")]);
    ks.settle_lock(&b("k"), 400, 5);
    assert_eq!(holder(&ks, 400), Some((b("b"), 5)));

    // The same delay does not apply when the holder releases.
    let mut ks = Keyspace::default();
    lock(&mut ks, "a", 100, 300, None, 0, 1);
    assert!(ks.lock_release(&b("k"), b"a", 50, 2));
    assert_eq!(
        lock(&mut ks, "c", 100, 0, None, 51, 3),
        Acquired::Granted(3)
    );
    // Nor does a delay set for an earlier lease of the key.
    let mut ks = Keyspace::default();
    lock(&mut ks, "a", 100, 300, None, 0, 1);
    assert!(ks.lock_release(&b("k"), b"a", 10, 2));
    lock(&mut ks, "b", 100, 0, None, 20, 3);
    assert_eq!(
        lock(&mut ks, "c", 100, 0, None, 121, 4),
        Acquired::Granted(4)
    );
}

#[test]
fn a_retry_keeps_its_place_and_cancel_and_purge_leave_the_queue() {
    let mut ks = Keyspace::default();
    lock(&mut ks, "a", 1000, 0, None, 0, 1);
    lock(&mut ks, "b", 1000, 0, Some(2), 1, 2);
    lock(&mut ks, "c", 1000, 0, Some(3), 2, 3);
    // b's client retries (its first reply was lost): same place, new waiter id.
    lock(&mut ks, "b", 1000, 0, Some(4), 3, 4);
    let queue: Vec<_> = ks
        .lock_meta(b"k")
        .unwrap()
        .queue
        .iter()
        .map(|w| (w.owner.clone(), w.id.seq))
        .collect();
    assert_eq!(queue, vec![(b("b"), 4), (b("c"), 3)]);
    assert!(ks.lock_cancel(&b("k"), id(4), 5));
    assert!(!ks.lock_cancel(&b("k"), id(4), 5), "already gone");
    // Node 1 restarted with boot 8: its boot-7 waiters (c) are dropped, others stay.
    let other = WaiterId {
        node: 2,
        boot: 7,
        seq: 1,
    };
    let (key, d) = (b("k"), b("d"));
    let a = Acquire {
        key: &key,
        owner: &d,
        ttl_ms: 10,
        delay_ms: 0,
        wait: Some((other, None)),
    };
    assert_eq!(ks.lock_acquire(a, 6, 6), Acquired::Queued);
    assert!(ks.has_stale_waiters(1, 8));
    assert_eq!(ks.lock_purge(1, 8, 7), 1);
    assert!(!ks.has_stale_waiters(1, 8));
    assert!(
        !ks.has_stale_waiters(1, 7),
        "the current process's waiters are not stale"
    );
    assert!(ks.lock_release(&b("k"), b"a", 8, 8));
    assert_eq!(holder(&ks, 8), Some((b("d"), 8)));
    // A grant that reached nobody is released by its token, and only that lease.
    assert!(!ks.lock_release_token(&b("k"), 7, 9, 9));
    assert!(ks.lock_release_token(&b("k"), 8, 9, 9));
    assert_eq!(holder(&ks, 9), None);
}

#[test]
fn a_deleted_lock_is_due_for_its_waiter() {
    let mut ks = Keyspace::default();
    lock(&mut ks, "a", 1000, 0, None, 0, 1);
    lock(&mut ks, "b", 1000, 0, Some(2), 1, 2);
    ks.remove(b"k", 2);
    assert_eq!(ks.locks_due(2, 10), vec![b("k")]);
    ks.settle_lock(&b("k"), 3, 3);
    assert_eq!(holder(&ks, 3), Some((b("b"), 3)));
}

/// A script that queues or grants and is then rolled back leaves no trace of it.
#[test]
fn a_rolled_back_script_restores_the_queue() {
    let mut ks = Keyspace::default();
    lock(&mut ks, "a", 1000, 0, None, 0, 1);
    lock(&mut ks, "b", 1000, 0, Some(2), 1, 2);
    let before = ks.lock_meta(b"k").cloned();
    ks.take_changes(Entry::clone);
    ks.begin_undo();
    assert!(ks.lock_release(&b("k"), b"a", 2, 3));
    assert!(ks.lock_meta(b"k").is_none());
    ks.rollback_undo();
    assert_eq!(ks.lock_meta(b"k").cloned(), before);
    assert_eq!(holder(&ks, 2), Some((b("a"), 1)));
    // The store rewrites what the rollback restored.
    let ch = ks.take_changes(Entry::clone);
    assert_eq!(ch.locks, vec![(b("k"), before)]);
}

/// An RLOCK (or SEMACQUIRE with `mode`) at `now` with revision `rev`.
fn hold(
    ks: &mut Keyspace,
    mode: Mode,
    owner: &str,
    seq: Option<u64>,
    now: u64,
    rev: u64,
) -> Result<Acquired, &'static str> {
    let (key, owner) = (b("k"), b(owner));
    let a = Acquire {
        key: &key,
        owner: &owner,
        ttl_ms: 1000,
        delay_ms: 0,
        wait: seq.map(|s| (id(s), None)),
    };
    ks.lock_acquire_kind(a, mode, now, rev)
}

fn holders(ks: &Keyspace, now: u64) -> Vec<(Bytes, u64)> {
    ks.lock_holders(b"k", now)
        .map(|(_, hs)| hs.iter().map(|h| (h.owner.clone(), h.token)).collect())
        .unwrap_or_default()
}

#[test]
fn readers_share_writers_wait_and_the_queue_is_fifo() {
    let mut ks = Keyspace::default();
    let r = Mode::Shared;
    assert_eq!(hold(&mut ks, r, "r1", None, 0, 1), Ok(Acquired::Granted(1)));
    assert_eq!(hold(&mut ks, r, "r2", None, 1, 2), Ok(Acquired::Granted(2)));
    // A reader asking again keeps its token.
    assert_eq!(hold(&mut ks, r, "r1", None, 2, 3), Ok(Acquired::Held(1)));
    // A writer is refused, or waits, while readers hold the key.
    assert_eq!(lock(&mut ks, "w", 1000, 0, None, 3, 4), Acquired::Busy);
    assert_eq!(lock(&mut ks, "w", 1000, 0, Some(5), 4, 5), Acquired::Queued);
    // A reader behind a queued writer waits too (no writer starvation).
    assert_eq!(hold(&mut ks, r, "r3", None, 5, 6), Ok(Acquired::Busy));
    assert_eq!(hold(&mut ks, r, "r3", Some(7), 6, 7), Ok(Acquired::Queued));
    assert_eq!(hold(&mut ks, r, "r4", Some(8), 7, 8), Ok(Acquired::Queued));
    ks.take_events();
    assert!(ks.lock_release(&b("k"), b"r1", 8, 9));
    assert_eq!(holder(&ks, 8), None, "r2 still reads");
    assert!(ks.lock_release(&b("k"), b"r2", 9, 10));
    assert_eq!(holder(&ks, 9), Some((b("w"), 10)));
    assert!(holders(&ks, 9).is_empty());
    // The writer's release grants both readers at the head together, each its token.
    assert!(ks.lock_release(&b("k"), b"w", 10, 11));
    assert_eq!(holders(&ks, 10), vec![(b("r3"), 11), (b("r4"), 12)]);
    assert_eq!(
        grants(&mut ks),
        vec![
            (b("w"), 10, Some(5)),
            (b("r3"), 11, Some(7)),
            (b("r4"), 12, Some(8))
        ]
    );
    // RENEW keeps a reader's token; the lease expires on its own.
    assert_eq!(ks.lock_renew(&b("k"), &b("r3"), 5000, 11, 13), Some(11));
    ks.settle_lock(&b("k"), 1500, 14);
    assert_eq!(
        holders(&ks, 1500),
        vec![(b("r3"), 11)],
        "r4's lease ran out"
    );
    assert_eq!(ks.lock_holder_token(b"k", b"r3", 1500), Some(11));
    assert!(ks.lock_release(&b("k"), b"r3", 1600, 15));
    assert!(ks.lock_meta(b"k").is_none(), "nothing left");
}

#[test]
fn a_semaphore_keeps_its_limit_and_refuses_another() {
    let mut ks = Keyspace::default();
    let s2 = Mode::Semaphore(2);
    assert_eq!(hold(&mut ks, s2, "a", None, 0, 1), Ok(Acquired::Granted(1)));
    assert_eq!(hold(&mut ks, s2, "b", None, 0, 2), Ok(Acquired::Granted(2)));
    assert_eq!(hold(&mut ks, s2, "c", None, 0, 3), Ok(Acquired::Busy));
    assert_eq!(hold(&mut ks, s2, "c", Some(4), 0, 4), Ok(Acquired::Queued));
    assert_eq!(
        hold(&mut ks, Mode::Semaphore(3), "d", None, 0, 5),
        Err(LIMIT_MISMATCH)
    );
    assert_eq!(
        hold(&mut ks, Mode::Shared, "d", None, 0, 6),
        Err(KIND_MISMATCH)
    );
    assert_eq!(lock(&mut ks, "w", 1000, 0, None, 0, 7), Acquired::Busy);
    ks.take_events();
    // A permit's lease runs out alone: c takes it.
    assert_eq!(ks.lock_renew(&b("k"), &b("a"), 5000, 10, 8), Some(1));
    assert_eq!(ks.locks_due(1000, 10), vec![b("k")]);
    ks.settle_lock(&b("k"), 1000, 9);
    assert_eq!(holders(&ks, 1000), vec![(b("a"), 1), (b("c"), 9)]);
    // A grant that reached nobody is given back; a renewed one is not.
    assert!(!ks.lock_release_grant(&b("k"), 1, b"a", 1001, 10));
    assert!(ks.lock_release_grant(&b("k"), 9, b"c", 1001, 11));
    assert_eq!(holders(&ks, 1001), vec![(b("a"), 1)]);
}

#[test]
fn a_record_written_before_kinds_reads_without_them() {
    #[derive(Serialize)]
    struct Old {
        queue: VecDeque<Waiter>,
        delay: Option<(u64, u64)>,
        blocked_until: u64,
    }
    let w = Waiter {
        id: id(3),
        owner: b("o"),
        ttl_ms: 5,
        delay_ms: 0,
        deadline: Some(9),
    };
    let old = Old {
        queue: VecDeque::from(vec![w.clone()]),
        delay: Some((1, 2)),
        blocked_until: 7,
    };
    let bytes = postcard::to_allocvec(&old).unwrap();
    let read: LockMeta = postcard::from_bytes(&bytes).unwrap();
    assert_eq!(read.queue, old.queue);
    assert_eq!((read.delay, read.blocked_until), (Some((1, 2)), 7));
    assert_eq!(read.kinds, Kinds::default());
    let mut new = read.clone();
    new.kinds.mode = Some(Mode::Semaphore(4));
    new.kinds.modes.push((id(3), Mode::Semaphore(4)));
    let bytes = postcard::to_allocvec(&new).unwrap();
    assert_eq!(postcard::from_bytes::<LockMeta>(&bytes).unwrap(), new);
}

#[test]
fn notifications_follow_redis_keyspace_channels() {
    let [(ch, msg), (ev, key)] =
        lock_notifications(LockEventKind::Expired, b"res:1", 42, b"worker 7");
    assert_eq!(ch, b("__keyspace@0__:res:1"));
    assert_eq!(msg, b("lock_expired 42 worker 7"));
    assert_eq!(ev, b("__keyevent@0__:lock_expired"));
    assert_eq!(key, b("res:1"));
}
