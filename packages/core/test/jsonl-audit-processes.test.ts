import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JsonlAuditSink } from "../src/index.js";

/** Several OS processes append to one log at once: no line is lost, torn or interleaved. */

const worker = fileURLToPath(new URL("./append-worker.mjs", import.meta.url));
const built = fileURLToPath(new URL("../dist/index.js", import.meta.url));

function run(path: string, writer: string, count: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [worker, path, writer, String(count)], {
      stdio: "inherit",
    });
    child.on("error", reject);
    child.on("close", (code) => resolve(code ?? -1));
  });
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "tessera-audit-mp-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("JsonlAuditSink across processes", () => {
  it.skipIf(!existsSync(built))(
    "4 writers × 400 events: every event present, in each writer's order",
    async () => {
      const path = join(dir, "shared.jsonl");
      const writers = ["w0", "w1", "w2", "w3"];
      const codes = await Promise.all(writers.map((w) => run(path, w, 400)));
      expect(codes).toEqual([0, 0, 0, 0]);
      const sink = JsonlAuditSink.open(path);
      const events = await sink.read(); // throws if any line is torn
      sink.close();
      expect(events).toHaveLength(1600);
      for (const writer of writers) {
        const mine = events.filter((e) => e.traceId === writer).map((e) => e.callId);
        expect(mine).toEqual(Array.from({ length: 400 }, (_, i) => `${writer}:${i}`));
      }
    },
  );
});
