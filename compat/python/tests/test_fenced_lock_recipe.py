"""The fenced-lock recipe (recipes/fenced_lock.py) against a Palisade node.

1. Two contenders on one key: the second blocks in LOCK ... WAIT until the first releases,
   and its token is higher.
2. A holder whose renewal stalls loses the lock at its TTL, its loss callback fires (from the
   lock_expired event), and its late FENCEDSET is rejected once the next holder has written.
"""

import queue
import threading
import time

import pytest
from redis.exceptions import ResponseError

from conftest import assert_fenced, make_client
from recipes.fenced_lock import FencedLock


@pytest.fixture
def clients():
    made = []

    def make():
        made.append(make_client())
        return made[-1]

    yield make
    for c in made:
        c.close()


def test_second_contender_waits_for_the_first(clients, key):
    lost = []
    a = FencedLock(clients(), key(), ttl_ms=5_000, on_lost=lost.append)
    b = FencedLock(clients(), key(), ttl_ms=5_000, on_lost=lost.append)
    token_a = a.acquire(wait_ms=1_000)
    assert isinstance(token_a, int)

    granted = {}

    def contend():
        granted["token"] = b.acquire(wait_ms=8_000)
        granted["at"] = time.monotonic()

    waiter = threading.Thread(target=contend)
    waiter.start()
    time.sleep(1.0)
    assert waiter.is_alive(), "the second contender did not wait"
    released_at = time.monotonic()
    assert a.release() is True
    waiter.join(timeout=8)
    assert not waiter.is_alive()
    assert granted["token"] > token_a
    assert granted["at"] >= released_at
    assert b.release() is True
    time.sleep(0.3)  # let any lock_released event arrive: a release is not a loss
    assert lost == []


def test_stalled_holder_loses_the_lock_and_is_fenced(clients, key):
    lost = queue.Queue()
    r = clients()
    a = FencedLock(clients(), key(), ttl_ms=1_000, on_lost=lost.put)
    token_a = a.acquire(wait_ms=1_000)
    assert r.execute_command("FENCEDSET", key("res"), "from-a", token_a)
    # Renewal keeps the lock past its TTL...
    time.sleep(1.5)
    assert r.execute_command("FENCECHECK", key(), token_a) == 1  # A is still the holder
    assert lost.empty()

    a._stop_renewal.set()  # ...until the holder stalls (GC pause, lost CPU, ...)
    b = FencedLock(clients(), key(), ttl_ms=10_000)
    token_b = b.acquire(wait_ms=5_000)  # queued until A's lease runs out
    assert token_b is not None and token_b > token_a
    try:
        reason = lost.get(timeout=5)
    except queue.Empty:
        pytest.fail("no loss callback within 5 s of the lease's end (no lock_expired event?)")
    assert reason == "lock_expired"

    assert r.execute_command("FENCEDSET", key("res"), "from-b", token_b)
    with pytest.raises(ResponseError) as exc:  # A wakes up and writes with its old token
        r.execute_command("FENCEDSET", key("res"), "late-a", token_a)
    assert_fenced(exc, token_a)
    assert r.get(key("res")) == b"from-b"
    assert b.release() is True
