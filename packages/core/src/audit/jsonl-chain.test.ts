import { spawn } from "node:child_process";
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { threadId } from "node:worker_threads";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { auditEventOf as event } from "../../test/fixtures.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { GENESIS_HASH } from "./chain.js";
import { JsonlAuditSink } from "./jsonl-audit-sink.js";
import { verifyAuditChain } from "./verify.js";

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "tessera-jsonl-chain-"));
  path = join(dir, "audit.jsonl");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const lines = () =>
  readFileSync(path, "utf8")
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line) as AuditEvent);

async function verifyFile() {
  const reader = JsonlAuditSink.open(path);
  try {
    return verifyAuditChain(await reader.read());
  } finally {
    reader.close();
  }
}

/** The pid of a process that has exited (and, this soon, not been reused). */
function deadPid(): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    child.on("error", reject);
    child.on("close", () => resolve(child.pid as number));
  });
}

describe("JsonlAuditSink links one chain per stream", () => {
  it("links each stream from genesis, and a reopened log carries on from its tail", async () => {
    const sink = JsonlAuditSink.open(path);
    sink.append(event("a", "n1"));
    sink.append(event("b"));
    sink.append(event("c", "n1"));
    sink.close();
    const again = JsonlAuditSink.open(path);
    again.append(event("d", "n1"));
    again.append(event("e"));
    again.close();
    expect(lines().map((e) => [e.namespaceId ?? "", e.seq])).toEqual([
      ["n1", 1],
      ["", 1],
      ["n1", 2],
      ["n1", 3],
      ["", 2],
    ]);
    expect(lines()[0]?.prev).toBe(GENESIS_HASH);
    expect(await verifyFile()).toMatchObject({ ok: true, events: 5 });
    // Nothing is left beside the log: no lock, no staged token.
    expect(readdirSync(dir)).toEqual(["audit.jsonl"]);
  });

  it("two sinks on one log take turns: each sees what the other appended", async () => {
    const first = JsonlAuditSink.open(path);
    const second = JsonlAuditSink.open(path);
    for (let i = 0; i < 20; i++) {
      (i % 3 === 0 ? second : first).append(event(`c${i}`, i % 2 === 0 ? "n1" : "n2"));
    }
    first.close();
    second.close();
    const result = await verifyFile();
    expect(result).toMatchObject({ ok: true, events: 20 });
    expect(result.streams.map((s) => s.head.seq)).toEqual([10, 10]);
  });

  it("starts the chain after a log's unchained lines, which verify as the unchained prefix", async () => {
    writeFileSync(path, `${JSON.stringify(event("old", "n1"))}\n`);
    const sink = JsonlAuditSink.open(path);
    sink.append(event("new", "n1"));
    sink.close();
    expect(lines()[1]).toMatchObject({ seq: 1, prev: GENESIS_HASH });
    const result = await verifyFile();
    expect(result.ok).toBe(true);
    expect(result.streams[0]).toMatchObject({ events: 2, unchained: 1 });
  });

  it("reads a stream's head from the log's end, not the whole log", () => {
    // A line no reader accepts, then more than a read chunk of one stream: appending to that
    // stream never reaches the bad line; a stream absent from the tail must read back to it.
    const filler = "y".repeat(1000);
    let body = "not an event\n";
    for (let i = 0; i < 100; i++) {
      body += `${JSON.stringify({ ...event(`u${i}`, "n1"), detail: filler })}\n`;
    }
    writeFileSync(path, body);
    const sink = JsonlAuditSink.open(path);
    sink.append(event("tail", "n1"));
    expect(() => sink.append(event("absent", "n2"))).toThrowError(
      expect.objectContaining({ code: "audit_unavailable" }),
    );
    sink.close();
    const last = JSON.parse(readFileSync(path, "utf8").trimEnd().split("\n").pop() as string);
    expect(last).toMatchObject({ callId: "tail", seq: 1 });
  });

  it("refuses to append after a partial last line, and after a log that shrank it reads again", async () => {
    const sink = JsonlAuditSink.open(path);
    sink.append(event("a", "n1"));
    sink.append(event("b", "n1"));
    const whole = readFileSync(path, "utf8");
    appendFileSync(path, '{"at":"2026');
    expect(() => sink.append(event("c", "n1"))).toThrowError(
      expect.objectContaining({ code: "audit_unavailable" }),
    );
    // Cut back to the first line: the cached head (seq 2) no longer holds.
    truncateSync(path, whole.indexOf("\n") + 1);
    sink.append(event("c", "n1"));
    sink.close();
    expect(lines().map((e) => e.seq)).toEqual([1, 2]);
    expect(await verifyFile()).toMatchObject({ ok: true });
  });

  it("refuses a lockWaitMs that is not a non-negative whole number", () => {
    for (const lockWaitMs of [-1, 1.5, Number.NaN]) {
      expect(() => JsonlAuditSink.open(path, { lockWaitMs })).toThrowError(
        expect.objectContaining({ code: "invalid_input" }),
      );
    }
  });
});

describe("JsonlAuditSink's lock file", () => {
  const lock = () => `${path}.lock`;
  const host = hostname().replace(/[^A-Za-z0-9.-]/g, "_");

  it("a process that exits without closing its sink leaves nothing beside the log", async () => {
    const built = new URL("../../dist/index.js", import.meta.url).href;
    const script = `import { JsonlAuditSink } from ${JSON.stringify(built)};
JsonlAuditSink.open(process.argv[1]).append(${JSON.stringify(event("a", "n1"))});`;
    const code = await new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--input-type=module", "-e", script, path], {
        stdio: "inherit",
      });
      child.on("error", reject);
      child.on("close", resolve);
    });
    expect(code).toBe(0);
    expect(readdirSync(dir)).toEqual(["audit.jsonl"]);
    expect(await verifyFile()).toMatchObject({ ok: true, events: 1 });
  });

  it("never breaks a lock taken on another host, whatever its pid: fails closed", async () => {
    writeFileSync(lock(), `${await deadPid()} 0 elsewhere.example deadbeef\n`);
    const sink = JsonlAuditSink.open(path, { lockWaitMs: 50 });
    expect(() => sink.append(event("a", "n1"))).toThrowError(
      expect.objectContaining({ code: "audit_unavailable" }),
    );
    sink.close();
    expect(existsSync(lock())).toBe(true);
  });

  it("breaks a lock whose holder has died, and its staged token", async () => {
    const pid = await deadPid();
    const token = `${pid} 0 ${host} deadbeef`;
    writeFileSync(lock(), `${token}\n`);
    writeFileSync(`${lock()}.${token.replaceAll(" ", "-")}`, `${token}\n`);
    const sink = JsonlAuditSink.open(path, { lockWaitMs: 2000 });
    sink.append(event("a", "n1"));
    sink.close();
    expect(readdirSync(dir)).toEqual(["audit.jsonl"]);
    expect(await verifyFile()).toMatchObject({ ok: true, events: 1 });
  });

  it("breaks a lock naming this very thread: it cannot be holding it between calls", () => {
    writeFileSync(lock(), `${process.pid} ${threadId} ${host} cafe\n`);
    const sink = JsonlAuditSink.open(path, { lockWaitMs: 0 });
    sink.append(event("a", "n1"));
    sink.close();
    expect(existsSync(lock())).toBe(false);
  });

  it("waits for a live holder, then fails closed naming it; appends once it lets go", async () => {
    const holder = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"], {
      stdio: "ignore",
    });
    const closed = new Promise((resolve) => holder.on("close", resolve));
    try {
      writeFileSync(lock(), `${holder.pid} 0 ${host} alive\n`);
      const sink = JsonlAuditSink.open(path, { lockWaitMs: 100 });
      expect(() => sink.append(event("a", "n1"))).toThrowError(
        expect.objectContaining({
          code: "audit_unavailable",
          message: expect.stringContaining(`held by process ${holder.pid}`),
        }),
      );
      expect(existsSync(path) && readFileSync(path, "utf8")).toBe("");
      holder.kill("SIGKILL");
      await closed;
      sink.append(event("a", "n1"));
      sink.close();
      expect(await verifyFile()).toMatchObject({ ok: true, events: 1 });
    } finally {
      holder.kill("SIGKILL");
    }
  });

  it("does not break a lock whose breaker died mid-break: fails closed naming the file", async () => {
    const pid = await deadPid();
    writeFileSync(lock(), `${pid} 0 ${host} stale\n`);
    writeFileSync(`${lock()}.break`, `${pid} 0 ${host} breaker\n`);
    const sink = JsonlAuditSink.open(path, { lockWaitMs: 50 });
    expect(() => sink.append(event("a", "n1"))).toThrowError(
      expect.objectContaining({
        code: "audit_unavailable",
        message: expect.stringContaining(`${lock()}.break`),
      }),
    );
    rmSync(`${lock()}.break`); // what the operator does
    sink.append(event("a", "n1"));
    sink.close();
    expect(existsSync(lock())).toBe(false);
  });
});
