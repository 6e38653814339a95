import type { AuditReason, ClaimStore, Clock, ReceiptStatus } from "@tessera/core";
import type { CatalogFunction, CatalogIndex } from "../catalog/catalog.js";
import { bodyHash, type CallMessage, readCall } from "./message.js";
import type { Stage } from "./pipeline.js";
import type { ApproveFunction, FunctionInvocation, GateReply, InvokeFunction } from "./types.js";

/** The state of one call as it moves through the stages. */
export interface CallContext {
  readonly session: string;
  readonly input: unknown;
  message?: CallMessage;
  invocation?: FunctionInvocation;
  /** Set once this worker holds the exclusive claim: from then on the outcome is settled. */
  claimed: boolean;
  value?: unknown;
}

export interface GateRefusal {
  readonly reason: AuditReason;
  readonly detail?: string;
  /** Validation builds its own reply (it may have no usable ID to answer on). */
  readonly reply?: GateReply;
  readonly previous?: ReceiptStatus;
  readonly changedBody?: boolean;
}

export interface StageDependencies {
  readonly catalog: CatalogIndex;
  readonly claims: ClaimStore;
  readonly invoke: InvokeFunction;
  readonly approve?: ApproveFunction;
  readonly clock: Clock;
  readonly worker: string;
}

/** validate → catalog → claim → approve → dispatch, in exactly that order. */
export function gateStages(deps: StageDependencies): Stage<CallContext, GateRefusal>[] {
  const stages: Stage<CallContext, GateRefusal>[] = [
    { name: "validate", run: validate },
    { name: "catalog", run: (context) => checkCatalog(deps.catalog, context) },
    { name: "claim", run: (context) => claim(deps, context) },
  ];
  const { approve } = deps;
  if (approve) stages.push({ name: "approve", run: (context) => askApproval(approve, context) });
  stages.push({ name: "dispatch", run: (context) => dispatch(deps.invoke, context) });
  return stages;
}

function validate(context: CallContext): GateRefusal | undefined {
  const read = readCall(context.input);
  if (!read.ok) {
    return { reason: "invalid_message", reply: read.reply, detail: read.detail };
  }
  context.message = read.message;
  return undefined;
}

function checkCatalog(catalog: CatalogIndex, context: CallContext): GateRefusal | undefined {
  const message = context.message as CallMessage;
  const found = catalog.lookup(message.catalogId, message.call);
  if (typeof found === "string") return { reason: found };
  if (!argsMatch(found, message)) return { reason: "invalid_args" };
  context.invocation = Object.freeze({
    session: context.session,
    functionCallId: message.functionCallId,
    catalogId: message.catalogId,
    call: message.call,
    args: message.args ?? {},
  });
  return undefined;
}

/** The catalog's function schema validates the wire-level call object `{ call, args }`. */
function argsMatch(fn: CatalogFunction, message: CallMessage): boolean {
  const wire =
    message.args === undefined
      ? { call: message.call }
      : { call: message.call, args: message.args };
  return fn.validate(wire) === true;
}

/**
 * The exclusive claim comes before policy, approval and dispatch: whoever loses it (a racing
 * worker, a retry, a restarted worker, a changed body) learns only that the ID is used.
 */
async function claim(
  deps: StageDependencies,
  context: CallContext,
): Promise<GateRefusal | undefined> {
  const message = context.message as CallMessage;
  const hash = bodyHash(message);
  const result = await deps.claims.claim(
    { session: context.session, functionCallId: message.functionCallId },
    { bodyHash: hash, claimedAt: deps.clock.now(), worker: deps.worker },
  );
  if (result.status === "claimed") {
    context.claimed = true;
    return undefined;
  }
  return {
    reason: "duplicate_call",
    previous: result.existing.receipt?.status ?? "in_doubt",
    changedBody: result.existing.bodyHash !== hash,
  };
}

async function askApproval(
  approve: ApproveFunction,
  context: CallContext,
): Promise<GateRefusal | undefined> {
  const verdict = await approve(context.invocation as FunctionInvocation);
  if (verdict === true) return undefined;
  if (typeof verdict === "object" && verdict !== null && verdict.allow === true) return undefined;
  const reason =
    typeof verdict === "object" && verdict !== null && verdict.reason === "policy_denied"
      ? "policy_denied"
      : "approval_denied";
  return { reason };
}

async function dispatch(invoke: InvokeFunction, context: CallContext): Promise<undefined> {
  context.value = await invoke(context.invocation as FunctionInvocation);
  return undefined;
}
