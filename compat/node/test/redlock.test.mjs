// node-redlock v5 (the `redlock` package's 5.0.0 beta) on an ioredis 5 client, against Palisade.
//
// Redlock acquires, extends and releases with Lua scripts over every resource at once, sent with
// EVALSHA and, on NOSCRIPT, with EVAL. Its results must be integers (it checks typeof number).
// Before: one client per independent Redis master. After: one client, to Palisade.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import Redis from "ioredis5";
import Redlock, { ExecutionError, ResourceLockedError } from "redlock";

import { HOST, PORT, freshKey, isFenced, sleep, versionOf } from "../lib/common.mjs";

describe(`redlock ${versionOf("redlock")} (ioredis ${versionOf("ioredis5")})`, () => {
  let client;
  let redlock;
  const extraClients = [];
  const newRedlock = (settings = {}) => {
    const c = new Redis({ host: HOST, port: PORT });
    extraClients.push(c);
    return new Redlock([c], { retryCount: 0, ...settings });
  };

  before(async () => {
    client = new Redis({ host: HOST, port: PORT });
    await client.ping();
    redlock = new Redlock([client], { retryCount: 3, retryDelay: 100, retryJitter: 50 });
  });
  after(async () => {
    await client.quit();
    await Promise.all(extraClients.map((c) => c.quit().catch(() => c.disconnect())));
  });

  test("acquire several resources at once, then release", async () => {
    const resources = [freshKey("a"), freshKey("b"), freshKey("c")];
    const lock = await redlock.acquire(resources, 10_000);
    assert.deepEqual(lock.resources, resources);
    for (const r of resources) {
      assert.equal(await client.get(r), lock.value);
      const pttl = await client.pttl(r);
      assert.ok(pttl > 9_000 && pttl <= 10_000, `pttl ${pttl}`);
    }
    await lock.release();
    assert.equal(await client.exists(...resources), 0);
  });

  test("contention: a held resource cannot be acquired", async () => {
    const [a, b] = [freshKey("a"), freshKey("b")];
    const holder = await redlock.acquire([b], 10_000);
    const other = newRedlock();
    // One of the two resources is held: the acquire script changes nothing and returns 0.
    await assert.rejects(other.acquire([a, b], 10_000), (err) => {
      assert.ok(err instanceof ExecutionError, String(err));
      assert.ok(err.attempts.length >= 1);
      return true;
    });
    assert.equal(await client.exists(a), 0);
    await holder.release();
    const lock = await other.acquire([a, b], 10_000);
    await lock.release();
  });

  test("retries until the holder releases", async () => {
    const r = freshKey("r");
    const holder = await redlock.acquire([r], 10_000);
    setTimeout(() => holder.release(), 250);
    const waiter = newRedlock({ retryCount: 40, retryDelay: 50, retryJitter: 10 });
    const lock = await waiter.acquire([r], 10_000);
    assert.equal(await client.get(r), lock.value);
    await lock.release();
  });

  test("extend", async () => {
    const resources = [freshKey("a"), freshKey("b")];
    const lock = await redlock.acquire(resources, 1_000);
    const extended = await lock.extend(20_000);
    assert.equal(extended.value, lock.value);
    for (const r of resources) {
      const pttl = await client.pttl(r);
      assert.ok(pttl > 19_000 && pttl <= 20_000, `pttl ${pttl}`);
    }
    await extended.release();
  });

  test("a lock that expired and was taken cannot be extended or released", async () => {
    const r = freshKey("r");
    const lock = await redlock.acquire([r], 200);
    await sleep(500);
    const thief = await newRedlock().acquire([r], 10_000);
    // Redlock's own clock says the lock expired: extend refuses without asking the server.
    await assert.rejects(lock.extend(1_000), ExecutionError);
    // Release asks the server, whose script sees another value and removes nothing.
    await assert.rejects(redlock.release(lock, { retryCount: 0 }), (err) => {
      assert.ok(err instanceof ExecutionError);
      return true;
    });
    assert.equal(await client.get(r), thief.value);
    await thief.release();
  });

  test("using() extends the lock automatically while the routine runs", async () => {
    const r = freshKey("r");
    let seenValue;
    await redlock.using([r], 600, { automaticExtensionThreshold: 300 }, async (signal) => {
      seenValue = await client.get(r);
      await sleep(1_500); // longer than the 600 ms lease: only the auto-extension keeps it
      assert.equal(signal.aborted, false, String(signal.error));
      assert.equal(await client.get(r), seenValue);
      const pttl = await client.pttl(r);
      assert.ok(pttl > 0, `pttl ${pttl}`);
    });
    assert.ok(seenValue);
    assert.equal(await client.exists(r), 0); // released when the routine returned
  });

  test("fencing token per resource; a stale writer is rejected", async () => {
    const r = freshKey("orders");
    const resource = freshKey("resource");
    const a = await redlock.acquire([r], 300);
    // The lock value is lock.value; LOCK with it returns this grant's token.
    const tokenA = await client.call("LOCK", r, a.value, "PX", 300);
    assert.equal(typeof tokenA, "number");
    assert.equal(await client.call("FENCEDSET", resource, "from-a", tokenA), "OK");

    await sleep(600); // A stalls; its lease expires
    const b = await newRedlock().acquire([r], 10_000);
    const tokenB = await client.call("LOCK", r, b.value, "PX", 10_000);
    assert.ok(tokenB > tokenA);
    await client.call("FENCEDSET", resource, "from-b", tokenB);

    await assert.rejects(client.call("FENCEDSET", resource, "late-a", tokenA), (err) =>
      isFenced(err, tokenA),
    );
    assert.equal(await client.get(resource), "from-b");
    await b.release();
  });

  test("ResourceLockedError is what a single client reports on contention", async () => {
    const r = freshKey("r");
    const holder = await redlock.acquire([r], 10_000);
    const other = newRedlock();
    const err = await other.acquire([r], 10_000).then(
      () => assert.fail("acquired a held resource"),
      (e) => e,
    );
    assert.ok(err instanceof ExecutionError, String(err));
    // Each attempt's stats resolve once every client has answered.
    const stats = await err.attempts[0];
    const errors = [...stats.votesAgainst.values()];
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof ResourceLockedError, String(errors[0]));
    await holder.release();
  });
});
