// The fenced-lock recipe (recipes/fenced-lock.mjs) against a Palisade node, on the ioredis major
// named by COMPAT_IOREDIS (ioredis5, the default, or ioredis6).
//
// 1. Two contenders on one key: the second blocks in LOCK ... WAIT until the first releases,
//    and its token is higher.
// 2. A holder whose renewal stalls loses the lock at its TTL, its loss callback fires (from the
//    lock_expired event), and its late FENCEDSET is rejected once the next holder has written.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { HOST, PORT, freshKey, isFenced, sleep, versionOf } from "../lib/common.mjs";
import { acquireFencedLock } from "../recipes/fenced-lock.mjs";

const major = process.env.COMPAT_IOREDIS ?? "ioredis5";
const { default: Redis } = await import(major);

describe(`fenced-lock recipe on ioredis ${versionOf(major)}`, () => {
  const clients = [];
  const connect = () => {
    const client = new Redis({ host: HOST, port: PORT, maxRetriesPerRequest: 2 });
    clients.push(client);
    return client;
  };
  after(async () => {
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
  });

  test("the second contender waits for the first, with a higher token", async () => {
    const key = freshKey("recipe-wait");
    const lost = [];
    const onLost = (reason) => lost.push(reason);
    const a = await acquireFencedLock(connect(), key, { ttlMs: 5_000, waitMs: 1_000, onLost });
    assert.ok(Number.isInteger(a?.token), `token ${a?.token}`);

    let grantedAt = null;
    const waiting = acquireFencedLock(connect(), key, { ttlMs: 5_000, waitMs: 8_000, onLost });
    waiting.then(() => (grantedAt = Date.now()));
    await sleep(1_000);
    assert.equal(grantedAt, null, "the second contender did not wait");
    const releasedAt = Date.now();
    assert.equal(await a.release(), true);
    const b = await waiting;
    assert.ok(b.token > a.token, `${b.token} > ${a.token}`);
    assert.ok(grantedAt >= releasedAt);
    assert.equal(await b.release(), true);
    await sleep(300); // let any lock_released event arrive: a release is not a loss
    assert.deepEqual(lost, []);
  });

  test("a stalled holder loses the lock, is told, and is fenced", async () => {
    const key = freshKey("recipe-stall");
    const res = freshKey("recipe-res");
    const redis = connect();
    let reportLoss;
    const lostReason = new Promise((resolve) => (reportLoss = resolve));
    const a = await acquireFencedLock(connect(), key, {
      ttlMs: 1_000,
      waitMs: 1_000,
      onLost: reportLoss,
    });
    assert.equal(await redis.call("FENCEDSET", res, "from-a", a.token), "OK");
    await sleep(1_500); // renewal keeps the lock past its TTL...
    assert.equal(await redis.call("FENCECHECK", key, a.token), 1); // A is still the holder

    clearInterval(a.renewTimer); // ...until the holder stalls (GC pause, lost CPU, ...)
    // B is queued until A's lease ends.
    const b = await acquireFencedLock(connect(), key, { ttlMs: 10_000, waitMs: 5_000 });
    assert.ok(b && b.token > a.token, `${b?.token} > ${a.token}`);
    const timer = setTimeout(() => reportLoss("no loss callback within 5 s"), 5_000);
    assert.equal(await lostReason, "lock_expired");
    clearTimeout(timer);

    assert.equal(await redis.call("FENCEDSET", res, "from-b", b.token), "OK");
    const late = redis.call("FENCEDSET", res, "late-a", a.token); // A wakes up and writes
    await assert.rejects(late, (err) => isFenced(err, a.token));
    assert.equal(await redis.get(res), "from-b");
    assert.equal(await b.release(), true);
  });
});
