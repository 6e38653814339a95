import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JsonlAuditSink, verifyAuditChain } from "../src/index.js";

/**
 * Several OS processes append to one JSON-lines log at once: each stream stays one valid hash
 * chain, because every append reads the head and writes under the log's lock file.
 */

const worker = fileURLToPath(new URL("./chain-append-worker.mjs", import.meta.url));
const built = fileURLToPath(new URL("../dist/index.js", import.meta.url));
const STREAMS = "n1,n2,";
// Real processes contending for one lock on a shared, loaded machine: minutes, not seconds.
const SLOW = 240_000;

function start(path: string, writer: string, count: number | "forever"): ChildProcess {
  return spawn(process.execPath, [worker, path, writer, String(count), STREAMS], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
}

function closed(child: ChildProcess): Promise<number | string> {
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve(code ?? signal ?? -1));
  });
}

async function readAll(path: string) {
  const reader = JsonlAuditSink.open(path);
  try {
    return await reader.read();
  } finally {
    reader.close();
  }
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "tessera-chain-mp-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!existsSync(built))("JsonlAuditSink chains across processes", () => {
  it(
    "8 writers × 100 events, three rounds on one log: one valid chain per stream",
    async () => {
      const path = join(dir, "rounds.jsonl");
      const writers = Array.from({ length: 8 }, (_, i) => `w${i}`);
      for (let round = 1; round <= 3; round++) {
        const children = writers.map((w) => start(path, `${w}r${round}`, 100));
        expect(await Promise.all(children.map(closed))).toEqual(writers.map(() => 0));
        const events = await readAll(path);
        expect(events).toHaveLength(8 * 100 * round);
        const result = verifyAuditChain(events);
        expect(result.ok, JSON.stringify(result.ok ? null : result.break)).toBe(true);
        // Three streams (two namespaces and the gate's), every event of each in its chain.
        expect(result.streams).toHaveLength(3);
        for (const stream of result.streams) {
          expect(stream).toMatchObject({ unchained: 0, head: { seq: stream.events } });
        }
      }
      expect(readdirSync(dir).filter((name) => name.startsWith("rounds.jsonl."))).toEqual([]);
    },
    SLOW,
  );

  it(
    "a writer killed at any moment, perhaps holding the lock, does not stop or break the rest",
    async () => {
      const path = join(dir, "killed.jsonl");
      const victim = start(path, "victim", "forever");
      const victimClosed = closed(victim);
      await new Promise((resolve) => victim.once("message", resolve));
      const writers = Array.from({ length: 7 }, (_, i) => start(path, `w${i}`, 100));
      await new Promise((resolve) => setTimeout(resolve, 200));
      victim.kill("SIGKILL");
      expect(await victimClosed).toBe("SIGKILL");
      expect(await Promise.all(writers.map(closed))).toEqual(writers.map(() => 0));
      const events = await readAll(path);
      expect(events.filter((e) => e.traceId !== "victim")).toHaveLength(700);
      const result = verifyAuditChain(events);
      expect(result.ok, JSON.stringify(result.ok ? null : result.break)).toBe(true);
    },
    SLOW,
  );
});
