import Redis from "ioredis5";

import { versionOf } from "../lib/common.mjs";
import { ioredisSuite } from "../lib/ioredis-suite.mjs";

ioredisSuite(Redis, { name: "ioredis", version: versionOf("ioredis5"), protocol: 2 });
