import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  authorize,
  explainCall,
  principal,
  type Service,
  send,
  startService,
  ticket,
} from "./support/service.js";

/**
 * Every read and every decision of the service belongs to the whole principal its token maps
 * to (namespace, actor, authority, owner; purpose too for decisions), never to a part of it
 * and never to the request body.
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
// Same namespace and actor as alice, another owner: a different principal.
const bob = principal("token-bob", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "bob",
});
// Same namespace, actor and owner as alice, vouched for by another authority.
const otherAuthority = principal("token-other-authority", {
  namespaceId: "team",
  actor: "asker",
  authority: "other-host",
  owner: "alice",
});
const otherActor = principal("token-other-actor", {
  namespaceId: "team",
  actor: "someone-else",
  authority: "host",
  owner: "alice",
});
const triage = principal("token-triage", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
  purpose: "triage",
});
const billing = principal("token-billing", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
  purpose: "billing",
});

let service: Service;
let base: string;

beforeAll(async () => {
  service = await startService(
    [alice, bob, otherAuthority, otherActor, triage, billing].map((p) => p.config),
    [
      ticket("ticket-alice", "colleague-0"),
      ticket("ticket-triage", "colleague-t", { purposes: ["triage"] }),
      ticket("ticket-triage-b", "colleague-b", { purposes: ["triage"] }),
    ],
  );
  base = service.server.url;
  // alice spends her single-use ticket, then is refused a second send under a new call ID.
  expect((await authorize(base, alice.token, send("colleague-0", "c-first"))).body).toMatchObject({
    status: "allowed",
  });
  expect((await authorize(base, alice.token, send("colleague-0", "c-spent"))).body).toMatchObject({
    status: "denied",
  });
});

afterAll(async () => {
  await service?.close();
});

describe("GET /v1/explain reads only the caller's own decisions (item 8)", () => {
  it("explains the owner's own refusal, grant included", async () => {
    const own = await explainCall(base, alice.token, "c-spent");
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ verdict: "spent" });
    expect(String(own.body.summary)).toContain("ticket-alice");
  });

  it.each([
    ["another owner", bob],
    ["another authority", otherAuthority],
  ])("tells %s with the same actor nothing about the call", async (_, stranger) => {
    const foreign = await explainCall(base, stranger.token, "c-spent");
    expect(foreign.status).toBe(200);
    expect(foreign.body.verdict).toBe("unknown");
    expect(JSON.stringify(foreign.body)).not.toContain("ticket-alice");
  });

  it("keeps each principal's verdict when another principal reuses the call ID", async () => {
    const reused = await authorize(base, bob.token, send("colleague-0", "c-first", "bob"));
    expect(reused.body).toMatchObject({ status: "denied" });
    expect((await explainCall(base, alice.token, "c-first")).body.verdict).toBe("allowed");
    expect((await explainCall(base, bob.token, "c-first")).body.verdict).not.toBe("allowed");
  });
});

describe("unknown and foreign call IDs answer alike (item 10)", () => {
  it.each([
    ["another actor", otherActor],
    ["another owner", bob],
    ["another authority", otherAuthority],
  ])("answers %s exactly as it answers an ID nobody used", async (_, stranger) => {
    const foreign = await explainCall(base, stranger.token, "c-spent");
    const unknown = await explainCall(base, stranger.token, "c-nobody-used-this");
    // The answer echoes the caller's own call ID; everything else is the same.
    expect(foreign).toEqual({ status: 200, body: { ...unknown.body, callId: "c-spent" } });
    expect(unknown.body.verdict).toBe("unknown");
  });
});

describe("the purpose comes from the principal, never from the body (item 9)", () => {
  it("refuses a body that names a purpose, and spends nothing", async () => {
    for (const who of [alice, triage]) {
      const reply = await authorize(base, who.token, {
        ...send("colleague-t", `c-body-purpose-${who.token}`),
        purpose: "triage",
      });
      expect(reply.status).toBe(400);
      expect(reply.body).toMatchObject({ error: { code: "invalid_request" } });
      expect(JSON.stringify(reply.body)).toContain("purpose");
    }
    expect(await service.stores.usage.getUsage("team", "ticket-triage")).toBe(0);
  });

  it("decides under the configured purpose: allowed for it, denied for another or none", async () => {
    const none = await authorize(base, alice.token, send("colleague-b", "c-no-purpose"));
    expect(none.body).toMatchObject({ status: "denied" });
    const other = await authorize(base, billing.token, send("colleague-b", "c-billing"));
    expect(other.body).toMatchObject({ status: "denied" });
    expect((await explainCall(base, billing.token, "c-billing")).body.verdict).toBe(
      "purpose_mismatch",
    );

    const configured = await authorize(base, triage.token, send("colleague-t", "c-triage"));
    expect(configured.body).toMatchObject({ status: "allowed", grantId: "ticket-triage" });
  });
});
