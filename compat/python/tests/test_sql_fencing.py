"""The worked SQL example of docs/migrating-from-redlock.md (fenced_sql.py), with SQLite.

Client A takes a redis-py Lock, gets its token, and writes. A stalls past its lease; B takes
the lock, gets a higher token, and writes. A's late write is rejected by the database itself.
"""

import time

import pytest
from redis.lock import Lock

import fenced_sql
from conftest import make_client


@pytest.fixture
def db(tmp_path):
    db = fenced_sql.open_db(str(tmp_path / "bank.sqlite3"))
    db.execute("INSERT INTO accounts (id, balance) VALUES ('alice', 100)")
    yield db
    db.close()


def test_stale_holder_is_rejected_by_the_database(db, key):
    a_client, b_client = make_client(), make_client()
    a = Lock(a_client, key(), timeout=0.3)
    assert a.acquire(blocking=False)
    token_a = fenced_sql.fencing_token(a_client, a)
    assert fenced_sql.add_to_balance(db, "alice", 10, token_a) == 110
    # The holder may write again with the same token.
    assert fenced_sql.add_to_balance(db, "alice", 5, token_a) == 115

    time.sleep(0.6)  # A stalls; its lease expires
    b = Lock(b_client, key(), timeout=10)
    assert b.acquire(blocking=False)
    token_b = fenced_sql.fencing_token(b_client, b)
    assert token_b > token_a
    assert fenced_sql.add_to_balance(db, "alice", 1, token_b) == 116

    # A resumes and writes with its old token: the row's fence says no.
    with pytest.raises(fenced_sql.StaleToken):
        fenced_sql.add_to_balance(db, "alice", 1_000, token_a)
    assert db.execute("SELECT balance, fence FROM accounts").fetchone() == (116, token_b)
    # A lost lock has no token: LOCK with A's value answers nil while B holds the key.
    assert fenced_sql.fencing_token(a_client, a) is None
    b.release()


def test_strict_once_per_token_update(db, key):
    client = make_client()
    lock = Lock(client, key(), timeout=10)
    assert lock.acquire(blocking=False)
    token = fenced_sql.fencing_token(client, lock)
    assert fenced_sql.set_balance_once(db, "alice", 7, token) == 1
    assert fenced_sql.set_balance_once(db, "alice", 8, token) == 0  # same token: once only
    assert fenced_sql.set_balance_once(db, "alice", 9, token - 1) == 0  # lower: rejected
    assert db.execute("SELECT balance FROM accounts").fetchone() == (7,)
    lock.release()
