import { Cluster } from "ioredis";
import type { Client } from "./client.js";
import { isClusterReply } from "./reply-errors.js";

/**
 * How the server shows it is a cluster node, when the URL did not say `cluster=true`
 * (`declared`): a reply only a cluster node gives, or `INFO cluster` (asked once, after a
 * refusal; a user not allowed `INFO`, an auditor, is simply not told).
 */
export async function clusterEvidence(
  redis: Client,
  declared: boolean,
  code: string,
): Promise<string | undefined> {
  if (declared || redis instanceof Cluster) return undefined;
  if (isClusterReply(code)) return `it answered ${code}`;
  try {
    const info = await redis.info("cluster");
    return /^cluster_enabled:1\b/m.test(info) ? "INFO says cluster_enabled:1" : undefined;
  } catch {
    return undefined;
  }
}
