// Recipe: a blocking fenced lock with automatic renewal and a loss callback (ioredis, Palisade).
//
// What it shows:
//   - LOCK key owner PX ttl WAIT ms: join the key's FIFO queue and block until the lock is
//     granted (the reply is the fencing token) or ms pass (null). WAIT 0 waits forever.
//   - A renewal timer: RENEW every ttl/3. A null reply means the lock is gone, and so does a
//     whole TTL without a successful RENEW (the server cannot be reached).
//   - Loss detection from the lock events every node publishes on __keyspace@0__:<key>
//     ("lock_expired <token> <owner>", "lock_released <token> <owner>"): if the holder's own
//     grant ends while it still thinks it holds the lock, onLost(reason) is called, once.
//   - The token goes with every write to the protected resource (here FENCEDSET), so a holder
//     that learns of its loss too late is still rejected with -FENCED.
//
//   const lock = await acquireFencedLock(redis, "jobs:nightly", {
//     ttlMs: 10_000,
//     onLost: (reason) => console.warn(`lost jobs:nightly: ${reason}`),
//   });
//   if (lock) {
//     await redis.call("FENCEDSET", "jobs:nightly:report", "done", lock.token);
//     await lock.release();
//   }
//
// `redis` is an ioredis client (5 or 6). LOCK ... WAIT blocks that connection until it
// replies, like BLPOP. test/fenced-lock-recipe.test.mjs runs this file against a cluster.
import { randomUUID } from "node:crypto";

/** Resolves to { token, release(), renewTimer } once granted, or null after waitMs (0: forever). */
export async function acquireFencedLock(redis, key, options = {}) {
  const { ttlMs = 10_000, waitMs = 0, onLost = () => {} } = options;
  const owner = randomUUID(); // unique to this holder
  const events = redis.duplicate(); // a subscribed connection serves only pub/sub
  let lock = null;
  let ended = false; // released or lost
  const stop = () => {
    clearInterval(lock?.renewTimer);
    events.disconnect();
  };
  const lose = (reason) => {
    if (ended) return; // whichever path notices first
    ended = true;
    stop();
    onLost(reason);
  };

  // Subscribe first, so that no event about our grant can be missed.
  events.on("message", (_channel, message) => {
    const [kind, granted] = message.split(" "); // "<kind> <token> <owner>"
    const ours = granted === String(lock?.token);
    if (ours && (kind === "lock_expired" || kind === "lock_released")) lose(kind);
  });
  await events.subscribe(`__keyspace@0__:${key}`);

  let token = null;
  try {
    token = await redis.call("LOCK", key, owner, "PX", ttlMs, "WAIT", waitMs);
  } finally {
    if (token === null) events.disconnect(); // not granted, or an error: stop watching
  }
  if (token === null) return null;
  let validUntil = Date.now() + ttlMs;
  const renew = async () => {
    const sent = Date.now();
    try {
      const renewed = await redis.call("RENEW", key, owner, "PX", ttlMs);
      if (renewed === null) return lose("RENEW returned null");
      validUntil = sent + ttlMs;
    } catch {
      // A failed RENEW is retried at the next tick, until a whole TTL has gone without one.
      if (Date.now() > validUntil) lose("lease ran out without a successful RENEW");
    }
  };
  lock = {
    token,
    renewTimer: setInterval(renew, ttlMs / 3),
    /** Stops renewing and watching, then unlocks. True if the lock was still ours. */
    async release() {
      ended = true; // our own lock_released is not a loss
      stop();
      return (await redis.call("UNLOCK", key, owner)) === 1;
    },
  };
  return lock;
}
