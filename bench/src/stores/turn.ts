import {
  createKernel,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InProcessTransport,
  messageSendCapability,
} from "@tessera/core";

/** Colleagues a bench turn holds tickets for; sends cycle over them. */
export const GRANTS = 100;

/** A turn holding one bounded ticket per colleague, spending in `usage`. */
export async function turnOver(usage: GrantUsageStore) {
  const grants = new InMemoryGrantStore();
  for (let g = 0; g < GRANTS; g++) {
    await grants.add({
      id: `ticket-${g}`,
      namespaceId: "bench",
      issuer: "host",
      subject: "asker",
      capabilities: [messageSendCapability(`colleague-${g}`, "alice")],
      constraints: { maxUses: Number.MAX_SAFE_INTEGER },
      issuedAt: "2026-01-01T00:00:00.000Z",
    });
  }
  const kernel = createKernel({
    grants,
    usage,
    audit: new InMemoryAuditSink(),
    transport: InProcessTransport.echo(),
  });
  return kernel.openTurnAuthority({
    namespaceId: "bench",
    actor: "asker",
    authority: "host",
    owner: "alice",
    traceId: "bench-trace",
  });
}
