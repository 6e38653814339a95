import {
  type AuthorizeRequest,
  createKernel,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  MESSAGE_NAMESPACE,
  MESSAGE_SEND_ACTION,
  messageSendCapability,
  type TurnAuthority,
} from "@tessera/core";

export const NS = "bench";
export const CTX = {
  namespaceId: NS,
  actor: "asker",
  authority: "host",
  owner: "alice",
  traceId: "bench-trace",
} as const;

const ISSUED = "2026-01-01T00:00:00.000Z";

export const recipient = (i: number) => `colleague-${i}`;

/**
 * A turn holding `grants` grants, one per recipient, bounded (a huge budget, so the bench never
 * runs out) or unbounded. Audit goes to an in-memory sink the bench clears between batches.
 */
export async function turnHolding(
  grants: number,
  bounded: boolean,
): Promise<{ turn: TurnAuthority; audit: InMemoryAuditSink; source: InMemoryGrantStore }> {
  const source = new InMemoryGrantStore();
  for (let i = 0; i < grants; i++) {
    await source.add({
      id: `grant-${i}`,
      namespaceId: NS,
      issuer: CTX.authority,
      subject: CTX.actor,
      capabilities: [messageSendCapability(recipient(i), CTX.owner)],
      constraints: bounded ? { maxUses: Number.MAX_SAFE_INTEGER } : {},
      issuedAt: ISSUED,
    });
  }
  const audit = new InMemoryAuditSink();
  const kernel = createKernel({ grants: source, usage: new InMemoryGrantUsageStore(), audit });
  return { turn: await kernel.openTurnAuthority(CTX), audit, source };
}

export function sendRequest(to: string): AuthorizeRequest {
  return {
    action: MESSAGE_SEND_ACTION,
    resource: { namespace: MESSAGE_NAMESPACE, path: [to], owner: CTX.owner },
    callId: "bench-call",
  };
}
