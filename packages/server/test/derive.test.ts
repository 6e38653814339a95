import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, principal, type Service, send, startService, ticket } from "./support/service.js";

/** `POST /v1/grants/derive` over loopback HTTP, against a real SQLite store. */
const issuer = principal("token-issuer", {
  namespaceId: "team",
  actor: "issuer",
  authority: "host",
  role: "issuer",
});
const otherIssuer = principal("token-other-issuer", {
  namespaceId: "team",
  actor: "issuer-2",
  authority: "other-host",
  role: "issuer",
});
const asker = principal("token-asker", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
const helper = principal("token-helper", {
  namespaceId: "team",
  actor: "helper",
  authority: "host",
  owner: "alice",
});

/** A parent for `asker` with three uses; each case derives from its own. */
const parent = (id: string, recipient = "bob") => ({
  ...ticket(id, recipient),
  constraints: { maxUses: 3 },
});

/** A child request for `helper`: the parent's one capability, `uses` of its uses. */
const child = (parentId: string, uses = 1, recipient = "bob") => ({
  parentId,
  subject: "helper",
  capabilities: [
    {
      resource: { namespace: "messages", path: [recipient], owner: "alice" },
      actions: ["messages.send"],
      scope: "exact",
    },
  ],
  constraints: { maxUses: uses },
});

let service: Service;
let base: string;

beforeAll(async () => {
  service = await startService(
    [issuer.config, otherIssuer.config, asker.config, helper.config],
    [
      parent("p-allowed"),
      parent("p-widened"),
      parent("p-retry"),
      parent("p-budget"),
      parent("p-revoked"),
      parent("p-delegated", "dave"),
      { ...parent("p-foreign"), issuer: "other-host" },
    ],
  );
  base = service.server.url;
});

afterAll(async () => {
  await service?.close();
});

const derive = (token: string, body: unknown) =>
  call(base, "POST", "/v1/grants/derive", { token, body });
const ids = async () => (await service.stores.grants.listNamespace("team")).map((g) => g.id);
const uses = (grantId: string) => service.stores.usage.getUsage("team", grantId);

describe("POST /v1/grants/derive", () => {
  it("derives a child the delegate can use; its uses are carved out of the parent", async () => {
    const answer = await derive(issuer.token, { ...child("p-allowed"), id: "c-allowed" });
    expect(answer.status).toBe(200);
    expect(answer.body.grant).toMatchObject({
      id: "c-allowed",
      namespaceId: "team",
      issuer: "asker",
      subject: "helper",
      parentId: "p-allowed",
      depth: 1,
      constraints: { maxUses: 1 },
    });
    expect(await uses("p-allowed")).toBe(1);
    const allowed = await call(base, "POST", "/v1/authorize", {
      token: helper.token,
      body: send("bob", "helper-call-1"),
    });
    expect(allowed.body).toMatchObject({ status: "allowed", grantId: "c-allowed" });
  });

  it("is for issuer tokens only: an agent token is 403 and nothing is derived", async () => {
    const before = await ids();
    for (const token of [asker.token, helper.token]) {
      const answer = await derive(token, { ...child("p-allowed"), id: "c-agent" });
      expect(answer).toMatchObject({ status: 403, body: { error: { code: "forbidden" } } });
    }
    expect(await ids()).toEqual(before);
    expect(await uses("p-allowed")).toBe(1);
  });

  it("refuses a widened axis with its code, stores nothing and carves nothing", async () => {
    const before = await ids();
    const refusals = [
      [{ ...child("p-widened", 1, "carol") }, "delegation_wider_path"],
      [{ ...child("p-widened", 4) }, "delegation_wider_uses"],
      [{ ...child("p-widened"), constraints: {} }, "delegation_wider_uses"],
    ] as const;
    for (const [body, code] of refusals) {
      const answer = await derive(issuer.token, { ...body, id: "c-widened" });
      expect(answer, code).toMatchObject({ status: 400, body: { error: { code } } });
    }
    const owner = child("p-widened");
    const other = { ...owner.capabilities[0], resource: { ...owner.capabilities[0]?.resource } };
    other.resource.owner = "mallory";
    expect(
      (await derive(issuer.token, { ...owner, capabilities: [other], id: "c-widened" })).body,
    ).toMatchObject({ error: { code: "delegation_other_owner" } });
    expect(await ids()).toEqual(before);
    expect(await uses("p-widened")).toBe(0);
  });

  it("answers another issuer's parent, and a missing one, alike; the body names no delegator", async () => {
    const foreign = await derive(issuer.token, child("p-foreign"));
    const missing = await derive(issuer.token, child("nope"));
    for (const answer of [foreign, missing]) {
      expect(answer).toMatchObject({
        status: 400,
        body: { error: { code: "invalid_input", field: "parentId" } },
      });
    }
    expect(foreign.body).toEqual(missing.body);
    // The owning issuer may derive from it.
    expect((await derive(otherIssuer.token, child("p-foreign"))).status).toBe(200);
    const smuggled = await derive(issuer.token, { ...child("p-allowed"), issuer: "asker" });
    expect(smuggled).toMatchObject({ status: 400, body: { error: { field: "issuer" } } });
  });

  it("a repeated ID is refused before any use is carved", async () => {
    const body = { ...child("p-retry"), id: "c-retry" };
    expect((await derive(issuer.token, body)).status).toBe(200);
    const again = await derive(issuer.token, body);
    expect(again).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_grant", field: "id" } },
    });
    expect(await uses("p-retry")).toBe(1);
  });

  it("a child asking for more uses than the parent has left is 409; none are spent", async () => {
    expect((await derive(issuer.token, child("p-budget", 2))).status).toBe(200);
    const exhausted = await derive(issuer.token, child("p-budget", 2));
    expect(exhausted).toMatchObject({
      status: 409,
      body: { error: { code: "delegation_budget_exhausted" } },
    });
    expect(await uses("p-budget")).toBe(2);
  });

  it("refuses to derive from a revoked parent", async () => {
    await call(base, "DELETE", "/v1/grants/p-revoked", { token: issuer.token });
    const answer = await derive(issuer.token, { ...child("p-revoked"), id: "c-revoked" });
    expect(answer).toMatchObject({
      status: 400,
      body: { error: { code: "delegation_parent_revoked" } },
    });
    expect(await ids()).not.toContain("c-revoked");
    expect(await uses("p-revoked")).toBe(0);
  });

  it("lists and revokes the children its token derived; another issuer sees none of them", async () => {
    // A child's own issuer is its delegator (the parent's subject), not the token's authority:
    // compared by `issuer` alone, the token could neither list its children nor revoke one
    // (`revoked: false`, like a missing grant), which stayed in force.
    expect(
      (await derive(issuer.token, { ...child("p-delegated", 2, "dave"), id: "c-delegated" }))
        .status,
    ).toBe(200);
    const grandchild = { ...child("c-delegated", 1, "dave"), subject: "asker", id: "g-delegated" };
    expect((await derive(issuer.token, grandchild)).status).toBe(200);
    const listed = async (token: string) => {
      const list = await call(base, "GET", "/v1/grants", { token });
      expect(list.status).toBe(200);
      const rows = list.body.grants as { grant: { id: string }; uses: number }[];
      return new Map(rows.map((row) => [row.grant.id, row.uses]));
    };
    const mine = await listed(issuer.token);
    expect(mine.get("p-delegated")).toBe(2);
    expect(mine.get("c-delegated")).toBe(1);
    expect(mine.get("g-delegated")).toBe(0);
    const theirs = await listed(otherIssuer.token);
    expect([...theirs.keys()].filter((id) => id.endsWith("-delegated"))).toEqual([]);
    const foreign = await call(base, "DELETE", "/v1/grants/c-delegated", {
      token: otherIssuer.token,
    });
    expect(foreign.body).toEqual({ revoked: false });

    const before = await call(base, "POST", "/v1/authorize", {
      token: helper.token,
      body: send("dave", "delegated-call-1"),
    });
    expect(before.body).toMatchObject({ status: "allowed", grantId: "c-delegated" });
    const revoked = await call(base, "DELETE", "/v1/grants/c-delegated", { token: issuer.token });
    expect(revoked).toMatchObject({ status: 200, body: { revoked: true } });
    const after = await call(base, "POST", "/v1/authorize", {
      token: helper.token,
      body: send("dave", "delegated-call-2"),
    });
    expect(after.body).toMatchObject({ status: "denied" });
    const explained = await call(base, "GET", "/v1/explain?callId=delegated-call-2", {
      token: helper.token,
    });
    expect(explained.body).toMatchObject({ verdict: "revoked" });
  });

  it("is in the OpenAPI document with its request schema", async () => {
    const doc = (await call(base, "GET", "/v1/openapi.json")).body;
    const route = doc.paths["/v1/grants/derive"].post;
    expect(route.operationId).toBe("deriveGrant");
    const schema = route.requestBody.content["application/json"].schema;
    expect(schema.required).toEqual(
      expect.arrayContaining(["parentId", "subject", "capabilities"]),
    );
  });
});
