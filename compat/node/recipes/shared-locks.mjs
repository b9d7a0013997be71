// Recipes: a shared (read) lock and a counting semaphore on Palisade, with ioredis.
//
//   const hold = await sharedLock(redis, "cfg", owner, { ttlMs: 10_000, waitMs: 5_000 });
//   if (hold) { try { /* read; fence writes with hold.token */ } finally { await hold.release(); } }
//
//   const permit = await semaphorePermit(redis, "workers", owner, { limit: 4, ttlMs: 10_000 });
//
// RLOCK / SEMACQUIRE answer a fencing token or null; WAIT queues in the key's FIFO queue
// (shared with LOCK; 0: for ever). Each holder has its own lease: renew() (RENEW) and release()
// (UNLOCK). Give ioredis no command timeout shorter than the wait.

async function hold(redis, args, key, owner, { ttlMs, waitMs }) {
  const cmd = [...args, "PX", ttlMs];
  if (waitMs !== undefined) cmd.push("WAIT", waitMs);
  const token = await redis.call(...cmd);
  if (token === null) return null;
  return {
    token: Number(token),
    renew: async () => {
      const t = await redis.call("RENEW", key, owner, "PX", ttlMs);
      return t === null ? null : Number(t);
    },
    release: async () => (await redis.call("UNLOCK", key, owner)) === 1,
  };
}

/** RLOCK: many readers together, never beside a LOCK holder. */
export function sharedLock(redis, key, owner, opts) {
  return hold(redis, ["RLOCK", key, owner], key, owner, opts);
}

/** SEMACQUIRE: one of `opts.limit` permits. */
export function semaphorePermit(redis, key, owner, opts) {
  return hold(redis, ["SEMACQUIRE", key, owner, "LIMIT", opts.limit], key, owner, opts);
}
