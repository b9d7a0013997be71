import * as redis from "redis6";

import { versionOf } from "../lib/common.mjs";
import { nodeRedisSuite } from "../lib/node-redis-suite.mjs";

nodeRedisSuite(redis, { name: "node-redis", version: versionOf("redis6"), major: 6 });
