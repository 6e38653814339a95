import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { claimKeyDigest } from "@tessera/core/store-kit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FunctionCallGate } from "../src/gate/gate.js";
import { DirectoryClaimStore } from "../src/stores/directory/directory-store.js";
import { callMessage, TEST_CATALOG } from "./fixtures/catalog.js";

let root: string;
let dir: string;

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), "tessera-gate-dir-"));
  dir = path.join(root, "claims");
  mkdirSync(dir, { mode: 0o700 });
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe("the gate over a directory store", () => {
  it("a restarted worker (a new store on the same directory) refuses an old ID", async () => {
    let runs = 0;
    const invoke = () => ++runs;
    const firstClaims = await DirectoryClaimStore.open(dir);
    const first = new FunctionCallGate({ claims: firstClaims, catalog: TEST_CATALOG, invoke });
    expect((await first.handle("s", callMessage("old"))).receipt.status).toBe("dispatched");
    // What a worker does before it exits: its receipts land (else the ID reads in doubt).
    await first.close();
    await firstClaims.close();
    const restartedClaims = await DirectoryClaimStore.open(dir);
    const restarted = new FunctionCallGate({
      claims: restartedClaims,
      catalog: TEST_CATALOG,
      invoke,
    });
    expect((await restarted.handle("s", callMessage("old"))).receipt).toMatchObject({
      status: "none",
      previous: "dispatched",
    });
    expect(runs).toBe(1);
    await restarted.close();
    await restartedClaims.close();
  });

  it("a duplicate of a claim whose record line was never written: refused in doubt, no body change claimed", async () => {
    let runs = 0;
    const claims = await DirectoryClaimStore.open(dir);
    const gate = new FunctionCallGate({ claims, catalog: TEST_CATALOG, invoke: () => ++runs });
    // What a worker killed between the marker's create and its record's write leaves.
    const key = { session: "s", functionCallId: "orphan" };
    writeFileSync(path.join(dir, claimKeyDigest(key)), "", { mode: 0o600 });
    const result = await gate.handle("s", callMessage("orphan"));
    // Before, `changedBody: true`: the earlier body is unknown, so it may well be the same.
    expect(result.receipt).toEqual({
      status: "none",
      reason: "duplicate_call",
      session: "s",
      functionCallId: "orphan",
      previous: "in_doubt",
    });
    // A duplicate whose earlier record is known still says whether its body changed.
    expect((await gate.handle("s", callMessage("kept"))).receipt.status).toBe("dispatched");
    expect((await gate.handle("s", callMessage("kept", { a: 9, b: 9 }))).receipt).toMatchObject({
      status: "none",
      changedBody: true,
    });
    expect(runs).toBe(1);
    await gate.close();
    await claims.close();
  });

  it("the directory removed mid-session: fails closed, runs nothing, recreates nothing", async () => {
    let runs = 0;
    const claims = await DirectoryClaimStore.open(dir);
    const gate = new FunctionCallGate({ claims, catalog: TEST_CATALOG, invoke: () => ++runs });
    expect((await gate.handle("s", callMessage("before"))).receipt.status).toBe("dispatched");
    rmSync(dir, { recursive: true });
    const after = await gate.handle("s", callMessage("after"));
    expect(after.reply).toMatchObject({
      rendererFunctionResponse: { error: { code: "EXECUTION_FAILED" } },
    });
    expect(after.receipt).toMatchObject({ status: "denied", reason: "claim_store_unavailable" });
    expect(runs).toBe(1);
    expect(existsSync(dir)).toBe(false);
    expect(readdirSync(root)).toEqual([]);
    await claims.close();
  });
});
