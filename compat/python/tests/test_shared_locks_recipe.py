"""The shared-lock and semaphore recipes (recipes/shared_locks.py) against a Palisade node:
readers hold together while a writer waits, a third permit waits for a release, and tokens
are distinct and fence."""

import threading

from conftest import RUN, make_client
from recipes.shared_locks import NotAcquired, Permit, SharedLock


def test_readers_share_and_a_writer_waits():
    key = f"{RUN}:shared"
    a, b, w = make_client(), make_client(), make_client(socket_timeout=None)
    with SharedLock(a, key, "r1", 10_000) as t1, SharedLock(b, key, "r2", 10_000) as t2:
        assert t1 != t2
        assert a.execute_command("LOCK", key, "w", "PX", 10_000) is None
        got = {}
        th = threading.Thread(
            target=lambda: got.update(t=w.execute_command("LOCK", key, "w", "PX", 10_000, "WAIT", 5_000))
        )
        th.start()
    th.join(10)
    assert int(got["t"]) > max(t1, t2)
    assert w.execute_command("UNLOCK", key, "w") == 1


def test_a_semaphore_admits_its_limit():
    key = f"{RUN}:sem"
    c1, c2, c3 = make_client(), make_client(), make_client(socket_timeout=None)
    p1, p2 = Permit(c1, key, "a", 2, 10_000), Permit(c2, key, "b", 2, 10_000)
    assert p1.acquire() is not None and p2.acquire() is not None
    try:
        with Permit(c3, key, "c", 2, 10_000):
            raise AssertionError("a third permit was granted")
    except NotAcquired:
        pass
    got = {}
    p3 = Permit(c3, key, "c", 2, 10_000, wait_ms=5_000)
    th = threading.Thread(target=lambda: got.update(t=p3.acquire()))
    th.start()
    assert p1.release()
    th.join(10)
    assert got["t"] > p2.token
    assert p2.renew() == p2.token
    assert c1.execute_command("FENCEDSET", f"{RUN}:res", "v", got["t"]) in (b"OK", "OK", True)
    assert p2.release() and p3.release()
