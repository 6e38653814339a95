import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  explainCall,
  principal,
  type Service,
  startService,
  ticket,
} from "./support/service.js";

/**
 * A service started with no transport (`tessera serve` without webhooks) must not offer sends
 * it cannot make: the tool is not listed, a send is refused with one documented code before
 * any use is spent, and explain says why instead of "authorized and spent".
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

let service: Service;
let base: string;

beforeAll(async () => {
  service = await startService([alice.config], [ticket("t-bob", "bob")]);
  base = service.server.url;
});

afterAll(async () => {
  await service?.close();
});

describe("a service with no transport", () => {
  it("does not list messages.send to a ticket holder", async () => {
    const tools = await call(base, "GET", "/v1/tools", { token: alice.token });
    expect(tools).toMatchObject({ status: 200, body: { tools: [] } });
  });

  it("refuses a send tool_unavailable, leaves the ticket unused, and explains it truthfully", async () => {
    const sent = await call(base, "POST", "/v1/messages", {
      token: alice.token,
      body: { recipient: "bob", payload: "hi", callId: "nt-1" },
    });
    expect(sent).toMatchObject({
      status: 200,
      body: { status: "denied", code: "tool_unavailable" },
    });
    expect(await service.stores.usage.getUsage("team", "t-bob")).toBe(0);
    const told = await explainCall(base, alice.token, "nt-1");
    expect(told.body).toMatchObject({ verdict: "no_transport", code: "tool_unavailable" });
    expect(told.body.summary).not.toMatch(/spent|authorized/);
  });
});
