"""redis-py's RedisCluster, unmodified, with the node under test as its only seed.

Palisade presents its one Raft group as a Redis Cluster of one shard (docs/cluster.md,
"Cluster-mode clients"): CLUSTER SLOTS lists the leader as master of 0-16383 and the
followers as replicas. The client discovers the other nodes by itself, routes by slot, and
every command works whichever node it reaches.

When COMPAT_KILL_LEADER names a command (scripts/compat.sh does not set it: it would take
the shared cluster's leader away from the other suites), the last test runs it to kill the
leader and checks that the client recovers by itself.
"""

import os
import subprocess
import time

import pytest
from redis.cluster import RedisCluster
from redis.lock import Lock

from conftest import HOST, PORT, client_kwargs


@pytest.fixture
def rc():
    kwargs = client_kwargs()
    kwargs.pop("host"), kwargs.pop("port")
    client = RedisCluster(host=HOST, port=PORT, **kwargs)
    yield client
    client.close()


def test_discovers_the_whole_group(rc):
    nodes = rc.get_nodes()
    assert len(nodes) == 3, nodes
    assert len([n for n in nodes if n.server_type == "primary"]) == 1
    assert rc.cluster_keyslot("{user1000}.following") == 3443
    assert rc.ping(target_nodes=RedisCluster.ALL_NODES)


def test_set_get_and_a_pipeline(rc, key):
    assert rc.set(key("a"), "1")
    assert rc.get(key("a")) == b"1"
    pipe = rc.pipeline()
    for i in range(20):
        pipe.set(key(f"p{i}"), i)
    for i in range(20):
        pipe.get(key(f"p{i}"))
    replies = pipe.execute()
    assert replies[:20] == [True] * 20
    assert replies[20:] == [str(i).encode() for i in range(20)]


def test_library_lock_and_fencing(rc, key):
    name = key("{res}")
    lock = Lock(rc, name, timeout=5)
    assert lock.acquire(blocking=False)
    # The grant's token, from the value the library wrote (SET NX PX).
    value = lock.local.token
    token = rc.execute_command("LOCK", name, value, "PX", 5000)
    assert isinstance(token, int) and token > 0
    data = key("{res}:data")
    assert rc.execute_command("FENCEDSET", data, "v1", token) in (b"OK", "OK", True)
    with pytest.raises(Exception, match="FENCED"):
        rc.execute_command("FENCEDSET", data, "old", token - 1 if token > 1 else 0)
    lock.release()
    assert rc.get(data) == b"v1"


def test_lock_commands_route_by_their_key(rc, key):
    name = key("{l}")
    token = rc.execute_command("LOCK", name, "me", "PX", 5000)
    assert token > 0
    assert rc.execute_command("RENEW", name, "me", "PX", 5000) == token
    assert rc.execute_command("UNLOCK", name, "me") == 1


@pytest.mark.skipif(not os.environ.get("COMPAT_KILL_LEADER"), reason="COMPAT_KILL_LEADER unset")
def test_recovers_after_the_leader_dies(rc, key):
    assert rc.set(key("before"), "1")
    subprocess.run(os.environ["COMPAT_KILL_LEADER"], shell=True, check=True)
    deadline = time.time() + 30
    while True:
        try:
            assert rc.set(key("after"), "2")
            break
        except AssertionError:
            raise
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    assert rc.get(key("after")) == b"2"
    assert rc.get(key("before")) == b"1"
    token = rc.execute_command("LOCK", key("{k}"), "me", "PX", 5000)
    assert token > 0
