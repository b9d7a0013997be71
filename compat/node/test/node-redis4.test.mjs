import * as redis from "redis4";

import { versionOf } from "../lib/common.mjs";
import { nodeRedisSuite } from "../lib/node-redis-suite.mjs";

nodeRedisSuite(redis, { name: "node-redis", version: versionOf("redis4"), major: 4 });
