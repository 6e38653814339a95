import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type AuditEvent, JsonlAuditSink, openAuditReader } from "@tessera/core";
import { serviceUrl } from "@tessera/testkit";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { removeRun } from "../../../test/support/scratch-stores.js";
import { BIN, scratch } from "./support/cli.js";

/**
 * `audit tail --follow` while several processes write two namespaces (audit streams) of one
 * store. PostgreSQL numbers a row before its transaction commits, so across streams a lower
 * number can commit after a higher one was read. Before, `--follow` printed only what lay past
 * the last event shown and silently skipped such late commits (1084 of 1092 events in a
 * tester's run; dozens each run here on PostgreSQL). Now every stored event is printed exactly
 * once, each stream in `seq` order, on every store.
 */

const NAMESPACES = ["team", "team2"] as const;
const WRITERS = 4;
const PER_WRITER = 400;

/**
 * A writer process, with its own store (its own connection or file descriptor): `count`
 * events over both namespaces, in bursts of concurrent appends so that the two streams' writes
 * are in flight together, with short pauses so the follower reads between them.
 */
const WRITER = `
import { JsonlAuditSink, openStores } from "@tessera/core";
const [where, name, count] = process.argv.slice(-3);
const namespaces = ${JSON.stringify(NAMESPACES)};
const stores = where.startsWith("file:")
  ? { audit: JsonlAuditSink.open(where.slice(5)), close: async () => {} }
  : await openStores(where);
for (let i = 0; i < Number(count); ) {
  const burst = [];
  for (let n = 1 + Math.floor(Math.random() * 24); n > 0 && i < Number(count); n--, i++) {
    burst.push(stores.audit.append({
      at: new Date().toISOString(), source: "kernel", outcome: "denied",
      code: "tool_unavailable", reason: "grant_exhausted",
      traceId: name, callId: name + "-" + i, namespaceId: namespaces[i % namespaces.length],
    }));
  }
  await Promise.all(burst);
  await new Promise((resolve) => setTimeout(resolve, Math.random() * 8));
}
if (stores.audit.close) stores.audit.close();
await stores.close();
`;

const CLI_DIR = fileURLToPath(new URL("..", import.meta.url));

/** Starts a writer of `count` events into `where` (a store URL, or `file:` and a log's path). */
function writer(where: string, name: string, count: number): ChildProcess {
  return spawn(process.execPath, ["--input-type=module", "-e", WRITER, where, name, `${count}`], {
    cwd: CLI_DIR,
    stdio: ["ignore", "ignore", "inherit"],
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once("close", resolve);
  });
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Widens the window between a row's number and its commit, as a loaded machine or a slow disk
 * does: each insert into the audit table sleeps up to 30 ms after its rows are numbered and
 * before its transaction commits, so writers of the other stream commit higher numbers
 * meanwhile. (A trigger in this run's own schema; the store's own statements are unchanged.)
 */
async function slowCommits(baseUrl: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await client.query(
      `CREATE FUNCTION "${schema}".slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN PERFORM pg_sleep(random() * 0.03); RETURN NULL; END $$`,
    );
    await client.query(
      `CREATE TRIGGER slow_commit AFTER INSERT ON "${schema}".audit
       FOR EACH STATEMENT EXECUTE FUNCTION "${schema}".slow_commit()`,
    );
  } finally {
    await client.end();
  }
}

/**
 * Seeds one event per stream, starts `tail -n 2 --follow --json`, runs the writers to the end,
 * and checks that the follower printed every stored event once, each stream in `seq` order.
 */
async function followWhileWriting(where: string, source: string[], prepare?: () => Promise<void>) {
  expect(await exited(writer(where, "seed", NAMESPACES.length))).toBe(0);
  await prepare?.();
  const follower = spawn(process.execPath, [
    BIN,
    ...["audit", "tail", ...source, "-n", "2", "--follow", "--json", "--interval", "50"],
  ]);
  let out = "";
  let err = "";
  follower.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  follower.stderr.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  const printed = () =>
    out
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as AuditEvent);
  try {
    for (const end = Date.now() + 20_000; printed().length < 2 && Date.now() < end; ) {
      await pause(50);
    }
    expect(printed()).toHaveLength(2);
    const writers = Array.from({ length: WRITERS }, (_, w) => writer(where, `w${w}`, PER_WRITER));
    expect(await Promise.all(writers.map(exited))).toEqual(writers.map(() => 0));
    const stored = where.startsWith("file:")
      ? await JsonlAuditSink.openToRead(where.slice(5)).read()
      : await readStore(where);
    expect(stored).toHaveLength(NAMESPACES.length + WRITERS * PER_WRITER);
    // A skipped event never comes: wait for the count, or a while past the writers' end.
    for (const end = Date.now() + 10_000; printed().length < stored.length && Date.now() < end; ) {
      await pause(50);
    }
    await pause(300);
    const shown = printed();
    const hashes = new Set(shown.map((event) => event.hash));
    expect(hashes.size).toBe(shown.length);
    const missing = stored.filter((event) => !hashes.has(event.hash));
    expect(missing.map((event) => `${event.namespaceId}#${event.seq}`)).toEqual([]);
    expect(shown).toHaveLength(stored.length);
    for (const namespace of NAMESPACES) {
      const seqs = shown.filter((e) => e.namespaceId === namespace).map((e) => e.seq);
      expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    }
    expect(err).toBe("");
  } finally {
    follower.kill("SIGINT");
    expect(await exited(follower)).toBe(0);
  }
}

async function readStore(url: string): Promise<readonly AuditEvent[]> {
  const reader = await openAuditReader(url);
  try {
    return await reader.read();
  } finally {
    await reader.close();
  }
}

const runName = () => `cli_${randomUUID().replaceAll("-", "").slice(0, 12)}`;

describe("audit tail --follow while several processes write several streams", () => {
  const postgres = serviceUrl("TESSERA_PG_URL");
  const redis = serviceUrl("TESSERA_REDIS_URL");
  const runs: [backend: "schema" | "prefix", base: string, run: string][] = [];
  afterAll(async () => {
    for (const [backend, base, run] of runs) await removeRun(backend, base, run);
  });

  it.runIf(postgres !== undefined)(
    "PostgreSQL, commits landing behind events already read: each event once",
    async () => {
      const base = postgres as string;
      const run = runName();
      runs.push(["schema", base, run]);
      const url = new URL(base);
      url.searchParams.set("schema", run);
      const store = url.toString();
      await followWhileWriting(store, ["--store", store], () => slowCommits(base, run));
    },
  );

  it.runIf(redis !== undefined)("Redis: each event once", async () => {
    const base = redis as string;
    const run = runName();
    runs.push(["prefix", base, run]);
    const url = new URL(base);
    url.searchParams.set("prefix", `${run}:`);
    const store = url.toString();
    await followWhileWriting(store, ["--store", store]);
  });

  it("SQLite: each event once", async () => {
    const store = `sqlite:${join(scratch(), "tessera.db")}`;
    await followWhileWriting(store, ["--store", store]);
  });

  it("a JSON-lines log: each event once", async () => {
    const path = join(scratch(), "audit.jsonl");
    await followWhileWriting(`file:${path}`, ["--file", path]);
  });
});
