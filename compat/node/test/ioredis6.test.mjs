import Redis from "ioredis6";

import { versionOf } from "../lib/common.mjs";
import { ioredisSuite } from "../lib/ioredis-suite.mjs";

ioredisSuite(Redis, { name: "ioredis", version: versionOf("ioredis6"), protocol: 3 });
