import { randomBytes } from "node:crypto";
import { InMemoryClaimStore } from "@tessera/a2ui";
import {
  a2uiFunctionCapability,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  messageSendCapability,
  openStores,
} from "@tessera/core";
import { type ListenOptions, listen, type ServiceStores, tokenDigest } from "@tessera/server";
import { CATALOG, CATALOG_ID } from "../a2ui/fixtures.js";
import type { DurableRows, Running } from "./baselines.js";

/** The token `client.ts` sends. */
export const TOKEN = "bench-service-token";
/** Who holds it: the asker, owner alice, in namespace `bench` (also `roundtrips`'s caller). */
export const PRINCIPAL = {
  tokenSha256: tokenDigest(TOKEN),
  namespaceId: "bench",
  actor: "asker",
  authority: "host",
  owner: "alice",
};

/** Every port in memory: the service's HTTP and kernel work with no durable write. */
function memoryStores(): ServiceStores & { close(): Promise<void> } {
  return {
    grants: new InMemoryGrantStore(),
    usage: new InMemoryGrantUsageStore(),
    audit: new InMemoryAuditSink(),
    claims: new InMemoryClaimStore(),
    close: async () => undefined,
  };
}

/**
 * Every port in memory, but each audit event also waits for one `DurableRows` row: the
 * service's own work plus the cheapest durable record, a ceiling for any durable audit sink.
 */
function memoryStoresRecordingTo(rows: DurableRows): ServiceStores & { close(): Promise<void> } {
  const stores = memoryStores();
  const audit = stores.audit;
  return {
    ...stores,
    // A plain object: the kernel finds no synchronous twin on it and awaits `append`.
    audit: {
      append: async (event) => {
        await audit.append(event);
        await rows.write();
      },
      read: (filter) => audit.read(filter),
    },
  };
}

/**
 * The ports of `storeUrl`, but audit in memory: every read a decision makes goes to the store,
 * and no event is written there. A denial without a call ID writes nothing else, so this is
 * the most any audit sink written on the event loop can give that denial over this store.
 */
export async function storesAuditInMemory(
  storeUrl: string,
): Promise<ServiceStores & { close(): Promise<void> }> {
  const stores = await openStores(storeUrl);
  return {
    grants: stores.grants,
    usage: stores.usage,
    claims: stores.claims,
    acts: stores.acts,
    audit: new InMemoryAuditSink(),
    close: () => stores.close(),
  };
}

/**
 * The service over `storeUrl` (or memory, where `recordTo` adds a `DurableRows` row to each
 * audit event; or the given stores), holding one bounded ticket for `colleague`.
 */
export async function service(
  storeUrl: string | "memory" | (ServiceStores & { close(): Promise<void> }),
  recordTo?: DurableRows,
  /** JWT access tokens accepted beside the static token (`bench/src/service/identity.ts`). */
  identity?: ListenOptions["identity"],
): Promise<Running> {
  const stores =
    typeof storeUrl !== "string"
      ? storeUrl
      : storeUrl !== "memory"
        ? await openStores(storeUrl)
        : recordTo === undefined
          ? memoryStores()
          : memoryStoresRecordingTo(recordTo);
  await stores.grants.add({
    id: `bench-ticket-${randomBytes(4).toString("hex")}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "asker",
    capabilities: [messageSendCapability("colleague", "alice")],
    constraints: { maxUses: Number.MAX_SAFE_INTEGER },
    issuedAt: new Date(Date.now() - 60_000).toISOString(),
  });
  // The service decides every A2UI call against the caller's grants: one unbounded grant for
  // `add`, so the a2ui shape measures an allowed call (a kernel decision and its audit event).
  await stores.grants.add({
    id: `bench-a2ui-${randomBytes(4).toString("hex")}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "asker",
    capabilities: [a2uiFunctionCapability(CATALOG_ID, "add")],
    issuedAt: new Date(Date.now() - 60_000).toISOString(),
  });
  const server = await listen({
    stores,
    principals: [PRINCIPAL],
    transport: InProcessTransport.echo(),
    a2ui: { catalogs: [CATALOG] },
    ...(identity === undefined ? {} : { identity }),
    port: 0,
    log: false,
  });
  return {
    url: server.url,
    close: async () => {
      await server.close();
      await stores.close();
    },
  };
}

/** The length of the service's answer to one send of `shape`, for a baseline answering as much. */
export async function answerSize(url: string, shape: "denied" | "allowed"): Promise<number> {
  const body =
    shape === "denied"
      ? { recipient: "stranger", payload: "hi" }
      : {
          recipient: "colleague",
          payload: "hi",
          callId: `probe-${randomBytes(4).toString("hex")}`,
        };
  const answer = await fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!answer.ok)
    throw new Error(`bench: the service answered ${answer.status} to a ${shape} send`);
  return (await answer.text()).length;
}
