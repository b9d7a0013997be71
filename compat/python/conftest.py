"""Shared fixtures for the Python compatibility suite.

The suite talks to one Palisade node, named by the environment (scripts/compat.sh sets it):

  COMPAT_HOST      default 127.0.0.1
  COMPAT_PORT      default 6379
  COMPAT_PROTOCOL  "default" (whatever the installed redis-py does by itself), "2" or "3"

Every test uses keys under a prefix that is unique to the run, so runs against a follower and
against the leader of the same cluster never see each other's keys.
"""

import os
import uuid

import pytest
import redis

HOST = os.environ.get("COMPAT_HOST", "127.0.0.1")
PORT = int(os.environ.get("COMPAT_PORT", "6379"))
PROTOCOL = os.environ.get("COMPAT_PROTOCOL", "default")
RUN = uuid.uuid4().hex[:8]


def client_kwargs(**extra):
    """Keyword arguments for redis.Redis: the node under test and the protocol under test."""
    kwargs = dict(host=HOST, port=PORT, socket_timeout=10)
    if PROTOCOL != "default":
        kwargs["protocol"] = int(PROTOCOL)
    kwargs.update(extra)
    return kwargs


def make_client(**extra):
    return redis.Redis(**client_kwargs(**extra))


@pytest.fixture
def r():
    client = make_client()
    yield client
    client.close()


@pytest.fixture
def key(request):
    """A key name unique to this run and this test; call it with a suffix for more keys."""
    base = f"compat:{RUN}:{request.node.name}"

    def make(suffix=""):
        return f"{base}:{suffix}" if suffix else base

    return make


def pytest_report_header(config):
    return [
        f"palisade node: {HOST}:{PORT}  protocol: {PROTOCOL}  run: {RUN}",
        f"redis-py {redis.__version__}",
    ]


def token_of(client, name, value, px):
    """The fencing token of a lock that a library acquired with SET name value NX PX.

    LOCK with the same owner value is idempotent: it returns the token of the current grant
    (and resets the TTL to px), or None if someone else holds the key.
    """
    return client.execute_command("LOCK", name, value, "PX", px)


def assert_fenced(exc, token):
    """The error text of a FENCEDSET/FENCEDGET that carried a stale token."""
    text = str(exc.value)
    assert text.startswith(f"FENCED token {token} is lower than "), text
