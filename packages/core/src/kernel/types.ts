import type { ClaimKey, ClaimRecord, StoredClaim } from "../contracts/claims.js";
import type { ResourceRef } from "../contracts/messages.js";
import type { AccessContext } from "../contracts/schemas.js";
import type { CallerCode } from "../contracts/vocabulary.js";
import type { ActLedger } from "../ports/act-ledger.js";
import type { AuditSink } from "../ports/audit-sink.js";
import type { Clock } from "../ports/clock.js";
import type { GrantSource } from "../ports/grant-source.js";
import type { MessageTransport } from "../ports/transport.js";
import type { GrantUsageStore } from "../ports/usage-store.js";
import type { TurnCacheOptions } from "./turn-cache.js";

/** What a host wires into one kernel. Only `grants` is required. */
export interface KernelOptions {
  /** The only place authority comes from; read once per turn. */
  readonly grants: GrantSource;
  /** Counts bounded grants. Without it, a bounded grant fails closed. */
  readonly usage?: GrantUsageStore;
  /** Receives one event per decision. Without it, events are dropped (not recommended). */
  readonly audit?: AuditSink;
  /**
   * Delivers authorized messages. Without it, `messages.send` is not listed and every send is
   * refused `tool_unavailable` before any grant is used (audit reason `no_transport`).
   */
  readonly transport?: MessageTransport;
  /**
   * The decision instant (default: the system clock). `now()` must give finite epoch
   * milliseconds within a `Date`'s range: anything else (NaN, a string, a `Date`, a throw)
   * makes each decision throw `TesseraError("authority_unavailable")` before anything is read,
   * spent or written, since no window can be checked and no event stamped. A clock without a
   * `now` function (or a transport without `deliver`, an unknown `denials`) is refused by
   * `createKernel` with `invalid_config`.
   */
  readonly clock?: Clock;
  /**
   * Reuse of validated, indexed grant sets across turns while the source's `grantsVersion`
   * is unchanged (on by default, bounded; a source without versions is read every turn).
   * `false` turns it off.
   */
  readonly turnCache?: false | TurnCacheOptions;
  /**
   * Records each act all or nothing (a store bundle's `acts`): the decision's spend and event,
   * and the claim of its call ID when the caller gives one, in one transaction — one durable
   * write per act, many acts per write. Without it, the kernel spends in `usage` and writes to
   * `audit` one after the other, and a decision cannot carry a claim.
   */
  readonly acts?: ActLedger;
  /**
   * With `acts`: when a denial that carries no claim is written. `"after-reply"` (default): a
   * denial changes nothing, so its event joins the sink's next write after the caller has its
   * answer; a crash can lose the events still waiting (the sink's write window, ≤ 10 ms for
   * Tessera's stores), never an allowed act's. A sink that fails makes the next denials wait
   * for their own write (and fail with `audit_unavailable` while it keeps failing) until one
   * lands. `"before-reply"`: every event is written before its decision returns.
   */
  readonly denials?: "after-reply" | "before-reply";
}

/** A claim to record with a decision, in the act's one transaction (needs `acts`). */
export interface ActOptions {
  readonly claim?: { readonly key: ClaimKey; readonly record: ClaimRecord };
}

/**
 * The claim given with a decision was taken before: nothing was decided, spent or written.
 * `existing` is the claim as stored (its receipt and answer once settled).
 */
export type AlreadyClaimed = { readonly status: "already_claimed"; readonly existing: StoredClaim };

export interface Kernel {
  /**
   * Opens one authority lease for one turn: reads the grant source once, validates every grant
   * and indexes them (or, with a versioned source and an unchanged version, reuses the set
   * validated and indexed for an earlier turn). A source that fails or returns invalid material yields a turn that refuses
   * everything with `authority_unavailable`; it never throws for that. Throws
   * `TesseraError("invalid_input")` only when `ctx` itself is malformed.
   */
  openTurnAuthority(ctx: AccessContext): Promise<TurnAuthority>;
  /**
   * Waits until every denial event written after its reply has reached the sink (or failed),
   * and gives every pending withdrawal (an act whose record threw, see `ActLedger.withdraw`)
   * one more attempt, now: it waits for that attempt, never for a store that stays down
   * (those keep trying in the background until `close`). Call it before closing the stores.
   * Kernels from `createKernel` have it.
   */
  drain?(): Promise<void>;
  /**
   * Stops the background withdrawals (after their attempt in flight); what was not withdrawn
   * stays in doubt (the claim store's `listInDoubt`). Also stops offering kept denial events
   * to a failing sink; those still kept are lost. Kernels from `createKernel` have it.
   */
  close?(): void;
  /**
   * `"failing"` while denial events written after their replies are kept because the sink
   * refused them; they are offered again in the background, and the state turns back to
   * `"ok"` by itself once the sink has taken them all.
   */
  auditState?(): "ok" | "failing";
}

export type { ResourceRef } from "../contracts/messages.js";

/**
 * Read once per call, when the call is made: the kernel decides, records and acts on that
 * reading only, so a host may reuse the object for its next call. A field whose read throws
 * makes the request malformed (`invalid_request`, with its event).
 */
export interface AuthorizeRequest {
  readonly action: string;
  readonly resource: ResourceRef;
  /** Correlates the decision with its audit event; generated when absent. */
  readonly callId?: string;
}

export type Refusal = { readonly status: "denied"; readonly code: CallerCode };

/** The outcome of a decision without side effects beyond consuming the grant's use. */
export type AuthorizeResult =
  | { readonly status: "allowed"; readonly grantId: string; readonly callId: string }
  | Refusal;

export interface SendMessageRequest {
  readonly recipient: string;
  /** Data only: nothing in it is read as authority. */
  readonly payload: unknown;
  readonly callId?: string;
}

export type SendMessageResult =
  | {
      readonly status: "delivered";
      readonly messageId: string;
      readonly grantId: string;
      readonly reply?: unknown;
    }
  | Refusal;

/** The tools a turn offers to its driver: everything except closing the lease. */
export interface TurnTools {
  /**
   * Names of the actions currently discoverable (reads usage, spends nothing); none on a closed
   * turn. Throws `authority_unavailable` when the turn's grants could not be read.
   */
  listTools(): Promise<readonly string[]>;
  sendMessage(request: SendMessageRequest): Promise<SendMessageResult>;
  authorize(request: AuthorizeRequest): Promise<AuthorizeResult>;
}

/** One authority lease: the grant set of one turn. Closed on every exit path. */
export interface TurnAuthority extends TurnTools, AsyncDisposable {
  sendMessage(request: SendMessageRequest): Promise<SendMessageResult>;
  /** With a claim (`KernelOptions.acts` needed): the claim, the spend and the event, one write. */
  sendMessage(
    request: SendMessageRequest,
    options: ActOptions,
  ): Promise<SendMessageResult | AlreadyClaimed>;
  authorize(request: AuthorizeRequest): Promise<AuthorizeResult>;
  authorize(
    request: AuthorizeRequest,
    options: ActOptions,
  ): Promise<AuthorizeResult | AlreadyClaimed>;
  readonly traceId: string;
  readonly closed: boolean;
  /**
   * Idempotent. Every later call is refused with `turn_closed`, and so is a call still deciding
   * when it closed: nothing is delivered or allowed under a closed lease. Without a ledger, or
   * with one and no claim, a use such a call spent stays spent (audit: `turn_closed` after it);
   * with a ledger and a claim, the act is withdrawn (use given back, claim settled with the
   * `turn_closed` denial, audit `act_withdrawn`).
   */
  close(): Promise<void>;
}
