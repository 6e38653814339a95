import { randomUUID } from "node:crypto";
import { a2uiFunctionCapability, openStores, type StoreBundle } from "@tessera/core";
import { serviceUrl } from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeRun } from "../../../test/support/scratch-stores.js";
import {
  type ServeProcess,
  serveProcess,
  serviceFiles,
  startReceiver,
} from "./support/processes.js";
import { a2uiCall, CATALOG, CATALOG_ID, call, principal, ticket } from "./support/service.js";

/**
 * Two `tessera serve` processes sharing one store (PostgreSQL, then Redis): one delivery per
 * ticket and per call ID, one dispatch per A2UI call, across both; and a restart mid-load.
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});
const RECIPIENTS = Array.from({ length: 40 }, (_, i) => `colleague-${i}`);

const backends = [
  [
    "PostgreSQL",
    serviceUrl("TESSERA_PG_URL"),
    (url: string, run: string) => `${url}?schema=${run}`,
    "schema",
  ],
  [
    "Redis",
    serviceUrl("TESSERA_REDIS_URL"),
    (url: string, run: string) => `${url}?prefix=${run}:`,
    "prefix",
  ],
] as const;

for (const [name, url, scoped, kind] of backends) {
  describe.skipIf(url === undefined)(`two tessera serve processes sharing ${name}`, () => {
    const run = `serve_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const storeUrl = scoped(url ?? "", run);
    let stores: StoreBundle;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let files: string[];
    const served: ServeProcess[] = [];
    const start = async () => {
      const p = await serveProcess(["--store", storeUrl, ...files]);
      served.push(p);
      return p;
    };

    beforeAll(async () => {
      stores = await openStores(storeUrl);
      for (const r of RECIPIENTS) await stores.grants.add(ticket(`t-${r}`, r));
      // The A2UI calls below are decided too: alice may call `add`, without bound.
      await stores.grants.add({
        id: "a2ui-add",
        namespaceId: "team",
        issuer: "host",
        subject: "asker",
        capabilities: [a2uiFunctionCapability(CATALOG_ID, "add")],
        issuedAt: new Date(Date.now() - 60_000).toISOString(),
      });
      receiver = await startReceiver();
      files = serviceFiles(receiver.base, [alice.config], RECIPIENTS, CATALOG);
    }, 30_000);

    afterAll(async () => {
      try {
        await Promise.all(served.map((p) => p.stop(2000)));
        await receiver?.close();
        await stores?.close();
      } finally {
        // The run's schema or keys (audit streams never expire); a failure here fails the file.
        await removeRun(kind, url ?? "", run);
      }
    });

    const send = (base: string, recipient: string, callId: string) =>
      call(base, "POST", "/v1/messages", {
        token: alice.token,
        body: { recipient, payload: { n: callId }, callId },
      });

    it("deliver one ticket once when both are asked at once", async () => {
      const [a, b] = [await start(), await start()];
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          send(i % 2 ? a.url : b.url, "colleague-0", `c-t-${i}`),
        ),
      );
      expect(answers.filter((x) => x.body.status === "delivered")).toHaveLength(1);
      expect(answers.every((x) => x.status === 200)).toBe(true);
      expect(receiver.deliveries.filter((c) => c.startsWith("c-t-"))).toHaveLength(1);
    }, 60_000);

    it("deliver one call ID once when both are asked at once, and answer both alike", async () => {
      const [a, b] = served;
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          send((i % 2 ? a : b)?.url ?? "", "colleague-1", "c-same"),
        ),
      );
      expect(answers.map((x) => x.status)).toEqual(Array(6).fill(200));
      expect(new Set(answers.map((x) => JSON.stringify(x.body))).size).toBe(1);
      expect(answers[0]?.body.status).toBe("delivered");
      expect(receiver.deliveries.filter((c) => c === "c-same")).toHaveLength(1);
    }, 60_000);

    it("dispatch one A2UI call once when both claim it at once", async () => {
      const [a, b] = served;
      const claims = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          call((i % 2 ? a : b)?.url ?? "", "POST", "/v1/a2ui/claim", {
            token: alice.token,
            body: { message: a2uiCall("fc-race") },
          }),
        ),
      );
      const dispatched = claims.filter((c) => c.body.status === "dispatch");
      expect(dispatched).toHaveLength(1);
      expect(claims.filter((c) => c.body.status === "refused")).toHaveLength(5);
      const calls = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          call((i % 2 ? a : b)?.url ?? "", "POST", "/v1/a2ui/call", {
            token: alice.token,
            body: { message: a2uiCall("fc-one-step") },
          }),
        ),
      );
      expect(calls.filter((c) => c.body.receipt === "dispatched")).toHaveLength(1);
      expect(receiver.functionCalls.filter((f) => f === "fc-one-step")).toHaveLength(1);
    }, 60_000);

    it("survive a restart mid-load: nothing spent or dispatched twice, every answer in audit", async () => {
      const victim = served[0] as ServeProcess;
      const load = RECIPIENTS.slice(2).map((recipient, i) => ({
        recipient,
        callId: `c-load-${i}`,
      }));
      const answered = new Map<string, { status: number; body: { status?: string } }>();
      const sending = load.map(async ({ recipient, callId }, i) => {
        await new Promise((resolve) => setTimeout(resolve, i * 5));
        try {
          answered.set(callId, await send(victim.url, recipient, callId));
        } catch {
          // the connection died with the server: retried below
        }
      });
      const a2uiSending = Array.from({ length: 10 }, async (_, i) => {
        await new Promise((resolve) => setTimeout(resolve, i * 8));
        await call(victim.url, "POST", "/v1/a2ui/call", {
          token: alice.token,
          body: { message: a2uiCall(`fc-load-${i}`) },
        }).catch(() => undefined);
      });
      await new Promise((resolve) => setTimeout(resolve, 60));
      await victim.stop(300); // SIGTERM, then SIGKILL if it has not stopped
      await Promise.all([...sending, ...a2uiSending]);
      const again = await start();
      const inDoubt: string[] = [];
      for (const { recipient, callId } of load) {
        const retry = await send(again.url, recipient, callId);
        const first = answered.get(callId);
        // An answer is kept after its reply: a server killed before the write leaves the call
        // in doubt (409), never decided again; otherwise the retry gets the answer as first given.
        if (first?.status === 200 && retry.status === 200) expect(retry.body).toEqual(first.body);
        else expect([200, 409]).toContain(retry.status);
        if (retry.status === 409) {
          expect(retry.body.error.code).toBe("call_in_progress");
          inDoubt.push(callId);
        }
      }
      // A call the killed instance left between claim and answer is listed, never re-decided.
      const listed = await call(again.url, "GET", "/v1/claims/in-doubt", { token: alice.token });
      const ids = listed.body.claims.map((c: { functionCallId: string }) => c.functionCallId);
      for (const callId of inDoubt) expect(ids).toContain(callId);
      // Nothing twice: one delivery per call ID, one use per ticket, one run per A2UI call.
      const counts = new Map<string, number>();
      for (const c of receiver.deliveries) counts.set(c, (counts.get(c) ?? 0) + 1);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      for (const { recipient } of load) {
        expect(await stores.usage.getUsage("team", `t-${recipient}`)).toBeLessThanOrEqual(1);
      }
      const runs = receiver.functionCalls.filter((f) => f.startsWith("fc-load-"));
      expect(new Set(runs).size).toBe(runs.length);
      // Every decision that returned is in audit.
      for (const [callId, answer] of answered) {
        if (answer.status !== 200) continue;
        const events = await stores.audit.read({ callId });
        expect(events.length, callId).toBeGreaterThanOrEqual(1);
      }
    }, 90_000);
  });
}
