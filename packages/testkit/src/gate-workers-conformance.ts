import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClaimStore, StoredClaim } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { type OpenedStore, type ProcessSpec, type StoreFactory, suiteCases } from "./factory.js";
import { gateCallMessage } from "./gate-catalog.js";
import {
  type GateCallback,
  type GateOutcome,
  killGateWorkerAfterClaim,
  killGateWorkersMidway,
  readGateCallbacks,
  runGateWorkers,
} from "./gate-workers.js";
import { propertyParameters } from "./properties.js";

const WORKERS = 4;
const CALL_ID = "call-42";

async function withCallbacksFile<T>(body: (file: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), "tessera-gate-workers-"));
  try {
    return await body(join(dir, "callbacks.jsonl"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function refusal(functionCallId: string): GateOutcome {
  return {
    status: "none",
    reason: "duplicate_call",
    code: "INVALID_FUNCTION_CALL",
    functionCallId,
  };
}

function dispatched(functionCallId: string): GateOutcome {
  return { status: "dispatched", reason: "dispatched", code: null, functionCallId };
}

/**
 * Across machines, in miniature: A2UI gate workers in separate OS processes that share
 * nothing but the claim store, released together. One callback per (trusted session,
 * functionCallId), counted from what the processes ran; the losers get a correlated
 * `INVALID_FUNCTION_CALL`; a worker killed between claim and callback leaves the call in
 * doubt for every process. Needs the factory's `processSpec` (skipped, and says so, without
 * it) and `@tessera/a2ui` installed beside the testkit.
 */
export function describeGateWorkersConformance<H extends OpenedStore<ClaimStore>>(
  name: string,
  factory: StoreFactory<ClaimStore, H>,
): void {
  const { use, crossProcess, skipNote } = suiteCases(factory);
  const specOf = (opened: H): ProcessSpec => {
    const spec = factory.processSpec?.(opened);
    if (!spec) throw new Error("unreachable: guarded by processSpec");
    return spec;
  };

  describe(`gate workers sharing only ${name}`, () => {
    crossProcess(
      `${WORKERS} OS processes, one session, one call ID: one callback, ${WORKERS - 1} correlated refusals${skipNote}`,
      () =>
        use(async (opened) => {
          const session = "host-session-1";
          await withCallbacksFile(async (callbacksFile) => {
            const outcomes = await runGateWorkers({
              spec: specOf(opened),
              callbacksFile,
              workers: Array.from({ length: WORKERS }, () => ({
                calls: [[session, gateCallMessage(CALL_ID)]],
              })),
            });
            const ran = readGateCallbacks(callbacksFile);
            expect(ran.map((c) => [c.session, c.functionCallId])).toEqual([[session, CALL_ID]]);
            const all = outcomes.flat();
            expect(all.filter((o) => o.status === "dispatched")).toEqual([dispatched(CALL_ID)]);
            expect(all.filter((o) => o.status !== "dispatched")).toEqual(
              Array.from({ length: WORKERS - 1 }, () => refusal(CALL_ID)),
            );
          });
          // This process's own connection sees the one claim, settled: nothing left in doubt.
          const stored = await opened.store.get({ session, functionCallId: CALL_ID });
          expect(stored?.receipt?.status).toBe("dispatched");
          expect(await opened.store.listInDoubt(session)).toEqual([]);
        }),
    );

    crossProcess(
      `two trusted sessions may use the same call ID: one callback each${skipNote}`,
      () =>
        use(async (opened) => {
          await withCallbacksFile(async (callbacksFile) => {
            const sessions = ["session-a", "session-b", "session-a", "session-b"];
            const outcomes = await runGateWorkers({
              spec: specOf(opened),
              callbacksFile,
              workers: sessions.map((session) => ({
                calls: [[session, gateCallMessage(CALL_ID)]],
              })),
            });
            const ran = readGateCallbacks(callbacksFile);
            expect(ran.map((c) => c.session).sort()).toEqual(["session-a", "session-b"]);
            for (const session of ["session-a", "session-b"]) {
              const mine = outcomes.filter((_, index) => sessions[index] === session).flat();
              expect(mine.filter((o) => o.status === "dispatched")).toEqual([dispatched(CALL_ID)]);
              expect(mine.filter((o) => o.status !== "dispatched")).toEqual([refusal(CALL_ID)]);
            }
          });
        }),
    );

    crossProcess(
      `a worker killed between claim and callback: in doubt, refused by a fresh worker, other sessions independent${skipNote}`,
      () =>
        use(async (opened) => {
          const spec = specOf(opened);
          const key = { session: "session-a", functionCallId: "victim" };
          await withCallbacksFile(async (callbacksFile) => {
            await killGateWorkerAfterClaim({
              spec,
              callbacksFile,
              call: [key.session, gateCallMessage(key.functionCallId)],
            });
            const inDoubt = await opened.store.listInDoubt(key.session);
            expect(inDoubt).toMatchObject([key]);
            expect(inDoubt[0]?.receipt).toBeUndefined();

            const [late] = await runGateWorkers({
              spec,
              callbacksFile,
              workers: [
                {
                  calls: [
                    [key.session, gateCallMessage(key.functionCallId)],
                    ["session-b", gateCallMessage(key.functionCallId)],
                  ],
                },
              ],
            });
            expect(late).toEqual([refusal(key.functionCallId), dispatched(key.functionCallId)]);
            expect(readGateCallbacks(callbacksFile).map((c) => c.session)).toEqual(["session-b"]);
            // Never re-dispatched, never settled by another worker: still in doubt.
            expect(await opened.store.listInDoubt(key.session)).toMatchObject([key]);
          });
        }),
    );
  });
}

// Each round starts fresh OS processes (about half a CPU second each to load the gate): 16
// kills keep a backend's run near 20 s on a quiet 2-core machine.
const KILL_ROUNDS = 8;
const KILL_WORKERS = 2;
const KILL_TIMEOUT_MS = 240_000;
const IDS_PER_ROUND = 24;
/** Each ID's expected fate by its prefix (the workers' `mixedOutcomes` policy). */
const PREFIXES = ["ok", "deny", "fail", "ok"] as const;

/** A small seeded generator, so a failing plan (orders, kill points) can be replayed. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

const keyOf = (session: string, functionCallId: string) =>
  JSON.stringify([session, functionCallId]);

/**
 * kill -9, many times: in each round, gate workers in separate OS processes race through the
 * same IDs (receipts written after the reply in most rounds, before it in every fourth) and
 * are killed with SIGKILL at a random point. Each callback writes and fsyncs its line before
 * it returns. Then, from this process: (a) no ID ran twice, and re-sending every ID to fresh
 * workers runs none that was claimed; (b) no receipt lies: `dispatched` and `failed` have a
 * line, `denied` has none; (c) every ID with a line has a true receipt or is in doubt.
 */
export function describeGateKillConformance<H extends OpenedStore<ClaimStore>>(
  name: string,
  factory: StoreFactory<ClaimStore, H>,
): void {
  const { use, skipNote } = suiteCases(factory);
  // Not the suites' `crossProcess` case: this one needs its own, longer timeout.
  const crossProcess = factory.processSpec ? it : it.skip;

  describe(`gate workers sharing only ${name}, killed with SIGKILL`, () => {
    crossProcess(
      `${KILL_ROUNDS} rounds of ${KILL_WORKERS} workers killed at random points: nothing runs twice, no receipt lies${skipNote}`,
      () =>
        use(async (opened) => {
          const spec = factory.processSpec?.(opened);
          if (!spec) throw new Error("unreachable: guarded by processSpec");
          const random = seeded(propertyParameters().seed);
          await withCallbacksFile(async (callbacksFile) => {
            const keys: { session: string; functionCallId: string }[] = [];
            let killed = 0;
            for (let round = 0; round < KILL_ROUNDS; round++) {
              const session = `kill-round-${round}`;
              const ids = Array.from(
                { length: IDS_PER_ROUND },
                (_, i) => `${PREFIXES[i % PREFIXES.length]}-${i}`,
              );
              for (const functionCallId of ids) keys.push({ session, functionCallId });
              const ended = await killGateWorkersMidway({
                spec,
                callbacksFile,
                workers: Array.from({ length: KILL_WORKERS }, () => ({
                  calls: shuffled(ids, random).map((id) => [session, gateCallMessage(id)] as const),
                  inFlight: 4,
                  settle: round % 4 === 3 ? ("before-reply" as const) : ("after-reply" as const),
                  syncCallbacks: true,
                  mixedOutcomes: true,
                  settleDelayMs: 10,
                })),
                killAt: {
                  afterCallbacks: 1 + Math.floor(random() * IDS_PER_ROUND * 0.6),
                  jitterMs: 8,
                },
              });
              killed += ended.killed;
            }

            const before = await storedClaims(opened.store, keys);
            const ranBefore = runCounts(readGateCallbacks(callbacksFile));
            const tally = checkNoReceiptLies(keys, before, ranBefore);
            // The kills really landed mid-stream, and at least once between a callback and its
            // receipt: the window this suite exists to test.
            expect(killed).toBeGreaterThan(0);
            expect(tally.ranInDoubt).toBeGreaterThan(0);

            // Every ID again, twice, to two fresh workers: a claimed ID is refused by both;
            // an unclaimed one runs its course once at most.
            const resends = [0, 1].map(() => shuffled(keys, random));
            const resent = await runGateWorkers({
              spec,
              callbacksFile,
              workers: resends.map((order) => ({
                calls: order.map((k) => [k.session, gateCallMessage(k.functionCallId)] as const),
                inFlight: 8,
                mixedOutcomes: true,
              })),
            });
            const taken = new Map<string, number>();
            resends.forEach((order, worker) => {
              order.forEach((k, index) => {
                const key = keyOf(k.session, k.functionCallId);
                if (resent[worker]?.[index]?.reason !== "duplicate_call") {
                  taken.set(key, (taken.get(key) ?? 0) + 1);
                }
              });
            });
            const ranAfter = runCounts(readGateCallbacks(callbacksFile));
            for (const k of keys) {
              const key = keyOf(k.session, k.functionCallId);
              expect(taken.get(key) ?? 0, `resend not refused: ${key}`).toBeLessThanOrEqual(
                before.get(key) === undefined ? 1 : 0,
              );
              if (before.get(key) !== undefined) {
                expect(ranAfter.get(key) ?? 0, `re-run after a kill: ${key}`).toBe(
                  ranBefore.get(key) ?? 0,
                );
              }
            }
            // The calls left in doubt stay in doubt: nobody settles or re-runs them.
            const after = await storedClaims(opened.store, keys);
            checkNoReceiptLies(keys, after, ranAfter);
            for (const [key, claim] of before) {
              if (claim !== undefined && claim.receipt === undefined) {
                expect(after.get(key)?.receipt, `settled by someone else: ${key}`).toBeUndefined();
              }
            }
          });
        }),
      KILL_TIMEOUT_MS,
    );
  });
}

async function storedClaims(
  store: ClaimStore,
  keys: readonly { session: string; functionCallId: string }[],
): Promise<Map<string, StoredClaim | undefined>> {
  const stored = new Map<string, StoredClaim | undefined>();
  for (const key of keys) stored.set(keyOf(key.session, key.functionCallId), await store.get(key));
  return stored;
}

function runCounts(callbacks: readonly GateCallback[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const c of callbacks) {
    const key = keyOf(c.session, c.functionCallId);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** Checks (a), (b) and (c) on one snapshot; returns how often each state occurred. */
function checkNoReceiptLies(
  keys: readonly { session: string; functionCallId: string }[],
  stored: ReadonlyMap<string, StoredClaim | undefined>,
  runs: ReadonlyMap<string, number>,
): { ranInDoubt: number } {
  let ranInDoubt = 0;
  for (const k of keys) {
    const key = keyOf(k.session, k.functionCallId);
    const ran = runs.get(key) ?? 0;
    const claim = stored.get(key);
    expect(ran, `ran twice: ${key}`).toBeLessThanOrEqual(1);
    const status = claim?.receipt?.status;
    if (claim === undefined) {
      expect(ran, `ran without a claim: ${key}`).toBe(0);
    } else if (status === undefined) {
      if (ran === 1) ranInDoubt++;
    } else if (status === "denied") {
      expect(ran, `denied but ran: ${key}`).toBe(0);
      expect(k.functionCallId.startsWith("deny-")).toBe(true);
    } else {
      expect(ran, `${status} but never ran: ${key}`).toBe(1);
      expect(k.functionCallId.startsWith(status === "failed" ? "fail-" : "ok-")).toBe(true);
    }
  }
  return { ranInDoubt };
}
