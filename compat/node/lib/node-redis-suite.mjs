// node-redis against Palisade. Used by test/node-redis4.test.mjs and test/node-redis6.test.mjs.
//
// node-redis 4 speaks RESP2. node-redis 6 (the latest major) starts every connection with
// HELLO 3 and has no RESP2 fallback.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { HOST, PORT, freshKey, isFenced, sleep } from "./common.mjs";

const COMPARE_AND_DELETE = `if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
else
  return 0
end`;

export function nodeRedisSuite(redisModule, { name, version, major }) {
  const { createClient, defineScript } = redisModule;

  // Scripts are declared with createClient({ scripts }); the declaration changed in v5.
  const compareAndDelete =
    major >= 5
      ? defineScript({
          NUMBER_OF_KEYS: 1,
          SCRIPT: COMPARE_AND_DELETE,
          parseCommand(parser, key, value) {
            parser.pushKey(key);
            parser.push(value);
          },
          transformReply: undefined,
        })
      : defineScript({
          NUMBER_OF_KEYS: 1,
          SCRIPT: COMPARE_AND_DELETE,
          transformArguments: (key, value) => [key, value],
          transformReply: (reply) => reply,
        });

  describe(`${name} ${version}`, () => {
    let client;
    const clients = [];
    const connect = async () => {
      const c = createClient({
        socket: { host: HOST, port: PORT, reconnectStrategy: false },
        scripts: { compareAndDelete },
      });
      c.on("error", () => {});
      clients.push(c);
      await c.connect();
      return c;
    };

    before(async () => {
      client = await connect();
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.quit().catch(() => {})));
    });

    test("connects (RESP3 HELLO from v6 on) and answers PING and INFO", async () => {
      assert.equal(await client.ping(), "PONG");
      const info = await client.info("server");
      assert.match(info, /redis_version:7\.2\.0/);
      const hello = await client.sendCommand(["HELLO"]);
      // HELLO without a version reports the connection's protocol: a map in RESP3 (a plain
      // object, or a Map with some type mappings), a flat array in RESP2.
      const proto = Array.isArray(hello)
        ? hello[hello.indexOf("proto") + 1]
        : hello instanceof Map
          ? hello.get("proto")
          : hello.proto;
      assert.equal(proto, major >= 6 ? 3 : 2);
    });

    test("SET NX PX, GET, PTTL, DEL", async () => {
      const k = freshKey("set");
      assert.equal(await client.set(k, "a", { NX: true, PX: 10_000 }), "OK");
      assert.equal(await client.set(k, "b", { NX: true, PX: 10_000 }), null);
      assert.equal(await client.get(k), "a");
      const pttl = await client.pTTL(k);
      assert.ok(pttl > 0 && pttl <= 10_000, `pttl ${pttl}`);
      assert.equal(await client.del(k), 1);
      assert.equal(await client.exists(k), 0);
    });

    test("multi/exec and pipelined commands", async () => {
      const k = freshKey("multi");
      assert.deepEqual(await client.multi().set(k, "1").incr(k).get(k).exec(), ["OK", 2, "2"]);
      const pipelined = await Promise.all([client.incr(k), client.incr(k), client.get(k)]);
      assert.deepEqual(pipelined, [3, 4, "4"]);
    });

    test("expiry: a PX key disappears", async () => {
      const k = freshKey("px");
      await client.set(k, "v", { PX: 150 });
      await sleep(500);
      assert.equal(await client.get(k), null);
    });

    test("scripts: defineScript (EVALSHA, EVAL after NOSCRIPT) and eval", async () => {
      const k = freshKey("script");
      await client.set(k, "mine");
      await client.scriptFlush();
      assert.equal(await client.compareAndDelete(k, "theirs"), 0);
      assert.equal(await client.compareAndDelete(k, "mine"), 1);
      const reply = await client.eval("return {KEYS[1], tonumber(ARGV[1]) * 2}", {
        keys: [k],
        arguments: ["21"],
      });
      assert.deepEqual(reply, [k, 42]);
    });

    test("fencing token for a SET NX PX lock; a stale writer is rejected", async () => {
      const lock = freshKey("lock");
      const resource = freshKey("resource");
      const a = await connect();
      const b = await connect();
      assert.equal(await a.set(lock, "owner-a", { NX: true, PX: 300 }), "OK");
      // LOCK with the value SET NX PX stored returns this grant's fencing token.
      const tokenA = await a.sendCommand(["LOCK", lock, "owner-a", "PX", "300"]);
      assert.equal(typeof tokenA, "number");
      assert.equal(await a.sendCommand(["FENCEDSET", resource, "from-a", String(tokenA)]), "OK");

      await sleep(600); // A stalls; its lease expires
      assert.equal(await b.set(lock, "owner-b", { NX: true, PX: 10_000 }), "OK");
      const tokenB = await b.sendCommand(["LOCK", lock, "owner-b", "PX", "10000"]);
      assert.ok(tokenB > tokenA, `${tokenB} > ${tokenA}`);
      await b.sendCommand(["FENCEDSET", resource, "from-b", String(tokenB)]);

      await assert.rejects(
        a.sendCommand(["FENCEDSET", resource, "late-a", String(tokenA)]),
        (err) => isFenced(err, tokenA),
      );
      assert.equal(await a.get(resource), "from-b");
    });
  });
}
