"""Recipe: a blocking fenced lock with automatic renewal and a loss callback (redis-py, Palisade).

What it shows:
  - LOCK key owner PX ttl WAIT ms: join the key's FIFO queue and block until the lock is
    granted (the reply is the fencing token) or ms pass (nil). WAIT 0 waits forever.
  - A renewal thread: RENEW every ttl/3. A nil reply means the lock is gone, and so does a
    whole TTL without a successful RENEW (the server cannot be reached).
  - Loss detection from the lock events every node publishes on __keyspace@0__:<key>
    ("lock_expired <token> <owner>", "lock_released <token> <owner>"): if the holder's own
    grant ends while it still thinks it holds the lock, on_lost(reason) is called, once.
  - The token goes with every write to the protected resource (here FENCEDSET), so a holder
    that learns of its loss too late is still rejected with -FENCED.

    r = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=None)  # LOCK WAIT blocks
    with FencedLock(r, "jobs:nightly", ttl_ms=10_000, on_lost=print) as lock:
        r.execute_command("FENCEDSET", "jobs:nightly:report", "done", lock.token)

tests/test_fenced_lock_recipe.py runs this file against a Palisade cluster.
"""

import threading
import time
import uuid

import redis


class LockNotAcquired(Exception):
    """The wait ran out before the lock was granted."""


class FencedLock:
    """One acquisition of `key` (make a new FencedLock to lock again).

    on_lost(reason) is called from a background thread, at most once, and never after release().
    """

    def __init__(self, client, key, ttl_ms=10_000, on_lost=None):
        self.client, self.key, self.ttl_ms = client, key, ttl_ms
        self.on_lost = on_lost or (lambda reason: None)
        self.owner = uuid.uuid4().hex  # unique to this holder
        self.token = None
        self._stop_renewal = threading.Event()
        self._ended = threading.Lock()  # taken once: by release or by the first sign of loss

    def acquire(self, wait_ms=0):
        """Blocks until granted (wait_ms=0: forever). Returns the token, or None after wait_ms."""
        # Subscribe first (and read the confirmation), so that no event about our grant is missed.
        self._pubsub = self.client.pubsub()
        self._pubsub.subscribe(**{f"__keyspace@0__:{self.key}": self._on_event})
        self._pubsub.get_message(timeout=5)
        self._events = self._pubsub.run_in_thread(sleep_time=0.1, daemon=True)
        try:
            self.token = self.client.execute_command(
                "LOCK", self.key, self.owner, "PX", self.ttl_ms, "WAIT", wait_ms
            )
        finally:
            if self.token is None:  # not granted, or an error: stop watching
                self._events.stop()
        if self.token is not None:
            threading.Thread(target=self._renew, daemon=True).start()
        return self.token

    def release(self):
        """Stops renewing and watching, then unlocks. True if the lock was still ours."""
        self._ended.acquire(blocking=False)  # our own lock_released is not a loss
        self._stop_renewal.set()
        self._events.stop()
        return self.client.execute_command("UNLOCK", self.key, self.owner) == 1

    def _renew(self):
        valid_until = time.monotonic() + self.ttl_ms / 1000
        while not self._stop_renewal.wait(self.ttl_ms / 3000):
            sent = time.monotonic()
            try:
                reply = self.client.execute_command(
                    "RENEW", self.key, self.owner, "PX", self.ttl_ms
                )
            except redis.RedisError:
                if time.monotonic() > valid_until:  # no RENEW got through for a whole TTL
                    return self._lose("lease ran out without a successful RENEW")
                continue
            if reply is None:
                return self._lose("RENEW returned nil")
            valid_until = sent + self.ttl_ms / 1000

    def _on_event(self, message):
        data = message["data"]
        kind, _, rest = (data.decode() if isinstance(data, bytes) else data).partition(" ")
        token = rest.partition(" ")[0]
        if kind in ("lock_expired", "lock_released") and token == str(self.token):
            self._lose(kind)

    def _lose(self, reason):
        if self._ended.acquire(blocking=False):  # whichever path notices first
            self._stop_renewal.set()
            self._events.stop()
            self.on_lost(reason)

    def __enter__(self):
        if self.acquire() is None:
            raise LockNotAcquired(self.key)
        return self

    def __exit__(self, *exc):
        self.release()
