/**
 * Several bounded grants on one resource, acts in flight at once. The SQLite ledger undoes an
 * act whose spend lost (`ActLedger.undoesLostSpends`), so the kernel decides such an act again
 * on the next grant instead of refusing it while another grant has uses: every use is
 * delivered, none twice, and the attempts that lost leave nothing behind. Before, 15 sends at
 * once on five grants of three uses delivered 6 and refused 9.
 */
import {
  createKernel,
  InProcessTransport,
  type Kernel,
  messageSendCapability,
  verifyAuditChain,
} from "@tessera/core";
import { openStores, type SqliteStores } from "@tessera/sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { freshFile, runScript } from "./helpers.js";

const NS = "ns";
const ctx = { namespaceId: NS, actor: "asker", authority: "host", owner: "alice", traceId: "t" };

async function issue(stores: SqliteStores, grants: number, uses: number): Promise<string[]> {
  const ids = Array.from({ length: grants }, (_, i) => `ticket-${i}`);
  for (const id of ids) {
    await stores.grants.add({
      id,
      namespaceId: NS,
      issuer: "host",
      subject: "asker",
      capabilities: [messageSendCapability("bob", "alice")],
      constraints: { maxUses: uses },
      issuedAt: "2026-01-01T00:00:00.000Z",
    });
  }
  return ids;
}

function kernelOver(stores: SqliteStores): Kernel {
  return createKernel({
    grants: stores.grants,
    usage: stores.usage,
    audit: stores.audit,
    acts: stores.acts,
    transport: InProcessTransport.echo(),
  });
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function fresh(): Promise<{ path: string; stores: SqliteStores }> {
  const file = freshFile();
  const stores = await openStores(`sqlite:${file.path}`);
  cleanups.push(async () => {
    await stores.close();
    file.dispose();
  });
  return { path: file.path, stores };
}

describe("several bounded grants on one resource, acts in flight at once (SQLite)", () => {
  it("15 sends at once on five grants of three uses: all 15 delivered, one use each", async () => {
    const { stores } = await fresh();
    const ids = await issue(stores, 5, 3);
    const kernel = kernelOver(stores);
    const turn = await kernel.openTurnAuthority(ctx);
    const sends = Array.from({ length: 15 }, (_, i) =>
      turn.sendMessage({ recipient: "bob", payload: i, callId: `c-${i}` }),
    );
    const results = await Promise.all(sends);
    expect(results.map((result) => result.status)).toEqual(Array(15).fill("delivered"));
    const spent = results.map((result) => (result.status === "delivered" ? result.grantId : ""));
    for (const id of ids) {
      expect(spent.filter((grantId) => grantId === id)).toHaveLength(3);
      expect(await stores.usage.getUsage(NS, id)).toBe(3);
    }
    // The sixteenth finds every use gone: refused (the tool hidden now that no ticket has a
    // use left), and recorded so.
    const last = await turn.sendMessage({ recipient: "bob", payload: 15, callId: "c-15" });
    expect(last).toMatchObject({ status: "denied", code: "tool_unavailable" });
    await turn.close();
    await kernel.drain?.();
    const events = await stores.audit.read();
    // One event per send: the attempts that lost wrote nothing.
    expect(events).toHaveLength(16);
    expect(events.filter((event) => event.outcome === "allowed")).toHaveLength(15);
    expect(verifyAuditChain(events).ok).toBe(true);
  });

  it("retry-safe sends (a claim each) racing on three grants: every use delivered, no claim left behind by a lost attempt", async () => {
    const { stores } = await fresh();
    const ids = await issue(stores, 3, 2);
    const kernel = kernelOver(stores);
    const turn = await kernel.openTurnAuthority(ctx);
    const claimFor = (i: number) => ({
      claim: {
        key: { session: "svc", functionCallId: `r-${i}` },
        record: { bodyHash: "b".repeat(64), claimedAt: 1_780_000_000_000 + i },
      },
    });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        turn.sendMessage({ recipient: "bob", payload: i, callId: `r-${i}` }, claimFor(i)),
      ),
    );
    const statuses = results.map((result) => result.status);
    expect(statuses.filter((status) => status === "delivered")).toHaveLength(6);
    expect(statuses.filter((status) => status === "denied")).toHaveLength(2);
    for (const id of ids) expect(await stores.usage.getUsage(NS, id)).toBe(2);
    // Each call ID has exactly one claim: allowed ones open (the host settles them), the two
    // refused ones settled `denied` by their act.
    for (let i = 0; i < 8; i++) {
      const claim = await stores.claims.get({ session: "svc", functionCallId: `r-${i}` });
      expect(claim).toBeDefined();
      const delivered = results[i]?.status === "delivered";
      expect(claim?.receipt?.status).toBe(delivered ? undefined : "denied");
    }
    await turn.close();
  });

  it("4 OS processes × 10 sends at once on 8 grants of 4 uses, three rounds: exactly 32 delivered each round, no use spent twice", async () => {
    for (let round = 0; round < 3; round++) {
      const { path, stores } = await fresh();
      const ids = await issue(stores, 8, 4);
      const outputs = await Promise.all(
        Array.from({ length: 4 }, (_, worker) => runScript(WORKER, [path, String(worker)])),
      );
      const delivered = outputs.map((out) => JSON.parse(out) as { delivered: string[] });
      const all = delivered.flatMap((worker) => worker.delivered);
      expect(all).toHaveLength(32);
      for (const id of ids) {
        expect(all.filter((grantId) => grantId === id)).toHaveLength(4);
        expect(await stores.usage.getUsage(NS, id)).toBe(4);
      }
      const events = await stores.audit.read();
      expect(events.filter((event) => event.outcome === "allowed")).toHaveLength(32);
      // Eight refusals, one event each (a send that lost the race twice still has one).
      expect(events.filter((event) => event.outcome === "denied")).toHaveLength(8);
      expect(verifyAuditChain(events).ok).toBe(true);
    }
  }, 120_000);
});

/** One process: a kernel over the file, ten sends at once, the grants that were spent. */
const WORKER = `
import { createKernel, InProcessTransport } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
const [path, worker] = process.argv.slice(1);
const stores = await openStores("sqlite:" + path + "?busyTimeoutMs=60000");
const kernel = createKernel({
  grants: stores.grants, usage: stores.usage, audit: stores.audit, acts: stores.acts,
  transport: InProcessTransport.echo(),
});
const turn = await kernel.openTurnAuthority({
  namespaceId: "ns", actor: "asker", authority: "host", owner: "alice", traceId: "w" + worker,
});
const results = await Promise.all(Array.from({ length: 10 }, (_, i) =>
  turn.sendMessage({ recipient: "bob", payload: i, callId: "w" + worker + "-" + i })));
await turn.close();
await kernel.drain();
await stores.close();
process.stdout.write(JSON.stringify({
  delivered: results.filter((r) => r.status === "delivered").map((r) => r.grantId),
}));
`;
