import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openStores } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ServeProcess, serveProcess } from "./support/processes.js";
import { call, principal } from "./support/service.js";

/**
 * A real `tessera serve` process takes a new principals file on SIGHUP, whole or not at all:
 * a revoked token (`tessera tokens revoke`) is refused from the next request, a new one is
 * let in, and a malformed file keeps the set in force and says why. No restart.
 */
const BIN = fileURLToPath(new URL("../../cli/dist/bin.js", import.meta.url));
const identity = (actor: string) => ({ namespaceId: "team", actor, authority: "host" });
const alice = principal("token-alice-reload", identity("alice"));
const bob = principal("token-bob-reload", identity("bob"));
const carol = principal("token-carol-reload", identity("carol"));

let dir: string;
let file: string;
let served: ServeProcess;

/** Replaces the file as an operator's tool should: written aside, then renamed over it. */
function writePrincipals(content: string): void {
  const aside = `${file}.new`;
  writeFileSync(aside, content, { mode: 0o600 });
  renameSync(aside, file);
}

function tessera(...args: string[]) {
  const run = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** Sends SIGHUP and waits (at most 10 s) until the service has said it handled this one. */
async function hangUp(expected: RegExp): Promise<string> {
  const before = served.output().length;
  served.child.kill("SIGHUP");
  for (let waited = 0; waited < 10_000; waited += 50) {
    const said = served.output().slice(before);
    if (expected.test(said)) return said;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no ${expected} after SIGHUP: ${served.output().slice(before)}`);
}

const status = async (token: string) =>
  (await call(served.url, "GET", "/v1/tools", { token })).status;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reload-"));
  file = join(dir, "principals.json");
  writePrincipals(JSON.stringify({ principals: [alice.config, bob.config] }));
  const store = `sqlite:${join(dir, "t.db")}`;
  await (await openStores(store)).close();
  served = await serveProcess(["--store", store, "--principals", file]);
}, 30_000);

afterAll(async () => {
  await served?.stop(2000);
});

describe("tessera serve on SIGHUP", () => {
  it("refuses a revoked token from the next request, without a restart", async () => {
    expect([await status(alice.token), await status(bob.token)]).toEqual([200, 200]);

    const revoked = tessera("tokens", "revoke", bob.config.tokenSha256, "--principals", file);
    expect(revoked.stderr).toBe("");
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(/removed agent team\/bob .* 1 remain/);
    expect(JSON.parse(readFileSync(file, "utf8")).principals).toEqual([alice.config]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // The file alone changes nothing: the service reads it on SIGHUP.
    expect(await status(bob.token)).toBe(200);

    expect(await hangUp(/principals reloaded from .*: 1 in force/)).not.toMatch(/warning/);
    expect(served.child.exitCode).toBeNull();
    expect([await status(alice.token), await status(bob.token)]).toEqual([200, 401]);
  });

  it("keeps the set in force when the file is malformed, and says why", async () => {
    for (const [content, reason] of [
      ['{ "principals": [', /invalid_config: the principals file is not JSON/],
      [JSON.stringify({ principals: [] }), /invalid_config: no principal and no identity provider/],
      [JSON.stringify({ principals: [{ ...carol.config, role: "root" }] }), /principals\.0\.role/],
    ] as const) {
      writePrincipals(content);
      const said = await hangUp(/principals not reloaded/);
      expect(said).toMatch(/the 1 in force stay/);
      expect(said).toMatch(reason);
      expect([await status(alice.token), await status(bob.token)]).toEqual([200, 401]);
      expect(await status(carol.token)).toBe(401);
    }
    // The service's own JSON log says it too.
    expect(served.output()).toMatch(/"msg":"principals not reloaded"/);
  });

  it("lets a new token in once the file checks again", async () => {
    writePrincipals(JSON.stringify({ principals: [alice.config, carol.config] }));
    await hangUp(/principals reloaded from .*: 2 in force/);
    expect([await status(alice.token), await status(carol.token)]).toEqual([200, 200]);
    expect(await status(bob.token)).toBe(401);
  });

  it("takes a token minted by tokens add (namespace and authority the file's), listed by digest", async () => {
    const added = tessera("tokens", "add", "--actor", "dave", "--principals", file, "--json");
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    const { token, principal: dave } = JSON.parse(added.stdout) as {
      token: string;
      principal: Record<string, string>;
    };
    expect(token).toMatch(/^tsk_[A-Za-z0-9_-]{43}$/);
    expect(dave).toMatchObject({
      role: "agent",
      namespaceId: "team",
      actor: "dave",
      authority: "host",
    });
    // Only the digest is kept; the file stays owner-only.
    expect(readFileSync(file, "utf8")).not.toContain(token);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await status(token)).toBe(401);
    await hangUp(/principals reloaded from .*: 3 in force/);
    expect(await status(token)).toBe(200);

    const listed = tessera("tokens", "list", "--principals", file);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(`3 principal(s) in ${file}`);
    expect(listed.stdout).toMatch(
      new RegExp(`${dave.tokenSha256}\\s+agent\\s+team/dave authority=host`),
    );
    expect(listed.stdout).not.toContain("tsk_");
    expect(await served.stop(5000)).toBe(0);
  });
});

describe("tessera tokens add", () => {
  it("refuses what serve would refuse, and a namespace it cannot tell, changing nothing", () => {
    const mixed = join(dir, "mixed.json");
    const other = principal("token-erin-other", {
      namespaceId: "other",
      actor: "erin",
      authority: "host",
    });
    writeFileSync(mixed, JSON.stringify({ principals: [alice.config, other.config] }), {
      mode: 0o600,
    });
    const before = readFileSync(mixed, "utf8");
    const unsure = tessera("tokens", "add", "--actor", "frank", "--principals", mixed);
    expect(unsure.code).toBe(2);
    expect(unsure.stderr).toMatch(
      /^tessera: invalid_usage: the principals file names several \(team, other\): pass --namespace/,
    );
    const hostile = tessera(
      "tokens",
      "add",
      "--actor",
      "x".repeat(513),
      "--namespace",
      "team",
      "--principals",
      mixed,
    );
    expect(hostile.code).toBe(2);
    expect(hostile.stderr).toMatch(/^tessera: invalid_config: .*principals\.2\.actor/);
    const role = tessera(
      "tokens",
      "add",
      "--actor",
      "frank",
      "--role",
      "root",
      "--principals",
      mixed,
    );
    expect(role.code).toBe(2);
    expect(readFileSync(mixed, "utf8")).toBe(before);
    const missing = tessera(
      "tokens",
      "add",
      "--actor",
      "frank",
      "--principals",
      join(dir, "none.json"),
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^tessera: file_not_found: /);
    // Named outright, it is added: an issuer of the other namespace.
    const issuer = tessera(
      "tokens",
      "add",
      "--actor",
      "frank",
      "--role",
      "issuer",
      "--namespace",
      "other",
      "--principals",
      mixed,
      "--json",
    );
    expect(issuer.code, issuer.stderr).toBe(0);
    expect(JSON.parse(readFileSync(mixed, "utf8")).principals.at(-1)).toMatchObject({
      role: "issuer",
      namespaceId: "other",
      actor: "frank",
      authority: "host",
    });
  });
});

describe("tessera tokens revoke", () => {
  it("refuses an unknown token, the last principal and a malformed digest, changing nothing", () => {
    const alone = join(dir, "alone.json");
    writeFileSync(alone, JSON.stringify({ principals: [alice.config] }), { mode: 0o600 });
    const before = readFileSync(alone, "utf8");
    const unknown = tessera("tokens", "revoke", bob.config.tokenSha256, "--principals", alone);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^tessera: invalid_input: no principal in .* holds the token/);
    const last = tessera("tokens", "revoke", alice.config.tokenSha256, "--principals", alone);
    expect(last.code).toBe(2);
    expect(last.stderr).toMatch(/^tessera: invalid_input: that is the only principal/);
    const malformed = tessera("tokens", "revoke", "ABC", "--principals", alone);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(/^tessera: invalid_usage: .*64 lowercase hex/);
    expect(readFileSync(alone, "utf8")).toBe(before);
  });

  it("removes the last principal when the service also takes an identity provider's tokens", () => {
    const alone = join(dir, "alone-with-identity.json");
    writeFileSync(alone, JSON.stringify({ principals: [alice.config] }), { mode: 0o600 });
    // revoke only needs to know that there is one (serve reads the file).
    const env = { ...process.env, TESSERA_IDENTITY: join(dir, "identity.json") };
    const args = ["tokens", "revoke", alice.config.tokenSha256, "--principals", alone, "--json"];
    const run = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", env });
    const last = { code: run.status, stdout: run.stdout, stderr: run.stderr };
    expect(last.code, last.stderr).toBe(0);
    expect(JSON.parse(last.stdout).remaining).toBe(0);
    expect(JSON.parse(readFileSync(alone, "utf8")).principals).toEqual([]);
  });
});
