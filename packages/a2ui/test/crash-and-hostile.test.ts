import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  type GateCall,
  gateCallMessage,
  killGateWorkerAfterClaim,
  type ProcessSpec,
  readGateCallbacks,
  runGateWorkers,
} from "@tessera/testkit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DirectoryClaimStore } from "../src/stores/directory/directory-store.js";

let root: string;
let dir: string;
let callbacksFile: string;
let spec: ProcessSpec;

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), "tessera-crash-"));
  dir = path.join(root, "claims");
  mkdirSync(dir, { mode: 0o700 });
  callbacksFile = path.join(root, "callbacks.jsonl");
  spec = { module: "@tessera/a2ui", exportName: "DirectoryClaimStore.open", arg: dir };
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe("kill -9 between claim and callback", () => {
  it("leaves the claim in doubt; a second worker refuses the ID; nothing runs twice", async () => {
    const call = ["session-a", gateCallMessage("victim")] as const;
    // Killed inside the approval hook: claimed, callback not yet run.
    await killGateWorkerAfterClaim({ spec, callbacksFile, call });

    const store = await DirectoryClaimStore.open(dir);
    const inDoubt = await store.listInDoubt();
    expect(inDoubt).toMatchObject([{ session: "session-a", functionCallId: "victim" }]);
    expect(inDoubt[0]?.receipt).toBeUndefined();

    const [second] = await runGateWorkers({
      spec,
      callbacksFile,
      workers: [{ calls: [call, ["session-b", gateCallMessage("victim")]] }],
    });
    expect(second).toEqual([
      {
        status: "none",
        reason: "duplicate_call",
        code: "INVALID_FUNCTION_CALL",
        functionCallId: "victim",
      },
      // another session is independent
      { status: "dispatched", reason: "dispatched", code: null, functionCallId: "victim" },
    ]);
    expect(readGateCallbacks(callbacksFile).map(({ session }) => session)).toEqual(["session-b"]);
    // Still in doubt: the gate never re-dispatches it and never settles someone else's claim.
    expect(await store.listInDoubt("session-a")).toHaveLength(1);
    await store.close();
  });
});

describe("hostile input in a worker process", () => {
  it("gets clear error replies, the process survives, nothing lands outside the claim dir", async () => {
    const hostileIds = [
      "../../escape",
      "/etc/passwd",
      "a\u0000b",
      "x".repeat(100 * 1024),
      "✓ заявка",
    ];
    const calls: GateCall[] = [
      ...hostileIds.map((id) => ["s", gateCallMessage(id)] as const),
      ["s", "{ this is not json"],
      ["s", JSON.stringify({ version: "v1.0" })],
      ["s", { ...gateCallMessage("extra"), extra: true }],
      ["s", { ...gateCallMessage("old"), version: "v0.9" }],
      [
        "s",
        {
          version: "v1.0",
          callRendererFunction: { functionCallId: "m", callFunction: { call: "add" } },
        },
      ],
      ["s", gateCallMessage("undeclared", { a: 1, b: 2 }, "rm -rf")],
      ["s", "done-marker-is-not-a-message"],
    ];
    // The worker must answer every message and then exit 0: runGateWorkers checks both.
    const [outcomes] = await runGateWorkers({ spec, callbacksFile, workers: [{ calls }] });
    expect(outcomes?.map((o) => o.code)).toEqual([
      null, // "../../escape" is a plain ID under a hash
      null, // "/etc/passwd" likewise
      "VALIDATION_FAILED", // NUL
      "VALIDATION_FAILED", // 100 KB
      null, // non-ASCII is fine
      "VALIDATION_FAILED",
      "VALIDATION_FAILED",
      "VALIDATION_FAILED",
      "VALIDATION_FAILED",
      "VALIDATION_FAILED",
      "INVALID_FUNCTION_CALL",
      "VALIDATION_FAILED",
    ]);
    expect(readGateCallbacks(callbacksFile)).toHaveLength(3);
    const markers = readdirSync(dir);
    expect(markers).toHaveLength(3);
    for (const name of markers) expect(name).toMatch(/^[0-9a-f]{64}$/);
    expect(readdirSync(root).sort()).toEqual(["callbacks.jsonl", "claims"]);
    expect(readdirSync(path.dirname(root)).filter((n) => n.includes("escape"))).toEqual([]);
  });
});
