/**
 * The Redis act ledger's `withdraw` at the driver: one script whatever it answers; linked
 * again when another ledger moved the stream's head; the claim's TTL kept; and the fault it
 * exists for, end to end: a script that ran but whose reply was lost (a proxy drops the
 * connection when the reply comes back) is withdrawn, and a withdrawal whose own reply was
 * lost is kept when sent again; acts cut off by an outage are each withdrawn (they had
 * landed) or not recorded (they had not), and either way the store ends whole.
 */
import net from "node:net";
import { verifyAuditChain } from "@tessera/core";
import { serviceUrl, spendingAct, withdrawalOf } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { RedisActLedger } from "../src/act-ledger.js";
import { claimKeyOf } from "../src/claim-store.js";
import { parseRedisUrl } from "../src/config.js";
import { Connection } from "../src/connection.js";
import {
  admin,
  killOwnClients,
  openTestStores,
  type TestStores,
  waitUntilAnswering,
  withParams,
} from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;
const NS = "ns-acts";
const key = (id: string) => ({ session: "s", functionCallId: id });

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * A forwarder that, once armed, lets the next command through and drops the connection when
 * its reply comes back: the server ran it, the client never hears (`maxRetriesPerRequest` 0,
 * so nothing is re-sent). The reply lost after a commit, as seen on Redis after kill -9.
 */
async function replyLosingProxy(target: URL) {
  let armed = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.on("data", (chunk: Buffer) => {
      if (armed) {
        armed = false;
        drop();
      } else client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    loseNextReply: () => {
      armed = true;
    },
  };
}

interface Ledger {
  readonly opened: TestStores;
  readonly connection: Connection;
  readonly ledger: RedisActLedger;
  readonly ttlMs: number;
}

/** A ledger on a connection of its own, through the test's proxy, over the test's prefix. */
async function openLedger(opened?: TestStores, via?: string): Promise<Ledger> {
  const stores = opened ?? (await openTestStores(url as string));
  if (opened === undefined) cleanups.push(stores.close);
  const config = parseRedisUrl(
    withParams(`redis://${via ?? stores.proxy.address}`, {
      prefix: stores.prefix,
      name: stores.connectionName,
      commandTimeoutMs: "20000",
    }),
  );
  const connection = new Connection(config);
  await connection.connect("store_unavailable");
  cleanups.push(() => connection.close());
  const ledger = new RedisActLedger(connection, config.claimTtlMs);
  return { opened: stores, connection, ledger, ttlMs: config.claimTtlMs };
}

suite("redis act ledger: withdraw", () => {
  it("one EVALSHA whatever it answers; the claim keeps its TTL", async () => {
    const l = await openLedger();
    // Load the script once (a server that does not know it answers NOSCRIPT, then EVAL).
    expect(await l.ledger.withdraw(withdrawalOf(spendingAct("warm")))).toBe("not_recorded");
    const act = spendingAct("one", "ticket", 5);
    await l.ledger.record(act);
    for (const expected of ["withdrawn", "kept", "not_recorded"] as const) {
      const target = expected === "not_recorded" ? spendingAct("never") : act;
      l.connection.sent.reset();
      expect(await l.ledger.withdraw(withdrawalOf(target))).toBe(expected);
      expect([l.connection.sent.total, l.connection.sent.of("evalsha")]).toEqual([1, 1]);
    }
    const ttl = await admin(url as string, (redis) =>
      redis.pttl(claimKeyOf(l.connection, key("one"))),
    );
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(l.ttlMs);
    expect(await l.opened.stores.usage.getUsage(NS, "ticket")).toBe(0);
  });

  it("another ledger moved the stream's head: linked again, one chain", async () => {
    const a = await openLedger();
    const b = await openLedger(a.opened);
    const act = spendingAct("a-1", "ticket", 10);
    await a.ledger.record(act);
    for (let i = 0; i < 3; i++) await b.ledger.record(spendingAct(`b-${i}`, "ticket", 10));
    a.connection.sent.reset();
    expect(await a.ledger.withdraw(withdrawalOf(act))).toBe("withdrawn");
    // The stale head costs one more script, no more.
    expect(a.connection.sent.of("evalsha")).toBe(2);
    // And b, whose memory is stale now, links its next act after the withdrawal.
    await b.ledger.record(spendingAct("b-3", "ticket", 10));
    const trail = await a.opened.stores.audit.read();
    expect(trail.map((event) => [event.callId, event.seq])).toEqual([
      ["a-1", 1],
      ["b-0", 2],
      ["b-1", 3],
      ["b-2", 4],
      ["a-1", 5],
      ["b-3", 6],
    ]);
    expect(verifyAuditChain(trail).ok).toBe(true);
    expect(await a.opened.stores.usage.getUsage(NS, "ticket")).toBe(4);
  });

  it("a script that ran with its reply lost: the act is withdrawn; a lost withdrawal is kept", async () => {
    const opened = await openTestStores(url as string);
    cleanups.push(opened.close);
    const proxy = await replyLosingProxy(new URL(url as string));
    const l = await openLedger(opened, proxy.address);
    const { stores } = opened;
    // Load both scripts first, so the lost reply is the script's own, not a NOSCRIPT.
    await l.ledger.record(spendingAct("warm", "warm"));
    await l.ledger.withdraw(withdrawalOf(spendingAct("warm", "warm")));
    const state = async (id: string, grant: string) => ({
      receipt: (await stores.claims.get(key(id)))?.receipt?.status,
      events: (await stores.audit.read({ callId: id })).map((event) => event.reason),
      used: await stores.usage.getUsage(NS, grant),
    });

    const act = spendingAct("lost-1", "lost");
    proxy.loseNextReply();
    await expect(l.ledger.record(act)).rejects.toMatchObject({ code: "claim_store_unavailable" });
    // It landed: claim open, use spent, allowed event.
    expect(await state("lost-1", "lost")).toEqual({
      receipt: undefined,
      events: ["allowed"],
      used: 1,
    });
    await waitUntilAnswering(() => l.ledger.withdraw(withdrawalOf(spendingAct("probe"))));
    expect(await l.ledger.withdraw(withdrawalOf(act))).toBe("withdrawn");
    const withdrawn = { receipt: "failed", events: ["allowed", "act_withdrawn"], used: 0 };
    expect(await state("lost-1", "lost")).toEqual(withdrawn);

    // The withdrawal's own reply lost: it was written whole; sent again, it is kept.
    const second = spendingAct("lost-2", "lost");
    await l.ledger.record(second);
    proxy.loseNextReply();
    await expect(l.ledger.withdraw(withdrawalOf(second))).rejects.toMatchObject({
      code: "claim_store_unavailable",
    });
    expect(await state("lost-2", "lost")).toEqual(withdrawn);
    await waitUntilAnswering(() => l.ledger.withdraw(withdrawalOf(spendingAct("probe"))));
    expect(await l.ledger.withdraw(withdrawalOf(second))).toBe("kept");
    expect(await state("lost-2", "lost")).toEqual(withdrawn);
    expect(verifyAuditChain(await stores.audit.read()).ok).toBe(true);
  });

  it("acts whose reply was lost to a cut are withdrawn or not recorded, and end whole", async () => {
    const l = await openLedger();
    const { stores, proxy } = l.opened;
    const TOTAL = 200;
    const failed = new Set<number>();
    let next = 0;
    let cut = false;
    const act = (i: number) => spendingAct(`f-${i}`, `g-${i}`, 1);
    const worker = async () => {
      while (next < TOTAL) {
        const i = next++;
        if (i === 60 && !cut) {
          cut = true;
          proxy.interrupt();
          void killOwnClients(url as string, l.opened.connectionName).finally(() =>
            setTimeout(() => proxy.restore(), 150),
          );
        }
        try {
          await l.ledger.record(act(i));
        } catch (error) {
          expect(error).toMatchObject({ code: "claim_store_unavailable" });
          failed.add(i);
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    expect(failed.size).toBeGreaterThan(0);
    await waitUntilAnswering(() => l.ledger.withdraw(withdrawalOf(spendingAct("probe"))));
    // The reads below go through the stores' own connection, which reconnects on its own
    // backoff: waiting for the ledger's alone raced it on a loaded machine (a CI run's
    // "Stream isn't writeable" at the first read).
    await waitUntilAnswering(() => stores.claims.get(key("probe")));

    const answers = { withdrawn: 0, not_recorded: 0, kept: 0 };
    for (const i of failed) {
      const landed = (await stores.claims.get(key(`f-${i}`))) !== undefined;
      const result = await l.ledger.withdraw(withdrawalOf(act(i)));
      answers[result]++;
      expect(result).toBe(landed ? "withdrawn" : "not_recorded");
      const events = await stores.audit.read({ callId: `f-${i}` });
      expect({
        receipt: (await stores.claims.get(key(`f-${i}`)))?.receipt?.status,
        events: events.map((event) => event.reason),
        used: await stores.usage.getUsage(NS, `g-${i}`),
      }).toEqual(
        landed
          ? { receipt: "failed", events: ["allowed", "act_withdrawn"], used: 0 }
          : { receipt: undefined, events: [], used: 0 },
      );
    }
    expect(answers.kept).toBe(0);
    expect(answers.withdrawn + answers.not_recorded).toBe(failed.size);
    expect(verifyAuditChain(await stores.audit.read()).ok).toBe(true);
  });
});
