import { randomUUID } from "node:crypto";
import { type CallToolResult, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { CallerCode } from "@tessera/core";
import { redact } from "@tessera/core/store-kit";
import { audit, gateEvent, type Trail } from "./call-audit.js";
import type { PipelineParts } from "./calls.js";
import type { Limits } from "./config.js";
import { gatewayError } from "./errors.js";
import { CALL_ID_KEY, CODE_KEY } from "./keys.js";
import { type CallKeys, type CallLedger, type Recorded, RecordedJson } from "./ledger.js";

/*
 * What a call answers when it is not forwarded (a duplicate, a refusal), and how an answer is
 * kept for the duplicates to come.
 */

/** Every other request with a claimed key: never forwarded, told what the first one came to. */
export async function duplicate(
  parts: PipelineParts,
  trail: Trail,
  found: Exclude<Awaited<ReturnType<CallLedger["claim"]>>, { kind: "claimed" }>,
): Promise<CallToolResult> {
  const original = trail.callId;
  // Its own call ID, so explain(original) keeps telling the first call's story.
  trail.callId = `${original}~replay-${randomUUID().slice(0, 8)}`;
  if (found.trace !== undefined) trail.traceId = found.trace;
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
      if (recorded.kind === "error")
        throw new McpError(-32012, recorded.message, { code: recorded.code });
      throw gatewayError("call_in_doubt", recorded.message);
    }
  }
}

export async function refuse(
  parts: PipelineParts,
  trail: Trail,
  keys: CallKeys,
  bodyHash: string,
  code: CallerCode,
  reason: "no_capability" | "invalid_request",
  detail: string[],
): Promise<CallToolResult> {
  const result = refusal(code, trail.callId);
  await keep(
    parts,
    keys,
    bodyHash,
    { kind: "result", result },
    "denied",
    audit(parts, trail, gateEvent(code, reason), detail, "denied"),
  );
  return result;
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

/** The result to keep for duplicates, serialized once: the text that measured it is the one stored. */
export function keptAnswer(result: CallToolResult, limits: Limits, callId: string): RecordedJson {
  const json = JSON.stringify(result);
  // Up to 3 UTF-8 bytes per UTF-16 unit: most results are measured without counting bytes.
  const fits =
    json.length * 3 <= limits.maxRecordedResultBytes ||
    Buffer.byteLength(json) <= limits.maxRecordedResultBytes;
  const kept = fits
    ? json
    : JSON.stringify(
        refusalText("the first call completed; its result was too large to keep", callId),
      );
  return new RecordedJson(`{"kind":"result","result":${kept}}`);
}

/**
 * Keeps the answer for duplicates and settles, once the call's audit event (`audited`) has
 * landed or failed and the reply is out (see ledger.ts); answers `audited`, for the reply to
 * wait on. If the store fails here the call has happened but its claim stays unsettled:
 * duplicates read it in doubt, and it is never forwarded again.
 */
export function keep(
  parts: PipelineParts,
  keys: CallKeys,
  bodyHash: string,
  recorded: Recorded | RecordedJson,
  status: "dispatched" | "denied" | "failed" | undefined,
  audited: Promise<void>,
): Promise<void> {
  parts.ledger.recordLater(keys, bodyHash, recorded, status, parts.clock.now(), audited);
  return audited;
}
