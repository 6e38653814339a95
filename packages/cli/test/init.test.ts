import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { createTesseraClient } from "@tessera/client";
import { tokenDigest } from "@tessera/server";
import { describe, expect, it } from "vitest";
import { BIN, expectRefusal, scratch, serveProcess, tesseraWith } from "./support/cli.js";

const run = tesseraWith;

const mode = (path: string) => (lstatSync(path).mode & 0o777).toString(8);

interface Made {
  dataDir: string;
  config: string;
  database: string;
  claims: string;
  principals: string;
  issuerToken: string;
  agentToken: string;
}

function init(dir: string, ...more: string[]): Made {
  const done = run({}, "init", dir, "--json", ...more);
  expect(done.stderr).toBe("");
  expect(done.code).toBe(0);
  return JSON.parse(done.stdout) as Made;
}

describe("tessera init", () => {
  it("provisions a private directory: claims 0700, database, config and principals 0600", () => {
    const dir = join(scratch(), "data");
    const made = init(dir);
    expect(made.dataDir).toBe(dir);
    expect(readdirSync(dir).sort()).toEqual(
      ["claims", "principals.json", "tessera.db", "tessera.json"].sort(),
    );
    expect(mode(dir)).toBe("700");
    expect(mode(made.claims)).toBe("700");
    for (const file of [made.config, made.database, made.principals])
      expect(mode(file)).toBe("600");
    expect(JSON.parse(readFileSync(made.config, "utf8"))).toEqual({
      version: 1,
      store: "sqlite:tessera.db?create=false",
      principals: "principals.json",
      claims: "claims",
      host: "127.0.0.1",
      port: 8787,
    });
  });

  it("prints the issuer and agent tokens once and stores only their SHA-256", () => {
    const dir = join(scratch(), "data");
    const made = init(dir, "--namespace", "team", "--authority", "owner-host", "--agent", "bot");
    expect(made.issuerToken).toMatch(/^tsk_[\w-]{43}$/);
    expect(made.agentToken).toMatch(/^tsk_[\w-]{43}$/);
    expect(made.agentToken).not.toBe(made.issuerToken);
    expect(JSON.parse(readFileSync(made.principals, "utf8"))).toEqual({
      principals: [
        {
          tokenSha256: tokenDigest(made.issuerToken),
          role: "issuer",
          namespaceId: "team",
          actor: "issuer",
          authority: "owner-host",
        },
        {
          tokenSha256: tokenDigest(made.agentToken),
          role: "agent",
          namespaceId: "team",
          actor: "bot",
          authority: "owner-host",
        },
      ],
    });
    for (const file of [made.config, made.principals, made.database]) {
      expect(readFileSync(file).includes(made.issuerToken)).toBe(false);
      expect(readFileSync(file).includes(made.agentToken)).toBe(false);
    }
    // Two inits, two tokens: nothing is derived from the directory or the clock.
    expect(init(join(scratch(), "other")).issuerToken).not.toBe(made.issuerToken);
  });

  it("says where everything is in plain text too, token included", () => {
    const dir = join(scratch(), "data");
    const done = run({}, "init", dir);
    expect(done.code).toBe(0);
    expect(done.stdout).toContain(`provisioned ${dir}`);
    expect(done.stdout).toMatch(/issuer token \(shown once[^\n]*\n {2}tsk_[\w-]{43}\n/);
    expect(done.stdout).toMatch(/agent token, actor agent \(shown once[^\n]*\n {2}tsk_[\w-]{43}\n/);
    expect(done.stdout).toContain(`tessera serve --data ${dir}`);
  });

  it("takes the directory from --data too, as serve does; two different ones are refused", () => {
    const dir = join(scratch(), "by-flag");
    const done = run(
      { TESSERA_DATA: join(scratch(), "not-this") },
      "init",
      "--data",
      dir,
      "--json",
    );
    expect(done.code).toBe(0);
    expect((JSON.parse(done.stdout) as Made).dataDir).toBe(dir);
    const same = join(scratch(), "same");
    expect(run({}, "init", same, "--data", same, "--json").code).toBe(0);
    const other = join(scratch(), "other");
    const both = run({}, "init", other, "--data", join(scratch(), "else"));
    expectRefusal(both, "invalid_usage");
    expect(both.stderr).toContain("two directories given");
    expect(existsSync(other)).toBe(false);
  });

  it("takes the directory from TESSERA_DATA when none is given", () => {
    const dir = join(scratch(), "from-env");
    expect(run({ TESSERA_DATA: dir }, "init", "--json").code).toBe(0);
    expect(existsSync(join(dir, "tessera.json"))).toBe(true);
  });

  it("accepts an existing empty directory of its own and closes it to others", () => {
    const dir = join(scratch(), "empty");
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    init(dir);
    expect(mode(dir)).toBe("700");
  });

  it("refuses a directory that holds anything, and leaves it as it was", () => {
    const dir = scratch();
    writeFileSync(join(dir, "someone-elses.txt"), "keep me");
    const done = run({}, "init", dir);
    expectRefusal(done, "data_dir_not_empty");
    expect(readdirSync(dir)).toEqual(["someone-elses.txt"]);
    // A second init over a provisioned directory is the same refusal: it never re-mints.
    const data = join(scratch(), "data");
    const first = init(data);
    expectRefusal(run({}, "init", data), "data_dir_not_empty");
    expect(JSON.parse(readFileSync(first.principals, "utf8")).principals[0].tokenSha256).toBe(
      tokenDigest(first.issuerToken),
    );
  });

  it("refuses a symlink and a file in the directory's place", () => {
    const root = scratch();
    mkdirSync(join(root, "real"), { mode: 0o700 });
    symlinkSync(join(root, "real"), join(root, "link"));
    expectRefusal(run({}, "init", join(root, "link")), "data_dir_insecure");
    writeFileSync(join(root, "file"), "");
    expectRefusal(run({}, "init", join(root, "file")), "data_dir_insecure");
    expect(readdirSync(join(root, "real"))).toEqual([]);
  });

  it("refuses a missing parent instead of making a path", () => {
    const root = scratch();
    expectRefusal(run({}, "init", join(root, "a", "b")), "data_dir_missing");
    expect(existsSync(join(root, "a"))).toBe(false);
  });

  // Before: init printed two tokens and exit 0, then serve refused the principals file it wrote
  // (invalid_config: principals.1.actor too big), and a second init refused the directory as
  // not empty: provisioned, yet unusable, with no way forward but removing it by hand.
  it("refuses IDs serve would refuse, naming the flag, and makes nothing", () => {
    const root = scratch();
    const long = "a".repeat(513);
    for (const [flag, value] of [
      ["--agent", long],
      ["--namespace", long],
      ["--authority", long],
      ["--host", "h".repeat(4097)],
    ] as const) {
      const dir = join(root, flag.slice(2));
      const done = run({}, "init", dir, flag, value);
      expectRefusal(done, "invalid_usage");
      expect(done.stderr).toContain(`${flag}: Too big`);
      expect(done.stdout).not.toContain("tsk_");
      expect(existsSync(dir)).toBe(false);
    }
    // At the limit, what init makes serve takes.
    const made = init(join(root, "limit"), "--agent", "a".repeat(512), "--port", "0");
    expect(readdirSync(made.dataDir)).toContain("tessera.json");
  });

  it("serves a directory provisioned with the longest IDs it takes", async () => {
    const max = "x".repeat(512);
    const made = init(join(scratch(), "data"), "--agent", max, "--namespace", max, "--port", "0");
    const served = await serveProcess(["--data", made.dataDir]);
    expect(await served.stop()).toBe(0);
  });

  it("provisions and serves a directory whose path holds #, % and ?", async () => {
    // The database's `sqlite:` URL is written from the path: `#` (a fragment, now refused by
    // the backend), `%41` (decoded to `A`) and `?` (a query) each named another file, or none.
    const parent = join(scratch(), "d#1 50%41 why?");
    mkdirSync(parent);
    const made = init(join(parent, "data"), "--port", "0");
    expect(made.database).toBe(join(parent, "data", "tessera.db"));
    const listed = run({}, "audit", "list", "--data", made.dataDir);
    expect([listed.code, listed.stderr]).toEqual([
      0,
      "no decisions found: the trail is empty, or none match\n",
    ]);
    const served = await serveProcess(["--data", made.dataDir]);
    try {
      const issuer = createTesseraClient({ url: served.url, token: made.issuerToken });
      await expect(issuer.ready()).resolves.toEqual({ ready: true });
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  // Before: `init ""` (`init "$DIR"` with DIR unset) and an empty TESSERA_DATA both named the
  // current directory, which init provisioned when it was empty and closed to others (0700).
  it("refuses an empty directory name or TESSERA_DATA instead of provisioning the current directory", () => {
    const cwd = scratch();
    const inCwd = (env: Record<string, string>, ...args: string[]) => {
      const done = spawnSync(process.execPath, [BIN, "init", ...args], {
        cwd,
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "", ...env },
      });
      return { code: done.status, stdout: done.stdout, stderr: done.stderr };
    };
    expectRefusal(inCwd({}, ""), "invalid_usage");
    expectRefusal(inCwd({ TESSERA_DATA: "" }), "invalid_config");
    expect(readdirSync(cwd)).toEqual([]);
    // With a directory named, an empty TESSERA_DATA is not consulted.
    expect(inCwd({ TESSERA_DATA: "" }, "data", "--json").code).toBe(0);
    expect(readdirSync(cwd)).toEqual(["data"]);
  });

  it("refuses with JSON on stderr under --json", () => {
    const dir = scratch();
    writeFileSync(join(dir, "x"), "");
    const done = run({}, "init", dir, "--json");
    expect(done.code).toBe(2);
    expect(done.stdout).toBe("");
    expect(JSON.parse(done.stderr)).toEqual({
      error: { code: "data_dir_not_empty", message: expect.stringContaining(dir) },
    });
    // A usage error too: one JSON object, no help text after it.
    const misuse = run({}, "init", "--port", "x", "--json");
    expect(misuse.code).toBe(2);
    expect(JSON.parse(misuse.stderr)).toEqual({
      error: { code: "invalid_usage", message: expect.stringContaining("--port") },
    });
  });
});

describe("tessera serve --data", () => {
  it("serves what init provisioned, on the configured port, from the flag or TESSERA_DATA", async () => {
    const made = init(join(scratch(), "data"), "--port", "0");
    const served = await serveProcess(["--data", made.dataDir]);
    try {
      const issuer = createTesseraClient({ url: served.url, token: made.issuerToken });
      await expect(issuer.ready()).resolves.toEqual({ ready: true });
      await expect(issuer.listGrants()).resolves.toEqual({ grants: [] });
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  it("refuses a missing directory by name and never creates it", () => {
    const dir = join(scratch(), "never-made");
    const done = run({}, "serve", "--data", dir);
    expectRefusal(done, "data_dir_missing");
    expect(done.stderr).toContain("tessera init");
    expect(existsSync(dir)).toBe(false);
    expectRefusal(run({ TESSERA_DATA: dir }, "serve"), "data_dir_missing");
    expect(existsSync(dir)).toBe(false);
  });

  it("refuses a directory open to others, a symlink, and one init never finished", () => {
    const made = init(join(scratch(), "data"));
    chmodSync(made.dataDir, 0o750);
    const open = run({}, "serve", "--data", made.dataDir);
    expectRefusal(open, "data_dir_insecure");
    expect(open.stderr).toContain("mode 750");
    chmodSync(made.dataDir, 0o700);

    const link = join(scratch(), "link");
    symlinkSync(made.dataDir, link);
    expectRefusal(run({}, "serve", "--data", link), "data_dir_insecure");

    const unfinished = join(scratch(), "unfinished");
    mkdirSync(unfinished, { mode: 0o700 });
    expectRefusal(run({}, "serve", "--data", unfinished), "data_dir_missing");
  });

  it("refuses a lost database instead of starting an empty history", () => {
    const made = init(join(scratch(), "data"), "--port", "0");
    rmSync(made.database);
    const done = run({}, "serve", "--data", made.dataDir);
    expectRefusal(done, "store_unavailable");
    expect(done.stderr).toContain("create=false");
    expect(existsSync(made.database)).toBe(false);
  });

  it("refuses a claim directory that lost its privacy", () => {
    const made = init(join(scratch(), "data"), "--port", "0");
    chmodSync(made.claims, 0o755);
    expectRefusal(run({}, "serve", "--data", made.dataDir), "claim_dir_insecure");
  });
});
