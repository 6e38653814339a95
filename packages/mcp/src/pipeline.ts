import type { Context } from "@opentelemetry/api";
import type {
  ActLedger,
  AuditEvent,
  AuditSink,
  Clock,
  GrantSource,
  GrantUsageStore,
  Kernel,
} from "@tessera/core";
import type { Limits, Principal } from "./config.js";
import type { CallLedger } from "./ledger.js";
import type { StoreFailureObserver } from "./store-failures.js";
import type { CallTrace } from "./tracing.js";
import type { CatalogEntry } from "./upstreams.js";

/*
 * What the steps of one `tools/call` share (calls.ts, call-audit.ts, replies.ts, unsent.ts),
 * in a file of its own that imports none of them: no import circle between the steps.
 */

export interface PipelineParts {
  readonly catalog: ReadonlyMap<string, CatalogEntry>;
  readonly grants: GrantSource;
  readonly usage: GrantUsageStore | undefined;
  readonly audit: AuditSink | undefined;
  /**
   * The store's act ledger (claim, spend and event in one write): the kernel records its
   * decisions through it, and the gateway the refusals it decides itself.
   */
  readonly acts: ActLedger;
  readonly clock: Clock;
  readonly ledger: CallLedger;
  readonly limits: Limits;
  /** Told of a write the gateway answered without (see store-failures.ts). */
  readonly onStoreFailure: StoreFailureObserver;
  /**
   * One kernel per exposed tool, made for its current catalog entry: an entry replaced by a
   * tools refresh gets a new kernel, and the old one is drained and closed. The gateway's
   * `close` drains and closes every kernel left.
   */
  readonly kernels: Map<string, { readonly entry: CatalogEntry; readonly kernel: Kernel }>;
  /**
   * The calls being decided by a kernel, by a key of their own (the kernel's turn trace ID; two
   * calls may share the host's trace): their acts' events are stamped from them.
   */
  readonly deciding: Map<string, Deciding>;
}

/** Who is calling, over which MCP session (undefined on a stateless connection). */
export interface Caller {
  readonly principal: Principal;
  readonly session: string | undefined;
  readonly requestId: string | number;
  /** The call's trace (the caller's `traceparent` when it sent one) and its server span. */
  readonly trace: CallTrace;
}

/** The parts of one call's audit event the pipeline learns as it goes. */
export interface Trail {
  readonly caller: Caller;
  readonly started: number;
  readonly argsDigest: string;
  callId: string;
  traceId: string;
  tool: string | undefined;
}

/** A call the kernel is deciding: its trail, and the event its act recorded. */
export interface Deciding {
  readonly trail: Trail;
  recorded: AuditEvent | undefined;
  /** The decision's span context: the act's store write is its child. */
  readonly span: Context;
}
