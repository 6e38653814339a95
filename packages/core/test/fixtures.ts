import { auditStreamOf, type ChainHead, EMPTY_HEAD, linkAuditEvent } from "../src/audit/chain.js";
import {
  type AccessContext,
  type AuditEvent,
  type Capability,
  createKernel,
  type GrantInput,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  type KernelOptions,
} from "../src/index.js";
import { ManualClock } from "../src/testing.js";

/** Shared test fixtures: a host, an asker and an owner, with grants built field by field. */
export const NS = "ns-test";
export const HOST = "host";
export const ASKER = "asker";
export const OWNER = "alice";
export const T0 = Date.parse("2026-01-01T00:00:00.000Z");

export function ctx(overrides: Partial<AccessContext> = {}): AccessContext {
  return {
    namespaceId: NS,
    actor: ASKER,
    authority: HOST,
    owner: OWNER,
    traceId: "trace-1",
    ...overrides,
  };
}

let nextId = 0;
export function grant(overrides: Partial<GrantInput> & { capabilities: Capability[] }): GrantInput {
  return {
    id: `g-${nextId++}`,
    namespaceId: NS,
    issuer: HOST,
    subject: ASKER,
    issuedAt: new Date(T0).toISOString(),
    ...overrides,
  };
}

export function cap(
  path: string[],
  options: {
    actions?: string[];
    scope?: "exact" | "descendants";
    owner?: string;
    namespace?: string;
  } = {},
): Capability {
  return {
    resource: {
      namespace: options.namespace ?? "files",
      path,
      ...(options.owner === undefined ? {} : { owner: options.owner }),
    },
    actions: options.actions ?? ["files.read"],
    scope: options.scope ?? "exact",
  };
}

export interface Rig {
  grants: InMemoryGrantStore;
  usage: InMemoryGrantUsageStore;
  audit: InMemoryAuditSink;
  transport: InProcessTransport;
  clock: ManualClock;
  kernel: ReturnType<typeof createKernel>;
}

/** A kernel on in-memory ports with a manual clock at T0; `usage: null` installs no store. */
export function rig(
  options: { usage?: GrantUsageStore | null; extra?: Partial<KernelOptions> } = {},
): Rig {
  const grants = new InMemoryGrantStore();
  const usage = new InMemoryGrantUsageStore();
  const audit = new InMemoryAuditSink();
  const transport = InProcessTransport.echo();
  const clock = new ManualClock(T0);
  const installed = options.usage === null ? undefined : (options.usage ?? usage);
  const kernel = createKernel({
    grants,
    audit,
    transport,
    clock,
    ...(installed === undefined ? {} : { usage: installed }),
    ...options.extra,
  });
  return { grants, usage, audit, transport, clock, kernel };
}

/** A usage store that is down: every call throws, as a real one does on an outage. */
export const brokenUsageStore: GrantUsageStore = {
  getUsage: async () => {
    throw new Error("usage store down");
  },
  tryConsume: async () => {
    throw new Error("usage store down");
  },
};

/** An allowed event of `callId` in the stream of `namespaceId` (the gate's, without one). */
export function auditEventOf(callId: string, namespaceId?: string): AuditEvent {
  return {
    at: "2026-01-01T00:00:00.000Z",
    source: namespaceId === undefined ? "gate" : "kernel",
    outcome: "allowed",
    code: null,
    reason: "allowed",
    traceId: "t",
    callId,
    ...(namespaceId === undefined ? {} : { namespaceId }),
  };
}

/** Links events as a sink does: one head per stream, in the order given. */
export function linkedTrail(events: readonly AuditEvent[]): AuditEvent[] {
  const heads = new Map<string, ChainHead>();
  return events.map((event) => {
    const stream = auditStreamOf(event);
    const linked = linkAuditEvent(event, heads.get(stream) ?? EMPTY_HEAD);
    heads.set(stream, { seq: linked.seq, hash: linked.hash });
    return linked;
  });
}
