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
  const events = await world.audit.read({ callId });
  const reason = events[events.length - 1]?.reason ?? "invalid_request";
  if (result.status === "delivered") {
    const reply = typeof result.reply === "string" ? result.reply : JSON.stringify(result.reply);
    return { result, line: { verdict: "SENT", recipient, reason, reply } };
  }
  return { result, line: { verdict: "DENY", recipient, code: result.code, reason } };
}

/** The ticket issued for `recipient`: its uses from the usage store, its revocation from the source. */
export async function ticketState(
  world: SceneWorld,
  recipient: string,
): Promise<FanoutLine["ticket"]> {
  const id = world.ticketIds.get(recipient);
  if (id === undefined) return undefined;
  const [grant] = (await world.grants.listNamespace(world.namespaceId)).filter((g) => g.id === id);
  const used = world.usage ? await world.usage.getUsage(world.namespaceId, id) : 0;
  return {
    of: recipient,
    used,
    maxUses: grant?.constraints.maxUses ?? 0,
    revoked: grant?.revokedAt !== undefined,
  };
}

export async function makeUsage(
  factory: (() => Promise<GrantUsageStore> | GrantUsageStore) | undefined,
): Promise<GrantUsageStore> {
  return factory ? await factory() : new InMemoryGrantUsageStore();
}
