/**
 * The SQLite act ledger's `withdraw` beyond the conformance suite (which act-ledger.test.ts
 * runs): one commit counted at the driver, and all or nothing when its last statement (the
 * event's insert) fails: the claim stays unsettled and the use spent, and the withdrawal
 * tried again after the fault withdraws the act once.
 */
import { isTesseraError, verifyAuditChain } from "@tessera/core";
import { spendingAct, withdrawalOf } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type CommitCounter, countCommits } from "./commit-counter.js";
import { type OpenedSqlite, openFresh } from "./helpers.js";

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

describe("SQLite act ledger: withdraw", () => {
  it("a withdrawal is one commit, whether it withdraws, keeps (nothing written) or finds nothing", async () => {
    const { acts } = opened.stores;
    const withdraw = acts.withdraw?.bind(acts);
    if (withdraw === undefined) throw new Error("the SQLite ledger withdraws");
    const act = spendingAct("one", "t", 3);
    await acts.record(act);
    counter.reset();
    expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
    expect(counter.commits).toBe(1);
    counter.reset();
    expect(await withdraw(withdrawalOf(act))).toBe("kept");
    expect(await withdraw(withdrawalOf(spendingAct("two", "t", 3)))).toBe("not_recorded");
    expect(counter.commits).toBe(2);
  });

  it("an event insert failing rolls the settle and the release back; tried again, it withdraws once", async () => {
    const path = opened.url.slice("sqlite:".length);
    const { acts, claims, usage, audit } = opened.stores;
    const withdraw = acts.withdraw?.bind(acts);
    if (withdraw === undefined) throw new Error("the SQLite ledger withdraws");
    const act = spendingAct("boom", "t", 3);
    await acts.record(act);
    const admin = new BetterSqlite3(path);
    admin.exec(`CREATE TRIGGER test_fail_withdrawal BEFORE INSERT ON tessera_audit
      WHEN json_extract(NEW.event, '$.reason') = 'act_withdrawn'
      BEGIN SELECT RAISE(ABORT, 'no room'); END`);
    const failed = await withdraw(withdrawalOf(act)).catch((e: unknown) => e);
    expect(isTesseraError(failed) && failed.code).toBe("store_unavailable");
    expect((await claims.get(key("boom")))?.receipt).toBeUndefined();
    expect(await usage.getUsage(NS, "t")).toBe(1);
    expect((await audit.read()).map((e) => e.reason)).toEqual(["allowed"]);
    admin.exec("DROP TRIGGER test_fail_withdrawal");
    admin.close();
    expect(await withdraw(withdrawalOf(act))).toBe("withdrawn");
    expect(await withdraw(withdrawalOf(act))).toBe("kept");
    expect(await usage.getUsage(NS, "t")).toBe(0);
    expect((await claims.get(key("boom")))?.receipt?.status).toBe("failed");
    const events = await audit.read();
    expect(events.map((e) => e.reason)).toEqual(["allowed", "act_withdrawn"]);
    expect(verifyAuditChain(events).ok).toBe(true);
  });
});
