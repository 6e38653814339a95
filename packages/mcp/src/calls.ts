import { randomUUID } from "node:crypto";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  type Act,
  type AlreadyClaimed,
  type AuditEvent,
  type AuthorizeResult,
  createKernel,
  type GrantSource,
  isTesseraError,
  type Kernel,
} from "@tessera/core";
import { boundedCanonicalJson, MAX_JSON_DEPTH, redact } from "@tessera/core/store-kit";
import { audit, auditBestEffort, gateEvent, stamp } from "./call-audit.js";
import { canonical, sha256Hex } from "./call-keys.js";
import { gatewayError } from "./errors.js";
import { forward } from "./forward.js";
import { CALL_ID_KEY } from "./keys.js";
import type { Caller, PipelineParts, Trail } from "./pipeline.js";
import { accessContext } from "./principals.js";
import { duplicate, keep, keptAnswer, refusal, refuse } from "./replies.js";
import { keyOf, rpcCallId } from "./rpc-keys.js";
import { MCP_NAMESPACE, TOOLS_CALL, toolGrants } from "./tool-grants.js";
import { childSpan, endSpan, under } from "./tracing.js";
import { returnUnsentUse } from "./unsent.js";
import type { CatalogEntry } from "./upstreams.js";

export type { Caller, PipelineParts } from "./pipeline.js";

/**
 * The kernel of one catalog entry, made once: it sees only the grants that can reach that tool
 * (see tool-grants.ts), and keeps them validated and indexed between calls while the source's
 * `grantsVersion` is unchanged (the kernel's turn cache). It records each decision through the
 * store's act ledger, the call's claim in the same act; the act's event is stamped first with
 * what the gateway knows of the call (principal, session, tool, argument digest), found by the
 * turn's trace ID, so a decision is one event and one write.
 */
function kernelFor(parts: PipelineParts, entry: CatalogEntry): Kernel {
  const known = parts.kernels.get(entry.exposedName);
  if (known?.entry === entry) return known.kernel;
  // The tool's entry was replaced (a tools refresh): its old kernel's pending withdrawals get
  // their last attempt, then its background work stops. Calls still in its turns finish.
  // Nothing waits on it, so nothing may reject unheard: a drain that fails leaves what it did
  // not write in doubt, as a crash would.
  if (known !== undefined) retire(known.kernel).catch(() => undefined);
  const grants = parts.grants;
  const readVersion = grants.grantsVersion?.bind(grants);
  const space = grants.versionSpace;
  const source: GrantSource = {
    listGrants: async (ns, actor) => toolGrants(await grants.listGrants(ns, actor), entry),
    ...(readVersion === undefined
      ? {}
      : {
          grantsVersion: (ns: string, subject: string) => readVersion(ns, subject),
          // The tool's grants change only when the holder's do: same versions, same space.
          ...(space === undefined ? {} : { versionSpace: space }),
        }),
  };
  const acts = parts.acts;
  // Acts as recorded (stamped), by the kernel's event: a withdrawal names the act it withdraws.
  const stampedActs = new WeakMap<AuditEvent, { act: Act; trail: Trail }>();
  const withdraw = acts.withdraw?.bind(acts);
  const kernel = createKernel({
    grants: source,
    ...(parts.usage === undefined ? {} : { usage: parts.usage }),
    ...(parts.audit === undefined ? {} : { audit: parts.audit }),
    acts: {
      ...(acts.checksVersionsIn === undefined ? {} : { checksVersionsIn: acts.checksVersionsIn }),
      // A spend lost with nothing written is recorded again on the next grant: a second
      // record of the same decision, stamped and traced like the first.
      ...(acts.undoesLostSpends === true ? { undoesLostSpends: true } : {}),
      record: (act: Act) => {
        const deciding = parts.deciding.get(act.event.traceId);
        if (deciding === undefined) return acts.record(act);
        const { trail } = deciding;
        const write = childSpan(deciding.span, "tessera.store.write");
        const event = stamp(parts, trail, act.event, [], receiptOf(act.event));
        const exhausted =
          act.exhausted === undefined
            ? undefined
            : stamp(parts, trail, act.exhausted, [], receiptOf(act.exhausted));
        const stamped = { ...act, event, ...(exhausted === undefined ? {} : { exhausted }) };
        stampedActs.set(act.event, { act: stamped, trail });
        return acts.record(stamped).then(
          (result) => {
            if (result.status === "recorded") {
              deciding.recorded = result.recorded === "event" ? event : exhausted;
            }
            endSpan(write, { outcome: result.status });
            return result;
          },
          (error: unknown) => {
            endSpan(write, { outcome: "error", code: codeOf(error), failed: true });
            throw error;
          },
        );
      },
      // An act whose record threw (its reply lost) is withdrawn by the kernel in the background
      // (issue 22): the act as it was recorded, its withdrawal's event stamped like the act's.
      ...(withdraw === undefined
        ? {}
        : {
            withdraw: (withdrawal) => {
              const known = stampedActs.get(withdrawal.act.event);
              if (known === undefined) return withdraw(withdrawal);
              const detail = withdrawal.event.detail;
              return withdraw({
                ...withdrawal,
                act: { ...known.act, claim: withdrawal.act.claim },
                event: stamp(
                  parts,
                  known.trail,
                  withdrawal.event,
                  detail ? [detail] : [],
                  "failed",
                ),
              });
            },
          }),
    },
    clock: parts.clock,
  });
  parts.kernels.set(entry.exposedName, { entry, kernel });
  return kernel;
}

/** Drains a kernel (denial events, one more try of each pending withdrawal), then closes it. */
export async function retire(kernel: Kernel): Promise<void> {
  try {
    await kernel.drain?.();
  } finally {
    kernel.close?.();
  }
}

/** A refusal's event says its claim was settled `denied` in the same write. */
function receiptOf(event: AuditEvent): string | undefined {
  return event.outcome === "denied" ? "denied" : undefined;
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
    callId: rpcCallId(caller),
    traceId: caller.trace.traceId,
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
  if (entry === undefined) {
    // Refused exactly as a granted-but-spent tool is: the caller cannot tell them apart.
    return refuse(parts, trail, keys, bodyHash, "tool_unavailable", "no_capability", [
      `no tool named ${redact(params.name)}`,
    ]);
  }
  trail.tool = entry.exposedName;
  const bound = boundSegments(entry, args);
  if (typeof bound === "string") {
    return refuse(parts, trail, keys, bodyHash, "invalid_request", "invalid_request", [
      `bound argument ${bound} is not a usable path segment`,
    ]);
  }

  // The decision and the claim are one act: one write before anything is forwarded.
  const now = parts.clock.now();
  const claim = parts.ledger.claimOf(
    keys,
    bodyHash,
    trail.traceId,
    now,
    now + parts.limits.upstreamTimeoutMs + 5_000,
  );
  // The kernel's turn gets a key of its own: calls of one host trace may be decided at once.
  const turnKey = randomUUID();
  const decide = childSpan(caller.trace.context, "tessera.decide");
  const deciding = {
    trail,
    recorded: undefined as AuditEvent | undefined,
    span: under(caller.trace.context, decide),
  };
  parts.deciding.set(turnKey, deciding);
  let decision: AuthorizeResult | AlreadyClaimed;
  try {
    const turn = await kernelFor(parts, entry).openTurnAuthority(
      accessContext(caller.principal, turnKey),
    );
    try {
      decision = await turn.authorize(
        {
          action: TOOLS_CALL,
          resource: { namespace: MCP_NAMESPACE, path: [entry.server, entry.tool, ...bound] },
          callId: trail.callId,
        },
        { claim },
      );
    } finally {
      await turn.close();
    }
  } catch (error) {
    endSpan(decide, { outcome: "error", code: "claim_store_unavailable", failed: true });
    // Nothing of the act was written (the ledger's all or nothing): a retry gets a decision.
    // That is the caller's answer even when the sink (most often the same store) refuses this
    // event too: "audit unavailable" would hide that nothing ran.
    await auditBestEffort(parts, trail, gateEvent(null, "claim_store_unavailable"), [
      `act ledger: ${codeOf(error)}`,
    ]);
    throw gatewayError("claim_store_unavailable", "the store did not record the call: nothing ran");
  } finally {
    parts.deciding.delete(turnKey);
  }
  endSpan(decide, {
    outcome: decision.status,
    code: decision.status === "denied" ? decision.code : null,
  });
  if (decision.status === "already_claimed") {
    const found = await parts.ledger.duplicateOf(keys, bodyHash, decision.existing, now);
    return duplicate(parts, trail, found);
  }
  // A refusal's claim was settled, with the code as its answer, in the act's write.
  if (decision.status === "denied") return refusal(decision.code, trail.callId);
  const decided = deciding.recorded;

  const outcome = await forward(entry, args, parts.limits.upstreamTimeoutMs, caller.trace);
  const latency = Math.round(performance.now() - started);
  if (outcome.kind === "result") {
    const result: CallToolResult = {
      ...outcome.result,
      _meta: { ...(outcome.result._meta ?? {}), [CALL_ID_KEY]: trail.callId },
    };
    // The act's event said the call was allowed; its receipt and answer go into the claim.
    parts.ledger.settleLater(
      keys,
      trail.callId,
      keptAnswer(result, parts.limits, trail.callId),
      "dispatched",
      parts.clock.now(),
    );
    return result;
  }
  const failedEvent: AuditEvent = {
    ...(decided ?? gateEvent(null, "allowed")),
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
      trail,
      keys,
      { kind: "error", code: "upstream_failed", message },
      "failed",
      recorded,
    );
    throw gatewayError("upstream_failed", message);
  }
  const message = `the upstream did not answer (${outcome.why}): the call is in doubt and is not retried`;
  await keep(
    parts,
    trail,
    keys,
    { kind: "in_doubt", message },
    undefined,
    audit(parts, trail, failedEvent, [`upstream in doubt: ${outcome.why}`], "in_doubt", latency),
  );
  throw gatewayError("call_in_doubt", message);
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
