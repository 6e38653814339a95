/**
 * The SQLite act ledger: the conformance suite (the file moved away and back as its outage),
 * the exact number of commits an act costs, counted at the driver (one per batch: an act
 * alone, 50 acts started in one tick), all or nothing when the write lock is held by another
 * writer past the busy timeout or a statement of the act fails midway, and one chain for
 * many acts in flight beside plain appends.
 */
import { type Act, isTesseraError, verifyAuditChain } from "@tessera/core";
import {
  actEvent,
  describeActLedgerConformance,
  type OpenedStore,
  type StoreFactory,
  spendingAct,
} from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type CommitCounter, countCommits } from "./commit-counter.js";
import { fileMovedOutage, type OpenedSqlite, openFresh } from "./helpers.js";

type ActPorts = Pick<OpenedSqlite["stores"], "acts" | "claims" | "usage" | "audit">;

const factory: StoreFactory<ActPorts, OpenedSqlite & OpenedStore<ActPorts>> = {
  open: async () => {
    const opened = await openFresh();
    return { ...opened, store: opened.stores };
  },
  outage: (opened) => fileMovedOutage(opened.url),
};

describeActLedgerConformance("SQLite", factory);

const NS = "ns-acts";
const key = (callId: string) => ({ session: "s", functionCallId: callId });

let opened: OpenedSqlite;
let counter: CommitCounter;
beforeEach(async () => {
  opened = await openFresh();
  counter = countCommits();
});
afterEach(async () => {
  counter.stop();
  await opened.close();
});

describe("SQLite act ledger: commits counted at the driver", () => {
  it("an act alone is exactly one commit, whether it spends, is denied, or collides", async () => {
    const { acts } = opened.stores;
    expect(await acts.record(spendingAct("one"))).toMatchObject({ recorded: "event" });
    expect(counter.commits).toBe(1);
    counter.reset();
    expect(await acts.record(spendingAct("two"))).toMatchObject({ recorded: "exhausted" });
    expect(counter.commits).toBe(1);
    counter.reset();
    expect((await acts.record(spendingAct("one"))).status).toBe("already_claimed");
    expect(counter.commits).toBe(1);
    counter.reset();
    const denied: Act = { event: actEvent("three", "no_matching_grant") };
    await acts.record(denied);
    expect(counter.commits).toBe(1);
  });

  it("50 acts started in one tick share one commit; 600 take two (batches of at most 512)", async () => {
    const { acts, usage } = opened.stores;
    const fifty = await Promise.all(
      Array.from({ length: 50 }, (_, i) => acts.record(spendingAct(`f-${i}`, "t50", 10))),
    );
    expect(counter.commits).toBe(1);
    expect(fifty.filter((r) => r.status === "recorded" && r.recorded === "event")).toHaveLength(10);
    expect(await usage.getUsage(NS, "t50")).toBe(10);
    counter.reset();
    await Promise.all(
      Array.from({ length: 600 }, (_, i) => acts.record(spendingAct(`g-${i}`, `g-${i}`))),
    );
    expect(counter.commits).toBe(2);
  });

  it("acts and the other ports' writes issued together still commit once", async () => {
    const { acts, audit, usage } = opened.stores;
    await Promise.all([
      acts.record(spendingAct("m-1")),
      audit.append(actEvent("m-2")),
      usage.tryConsume(NS, "other", 3),
      acts.record(spendingAct("m-3")),
    ]);
    // The plain append and consume were issued after an act, so they joined its batch.
    expect(counter.commits).toBe(1);
  });
});

describe("SQLite act ledger: faults leave whole acts or none", () => {
  it("a busy writer past the busy timeout: every act fails *_unavailable, nothing of it is written, and a retry after the writer commits gets a decision", async () => {
    const path = opened.url.slice("sqlite:".length);
    const { acts, claims, usage, audit } = opened.stores;
    const writer = new BetterSqlite3(path);
    writer.exec("BEGIN IMMEDIATE");
    writer.prepare("INSERT INTO tessera_usage VALUES (?, ?, ?)").run(NS, "writer", 1);
    try {
      const lone = await acts.record(spendingAct("busy-0", "busy")).catch((e: unknown) => e);
      const together = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          acts.record(spendingAct(`busy-${i + 1}`, "busy")).catch((e: unknown) => e),
        ),
      );
      for (const failure of [lone, ...together]) {
        expect(isTesseraError(failure) && failure.code).toBe("store_unavailable");
      }
      // Read while the writer still holds the lock (WAL readers are not blocked): nothing.
      for (let i = 0; i < 9; i++) expect(await claims.get(key(`busy-${i}`))).toBeUndefined();
      expect(await usage.getUsage(NS, "busy")).toBe(0);
      expect(await audit.read()).toEqual([]);
    } finally {
      writer.exec("COMMIT");
      writer.close();
    }
    expect(await acts.record(spendingAct("busy-0", "busy"))).toEqual({
      status: "recorded",
      recorded: "event",
      used: 1,
    });
    expect(await acts.record(spendingAct("busy-1", "busy"))).toMatchObject({
      recorded: "exhausted",
    });
    expect(await usage.getUsage(NS, "writer")).toBe(1);
    const events = await audit.read();
    expect(events.map((e) => [e.callId, e.outcome])).toEqual([
      ["busy-0", "allowed"],
      ["busy-1", "denied"],
    ]);
    expect(verifyAuditChain(events).ok).toBe(true);
  });

  it("a statement failing after the claim and the spend rolls the whole batch back", async () => {
    const path = opened.url.slice("sqlite:".length);
    const { acts, claims, usage, audit } = opened.stores;
    // The event's insert fails for one call ID, as a full disk would at that statement.
    const admin = new BetterSqlite3(path);
    admin.exec(`CREATE TRIGGER test_fail_event BEFORE INSERT ON tessera_audit
      WHEN NEW.call_id = 'boom' BEGIN SELECT RAISE(ABORT, 'no room'); END`);
    const alone = await acts.record(spendingAct("boom", "t1")).catch((e: unknown) => e);
    expect(isTesseraError(alone) && alone.code).toBe("store_unavailable");
    const batch = await Promise.all(
      ["ok-1", "boom", "ok-2"].map((id) =>
        acts.record(spendingAct(id, `t-${id}`)).catch((e: unknown) => e),
      ),
    );
    for (const failure of batch) {
      expect(isTesseraError(failure) && failure.code).toBe("store_unavailable");
    }
    for (const id of ["boom", "ok-1", "ok-2"]) {
      expect(await claims.get(key(id))).toBeUndefined();
      expect(await usage.getUsage(NS, `t-${id}`)).toBe(0);
    }
    expect(await usage.getUsage(NS, "t1")).toBe(0);
    expect(await audit.read()).toEqual([]);
    admin.exec("DROP TRIGGER test_fail_event");
    admin.close();
    // No claim blocks the call IDs: the retries are decided.
    for (const id of ["boom", "ok-1", "ok-2"]) {
      expect(await acts.record(spendingAct(id, `t-${id}`))).toMatchObject({ recorded: "event" });
    }
  });
});

describe("SQLite act ledger: a closed bundle", () => {
  it("refuses an act with store_unavailable and writes nothing", async () => {
    const { acts } = opened.stores;
    await opened.stores.close();
    const refused = await acts.record(spendingAct("late")).catch((e: unknown) => e);
    expect(isTesseraError(refused) && refused.code).toBe("store_unavailable");
    const raw = new BetterSqlite3(opened.url.slice("sqlite:".length));
    expect(raw.prepare("SELECT count(*) AS n FROM tessera_claims").get()).toEqual({ n: 0 });
    raw.close();
  });
});

describe("SQLite act ledger: one chain", () => {
  it("300 acts in flight over three ticks, beside plain appends, link one chain that verifies", async () => {
    const { acts, audit } = opened.stores;
    for (let wave = 0; wave < 3; wave++) {
      await Promise.all([
        ...Array.from({ length: 100 }, (_, i) =>
          acts.record(spendingAct(`w${wave}-${i}`, `g-${i % 7}`, 20)),
        ),
        audit.append(actEvent(`plain-${wave}`)),
      ]);
    }
    const events = await audit.read();
    expect(events).toHaveLength(303);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 303 }, (_, i) => i + 1));
    expect(verifyAuditChain(events)).toMatchObject({ ok: true });
  });
});
