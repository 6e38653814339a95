import { Cluster } from "ioredis";
import type { Client } from "./client.js";

/** Keys per SCAN step, and so per batch handed to `each`. */
const SCAN_COUNT = 1_000;

/** SCAN over `pattern`, one batch at a time (a key may come twice; SCAN's own contract). */
export async function scanKeys(
  redis: Client,
  pattern: string,
  each: (keys: string[]) => Promise<void>,
): Promise<void> {
  // A cluster's keyspace is split between its primaries: each is scanned in turn.
  if (redis instanceof Cluster) {
    for (const node of redis.nodes("master")) await scanKeys(node, pattern, each);
    return;
  }
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", SCAN_COUNT);
    cursor = next;
    await each(keys);
  } while (cursor !== "0");
}
