import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createTesseraClient, type TesseraClient } from "@tessera/client";
import { tokenDigest } from "@tessera/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, scratch, serveProcess, tesseraWith } from "./support/cli.js";

/**
 * Every client-mode subcommand against a real `tessera serve --data` process, with and without
 * --json; errors as `tessera: <code>: …` or as JSON on stderr, exit 2 either way.
 */

const AGENT = "agent-token-for-cli-tests";
let served: Awaited<ReturnType<typeof serveProcess>>;
let issuerToken: string;
let dataDir: string;
let agent: TesseraClient;

const run = tesseraWith;

const asIssuer = (...args: string[]) =>
  run({ TESSERA_URL: served.url, TESSERA_TOKEN: issuerToken }, ...args);
const asAgent = (...args: string[]) =>
  run({ TESSERA_URL: served.url, TESSERA_TOKEN: AGENT }, ...args);

function ok(done: ReturnType<typeof run>): string {
  expect({ code: done.code, stderr: done.stderr }).toEqual({ code: 0, stderr: "" });
  return done.stdout;
}

function jsonError(done: ReturnType<typeof run>, code: string): Record<string, unknown> {
  expect(done.code).toBe(2);
  expect(done.stdout).toBe("");
  const body = JSON.parse(done.stderr) as { error: Record<string, unknown> };
  expect(body.error.code).toBe(code);
  return body.error;
}

function textError(done: ReturnType<typeof run>, code: string): void {
  expect(done.code).toBe(2);
  expect(done.stderr).toMatch(new RegExp(`^tessera: ${code}: `));
  expect(done.stderr).not.toMatch(/\n\s+at /);
}

const grantFile = (id: string, recipient: string) => {
  const path = join(scratch(), `${id}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      id,
      subject: "asker",
      capabilities: [
        {
          resource: { namespace: "messages", path: [recipient], owner: "alice" },
          actions: ["messages.send"],
          scope: "exact",
        },
      ],
      constraints: { maxUses: 1 },
    }),
  );
  return path;
};

beforeAll(async () => {
  dataDir = join(scratch(), "data");
  const init = run({}, "init", dataDir, "--namespace", "team", "--port", "0", "--json");
  ({ issuerToken } = JSON.parse(init.stdout) as { issuerToken: string });
  // The operator adds an agent beside the issuer init made: a digest, never the token.
  const file = join(dataDir, "principals.json");
  const { principals } = JSON.parse(readFileSync(file, "utf8")) as { principals: unknown[] };
  principals.push({
    tokenSha256: tokenDigest(AGENT),
    role: "agent",
    namespaceId: "team",
    actor: "asker",
    authority: "host",
    owner: "alice",
  });
  writeFileSync(file, JSON.stringify({ principals }));
  served = await serveProcess(["--data", dataDir]);
  agent = createTesseraClient({ url: served.url, token: AGENT });
}, 60_000);

afterAll(async () => {
  await served?.stop();
});

describe("grants over the service", () => {
  it("issues, in text and JSON; the namespace and issuer are the token's", () => {
    expect(ok(asIssuer("grants", "issue", "--file", grantFile("g-bob", "bob")))).toBe(
      "issued g-bob in team to asker\n",
    );
    const issued = JSON.parse(
      ok(asIssuer("grants", "issue", "--file", grantFile("g-carol", "carol"), "--json")),
    );
    expect(issued).toMatchObject({ id: "g-carol", namespaceId: "team", issuer: "host" });
  });

  it("refuses a grant request that does not match the schema, before any request", () => {
    const bad = join(scratch(), "bad.json");
    writeFileSync(bad, JSON.stringify({ subject: "asker" }));
    textError(asIssuer("grants", "issue", "--file", bad), "invalid_grant");
    expect(
      jsonError(asIssuer("grants", "issue", "--file", bad, "--json"), "invalid_grant").message,
    ).toContain("capabilities");
  });

  it("a --namespace beside the service is told it goes with --store", () => {
    const refused = asIssuer("grants", "revoke", "--id", "g-x", "--namespace", "team");
    textError(refused, "invalid_usage");
    expect(refused.stderr).toContain("--namespace goes with --store");
  });

  it("lists with usage counts, in text and JSON", async () => {
    await agent.sendMessage({ recipient: "bob", payload: "hi", callId: "send-1" });
    const text = ok(asIssuer("grants", "list"));
    expect(text).toMatch(/^g-bob {2}subject=asker issuer=host maxUses 1 used (0 active|1 spent)$/m);
    const listed = JSON.parse(ok(asIssuer("grants", "list", "--json"))) as {
      grant: { id: string };
      uses: number;
    }[];
    expect(listed.map((entry) => entry.grant.id).sort()).toEqual(["g-bob", "g-carol"]);
  });

  it("revokes, in text and JSON", () => {
    expect(ok(asIssuer("grants", "revoke", "--id", "g-carol"))).toBe("revoked g-carol\n");
    expect(JSON.parse(ok(asIssuer("grants", "revoke", "--id", "g-carol", "--json")))).toEqual({
      revoked: "g-carol",
    });
  });

  it("an agent token is forbidden and a wrong one unauthenticated, as text or JSON", () => {
    textError(asAgent("grants", "list"), "forbidden");
    expect(jsonError(asAgent("grants", "list", "--json"), "forbidden")).toMatchObject({
      status: 403,
    });
    const stranger = run(
      { TESSERA_URL: served.url, TESSERA_TOKEN: "nobody" },
      "grants",
      "list",
      "--json",
    );
    expect(jsonError(stranger, "unauthenticated")).toMatchObject({ status: 401 });
  });

  it("flags win over the environment", () => {
    const done = run(
      { TESSERA_URL: served.url, TESSERA_TOKEN: "nobody" },
      "grants",
      "list",
      "--token",
      issuerToken,
    );
    expect(ok(done)).toContain("g-bob");
  });

  it("a service that does not answer is service_unreachable", () => {
    const done = run(
      { TESSERA_URL: "http://127.0.0.1:9", TESSERA_TOKEN: "t" },
      "grants",
      "list",
      "--json",
    );
    jsonError(done, "service_unreachable");
  });

  it("refuses a service and a store at once, and says where when neither is named", () => {
    textError(
      asIssuer("grants", "list", "--url", served.url, "--store", "sqlite:x.db"),
      "invalid_usage",
    );
    textError(run({}, "grants", "list"), "invalid_config");
    // The token names the namespace: a --namespace that would be ignored is refused instead.
    textError(asIssuer("grants", "list", "--namespace", "other"), "invalid_usage");
  });
});

describe("explain, audit and claims over the service", () => {
  beforeAll(async () => {
    // The same call as in the grants tests: a repeat answers the original, adds no event.
    await agent.sendMessage({ recipient: "bob", payload: "hi", callId: "send-1" });
    await agent.authorize({
      action: "messages.send",
      resource: { namespace: "messages", path: ["dave"], owner: "alice" },
      callId: "ask-dave",
    });
  });

  it("explain CALL_ID, in text and JSON", () => {
    expect(ok(asAgent("explain", "ask-dave"))).toMatch(/^\w+: .+\n$/);
    expect(JSON.parse(ok(asAgent("explain", "ask-dave", "--json")))).toMatchObject({
      callId: "ask-dave",
      code: expect.any(String),
    });
  });

  it("explain refuses principal flags against a service: the token names the principal", () => {
    textError(asAgent("explain", "ask-dave", "--actor", "someone"), "invalid_usage");
  });

  it("audit query by call ID, in text and JSON", () => {
    expect(ok(asAgent("audit", "query", "--call-id", "ask-dave"))).toMatch(
      / denied .* call=ask-dave\n$/,
    );
    const events = JSON.parse(ok(asAgent("audit", "query", "--call-id", "ask-dave", "--json")));
    expect(events).toEqual([expect.objectContaining({ callId: "ask-dave", outcome: "denied" })]);
    jsonError(asAgent("audit", "query", "--json"), "invalid_usage");
  });

  it("audit tail by call ID, in text and JSON lines", () => {
    expect(ok(asAgent("audit", "tail", "--call-id", "send-1"))).toMatch(
      / (allowed|denied) .* call=send-1\n$/,
    );
    const lines = ok(asAgent("audit", "tail", "--call-id", "send-1", "--json"))
      .trim()
      .split("\n");
    expect(lines.map((line) => JSON.parse(line).callId)).toEqual(["send-1"]);
  });

  it("claims --in-doubt, in text and JSON", () => {
    expect(ok(asAgent("claims", "--in-doubt"))).toContain("0 claim(s) in doubt");
    expect(JSON.parse(ok(asAgent("claims", "--in-doubt", "--json")))).toEqual([]);
    textError(asAgent("claims", "--in-doubt", "--session", "s"), "invalid_usage");
  });

  it("takes the service's URL from --data, the token from the environment", () => {
    const done = run(
      { TESSERA_TOKEN: AGENT, TESSERA_DATA: dataDir },
      "claims",
      "--in-doubt",
      "--json",
    );
    // init wrote port 0: the directory names no port a client can reach, and says so.
    jsonError(done, "invalid_config");
    expect(done.stderr).toContain("port 0");
  });

  it("audit tail --follow prints each new decision as it is recorded, from the store", async () => {
    const child = spawn(process.execPath, [
      BIN,
      "audit",
      "tail",
      "--store",
      `sqlite:${join(dataDir, "tessera.db")}`,
      "--follow",
      "--interval",
      "100",
      "-n",
      "1000",
      "--json",
    ]);
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    // The trail so far is printed first; once it is, the next decision is a new one.
    const started = Date.now() + 20_000;
    while (!out.includes('"ask-dave"') && Date.now() < started) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const before = out.trim().split("\n").length;
    await agent.authorize({
      action: "messages.send",
      resource: { namespace: "messages", path: ["erin"], owner: "alice" },
      callId: "ask-erin",
    });
    const deadline = Date.now() + 10_000;
    while (!out.includes("ask-erin") && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    const events = out
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { callId: string });
    expect(events.slice(0, before).map((event) => event.callId)).toContain("ask-dave");
    expect(events.slice(before).map((event) => event.callId)).toEqual(["ask-erin"]);
  }, 45_000);
});
