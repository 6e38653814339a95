import { TesseraError } from "../contracts/errors.js";
import {
  type AccessContext,
  AccessContextSchema,
  type Grant,
  GrantSchema,
} from "../contracts/schemas.js";
import { systemClock } from "../ports/clock.js";
import { AuditWriter } from "./audit-writer.js";
import { CHAINS_UNAVAILABLE, resolveChains } from "./chains.js";
import { buildGrantIndex } from "./grant-index.js";
import { Lease } from "./lease.js";
import type { Kernel, KernelOptions, TurnAuthority } from "./types.js";
import { isSealedGrant } from "./validated-grants.js";

/**
 * Reads and validates the turn's grant material. Any failure — the source throwing, a
 * non-array, one grant failing its schema — yields undefined: authority is never partly
 * trusted, so the whole turn fails closed.
 */
async function loadGrants(
  options: KernelOptions,
  ctx: AccessContext,
): Promise<Grant[] | undefined> {
  let material: readonly unknown[];
  try {
    material = await options.grants.listGrants(ctx.namespaceId, ctx.actor);
  } catch {
    return undefined;
  }
  if (!Array.isArray(material)) return undefined;
  const grants: Grant[] = [];
  for (const item of material) {
    if (isSealedGrant(item)) {
      grants.push(item);
      continue;
    }
    const parsed = GrantSchema.safeParse(item);
    if (!parsed.success) return undefined;
    grants.push(parsed.data);
  }
  return grants;
}

export function createKernel(options: KernelOptions): Kernel {
  if (typeof options?.grants?.listGrants !== "function") {
    throw new TesseraError("invalid_config", "createKernel needs a grant source with listGrants");
  }
  const clock = options.clock ?? systemClock;
  const kernel: Kernel = {
    async openTurnAuthority(input: AccessContext): Promise<TurnAuthority> {
      const parsed = AccessContextSchema.safeParse(input);
      if (!parsed.success) {
        throw new TesseraError("invalid_input", "the access context does not match its schema");
      }
      const ctx = Object.freeze(parsed.data);
      const grants = await loadGrants(options, ctx);
      const audit = new AuditWriter(options.audit, ctx);
      const chains =
        grants === undefined
          ? CHAINS_UNAVAILABLE
          : await resolveChains(options.grants, ctx, grants);
      const scope =
        grants === undefined || chains === CHAINS_UNAVAILABLE
          ? undefined
          : {
              index: buildGrantIndex(grants, ctx, chains),
              usage: options.usage,
              namespaceId: ctx.namespaceId,
            };
      // Frozen like everything the kernel returns; its state lives in private fields.
      return Object.freeze(new Lease({ ctx, scope, audit, transport: options.transport, clock }));
    },
  };
  return Object.freeze(kernel);
}
