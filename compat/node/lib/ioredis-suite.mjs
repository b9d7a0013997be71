// ioredis against Palisade. Used by test/ioredis5.test.mjs and test/ioredis6.test.mjs.
//
// ioredis 5 speaks RESP2 and, once connected, runs a ready check: INFO with no argument, which
// must succeed and must not say loading:1. ioredis 6 starts with HELLO 3 (RESP3).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { HOST, PORT, freshKey, isFenced, sleep } from "./common.mjs";

export function ioredisSuite(Redis, { name, version, protocol }) {
  describe(`${name} ${version}`, () => {
    let redis;
    const clients = [];
    const connect = (options = {}) => {
      const client = new Redis({ host: HOST, port: PORT, maxRetriesPerRequest: 2, ...options });
      clients.push(client);
      return client;
    };

    before(async () => {
      redis = connect();
      await redis.ping();
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    });

    test("connects through the INFO ready check", async () => {
      assert.equal(redis.status, "ready");
      const info = await redis.info();
      assert.match(info, /\r\nredis_version:7\.2\.0\r\n/);
      assert.match(info, /\r\nloading:0\r\n/);
      assert.match(info, /\r\nrole:master\r\n/);
    });

    test(`speaks RESP${protocol}`, async () => {
      // ioredis 6 records the protocol that HELLO negotiated; ioredis 5 has no HELLO at all.
      const negotiated = redis.condition?.protocol ?? 2;
      assert.equal(negotiated, protocol);
    });

    test("SET NX PX, GET, PTTL, DEL", async () => {
      const k = freshKey("set");
      assert.equal(await redis.set(k, "a", "PX", 10_000, "NX"), "OK");
      assert.equal(await redis.set(k, "b", "PX", 10_000, "NX"), null);
      assert.equal(await redis.get(k), "a");
      const pttl = await redis.pttl(k);
      assert.ok(pttl > 0 && pttl <= 10_000, `pttl ${pttl}`);
      assert.equal(await redis.del(k), 1);
      assert.equal(await redis.exists(k), 0);
    });

    test("binary values as Buffers", async () => {
      const k = freshKey("bin");
      const raw = Buffer.from([0, 255, 128, 10, 13, 1, 2]);
      assert.equal(await redis.set(k, raw), "OK");
      assert.deepEqual(await redis.getBuffer(k), raw);
    });

    test("pipeline and multi", async () => {
      const k = freshKey("pipe");
      const results = await redis.pipeline().set(k, "1").incr(k).get(k).exec();
      assert.deepEqual(results, [
        [null, "OK"],
        [null, 2],
        [null, "2"],
      ]);
      const txn = await redis.multi().incr(k).incrby(k, 10).exec();
      assert.deepEqual(txn, [
        [null, 3],
        [null, 13],
      ]);
    });

    test("expiry: a PX key disappears", async () => {
      const k = freshKey("px");
      await redis.set(k, "v", "PX", 150);
      await sleep(500);
      assert.equal(await redis.get(k), null);
    });

    test("defineCommand: EVALSHA, with EVAL after NOSCRIPT", async () => {
      const client = connect();
      client.defineCommand("compareAndDelete", {
        numberOfKeys: 1,
        lua: `if redis.call("get", KEYS[1]) == ARGV[1] then
                return redis.call("del", KEYS[1])
              else
                return 0
              end`,
      });
      const k = freshKey("cad");
      await client.set(k, "mine");
      assert.equal(await client.compareAndDelete(k, "theirs"), 0);
      await client.script("FLUSH");
      assert.equal(await client.compareAndDelete(k, "mine"), 1);
      assert.equal(await client.exists(k), 0);
    });

    test("eval returns numbers, strings, arrays and nulls", async () => {
      const k = freshKey("eval");
      const reply = await redis.eval(
        "redis.call('set', KEYS[1], ARGV[1]) return {redis.call('get', KEYS[1]), 7, 'x'}",
        1,
        k,
        "val",
      );
      assert.deepEqual(reply, ["val", 7, "x"]);
      assert.equal(await redis.eval("return redis.call('get', KEYS[1])", 1, freshKey("none")), null);
    });

    test("fencing token for a SET NX PX lock; a stale writer is rejected", async () => {
      const lock = freshKey("lock");
      const resource = freshKey("resource");
      const a = connect();
      const b = connect();
      // Acquire as any Redis lock does: SET NX PX with a random value.
      assert.equal(await a.set(lock, "owner-a", "PX", 300, "NX"), "OK");
      // Ask Palisade for this grant's token: LOCK with the same value is idempotent.
      const tokenA = await a.call("LOCK", lock, "owner-a", "PX", 300);
      assert.equal(typeof tokenA, "number");
      assert.equal(await a.call("FENCEDSET", resource, "from-a", tokenA), "OK");

      await sleep(600); // A stalls; its lease expires
      assert.equal(await b.set(lock, "owner-b", "PX", 10_000, "NX"), "OK");
      const tokenB = await b.call("LOCK", lock, "owner-b", "PX", 10_000);
      assert.ok(tokenB > tokenA, `${tokenB} > ${tokenA}`);
      assert.equal(await b.call("FENCEDSET", resource, "from-b", tokenB), "OK");

      await assert.rejects(a.call("FENCEDSET", resource, "late-a", tokenA), (err) =>
        isFenced(err, tokenA),
      );
      assert.equal(await a.get(resource), "from-b");
    });
  });
}
