import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
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
    const first = new FunctionCallGate({
      claims: await DirectoryClaimStore.open(dir),
      catalog: TEST_CATALOG,
      invoke,
    });
    expect((await first.handle("s", callMessage("old"))).receipt.status).toBe("dispatched");
    // What a worker does before it exits: its receipts land (else the ID reads in doubt).
    await first.close();
    const restarted = new FunctionCallGate({
      claims: await DirectoryClaimStore.open(dir),
      catalog: TEST_CATALOG,
      invoke,
    });
    expect((await restarted.handle("s", callMessage("old"))).receipt).toMatchObject({
      status: "none",
      previous: "dispatched",
    });
    expect(runs).toBe(1);
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
