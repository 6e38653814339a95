import { randomUUID } from "node:crypto";
import {
  type AccessContext,
  createKernel,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  issueFanoutTickets,
  type SendMessageResult,
  TurnExecutor,
  type TurnOutcome,
} from "@tessera/core";
import { ScriptedDriver } from "@tessera/core/testing";
import type { FanoutLine } from "./report.js";

/**
 * The world of one scene: its own kernel, tickets, usage store and audit, so nothing one
 * scene spends can leak into another. With a host-supplied (persistent) store, the namespace
 * is fresh per scene and per run for the same reason.
 */
export interface SceneWorld {
  readonly namespaceId: string;
  readonly grants: InMemoryGrantStore;
  readonly usage: GrantUsageStore | undefined;
  readonly audit: InMemoryAuditSink;
  readonly transport: InProcessTransport;
  readonly ticketIds: ReadonlyMap<string, string>;
  /**
   * Runs one turn in which the asker sends one question to each of `recipients`, in order:
   * a scripted driver inside one authority lease, run by a TurnExecutor (which closes the
   * lease however the turn ends). Each attempt is described from its result and its audit.
   */
  askInOneTurn(recipients: readonly string[]): Promise<{ lines: FanoutLine[]; turn: TurnOutcome }>;
}

/** Generous: the demo's turns take milliseconds; the budget only bounds a broken run. */
const TURN_DEADLINE_MS = 60_000;

export const HOST = "host";
export const ASKER = "asker";
export const OWNER = "owner";

export const colleague = (index: number) => `colleague-${index}`;

export async function sceneWorld(
  runId: string,
  scene: number,
  recipients: readonly string[],
  usage: GrantUsageStore | undefined,
): Promise<SceneWorld> {
  const namespaceId = `fanout-${runId}-scene-${scene}`;
  const grants = new InMemoryGrantStore();
  const audit = new InMemoryAuditSink();
  const transport = InProcessTransport.echo();
  const tickets = await issueFanoutTickets(grants, {
    namespaceId,
    issuer: HOST,
    subject: ASKER,
    owner: OWNER,
    recipients,
    idPrefix: "ticket-",
  });
  const ticketIds = new Map(recipients.map((r, i) => [r, tickets[i]?.id as string]));
  const kernel = createKernel({ grants, audit, transport, ...(usage ? { usage } : {}) });
  const ctx: AccessContext = {
    namespaceId,
    actor: ASKER,
    authority: HOST,
    owner: OWNER,
    traceId: `fanout-${runId}-${scene}`,
  };
  const world: SceneWorld = {
    namespaceId,
    grants,
    usage,
    audit,
    transport,
    ticketIds,
    askInOneTurn: async (asked) => {
      const callIds = asked.map(() => randomUUID());
      const driver = new ScriptedDriver(
        asked.map((recipient, i) => ({
          tool: "messages.send" as const,
          recipient,
          payload: { question: "can we ship?" },
          callId: callIds[i] as string,
        })),
      );
      const executor = new TurnExecutor(kernel, {
        deadlineMs: TURN_DEADLINE_MS,
        maxSteps: Math.max(1, asked.length),
      });
      const turn = await executor.run(ctx, driver);
      const reasons = lastReasons(audit);
      const lines = asked.map((recipient, i) =>
        describe(
          recipient,
          driver.results[i] as SendMessageResult | undefined,
          reasons.get(callIds[i] as string),
        ),
      );
      return { lines, turn };
    },
  };
  return world;
}

/** The reason of each call's newest audit event, in one pass over the log. */
function lastReasons(audit: InMemoryAuditSink): Map<string, FanoutLine["reason"]> {
  const reasons = new Map<string, FanoutLine["reason"]>();
  for (const event of audit.events) reasons.set(event.callId, event.reason);
  return reasons;
}

function describe(
  recipient: string,
  result: SendMessageResult | undefined,
  reason: FanoutLine["reason"] | undefined,
): FanoutLine {
  if (result === undefined) {
    // The turn ended before this step ran; the scene will not be as expected.
    return { verdict: "DENY", recipient, code: "turn_closed", reason: reason ?? "turn_closed" };
  }
  if (result.status === "delivered") {
    const reply = typeof result.reply === "string" ? result.reply : JSON.stringify(result.reply);
    return { verdict: "SENT", recipient, reason: reason ?? "allowed", reply };
  }
  return { verdict: "DENY", recipient, code: result.code, reason: reason ?? "invalid_request" };
}

/**
 * The tickets issued for `recipients`: uses from the usage store, revocation from the grant
 * source (read once, so a large scene 1 stays linear).
 */
export async function ticketStates(
  world: SceneWorld,
  recipients: readonly string[],
): Promise<Map<string, NonNullable<FanoutLine["ticket"]>>> {
  const byId = new Map((await world.grants.listNamespace(world.namespaceId)).map((g) => [g.id, g]));
  const states = new Map<string, NonNullable<FanoutLine["ticket"]>>();
  for (const recipient of recipients) {
    const id = world.ticketIds.get(recipient);
    const grant = id === undefined ? undefined : byId.get(id);
    if (id === undefined || grant === undefined) continue;
    states.set(recipient, {
      of: recipient,
      used: world.usage ? await world.usage.getUsage(world.namespaceId, id) : 0,
      maxUses: grant.constraints.maxUses ?? 0,
      revoked: grant.revokedAt !== undefined,
    });
  }
  return states;
}

/** Adds each line's own ticket state to it. */
export async function withTickets(
  world: SceneWorld,
  lines: readonly FanoutLine[],
): Promise<FanoutLine[]> {
  const states = await ticketStates(
    world,
    lines.map((l) => l.recipient),
  );
  return lines.map((line) => {
    const ticket = states.get(line.recipient);
    return ticket ? { ...line, ticket } : line;
  });
}

export async function makeUsage(
  factory: (() => Promise<GrantUsageStore> | GrantUsageStore) | undefined,
): Promise<GrantUsageStore> {
  return factory ? await factory() : new InMemoryGrantUsageStore();
}
