import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { storePackageFor, TesseraError } from "@tessera/core";
import { openStoresByUrl } from "../../stores.js";
import { CALL_ID, CASES, type CaseDefinition, type CaseKey, type CaseMode } from "./cases.js";
import type { WorkerOutcome, WorkerStore } from "./protocol.js";
import { DemoWorker } from "./spawn.js";

/** What one phase measured, straight from the run (names as on the seed page). */
export interface PhaseMeasure {
  readonly tool_callbacks: number;
  readonly claimed: number;
  readonly reused: number;
  readonly claim_markers: number;
  readonly response_codes: string[];
  readonly receipt_statuses: string[];
}

export interface CaseReport {
  readonly mode: CaseMode;
  readonly before: PhaseMeasure;
  readonly after: PhaseMeasure;
}

export type TwoWorkersReport = Record<CaseKey, CaseReport>;

export interface TwoWorkersOptions {
  /** Processes per parallel case (default 2, at least 2). */
  readonly workers?: number;
  /** A shared store URL for the "after" phase instead of a private claim directory. */
  readonly store?: string;
  /** Run only these cases (default: all four, in order). */
  readonly only?: readonly CaseKey[];
}

/**
 * Runs the four cases, each twice in real OS processes: before (each worker keeps claims
 * in its own memory) and after (one shared claim store: a fresh private directory per case,
 * or the given store URL under a fresh session namespace). Both phases run the same gate.
 */
export async function runTwoWorkersDemo(
  options: TwoWorkersOptions = {},
): Promise<TwoWorkersReport> {
  const workers = options.workers ?? 2;
  if (!Number.isInteger(workers) || workers < 2 || workers > 64) {
    throw new TesseraError("invalid_config", "workers must be an integer from 2 to 64");
  }
  if (options.store !== undefined) {
    storePackageFor(options.store); // an unknown scheme is refused before anything opens
    // The host provisions its store: open it once up front, so workers never race to create
    // it, and a bad URL or an unreachable server fails here with the backend's own code and
    // the CLI's words for its cause (connection refused, authentication failed, …).
    await (await openStoresByUrl(options.store)).close();
  }
  const report: Partial<Record<CaseKey, CaseReport>> = {};
  for (const definition of CASES) {
    if (options.only && !options.only.includes(definition.key)) continue;
    const before = await runPhase(definition, workers, "before", options.store);
    const after = await runPhase(definition, workers, "after", options.store);
    report[definition.key] = Object.freeze({ mode: definition.mode, before, after });
  }
  return Object.freeze(report as TwoWorkersReport);
}

async function runPhase(
  definition: CaseDefinition,
  requested: number,
  phase: "before" | "after",
  storeUrl: string | undefined,
): Promise<PhaseMeasure> {
  const root = mkdtempSync(path.join(tmpdir(), "tessera-two-workers-")); // mode 0700
  try {
    const dir = path.join(root, "claims");
    mkdirSync(dir, { mode: 0o700 }); // provisioned by the host, as the gate requires
    const callbacksFile = path.join(root, "callbacks.jsonl");
    // A fresh namespace per case and phase, so runs against a shared database never collide.
    const prefix = storeUrl ? `demo-${randomBytes(6).toString("hex")}-${definition.key}:` : "";
    const store: WorkerStore =
      phase === "before"
        ? { kind: "memory" }
        : storeUrl
          ? { kind: "url", url: storeUrl }
          : { kind: "directory", dir };
    const count = definition.workers(requested);
    const configs = Array.from({ length: count }, (_, index) => ({
      store,
      session: definition.session(index, prefix),
      message: definition.message(index),
      callbacksFile,
    }));
    const outcomes =
      definition.mode === "parallel OS processes"
        ? await runParallel(configs)
        : await runSequential(configs);
    const sessions = [...new Set(configs.map((config) => config.session))];
    return measure(
      outcomes,
      callbacksFile,
      phase === "after" ? { storeUrl, dir, sessions } : undefined,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** All workers start, wait at the barrier, and are released together. */
async function runParallel(
  configs: ConstructorParameters<typeof DemoWorker>[0][],
): Promise<WorkerOutcome[]> {
  const workers = configs.map((config) => new DemoWorker(config));
  try {
    await Promise.all(workers.map((worker) => worker.ready()));
    for (const worker of workers) worker.go();
    return await Promise.all(workers.map((worker) => worker.outcome()));
  } finally {
    await Promise.all(workers.map((worker) => worker.kill()));
  }
}

/** Each worker starts only after the previous one has exited: a restart, not a race. */
async function runSequential(
  configs: ConstructorParameters<typeof DemoWorker>[0][],
): Promise<WorkerOutcome[]> {
  const outcomes: WorkerOutcome[] = [];
  for (const config of configs) {
    const worker = new DemoWorker(config);
    try {
      await worker.ready();
      worker.go();
      outcomes.push(await worker.outcome());
    } finally {
      await worker.kill();
    }
  }
  return outcomes;
}

async function measure(
  outcomes: WorkerOutcome[],
  callbacksFile: string,
  shared: { storeUrl: string | undefined; dir: string; sessions: string[] } | undefined,
): Promise<PhaseMeasure> {
  let callbacks = 0;
  try {
    callbacks = readFileSync(callbacksFile, "utf8").split("\n").filter(Boolean).length;
  } catch {
    // no callback ran: the file was never created
  }
  return Object.freeze({
    tool_callbacks: callbacks,
    claimed: outcomes.reduce((sum, o) => sum + o.claimed, 0),
    reused: outcomes.reduce((sum, o) => sum + o.reused, 0),
    claim_markers: shared ? await countMarkers(shared) : 0,
    response_codes: outcomes.map((o) => o.responseCode).sort(),
    receipt_statuses: outcomes.map((o) => o.receiptStatus).sort(),
  });
}

/** Files in the claim directory; for a database store, the claims it holds for this case. */
async function countMarkers(shared: {
  storeUrl: string | undefined;
  dir: string;
  sessions: string[];
}): Promise<number> {
  if (!shared.storeUrl) return readdirSync(shared.dir).length;
  const opened = await openStoresByUrl(shared.storeUrl);
  try {
    let found = 0;
    for (const session of shared.sessions) {
      if (await opened.claims.get({ session, functionCallId: CALL_ID })) found++;
      await opened.claims.endSession(session); // leave the shared database as we found it
    }
    return found;
  } finally {
    await opened.close();
  }
}
