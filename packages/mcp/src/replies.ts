import { randomUUID } from "node:crypto";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { CallerCode } from "@tessera/core";
import { MAX_ANSWER_BYTES, redact } from "@tessera/core/store-kit";
import { audit, gateEvent, stamp } from "./call-audit.js";
import type { CallKeys } from "./call-keys.js";
import type { Limits } from "./config.js";
import { gatewayError } from "./errors.js";
import { CALL_ID_KEY, CODE_KEY } from "./keys.js";
import type { Duplicate, Recorded } from "./ledger.js";
import type { PipelineParts, Trail } from "./pipeline.js";
import { childSpan, endSpan } from "./tracing.js";

/*
 * What a call answers when it is not forwarded (a duplicate, a refusal), and how an answer is
 * kept for the duplicates to come.
 */

/** Every other request with a claimed key: never forwarded, told what the first one came to. */
export async function duplicate(
  parts: PipelineParts,
  trail: Trail,
  found: Duplicate,
): Promise<CallToolResult> {
  const original = trail.callId;
  // Its own call ID, so explain(original) keeps telling the first call's story.
  trail.callId = `${original}~replay-${randomUUID().slice(0, 8)}`;
  // Joins the first call's trace, unless the caller named its own (its host then finds it).
  if (found.trace !== undefined && !trail.caller.trace.fromCaller) trail.traceId = found.trace;
  const event = gateEvent(null, "duplicate_call");
  await audit(parts, trail, event, [`replay of ${redact(original)}: ${found.kind}`], "none");
  switch (found.kind) {
    case "conflict":
      throw gatewayError(
        "call_id_conflict",
        "this key was used before for another call: use a new key",
      );
    case "in_progress":
      throw gatewayError("call_in_progress", "the first call with this key has not finished yet");
    case "in_doubt":
      throw gatewayError(
        "call_in_doubt",
        "the first call with this key stopped without an outcome: it is in doubt and is not retried",
      );
    case "recorded": {
      const recorded = found.recorded;
      if (recorded.kind === "result") return recorded.result;
      // Refused in its act: the claim was settled with the code; the refusal is rebuilt.
      if (recorded.kind === "denied") return refusal(recorded.code as CallerCode, original);
      // The first call's error as it went out: one SDK prefix, added by the client.
      if (recorded.kind === "error") throw gatewayError("upstream_failed", recorded.message);
      throw gatewayError("call_in_doubt", recorded.message);
    }
  }
}

/**
 * A refusal the gateway decides itself (no such tool, an unusable bound argument), recorded as
 * the call's act: its claim, settled `denied` with the code as its answer, and its event, in
 * one write before the reply. A request that finds the key claimed is told what the first came to.
 */
export async function refuse(
  parts: PipelineParts,
  trail: Trail,
  keys: CallKeys,
  bodyHash: string,
  code: CallerCode,
  reason: "no_capability" | "invalid_request",
  detail: string[],
): Promise<CallToolResult> {
  const now = parts.clock.now();
  const claim = parts.ledger.claimOf(keys, bodyHash, trail.traceId, now, now);
  const event = stamp(parts, trail, gateEvent(code, reason), detail, "denied");
  let recorded: Awaited<ReturnType<PipelineParts["acts"]["record"]>>;
  const write = childSpan(trail.caller.trace.context, "tessera.store.write");
  try {
    recorded = await parts.acts.record({ claim, event });
  } catch {
    endSpan(write, { outcome: "error", code: "claim_store_unavailable", failed: true });
    throw gatewayError("claim_store_unavailable", "the store did not record the call: nothing ran");
  }
  endSpan(write, { outcome: recorded.status });
  if (recorded.status === "already_claimed") {
    return duplicate(
      parts,
      trail,
      await parts.ledger.duplicateOf(keys, bodyHash, recorded.existing, now),
    );
  }
  return refusal(code, trail.callId);
}

export function refusal(code: CallerCode, callId: string): CallToolResult {
  return {
    content: [{ type: "text", text: code }],
    isError: true,
    _meta: { [CODE_KEY]: code, [CALL_ID_KEY]: callId },
  };
}

function refusalText(text: string, callId: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true, _meta: { [CALL_ID_KEY]: callId } };
}

/**
 * The result to keep for duplicates: itself when its JSON fits the limit (and the claim
 * store's bound on an answer), else a note that it ran.
 */
export function keptAnswer(result: CallToolResult, limits: Limits, callId: string): Recorded {
  const limit = Math.min(limits.maxRecordedResultBytes, MAX_ANSWER_BYTES - 64);
  const json = JSON.stringify(result);
  // Up to 3 UTF-8 bytes per UTF-16 unit: most results are measured without counting bytes.
  const fits = json.length * 3 <= limit || Buffer.byteLength(json) <= limit;
  return {
    kind: "result",
    result: fits
      ? result
      : refusalText("the first call completed; its result was too large to keep", callId),
  };
}

/**
 * Settles the claim with the answer once the call's audit events (`audited`) have landed or
 * failed and the reply is out (see ledger.ts); answers `audited`, for the reply to wait on. If
 * the store fails there the call has happened but its claim stays unsettled: duplicates read it
 * in doubt, and it is never forwarded again.
 */
export function keep(
  parts: PipelineParts,
  trail: Trail,
  keys: CallKeys,
  recorded: Recorded,
  status: "dispatched" | "failed" | undefined,
  audited: Promise<void>,
): Promise<void> {
  parts.ledger.settleLater(keys, trail.callId, recorded, status, parts.clock.now(), audited);
  return audited;
}
