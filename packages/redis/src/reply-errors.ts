import { isTesseraError, TesseraError } from "@tessera/core";

/**
 * A Redis server's error reply, said by what it is. ioredis reports every one as a
 * `ReplyError` whose message is the server's whole reply: the class alone ("could not open the
 * Redis store (ReplyError)") told an operator nothing, and the rest of the reply may quote a
 * key, an address or a user. Its first word is the reply's code by Redis's convention
 * (`NOAUTH`, `WRONGPASS`, `NOPERM`, `MOVED`, `ERR`): that word, and nothing after it, is named.
 */

/** Replies only a node of a Redis Cluster gives: a command for a slot elsewhere, or no quorum. */
const CLUSTER_REPLIES: ReadonlySet<string> = new Set(["MOVED", "ASK", "CLUSTERDOWN", "CROSSSLOT"]);

/** The first word of the server's error reply in `error`'s cause chain, if there is one. */
export function replyCode(error: unknown): string | undefined {
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 8; depth++) {
    if (at.name === "ReplyError") return /^[A-Z][A-Z_]*(?=\s|$)/.exec(at.message)?.[0];
    at = at.cause;
  }
  return undefined;
}

/** Whether `code` is a reply only a cluster node gives (`MOVED`, `ASK`, …). */
export function isClusterReply(code: string | undefined): boolean {
  return code !== undefined && CLUSTER_REPLIES.has(code);
}

/**
 * Why a cluster node, opened without `cluster=true`, cannot serve: `evidence` is how the server
 * said it is one (`it answered MOVED`, `INFO says cluster_enabled:1`).
 */
export function clusterNodeMessage(evidence: string): string {
  return `the Redis server at that URL is a node of a Redis Cluster (${evidence}): add cluster=true to the URL, with a prefix that opens with a hash tag, e.g. redis://node:6379?cluster=true&prefix={tessera}: (docs/stores.md, "Redis")`;
}

/** The reply's code where a driver's code is looked for: `could not open the Redis store (NOPERM)`. */
class NamedReply extends Error {
  override readonly name = "ReplyError";
  readonly code: string;

  constructor(code: string, reply: unknown) {
    super(`the Redis server replied ${code}`, { cause: reply });
    this.code = code;
  }
}

/**
 * `error` with the server's `reply` named by its `code` on the first error below Tessera's own,
 * where the opener reads the code it names (core's `openFailure`). A finding with a code of its
 * own (`invalid_config`, `schema_unavailable`…) keeps its words.
 */
export function namingReply(error: unknown, code: string, reply: unknown): unknown {
  if (!isTesseraError(error) || !error.code.endsWith("_unavailable")) return error;
  if (error.code === "schema_unavailable") return error;
  return new TesseraError(error.code, error.message, { cause: new NamedReply(code, reply) });
}
