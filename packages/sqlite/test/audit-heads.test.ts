/**
 * The audit sink remembers each stream's head and links to it without reading it back. Those
 * remembered heads are only hints: another connection moving the head, or a group-commit batch
 * rolled back after an append was linked, must never leave a gap or a fork in the chain.
 */
import { type AuditEvent, verifyAuditChain } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { auditEvent } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, expect, it } from "vitest";
import { freshFile } from "./helpers.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function twoConnections() {
  const file = freshFile();
  const first = await openStores(`sqlite:${file.path}`);
  const second = await openStores(`sqlite:${file.path}`);
  cleanups.push(
    file.dispose,
    () => first.close(),
    () => second.close(),
  );
  return { path: file.path, first, second };
}

/** One stream: the same namespace for every event. */
const event = (i: number, overrides: Partial<AuditEvent> = {}) =>
  auditEvent(i, { namespaceId: "team", ...overrides });

it("links after the head another connection wrote, not after the one it remembers", async () => {
  const { first, second } = await twoConnections();
  await first.audit.append(event(0));
  await first.audit.append(event(1));
  // The first connection now remembers seq 2; the second moves the head on to 4.
  await second.audit.append(event(2));
  await second.audit.append(event(3));
  await first.audit.append(event(4));
  await second.audit.append(event(5));
  const trail = await first.audit.read();
  expect(trail.map((e) => e.callId)).toEqual([0, 1, 2, 3, 4, 5].map((i) => `call-${i}`));
  expect(trail.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
  expect(verifyAuditChain(trail)).toMatchObject({ ok: true });
});

it("after a batch rolled back, links after the head as committed", async () => {
  const { path, first } = await twoConnections();
  await first.audit.append(event(0));
  // A write the driver refuses (as a full disk would), in the same batch as a good append.
  const raw = new BetterSqlite3(path);
  cleanups.push(() => {
    raw.close();
  });
  raw.exec(`CREATE TRIGGER refuse_boom BEFORE INSERT ON tessera_audit
    WHEN NEW.call_id = 'boom' BEGIN SELECT RAISE(ABORT, 'disk full'); END`);
  // The first write of a tick runs alone; the two after it share one batch (group-commit.ts).
  const together = await Promise.allSettled([
    first.audit.append(event(1)),
    first.audit.append(event(2)),
    first.audit.append(event(3, { callId: "boom" })),
  ]);
  expect(together.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected"]);
  // event 2 was linked at seq 3 and remembered, then rolled back with its batch.
  await first.audit.append(event(4));
  const trail = await first.audit.read();
  expect(trail.map((e) => e.callId)).toEqual(["call-0", "call-1", "call-4"]);
  expect(trail.map((e) => e.seq)).toEqual([1, 2, 3]);
  expect(verifyAuditChain(trail)).toMatchObject({ ok: true });
});
