import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  ALICE_TOKEN,
  type Harness,
  readCounts,
  startHarness,
  textOf,
  toolGrant,
} from "./support.js";

/**
 * How a forwarded call ends, against a real upstream process (the SDK's low-level server, over
 * stdio and as a stateful Streamable HTTP server): an error the upstream sent settles the call
 * `failed` whatever its code; a connection lost once the request could have left leaves it in
 * doubt; a timed-out request is closed; an upstream that restarts gets a new session.
 */
const RAW = fileURLToPath(new URL("./fixtures/raw-upstream.mjs", import.meta.url));
const KEY = "io.tessera/idempotency-key";
let dir: string;
let countFile: string;
let harness: Harness | undefined;
const children: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "tessera-mcp-endings-"));
  countFile = join(dir, "count.jsonl");
});
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  for (const child of children.splice(0)) child.kill("SIGKILL");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function rpcCode(error: unknown): string | undefined {
  return (error as { data?: { code?: string } }).data?.code;
}

interface RawHttp {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  kill(): Promise<void>;
}

/** The HTTP upstream in a process of its own, on `port` (0: any free one). */
function startRawHttp(port = 0): Promise<RawHttp> {
  const child = spawn(process.execPath, [RAW, "--http", String(port)], {
    env: { COUNT_FILE: countFile, PATH: process.env.PATH ?? "" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (!out.includes("\n")) return;
      const { url } = JSON.parse(out.split("\n")[0] as string) as { url: string };
      resolve({
        url,
        port: Number(new URL(url).port),
        child,
        kill: async () => {
          child.kill("SIGKILL");
          await exited;
        },
      });
    });
    child.once("exit", (code) => reject(new Error(`raw upstream exited ${code}`)));
  });
}

/** What the HTTP upstream holds open: requests not yet answered, and connections. */
function upstreamOpen(port: number): Promise<{ requests: number; connections: number }> {
  return new Promise((resolve, reject) => {
    request({ host: "127.0.0.1", port, path: "/open", agent: false }, (res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      res.on("end", () => resolve(JSON.parse(text)));
    })
      .on("error", reject)
      .end();
  });
}

/** The claims in doubt once the answers being written have landed (they go out after the reply). */
async function inDoubtOnceSettled(h: Harness): Promise<string[]> {
  let ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    ids = (await h.claims.listInDoubt()).map((claim) => claim.functionCallId);
    if (ids.length === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return ids;
}

async function gatewayFor(
  upstream: { url: string } | { command: string; args: string[]; env: Record<string, string> },
  limits: Record<string, number> = {},
): Promise<Harness> {
  harness = await startHarness(
    { upstreams: { raw: upstream }, tools: {}, limits: { restartBackoffMs: 50, ...limits } },
    [toolGrant("alice", ["raw"], { scope: "descendants" })],
  );
  return harness;
}

const stdioUpstream = () => ({
  command: process.execPath,
  args: [RAW],
  env: { COUNT_FILE: countFile, PATH: process.env.PATH ?? "" },
});

describe("an error the upstream sent", () => {
  for (const code of [-32000, -32001]) {
    it(`settles the call failed (JSON-RPC ${code}), over stdio and HTTP: not in doubt`, async () => {
      for (const transport of ["stdio", "http"] as const) {
        const upstream = transport === "stdio" ? stdioUpstream() : await startRawHttp();
        const h = await gatewayFor(upstream);
        const alice = await h.client(ALICE_TOKEN);
        const key = `rpc-${transport}-${code}`;
        const call = { name: "raw.rpc_error", arguments: { code }, _meta: { [KEY]: key } };
        await expect(alice.callTool(call)).rejects.toSatisfy(
          (e) => rpcCode(e) === "upstream_failed",
        );
        // The replay reads the recorded failure; the claim is settled, not in doubt.
        await expect(alice.callTool(call)).rejects.toSatisfy(
          (e) => rpcCode(e) === "upstream_failed",
        );
        expect(await inDoubtOnceSettled(h)).toEqual([]);
        // The act's event (allowed, before forwarding), then the outcome's.
        const event = (await h.audit.read({ callId: key })).at(-1);
        expect(event).toMatchObject({ receipt: "failed" });
        // The upstream is still connected: the next call runs on it.
        const echo = await alice.callTool({ name: "raw.echo", arguments: { text: "still" } });
        expect(textOf(echo)).toBe("still");
        await h.close();
        harness = undefined;
      }
    });
  }
});

describe("a connection to an HTTP upstream", () => {
  it("lost after the request was sent leaves the call in doubt, listed, never re-sent", async () => {
    const upstream = await startRawHttp();
    const h = await gatewayFor(upstream);
    const alice = await h.client(ALICE_TOKEN);
    const call = { name: "raw.drop", arguments: {}, _meta: { [KEY]: "drop-1" } };
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "call_in_doubt");
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "call_in_doubt");
    expect(readCounts(countFile, "drop")).toBe(1);
    const inDoubt = await h.claims.listInDoubt();
    expect(inDoubt.map((claim) => claim.functionCallId)).toEqual(["key:drop-1"]);
    expect((await h.audit.read({ callId: "drop-1" })).at(-1)).toMatchObject({
      receipt: "in_doubt",
    });
    // The next call opens a new session and runs.
    const echo = await alice.callTool({ name: "raw.echo", arguments: { text: "after" } });
    expect(textOf(echo)).toBe("after");
  });

  it("a call right after each lost connection runs on a new session, 20 rounds", async () => {
    const upstream = await startRawHttp();
    const h = await gatewayFor(upstream);
    const alice = await h.client(ALICE_TOKEN);
    for (let round = 0; round < 20; round++) {
      const call = { name: "raw.drop", arguments: {}, _meta: { [KEY]: `drops-${round}` } };
      await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "call_in_doubt");
      // Whether the lost connection's client is closed yet or not, nothing is sent on it.
      const echo = await alice.callTool({ name: "raw.echo", arguments: { text: `r${round}` } });
      expect(textOf(echo)).toBe(`r${round}`);
    }
  });

  it("refused before anything was sent fails the call, nothing in doubt", async () => {
    const upstream = await startRawHttp();
    const h = await gatewayFor(upstream);
    const alice = await h.client(ALICE_TOKEN);
    await upstream.kill();
    const call = { name: "raw.echo", arguments: { text: "x" }, _meta: { [KEY]: "down-1" } };
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    expect(await inDoubtOnceSettled(h)).toEqual([]);
  });
});

describe("a stateful HTTP upstream that restarts on the same port", () => {
  it("is reached again: the next call opens a new session", async () => {
    const first = await startRawHttp();
    const h = await gatewayFor(first);
    const alice = await h.client(ALICE_TOKEN);
    const echo = (text: string) => alice.callTool({ name: "raw.echo", arguments: { text } });
    expect(textOf(await echo("before"))).toBe("before");
    await first.kill();
    const second = await startRawHttp(first.port);
    // The call that meets the restart may fail (nothing ran: the old session is unknown);
    // the one after it runs in a new session.
    const outcomes: string[] = [];
    for (let i = 0; i < 2; i++) {
      outcomes.push(await echo(`after-${i}`).then(textOf, (e) => rpcCode(e) ?? "error"));
    }
    expect(outcomes[1]).toBe("after-1");
    expect(outcomes[0]).toMatch(/^(after-0|upstream_failed)$/);
    expect(await inDoubtOnceSettled(h)).toEqual([]);
    // And it keeps working.
    expect(textOf(await echo("later"))).toBe("later");
    await second.kill();
  });
});

describe("a timed-out HTTP request", () => {
  it("is aborted: the upstream holds no request or socket for it", async () => {
    const upstream = await startRawHttp();
    const h = await gatewayFor(upstream, { upstreamTimeoutMs: 1000 });
    const alice = await h.client(ALICE_TOKEN);
    await alice.callTool({ name: "raw.echo", arguments: { text: "warm" } });
    const calls = Array.from({ length: 6 }, (_, i) =>
      alice.callTool({
        name: "raw.slow",
        arguments: { ms: 20_000 },
        _meta: { [KEY]: `slow-${i}` },
      }),
    );
    const endings = await Promise.allSettled(calls);
    expect(endings.map((e) => e.status === "rejected" && rpcCode(e.reason))).toEqual(
      Array(6).fill("call_in_doubt"),
    );
    // On a loaded machine a request may time out before the upstream's tool starts.
    expect(readCounts(countFile, "slow")).toBeGreaterThan(0);
    // The upstream sees each abandoned request's connection close, long before it would answer.
    let open = await upstreamOpen(upstream.port);
    for (let i = 0; i < 40 && open.requests > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      open = await upstreamOpen(upstream.port);
    }
    expect(open.requests).toBe(0);
    // What stays is the gateway's pool of idle keep-alive connections (the cancellation
    // notifications' among them), never one per timed-out call plus those.
    expect(open.connections).toBeLessThanOrEqual(6);
    // Still in doubt (the upstream may yet run them): timeouts are never failures.
    expect((await h.claims.listInDoubt()).length).toBe(6);
    // The upstream is still reached.
    expect(textOf(await alice.callTool({ name: "raw.echo", arguments: { text: "x" } }))).toBe("x");
  });
});
