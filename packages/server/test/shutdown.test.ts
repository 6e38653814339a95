import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InProcessTransport, openStores } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { listen } from "../src/listen.js";
import { call, principal, ticket } from "./support/service.js";

const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

describe("graceful shutdown", () => {
  it("stops accepting, lets a running send finish and answer, then closes", async () => {
    const stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "stop-")), "t.db")}`);
    await stores.grants.add(ticket("t-0", "colleague-0"));
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reached!: () => void;
    const inside = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const transport = new InProcessTransport({
      fallback: async () => {
        reached();
        await held;
        return "late reply";
      },
    });
    const server = await listen({
      stores,
      principals: [alice.config],
      transport,
      port: 0,
      log: false,
    });
    const running = call(server.url, "POST", "/v1/messages", {
      token: alice.token,
      body: { recipient: "colleague-0", payload: 1, callId: "c-stop" },
    });
    await inside;
    let closed = false;
    const closing = server.close().then(() => {
      closed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closed).toBe(false);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
    release();
    expect(await running).toMatchObject({
      status: 200,
      body: { status: "delivered", reply: "late reply" },
    });
    await closing;
    await stores.close();
  });
});
