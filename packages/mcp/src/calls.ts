import { randomUUID } from "node:crypto";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  type AuditEvent,
  type AuditSink,
  type Clock,
  createKernel,
  type GrantSource,
  type GrantUsageStore,
  isTesseraError,
  type Kernel,
  type TurnAuthority,
} from "@tessera/core";
import { boundedCanonicalJson, MAX_JSON_DEPTH, redact } from "@tessera/core/store-kit";
import { audit, gateEvent, type Trail } from "./call-audit.js";
import type { Limits, Principal } from "./config.js";
import { gatewayError } from "./errors.js";
import { forward } from "./forward.js";
import { CALL_ID_KEY, IDEMPOTENCY_KEY } from "./keys.js";
import { type CallKeys, type CallLedger, callKeys, canonical, sha256Hex } from "./ledger.js";
import { accessContext, principalKey } from "./principals.js";
import { duplicate, keep, keptAnswer, refusal, refuse } from "./replies.js";
import { MCP_NAMESPACE, TOOLS_CALL, toolGrants } from "./tool-grants.js";
import { returnUnsentUse } from "./unsent.js";
import type { CatalogEntry } from "./upstreams.js";

export interface PipelineParts {
  readonly catalog: ReadonlyMap<string, CatalogEntry>;
  readonly grants: GrantSource;
  readonly usage: GrantUsageStore | undefined;
  readonly audit: AuditSink | undefined;
  readonly clock: Clock;
  readonly ledger: CallLedger;
  readonly limits: Limits;
  /** One kernel per catalog entry (an entry replaced by a tools refresh gets a new one). */
  readonly kernels: WeakMap<CatalogEntry, Kernel>;
  /** The kernel's events of calls being decided, by trace ID. */
  readonly decisions: Map<string, AuditEvent[]>;
}

/**
 * The kernel of one catalog entry, made once: it sees only the grants that can reach that tool
 * (see tool-grants.ts), and keeps them validated and indexed between calls while the source's
 * `grantsVersion` is unchanged (the kernel's turn cache). Its decision events are handed to the
 * call that asked, by trace ID, and written by the call as its one audit event.
 */
function kernelFor(parts: PipelineParts, entry: CatalogEntry): Kernel {
  let kernel = parts.kernels.get(entry);
  if (kernel !== undefined) return kernel;
  const grants = parts.grants;
  const source: GrantSource = {
    listGrants: async (ns, actor) => toolGrants(await grants.listGrants(ns, actor), entry),
  };
  if (typeof grants.grantsVersion === "function") {
    source.grantsVersion = (ns, subject) =>
      (grants.grantsVersion as NonNullable<GrantSource["grantsVersion"]>)(ns, subject);
  }
  kernel = createKernel({
    grants: source,
    ...(parts.usage === undefined ? {} : { usage: parts.usage }),
    audit: { append: (event) => void parts.decisions.get(event.traceId)?.push(event) },
    clock: parts.clock,
  });
  parts.kernels.set(entry, kernel);
  return kernel;
}

/** Who is calling, over which MCP session (undefined on a stateless connection). */
export interface Caller {
  readonly principal: Principal;
  readonly session: string | undefined;
  readonly requestId: string | number;
}

/**
 * One `tools/call`, in the kernel's order: key → claim → catalog → authorize and spend →
 * forward → record and settle → one audit event. Nothing is forwarded unless this request won
 * the claim and the kernel allowed it, and nothing is ever forwarded twice.
 */
export async function callTool(
  parts: PipelineParts,
  caller: Caller,
  params: CallToolRequest["params"],
): Promise<CallToolResult> {
  const started = performance.now();
  const args = params.arguments ?? {};
  // One canonical text serves the size check, the audit's digest and the replay body hash.
  // Bounded: arguments nested past MAX_JSON_DEPTH are refused, not hashed (a walk per level
  // overflows the stack at a few thousand levels, ten kilobytes of brackets).
  const argsText = boundedCanonicalJson(args);
  const trail: Trail = {
    caller,
    started,
    argsDigest: argsText === undefined ? "(too deep to hash)" : sha256Hex(argsText),
    callId: `${caller.session ?? "stateless"}:${String(caller.requestId)}`,
    traceId: randomUUID(),
    tool: undefined,
  };
  if (argsText === undefined) {
    await audit(parts, trail, gateEvent("invalid_request", "invalid_request"), [
      `arguments nested deeper than ${MAX_JSON_DEPTH} levels`,
    ]);
    throw gatewayError(
      "invalid_request",
      `the arguments nest deeper than ${MAX_JSON_DEPTH} levels`,
    );
  }
  const size = Buffer.byteLength(argsText);
  if (size > parts.limits.maxArgumentBytes) {
    await audit(parts, trail, gateEvent("invalid_request", "invalid_request"), [
      `arguments of ${size} bytes, over ${parts.limits.maxArgumentBytes}`,
    ]);
    throw gatewayError(
      "invalid_request",
      `the arguments are over ${parts.limits.maxArgumentBytes} bytes`,
    );
  }
  const keys = await keyOf(parts, caller, params, trail);
  // canonical({ name, arguments }): its keys in sorted order.
  const bodyHash = sha256Hex(`{"arguments":${argsText},"name":${canonical(params.name)}}`);
  const entry = parts.catalog.get(params.name);
  const bound = entry === undefined ? undefined : boundSegments(entry, args);
  // The turn's grant read (a version check when warm) has no effect: it goes out beside the
  // claim instead of after it. Deciding and spending still wait for the claim.
  const opening =
    entry === undefined || bound === undefined || typeof bound === "string"
      ? undefined
      : kernelFor(parts, entry).openTurnAuthority(accessContext(caller.principal, trail.traceId));
  opening?.catch(() => undefined);
  const now = parts.clock.now();
  let claimed: Awaited<ReturnType<CallLedger["claim"]>>;
  try {
    claimed = await parts.ledger.claim(
      keys,
      bodyHash,
      trail.traceId,
      now,
      now + parts.limits.upstreamTimeoutMs + 5_000,
    );
  } catch (error) {
    void closeOpened(opening);
    await audit(parts, trail, gateEvent(null, "claim_store_unavailable"), [
      `claim store: ${codeOf(error)}`,
    ]);
    throw gatewayError("claim_store_unavailable", "the claim store did not answer: nothing ran");
  }
  if (claimed.kind !== "claimed") {
    void closeOpened(opening);
    return duplicate(parts, trail, claimed);
  }

  if (entry === undefined) {
    // Refused exactly as a granted-but-spent tool is: the caller cannot tell them apart.
    return refuse(parts, trail, keys, bodyHash, "tool_unavailable", "no_capability", [
      `no tool named ${redact(params.name)}`,
    ]);
  }
  trail.tool = entry.exposedName;
  if (typeof bound === "string" || bound === undefined || opening === undefined) {
    return refuse(parts, trail, keys, bodyHash, "invalid_request", "invalid_request", [
      `bound argument ${bound ?? "?"} is not a usable path segment`,
    ]);
  }

  const captured: AuditEvent[] = [];
  parts.decisions.set(trail.traceId, captured);
  let decision: Awaited<ReturnType<TurnAuthority["authorize"]>>;
  try {
    const turn = await opening;
    try {
      decision = await turn.authorize({
        action: TOOLS_CALL,
        resource: { namespace: MCP_NAMESPACE, path: [entry.server, entry.tool, ...bound] },
        callId: trail.callId,
      });
    } finally {
      await turn.close();
    }
  } finally {
    parts.decisions.delete(trail.traceId);
  }
  const decided = captured[captured.length - 1];
  if (decision.status === "denied") {
    const result = refusal(decision.code, trail.callId);
    await keep(
      parts,
      keys,
      bodyHash,
      { kind: "result", result },
      "denied",
      audit(parts, trail, decided ?? gateEvent(decision.code, "no_capability"), [], "denied"),
    );
    return result;
  }

  const outcome = await forward(entry, args, parts.limits.upstreamTimeoutMs);
  const latency = Math.round(performance.now() - started);
  if (outcome.kind === "result") {
    const result: CallToolResult = {
      ...outcome.result,
      _meta: { ...(outcome.result._meta ?? {}), [CALL_ID_KEY]: trail.callId },
    };
    // The answer is kept after the reply whatever the audit sink does: the call did run.
    await keep(
      parts,
      keys,
      bodyHash,
      keptAnswer(result, parts.limits, trail.callId),
      "dispatched",
      audit(
        parts,
        trail,
        decided,
        [`upstream ok${result.isError ? " (tool error)" : ""}`],
        "dispatched",
        latency,
      ),
    );
    return result;
  }
  const failedEvent: AuditEvent = {
    ...(decided as AuditEvent),
    outcome: "denied",
    code: "delivery_failed",
    reason: "delivery_failed",
  };
  if (outcome.kind === "failed") {
    const message = `the upstream tool failed (${outcome.why}); it is not retried`;
    const notes = [
      `upstream failed: ${outcome.why}`,
      ...(outcome.sent ? [] : ["nothing was sent"]),
    ];
    // Nothing reached the upstream: the ticket's use comes back, as its own event after the call's.
    const recorded = audit(parts, trail, failedEvent, notes, "failed", latency).then(() =>
      outcome.sent ? undefined : returnUnsentUse(parts, trail, decided, failedEvent, latency),
    );
    await keep(
      parts,
      keys,
      bodyHash,
      { kind: "error", code: "upstream_failed", message },
      "failed",
      recorded,
    );
    throw gatewayError("upstream_failed", message);
  }
  const message = `the upstream did not answer (${outcome.why}): the call is in doubt and is not retried`;
  await keep(
    parts,
    keys,
    bodyHash,
    { kind: "in_doubt", message },
    undefined,
    audit(parts, trail, failedEvent, [`upstream in doubt: ${outcome.why}`], "in_doubt", latency),
  );
  throw gatewayError("call_in_doubt", message);
}

/** (principal + MCP session, key): the client's idempotency key, else the JSON-RPC id in a live session. */
async function keyOf(
  parts: PipelineParts,
  caller: Caller,
  params: CallToolRequest["params"],
  trail: Trail,
): Promise<CallKeys> {
  const scope = principalKey(caller.principal);
  const key = (params._meta as Record<string, unknown> | undefined)?.[IDEMPOTENCY_KEY];
  if (key !== undefined) {
    if (typeof key !== "string" || key.length === 0 || key.length > 256) {
      await audit(parts, trail, gateEvent("invalid_request", "invalid_request"), [
        "the idempotency key is not a string of 1 to 256 characters",
      ]);
      throw gatewayError(
        "invalid_request",
        `_meta["${IDEMPOTENCY_KEY}"] must be a string of 1 to 256 characters`,
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
  // SDK clients number requests from 0 on every connection: the id means something only
  // within its session.
  return callKeys(
    `${scope}:${caller.session}`,
    `rpc:${typeof caller.requestId}:${caller.requestId}`,
  );
}

/** The bound arguments' values as path segments, or the name of the first one that is not one. */
function boundSegments(entry: CatalogEntry, args: Record<string, unknown>): string[] | string {
  const bound: string[] = [];
  for (const name of entry.bind) {
    const value = args[name];
    if (typeof value !== "string" || !isSegment(value)) return name;
    bound.push(value);
  }
  return bound;
}

/** A turn opened beside a claim the call then lost (or could not make): nothing is decided in it. */
async function closeOpened(opening: Promise<TurnAuthority> | undefined): Promise<void> {
  try {
    await (await opening)?.close();
  } catch {}
}

function codeOf(error: unknown): string {
  return isTesseraError(error) ? error.code : "error";
}

/** A path segment the kernel accepts (see core's path-segment.ts); checked here to refuse early. */
function isSegment(value: string): boolean {
  return (
    value.length > 0 &&
    value.length <= 512 &&
    value !== "." &&
    value !== ".." &&
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
    !/[\u0000-\u001f\u007f-\u009f/\\\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(
      value,
    )
  );
}
