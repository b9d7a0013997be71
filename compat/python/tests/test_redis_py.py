"""redis-py against Palisade: handshake, plain commands, pipelines, scripts, and redis.lock.Lock.

Runs unchanged under redis-py 8 (RESP3 by default, and with protocol=2) and redis-py 5 (RESP2),
as selected by COMPAT_PROTOCOL and by the virtualenv that runs it.
"""

import threading
import time

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError, NoScriptError, ResponseError
from redis.lock import Lock

from conftest import PROTOCOL, assert_fenced, make_client, token_of

REDIS_PY_MAJOR = int(redis.__version__.split(".")[0])
RESP3 = PROTOCOL == "3" or (PROTOCOL == "default" and REDIS_PY_MAJOR >= 8)


# --- handshake and server identity ------------------------------------------------------


def test_handshake_and_protocol(r):
    assert r.ping() is True
    conn = r.connection_pool.get_connection()
    try:
        # redis-py 8 sent HELLO 3 (RESP3) unless protocol=2 was asked for.
        assert str(conn.protocol) == ("3" if RESP3 else "2") or conn.protocol == (3 if RESP3 else 2)
    finally:
        r.connection_pool.release(conn)


def test_info_looks_like_redis(r):
    info = r.info()
    assert info["redis_version"] == "7.2.0"
    assert info["role"] == "master"
    assert info["loading"] == 0
    assert "raft_role" in r.info("raft")


def test_client_setname_getname(r):
    assert r.client_setname("compat-python") is True
    assert r.client_getname() in ("compat-python", b"compat-python")


# --- strings, keys and expiry -----------------------------------------------------------


def test_set_get_del(r, key):
    k = key()
    assert r.set(k, "v") is True
    assert r.get(k) == b"v"
    assert r.exists(k) == 1
    assert r.type(k) == b"string"
    assert r.delete(k) == 1
    assert r.get(k) is None
    assert r.delete(k) == 0


def test_set_nx_px_is_what_locks_use(r, key):
    k = key()
    assert r.set(k, "owner-a", nx=True, px=10_000) is True
    # SET NX on a held key answers nil, which redis-py turns into None.
    assert r.set(k, "owner-b", nx=True, px=10_000) is None
    assert r.get(k) == b"owner-a"
    assert 0 < r.pttl(k) <= 10_000
    assert r.set(k, "owner-c", xx=True, get=True) == b"owner-a"


def test_binary_values_round_trip(r, key):
    raw = bytes(range(256))
    assert r.set(key(), raw) is True
    assert r.get(key()) == raw


def test_expiry_commands(r, key):
    k = key()
    r.set(k, "v")
    assert r.ttl(k) == -1
    assert r.pexpire(k, 60_000) is True
    assert 0 < r.pttl(k) <= 60_000
    assert r.expire(k, 120) is True
    assert 60 < r.ttl(k) <= 120
    assert r.persist(k) is True
    assert r.ttl(k) == -1
    assert r.ttl(key("missing")) == -2
    r.set(k, "v", px=150)
    time.sleep(0.5)
    assert r.get(k) is None
    assert r.exists(k) == 0


def test_counters(r, key):
    k = key()
    assert r.incr(k) == 1
    assert r.incrby(k, 41) == 42
    assert r.decr(k) == 41
    assert r.decrby(k, 40) == 1
    r.set(key("text"), "abc")
    with pytest.raises(ResponseError, match="not an integer"):
        r.incr(key("text"))


def test_getdel_setex_keys_scan(r, key):
    assert r.execute_command("SETEX", key("a"), 100, "1") in (True, b"OK")
    assert r.execute_command("PSETEX", key("b"), 100_000, "2") in (True, b"OK")
    assert r.getdel(key("a")) == b"1"
    assert r.get(key("a")) is None
    r.set(key("c"), "3")
    found = sorted(r.keys(key("*")))
    assert found == [key("b").encode(), key("c").encode()]
    assert sorted(r.scan_iter(match=key("*"), count=2)) == found


def test_unknown_command_error_text(r):
    with pytest.raises(ResponseError, match="unknown command 'NOSUCHCOMMAND'"):
        r.execute_command("NOSUCHCOMMAND", "x")


# --- pipelines ----------------------------------------------------------------------------


def test_pipeline_without_transaction(r, key):
    pipe = r.pipeline(transaction=False)
    pipe.set(key(), "1").incr(key()).get(key()).pexpire(key(), 10_000).delete(key("missing"))
    assert pipe.execute() == [True, 2, b"2", True, 0]


def test_pipeline_with_transaction(r, key):
    # redis-py's default pipeline wraps the commands in MULTI/EXEC.
    with r.pipeline() as pipe:
        pipe.set(key(), "1").incr(key()).get(key())
        assert pipe.execute() == [True, 2, b"2"]


def test_pipeline_error_in_the_middle(r, key):
    r.set(key("text"), "abc")
    pipe = r.pipeline(transaction=False)
    pipe.set(key(), "1").incr(key("text")).get(key())
    result = pipe.execute(raise_on_error=False)
    assert result[0] is True
    assert isinstance(result[1], ResponseError)
    assert result[2] == b"1"


# --- scripts ------------------------------------------------------------------------------


def test_register_script_return_types(r, key):
    script = r.register_script(
        """
        redis.call('set', KEYS[1], ARGV[1])
        local missing = redis.call('get', KEYS[2])
        return {redis.call('get', KEYS[1]), 42, tonumber(ARGV[2]) + 1, missing, 'after', nil, 'cut'}
        """
    )
    # As in Redis: a missing key is Lua false inside the script, and false becomes a null
    # element; a real nil ends the table.
    assert script(keys=[key("a"), key("missing")], args=["x", 9]) == [b"x", 42, 10, None, b"after"]


def test_register_script_reloads_after_script_flush(r, key):
    script = r.register_script("return redis.call('incr', KEYS[1])")
    assert script(keys=[key()]) == 1
    r.script_flush()
    # EVALSHA now answers NOSCRIPT; redis-py's Script loads the body and retries.
    assert script(keys=[key()]) == 2
    assert r.script_exists(script.sha) == [True]


def test_evalsha_unknown_is_noscript(r):
    with pytest.raises(NoScriptError):
        r.evalsha("0" * 40, 0)


def test_script_errors_and_status_replies(r, key):
    assert r.eval("return redis.status_reply('FINE')", 0) in (b"FINE", "FINE", True)
    with pytest.raises(ResponseError, match="boom"):
        r.eval("return redis.error_reply('boom')", 0)
    r.set(key(), "abc")
    with pytest.raises(ResponseError):
        r.eval("return redis.call('incr', KEYS[1])", 1, key())


# --- redis.lock.Lock ----------------------------------------------------------------------


def test_lock_acquire_owned_release(r, key):
    lock = r.lock(key(), timeout=10)
    assert lock.acquire(blocking=False) is True
    assert lock.locked() is True
    assert lock.owned() is True
    lock.release()
    assert lock.locked() is False
    assert lock.owned() is False


def test_lock_context_manager(r, key):
    with r.lock(key(), timeout=10) as lock:
        assert lock.owned()
    assert r.exists(key()) == 0


def test_lock_non_blocking_contention(r, key):
    holder = r.lock(key(), timeout=10)
    other = Lock(make_client(), key(), timeout=10)
    assert holder.acquire(blocking=False)
    assert other.acquire(blocking=False) is False
    assert other.owned() is False
    holder.release()
    assert other.acquire(blocking=False) is True
    other.release()


def test_lock_blocking_with_timeout_gives_up(r, key):
    holder = r.lock(key(), timeout=10)
    assert holder.acquire(blocking=False)
    other = Lock(make_client(), key(), timeout=10, sleep=0.05)
    started = time.monotonic()
    assert other.acquire(blocking=True, blocking_timeout=0.4) is False
    assert 0.35 <= time.monotonic() - started < 5
    holder.release()


def test_lock_blocking_waits_for_release(r, key):
    # thread_local=False: the lock is released by another thread (the timer's).
    holder = r.lock(key(), timeout=10, thread_local=False)
    assert holder.acquire(blocking=False)
    threading.Timer(0.3, holder.release).start()
    waiter = Lock(make_client(), key(), timeout=10, sleep=0.05)
    started = time.monotonic()
    assert waiter.acquire(blocking=True, blocking_timeout=5) is True
    assert time.monotonic() - started >= 0.25
    waiter.release()


def test_lock_extend(r, key):
    lock = r.lock(key(), timeout=2)
    assert lock.acquire(blocking=False)
    assert lock.extend(10) is True  # adds 10 s to the remaining TTL
    assert 10_000 < r.pttl(key()) <= 12_000
    assert lock.extend(3, replace_ttl=True) is True
    assert 2_000 < r.pttl(key()) <= 3_000
    lock.release()


def test_lock_reacquire(r, key):
    lock = r.lock(key(), timeout=5)
    assert lock.acquire(blocking=False)
    r.pexpire(key(), 1_000)
    assert lock.reacquire() is True
    assert 4_000 < r.pttl(key()) <= 5_000
    lock.release()


def test_lock_release_after_expiry_raises(r, key):
    lock = r.lock(key(), timeout=0.2)
    assert lock.acquire(blocking=False)
    time.sleep(0.5)
    assert lock.owned() is False
    with pytest.raises(LockNotOwnedError):
        lock.release()


def test_lock_extend_after_takeover_raises(r, key):
    lock = r.lock(key(), timeout=0.2)
    assert lock.acquire(blocking=False)
    time.sleep(0.5)
    thief = Lock(make_client(), key(), timeout=10)
    assert thief.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        lock.extend(5)
    with pytest.raises(LockError):
        lock.reacquire()
    thief.release()


# --- the fencing token --------------------------------------------------------------------


def test_fencing_token_for_a_redis_py_lock(r, key):
    """Acquire with redis-py's Lock, ask Palisade for the grant's token, write with it.

    A writer whose lease ran out and whose lock passed to someone else is rejected.
    """
    name, resource = key("lock"), key("resource")
    a = Lock(make_client(), name, timeout=0.3)
    assert a.acquire(blocking=False)
    token_a = token_of(r, name, a.local.token, 300)
    assert isinstance(token_a, int) and token_a > 0
    # Asking again is idempotent: same owner, same grant, same token.
    assert token_of(r, name, a.local.token, 300) == token_a
    assert r.execute_command("FENCEDSET", resource, "from-a", token_a) in (True, b"OK", "OK")

    time.sleep(0.6)  # A stalls; its lease expires.
    b = Lock(make_client(), name, timeout=10)
    assert b.acquire(blocking=False)
    token_b = token_of(r, name, b.local.token, 10_000)
    assert token_b > token_a
    # A different owner cannot get B's token.
    assert token_of(r, name, a.local.token, 10_000) is None
    assert r.execute_command("FENCECHECK", name, token_b) == 1
    assert r.execute_command("FENCECHECK", name, token_a) == 0
    r.execute_command("FENCEDSET", resource, "from-b", token_b)

    # A wakes up and writes with its old token: rejected.
    with pytest.raises(ResponseError) as exc:
        r.execute_command("FENCEDSET", resource, "late-a", token_a)
    assert_fenced(exc, token_a)
    assert r.get(resource) == b"from-b"
    b.release()


def test_lockinfo_shape(r, key):
    lock = r.lock(key(), timeout=10)
    assert lock.acquire(blocking=False)
    token = token_of(r, key(), lock.local.token, 10_000)
    info = r.execute_command("LOCKINFO", key())
    if isinstance(info, dict):  # RESP3 map
        info = {k.decode() if isinstance(k, bytes) else k: v for k, v in info.items()}
    else:  # RESP2 flat array
        info = {info[i].decode(): info[i + 1] for i in range(0, len(info), 2)}
    assert RESP3 == isinstance(r.execute_command("LOCKINFO", key()), dict)
    assert info["owner"] == lock.local.token
    assert info["token"] == token
    assert 0 < info["pttl"] <= 10_000
    lock.release()
    assert r.execute_command("LOCKINFO", key()) is None
