import { type GrantInput, GrantSchema } from "@tessera/core";

/** A valid grant input: one exact capability, one use; each case overrides what it tests. */
export function grantInput(overrides: Partial<GrantInput> = {}): GrantInput {
  return {
    id: "grant-1",
    namespaceId: "ns",
    issuer: "host",
    subject: "agent",
    capabilities: [
      {
        resource: { namespace: "messages", path: ["bob"], owner: "alice" },
        actions: ["messages.send"],
        scope: "exact",
      },
    ],
    constraints: { maxUses: 1 },
    issuedAt: "2026-01-01T00:00:00.000Z",
    ...overrides,
  };
}

/** What the source hands the kernel is untyped: it must parse as a grant, as the kernel will. */
export function parsed(list: readonly unknown[]) {
  return list.map((item) => GrantSchema.parse(item)).sort((a, b) => (a.id < b.id ? -1 : 1));
}
