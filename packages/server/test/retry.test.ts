import { mkdtempSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InProcessTransport, openStores, type StoreBundle } from "@tessera/core";
import { uniqueStorageDigest } from "@tessera/core/store-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { principalKey } from "../src/principals.js";
import { call, principal, ticket } from "./support/service.js";

/** Safe to retry: one decision, one spend, one delivery per (principal, call ID). */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
const carol = principal("token-carol", {
  namespaceId: "team",
  actor: "carol",
  authority: "host",
  owner: "alice",
});

/** Alice's turn identity but for the purpose each acts for: two principals, never one. */
const aliceSupport = principal("token-alice-support", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
  purpose: "support",
});
const aliceBilling = principal("token-alice-billing", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
  purpose: "billing",
});

let stores: StoreBundle;
let server: RunningServer;
let base: string;
let slow = 0;
const transport = new InProcessTransport({
  fallback: async (envelope) => {
    if (slow > 0) await new Promise((resolve) => setTimeout(resolve, slow));
    return { reply: `hello from ${envelope.recipient}`, at: Math.random() };
  },
});
const deliveries = (recipient: string) =>
  transport.delivered.filter((e) => e.recipient === recipient).length;

beforeAll(async () => {
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "retry-")), "t.db")}`);
  for (let i = 0; i < 6; i++) await stores.grants.add(ticket(`t-${i}`, `colleague-${i}`));
  await stores.grants.add(ticket("t-carol", "colleague-0", { subject: "carol" }));
  await stores.grants.add(ticket("t-support", "helpdesk", { purposes: ["support"] }));
  await stores.grants.add(ticket("t-support-2", "helpdesk-2", { purposes: ["support"] }));
  server = await listen({
    stores,
    principals: [alice.config, carol.config, aliceSupport.config, aliceBilling.config],
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

const sendAs = (token: string, body: unknown) =>
  call(base, "POST", "/v1/messages", { token, body });

describe("a retried call ID", () => {
  it("gets the original answer again: same message ID and reply, one delivery, one spend", async () => {
    const body = { recipient: "colleague-0", payload: { q: 1 }, callId: "c-1" };
    const first = await sendAs(alice.token, body);
    expect(first.body.status).toBe("delivered");
    const again = await sendAs(alice.token, {
      callId: "c-1",
      payload: { q: 1 },
      recipient: "colleague-0",
    });
    expect(again).toMatchObject({ status: 200, body: first.body });
    expect(deliveries("colleague-0")).toBe(1);
    expect(await stores.usage.getUsage("team", "t-0")).toBe(1);
  });

  it("with a different body is a 409 conflict, and nothing is decided", async () => {
    const conflict = await sendAs(alice.token, {
      recipient: "colleague-1",
      payload: { q: 1 },
      callId: "c-1",
    });
    expect(conflict).toMatchObject({
      status: 409,
      body: { error: { code: "call_id_conflict", field: "callId" } },
    });
    expect(deliveries("colleague-1")).toBe(0);
    expect(await stores.usage.getUsage("team", "t-1")).toBe(0);
    // The same ID on another route is another body too.
    const authorize = await call(base, "POST", "/v1/authorize", {
      token: alice.token,
      body: {
        action: "messages.send",
        resource: { namespace: "messages", path: ["colleague-1"], owner: "alice" },
        callId: "c-1",
      },
    });
    expect(authorize.status).toBe(409);
  });

  it("is scoped per principal: another principal's same ID is its own call", async () => {
    const theirs = await sendAs(carol.token, {
      recipient: "colleague-0",
      payload: { q: 1 },
      callId: "c-1",
    });
    expect(theirs.body).toMatchObject({ status: "delivered", grantId: "t-carol" });
    expect(deliveries("colleague-0")).toBe(2);
  });

  it("is scoped by purpose too: the purpose a grant refuses is not answered the other's decision", async () => {
    const body = { recipient: "helpdesk", payload: "help", callId: "c-purpose" };
    const support = await sendAs(aliceSupport.token, body);
    expect(support.body).toMatchObject({ status: "delivered", grantId: "t-support" });
    // The same call ID and body from the purpose the ticket does not admit: decided for that
    // principal (refused), never handed the delivered answer of the other.
    const billing = await sendAs(aliceBilling.token, body);
    expect(billing.body).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(deliveries("helpdesk")).toBe(1);
    expect(principalKey(aliceBilling.config)).not.toBe(principalKey(aliceSupport.config));
    // A principal without a purpose keeps the key it had before purposes were part of it.
    expect(principalKey(alice.config)).toBe(uniqueStorageDigest("team", "asker", "host", "alice"));
  });

  it("reads back by purpose too: audit and explain show a principal only its own purpose's decisions", async () => {
    const body = { recipient: "helpdesk-2", payload: "read", callId: "c-purpose-read" };
    expect((await sendAs(aliceSupport.token, body)).body.status).toBe("delivered");
    const read = async (token: string) => ({
      audit: (await call(base, "GET", "/v1/audit?callId=c-purpose-read", { token })).body,
      explain: (await call(base, "GET", "/v1/explain?callId=c-purpose-read", { token })).body,
    });
    const mine = await read(aliceSupport.token);
    expect(mine.audit.events.map((e: { purpose?: string }) => e.purpose)).toEqual(["support"]);
    expect(mine.explain.verdict).toBe("allowed");
    // The same identity under another purpose, or none, reads it as an ID nobody used.
    const unused = await read(aliceBilling.token);
    for (const other of [aliceBilling.token, alice.token]) {
      const theirs = await read(other);
      expect(theirs.audit.events).toEqual([]);
      expect(theirs.explain).toEqual(unused.explain);
      expect(theirs.explain.verdict).not.toBe("allowed");
    }
    // And the other way round: the purpose-less principal's own call is not the support one's.
    const plain = { recipient: "colleague-5", payload: "read", callId: "c-plain-read" };
    expect((await sendAs(alice.token, plain)).body.status).toBe("delivered");
    const audit = (token: string) =>
      call(base, "GET", "/v1/audit?callId=c-plain-read", { token }).then((a) => a.body.events);
    expect(await audit(alice.token)).toHaveLength(1);
    expect(await audit(aliceSupport.token)).toEqual([]);
  });

  it("replays a denial as the same denial, without deciding again", async () => {
    const body = { recipient: "nobody", payload: 1, callId: "c-denied" };
    const first = await sendAs(alice.token, body);
    expect(first.body).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(await sendAs(alice.token, body)).toMatchObject({ status: 200, body: first.body });
    const audit = await call(base, "GET", "/v1/audit?callId=c-denied", { token: alice.token });
    expect(audit.body.events).toHaveLength(1);
  });

  it("sent 12 times at once decides, spends and delivers once; every answer is the same", async () => {
    slow = 50;
    const body = { recipient: "colleague-2", payload: "race", callId: "c-race" };
    const answers = await Promise.all(Array.from({ length: 12 }, () => sendAs(alice.token, body)));
    slow = 0;
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
    expect(answers[0]?.body.status).toBe("delivered");
    expect(deliveries("colleague-2")).toBe(1);
  });

  it("after a dropped response, gets the original answer", async () => {
    slow = 150;
    const body = JSON.stringify({ recipient: "colleague-3", payload: "drop", callId: "c-drop" });
    // The client sends the whole request, then its connection dies before the answer.
    await new Promise<void>((resolve, reject) => {
      const { hostname, port } = new URL(base);
      const socket = connect(Number(port), hostname, () => {
        socket.write(
          `POST /v1/messages HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${alice.token}\r\n` +
            `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 20);
      });
      socket.on("error", reject);
    });
    const retry = await call(base, "POST", "/v1/messages", { token: alice.token, raw: body });
    slow = 0;
    expect(retry).toMatchObject({ status: 200, body: { status: "delivered", callId: "c-drop" } });
    expect(deliveries("colleague-3")).toBe(1);
    const again = await call(base, "POST", "/v1/messages", { token: alice.token, raw: body });
    expect(again.body).toEqual(retry.body);
  });
});

describe("a client that disconnects mid-request", () => {
  it("leaves nothing decided and the service serving", async () => {
    const body = JSON.stringify({ recipient: "colleague-4", payload: "cut", callId: "c-cut" });
    await new Promise<void>((resolve, reject) => {
      const { hostname, port } = new URL(base);
      const socket = connect(Number(port), hostname, () => {
        socket.write(
          `POST /v1/messages HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${alice.token}\r\n` +
            `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n` +
            body.slice(0, 10),
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 30);
      });
      socket.on("error", reject);
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(deliveries("colleague-4")).toBe(0);
    const session = `tessera.service:${principalKey(alice.config)}`;
    expect(await stores.claims.get({ session, functionCallId: "c-cut" })).toBeUndefined();
    expect(
      (await call(base, "GET", "/v1/audit?callId=c-cut", { token: alice.token })).body,
    ).toEqual({
      events: [],
    });
    // The same call, sent whole, is decided as a first call.
    const whole = await call(base, "POST", "/v1/messages", { token: alice.token, raw: body });
    expect(whole.body.status).toBe("delivered");
    // The receipt is written after the reply; a retry here waits for that write.
    const retry = await call(base, "POST", "/v1/messages", { token: alice.token, raw: body });
    expect(retry.body).toEqual(whole.body);
    expect(await stores.claims.get({ session, functionCallId: "c-cut" })).toMatchObject({
      receipt: { status: "dispatched" },
    });
  });
});
