"""Recipe: locks on several keys at once on Palisade, with redis-py.

    with MultiLock(r, ["acct:1", "acct:2"], owner, ttl_ms=10_000, wait_ms=5_000) as tokens:
        ...  # both accounts are ours; fence each account's writes with its own token

MLOCK grants every key in one log entry or none, and returns one fencing token per key, in
the order given, or None. WAIT joins every key's FIFO queue at once; two MultiLocks that
wait on overlapping keys never deadlock. Release with MUNLOCK (or UNLOCK per key); each key
is an independent lease afterwards. The client's socket timeout must outlast the wait.
"""


class NotAcquired(Exception):
    """The keys were not all granted within the wait."""


class MultiLock:
    def __init__(self, r, keys, owner, ttl_ms, wait_ms=None):
        self.r, self.keys, self.owner = r, list(keys), owner
        self.ttl_ms, self.wait_ms = ttl_ms, wait_ms
        self.tokens = None

    def acquire(self):
        args = ["MLOCK", self.owner, "PX", self.ttl_ms]
        if self.wait_ms is not None:
            args += ["WAIT", self.wait_ms]
        args += ["KEYS", len(self.keys), *self.keys]
        reply = self.r.execute_command(*args)
        self.tokens = None if reply is None else [int(t) for t in reply]
        return self.tokens

    def renew(self):
        """Each key's token if its lease was extended, None where it was lost."""
        out = []
        for key in self.keys:
            t = self.r.execute_command("RENEW", key, self.owner, "PX", self.ttl_ms)
            out.append(None if t is None else int(t))
        return out

    def release(self):
        """How many of the keys were still held and are now released."""
        return self.r.execute_command("MUNLOCK", self.owner, "KEYS", len(self.keys), *self.keys)

    def __enter__(self):
        if self.acquire() is None:
            raise NotAcquired(self.keys)
        return self.tokens

    def __exit__(self, *exc):
        self.release()
        return False
