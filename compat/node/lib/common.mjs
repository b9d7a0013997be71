// Shared settings for the Node.js compatibility suites (scripts/compat.sh sets the variables).
//
//   COMPAT_HOST  default 127.0.0.1
//   COMPAT_PORT  default 6379
//
// Every key carries a prefix unique to the process, so the runs against a follower and against
// the leader never see each other's keys.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

export const HOST = process.env.COMPAT_HOST ?? "127.0.0.1";
export const PORT = Number(process.env.COMPAT_PORT ?? "6379");
export const RUN = randomBytes(4).toString("hex");

let counter = 0;
/** A fresh key name for one test: compat:<run>:<label>:<n>. */
export function freshKey(label) {
  counter += 1;
  return `compat:${RUN}:${label}:${counter}`;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The installed version of a dependency (an npm alias such as "ioredis5" works too). */
export function versionOf(name) {
  const manifest = new URL(`../node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(manifest, "utf8")).version;
}

/** The error text of a FENCEDSET that carried a stale token. */
export function isFenced(err, token) {
  return String(err?.message ?? err).startsWith(`FENCED token ${token} is lower than `);
}
