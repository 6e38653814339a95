import type { CallToolRequest } from "@modelcontextprotocol/sdk/types.js";
import { isPrintable } from "@tessera/core";
import { audit, gateEvent } from "./call-audit.js";
import { type CallKeys, callKeys, sha256Hex } from "./call-keys.js";
import { gatewayError } from "./errors.js";
import { IDEMPOTENCY_KEY } from "./keys.js";
import type { Caller, PipelineParts, Trail } from "./pipeline.js";
import { principalKey } from "./principals.js";

/*
 * What keys a `tools/call`: the client's idempotency key, else the JSON-RPC id in a live
 * session, and the call ID a call carries before that key is read.
 */

/**
 * The longest JSON-RPC id (as JSON) that keys a call, as an idempotency key is at most 256
 * characters: a longer one would be a call ID past the kernel's bound, and written whole into
 * every claim and audit event (an id may be as long as the request body).
 */
const MAX_RPC_ID_CHARS = 256;

/** A JSON-RPC id as the call ID writes it: `7` for the number 7, `"7"` for the string. */
function rpcIdText(caller: Caller): string {
  return typeof caller.requestId === "number"
    ? String(caller.requestId)
    : JSON.stringify(caller.requestId);
}

/**
 * A call's ID before its idempotency key is read: `<session>:<JSON-RPC id as JSON>`, so `7` and
 * `"7"` (two requests, two claims: see keyOf) keep IDs of their own — `s:7` and `s:"7"`. An id
 * too long to key a call is named by its digest (`s:sha256:<hex>`, which no id's JSON can be),
 * so the refusal's event stays bounded.
 */
export function rpcCallId(caller: Caller): string {
  const id = rpcIdText(caller);
  const named = id.length > MAX_RPC_ID_CHARS ? `sha256:${sha256Hex(id)}` : id;
  return `${caller.session ?? "stateless"}:${named}`;
}

/** (principal + MCP session, key): the client's idempotency key, else the JSON-RPC id in a live session. */
export async function keyOf(
  parts: PipelineParts,
  caller: Caller,
  params: CallToolRequest["params"],
  trail: Trail,
): Promise<CallKeys> {
  const scope = principalKey(caller.principal);
  const key = (params._meta as Record<string, unknown> | undefined)?.[IDEMPOTENCY_KEY];
  if (key !== undefined) {
    // Printable, as every call ID Tessera takes: it becomes the call's ID in audit and claims.
    if (typeof key !== "string" || key.length === 0 || key.length > 256 || !isPrintable(key)) {
      await audit(parts, trail, gateEvent("invalid_request", "invalid_request"), [
        "the idempotency key is not a string of 1 to 256 printable characters",
      ]);
      throw gatewayError(
        "invalid_request",
        `_meta["${IDEMPOTENCY_KEY}"] must be a string of 1 to 256 characters, none of them a control, bidi or line-separator character or a lone surrogate`,
      );
    }
    // Scoped to the principal, not the connection: a retry on a new connection is still a retry.
    trail.callId = key;
    return callKeys(scope, `key:${key}`);
  }
  if (caller.session === undefined) {
    await audit(parts, trail, gateEvent("invalid_request", "invalid_request"), [
      "no idempotency key on a stateless connection",
    ]);
    throw gatewayError(
      "idempotency_key_required",
      `a stateless connection needs _meta["${IDEMPOTENCY_KEY}"]: a JSON-RPC id alone is not a replay key`,
    );
  }
  if (rpcIdText(caller).length > MAX_RPC_ID_CHARS) {
    await audit(parts, trail, gateEvent("invalid_request", "invalid_request"), [
      `a JSON-RPC id over ${MAX_RPC_ID_CHARS} characters and no idempotency key`,
    ]);
    throw gatewayError(
      "invalid_request",
      `a JSON-RPC id over ${MAX_RPC_ID_CHARS} characters (as JSON) cannot key a call: use a shorter id, or _meta["${IDEMPOTENCY_KEY}"]`,
    );
  }
  // SDK clients number requests from 0 on every connection: the id means something only
  // within its session.
  return callKeys(
    `${scope}:${caller.session}`,
    `rpc:${typeof caller.requestId}:${caller.requestId}`,
  );
}
