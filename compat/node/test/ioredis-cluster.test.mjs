// ioredis 5's Cluster client, unmodified, with the node under test as its only seed.
//
// Palisade presents its one Raft group as a Redis Cluster of one shard (docs/cluster.md,
// "Cluster-mode clients"): the client discovers the three nodes from CLUSTER SLOTS, routes by
// slot, and every command works whichever node it reaches.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import Redis from "ioredis5";

import { HOST, PORT, freshKey, versionOf } from "../lib/common.mjs";

describe(`ioredis ${versionOf("ioredis5")} Cluster`, () => {
  let cluster;

  before(async () => {
    cluster = new Redis.Cluster([{ host: HOST, port: PORT }], { enableReadyCheck: true });
    await cluster.ping();
  });
  after(async () => {
    await cluster.quit();
  });

  test("discovers the whole group: one master, two replicas", async () => {
    await cluster.get(freshKey("warm"));
    assert.equal(cluster.nodes("master").length, 1);
    assert.equal(cluster.nodes("all").length, 3);
  });

  test("set, get and a pipeline", async () => {
    const k = freshKey("{p}");
    assert.equal(await cluster.set(k, "1"), "OK");
    assert.equal(await cluster.get(k), "1");
    const p = cluster.pipeline();
    for (let i = 0; i < 10; i++) p.set(`${k}:${i}`, String(i));
    for (let i = 0; i < 10; i++) p.get(`${k}:${i}`);
    const out = await p.exec();
    assert.deepEqual(
      out.slice(10).map(([err, v]) => (err ? String(err) : v)),
      [...Array(10).keys()].map(String),
    );
  });

  test("SET NX PX lock, compare-and-delete script, LOCK and FENCEDSET", async () => {
    const k = freshKey("{lock}");
    assert.equal(await cluster.set(k, "me", "NX", "PX", 5000), "OK");
    const token = await cluster.call("LOCK", k, "me", "PX", 5000);
    assert.ok(token > 0);
    const data = `${k}:data`;
    assert.equal(await cluster.call("FENCEDSET", data, "v", token), "OK");
    await assert.rejects(cluster.call("FENCEDSET", data, "old", token - 1), /FENCED/);
    const del = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end';
    assert.equal(await cluster.eval(del, 1, k, "me"), 1);
  });
});
