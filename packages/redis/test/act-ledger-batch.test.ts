/**
 * The Redis act ledger at the driver: the exact number of commands it sends (one script per
 * batch of acts in flight, counted where ioredis writes), the chain of many concurrent acts
 * from two processes' worth of ledgers, and the fault of the issue: the connection cut by the
 * test's TCP proxy (and `CLIENT KILL`) under load leaves whole acts or none, and every retry
 * after recovery gets a decision.
 */
import { type Act, type ActResult, verifyAuditChain } from "@tessera/core";
import { actEvent, serviceUrl, spendingAct } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import type { RedisActLedger } from "../src/act-ledger.js";
import type { Connection } from "../src/connection.js";
import {
  killOwnClients,
  openOwnLedger,
  openTestStores,
  type TestStores,
  waitUntilAnswering,
} from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;
const NS = "ns-acts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Ledger {
  readonly opened: TestStores;
  readonly connection: Connection;
  readonly ledger: RedisActLedger;
}

/**
 * A ledger on a connection of its own, through the test's proxy and under its connection
 * name (so the outage cuts it too), over a fresh prefix the test's stores read back.
 */
async function openLedger(opened?: TestStores): Promise<Ledger> {
  const stores = opened ?? (await openTestStores(url as string));
  if (opened === undefined) cleanups.push(stores.close);
  const { connection, ledger } = await openOwnLedger(stores);
  cleanups.push(() => connection.close());
  return { opened: stores, connection, ledger };
}

/** Records `acts` all in one tick and counts what the driver sent for them. */
async function counted(
  { connection, ledger }: Ledger,
  acts: readonly Act[],
): Promise<{ results: ActResult[]; sent: number; scripts: number }> {
  connection.sent.reset();
  const results = await Promise.all(acts.map((act) => ledger.record(act)));
  return { results, sent: connection.sent.total, scripts: connection.sent.of("evalsha") };
}

suite("redis act ledger: one script per batch", () => {
  it("a lone act is one EVALSHA; N acts in flight one per batch of 128; nothing else is sent", async () => {
    const l = await openLedger();
    // Load the script once (a server that does not know it answers NOSCRIPT, then EVAL).
    await l.ledger.record({ event: { ...actEvent("warm"), namespaceId: "warm" } });

    const lone = await counted(l, [spendingAct("one", "ticket", 10_000)]);
    expect(lone.results).toEqual([{ status: "recorded", recorded: "event", used: 1 }]);
    expect([lone.sent, lone.scripts]).toEqual([1, 1]);

    const hundred = Array.from({ length: 100 }, (_, i) => spendingAct(`h-${i}`, "ticket", 10_000));
    const batch = await counted(l, hundred);
    expect(batch.results.every((r) => r.status === "recorded" && r.recorded === "event")).toBe(
      true,
    );
    expect([batch.sent, batch.scripts]).toEqual([1, 1]);

    const many = Array.from({ length: 300 }, (_, i) => spendingAct(`m-${i}`, "ticket", 10_000));
    const three = await counted(l, many);
    expect(three.results.filter((r) => r.status === "recorded")).toHaveLength(300);
    expect([three.sent, three.scripts]).toEqual([3, 3]);
    expect(await l.opened.stores.usage.getUsage(NS, "ticket")).toBe(401);

    // A denial, with a claim and without: one script each, and together one.
    const denials: Act[] = [
      {
        claim: {
          key: { session: "s", functionCallId: "d-1" },
          record: { bodyHash: "d".repeat(64), claimedAt: 1 },
        },
        event: actEvent("d-1", "no_matching_grant"),
      },
      { event: actEvent("d-2", "no_matching_grant") },
    ];
    for (const denial of denials) {
      expect((await counted(l, [denial])).sent).toBe(1);
    }
    // 64 acts on one call ID in one tick: the first is sent, the others read its claim.
    const same = await counted(
      l,
      Array.from({ length: 64 }, () => spendingAct("same", "t", 100)),
    );
    expect(same.results.filter((r) => r.status === "already_claimed")).toHaveLength(63);
    expect([same.sent, same.scripts]).toEqual([1, 1]);
    // A retry of a recorded call ID: one script, nothing written.
    const retry = await counted(l, [spendingAct("one", "ticket", 10_000)]);
    expect(retry.results[0]?.status).toBe("already_claimed");
    expect(retry.sent).toBe(1);

    const trail = await l.opened.stores.audit.read();
    expect(trail).toHaveLength(1 + 1 + 100 + 300 + 2 + 1);
    expect(verifyAuditChain(trail).ok).toBe(true);
  });

  it("two ledgers (two connections) racing on one stream and one bounded ticket: exact bound, one chain", async () => {
    const a = await openLedger();
    const b = await openLedger(a.opened);
    const act = (i: number) => spendingAct(`race-${i}`, "bounded", 50);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).ledger.record(act(i))),
    );
    expect(results.every((r) => r.status === "recorded")).toBe(true);
    const won = results.filter((r) => r.status === "recorded" && r.recorded === "event");
    expect(won).toHaveLength(50);
    expect(await a.opened.stores.usage.getUsage(NS, "bounded")).toBe(50);
    const trail = await a.opened.stores.audit.read();
    expect(trail).toHaveLength(200);
    expect(trail.filter((e) => e.outcome === "allowed")).toHaveLength(50);
    expect(verifyAuditChain(trail).ok).toBe(true);
  });

  it("a connection cut mid-load: no claim or spend without its event, and every retry gets a decision", async () => {
    const l = await openLedger();
    const { stores, proxy } = l.opened;
    const TOTAL = 400;
    const failed = new Set<number>();
    const recorded = new Set<number>();
    let next = 0;
    let cut = false;
    const act = (i: number) => spendingAct(`f-${i}`, `g-${i}`, 1);
    const worker = async () => {
      while (next < TOTAL) {
        const i = next++;
        if (i === 120 && !cut) {
          cut = true;
          // Cut with acts in flight: the proxy drops the sockets, the server kills the client.
          proxy.interrupt();
          void killOwnClients(url as string, l.opened.connectionName).finally(() =>
            setTimeout(() => proxy.restore(), 150),
          );
        }
        try {
          if ((await l.ledger.record(act(i))).status === "recorded") recorded.add(i);
        } catch (error) {
          // The code of the act's first port, as a composition of the ports would fail.
          expect(error).toMatchObject({ code: "claim_store_unavailable" });
          failed.add(i);
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    expect(failed.size).toBeGreaterThan(0);
    expect(recorded.size).toBeGreaterThan(0);
    await waitUntilAnswering(() => stores.claims.get({ session: "p", functionCallId: "p" }));
    await waitUntilAnswering(() => l.ledger.record({ event: actEvent("probe") }));

    const trail = await stores.audit.read();
    const events = new Map<string, number>();
    for (const event of trail) events.set(event.callId, (events.get(event.callId) ?? 0) + 1);
    for (let i = 0; i < TOTAL; i++) {
      const claim = await stores.claims.get({ session: "s", functionCallId: `f-${i}` });
      const used = await stores.usage.getUsage(NS, `g-${i}`);
      const whole = claim === undefined ? [false, 0, 0] : [true, 1, 1];
      expect([claim !== undefined, events.get(`f-${i}`) ?? 0, used]).toEqual(whole);
      if (recorded.has(i)) expect(claim).toBeDefined();
      // A retry is decided: recorded now, or the earlier act's claim handed back.
      const retry = await l.ledger.record(act(i));
      expect(retry.status).toBe(claim === undefined ? "recorded" : "already_claimed");
    }
    const after = await stores.audit.read();
    expect(verifyAuditChain(after).ok).toBe(true);
    expect(after.filter((e) => e.callId.startsWith("f-"))).toHaveLength(TOTAL);
  });
});
