// The shared-lock and semaphore recipes (recipes/shared-locks.mjs) against a Palisade node, on
// ioredis 5: readers hold together while a writer waits, and a third permit waits for a release.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import { HOST, PORT, freshKey, versionOf } from "../lib/common.mjs";
import { semaphorePermit, sharedLock } from "../recipes/shared-locks.mjs";

const { default: Redis } = await import("ioredis5");

describe(`shared-lock and semaphore recipes on ioredis ${versionOf("ioredis5")}`, () => {
  const clients = [];
  const connect = () => {
    const client = new Redis({ host: HOST, port: PORT, maxRetriesPerRequest: 2 });
    clients.push(client);
    return client;
  };
  after(async () => {
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
  });

  test("readers share and a writer waits for them", async () => {
    const key = freshKey("rlock");
    const r1 = await sharedLock(connect(), key, "r1", { ttlMs: 10_000 });
    const r2 = await sharedLock(connect(), key, "r2", { ttlMs: 10_000 });
    assert.ok(r1 && r2 && r1.token !== r2.token);
    const w = connect();
    assert.equal(await w.call("LOCK", key, "w", "PX", 10_000), null);
    const writer = w.call("LOCK", key, "w", "PX", 10_000, "WAIT", 5_000);
    assert.equal(await r1.release(), true);
    assert.equal(await r2.release(), true);
    assert.ok(Number(await writer) > r2.token);
    assert.equal(await w.call("UNLOCK", key, "w"), 1);
  });

  test("a semaphore admits its limit", async () => {
    const key = freshKey("sem");
    const a = await semaphorePermit(connect(), key, "a", { limit: 2, ttlMs: 10_000 });
    const b = await semaphorePermit(connect(), key, "b", { limit: 2, ttlMs: 10_000 });
    assert.ok(a && b);
    assert.equal(await semaphorePermit(connect(), key, "c", { limit: 2, ttlMs: 10_000 }), null);
    const waiting = semaphorePermit(connect(), key, "c", { limit: 2, ttlMs: 10_000, waitMs: 5_000 });
    assert.equal(await a.release(), true);
    const c = await waiting;
    assert.ok(c && c.token > b.token);
    assert.equal(await b.renew(), b.token);
    assert.equal(await b.release(), true);
    assert.equal(await c.release(), true);
  });
});
