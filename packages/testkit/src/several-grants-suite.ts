import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  createKernel,
  InProcessTransport,
  type Kernel,
  messageSendCapability,
  type StoreBundle,
  verifyAuditChain,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import type { ProcessSpec } from "./factory.js";

const WORKER = fileURLToPath(new URL("./several-grants-worker.js", import.meta.url));
const NS = "ns";
const CTX = { namespaceId: NS, actor: "asker", authority: "host", owner: "alice", traceId: "t" };

/** Fresh, empty stores, and how another OS process opens the very same ones. */
export interface SeveralGrantsStores {
  readonly stores: StoreBundle;
  /** Absent: the cross-process case is skipped. */
  readonly processSpec?: ProcessSpec;
  close(): Promise<void>;
}

async function issue(stores: StoreBundle, grants: number, uses: number): Promise<string[]> {
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

function kernelOver(stores: StoreBundle): Kernel {
  return createKernel({
    grants: stores.grants,
    usage: stores.usage,
    audit: stores.audit,
    acts: stores.acts,
    transport: InProcessTransport.echo(),
  });
}

/** One worker process: `sends` messages at once; the grants that delivered. */
function sendFrom(spec: ProcessSpec, worker: number, sends: number): Promise<string[]> {
  const job = JSON.stringify({ spec, worker, sends });
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [WORKER, job], { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`worker ${worker} failed: ${stderr || error.message}`));
      else resolve((JSON.parse(stdout) as { delivered: string[] }).delivered);
    });
  });
}

/**
 * Several bounded grants on one resource, acts in flight at once, through a kernel over a
 * bundle whose act ledger `undoesLostSpends`: every use is delivered, none twice, the acts
 * that lost a spend leave nothing behind, and a call with no use left anywhere is refused
 * once. In one process (one turn, sends at once; retry-safe sends with a claim each) and
 * across OS processes, several rounds. A ledger without the capability fails the first case.
 */
export function describeSeveralGrantsRace(
  name: string,
  open: (() => Promise<SeveralGrantsStores>) | undefined,
): void {
  const withStores = async (body: (opened: SeveralGrantsStores) => Promise<void>) => {
    const opened = await (open as () => Promise<SeveralGrantsStores>)();
    try {
      await body(opened);
    } finally {
      await opened.close();
    }
  };

  describe.skipIf(open === undefined)(
    `several bounded grants on one resource, acts in flight at once: ${name}`,
    () => {
      it("15 sends at once on five grants of three uses: all 15 delivered, one use each", () =>
        withStores(async ({ stores }) => {
          expect(stores.acts?.undoesLostSpends).toBe(true);
          const ids = await issue(stores, 5, 3);
          const kernel = kernelOver(stores);
          const turn = await kernel.openTurnAuthority(CTX);
          const results = await Promise.all(
            Array.from({ length: 15 }, (_, i) =>
              turn.sendMessage({ recipient: "bob", payload: i, callId: `c-${i}` }),
            ),
          );
          expect(results.map((result) => result.status)).toEqual(Array(15).fill("delivered"));
          const spent = results.map((result) =>
            result.status === "delivered" ? result.grantId : "",
          );
          for (const id of ids) {
            expect(spent.filter((grantId) => grantId === id)).toHaveLength(3);
            expect(await stores.usage.getUsage(NS, id)).toBe(3);
          }
          // No use left anywhere: refused (the tool hidden now), and recorded so.
          const last = await turn.sendMessage({ recipient: "bob", payload: 15, callId: "c-15" });
          expect(last).toMatchObject({ status: "denied", code: "tool_unavailable" });
          await turn.close();
          await kernel.drain?.();
          const events = await stores.audit.read();
          // One event per send: the attempts that lost wrote nothing.
          expect(events).toHaveLength(16);
          expect(events.filter((event) => event.outcome === "allowed")).toHaveLength(15);
          expect(verifyAuditChain(events).ok).toBe(true);
        }));

      it("retry-safe sends, a claim each, on three grants of two uses: six delivered, two refused, one claim per call ID", () =>
        withStores(async ({ stores }) => {
          const ids = await issue(stores, 3, 2);
          const kernel = kernelOver(stores);
          const turn = await kernel.openTurnAuthority(CTX);
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
          // Allowed ones wait for the host's settle; the refused ones were settled by their act.
          for (let i = 0; i < 8; i++) {
            const claim = await stores.claims.get({ session: "svc", functionCallId: `r-${i}` });
            expect(claim).toBeDefined();
            const delivered = results[i]?.status === "delivered";
            expect(claim?.receipt?.status).toBe(delivered ? undefined : "denied");
          }
          await turn.close();
        }));

      it("4 OS processes × 10 sends at once on 8 grants of 4 uses, three rounds: exactly 32 delivered each round", async () => {
        for (let round = 0; round < 3; round++) {
          await withStores(async ({ stores, processSpec }) => {
            if (processSpec === undefined) return;
            const ids = await issue(stores, 8, 4);
            const delivered = (
              await Promise.all(
                Array.from({ length: 4 }, (_, worker) => sendFrom(processSpec, worker, 10)),
              )
            ).flat();
            expect(delivered).toHaveLength(32);
            for (const id of ids) {
              expect(delivered.filter((grantId) => grantId === id)).toHaveLength(4);
              expect(await stores.usage.getUsage(NS, id)).toBe(4);
            }
            const events = await stores.audit.read();
            expect(events.filter((event) => event.outcome === "allowed")).toHaveLength(32);
            // Eight refusals, one event each, however many grants each tried first.
            expect(events.filter((event) => event.outcome === "denied")).toHaveLength(8);
            expect(verifyAuditChain(events).ok).toBe(true);
          });
        }
      }, 120_000);
    },
  );
}
