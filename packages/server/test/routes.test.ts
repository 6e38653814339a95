import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InProcessTransport, openStores, type StoreBundle } from "@tessera/core";
import { ROUTES } from "@tessera/core/http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { gateSession, principalKey } from "../src/principals.js";
import { AUDIT_READ_CAP } from "../src/routes/decisions.js";
import { call, principal, replacingMethod, ticket } from "./support/service.js";

/** Every route over loopback HTTP, allowed and denied, and every 4xx path. */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
const empty = principal("token-empty", { namespaceId: "team", actor: "nobody", authority: "host" });
/**
 * Holds only the in-doubt claims its test puts there: alice's retry-safe calls settle after
 * their replies, so a call of an earlier test can still read in doubt under her name.
 */
const stalled = principal("token-stalled", {
  namespaceId: "team",
  actor: "stalled",
  authority: "host",
  owner: "alice",
});
const issuer = principal("token-issuer", {
  namespaceId: "team",
  actor: "issuer",
  authority: "host",
  role: "issuer",
});

let stores: StoreBundle;
let server: RunningServer;
let base: string;
const transport = new InProcessTransport({
  fallback: (envelope) => ({ echo: envelope.payload, to: envelope.recipient }),
});

beforeAll(async () => {
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "routes-")), "t.db")}`);
  for (let i = 0; i < 8; i++) await stores.grants.add(ticket(`t-${i}`, `colleague-${i}`));
  server = await listen({
    stores,
    principals: [alice.config, empty.config, issuer.config, stalled.config],
    transport,
    port: 0,
    log: false,
  });
  base = server.url;
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

const delivered = (recipient: string) =>
  transport.delivered.filter((e) => e.recipient === recipient).length;

describe("routes, allowed and denied", () => {
  it("discovery lists the send tool for a holder, nothing for a principal with no grant", async () => {
    expect(await call(base, "GET", "/v1/tools", { token: alice.token })).toMatchObject({
      status: 200,
      body: { tools: ["messages.send"] },
    });
    expect((await call(base, "GET", "/v1/tools", { token: empty.token })).body).toEqual({
      tools: [],
    });
  });

  it("sends: delivered with the reply, then a spent ticket is a 200 denied", async () => {
    const body = { recipient: "colleague-0", payload: { q: "lunch?" } };
    const first = await call(base, "POST", "/v1/messages", { token: alice.token, body });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      status: "delivered",
      grantId: "t-0",
      reply: { echo: { q: "lunch?" }, to: "colleague-0" },
    });
    expect(first.body.messageId).toEqual(expect.any(String));
    const again = await call(base, "POST", "/v1/messages", { token: alice.token, body });
    expect(again).toMatchObject({
      status: 200,
      body: { status: "denied", code: "no_matching_grant" },
    });
    const stranger = await call(base, "POST", "/v1/messages", {
      token: alice.token,
      body: { recipient: "stranger", payload: 1 },
    });
    expect(stranger.body).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(delivered("colleague-0")).toBe(1);
    expect(delivered("stranger")).toBe(0);
  });

  it("authorizes allowed, then denied", async () => {
    const body = {
      action: "messages.send",
      resource: { namespace: "messages", path: ["colleague-1"], owner: "alice" },
    };
    const allowed = await call(base, "POST", "/v1/authorize", { token: alice.token, body });
    expect(allowed.body).toMatchObject({ status: "allowed", grantId: "t-1" });
    const denied = await call(base, "POST", "/v1/authorize", { token: alice.token, body });
    expect(denied).toMatchObject({ status: 200, body: { status: "denied" } });
  });

  it("explains and reads audit for the principal's own call, nothing for another's", async () => {
    const body = { recipient: "colleague-2", payload: "x", callId: "c-audit" };
    await call(base, "POST", "/v1/messages", { token: alice.token, body });
    const mine = await call(base, "GET", "/v1/explain?callId=c-audit", { token: alice.token });
    expect(mine.body).toMatchObject({ callId: "c-audit", verdict: "allowed" });
    const theirs = await call(base, "GET", "/v1/explain?callId=c-audit", { token: empty.token });
    expect(theirs.body).toMatchObject({ verdict: "unknown" });
    const audit = await call(base, "GET", "/v1/audit?callId=c-audit", { token: alice.token });
    expect(audit.body.events).toHaveLength(1);
    expect(audit.body.events[0]).toMatchObject({ outcome: "allowed", grantId: "t-2" });
    const foreign = await call(base, "GET", "/v1/audit?callId=c-audit", { token: empty.token });
    expect(foreign.body).toEqual({ events: [] });
    const neither = await call(base, "GET", "/v1/audit", { token: alice.token });
    expect(neither).toMatchObject({ status: 400, body: { error: { field: "callId" } } });
  });

  it("lists the principal's in-doubt A2UI claims, and only its own", async () => {
    const session = gateSession(stalled.config);
    await stores.claims.claim(
      { session, functionCallId: "fc-stuck" },
      { bodyHash: "h", claimedAt: 1 },
    );
    // A retry-safe send whose instance stopped between claim and answer is in doubt too.
    await stores.claims.claim(
      { session: `tessera.service:${principalKey(stalled.config)}`, functionCallId: "c-stuck" },
      { bodyHash: "h", claimedAt: 2, worker: "host:1" },
    );
    const stuck = [
      { functionCallId: "fc-stuck", claimedAt: 1 },
      { functionCallId: "c-stuck", claimedAt: 2, worker: "host:1" },
    ];
    const mine = await call(base, "GET", "/v1/claims/in-doubt", { token: stalled.token });
    expect(mine.body).toEqual({ claims: stuck });
    const other = await call(base, "GET", "/v1/claims/in-doubt", { token: empty.token });
    expect(other.body).toEqual({ claims: [] });
    // Same namespace and owner, another actor: none of them.
    const alices = await call(base, "GET", "/v1/claims/in-doubt", { token: alice.token });
    expect(alices.status).toBe(200);
    for (const claim of stuck) expect(alices.body.claims).not.toContainEqual(claim);
  });

  it("audit and explain read at most AUDIT_READ_CAP events of their ID from the store", async () => {
    // A caller names its own trace IDs and repeats call IDs at will: one ID can hold millions
    // of decisions, and a query that read them all held them all in memory.
    const filters: unknown[] = [];
    const audit = replacingMethod(stores.audit, "read", (filter) => {
      filters.push(filter);
      return stores.audit.read(filter);
    });
    const own = await listen({
      stores: { ...stores, audit },
      principals: [stalled.config],
      port: 0,
      log: false,
    });
    try {
      const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
      for (let i = 0; i < 3; i++) {
        await stores.audit.append({
          at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
          source: "kernel",
          outcome: "denied",
          code: "no_matching_grant",
          reason: "no_capability",
          traceId: trace,
          callId: `capped-${i}`,
          namespaceId: "team",
          actor: "stalled",
          authority: "host",
          owner: "alice",
        });
      }
      const answer = await call(own.url, "GET", `/v1/audit?traceId=${trace}&limit=2`, {
        token: stalled.token,
      });
      expect(answer.body.events.map((e: { callId: string }) => e.callId)).toEqual([
        "capped-0",
        "capped-1",
      ]);
      expect(filters).toEqual([{ traceId: trace, limit: AUDIT_READ_CAP }]);
      const explained = await call(own.url, "GET", "/v1/explain?callId=capped-1", {
        token: stalled.token,
      });
      expect(explained.body).toMatchObject({ callId: "capped-1", verdict: "never_granted" });
      expect(filters[1]).toEqual({ callId: "capped-1", limit: AUDIT_READ_CAP });
      expect(AUDIT_READ_CAP).toBe(10_000);
    } finally {
      await own.close();
    }
  });

  it("concurrent in-doubt listings of one principal share one walk of the store", async () => {
    // On Redis a listing walks the keyspace (SCAN): twenty requests at once must not be twenty
    // walks. A claim store whose listing takes 200 ms stands in for one, counting its walks.
    let walks = 0;
    const slow = replacingMethod(stores.claims, "listInDoubt", async (session) => {
      walks++;
      await new Promise((resolve) => setTimeout(resolve, 200));
      return stores.claims.listInDoubt(session);
    });
    const own = await listen({
      stores: { ...stores, claims: slow },
      principals: [stalled.config],
      port: 0,
      log: false,
    });
    try {
      const list = () => call(own.url, "GET", "/v1/claims/in-doubt", { token: stalled.token });
      const answers = await Promise.all(Array.from({ length: 20 }, list));
      const first = JSON.stringify([200, answers[0]?.body]);
      expect(answers.map((a) => JSON.stringify([a.status, a.body]))).toEqual(Array(20).fill(first));
      expect(
        answers[0]?.body.claims.map((c: { functionCallId: string }) => c.functionCallId),
      ).toEqual(["fc-stuck", "c-stuck"]);
      // One walk is two listings: the gate's session and the retry-safe calls' one. The twenty
      // requests may straddle the end of a walk (on a loaded machine, several), so allow a few;
      // never one per request.
      expect(walks % 2).toBe(0);
      expect(walks).toBeLessThanOrEqual(8);
      // Once it is over, the next request reads the store again: nothing is cached.
      walks = 0;
      expect((await list()).status).toBe(200);
      expect(walks).toBe(2);
    } finally {
      await own.close();
    }
  });

  it("issues, lists with usage counts and revokes grants, for issuer tokens only", async () => {
    const grant = {
      id: "g-issued",
      subject: "asker",
      capabilities: [
        {
          resource: { namespace: "messages", path: ["colleague-9"], owner: "alice" },
          actions: ["messages.send"],
          scope: "exact",
        },
      ],
      constraints: { maxUses: 1 },
      issuedAt: new Date(Date.now() - 60_000).toISOString(),
    };
    const issued = await call(base, "POST", "/v1/grants", { token: issuer.token, body: grant });
    expect(issued.body.grant).toMatchObject({
      id: "g-issued",
      namespaceId: "team",
      issuer: "host",
    });
    const sent = await call(base, "POST", "/v1/messages", {
      token: alice.token,
      body: { recipient: "colleague-9", payload: 1 },
    });
    expect(sent.body.status).toBe("delivered");
    const list = await call(base, "GET", "/v1/grants", { token: issuer.token });
    expect(
      list.body.grants.find((g: { grant: { id: string } }) => g.grant.id === "g-issued"),
    ).toMatchObject({ uses: 1 });
    expect((await call(base, "DELETE", "/v1/grants/t-7", { token: issuer.token })).body).toEqual({
      revoked: true,
    });
    expect((await call(base, "DELETE", "/v1/grants/nope", { token: issuer.token })).body).toEqual({
      revoked: false,
    });
    const revoked = await call(base, "POST", "/v1/messages", {
      token: alice.token,
      body: { recipient: "colleague-7", payload: 1 },
    });
    expect(revoked.body).toEqual({ status: "denied", code: "no_matching_grant" });
    // The namespace and issuer are the token's: a body that names them is refused.
    const smuggled = await call(base, "POST", "/v1/grants", {
      token: issuer.token,
      body: { ...grant, id: "g-2", namespaceId: "other" },
    });
    expect(smuggled).toMatchObject({ status: 400, body: { error: { field: "namespaceId" } } });
  });

  it("revokes a grant whose ID is as long as the schema allows (512 characters, multi-byte too)", async () => {
    for (const id of ["r".repeat(512), "é".repeat(256) + "鍵".repeat(256)]) {
      const issued = await call(base, "POST", "/v1/grants", {
        token: issuer.token,
        body: { ...ticket(id, "colleague-long"), namespaceId: undefined, issuer: undefined },
      });
      expect(issued.body.grant.id).toBe(id);
      const path = `/v1/grants/${encodeURIComponent(id)}`;
      expect((await call(base, "DELETE", path, { token: issuer.token })).body).toEqual({
        revoked: true,
      });
      const list = await call(base, "GET", "/v1/grants", { token: issuer.token });
      const kept = list.body.grants.find((g: { grant: { id: string } }) => g.grant.id === id);
      expect(kept.grant.revokedAt).toBeDefined();
    }
  });

  it("refuses each token outside its role with 403, before any decision", async () => {
    for (const [method, path] of [
      ["GET", "/v1/grants"],
      ["POST", "/v1/grants"],
      ["DELETE", "/v1/grants/t-6"],
    ] as const) {
      const answer = await call(base, method, path, {
        token: alice.token,
        ...(method === "POST" ? { body: {} } : {}),
      });
      expect(answer).toMatchObject({ status: 403, body: { error: { code: "forbidden" } } });
    }
    const send = await call(base, "POST", "/v1/messages", {
      token: issuer.token,
      body: { recipient: "colleague-6", payload: 1 },
    });
    expect(send.status).toBe(403);
    expect(delivered("colleague-6")).toBe(0);
  });

  it("asks every non-public route for a token: 401 with WWW-Authenticate", async () => {
    for (const route of Object.values(ROUTES)) {
      if (route.role === "public") continue;
      const path = route.path.replace(":grantId", "g");
      for (const token of [undefined, "not-a-known-token"]) {
        const answer = await call(base, route.method, path, {
          ...(token === undefined ? {} : { token }),
          ...(route.method === "POST" ? { body: {} } : {}),
        });
        expect(answer.status, `${route.method} ${path}`).toBe(401);
        expect(answer.headers.get("www-authenticate")).toMatch(/^Bearer /);
        expect(answer.body.error.code).toBe("unauthenticated");
      }
    }
  });
});

describe("requests that get no decision (4xx)", () => {
  const post = (raw: string, headers: Record<string, string> = {}) =>
    call(base, "POST", "/v1/messages", { token: alice.token, raw, headers });

  it("400 names the offending field", async () => {
    expect((await post(JSON.stringify({ payload: 1 }))).body.error).toMatchObject({
      field: "recipient",
      message: "recipient: required",
    });
    // Left out, even a field that takes any value says so plainly (not zod's "nonoptional").
    expect((await post(JSON.stringify({ recipient: "c" }))).body.error.message).toBe(
      "payload: required",
    );
    expect((await post(JSON.stringify({ recipient: "", payload: 1 }))).body.error.field).toBe(
      "recipient",
    );
    const purpose = await post(JSON.stringify({ recipient: "c", payload: 1, purpose: "x" }));
    expect(purpose).toMatchObject({ status: 400, body: { error: { field: "purpose" } } });
    const extra = await post(JSON.stringify({ recipient: "c", payload: 1, sender: "x" }));
    expect(extra.body.error.field).toBe("sender");
    // A wrong type keeps zod's words.
    const wrong = await post(JSON.stringify({ recipient: 7, payload: 1 }));
    expect(wrong.body.error.message).toBe(
      "recipient: Invalid input: expected string, received number",
    );
  });

  it("400 for malformed JSON, an empty body and a poisoned prototype", async () => {
    for (const raw of ["{", "{'a':1}", "", '{"__proto__":{"admin":true},"recipient":"c"}']) {
      const answer = await post(raw);
      expect(answer.status, raw).toBe(400);
      expect(answer.body.error.code).toBe("invalid_request");
    }
    // The poisoned key is named as a possible cause, not only "not valid JSON".
    const poisoned = await post('{"__proto__":{"admin":true},"recipient":"c"}');
    expect(poisoned.body.error.message).toContain("__proto__");
  });

  it("answers hostile strings with 400 and never echoes them", async () => {
    const hostile = [
      "x".repeat(10_000),
      "\u0000\u001b[31m",
      "<script>alert(1)</script>".repeat(30),
    ];
    for (const recipient of hostile) {
      const answer = await post(JSON.stringify({ recipient, payload: 1, callId: recipient }));
      if (answer.status === 200) {
        // A short hostile name is just an unknown recipient: denied, nothing delivered.
        expect(answer.body.status).toBe("denied");
      } else {
        expect(answer.status).toBe(400);
        expect(JSON.stringify(answer.body)).not.toContain(recipient.slice(0, 20));
      }
    }
    expect(transport.delivered.some((e) => hostile.includes(e.recipient))).toBe(false);
  });

  it("refuses a call ID with a control, bidi or line-separator character or a lone surrogate (400, nothing decided)", async () => {
    // The ID is echoed in answers and kept in claims and audit, where people read it.
    const before = transport.delivered.length;
    for (const callId of [
      "a\u0000b",
      "line\r\nforged",
      "esc\u001b[2J",
      "csi\u009b2J",
      "rtl\u202eexe",
      "sep\u2028",
      "lone\ud800",
    ]) {
      const answer = await post(JSON.stringify({ recipient: "c", payload: 1, callId }));
      expect([callId, answer.status, answer.body.error?.code, answer.body.error?.field]).toEqual([
        callId,
        400,
        "invalid_request",
        "callId",
      ]);
      expect(answer.body.error.message).toBe(
        "callId: a call ID may not hold control, bidi or line-separator characters or a lone surrogate",
      );
    }
    expect(transport.delivered.length).toBe(before);
    // Printable IDs of every other kind stay the caller's own: paths, non-ASCII, emoji.
    for (const callId of ["../x/..", "é-ü-日本", "👩‍💻-1"]) {
      const answer = await post(JSON.stringify({ recipient: "c", payload: 1, callId }));
      expect([callId, answer.status]).toEqual([callId, 200]);
    }
  });

  it("413 past the body limit, 415 for another content type", async () => {
    const big = JSON.stringify({ recipient: "c", payload: "x".repeat(70 * 1024) });
    expect(await post(big)).toMatchObject({
      status: 413,
      body: { error: { code: "body_too_large" } },
    });
    const text = await post("recipient=c", { "content-type": "text/plain" });
    expect(text).toMatchObject({
      status: 415,
      body: { error: { code: "unsupported_media_type" } },
    });
  });

  it("404 for an unknown route and 405 with Allow for a wrong method, before authentication", async () => {
    expect(await call(base, "GET", "/v1/nope")).toMatchObject({
      status: 404,
      body: { error: { code: "not_found" } },
    });
    const wrong = await call(base, "GET", "/v1/messages");
    expect(wrong).toMatchObject({ status: 405, body: { error: { code: "method_not_allowed" } } });
    expect(wrong.headers.get("allow")).toBe("POST");
  });

  it("a 405's Allow names HEAD beside GET, which is answered too, and covers /metrics and the document", async () => {
    for (const path of ["/v1/tools", "/metrics", "/v1/openapi.json", "/healthz"]) {
      const wrong = await call(base, "POST", path, { token: alice.token, body: {} });
      expect([path, wrong.status, wrong.headers.get("allow")]).toEqual([path, 405, "GET, HEAD"]);
      const head = await fetch(`${base}${path}`, {
        method: "HEAD",
        headers: { authorization: `Bearer ${alice.token}` },
      });
      expect([path, head.status]).toEqual([path, 200]);
    }
  });
});

describe("observability", () => {
  it("serves the OpenAPI document of every route, generated from the contracts", async () => {
    const doc = (await call(base, "GET", "/v1/openapi.json")).body;
    expect(doc.openapi).toBe("3.0.3");
    for (const [name, route] of Object.entries(ROUTES)) {
      const path = route.path.replace(/:(\w+)/g, "{$1}");
      expect(doc.paths[path][route.method.toLowerCase()].operationId).toBe(name);
    }
    const send = doc.paths["/v1/messages"].post.requestBody.content["application/json"].schema;
    expect(send.required).toContain("recipient");
    // The deciding routes list the trace header they read; the others do not.
    const header = (op: { parameters?: { name: string; in: string }[] }) =>
      (op.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name);
    expect(header(doc.paths["/v1/messages"].post)).toEqual(["traceparent", "tracestate"]);
    expect(header(doc.paths["/v1/authorize"].post)).toEqual(["traceparent", "tracestate"]);
    expect(header(doc.paths["/v1/tools"].get)).toEqual([]);
  });

  /**
   * What the routes answer is what the document says. Before: the settle listed the trace
   * headers it never reads, `/healthz` a 503 it never gives (it never touches the store), and
   * the 404 of an A2UI route with no catalog, the 413 and 415 of a body, the 409 of a call
   * still in progress and of a derivation's exhausted budget were not there.
   */
  it("lists the statuses the routes answer, and only the headers they read", async () => {
    const doc = (await call(base, "GET", "/v1/openapi.json")).body;
    const statuses = (path: string, method: string) =>
      Object.keys(doc.paths[path][method].responses as Record<string, unknown>);
    const header = (op: { parameters?: { name: string; in: string }[] }) =>
      (op.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name);
    const seen: [string, number][] = [];
    const probe = async (path: string, answer: Promise<{ status: number }>) => {
      seen.push([path, (await answer).status]);
    };
    // This service has no A2UI catalog: its A2UI routes answer 404.
    const message = { version: "v1.0", callRendererFunction: {} };
    await probe(
      "/v1/a2ui/claim",
      call(base, "POST", "/v1/a2ui/claim", { token: alice.token, body: { message } }),
    );
    await probe(
      "/v1/a2ui/settle",
      call(base, "POST", "/v1/a2ui/settle", {
        token: alice.token,
        body: { handle: "none", value: 1 },
      }),
    );
    await probe(
      "/v1/messages",
      call(base, "POST", "/v1/messages", {
        token: alice.token,
        raw: "hi",
        headers: { "content-type": "text/plain" },
      }),
    );
    await probe(
      "/v1/messages",
      call(base, "POST", "/v1/messages", {
        token: alice.token,
        body: { recipient: "colleague-0", payload: "x".repeat(2 * 1024 * 1024) },
      }),
    );
    expect(seen.map(([, status]) => status)).toEqual([404, 404, 415, 413]);
    for (const [path, status] of seen) expect(statuses(path, "post")).toContain(String(status));
    expect(statuses("/v1/messages", "post")).toContain("409");
    expect(doc.paths["/v1/messages"].post.responses["409"].description).toContain(
      "call_in_progress",
    );
    expect(statuses("/v1/grants/derive", "post")).toContain("409");
    expect(statuses("/healthz", "get")).toEqual(["200"]);
    expect(statuses("/readyz", "get")).toEqual(["200", "503"]);
    expect(header(doc.paths["/v1/a2ui/settle"].post)).toEqual([]);
    expect(header(doc.paths["/v1/a2ui/claim"].post)).toEqual(["traceparent", "tracestate"]);
    expect(header(doc.paths["/v1/a2ui/call"].post)).toEqual(["traceparent", "tracestate"]);
  });

  it("counts decisions by outcome and code, claims by status, and times the stores", async () => {
    const text = (await call(base, "GET", "/metrics")).body as string;
    expect(text).toMatch(/tessera_decisions_total\{route="send",outcome="delivered",code=""\} \d+/);
    expect(text).toMatch(
      /tessera_decisions_total\{route="send",outcome="denied",code="no_matching_grant"\} \d+/,
    );
    expect(text).toMatch(/tessera_claims_total\{route="send",status="dispatched"\} \d+/);
    expect(text).toMatch(/tessera_store_seconds_bucket\{le="[\d.]+",port="acts",op="record"\}/);
  });
});
