import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ActLedger, isTesseraError, openStores, type StoreBundle } from "@tessera/core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { listen } from "../src/listen.js";
import { createTesseraService, type TesseraService } from "../src/service.js";
import { authorize, principal, rawRequest, send, ticket } from "./support/service.js";

/**
 * The service as a library: a request listener mounted in a server the host owns (beside the
 * host's own routes), closed by the host, over stores the host keeps.
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

const scratch = () => mkdtempSync(join(tmpdir(), "tessera-mount-"));

async function freshStores(): Promise<StoreBundle> {
  const stores = await openStores(`sqlite:${join(scratch(), "t.db")}`);
  await stores.grants.add(ticket("t-0", "colleague-0"));
  return stores;
}

/** The host's own server: `/host/*` is the host's, everything else goes to the service. */
async function hostServer(service: TesseraService): Promise<{ url: string; server: Server }> {
  const server = createServer((request, response) => {
    if (request.url?.startsWith("/host/")) {
      response.writeHead(200, { "content-type": "text/plain" });
      response.end("the host's own route");
      return;
    }
    service.handler(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server };
}

function stop(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** A usage store whose next `tryConsume` waits until `release()`: a decision held mid-flight. */
/** The act ledger held inside `record` until released: a decision caught inside the store. */
function heldActs(inner: ActLedger) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let entered!: () => void;
  const reached = new Promise<void>((resolve) => {
    entered = resolve;
  });
  const acts: ActLedger = {
    record: async (act) => {
      entered();
      await released;
      return inner.record(act);
    },
  };
  return { acts, reached, release };
}

describe("createTesseraService mounted in the host's own node:http server", () => {
  let stores: StoreBundle;
  let service: TesseraService;
  let host: { url: string; server: Server };

  beforeAll(async () => {
    stores = await freshStores();
    service = createTesseraService({ stores, principals: [alice.config], log: false });
    host = await hostServer(service);
  });

  afterAll(async () => {
    await stop(host.server);
    await service.close();
    await stores.close();
  });

  it("serves every route beside the host's own", async () => {
    const own = await fetch(`${host.url}/host/ping`);
    expect(await own.text()).toBe("the host's own route");
    expect(await rawRequest(host.url, "/healthz")).toEqual({ status: 200, body: { ok: true } });
    expect(await rawRequest(host.url, "/readyz")).toEqual({ status: 200, body: { ready: true } });
    expect((await rawRequest(host.url, "/v1/explain?callId=x")).status).toBe(401);
  });

  it("decides against the host's stores: a single-use ticket is spent once", async () => {
    const first = await authorize(host.url, alice.token, send("colleague-0", "c-1"));
    const again = await authorize(host.url, alice.token, send("colleague-0", "c-2"));
    expect(first).toEqual({ status: 200, body: expect.objectContaining({ status: "allowed" }) });
    expect(again.body).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(await stores.usage.getUsage("team", "t-0")).toBe(1);
  });
});

describe("TesseraService.close()", () => {
  const opened: StoreBundle[] = [];
  const servers: Server[] = [];

  afterEach(async () => {
    await Promise.all(servers.splice(0).map(stop));
    await Promise.all(opened.splice(0).map((stores) => stores.close()));
  });

  it("waits for a decision already running, then answers new requests 503", async () => {
    const stores = await freshStores();
    opened.push(stores);
    const held = heldActs(stores.acts);
    const service = createTesseraService({
      stores: { ...stores, acts: held.acts },
      principals: [alice.config],
    });
    const host = await hostServer(service);
    servers.push(host.server);

    const running = authorize(host.url, alice.token, send("colleague-0", "c-held"));
    await held.reached; // the decision is inside the store
    let closed = false;
    const closing = service.close().then(() => {
      closed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(closed).toBe(false);

    held.release();
    await closing;
    expect(await running).toEqual({
      status: 200,
      body: expect.objectContaining({ status: "allowed", grantId: "t-0" }),
    });
    expect(await rawRequest(host.url, "/healthz")).toEqual({
      status: 503,
      body: { error: { code: "unavailable", message: "the service is closed" } },
    });
    // The stores are the host's: still open after the service closed.
    expect(await stores.usage.getUsage("team", "t-0")).toBe(1);
  });

  it("resolves at once when nothing is running, and again when called twice", async () => {
    const stores = await freshStores();
    opened.push(stores);
    const service = createTesseraService({ stores, principals: [alice.config], log: false });
    await service.close();
    await service.close();
  });
});

describe("createTesseraService and listen check their options", () => {
  it("refuse a principal that does not match the principals schema", async () => {
    const stores = await freshStores();
    try {
      const principals = [{ ...alice.config, tokenSha256: "not-a-digest" }];
      expect(() => createTesseraService({ stores, principals, log: false })).toThrow(
        expect.objectContaining({ code: "invalid_config" }),
      );
      await expect(listen({ stores, principals, port: 0, log: false })).rejects.toMatchObject({
        code: "invalid_config",
      });
    } finally {
      await stores.close();
    }
  });

  it("checks the principals before opening a store URL", async () => {
    // Were the store opened first, the missing directory would answer store_unavailable.
    const url = `sqlite:${join(scratch(), "not-made", "t.db")}`;
    const error = await listen({ stores: url, principals: [], port: 0, log: false }).catch(
      (e) => e,
    );
    expect(isTesseraError(error, "invalid_config")).toBe(true);
  });

  it("refuses a store URL no backend serves", async () => {
    await expect(
      listen({ stores: "mysql://nowhere", principals: [alice.config], port: 0, log: false }),
    ).rejects.toMatchObject({ code: "unsupported_store_url" });
  });
});

describe("listen over a store URL", () => {
  it("opens the store, decides in it, and closes it with the server", async () => {
    const dir = scratch();
    const url = `sqlite:${join(dir, "t.db")}`;
    const seed = await openStores(url);
    await seed.grants.add(ticket("t-url", "colleague-0"));
    await seed.close();

    const server = await listen({ stores: url, principals: [alice.config], port: 0, log: false });
    const reply = await authorize(server.url, alice.token, send("colleague-0", "c-url"));
    expect(reply.body).toMatchObject({ status: "allowed", grantId: "t-url" });
    await server.close();
    await server.close(); // twice is once

    const after = await openStores(url);
    try {
      expect(await after.usage.getUsage("team", "t-url")).toBe(1);
    } finally {
      await after.close();
    }
  });

  it("says address_in_use for a port already held, and leaves the host's stores open", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const { port } = holder.address() as AddressInfo;
    const stores = await freshStores();
    try {
      await expect(
        listen({ stores, principals: [alice.config], port, log: false }),
      ).rejects.toMatchObject({
        code: "address_in_use",
      });
      expect(await stores.usage.getUsage("team", "t-0")).toBe(0);
    } finally {
      await stores.close();
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
  });
});
