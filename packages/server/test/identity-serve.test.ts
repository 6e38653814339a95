import { spawnSync } from "node:child_process";
import { mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openStores } from "@tessera/core";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signingKey } from "./support/oidc.js";
import { type ServeProcess, serveProcess } from "./support/processes.js";
import { call, principal } from "./support/service.js";

/**
 * A real `tessera serve --identity FILE` process: the identity provider's tokens (keys from a
 * JWKS file beside the identity file) are let in as their mapped principal beside the static
 * principals, and a refused one is logged by reason without the token. Then one with
 * `--identity` alone (JWT-only), whose identity file follows SIGHUP.
 */
const ISSUER = "https://login.example.test/";
const AUDIENCE = "https://tessera.example.test/";
const staticAgent = principal("static-token-serve-identity", {
  namespaceId: "team",
  actor: "alice",
  authority: "host",
});
let served: ServeProcess;
let dir: string;
let store: string;
let key: Awaited<ReturnType<typeof signingKey>>;

const token = (claims: Record<string, unknown>, audience = AUDIENCE) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: "ES256", kid: key.kid })
    .setIssuer(ISSUER)
    .setAudience(audience)
    .setExpirationTime("5m")
    .sign(key.privateKey);

const identityFile = (audience: string) => ({
  issuer: ISSUER,
  audience,
  jwksFile: "keys.json",
  algorithms: ["ES256"],
  claims: {
    namespaceId: { value: "team" },
    actor: { claim: "sub" },
    authority: { value: "host" },
    role: { claim: "role" },
  },
});

/** Sends SIGHUP and waits (at most 10 s) until the process said it handled this one. */
async function hangUp(target: ServeProcess, expected: RegExp): Promise<string> {
  const before = target.output().length;
  target.child.kill("SIGHUP");
  for (let waited = 0; waited < 10_000; waited += 50) {
    const said = target.output().slice(before);
    if (expected.test(said)) return said;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no ${expected} after SIGHUP: ${target.output().slice(before)}`);
}

beforeAll(async () => {
  key = await signingKey("serve-1");
  dir = mkdtempSync(join(tmpdir(), "serve-identity-"));
  writeFileSync(
    join(dir, "principals.json"),
    JSON.stringify({ principals: [staticAgent.config] }),
    {
      mode: 0o600,
    },
  );
  writeFileSync(join(dir, "keys.json"), JSON.stringify({ keys: [key.publicJwk] }));
  writeFileSync(join(dir, "identity.json"), JSON.stringify(identityFile(AUDIENCE)));
  store = `sqlite:${join(dir, "t.db")}`;
  await (await openStores(store)).close();
  served = await serveProcess([
    "--store",
    store,
    "--principals",
    join(dir, "principals.json"),
    "--identity",
    join(dir, "identity.json"),
  ]);
}, 30_000);

afterAll(async () => {
  await served?.stop(2000);
});

describe("tessera serve --identity", () => {
  it("lets the provider's tokens in beside the static ones, and logs a refusal by reason", async () => {
    const agent = await token({ sub: "bob", role: "agent" });
    expect((await call(served.url, "GET", "/v1/tools", { token: agent })).status).toBe(200);
    expect((await call(served.url, "GET", "/v1/tools", { token: staticAgent.token })).status).toBe(
      200,
    );
    const elsewhere = await token({ sub: "bob", role: "agent" }, "https://elsewhere.test/");
    expect((await call(served.url, "GET", "/v1/tools", { token: elsewhere })).status).toBe(401);
    const unmapped = await token({ sub: "bob" });
    expect((await call(served.url, "GET", "/v1/tools", { token: unmapped })).status).toBe(403);
    for (let waited = 0; waited < 5000 && !/claim role/.test(served.output()); waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const output = served.output();
    expect(output).toMatch(/bearer token refused: the token is for another audience/);
    expect(output).toMatch(/bearer token refused: the claim role \(role\) is missing/);
    expect(output).not.toContain(agent);
    expect(output).not.toContain(elsewhere.split(".")[2]);
  });
});

describe("tessera serve --identity without principals (JWT-only)", () => {
  it("refuses to start with neither principals nor an identity provider, naming both", () => {
    const bin = fileURLToPath(new URL("../../cli/dist/bin.js", import.meta.url));
    const run = spawnSync(process.execPath, [bin, "serve", "--store", store], {
      encoding: "utf8",
      timeout: 60_000,
      env: Object.fromEntries(
        Object.entries(process.env).filter(([name]) => !name.startsWith("TESSERA_")),
      ),
    });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(
      /invalid_config: say who may call: .*--principals FILE.*--identity FILE/,
    );
  });

  it("starts, lets the provider's tokens in, refuses a static one, and reloads the identity file on SIGHUP", async () => {
    const identity = join(dir, "jwt-only-identity.json");
    writeFileSync(identity, JSON.stringify(identityFile(AUDIENCE)));
    const jwtOnly = await serveProcess(["--store", store, "--identity", identity]);
    try {
      const agent = await token({ sub: "bob", role: "agent" });
      expect((await call(jwtOnly.url, "GET", "/v1/tools", { token: agent })).status).toBe(200);
      const refused = await call(jwtOnly.url, "GET", "/v1/tools", { token: staticAgent.token });
      expect(refused.status).toBe(401);

      // A new audience, written aside and renamed over the file, in force after SIGHUP.
      const renamed = "https://renamed.example.test/";
      writeFileSync(`${identity}.new`, JSON.stringify(identityFile(renamed)));
      renameSync(`${identity}.new`, identity);
      expect(await hangUp(jwtOnly, /identity reloaded from .*: tokens of /)).not.toMatch(/warning/);
      expect((await call(jwtOnly.url, "GET", "/v1/tools", { token: agent })).status).toBe(401);
      const forRenamed = await token({ sub: "bob", role: "agent" }, renamed);
      expect((await call(jwtOnly.url, "GET", "/v1/tools", { token: forRenamed })).status).toBe(200);

      // A broken file keeps the identity in force and says why.
      writeFileSync(identity, "{ not json");
      expect(await hangUp(jwtOnly, /identity not reloaded/)).toMatch(/invalid_config/);
      expect((await call(jwtOnly.url, "GET", "/v1/tools", { token: forRenamed })).status).toBe(200);
    } finally {
      expect(await jwtOnly.stop(5000)).toBe(0);
    }
  });
});
