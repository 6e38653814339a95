import { randomUUID } from "node:crypto";
import { isTesseraError, TesseraError } from "../contracts/errors.js";
import { MESSAGE_SEND_ACTION } from "../contracts/messages.js";
import type { Act, ActResult, GrantVersionCheck } from "../ports/act-ledger.js";
import { withdrawClosedAct, withdrawLostAct } from "./act-withdrawal.js";
import type { DecisionRecord } from "./audit-writer.js";
import { type DecisionScope, decide, exhaustedRefusal } from "./decide.js";
import { asyncDispose } from "./dispose.js";
import type { IndexedGrant } from "./grant-index.js";
import { Lease } from "./lease.js";
import {
  type AuthorizeCall,
  CLOSED,
  INVALID,
  NO_TRANSPORT,
  nowOf,
  OTHER_OWNER,
  type Precheck,
  precheck,
  readAuthorize,
  readSend,
  refused,
  type Send,
} from "./lease-checks.js";
import { deliverRecordedSend } from "./ledger-delivery.js";
import type { ActRecord, LedgerLeaseParts, LedgerTurn } from "./ledger-turn.js";
import { MALFORMED, readCallId, readClaim } from "./request.js";
import { decideAgainIfStale, STALE } from "./trusted-turn.js";
import type {
  ActOptions,
  AlreadyClaimed,
  AuthorizeRequest,
  AuthorizeResult,
  Refusal,
  ResourceRef,
  SendMessageRequest,
  SendMessageResult,
  TurnAuthority,
} from "./types.js";

type Claim = ActOptions["claim"];

/** An act whose spend lost with nothing recorded: decide again (`#decide`). */
const SPEND_LOST: unique symbol = Symbol("spend lost");

/**
 * A lease whose acts are recorded through the act ledger: the decision is made on the turn's
 * indexed grants without spending, then one `acts.record` writes the claim (when the caller
 * gave one), the bounded use and the decision's event in one transaction — or, when the use
 * was gone by then, the exhausted event instead. Only after that write does anything happen
 * (delivery). A denial with a claim is one write too (the claim, settled `denied`, and the
 * event); a denial without one changes nothing and is written after the reply (see
 * `DenialRecorder`).
 *
 * A store that fails makes the call throw its `*_unavailable` error with nothing of the act
 * written (the ledger's all or nothing), so a retry after recovery gets a decision. When the
 * store's reply was lost instead (the act landed, the caller heard the error, nothing ran), an
 * act with a claim is withdrawn in the background (`Withdrawals`): its claim is settled with
 * an `authority_unavailable` denial, its use given back, `act_withdrawn` recorded. Straight
 * async code: the in-memory fast path of `Lease` (no promise per send) is for kernels without
 * a ledger; listing tools and closing are the inner lease's.
 */
export class LedgerLease implements TurnAuthority {
  #inner: Lease;
  readonly #parts: LedgerLeaseParts;
  /** The turn's indexed grants: replaced once when grants taken on trust proved stale. */
  #scope: DecisionScope | undefined;
  /** The versions the turn's grants were taken on trust at; undefined once confirmed. */
  #versions: readonly GrantVersionCheck[] | undefined;
  /** The one confirmation in flight: every decision that needs it waits for the same read. */
  #confirming: Promise<void> | undefined;
  readonly #fixedNow: number | undefined;
  #minted = 0;
  #idPrefix: string | undefined;
  /** This lease as the pieces it hands work to see it (ledger-turn.ts). */
  readonly #turn: LedgerTurn;

  constructor(parts: LedgerLeaseParts) {
    this.#inner = new Lease(parts);
    this.#parts = parts;
    this.#turn = { parts, now: () => this.#now(), scope: () => this.#scope };
    this.#scope = parts.scope;
    this.#versions = parts.unconfirmed?.versions;
    this.#fixedNow = parts.ctx.now === undefined ? undefined : Date.parse(parts.ctx.now);
  }

  get traceId(): string {
    return this.#inner.traceId;
  }

  get closed(): boolean {
    return this.#inner.closed;
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  [asyncDispose](): Promise<void> {
    return this.close();
  }

  async listTools(): Promise<readonly string[]> {
    // What a turn offers is a decision on its grants: they are confirmed first.
    if (this.#versions !== undefined) await this.#confirm();
    return this.#inner.listTools();
  }

  authorize(request: AuthorizeRequest): Promise<AuthorizeResult>;
  authorize(
    request: AuthorizeRequest,
    options: ActOptions,
  ): Promise<AuthorizeResult | AlreadyClaimed>;
  async authorize(
    request: AuthorizeRequest,
    options?: ActOptions,
  ): Promise<AuthorizeResult | AlreadyClaimed> {
    const now = this.#now();
    // Every field of the request is read once, here, and the decision (made again too, when
    // the grants it stood on proved stale) uses only this snapshot: see request.ts.
    const rawClaim = readClaim(options);
    const claim = rawClaim === MALFORMED ? undefined : rawClaim;
    const rawCallId = readCallId(request);
    const callId = typeof rawCallId === "string" ? rawCallId : this.#mintId();
    const call =
      rawCallId === MALFORMED || rawClaim === MALFORMED
        ? undefined
        : readAuthorize(request, callId, now);
    return decideAgainIfStale(() => this.#authorizeOnce(now, callId, call, claim));
  }

  async #authorizeOnce(
    now: number,
    callId: string,
    call: AuthorizeCall | undefined,
    claim: Claim,
  ): Promise<AuthorizeResult | AlreadyClaimed | typeof STALE> {
    const state = this.#precheck();
    if (state !== undefined) return this.#deny({ now, callId, ...state }, claim);
    if (call === undefined) return this.#deny({ now, callId, ...INVALID }, claim);
    const { action, label } = call;
    // The turn acts for its owner only: a request may restate that owner, never name another.
    if (call.owner !== undefined && call.owner !== this.#parts.ctx.owner) {
      return this.#deny({ now, callId, action, resource: label, ...OTHER_OWNER }, claim);
    }
    const decided = await this.#decide(now, callId, action, call, label, claim);
    if (decided === STALE || "status" in decided) return decided;
    return Object.freeze({ status: "allowed", grantId: decided.grant.id, callId });
  }

  sendMessage(request: SendMessageRequest): Promise<SendMessageResult>;
  sendMessage(
    request: SendMessageRequest,
    options: ActOptions,
  ): Promise<SendMessageResult | AlreadyClaimed>;
  async sendMessage(
    request: SendMessageRequest,
    options?: ActOptions,
  ): Promise<SendMessageResult | AlreadyClaimed> {
    const now = this.#now();
    // Read once, here: recipient and payload are never read from the caller's object again.
    const rawClaim = readClaim(options);
    const claim = rawClaim === MALFORMED ? undefined : rawClaim;
    const rawCallId = readCallId(request);
    const callId = typeof rawCallId === "string" ? rawCallId : this.#mintId();
    const send =
      rawCallId === MALFORMED || rawClaim === MALFORMED
        ? undefined
        : readSend(request, callId, now, this.#parts.ctx.owner);
    return decideAgainIfStale(() => this.#sendOnce(now, callId, send, claim));
  }

  async #sendOnce(
    now: number,
    callId: string,
    send: Send | undefined,
    claim: Claim,
  ): Promise<SendMessageResult | AlreadyClaimed | typeof STALE> {
    const action = MESSAGE_SEND_ACTION;
    const state = this.#precheck();
    if (state !== undefined) return this.#deny({ now, callId, action, ...state }, claim);
    if (send === undefined) return this.#deny({ now, callId, action, ...INVALID }, claim);
    // Refused before any use is spent: there is nowhere to deliver.
    if (this.#parts.transport === undefined) {
      return this.#deny({ now, callId, action, ...NO_TRANSPORT }, claim);
    }
    const decided = await this.#decide(now, callId, action, send.resource, send.label, claim);
    if (decided === STALE || "status" in decided) return decided;
    return deliverRecordedSend(this.#turn, this.#mintId(), send, decided.grant);
  }

  /**
   * Decides on the indexed grants, then records the act; the grant when it stands. An act whose
   * spend lost with nothing written (`ActLedger.undoesLostSpends`) marked its grant spent, so
   * deciding again chooses the next one: each round rules out one grant, and the last
   * candidate's act carries its exhausted event, so this ends.
   */
  async #decide(
    now: number,
    callId: string,
    action: string,
    resource: ResourceRef,
    label: string,
    claim: Claim,
  ): Promise<Refusal | AlreadyClaimed | typeof STALE | { readonly grant: IndexedGrant }> {
    for (;;) {
      const decided = await this.#decideOnce(now, callId, action, resource, label, claim);
      if (decided !== SPEND_LOST) return decided;
    }
  }

  async #decideOnce(
    now: number,
    callId: string,
    action: string,
    resource: ResourceRef,
    label: string,
    claim: Claim,
  ): Promise<
    Refusal | AlreadyClaimed | typeof STALE | typeof SPEND_LOST | { readonly grant: IndexedGrant }
  > {
    const scope = this.#scope as DecisionScope;
    let verdict = decide(scope, action, resource, now);
    if (verdict instanceof Promise) verdict = await verdict;
    // Records are written out, not spread from one another: see docs/architecture.md, "Object
    // spreads on hot paths" (a spread followed by more members costs about 1 µs on Node 20).
    if (!verdict.allowed) {
      // A refusal writes nothing the ledger could check, so grants taken on trust are read
      // first: a grant added since the cache was filled must not be refused.
      if (this.#versions !== undefined) {
        await this.#confirm();
        if (this.#scope !== scope) return STALE;
      }
      const { code, reason, grant, detail } = verdict;
      return this.#deny(
        {
          now,
          callId,
          action,
          resource: label,
          code,
          reason,
          grantId: grant?.id,
          chain: grant?.chain,
          detail,
        },
        claim,
      );
    }
    const grant = verdict.grant;
    const granted = { now, callId, action, resource: label, grantId: grant.id, chain: grant.chain };
    // Nothing was spent yet (the act spends), so a lease closed meanwhile just refuses.
    if (this.closed) return this.#deny(Object.assign({}, granted, CLOSED), claim);
    const audit = this.#parts.audit;
    const event = audit.build({ code: null, reason: "allowed", ...granted });
    const versions = this.#versions;
    // Built here and completed in place, so no act is a spread of another.
    const act: Act = claim === undefined ? { event } : { claim, event };
    if (versions !== undefined) Object.assign(act, { versions });
    let lost: Refusal | undefined;
    if (verdict.spend === true) {
      const maxUses = grant.maxUses as number;
      const spend = { namespaceId: scope.namespaceId, grantId: grant.id, maxUses };
      if (verdict.more === true) {
        // Another grant may still have a use: a lost spend writes nothing and is decided again.
        Object.assign(act, { spend });
      } else {
        const exhausted = exhaustedRefusal(scope.index.get(action), grant, now);
        lost = refused(exhausted.code);
        Object.assign(act, {
          spend,
          exhausted: audit.build(Object.assign({}, granted, exhausted)),
        });
      }
    }
    const result = await this.#record(act, granted, grant);
    if (result.status === "stale") {
      if (versions === undefined) {
        throw new TesseraError("store_unavailable", "the act ledger answered stale to no versions");
      }
      // Nothing was written: the grants are read again, and the decision made again on them.
      await this.#confirm();
      return STALE;
    }
    // The ledger found the versions current in the act's transaction: the turn stands on
    // grants read as of then, as if it had opened then.
    if (versions !== undefined && this.#versions === versions) this.#versions = undefined;
    if (result.status === "already_claimed") return result;
    if (result.status === "spend_lost") {
      if (verdict.more !== true) {
        throw new TesseraError("store_unavailable", "the act ledger lost a spend it had to record");
      }
      grant.spent = true;
      return SPEND_LOST;
    }
    if (result.used !== undefined && result.used >= (grant.maxUses ?? Number.POSITIVE_INFINITY)) {
      grant.spent = true;
    }
    if (result.recorded === "exhausted") {
      grant.spent = true;
      if (lost === undefined) {
        throw new TesseraError(
          "store_unavailable",
          "the act ledger recorded an event it was not given",
        );
      }
      return lost;
    }
    // The lease closed (a deadline, an abort) while the act was being recorded: nothing more
    // happens under it, so the act is not carried out, whatever it was.
    if (this.closed) return withdrawClosedAct(this.#turn, act, granted, grant);
    return { grant };
  }

  /**
   * A refusal: with a claim, one act (the claim settled `denied` and the event, one write),
   * before the answer; without one, the event goes to the denial recorder.
   */
  async #deny(record: DecisionRecord, claim: Claim): Promise<Refusal | AlreadyClaimed> {
    const event = this.#parts.audit.build(record);
    const refusal = refused(record.code ?? "invalid_request");
    if (claim !== undefined) {
      const { code: _code, reason: _reason, detail: _detail, ...base } = record;
      const result = await this.#record({ claim, event }, base);
      return result.status === "already_claimed" ? result : refusal;
    }
    const written = this.#parts.denials.record(event);
    if (written !== undefined) await written;
    return refusal;
  }

  async #record(act: Act, base: ActRecord, grant?: IndexedGrant): Promise<ActResult> {
    try {
      return await this.#parts.acts.record(act);
    } catch (error) {
      if (isTesseraError(error, "invalid_input")) throw error;
      // The store may have written the act and lost its reply: nothing has run (the record
      // precedes every effect), so the act is withdrawn if it landed. The caller still hears
      // the error, as before; its retries read the withdrawal's answer once it is written.
      withdrawLostAct(this.#turn, act, base, grant);
      if (isTesseraError(error) && error.code.endsWith("_unavailable")) throw error;
      throw new TesseraError("store_unavailable", "the act ledger could not record the act", {
        cause: error,
      });
    }
  }

  /** The lease's state, before each decision (and again before a decision made again). */
  #precheck(): Precheck | undefined {
    // While the sink is failing, decisions wait for their own write; an act's own event is in
    // its transaction, so only denials are affected (DenialRecorder).
    return precheck(this.closed, this.#scope);
  }

  /**
   * Reads the turn's grants the ordinary way (their version first, the cache when it still
   * holds) and decides on them from now on. One read for every decision waiting on it; a read
   * that fails leaves the turn without grants, so it refuses, as a turn that failed to open.
   */
  #confirm(): Promise<void> {
    this.#confirming ??= this.#reopen();
    return this.#confirming;
  }

  async #reopen(): Promise<void> {
    const reopen = (this.#parts.unconfirmed as NonNullable<LedgerLeaseParts["unconfirmed"]>).reopen;
    let scope: DecisionScope | undefined;
    try {
      scope = await reopen();
    } catch {
      scope = undefined;
    }
    this.#versions = undefined;
    if (scope?.index === this.#scope?.index) return;
    this.#scope = scope;
    const inner = new Lease(Object.assign({}, this.#parts, { scope }));
    if (this.#inner.closed) void inner.close();
    this.#inner = inner;
  }

  /** The decision instant; throws `authority_unavailable` when the clock gives none. */
  #now(): number {
    return this.#fixedNow ?? nowOf(this.#parts.clock);
  }

  #mintId(): string {
    this.#idPrefix ??= `${randomUUID()}.`;
    this.#minted++;
    return this.#idPrefix + this.#minted;
  }
}
