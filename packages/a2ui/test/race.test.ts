import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DirectoryClaimStore } from "../src/stores/directory/directory-store.js";
import { callMessage } from "./fixtures/catalog.js";
import { callbacksRun, runTogether } from "./fixtures/processes.js";

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
    const tasks = SESSIONS.flatMap((session) =>
      Array.from({ length: IDS }, (_, i) => [session, callMessage(`call-${i}`)] as const),
    );
    const outcomes = await runTogether(
      Array.from({ length: PROCESSES }, (_, worker) => ({
        dir,
        callbacksFile,
        // Half the workers go backwards, so they collide all along the list, not only at its head.
        tasks: worker % 2 === 0 ? tasks : [...tasks].reverse(),
        inFlight: 4,
      })),
    );
    const ran = callbacksRun(callbacksFile);
    const pairs = ran.map(([session, id]) => `${session}\u0000${id}`);
    expect(new Set(pairs).size).toBe(pairs.length); // nothing ran twice
    expect(pairs.length).toBe(SESSIONS.length * IDS); // everything ran once
    expect(new Set(ran.map(([, , pid]) => pid)).size).toBeGreaterThan(1); // a real race

    const all = outcomes.flat();
    expect(all.filter((o) => o.status === "dispatched")).toHaveLength(SESSIONS.length * IDS);
    const refused = all.filter((o) => o.status !== "dispatched");
    expect(refused).toHaveLength((PROCESSES - 1) * SESSIONS.length * IDS);
    for (const o of refused)
      expect(o).toEqual({
        status: "none",
        reason: "duplicate_call",
        code: "INVALID_FUNCTION_CALL",
      });

    expect(readdirSync(dir)).toHaveLength(SESSIONS.length * IDS);
    const store = await DirectoryClaimStore.open(dir);
    expect(await store.listInDoubt()).toEqual([]);
    await store.close();
  });
});
