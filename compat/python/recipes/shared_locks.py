"""Recipes: a shared (read) lock and a counting semaphore on Palisade, with redis-py.

    with SharedLock(r, "cfg", owner, ttl_ms=10_000, wait_ms=5_000) as token:
        ...  # read under the lock; fence writes elsewhere with `token`

    with Permit(r, "workers", owner, limit=4, ttl_ms=10_000, wait_ms=0) as token:
        ...  # at most 4 holders at a time

RLOCK / SEMACQUIRE return a fencing token (int) or None; WAIT queues in the key's FIFO queue
(shared with LOCK). Each holder has its own lease: renew it with RENEW, release with UNLOCK.
The client's socket timeout must outlast the wait (WAIT 0: for ever, so no timeout).
"""


class NotAcquired(Exception):
    """The lock or permit was not granted within the wait."""


class _Hold:
    def __init__(self, r, key, owner, ttl_ms, wait_ms=None):
        self.r, self.key, self.owner = r, key, owner
        self.ttl_ms, self.wait_ms = ttl_ms, wait_ms
        self.token = None

    def _args(self):
        raise NotImplementedError

    def acquire(self):
        args = list(self._args()) + ["PX", self.ttl_ms]
        if self.wait_ms is not None:
            args += ["WAIT", self.wait_ms]
        token = self.r.execute_command(*args)
        self.token = None if token is None else int(token)
        return self.token

    def renew(self):
        """The token if the lease was extended, None if it was lost."""
        token = self.r.execute_command("RENEW", self.key, self.owner, "PX", self.ttl_ms)
        return None if token is None else int(token)

    def release(self):
        return self.r.execute_command("UNLOCK", self.key, self.owner) == 1

    def __enter__(self):
        if self.acquire() is None:
            raise NotAcquired(self.key)
        return self.token

    def __exit__(self, *exc):
        self.release()
        return False


class SharedLock(_Hold):
    """RLOCK: many readers together, never beside a LOCK holder."""

    def _args(self):
        return ["RLOCK", self.key, self.owner]


class Permit(_Hold):
    """SEMACQUIRE: one of `limit` permits."""

    def __init__(self, r, key, owner, limit, ttl_ms, wait_ms=None):
        super().__init__(r, key, owner, ttl_ms, wait_ms)
        self.limit = limit

    def _args(self):
        return ["SEMACQUIRE", self.key, self.owner, "LIMIT", self.limit]
