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
      readonly kind: "claimAll";
      readonly keys: readonly ClaimKey[];
      readonly record: ClaimRecord;
      /** Claim in reverse order, so workers meet in the middle instead of in lockstep. */
      readonly reverse: boolean;
    }
  | { readonly kind: "claimAndHang"; readonly key: ClaimKey; readonly record: ClaimRecord }
  | { readonly kind: "addGrants"; readonly grants: readonly GrantInput[] }
  | { readonly kind: "append"; readonly events: readonly AuditEvent[] };

export type ToWorker =
  | { readonly type: "open"; readonly spec: ProcessSpec }
  | { readonly type: "run"; readonly task: WorkerTask };

export type FromWorker =
  | { readonly type: "ready" }
  /** Sent by `claimAndHang` once the claim is stored; the worker then blocks until killed. */
  | { readonly type: "claimed" }
  | { readonly type: "done"; readonly result: WorkerResult }
  | { readonly type: "failed"; readonly code?: string; readonly message: string };

export type WorkerResult =
  /** `used` values of the successful consumes, and how many were refused. */
  | { readonly kind: "consume"; readonly consumedAt: number[]; readonly refused: number }
  /** Indexes (into the task's keys) this worker won, and how many it lost. */
  | { readonly kind: "claimAll"; readonly won: number[]; readonly lost: number }
  | { readonly kind: "addGrants"; readonly added: number }
  | { readonly kind: "append"; readonly appended: number };
