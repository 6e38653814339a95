import type { AuditEvent, ClaimKey, ClaimRecord, GrantInput } from "@tessera/core";
import type { ProcessSpec } from "./factory.js";

/** What the parent asks a worker process to do, once every worker is ready. */
export type WorkerTask =
  | {
      readonly kind: "consume";
      readonly namespaceId: string;
      readonly grantId: string;
      readonly maxUses: number;
      readonly times: number;
    }
  | {
      /**
       * Spends from each grant in turn: `counts[i]` uses per attempt, 1 through tryConsume and
       * more through tryConsumeMany (a bounded child carved out of its parent).
       */
      readonly kind: "carve";
      readonly namespaceId: string;
      readonly grantIds: readonly string[];
      readonly maxUses: number;
      readonly counts: readonly number[];
    }
  | {
      readonly kind: "claimAll";
      readonly keys: readonly ClaimKey[];
      readonly record: ClaimRecord;
      /** Claim in reverse order, so workers meet in the middle instead of in lockstep. */
      readonly reverse: boolean;
    }
  | { readonly kind: "claimAndHang"; readonly key: ClaimKey; readonly record: ClaimRecord }
  | { readonly kind: "addGrants"; readonly grants: readonly GrantInput[] }
  | {
      /** Adds each grant, and after every `revokeEvery`-th add revokes the one added before. */
      readonly kind: "churnGrants";
      readonly grants: readonly GrantInput[];
      readonly revokeEvery: number;
    }
  | {
      /**
       * Reads (version, grants, version) of one holder until it sees `finalSize` grants of
       * which `finalRevoked` are revoked (the writers are done), or `deadlineMs` passes.
       */
      readonly kind: "watchGrants";
      readonly namespaceId: string;
      readonly subject: string;
      readonly finalSize: number;
      readonly finalRevoked: number;
      readonly deadlineMs: number;
    }
  | { readonly kind: "append"; readonly events: readonly AuditEvent[] }
  | GateTask;

/** [trusted host session, message]: the message may be raw text, as it came off the wire. */
export type GateCall = readonly [session: string, message: unknown];

/**
 * Run an A2UI `FunctionCallGate` over the opened claim store and hand it `calls`, with
 * `inFlight` of them in progress at once (default 1).
 */
export interface GateTask {
  readonly kind: "gate";
  readonly calls: readonly GateCall[];
  readonly inFlight?: number;
  /** Each callback appends one line here, so the parent counts what ran, not what was said. */
  readonly callbacksFile: string;
  /**
   * The approval hook (after the claim, before the callback) sends "claimed" and never
   * returns: the worker sits between claim and dispatch until it is killed.
   */
  readonly hangAfterClaim?: boolean;
  /** When the gate writes receipts (default: the gate's default, after the reply). */
  readonly settle?: "after-reply" | "before-reply";
  /** fsync the callbacks file after each line: a line written stands, whatever happens next. */
  readonly syncCallbacks?: boolean;
  /**
   * Every kind of receipt occurs: IDs starting `deny-` are refused by the approval hook (no
   * line), IDs starting `fail-` throw in the callback after writing their line.
   */
  readonly mixedOutcomes?: boolean;
  /**
   * Each settle waits a random 0..settleDelayMs ms before it reaches the store: widens the
   * window between reply and receipt, so a kill -9 at a random moment often lands in it.
   */
  readonly settleDelayMs?: number;
}

/** What one handled message came to, as the gate's receipt and reply said. */
export interface GateOutcome {
  readonly status: string;
  readonly reason: string;
  /** The reply's error code; `null` when the reply carried a value. */
  readonly code: string | null;
  /** The `functionCallId` the reply is correlated with; `null` for an uncorrelated error. */
  readonly functionCallId: string | null;
}

export type ToWorker =
  | { readonly type: "open"; readonly spec: ProcessSpec }
  | { readonly type: "run"; readonly task: WorkerTask };

export type FromWorker =
  | { readonly type: "ready" }
  /**
   * Sent by `claimAndHang` (and a gate task with `hangAfterClaim`) once the claim is stored;
   * the worker then blocks until killed.
   */
  | { readonly type: "claimed" }
  | { readonly type: "done"; readonly result: WorkerResult }
  | { readonly type: "failed"; readonly code?: string; readonly message: string };

export type WorkerResult =
  /** `used` values of the successful consumes, and how many were refused. */
  | { readonly kind: "consume"; readonly consumedAt: number[]; readonly refused: number }
  /** Indexes (into the task's keys) this worker won, and how many it lost. */
  /** Per grant, the [used after, count] of each successful spend; how many were refused. */
  | { readonly kind: "carve"; readonly spans: [number, number][][]; readonly refused: number }
  | { readonly kind: "claimAll"; readonly won: number[]; readonly lost: number }
  | { readonly kind: "addGrants"; readonly added: number }
  | { readonly kind: "churnGrants"; readonly added: number; readonly revoked: number }
  /**
   * [version before, the grant set as `id:revoked` sorted, version after] per read; `done`
   * says whether the final state was seen before the deadline.
   */
  | {
      readonly kind: "watchGrants";
      readonly reads: [string, string, string][];
      readonly done: boolean;
    }
  | { readonly kind: "append"; readonly appended: number }
  /** One outcome per call, in the order of the task's calls. */
  | { readonly kind: "gate"; readonly outcomes: GateOutcome[] };
