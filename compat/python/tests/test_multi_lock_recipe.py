"""The multi-key lock recipe (recipes/multi_lock.py) against a Palisade node: all keys or none,
a token per key, a waiter on overlapping keys served after the release, and crossed key
orders that do not deadlock."""

import threading

from conftest import RUN, make_client
from recipes.multi_lock import MultiLock, NotAcquired


def test_all_or_none_with_a_token_per_key():
    a, b = make_client(), make_client()
    k1, k2, k3 = f"{RUN}:m1", f"{RUN}:m2", f"{RUN}:m3"
    with MultiLock(a, [k1, k2], "alice", 10_000) as tokens:
        assert len(tokens) == 2 and tokens[0] != tokens[1]
        try:
            with MultiLock(b, [k2, k3], "bob", 10_000):
                raise AssertionError("bob got keys alice holds")
        except NotAcquired:
            pass
        assert b.execute_command("LOCK", k3, "carol", "PX", 1_000) is not None, "k3 stayed free"
        assert b.execute_command("UNLOCK", k3, "carol") == 1
    assert MultiLock(b, [k1, k2], "bob", 1_000).acquire() is not None, "released on exit"


def test_crossed_waiters_are_both_served():
    k1, k2 = f"{RUN}:x1", f"{RUN}:x2"
    holder = MultiLock(make_client(), [k1, k2], "holder", 10_000)
    assert holder.acquire() is not None
    got = {}

    def wait(name, keys):
        lock = MultiLock(make_client(socket_timeout=None), keys, name, 10_000, wait_ms=8_000)
        got[name] = lock.acquire()
        if got[name] is not None:
            lock.release()

    threads = [
        threading.Thread(target=wait, args=("w1", [k1, k2])),
        threading.Thread(target=wait, args=("w2", [k2, k1])),
    ]
    for t in threads:
        t.start()
    assert holder.release() == 2
    for t in threads:
        t.join(15)
    assert got["w1"] is not None and got["w2"] is not None, got
