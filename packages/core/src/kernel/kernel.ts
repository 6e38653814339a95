import { TesseraError } from "../contracts/errors.js";
import { type AccessContext, AccessContextSchema } from "../contracts/schemas.js";
import type { ActLedger } from "../ports/act-ledger.js";
import { systemClock } from "../ports/clock.js";
import { AuditWriter } from "./audit-writer.js";
import type { DecisionScope } from "./decide.js";
import { DenialRecorder } from "./denials.js";
import { Lease } from "./lease.js";
import { isInstant } from "./lease-checks.js";
import { LedgerLease } from "./ledger-lease.js";
import { ColdReads, checksVersionsOf, openIndex, trustedView } from "./open-index.js";
import { isId } from "./request.js";
import { onUseReturned } from "./returned-uses.js";
import { type CachedView, TurnCache, type TurnCacheOptions } from "./turn-cache.js";
import type { Kernel, KernelOptions, TurnAuthority } from "./types.js";
import { Withdrawals } from "./withdrawals.js";

/** What a lease decides on: the turn's indexed grants, or none when they failed to open. */
function scopeOf(
  view: CachedView | undefined,
  ctx: AccessContext,
  options: KernelOptions,
  /** The act ledger, when the kernel has one: spends are then deferred to its acts. */
  acts: ActLedger | undefined,
): DecisionScope | undefined {
  if (view === undefined) return undefined;
  return {
    index: view.index,
    usage: options.usage,
    namespaceId: ctx.namespaceId,
    deferSpend: acts !== undefined,
    triesNextGrant: acts?.undoesLostSpends === true,
  };
}

function cacheFor(options: KernelOptions): TurnCache | undefined {
  const setting = options.turnCache;
  if (setting === false) return undefined;
  if (setting !== undefined && !isCacheOptions(setting)) {
    throw new TesseraError(
      "invalid_config",
      "turnCache is false or { maxSubjects?, maxWeight? } with non-negative whole numbers",
    );
  }
  return new TurnCache(setting);
}

function isCacheOptions(value: unknown): value is TurnCacheOptions {
  if (typeof value !== "object" || value === null) return false;
  const { maxSubjects, maxWeight } = value as Record<string, unknown>;
  const bound = (n: unknown) => n === undefined || (Number.isSafeInteger(n) && (n as number) >= 0);
  return bound(maxSubjects) && bound(maxWeight);
}

/** The context's ID fields in the schema's order, and whether each is required. */
const CONTEXT_IDS: readonly (readonly [string, boolean])[] = [
  ["namespaceId", true],
  ["actor", true],
  ["authority", true],
  ["owner", false],
  ["purpose", false],
  ["traceId", true],
];

/**
 * The schema's answer for the access context, without the schema on the common shape: a plain
 * object whose own keys are all ID fields, each a string of 1 to 512 UTF-16 units (so 1 to
 * 512 code points, as the schema counts), the required ones present. Anything else (`now`,
 * an optional key set to undefined, another prototype, a bad value) goes to the schema, so
 * both paths accept and refuse alike. The schema cost a tenth of opening a warm turn.
 */
function parseContext(input: unknown): AccessContext {
  let ctx: AccessContext;
  try {
    ctx = readContext(input);
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    // A getter or a Proxy trap that threw: the context is malformed, as the types promise.
    throw new TesseraError("invalid_input", "the access context could not be read", {
      cause: error,
    });
  }
  // The schema takes `now` as an ISO instant; a turn must never decide at NaN (every window
  // comparison would be false: expired grants would count).
  if (ctx.now !== undefined && !isInstant(Date.parse(ctx.now))) {
    throw new TesseraError("invalid_input", "the access context's now is not an instant");
  }
  return ctx;
}

/** The context read once: every field copied into an object of the kernel's own. */
function readContext(input: unknown): AccessContext {
  if (
    typeof input === "object" &&
    input !== null &&
    Object.getPrototypeOf(input) === Object.prototype
  ) {
    const fields = input as Record<string, unknown>;
    const ctx: Record<string, string> = {};
    let count = 0;
    for (const [key, required] of CONTEXT_IDS) {
      const own = Object.hasOwn(fields, key);
      if (!own && !required) continue;
      const value = fields[key];
      if (!own || !isId(value)) return bySchema(input);
      ctx[key] = value;
      count++;
    }
    if (Object.keys(fields).length === count) return ctx as unknown as AccessContext;
  }
  return bySchema(input);
}

function bySchema(input: unknown): AccessContext {
  const parsed = AccessContextSchema.safeParse(input);
  if (!parsed.success) {
    throw new TesseraError("invalid_input", "the access context does not match its schema");
  }
  return parsed.data;
}

function actsOf(options: KernelOptions): ActLedger | undefined {
  const acts = options.acts;
  if (acts === undefined) return undefined;
  if (typeof acts?.record !== "function") {
    throw new TesseraError("invalid_config", "acts is an act ledger: { record(act) }");
  }
  return acts;
}

/**
 * The options a decision would otherwise trip over late, refused when the kernel is made: a
 * transport without `deliver` would spend a ticket on every send and answer `delivery_failed`;
 * a clock without `now` would throw in every decision; an unknown `denials` would be ignored.
 */
function checkOptions(options: KernelOptions): void {
  const { transport, clock, denials } = options;
  if (transport !== undefined && typeof transport?.deliver !== "function") {
    throw new TesseraError(
      "invalid_config",
      "transport is a message transport: { deliver(envelope) }",
    );
  }
  if (clock !== undefined && typeof clock?.now !== "function") {
    throw new TesseraError("invalid_config", "clock is { now(): epoch milliseconds }");
  }
  if (denials !== undefined && denials !== "after-reply" && denials !== "before-reply") {
    throw new TesseraError("invalid_config", 'denials is "after-reply" or "before-reply"');
  }
}

export function createKernel(options: KernelOptions): Kernel {
  if (typeof options?.grants?.listGrants !== "function") {
    throw new TesseraError("invalid_config", "createKernel needs a grant source with listGrants");
  }
  checkOptions(options);
  const clock = options.clock ?? systemClock;
  // Per kernel, so per usage store: see turn-cache.ts for why shared indexes are safe.
  const cache = cacheFor(options);
  // A use given back over this usage store drops the cached sets holding its grant.
  if (cache !== undefined && options.usage !== undefined) onUseReturned(options.usage, cache);
  const reads = new ColdReads();
  const acts = actsOf(options);
  const denials = new DenialRecorder(options.audit, options.denials);
  // Acts whose record threw are withdrawn in the background when the ledger can (issue 22).
  const withdrawals = typeof acts?.withdraw === "function" ? new Withdrawals(acts) : undefined;
  // Warm turns skip their version read when the ledger checks it with each act (one round
  // trip per act on a shared store instead of two).
  const trusting = cache !== undefined && checksVersionsOf(acts, options) ? cache : undefined;
  const kernel: Kernel = {
    async openTurnAuthority(input: AccessContext): Promise<TurnAuthority> {
      const ctx = Object.freeze(parseContext(input));
      const trusted = trusting === undefined ? undefined : trustedView(trusting, ctx);
      const view = trusted?.view ?? (await openIndex(options, cache, reads, ctx));
      const audit = new AuditWriter(options.audit, ctx);
      const scope = scopeOf(view, ctx, options, acts);
      const transport = options.transport;
      // Frozen like everything the kernel returns; its state lives in private fields.
      if (acts !== undefined) {
        const unconfirmed =
          trusted === undefined
            ? undefined
            : {
                versions: trusted.versions,
                reopen: async () =>
                  scopeOf(await openIndex(options, cache, reads, ctx), ctx, options, acts),
              };
        return Object.freeze(
          new LedgerLease({
            ctx,
            scope,
            audit,
            transport,
            clock,
            acts,
            denials,
            withdrawals,
            ...(unconfirmed && { unconfirmed }),
          }),
        );
      }
      return Object.freeze(new Lease({ ctx, scope, audit, transport, clock }));
    },
    // Withdrawals first (one attempt each, never waiting out a store that stays down), then
    // the denial events written after their replies.
    drain: async () => {
      await withdrawals?.drain();
      await denials.drain();
    },
    auditState: () => (denials.failing ? "failing" : "ok"),
    close: () => {
      withdrawals?.close();
      denials.close();
    },
  };
  return Object.freeze(kernel);
}
