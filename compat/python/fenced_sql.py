"""Fencing a SQL table with Palisade tokens: the worked example of docs/migrating-from-redlock.md.

The lock is taken with an unmodified library (here redis-py's Lock, i.e. SET NX PX). Its grant's
fencing token comes from Palisade's LOCK command. The table keeps, per row, the highest token
that has written it (the `fence` column), and every write is one conditional UPDATE, so the
check and the write are a single atomic step inside the database.

tests/test_sql_fencing.py runs this file against a Palisade cluster and SQLite.
"""

import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    id      TEXT PRIMARY KEY,
    balance INTEGER NOT NULL,
    fence   INTEGER NOT NULL DEFAULT 0   -- highest fencing token that wrote this row
)
"""


class StaleToken(Exception):
    """A newer lock holder has written the row: this holder's lease is gone; stop."""


def fencing_token(client, lock):
    """The fencing token of the grant that `lock` (a redis.lock.Lock) holds, or None if lost.

    LOCK with the owner value the library stored is idempotent: Palisade recognises the key
    that SET NX PX created as a lock held by that value, and returns that grant's token.
    It also resets the TTL to the given time, so pass the lock's own timeout.
    """
    px = int(lock.timeout * 1000)
    return client.execute_command("LOCK", lock.name, lock.local.token, "PX", px)


def open_db(path=":memory:"):
    db = sqlite3.connect(path, isolation_level=None)  # autocommit; transactions are explicit
    db.execute(SCHEMA)
    return db


def add_to_balance(db, account, amount, token):
    """Read-modify-write of one row, fenced by `token`.

    The UPDATE succeeds only if no holder with a higher token has written the row
    (`fence <= token`: an equal token is the same holder writing again, as with FENCEDSET).
    Raising the fence and writing the value happen in the same statement.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute(
            "SELECT balance, fence FROM accounts WHERE id = ?", (account,)
        ).fetchone()
        if row is None:
            raise KeyError(account)
        balance, fence = row
        if fence > token:
            raise StaleToken(f"token {token} is lower than {fence}")
        updated = db.execute(
            "UPDATE accounts SET balance = ?, fence = ? WHERE id = ? AND fence <= ?",
            (balance + amount, token, account, token),
        ).rowcount
        if updated != 1:
            raise StaleToken(f"token {token} was overtaken")
        db.execute("COMMIT")
        return balance + amount
    except BaseException:
        db.execute("ROLLBACK")
        raise


def set_balance_once(db, account, balance, token):
    """A blind write in its strictest form: `fence < token`, one write per token.

    0 rows updated means that this token, or a higher one, has already written the row.
    """
    return db.execute(
        "UPDATE accounts SET balance = ?, fence = ? WHERE id = ? AND fence < ?",
        (balance, token, account, token),
    ).rowcount
