import { randomUUID } from "node:crypto";
import type { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import {
  type ClaimStore,
  type GrantSource,
  type InMemoryGrantStore as GrantStoreType,
  type GrantUsageStore,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  type ReadableAuditSink,
} from "@tessera/core";
import { createMcpGateway, listenMcpGateway, type McpGateway, tokenDigest } from "@tessera/mcp";

export const TOKEN = "bench-token";
const PRINCIPAL = {
  tokenSha256: tokenDigest(TOKEN),
  namespaceId: "bench",
  actor: "agent",
  authority: "host",
};

export interface Ports {
  readonly grants: GrantSource & { add: GrantStoreType["add"] };
  readonly usage: GrantUsageStore;
  readonly claims: ClaimStore;
  readonly audit: ReadableAuditSink;
}

export function memoryPorts(): Ports {
  return {
    grants: new InMemoryGrantStore(),
    usage: new InMemoryGrantUsageStore(),
    claims: new InMemoryClaimStore(),
    audit: new InMemoryAuditSink(),
  };
}

/** A gateway in front of `upstream` as `up`, with one grant letting the bench principal call `up.echo`. */
export async function gatewayOver(
  upstream: string | InMemoryTransport,
  ports: Ports,
): Promise<{ gateway: McpGateway; url: string; close(): Promise<void> }> {
  await ports.grants.add({
    id: `bench-echo-${randomUUID()}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "agent",
    capabilities: [
      {
        resource: { namespace: "mcp", path: ["up", "echo"] },
        actions: ["tools/call"],
        scope: "exact",
      },
    ],
    issuedAt: new Date(Date.now() - 1000).toISOString(),
  });
  const gateway = await createMcpGateway({
    upstreams: { up: typeof upstream === "string" ? { url: upstream } : { transport: upstream } },
    principals: [PRINCIPAL],
    ...ports,
  });
  const listening = await listenMcpGateway(gateway);
  return {
    gateway,
    url: listening.url,
    close: async () => {
      await listening.close();
      await gateway.close();
    },
  };
}
