import { randomUUID } from "node:crypto";
import {
  type AccessContext,
  createKernel,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryGrantSource,
  InMemoryGrantUsageStore,
  InProcessTransport,
  issueFanoutTickets,
  type SendMessageResult,
  type TurnAuthority,
} from "@tessera/core";
import type { FanoutLine } from "./report.js";

/**
 * The world of one scene: its own kernel, tickets, usage store and audit, so nothing one
 * scene spends can leak into another. With a host-supplied (persistent) store, the namespace
 * is fresh per scene and per run for the same reason.
 */
export interface SceneWorld {
  readonly namespaceId: string;
  readonly grants: InMemoryGrantSource;
  readonly usage: GrantUsageStore | undefined;
  readonly audit: InMemoryAuditSink;
  readonly transport: InProcessTransport;
  readonly ticketIds: ReadonlyMap<string, string>;
  openTurn(): Promise<TurnAuthority>;
}

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
  const grants = new InMemoryGrantSource();
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
  return {
    namespaceId,
    grants,
    usage,
    audit,
    transport,
    ticketIds,
    openTurn: () => kernel.openTurnAuthority(ctx),
  };
}

/** Sends one question and describes the attempt from its result and its audit event. */
export async function ask(
  world: SceneWorld,
  turn: TurnAuthority,
  recipient: string,
): Promise<{ result: SendMessageResult; line: Omit<FanoutLine, "ticket"> }> {
  const callId = randomUUID();
  const result = await turn.sendMessage({
    recipient,
    payload: { question: "can we ship?" },
    callId,
  });
  // The call's events are the newest ones: look from the end, not through the whole log.
  const events = world.audit.events;
  let reason: FanoutLine["reason"] = "invalid_request";
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i];
    if (event?.callId === callId) {
      reason = event.reason;
      break;
    }
  }
  if (result.status === "delivered") {
    const reply = typeof result.reply === "string" ? result.reply : JSON.stringify(result.reply);
    return { result, line: { verdict: "SENT", recipient, reason, reply } };
  }
  return { result, line: { verdict: "DENY", recipient, code: result.code, reason } };
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
