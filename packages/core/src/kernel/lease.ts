import { randomUUID } from "node:crypto";
import { redact, TesseraError } from "../contracts/errors.js";
import { MESSAGE_SEND_ACTION } from "../contracts/messages.js";
import type { AccessContext } from "../contracts/schemas.js";
import type { Clock } from "../ports/clock.js";
import type { DeliveryResult, MessageEnvelope, MessageTransport } from "../ports/transport.js";
import type { AuditWriter } from "./audit-writer.js";
import { type DecisionScope, decide, type Verdict } from "./decide.js";
import { discover } from "./discovery.js";
import { asyncDispose } from "./dispose.js";
import type { IndexedGrant } from "./grant-index.js";
import {
  INVALID,
  NO_TRANSPORT,
  nowOf,
  OTHER_OWNER,
  type Outcome,
  outcomeOf,
  precheck,
  readAuthorize,
  readSend,
  refused,
  type Send,
  THREW,
} from "./lease-checks.js";
import { refuseClosedWhileDeciding, refusePrecheck, refuseVerdict } from "./lease-refusals.js";
import { MALFORMED, readCallId, readClaim } from "./request.js";
import { deliverNowOf } from "./sync-ports.js";
import type {
  ActOptions,
  AlreadyClaimed,
  AuthorizeRequest,
  AuthorizeResult,
  Refusal,
  SendMessageRequest,
  SendMessageResult,
  TurnAuthority,
} from "./types.js";
import { recordFailedDelivery } from "./unsent.js";

/** Everything a lease needs, gathered by the kernel when it opens. */
export interface LeaseParts {
  readonly ctx: AccessContext;
  /** Undefined when the turn failed closed: every decision is `authority_unavailable`. */
  readonly scope: DecisionScope | undefined;
  readonly audit: AuditWriter;
  readonly transport: MessageTransport | undefined;
  readonly clock: Clock;
}

/** A claim is recorded with its decision only by a ledger: without one it would be ignored. */
function claimNeedsLedger(): TesseraError {
  return new TesseraError(
    "invalid_config",
    "a decision with a claim needs an act ledger: createKernel({ acts }) (a store bundle's acts)",
  );
}

/**
 * One authority lease. It holds the turn's indexed grant set and nothing else: usage is read
 * and consumed per decision, so a ticket cannot be spent twice even inside one turn. A grant
 * revoked while the lease is open still counts until the turn ends — the lease read the source
 * once — and the revocation applies from the next turn. Once closed, nothing more happens
 * under it: new calls are refused, and a call still deciding when it closed is refused too.
 */
export class Lease implements TurnAuthority {
  readonly #ctx: AccessContext;
  readonly #scope: DecisionScope | undefined;
  readonly #audit: AuditWriter;
  readonly #transport: MessageTransport | undefined;
  readonly #clock: Clock;
  /** Epoch ms of `ctx.now`, which fixes the decision instant for the whole turn. */
  readonly #fixedNow: number | undefined;
  #closed = false;
  /**
   * Call and message IDs the kernel mints: a random per-lease prefix and a counter. Drawn on
   * the first mint: a one-shot turn whose caller names its call draws none.
   */
  #idPrefix: string | undefined;
  #minted = 0;

  constructor(parts: LeaseParts) {
    this.#ctx = parts.ctx;
    this.#scope = parts.scope;
    this.#audit = parts.audit;
    this.#transport = parts.transport;
    this.#clock = parts.clock;
    this.#fixedNow = parts.ctx.now === undefined ? undefined : Date.parse(parts.ctx.now);
  }

  get traceId(): string {
    return this.#ctx.traceId;
  }

  get closed(): boolean {
    return this.#closed;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  [asyncDispose](): Promise<void> {
    return this.close();
  }

  async listTools(): Promise<readonly string[]> {
    const scope = this.#scope;
    if (this.#closed) return Object.freeze([]);
    // Not an empty list: "nothing granted" and "the grants could not be read" must not look
    // alike to a host, which would tell its model it may do nothing during an outage.
    if (scope === undefined) {
      throw new TesseraError(
        "authority_unavailable",
        "the turn's grants could not be read: its tools cannot be listed",
      );
    }
    const now = this.#now();
    const tools: string[] = [];
    for (const [action, entry] of scope.index) {
      // With nowhere to deliver, the send tool is not offered: every send would be refused.
      if (action === MESSAGE_SEND_ACTION && this.#transport === undefined) continue;
      if ((await discover(scope, entry, now)) === "visible") tools.push(action);
    }
    return Object.freeze(tools.sort());
  }

  authorize(request: AuthorizeRequest): Promise<AuthorizeResult>;
  authorize(
    request: AuthorizeRequest,
    options: ActOptions,
  ): Promise<AuthorizeResult | AlreadyClaimed>;
  async authorize(request: AuthorizeRequest, options?: ActOptions): Promise<AuthorizeResult> {
    const claim = readClaim(options);
    if (claim !== undefined && claim !== MALFORMED) throw claimNeedsLedger();
    const now = this.#now();
    // Every field of the request is read once, here: see request.ts.
    const rawCallId = readCallId(request);
    const callId = typeof rawCallId === "string" ? rawCallId : this.#mintId();
    const state = precheck(this.#closed, this.#scope);
    if (state !== undefined)
      return refusePrecheck(this.#audit, now, callId, state, undefined, undefined);
    const call =
      rawCallId === MALFORMED || claim === MALFORMED
        ? undefined
        : readAuthorize(request, callId, now);
    if (call === undefined)
      return refusePrecheck(this.#audit, now, callId, INVALID, undefined, undefined);
    // Decided here, not in a helper returning its promise: an async function that returns a
    // promise resolves a few microtask turns later, a measurable share of a decision.
    const { action, label } = call;
    // The turn acts for its owner only: a request may restate that owner, never name another.
    if (call.owner !== undefined && call.owner !== this.#ctx.owner) {
      return refusePrecheck(this.#audit, now, callId, OTHER_OWNER, action, label);
    }
    let verdict = decide(this.#scope as DecisionScope, action, call, now);
    if (verdict instanceof Promise) verdict = await verdict;
    if (!verdict.allowed) return refuseVerdict(this.#audit, now, callId, verdict, action, label);
    const grantId = verdict.grant.id;
    if (this.#closed) return this.#closedWhileDeciding(now, callId, action, label, verdict.grant);
    const written = this.#audit.write({
      now,
      code: null,
      reason: "allowed",
      callId,
      action,
      resource: label,
      grantId,
      chain: verdict.grant.chain,
    });
    if (written !== undefined) {
      await written;
      // The lease closed (a deadline, an abort) while the allowed event was being written:
      // nothing is allowed under a closed lease, so the caller is refused after all.
      if (this.#closed) return this.#closedWhileDeciding(now, callId, action, label, verdict.grant);
    }
    return Object.freeze({ status: "allowed", grantId, callId: callId });
  }

  /**
   * Not `async`, and none of its steps awaits unless a port answers later: a send through the
   * in-memory ports runs to its result in one go. An async function that may await sets up a
   * suspendable frame on every call (about 400 bytes, most of a send's garbage in a fan-out).
   * Whatever throws on the way is this call's rejection, as it would be in an async function.
   */
  sendMessage(request: SendMessageRequest): Promise<SendMessageResult>;
  sendMessage(
    request: SendMessageRequest,
    options: ActOptions,
  ): Promise<SendMessageResult | AlreadyClaimed>;
  sendMessage(request: SendMessageRequest, options?: ActOptions): Promise<SendMessageResult> {
    try {
      return this.#send(request, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #send(request: SendMessageRequest, options: ActOptions | undefined): Promise<SendMessageResult> {
    const claim = readClaim(options);
    if (claim !== undefined && claim !== MALFORMED) throw claimNeedsLedger();
    const now = this.#now();
    // Every field of the request is read once, here, into `send`: see request.ts.
    const rawCallId = readCallId(request);
    const callId = typeof rawCallId === "string" ? rawCallId : this.#mintId();
    const state = precheck(this.#closed, this.#scope);
    if (state !== undefined)
      return refusePrecheck(this.#audit, now, callId, state, MESSAGE_SEND_ACTION, undefined);
    const send =
      rawCallId === MALFORMED || claim === MALFORMED
        ? undefined
        : readSend(request, callId, now, this.#ctx.owner);
    if (send === undefined)
      return refusePrecheck(this.#audit, now, callId, INVALID, MESSAGE_SEND_ACTION, undefined);
    // Refused before any use is spent: there is nowhere to deliver.
    if (this.#transport === undefined) {
      return refusePrecheck(this.#audit, now, callId, NO_TRANSPORT, MESSAGE_SEND_ACTION, undefined);
    }
    const verdict = decide(this.#scope as DecisionScope, MESSAGE_SEND_ACTION, send.resource, now);
    if (verdict instanceof Promise)
      return verdict.then((decided) => this.#sendAllowed(send, decided));
    return this.#sendAllowed(send, verdict);
  }

  #sendAllowed(send: Send, verdict: Verdict): Promise<SendMessageResult> {
    const { now, callId, label } = send;
    if (!verdict.allowed) {
      return refuseVerdict(this.#audit, now, callId, verdict, MESSAGE_SEND_ACTION, label);
    }
    const grant = verdict.grant;
    if (this.#closed)
      return this.#closedWhileDeciding(now, callId, MESSAGE_SEND_ACTION, label, grant);
    // Recorded before the effect: an act the audit sink refused to record does not happen.
    const written = this.#audit.write({
      now,
      code: null,
      reason: "allowed",
      callId,
      action: MESSAGE_SEND_ACTION,
      resource: label,
      grantId: grant.id,
      chain: grant.chain,
    });
    if (written !== undefined) return written.then(() => this.#deliverUnlessClosed(send, grant));
    return this.#deliver(send, grant);
  }

  /**
   * After an allowed event the sink took later: the lease may have closed (a deadline, an
   * abort) meanwhile, and nothing is delivered under a closed lease. The use stays spent.
   */
  #deliverUnlessClosed(send: Send, grant: IndexedGrant): Promise<SendMessageResult> {
    if (!this.#closed) return this.#deliver(send, grant);
    return this.#closedWhileDeciding(send.now, send.callId, MESSAGE_SEND_ACTION, send.label, grant);
  }

  /** The refusal of an act whose lease closed after it was allowed (its use stays spent). */
  #closedWhileDeciding(
    now: number,
    callId: string,
    action: string,
    label: string,
    grant: IndexedGrant,
  ): Promise<Refusal> {
    return refuseClosedWhileDeciding(
      this.#audit,
      now,
      callId,
      action,
      label,
      grant.id,
      grant.chain,
    );
  }

  #deliver(send: Send, grant: IndexedGrant): Promise<SendMessageResult> {
    const envelope: MessageEnvelope = Object.freeze({
      messageId: this.#mintId(),
      sender: this.#ctx.actor,
      recipient: send.recipient,
      payload: send.payload,
      traceId: this.#ctx.traceId,
      callId: send.callId,
      grantId: grant.id,
    });
    const transport = this.#transport as MessageTransport;
    const deliverNow = deliverNowOf(transport);
    let answer: DeliveryResult | PromiseLike<DeliveryResult>;
    try {
      answer =
        deliverNow === undefined ? transport.deliver(envelope) : deliverNow(transport, envelope);
    } catch {
      return this.#delivered(send, grant, envelope, THREW);
    }
    // A port's answer may be any thenable; only a twin's is known to be a value or a Promise.
    if (deliverNow !== undefined && !(answer instanceof Promise)) {
      return this.#delivered(send, grant, envelope, outcomeOf(answer as DeliveryResult));
    }
    return Promise.resolve(answer).then(
      (result) => this.#delivered(send, grant, envelope, outcomeOf(result)),
      () => this.#delivered(send, grant, envelope, THREW),
    );
  }

  #delivered(
    send: Send,
    grant: IndexedGrant,
    envelope: MessageEnvelope,
    outcome: Outcome,
  ): Promise<SendMessageResult> {
    const grantId = grant.id;
    if (outcome.status === "delivered") {
      return Promise.resolve(
        Object.freeze(
          outcome.reply === undefined
            ? { status: "delivered", messageId: envelope.messageId, grantId }
            : { status: "delivered", messageId: envelope.messageId, grantId, reply: outcome.reply },
        ),
      );
    }
    // The use is spent: the grant authorized an act that was attempted. A failed delivery is
    // recorded as its own transport event, so audit shows both the decision and the failure;
    // one the transport says never left gives its use back (unsent.ts).
    const refusal = refused("delivery_failed");
    if (outcome.sent === false) {
      return recordFailedDelivery(
        this.#audit,
        this.#scope,
        () => this.#now(),
        send,
        grant,
        outcome,
      ).then(() => refusal);
    }
    const failed = this.#audit.write({
      now: this.#now(),
      code: "delivery_failed",
      reason: "delivery_failed",
      callId: send.callId,
      action: MESSAGE_SEND_ACTION,
      resource: send.label,
      grantId,
      chain: grant.chain,
      detail: `transport answered ${redact(outcome.code)}`,
    });
    return failed === undefined ? Promise.resolve(refusal) : failed.then(() => refusal);
  }

  /** The decision instant; throws `authority_unavailable` when the clock gives none. */
  #now(): number {
    return this.#fixedNow ?? nowOf(this.#clock);
  }

  /** Unique without a random draw per call: one UUID per lease, then a counter. */
  #mintId(): string {
    // The prefix keeps its dot: each ID is then one string joined to the counter, not two.
    this.#idPrefix ??= `${randomUUID()}.`;
    this.#minted++;
    return this.#idPrefix + this.#minted;
  }
}
