/**
 * SQLite store throughput beside the raw primitive, same pragmas, same run:
 * - claims/s: `SqliteClaimStore.claim` vs `INSERT OR IGNORE` of the same row with better-sqlite3;
 * - bounded consumes/s: `SqliteUsageStore.tryConsume` over 100 grants vs the conditional
 *   `UPDATE … SET used = used + 1 WHERE … AND used < ?` on 100 counter rows;
 * at concurrency 1 (one process, awaited one by one) and 8 (8 OS processes on one file:
 * better-sqlite3 is synchronous, so 8 in-flight async callers in one process would just run
 * one after another). Every operation is a committed write. Plus 64 in flight in one
 * process, where the store's group commit shares one transaction among the writes issued
 * together and the raw statement (its own commit each) cannot. Plus two end-to-end rows:
 * `gate.handle` and `sendMessage` over the SQLite stores.
 *
 * This file is also the worker of the 8-process runs: forked with WORKER_FLAG it measures
 * one mode on one file for a fixed time and reports its count.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { openStores } from "@tessera/core";
import Database from "better-sqlite3";
import { concurrent, medianRatesAbba, throughput } from "../measure.js";
import { type BenchRow, ratioRow } from "../report.js";
import { gateCases, gateHandleRows } from "./gate-e2e.js";
import { GRANTS, turnOver } from "./turn.js";

type Mode = "store-claim" | "raw-claim" | "store-consume" | "raw-consume";
type Synchronous = "FULL" | "NORMAL";

const WORKER_FLAG = "--tessera-sqlite-bench-worker";
const PROCESSES = 8;
const PROCESS_RUN_MS = 1000;
/** Runs per side of the 8-process measurements. */
const PROCESS_ROUNDS = 4;
/** Alternating slices per side at concurrency 1. */
const ROUNDS = 8;
const TARGET = "overhead ≤ 1.3× (ratio ≥ 0.77)";
/** Callers in flight for the group-commit rows (issue 14), and operations per slice. */
const IN_FLIGHT = 64;
const IN_FLIGHT_SLICE_OPS = 1_024;
const GROUP_TARGET = "≥ 3× the raw single-row primitive (ratio ≥ 3)";
const RATIO_MEANING = "store ops/s ÷ raw primitive ops/s, same pragmas, same run";

/** Opens what `mode` measures on `path` and returns one operation to repeat. */
async function prepare(
  mode: Mode,
  path: string,
  synchronous: Synchronous,
  tag: string,
): Promise<{ op: () => unknown; close(): Promise<void> }> {
  let n = 0;
  if (mode === "store-claim" || mode === "store-consume") {
    const stores = await openStores(`sqlite:${path}?synchronous=${synchronous.toLowerCase()}`);
    const record = { bodyHash: "b".repeat(64), claimedAt: Date.now(), worker: tag };
    const op =
      mode === "store-claim"
        ? () => stores.claims.claim({ session: "bench", functionCallId: `${tag}-${n++}` }, record)
        : () => stores.usage.tryConsume("bench", `grant-${n++ % GRANTS}`, Number.MAX_SAFE_INTEGER);
    return { op, close: () => stores.close() };
  }
  const db = new Database(path);
  db.pragma("busy_timeout = 5000");
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${synchronous}`);
  // The same rows the store writes, in the same key-is-the-table layout: a claim row carries
  // the record the contract hands back (body hash, time, worker), a counter row its count.
  db.exec(`CREATE TABLE IF NOT EXISTS raw_claims (
      session TEXT NOT NULL, call_id TEXT NOT NULL, body_hash TEXT NOT NULL,
      claimed_at INTEGER NOT NULL, worker TEXT, PRIMARY KEY (session, call_id)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS raw_usage (k TEXT PRIMARY KEY, used INTEGER NOT NULL) WITHOUT ROWID`);
  const seed = db.prepare("INSERT OR IGNORE INTO raw_usage (k, used) VALUES (?, 0)");
  for (let g = 0; g < GRANTS; g++) seed.run(`grant-${g}`);
  const statement =
    mode === "raw-claim"
      ? db.prepare(
          "INSERT OR IGNORE INTO raw_claims (session, call_id, body_hash, claimed_at, worker) VALUES (?, ?, ?, ?, ?)",
        )
      : db.prepare("UPDATE raw_usage SET used = used + 1 WHERE k = ? AND used < ?");
  const op =
    mode === "raw-claim"
      ? () => statement.run("bench", `${tag}-${n++}`, "b".repeat(64), Date.now(), tag)
      : () => statement.run(`grant-${n++ % GRANTS}`, Number.MAX_SAFE_INTEGER);
  return {
    op,
    close: async () => {
      db.close();
    },
  };
}

/**
 * Concurrency 1: one process, each operation awaited before the next. Store and raw are
 * opened side by side and measured in alternating short slices, the median of each kept:
 * fsync latency on a shared machine drifts over seconds, and alternating puts both sides
 * under the same drift.
 */
async function sequentialPair(
  store: Mode,
  raw: Mode,
  synchronous: Synchronous,
  fresh: () => string,
): Promise<[number, number]> {
  return alternate(
    await prepare(store, fresh(), synchronous, "seq"),
    await prepare(raw, fresh(), synchronous, "seq"),
  );
}

interface Prepared {
  op: () => unknown;
  close(): Promise<void>;
}

/** `ours` and `theirs` in alternating 200 ms slices (ABBA), the median rate of each. */
async function alternate(ours: Prepared, theirs: Prepared): Promise<[number, number]> {
  try {
    const slice = (side: Prepared) => async (round: number) => {
      const options = { minMs: 200, warmupMs: round < 2 ? 100 : 0, rounds: 1 };
      return (await throughput(async () => side.op(), 1, options)).opsPerSec;
    };
    return await medianRatesAbba(ROUNDS, slice(ours), slice(theirs));
  } finally {
    await ours.close();
    await theirs.close();
  }
}

/**
 * 64 callers in flight in one process, synchronous=FULL, alternating slices as at c=1. The
 * raw side is the same single-row statement with its own commit each: better-sqlite3 runs
 * it synchronously, so its 64 callers take turns, one fsync each.
 */
async function inFlightPair(
  store: Mode,
  raw: Mode,
  fresh: () => string,
): Promise<[number, number]> {
  const ours = await prepare(store, fresh(), "FULL", "flight");
  const theirs = await prepare(raw, fresh(), "FULL", "flight");
  try {
    const slice = (side: Prepared) => async () =>
      (await concurrent(IN_FLIGHT, IN_FLIGHT_SLICE_OPS, async () => side.op())).opsPerSec;
    await slice(ours)();
    await slice(theirs)();
    return await medianRatesAbba(ROUNDS, slice(ours), slice(theirs));
  } finally {
    await ours.close();
    await theirs.close();
  }
}

/**
 * End to end, synchronous=FULL: `gate.handle` over the SQLite claim store (gate-e2e.ts:
 * receipts after and before the reply, c=1 and c=8 in one process, beside the raw claim at
 * the same concurrency) and, at c=1, `sendMessage` spending a bounded ticket in the SQLite
 * usage store (one commit per send; grants, audit and transport in memory) beside the raw
 * conditional UPDATE.
 */
async function endToEnd(fresh: () => string): Promise<BenchRow[]> {
  const gateStores = await openStores(`sqlite:${fresh()}`);
  const rawClaim = await prepare("raw-claim", fresh(), "FULL", "e2e");
  let gateRows: BenchRow[];
  try {
    gateRows = await gateHandleRows(
      "sqlite",
      gateStores.claims,
      async () => rawClaim.op(),
      "INSERT OR IGNORE (1 commit)",
      gateCases(100, 400),
    );
  } finally {
    await gateStores.close();
    await rawClaim.close();
  }
  const usageStores = await openStores(`sqlite:${fresh()}`);
  const turn = await turnOver(usageStores.usage);
  let send = 0;
  const [sendRate, rawUpdate] = await alternate(
    {
      op: async () => {
        const result = await turn.sendMessage({
          recipient: `colleague-${send++ % GRANTS}`,
          payload: "hi",
        });
        if (result.status !== "delivered") throw new Error("bench: message not delivered");
      },
      close: async () => {
        await turn.close();
        await usageStores.close();
      },
    },
    await prepare("raw-consume", fresh(), "FULL", "e2e"),
  );
  const meaning = "end-to-end rate ÷ raw primitive rate, same run (informational: no target)";
  return [
    ...gateRows,
    {
      ...row(
        "sqlite sendMessage/s end to end (bounded ticket), c=1, synchronous=FULL",
        sendRate,
        "UPDATE … WHERE used < max",
        rawUpdate,
      ),
      ratioMeaning: meaning,
      target: undefined,
      met: undefined,
    },
  ];
}

interface WorkerReport {
  ops: number;
  ms: number;
}

type ToWorker = { type: "prepare"; mode: Mode; path: string } | { type: "go" } | { type: "exit" };
type FromWorker = { type: "ready" } | { type: "done"; report: WorkerReport };

/** 8 OS processes, started once and reused for every concurrency-8 measurement. */
class ProcessPool {
  readonly #children: ChildProcess[];

  constructor(count: number) {
    const self = fileURLToPath(import.meta.url);
    this.#children = Array.from({ length: count }, (_, i) =>
      fork(self, [WORKER_FLAG, `p${i}`], { execArgv: [] }),
    );
  }

  /** Every process opens `mode` on `path`; they start together and run for a fixed time. */
  async measure(mode: Mode, path: string): Promise<number> {
    // Create the file (WAL, schema, counters) here first, so the workers measure work, not
    // eight processes racing to initialise a new file.
    await (await prepare(mode, path, "FULL", "init")).close();
    await Promise.all(
      this.#children.map((child) => this.#ask(child, { type: "prepare", mode, path })),
    );
    const reports = await Promise.all(
      this.#children.map((child) => this.#ask(child, { type: "go" })),
    );
    let ops = 0;
    let ms = 0;
    for (const message of reports) {
      if (message.type !== "done") throw new Error("bench worker answered out of turn");
      ops += message.report.ops;
      ms = Math.max(ms, message.report.ms);
    }
    return (ops / ms) * 1000;
  }

  close(): void {
    for (const child of this.#children) if (child.connected) child.send({ type: "exit" });
  }

  #ask(child: ChildProcess, message: ToWorker): Promise<FromWorker> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`bench worker exited (${code})`));
      child.once("exit", onExit);
      child.once("message", (reply: FromWorker) => {
        child.off("exit", onExit);
        resolve(reply);
      });
      child.send(message);
    });
  }
}

async function workerMain(tag: string): Promise<void> {
  let prepared: { op: () => unknown; close(): Promise<void> } | undefined;
  const send = (message: FromWorker) => process.send?.(message);
  process.on("message", async (message: ToWorker) => {
    if (message.type === "exit") return process.disconnect();
    if (message.type === "prepare") {
      prepared = await prepare(message.mode, message.path, "FULL", tag);
      return send({ type: "ready" });
    }
    const { op, close } = prepared as NonNullable<typeof prepared>;
    let ops = 0;
    const start = performance.now();
    let elapsed = 0;
    while (elapsed < PROCESS_RUN_MS) {
      await op();
      ops++;
      elapsed = performance.now() - start;
    }
    await close();
    send({ type: "done", report: { ops, ms: elapsed } });
  });
}

function row(name: string, value: number, baselineName: string, baseline: number): BenchRow {
  return ratioRow(name, value, { name: baselineName, value: baseline }, RATIO_MEANING, {
    text: TARGET,
    minRatio: 1 / 1.3,
  });
}

/** Alternates store and raw runs of the 8 processes in ABBA order, keeping each side's median. */
async function processPair(
  pool: ProcessPool,
  store: Mode,
  raw: Mode,
  fresh: () => string,
): Promise<[number, number]> {
  return medianRatesAbba(
    PROCESS_ROUNDS,
    () => pool.measure(store, fresh()),
    () => pool.measure(raw, fresh()),
  );
}

export async function rows(): Promise<{ rows: BenchRow[]; notes: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "tessera-bench-sqlite-"));
  let files = 0;
  const fresh = () => join(dir, `bench-${files++}.db`);
  try {
    const out: BenchRow[] = [];
    const pairs: [string, Mode, Mode, string][] = [
      ["claims/s", "store-claim", "raw-claim", "INSERT OR IGNORE"],
      ["bounded consumes/s", "store-consume", "raw-consume", "UPDATE … WHERE used < max"],
    ];
    for (const synchronous of ["FULL", "NORMAL"] as const) {
      for (const [what, store, raw, primitive] of pairs) {
        const [value, baseline] = await sequentialPair(store, raw, synchronous, fresh);
        out.push(
          row(`sqlite ${what}, c=1, synchronous=${synchronous}`, value, primitive, baseline),
        );
      }
    }
    for (const [what, store, raw, primitive] of pairs) {
      const [value, baseline] = await inFlightPair(store, raw, fresh);
      out.push(
        ratioRow(
          `sqlite ${what}, ${IN_FLIGHT} in flight (group commit), synchronous=FULL`,
          value,
          { name: `${primitive}, own commit each`, value: baseline },
          RATIO_MEANING,
          { text: GROUP_TARGET, minRatio: 3 },
        ),
      );
    }
    out.push(...(await endToEnd(fresh)));
    const pool = new ProcessPool(PROCESSES);
    try {
      for (const [what, store, raw, primitive] of pairs) {
        const [value, baseline] = await processPair(pool, store, raw, fresh);
        out.push(
          row(`sqlite ${what}, c=8 processes, synchronous=FULL`, value, primitive, baseline),
        );
      }
    } finally {
      pool.close();
    }
    return {
      rows: out,
      notes: [
        "medians of alternating store/raw runs; c=1: one process, each call awaited; c=8: 8 OS processes on one WAL file (better-sqlite3 is synchronous, so in-process concurrency would serialise), each running 1 s after a common start",
        `consumes spread over ${GRANTS} grants, each a committed write; claims are all new keys, the raw insert writing the same row (key, body hash, time, worker)`,
        "synchronous=FULL is the shipped default; NORMAL survives a process crash but may lose the last commits on power loss",
        `${IN_FLIGHT} in flight: ${IN_FLIGHT} async callers in one process, ${IN_FLIGHT_SLICE_OPS} operations per slice; the store commits the writes issued in one tick together (one BEGIN IMMEDIATE … COMMIT, each caller answered after it), the raw statement commits each write alone`,
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === WORKER_FLAG) await workerMain(process.argv[3] ?? "p");
