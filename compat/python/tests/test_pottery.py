"""pottery's Redlock with a single master: the Palisade address replaces the N Redis masters.

pottery acquires with SET redlock:<key> <uuid4> NX PX, and checks, extends and releases with
Lua scripts (GET + compare, then PTTL / PEXPIRE / DEL) run through redis-py's Script.
"""

import threading
import time

import pytest
from pottery import (
    ExtendUnlockedLock,
    Redlock,
    ReleaseUnlockedLock,
    TooManyExtensions,
    synchronize,
)
from redis.exceptions import ResponseError

from conftest import assert_fenced, make_client, token_of


@pytest.fixture
def master():
    client = make_client()
    yield client
    client.close()


def test_acquire_locked_release(master, key):
    lock = Redlock(key=key(), masters={master}, auto_release_time=10)
    assert lock.acquire(blocking=False) is True
    assert master.get(lock.key) is not None  # stored as redlock:<key>
    assert lock.key == f"redlock:{key()}"
    assert 9 < lock.locked() <= 10
    lock.release()
    assert lock.locked() == 0
    assert master.exists(lock.key) == 0


def test_context_manager(master, key):
    with Redlock(key=key(), masters={master}, auto_release_time=10) as lock:
        assert lock.locked() > 0
    assert master.exists(f"redlock:{key()}") == 0


def test_contention(master, key):
    a = Redlock(key=key(), masters={master}, auto_release_time=10)
    b = Redlock(key=key(), masters={make_client()}, auto_release_time=10)
    assert a.acquire(blocking=False)
    assert b.acquire(blocking=False) is False
    assert b.acquire(timeout=0.3) is False
    assert b.locked() == 0
    a.release()
    assert b.acquire(blocking=False) is True
    b.release()


def test_blocking_acquire_waits_for_release(master, key):
    a = Redlock(key=key(), masters={master}, auto_release_time=10)
    assert a.acquire(blocking=False)
    threading.Timer(0.3, a.release).start()
    b = Redlock(key=key(), masters={make_client()}, auto_release_time=10)
    started = time.monotonic()
    assert b.acquire(timeout=5) is True
    assert time.monotonic() - started >= 0.25
    b.release()


def test_extend_and_extension_limit(master, key):
    lock = Redlock(key=key(), masters={master}, auto_release_time=1, num_extensions=2)
    assert lock.acquire(blocking=False)
    master.pexpire(lock.key, 300)
    lock.extend()
    assert 800 < master.pttl(lock.key) <= 1_000
    lock.extend()
    with pytest.raises(TooManyExtensions):
        lock.extend()
    lock.release()


def test_expired_lock_cannot_be_extended_or_released(master, key):
    lock = Redlock(key=key(), masters={master}, auto_release_time=0.2)
    assert lock.acquire(blocking=False)
    time.sleep(0.5)
    assert lock.locked() == 0
    with pytest.raises(ExtendUnlockedLock):
        lock.extend()
    with pytest.raises(ReleaseUnlockedLock):
        lock.release()


def test_synchronize_decorator(master, key):
    calls = []

    @synchronize(key=key(), masters={master}, auto_release_time=10)
    def critical():
        calls.append(master.exists(f"redlock:{key()}"))

    critical()
    critical()
    assert calls == [1, 1]
    assert master.exists(f"redlock:{key()}") == 0


def test_fencing_token_for_a_pottery_redlock(master, key):
    resource = key("resource")
    a = Redlock(key=key(), masters={master}, auto_release_time=0.3)
    assert a.acquire(blocking=False)
    # pottery keeps the lock value in Redlock._uuid and the key name in Redlock.key.
    token_a = token_of(master, a.key, a._uuid, 300)
    assert isinstance(token_a, int)
    master.execute_command("FENCEDSET", resource, "from-a", token_a)

    time.sleep(0.6)
    b = Redlock(key=key(), masters={make_client()}, auto_release_time=10)
    assert b.acquire(blocking=False)
    token_b = token_of(master, b.key, b._uuid, 10_000)
    assert token_b > token_a
    master.execute_command("FENCEDSET", resource, "from-b", token_b)

    with pytest.raises(ResponseError) as exc:
        master.execute_command("FENCEDSET", resource, "late-a", token_a)
    assert_fenced(exc, token_a)
    assert master.get(resource) == b"from-b"
    b.release()
