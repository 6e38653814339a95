import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { gateCallMessage, readGateCallbacks, runGateWorkers } from "@tessera/testkit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DirectoryClaimStore } from "../src/stores/directory/directory-store.js";

const PROCESSES = 8;
const IDS = 500;
const SESSIONS = ["session-a", "session-b"];

let root: string;
let dir: string;
let callbacksFile: string;

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), "tessera-race-"));
  dir = path.join(root, "claims");
  mkdirSync(dir, { mode: 0o700 });
  callbacksFile = path.join(root, "callbacks.jsonl");
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe(`directory store: ${PROCESSES} OS processes × ${IDS} shared IDs × ${SESSIONS.length} sessions`, () => {
  it("every (session, ID) runs its callback exactly once", async () => {
    const keys = SESSIONS.flatMap((session) =>
      Array.from({ length: IDS }, (_, i) => ({ session, id: `call-${i}` })),
    );
    // Half the workers go backwards, so they collide all along the list, not only at its head.
    const keysOf = (worker: number) => (worker % 2 === 0 ? keys : [...keys].reverse());
    const outcomes = await runGateWorkers({
      spec: { module: "@tessera/a2ui", exportName: "DirectoryClaimStore.open", arg: dir },
      callbacksFile,
      workers: Array.from({ length: PROCESSES }, (_, worker) => ({
        calls: keysOf(worker).map(({ session, id }) => [session, gateCallMessage(id)] as const),
        inFlight: 4,
      })),
    });
    const ran = readGateCallbacks(callbacksFile);
    const pairs = ran.map(({ session, functionCallId }) => `${session}\u0000${functionCallId}`);
    expect(new Set(pairs).size).toBe(pairs.length); // nothing ran twice
    expect(pairs.length).toBe(SESSIONS.length * IDS); // everything ran once
    expect(new Set(ran.map(({ pid }) => pid)).size).toBeGreaterThan(1); // a real race

    const all = outcomes.flatMap((mine, worker) =>
      mine.map((outcome, index) => ({ outcome, key: keysOf(worker)[index] })),
    );
    expect(all.filter(({ outcome }) => outcome.status === "dispatched")).toHaveLength(
      SESSIONS.length * IDS,
    );
    const refused = all.filter(({ outcome }) => outcome.status !== "dispatched");
    expect(refused).toHaveLength((PROCESSES - 1) * SESSIONS.length * IDS);
    for (const { outcome, key } of refused)
      expect(outcome).toEqual({
        status: "none",
        reason: "duplicate_call",
        code: "INVALID_FUNCTION_CALL",
        functionCallId: key?.id, // correlated: the refusal names the call it refuses
      });

    expect(readdirSync(dir)).toHaveLength(SESSIONS.length * IDS);
    const store = await DirectoryClaimStore.open(dir);
    expect(await store.listInDoubt()).toEqual([]);
    await store.close();
  });
});
