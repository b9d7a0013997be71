"""redis-py with ssl=True against a Palisade node's TLS port.

scripts/compat.sh makes a CA and a node and a client certificate with openssl, starts every
node with a TLS port (client port + 100, `--tls-auth-clients optional`) and names them here:

  COMPAT_TLS_PORT  the TLS port of the node under test
  COMPAT_TLS_DIR   the directory holding ca.crt, client.crt and client.key

Run against a follower, the writes below are forwarded to the leader like plain ones.
"""

import os
import ssl

import pytest
import redis

from conftest import HOST, make_client

TLS_PORT = int(os.environ.get("COMPAT_TLS_PORT", "0"))
TLS_DIR = os.environ.get("COMPAT_TLS_DIR", "")


def tls_client(**extra):
    if not TLS_PORT or not TLS_DIR:
        pytest.fail("COMPAT_TLS_PORT and COMPAT_TLS_DIR must name the TLS port and its files")
    kwargs = dict(
        host=HOST,
        port=TLS_PORT,
        ssl=True,
        ssl_ca_certs=os.path.join(TLS_DIR, "ca.crt"),
        socket_timeout=10,
    )
    kwargs.update(extra)
    return redis.Redis(**kwargs)


def with_client_cert(**extra):
    return tls_client(
        ssl_certfile=os.path.join(TLS_DIR, "client.crt"),
        ssl_keyfile=os.path.join(TLS_DIR, "client.key"),
        **extra,
    )


@pytest.mark.parametrize("protocol", [2, 3])
def test_commands_over_tls(key, protocol):
    r = tls_client(protocol=protocol)
    assert r.ping() is True
    assert r.set(key(), "over tls") is True
    assert r.get(key()) == b"over tls"
    # The plain port sees the same keyspace.
    assert make_client().get(key()) == b"over tls"
    r.close()


def test_client_certificate_is_accepted(key):
    r = with_client_cert()
    assert r.ping() is True
    token = r.execute_command("LOCK", key(), "me", "PX", 10000)
    assert isinstance(token, int) and token > 0
    assert r.execute_command("UNLOCK", key(), "me") == 1
    r.close()


def test_pubsub_over_tls(key):
    r = tls_client()
    p = r.pubsub()
    p.subscribe(key("ch"))
    assert p.get_message(timeout=5)["type"] == "subscribe"
    assert make_client().publish(key("ch"), "hello") >= 1
    msg = p.get_message(timeout=5)
    assert msg["type"] == "message" and msg["data"] == b"hello"
    p.close()
    r.close()


def test_an_untrusted_server_certificate_is_refused():
    # The system's CAs do not include the test CA: the handshake must fail.
    r = redis.Redis(host=HOST, port=TLS_PORT, ssl=True, ssl_cert_reqs=ssl.CERT_REQUIRED,
                    socket_timeout=10)
    with pytest.raises(redis.ConnectionError):
        r.ping()
