import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { BIN, scratch } from "./support/cli.js";

/**
 * The quick start of docs/service.md, run as a reader would paste it: each block marked
 * `<!-- quickstart:NAME -->` is handed to `sh` unchanged but for the two ports the doc names
 * (8787 for the service, 9090 for the receiver), with `tessera` on PATH and the tokens `init`
 * printed exported as the doc says. A doc edit that breaks a pasted line fails here.
 */
const DOC = fileURLToPath(new URL("../../../docs/service.md", import.meta.url));

function blocks(): Map<string, string> {
  const text = readFileSync(DOC, "utf8");
  const found = new Map<string, string>();
  for (const match of text.matchAll(/<!-- quickstart:(\w+) -->\n```sh\n([\s\S]*?)```/g)) {
    found.set(match[1] as string, match[2] as string);
  }
  return found;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGTERM");
});

describe("docs/service.md quick start", () => {
  it("runs as pasted: init, serve, issue, send, replay, explain, audit", async () => {
    const doc = blocks();
    expect([...doc.keys()]).toEqual([
      "init",
      "receiver",
      "serve",
      "issue",
      "send",
      "replay",
      "explain",
      "audit",
    ]);
    const servicePort = await freePort();
    const receiverPort = await freePort();
    const ported = (name: string) =>
      (doc.get(name) as string)
        .replaceAll("127.0.0.1:8787", `127.0.0.1:${servicePort}`)
        .replaceAll("--port 8787", `--port ${servicePort}`)
        .replaceAll("127.0.0.1:9090", `127.0.0.1:${receiverPort}`)
        .replaceAll("listen(9090,", `listen(${receiverPort},`);

    const cwd = scratch();
    const bin = join(cwd, "bin");
    mkdirSync(bin);
    writeFileSync(join(bin, "tessera"), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
    chmodSync(join(bin, "tessera"), 0o755);
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(([key]) => !key.startsWith("TESSERA_")),
    );
    const env: NodeJS.ProcessEnv = { ...clean, PATH: `${bin}:${process.env.PATH ?? ""}` };
    const sh = (name: string) => {
      const done = spawnSync("sh", ["-c", ported(name)], { cwd, env, encoding: "utf8" });
      expect({ block: name, code: done.status, stderr: done.stderr }).toEqual({
        block: name,
        code: 0,
        stderr: "",
      });
      return done.stdout;
    };
    const jsonLines = (text: string): unknown[] =>
      text
        .split(/(?<=})(?=\{)|\n/)
        .filter((line) => line.trim() !== "")
        .map((line) => JSON.parse(line));

    // 1. init: the reader copies the two tokens from what it printed.
    const printed = sh("init");
    const token = (role: string) =>
      new RegExp(`${role} token[^\\n]*\\n {2}(tsk_[\\w-]{43})\\n`).exec(printed)?.[1];
    env.TESSERA_ISSUER_TOKEN = token("issuer");
    env.TESSERA_AGENT_TOKEN = token("agent");
    expect(env.TESSERA_ISSUER_TOKEN).toBeDefined();
    expect(env.TESSERA_AGENT_TOKEN).toBeDefined();

    // 2. the receiver and the service, each in its own "terminal".
    const background = (name: string, ready: RegExp | undefined) => {
      const child = spawn("sh", ["-c", `exec ${ported(name)}`], { cwd, env });
      children.push(child);
      let output = "";
      return new Promise<string>((resolve, reject) => {
        child.stdout?.on("data", (chunk: Buffer) => {
          output += chunk.toString();
          if (ready?.test(output)) resolve(output);
        });
        child.stderr?.on("data", (chunk: Buffer) => {
          output += chunk.toString();
          if (ready?.test(output)) resolve(output);
        });
        child.once("close", (code) => reject(new Error(`${name} exited ${code}: ${output}`)));
        if (ready === undefined) setTimeout(() => resolve(output), 500);
      });
    };
    await background("receiver", undefined);
    await background("serve", /listening/);

    // 4. the ticket
    const [issued] = jsonLines(sh("issue")) as [{ grant: Record<string, unknown> }];
    expect(issued.grant).toMatchObject({
      id: "ticket-1",
      namespaceId: "default",
      issuer: "host",
      subject: "agent",
      constraints: { maxUses: 1 },
    });

    // 5. the send, delivered, the receiver's answer as the reply
    const [sent] = jsonLines(sh("send")) as [Record<string, unknown>];
    expect(sent).toEqual({
      status: "delivered",
      messageId: expect.any(String),
      grantId: "ticket-1",
      callId: "call-1",
      reply: { received: true },
    });

    // 6. the replay answers the same; a new call ID meets the spent ticket
    const [replayed, second] = jsonLines(sh("replay"));
    expect(replayed).toEqual(sent);
    expect(second).toEqual({ status: "denied", code: "tool_unavailable" });

    // 7. explain
    const [first, spent] = jsonLines(sh("explain"));
    expect(first).toMatchObject({ callId: "call-1", verdict: "allowed", code: null });
    expect(spent).toMatchObject({ callId: "call-2", verdict: "spent" });

    // 8. audit: one kernel event, allowed, no payload
    const auditText = sh("audit");
    const [audit] = jsonLines(auditText) as [{ events: Record<string, unknown>[] }];
    expect(audit.events).toEqual([
      expect.objectContaining({
        source: "kernel",
        outcome: "allowed",
        callId: "call-1",
        actor: "agent",
        grantId: "ticket-1",
        action: "messages.send",
        resource: "messages:/bob",
      }),
    ]);
    expect(auditText).not.toContain("hello");
  }, 120_000);
});
