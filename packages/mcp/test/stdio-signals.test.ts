/**
 * Stopping `tessera mcp --stdio`: a SIGTERM closed the connection at once, so a tools/call under
 * way was cut (its tool may have run, its answer was never written: the call in doubt), and a
 * SIGHUP ended the process. Now the stdio session drains as the HTTP gateway does: no new
 * request runs (each gets a JSON-RPC error), the calls under way answer on stdout, and the
 * `stopping` / `stopped` lines go to stderr, leaving stdout to the protocol.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, slowToolSetup } from "./processes.js";
import { ALICE_TOKEN, readCounts, textOf } from "./support.js";

interface Answer {
  jsonrpc: string;
  id: number | null;
  result?: unknown;
  error?: { code: number; message: string };
}

/** `tessera mcp --stdio` spoken to in raw JSON-RPC lines, so its exit code and streams show. */
interface StdioGateway {
  readonly child: ChildProcessWithoutNullStreams;
  readonly exited: Promise<number | null>;
  /** Every stdout line, parsed: anything not JSON fails the test where it is read. */
  readonly lines: Answer[];
  request(id: number, method: string, params?: object): Promise<Answer>;
  notify(method: string): void;
  /** Resolves once stderr holds `text` `times` times. */
  stderrHas(text: string, times?: number): Promise<void>;
  stderr(): string;
}

function startStdio(config: string, args: string[] = []): StdioGateway {
  const child = spawn(process.execPath, [CLI, "mcp", "--config", config, "--stdio", ...args], {
    env: { PATH: process.env.PATH ?? "", TESSERA_MCP_TOKEN: ALICE_TOKEN },
  });
  const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
  const lines: Answer[] = [];
  const waiting = new Map<number, (answer: Answer) => void>();
  let buffered = "";
  child.stdout.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    const complete = buffered.split("\n");
    buffered = complete.pop() ?? "";
    for (const line of complete) {
      const answer = JSON.parse(line) as Answer;
      lines.push(answer);
      if (typeof answer.id === "number") waiting.get(answer.id)?.(answer);
    }
  });
  let stderr = "";
  const stderrWaits = new Set<() => void>();
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
    for (const check of stderrWaits) check();
  });
  const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
  return {
    child,
    exited,
    lines,
    request: (id, method, params) => {
      const answered = new Promise<Answer>((resolve, reject) => {
        waiting.set(id, resolve);
        void exited.then(() => reject(new Error(`exited before answering ${id}: ${stderr}`)));
      });
      // Its rejection is the awaiting test's to report; one left behind by a failure is not news.
      answered.catch(() => undefined);
      send({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
      return answered;
    },
    notify: (method) => send({ jsonrpc: "2.0", method }),
    stderrHas: (text, times = 1) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (stderr.split(text).length - 1 < times) return;
          stderrWaits.delete(check);
          resolve();
        };
        stderrWaits.add(check);
        check();
        void exited.then(() => reject(new Error(`exited before saying ${text}: ${stderr}`)));
      }),
    stderr: () => stderr,
  };
}

async function initialized(gateway: StdioGateway): Promise<void> {
  const init = await gateway.request(0, "initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "raw", version: "1" },
  });
  expect(init.result).toBeDefined();
  gateway.notify("notifications/initialized");
}

/** Polls the upstream's count file: the upstream is the gateway's child, not the test's. */
async function waitFor(check: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A tools/call of the upstream's `slow` tool: it answers `slept MS` after `ms`. */
const slow = (ms: number) => ({ name: "messages.slow", arguments: { ms } });

describe("tessera mcp --stdio stopping", () => {
  let dir: string;
  let config: string;
  let countFile: string;
  const started: StdioGateway[] = [];

  beforeAll(async () => {
    ({ dir, config, countFile } = await slowToolSetup("tessera-mcp-stdio-signals-"));
  });

  afterAll(async () => {
    for (const gateway of started) gateway.child.kill("SIGKILL");
    await Promise.all(started.map((gateway) => gateway.exited));
    rmSync(dir, { recursive: true, force: true });
  });

  function start(args: string[] = []): StdioGateway {
    const gateway = startStdio(config, args);
    started.push(gateway);
    return gateway;
  }

  it("a call under way at SIGTERM answers; a request after it gets -32000 and runs nothing; exit 0", async () => {
    const gateway = start();
    await initialized(gateway);
    const before = readCounts(countFile, "slow");
    const call = gateway.request(1, "tools/call", slow(1_500));
    await waitFor(() => readCounts(countFile, "slow") > before, 10_000);

    gateway.child.kill("SIGTERM");
    await gateway.stderrHas("tessera mcp: stopping");
    const late = await gateway.request(2, "tools/call", slow(1));
    expect(late.error).toEqual({
      code: -32000,
      message: "the gateway is stopping: send the request again later",
    });

    const answer = await call;
    expect(answer.error).toBeUndefined();
    expect(textOf(answer.result)).toBe("slept 1500");
    expect(await gateway.exited).toBe(0);
    // The late request reached no tool.
    expect(readCounts(countFile, "slow")).toBe(before + 1);
    const said = gateway
      .stderr()
      .split("\n")
      .filter((line) => line.startsWith("tessera mcp:"));
    expect(said).toEqual([
      "tessera mcp: serving on stdio",
      "tessera mcp: stopping: answering the calls under way",
      "tessera mcp: stopped",
    ]);
    // Stdout is the protocol: only the three answers.
    expect(gateway.lines.map((line) => [line.jsonrpc, line.id])).toEqual([
      ["2.0", 0],
      ["2.0", 2],
      ["2.0", 1],
    ]);
  }, 60_000);

  it("a SIGHUP is ignored while serving and while draining, said on stderr (--json)", async () => {
    const gateway = start(["--json"]);
    await initialized(gateway);
    await gateway.stderrHas('"serving"');
    gateway.child.kill("SIGHUP");
    await gateway.stderrHas('"reload_ignored"');
    // Still serving.
    expect((await gateway.request(1, "tools/list")).result).toBeDefined();

    const before = readCounts(countFile, "slow");
    const call = gateway.request(2, "tools/call", slow(1_500));
    await waitFor(() => readCounts(countFile, "slow") > before, 10_000);
    gateway.child.kill("SIGTERM");
    await gateway.stderrHas('"stopping"');
    gateway.child.kill("SIGHUP");
    await gateway.stderrHas('"reload_ignored"', 2);
    expect(textOf((await call).result)).toBe("slept 1500");
    expect(await gateway.exited).toBe(0);
    const events = gateway
      .stderr()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => (JSON.parse(line) as { event?: string }).event)
      .filter((event) => event !== undefined);
    expect(events).toEqual(["serving", "reload_ignored", "stopping", "reload_ignored", "stopped"]);
    expect(gateway.lines.every((line) => line.jsonrpc === "2.0")).toBe(true);
  }, 60_000);

  it("a client that closes stdin with a call under way gets its answer; with none, the process ends at once", async () => {
    const busy = start();
    await initialized(busy);
    const before = readCounts(countFile, "slow");
    const call = busy.request(1, "tools/call", slow(800));
    await waitFor(() => readCounts(countFile, "slow") > before, 10_000);
    busy.child.stdin.end();
    expect(textOf((await call).result)).toBe("slept 800");
    expect(await busy.exited).toBe(0);

    const idle = start();
    await initialized(idle);
    const closedAt = Date.now();
    idle.child.stdin.end();
    expect(await idle.exited).toBe(0);
    // Well inside the 10 s drain: nothing was pending, so nothing was waited for.
    expect(Date.now() - closedAt).toBeLessThan(5_000);
    // Closing stdin is the client leaving, not a stop: nothing is said about stopping.
    expect(idle.stderr()).not.toContain("stopping");
  }, 60_000);
});
