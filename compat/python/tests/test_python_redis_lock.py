"""python-redis-lock (module redis_lock) against Palisade.

It acquires with SET lock:<name> <id> NX EX <s>. A busy acquire blocks in
BLPOP lock-signal:<name>, and release (a Lua script) wakes it with DEL + LPUSH + PEXPIRE on the
signal list. extend and reset are Lua scripts too; reset_all runs KEYS 'lock:*' inside Lua.
"""

import threading
import time

import pytest
import redis_lock
from redis.exceptions import ResponseError

from conftest import assert_fenced, make_client, token_of


@pytest.fixture
def conn():
    client = make_client()
    yield client
    client.close()


def test_acquire_release(conn, key):
    lock = redis_lock.Lock(conn, key(), expire=10)
    assert lock.acquire(blocking=False) is True
    assert lock.locked() is True
    assert lock.get_owner_id() == lock.id
    assert 0 < conn.ttl(f"lock:{key()}") <= 10
    lock.release()
    assert lock.locked() is False


def test_context_manager(conn, key):
    with redis_lock.Lock(conn, key(), expire=10) as lock:
        assert lock.locked()
    assert conn.exists(f"lock:{key()}") == 0


def test_non_blocking_contention(conn, key):
    a = redis_lock.Lock(conn, key(), expire=10)
    b = redis_lock.Lock(make_client(), key(), expire=10)
    assert a.acquire(blocking=False)
    assert b.acquire(blocking=False) is False
    a.release()
    assert b.acquire(blocking=False) is True
    b.release()


def test_blocking_acquire_is_woken_by_release_through_blpop(conn, key):
    a = redis_lock.Lock(conn, key(), expire=30)
    assert a.acquire(blocking=False)
    threading.Timer(0.3, a.release).start()
    b = redis_lock.Lock(make_client(), key(), expire=30)
    started = time.monotonic()
    # B blocks in BLPOP lock-signal:<name> for up to 10 s; A's release pushes to the list.
    assert b.acquire(blocking=True, timeout=10) is True
    took = time.monotonic() - started
    assert 0.25 <= took < 5, f"woken after {took:.2f}s: BLPOP was not woken by the release"
    b.release()


def test_blocking_acquire_times_out(conn, key):
    a = redis_lock.Lock(conn, key(), expire=10)
    assert a.acquire(blocking=False)
    b = redis_lock.Lock(make_client(), key(), expire=10)
    started = time.monotonic()
    assert b.acquire(blocking=True, timeout=1) is False
    assert 0.9 <= time.monotonic() - started < 5
    a.release()


def test_extend(conn, key):
    lock = redis_lock.Lock(conn, key(), expire=2)
    assert lock.acquire(blocking=False)
    lock.extend(expire=60)
    assert 55 < conn.ttl(f"lock:{key()}") <= 60
    lock.release()


def test_extend_and_release_after_expiry_raise(conn, key):
    lock = redis_lock.Lock(conn, key(), expire=1)
    assert lock.acquire(blocking=False)
    time.sleep(1.4)
    with pytest.raises(redis_lock.NotAcquired):
        lock.extend(expire=10)
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()


def test_reset_wakes_waiters(conn, key):
    a = redis_lock.Lock(conn, key(), expire=30)
    assert a.acquire(blocking=False)
    threading.Timer(0.3, redis_lock.Lock(make_client(), key()).reset).start()
    b = redis_lock.Lock(make_client(), key(), expire=30)
    assert b.acquire(blocking=True, timeout=10) is True
    assert b.get_owner_id() == b.id
    b.release()


def test_auto_renewal(conn, key):
    lock = redis_lock.Lock(conn, key(), expire=1, auto_renewal=True)
    assert lock.acquire(blocking=False)
    time.sleep(1.6)  # the renewal thread extends every 2/3 of the expiry
    assert lock.locked() and lock.get_owner_id() == lock.id
    lock.release()


def test_reset_all(conn, key):
    a = redis_lock.Lock(conn, key("a"), expire=30)
    b = redis_lock.Lock(conn, key("b"), expire=30)
    assert a.acquire(blocking=False) and b.acquire(blocking=False)
    redis_lock.reset_all(conn)
    assert conn.exists(f"lock:{key('a')}", f"lock:{key('b')}") == 0


def test_fencing_token_for_a_python_redis_lock(conn, key):
    resource = key("resource")
    a = redis_lock.Lock(conn, key(), expire=1)
    assert a.acquire(blocking=False)
    # The lock key is lock:<name> and its value is Lock.id.
    token_a = token_of(conn, f"lock:{key()}", a.id, 1_000)
    conn.execute_command("FENCEDSET", resource, "from-a", token_a)

    time.sleep(1.4)
    b = redis_lock.Lock(make_client(), key(), expire=10)
    assert b.acquire(blocking=False)
    token_b = token_of(conn, f"lock:{key()}", b.id, 10_000)
    assert token_b > token_a
    conn.execute_command("FENCEDSET", resource, "from-b", token_b)

    with pytest.raises(ResponseError) as exc:
        conn.execute_command("FENCEDSET", resource, "late-a", token_a)
    assert_fenced(exc, token_a)
    b.release()
