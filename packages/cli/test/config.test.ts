import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isTesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { loadClientTarget, loadServeConfig } from "../src/config/load.js";
import { BIN, scratch } from "./support/cli.js";

/** A data directory holding exactly this tessera.json. */
function dataDir(config: unknown): string {
  const dir = join(scratch(), "data");
  mkdirSync(dir, { mode: 0o700 });
  chmodSync(dir, 0o700);
  writeFileSync(join(dir, "tessera.json"), JSON.stringify(config));
  return dir;
}

const base = { version: 1, store: "sqlite:tessera.db", principals: "principals.json" };

function refusal(task: () => unknown): { code: string; message: string } {
  try {
    task();
  } catch (error) {
    if (isTesseraError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error("expected a refusal");
}

describe("serve configuration: file < environment < flags", () => {
  it("reads the file, resolving its relative paths and sqlite file in the data directory", () => {
    const dir = dataDir({ ...base, claims: "claims", port: 9000 });
    expect(loadServeConfig({ data: dir }, {})).toEqual({
      dataDir: dir,
      store: `sqlite:${dir}/tessera.db`,
      principals: `${dir}/principals.json`,
      claims: `${dir}/claims`,
      host: "127.0.0.1",
      port: 9000,
    });
  });

  it("keeps a sqlite URL's options and an absolute path as written", () => {
    const dir = dataDir({ ...base, store: "sqlite:db/t.db?create=false&synchronous=normal" });
    expect(loadServeConfig({ data: dir }, {}).store).toBe(
      `sqlite:${dir}/db/t.db?create=false&synchronous=normal`,
    );
    const absolute = dataDir({ ...base, store: "sqlite:/srv/t.db" });
    expect(loadServeConfig({ data: absolute }, {}).store).toBe("sqlite:/srv/t.db");
  });

  it("lets the environment override the file, and flags override both", () => {
    const dir = dataDir({ ...base, host: "127.0.0.2", port: 9000 });
    const env = { TESSERA_DATA: dir, TESSERA_PORT: "9001", TESSERA_STORE: "redis://r:6379" };
    expect(loadServeConfig({}, env)).toMatchObject({
      host: "127.0.0.2",
      port: 9001,
      store: "redis://r:6379",
    });
    expect(
      loadServeConfig({ port: 9002, store: "postgres://p/db", host: "::1" }, env),
    ).toMatchObject({ host: "::1", port: 9002, store: "postgres://p/db" });
  });

  it("layers the request timeouts like every other key, each on its own", () => {
    const dir = dataDir({ ...base, headersTimeoutMs: 2000, requestTimeoutMs: 20_000 });
    expect(loadServeConfig({ data: dir }, {}).timeouts).toEqual({
      headersTimeoutMs: 2000,
      requestTimeoutMs: 20_000,
    });
    expect(loadServeConfig({ data: dataDir(base) }, {})).not.toHaveProperty("timeouts");
    const env = { TESSERA_DATA: dir, TESSERA_REQUEST_TIMEOUT_MS: "15000" };
    expect(loadServeConfig({}, env).timeouts).toEqual({
      headersTimeoutMs: 2000,
      requestTimeoutMs: 15_000,
    });
    expect(
      loadServeConfig({ requestTimeout: 9000, connectionTimeout: 60_000 }, env).timeouts,
    ).toEqual({ headersTimeoutMs: 2000, requestTimeoutMs: 9000, connectionTimeoutMs: 60_000 });
    expect(
      refusal(() => loadServeConfig({}, { ...env, TESSERA_KEEP_ALIVE_TIMEOUT_MS: "0" })),
    ).toMatchObject({ code: "invalid_config", message: /TESSERA_KEEP_ALIVE_TIMEOUT_MS/ });
    expect(
      refusal(() => loadServeConfig({ data: dataDir({ ...base, requestTimeoutMs: 1.5 }) }, {})),
    ).toMatchObject({ code: "invalid_config", message: /requestTimeoutMs/ });
  });

  it("uses the private claim directory only with the file's own store", () => {
    const dir = dataDir({ ...base, claims: "claims" });
    expect(loadServeConfig({ data: dir }, {}).claims).toBe(`${dir}/claims`);
    // A shared store named elsewhere brings its shared claims: a directory is one machine's.
    expect(loadServeConfig({ data: dir, store: "postgres://p/db" }, {})).not.toHaveProperty(
      "claims",
    );
    expect(loadServeConfig({ data: dir }, { TESSERA_STORE: "redis://r" })).not.toHaveProperty(
      "claims",
    );
  });

  it("finds the webhook and A2UI files in the data directory, the environment or a flag", () => {
    const dir = dataDir({ ...base, webhooks: "hooks.json", a2ui: "a2ui.json" });
    expect(loadServeConfig({ data: dir }, {})).toMatchObject({
      webhooks: `${dir}/hooks.json`,
      a2ui: `${dir}/a2ui.json`,
    });
    expect(
      loadServeConfig(
        { data: dir, a2ui: "/flag/a2ui.json" },
        { TESSERA_WEBHOOKS: "/env/hooks.json" },
      ),
    ).toMatchObject({ webhooks: "/env/hooks.json", a2ui: "/flag/a2ui.json" });
  });

  it("finds the identity provider's file in the data directory, the environment or a flag", () => {
    const dir = dataDir({ ...base, identity: "identity.json" });
    expect(loadServeConfig({ data: dir }, {})).toMatchObject({ identity: `${dir}/identity.json` });
    expect(
      loadServeConfig({ data: dir }, { TESSERA_IDENTITY: "/env/identity.json" }),
    ).toMatchObject({ identity: "/env/identity.json" });
    expect(loadServeConfig({ data: dir, identity: "/flag/id.json" }, {})).toMatchObject({
      identity: "/flag/id.json",
    });
  });

  it("works without a data directory from flags or environment alone, defaulting to loopback:8787", () => {
    expect(loadServeConfig({ store: "sqlite:x.db", principals: "p.json" }, {})).toEqual({
      store: "sqlite:x.db",
      principals: "p.json",
      host: "127.0.0.1",
      port: 8787,
    });
  });

  it("names the file and key of a bad value, and refuses unknown keys", () => {
    const dir = dataDir({ ...base, port: 70_000 });
    expect(refusal(() => loadServeConfig({ data: dir }, {}))).toEqual({
      code: "invalid_config",
      message: expect.stringMatching(/tessera\.json: port: .*65535/),
    });
    const typo = dataDir({ ...base, prot: 1 });
    expect(refusal(() => loadServeConfig({ data: typo }, {})).message).toContain('"prot"');
    const old = dataDir({ ...base, version: 2 });
    expect(refusal(() => loadServeConfig({ data: old }, {})).message).toContain("version");
    const notJson = dataDir({});
    writeFileSync(join(notJson, "tessera.json"), "{ nope");
    expect(refusal(() => loadServeConfig({ data: notJson }, {})).message).toContain("not JSON");
  });

  it("names the variable of a bad value, and refuses an empty one", () => {
    expect(
      refusal(() =>
        loadServeConfig({ store: "sqlite:x", principals: "p" }, { TESSERA_PORT: "80a" }),
      ),
    ).toEqual({
      code: "invalid_config",
      message: "environment: TESSERA_PORT: expected a whole number from 0 to 65535",
    });
    expect(
      refusal(() => loadServeConfig({ store: "sqlite:x", principals: "p" }, { TESSERA_STORE: "" }))
        .message,
    ).toContain("TESSERA_STORE");
    expect(
      refusal(() => loadServeConfig({ store: "sqlite:x", principals: "p" }, { TESSERA_TLS: "yes" }))
        .message,
    ).toContain("TESSERA_TLS");
  });

  it("says what is missing when nothing names a store or principals", () => {
    expect(refusal(() => loadServeConfig({}, {}))).toEqual({
      code: "invalid_config",
      message: expect.stringContaining("--data DIR"),
    });
    expect(refusal(() => loadServeConfig({ store: "sqlite:x" }, {})).message).toContain(
      "--principals",
    );
  });
});

describe("client target: flags < environment < data directory URL", () => {
  it("takes flags first, then TESSERA_URL and TESSERA_TOKEN", () => {
    const env = { TESSERA_URL: "http://env:1", TESSERA_TOKEN: "env-token" };
    expect(loadClientTarget({}, env)).toEqual({ url: "http://env:1", token: "env-token" });
    expect(loadClientTarget({ url: "http://flag:2", token: "flag-token" }, env)).toEqual({
      url: "http://flag:2",
      token: "flag-token",
    });
  });

  it("derives the URL from a data directory's host and port, never a token", () => {
    const dir = dataDir({ ...base, host: "::1", port: 9100 });
    expect(loadClientTarget({ data: dir, token: "t" }, {})).toEqual({
      url: "http://[::1]:9100",
      token: "t",
    });
    expect(refusal(() => loadClientTarget({ data: dir }, {})).message).toContain("TESSERA_TOKEN");
  });

  it("refuses a data directory whose port is chosen at start (0), naming --url", () => {
    const dir = dataDir({ ...base, port: 0 });
    const refused = refusal(() => loadClientTarget({ data: dir, token: "t" }, {}));
    expect(refused.code).toBe("invalid_config");
    expect(refused.message).toContain("port 0");
    expect(refused.message).toContain("--url");
    // A URL given outright is used as given.
    expect(loadClientTarget({ data: dir, url: "http://127.0.0.1:4", token: "t" }, {})).toEqual({
      url: "http://127.0.0.1:4",
      token: "t",
    });
  });

  it("is undefined when nothing names a service, and refuses a bad TESSERA_URL", () => {
    expect(loadClientTarget({}, {})).toBeUndefined();
    expect(refusal(() => loadClientTarget({}, { TESSERA_URL: "ftp://x" })).message).toContain(
      "TESSERA_URL",
    );
    expect(refusal(() => loadClientTarget({}, { TESSERA_TOKEN: "t" })).message).toContain("--url");
  });

  it("holds --url to TESSERA_URL's rule: the same invalid_config, naming the flag", () => {
    for (const url of ["127.0.0.1:18301", "ftp://x", "localhost:8787"]) {
      const fromFlag = refusal(() => loadClientTarget({ url, token: "t" }, {}));
      const fromEnv = refusal(() => loadClientTarget({}, { TESSERA_URL: url, TESSERA_TOKEN: "t" }));
      expect(fromFlag).toEqual({
        code: "invalid_config",
        message: "--url: expected an http:// or https:// URL",
      });
      expect(fromEnv).toEqual({
        code: "invalid_config",
        message: "environment: TESSERA_URL: expected an http:// or https:// URL",
      });
    }
  });
});

/** Starts serve, collects stderr until it listens, then stops it. */
async function serveStderr(args: string[], env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [BIN, "serve", ...args], {
    env: { ...process.env, ...env },
  });
  let stderr = "";
  await new Promise<void>((resolve, reject) => {
    // "listening on" is text on stderr: stdout holds only JSON.
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes("tessera serve: listening on")) resolve();
    });
    child.once("close", (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
  const exited = new Promise((resolve) => child.once("close", resolve));
  child.kill("SIGTERM");
  await exited;
  return stderr;
}

describe("the bind address", () => {
  const principals = () => {
    const path = join(scratch(), "p.json");
    writeFileSync(
      path,
      JSON.stringify({
        principals: [{ tokenSha256: "a".repeat(64), namespaceId: "n", actor: "a", authority: "h" }],
      }),
      { mode: 0o600 },
    );
    return path;
  };

  it("warns when serving beyond loopback without TLS, and not when TLS is in front", async () => {
    const args = () => [
      "--store",
      `sqlite:${join(scratch(), "s.db")}`,
      "--principals",
      principals(),
      "--host",
      "0.0.0.0",
      "--port",
      "0",
    ];
    expect(await serveStderr(args(), {})).toContain("warning: listening on 0.0.0.0 without TLS");
    expect(await serveStderr(args(), { TESSERA_TLS: "proxy" })).not.toContain("without TLS");
  });

  it("announces listening, stopping and stopped as JSON lines with --json", async () => {
    const child = spawn(process.execPath, [
      BIN,
      "serve",
      "--store",
      `sqlite:${join(scratch(), "s.db")}`,
      "--principals",
      principals(),
      "--port",
      "0",
      "--json",
    ]);
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
    const deadline = Date.now() + 20_000;
    while (!stdout.includes('"event":"listening"') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    const events = stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { event?: string; url?: string })
      .filter((line) => line.event !== undefined);
    expect(events).toEqual([
      { event: "listening", url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) },
      { event: "stopping" },
      { event: "stopped" },
    ]);
  });

  it("does not warn on loopback", async () => {
    const args = [
      "--store",
      `sqlite:${join(scratch(), "s.db")}`,
      "--principals",
      principals(),
      "--port",
      "0",
    ];
    expect(await serveStderr(args, {})).not.toContain("without TLS");
  });

  it("warns when no webhooks are configured (no send is offered), and not when they are", async () => {
    const args = ["--store", `sqlite:${join(scratch(), "s.db")}`, "--principals", principals()];
    expect(await serveStderr([...args, "--port", "0"], {})).toContain(
      "warning: no webhooks configured: messages.send is not offered",
    );
    const hooks = join(scratch(), "hooks.json");
    writeFileSync(
      hooks,
      JSON.stringify({
        recipients: { bob: { url: "http://127.0.0.1:9/in", secret: "0123456789abcdef" } },
      }),
      { mode: 0o600 },
    );
    const stderr = await serveStderr([...args, "--webhooks", hooks, "--port", "0"], {});
    expect(stderr).not.toContain("warning");
  });
});
