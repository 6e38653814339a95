import { hostname } from "node:os";
import { InMemoryClaimStore } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { CallLedger, callKeys, digest } from "./ledger.js";

const NOW = 1_000_000;
const BODY = digest({ name: "t", arguments: {} });

/** A claim left by some gateway process, then the ledger's reading of a duplicate. */
async function duplicateOf(worker: object): Promise<string> {
  const claims = new InMemoryClaimStore();
  const keys = callKeys("p", "key:k");
  await claims.claim(keys.claim, {
    bodyHash: BODY,
    claimedAt: NOW,
    worker: JSON.stringify(worker),
  });
  const found = await new CallLedger(claims).claim(keys, BODY, "trace", NOW, NOW + 1000);
  return found.kind;
}

describe("an unsettled claim: in progress or in doubt", () => {
  const here = `${hostname()}:${process.pid}`;
  it("in progress while its gateway process lives and its deadline has not passed", async () => {
    expect(
      await duplicateOf({ w: `${hostname()}:${process.ppid}`, i: "x", t: "t", d: NOW + 60_000 }),
    ).toBe("in_progress");
  });
  it("in doubt once its deadline has passed", async () => {
    expect(
      await duplicateOf({ w: `${hostname()}:${process.ppid}`, i: "x", t: "t", d: NOW - 1 }),
    ).toBe("in_doubt");
  });
  it("in doubt when its process on this host is gone", async () => {
    expect(
      await duplicateOf({ w: `${hostname()}:2147483646`, i: "x", t: "t", d: NOW + 60_000 }),
    ).toBe("in_doubt");
  });
  it("in doubt when an earlier process had this process's pid (a restarted PID 1)", async () => {
    expect(await duplicateOf({ w: here, i: "an-earlier-instance", t: "t", d: NOW + 60_000 })).toBe(
      "in_doubt",
    );
  });
  it("in doubt when the record is unreadable; another host's live claim is in progress", async () => {
    expect(await duplicateOf({ junk: true })).toBe("in_doubt");
    expect(await duplicateOf({ w: "elsewhere:1", i: "x", t: "t", d: NOW + 60_000 })).toBe(
      "in_progress",
    );
  });
});
