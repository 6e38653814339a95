import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openStores } from "@tessera/sqlite";
import { describe, expect, it } from "vitest";
import {
  claimDirWithOneInDoubt,
  expectRefusal,
  rawGet,
  scratch,
  serveProcess,
  tessera,
} from "./support/cli.js";

const grant = {
  id: "ticket-0",
  namespaceId: "team",
  issuer: "host",
  subject: "asker",
  capabilities: [
    {
      resource: { namespace: "messages", path: ["colleague-0"], owner: "alice" },
      actions: ["messages.send"],
      scope: "exact",
    },
  ],
  constraints: { maxUses: 1 },
  issuedAt: "2026-11-29T00:00:00.000Z",
};

describe("tessera demo fanout", () => {
  it("prints the five scenes with figures from the run", () => {
    const run = tessera("demo", "fanout", "--recipients", "4");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("deliveries: 4, all distinct: true");
    expect(run.stdout.match(/^ {2}SENT {3}colleague-\d/gm)?.length).toBeGreaterThanOrEqual(4);
  });

  it("prints the same results as JSON", () => {
    const run = tessera("demo", "fanout", "--recipients", "2", "--json");
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as { recipients: number; scenes: unknown[] };
    expect(report.recipients).toBe(2);
    expect(report.scenes).toHaveLength(5);
  });

  it("counts tickets in a SQLite store given by URL", () => {
    const run = tessera("demo", "fanout", "--store", `sqlite:${join(scratch(), "t.db")}`);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("deliveries: 3, all distinct: true");
  });

  it.each([
    [["demo", "fanout", "--recipients", "0"], "whole number"],
    [["demo", "fanout", "--recipients", "many"], "whole number"],
    [["demo", "fanout", "--store", "ftp://nowhere"], "unsupported_store_url"],
    [["demo", "two-workers", "--store", "mysql://nowhere"], "unsupported_store_url"],
    [["no-such-command"], "unknown command"],
  ])("refuses %j with exit 2", (args, message) => {
    const run = tessera(...args);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
  });
});

describe("tessera grants", () => {
  it("adds, lists and revokes a grant in a SQLite store", () => {
    const dir = scratch();
    const store = `sqlite:${join(dir, "g.db")}`;
    const file = join(dir, "grant.json");
    writeFileSync(file, JSON.stringify(grant));

    expect(tessera("grants", "add", "--store", store, "--file", file).code).toBe(0);
    const listed = tessera("grants", "list", "--store", store, "--namespace", "team", "--json");
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id: "ticket-0" })]);

    expect(
      tessera("grants", "revoke", "--store", store, "--namespace", "team", "--id", "ticket-0").code,
    ).toBe(0);
    const after = JSON.parse(
      tessera("grants", "list", "--store", store, "--namespace", "team", "--json").stdout,
    ) as Array<{ revokedAt?: string }>;
    expect(after[0]?.revokedAt).toEqual(expect.any(String));
  });

  it("lists a store's bounded grants with their uses, as a service does", async () => {
    const dir = scratch();
    const store = `sqlite:${join(dir, "g.db")}`;
    const file = join(dir, "grant.json");
    writeFileSync(file, JSON.stringify(grant));
    const open = { ...grant, id: "open-0", constraints: {} };
    writeFileSync(join(dir, "open.json"), JSON.stringify(open));
    expect(tessera("grants", "add", "--store", store, "--file", file).code).toBe(0);
    expect(tessera("grants", "add", "--store", store, "--file", join(dir, "open.json")).code).toBe(
      0,
    );
    const before = tessera("grants", "list", "--store", store, "--namespace", "team");
    expect(before.stdout).toContain("ticket-0  subject=asker issuer=host maxUses 1 used 0 active");
    expect(before.stdout).toContain("open-0  subject=asker issuer=host unbounded active");
    const stores = await openStores(`${store}?create=false`);
    expect((await stores.usage.tryConsume("team", "ticket-0", 1)).consumed).toBe(true);
    await stores.close();
    const after = tessera("grants", "list", "--store", store, "--namespace", "team");
    expect(after.stdout).toContain("ticket-0  subject=asker issuer=host maxUses 1 used 1 spent");
  });

  it("lists an expired and a not yet valid grant as such, never as active", () => {
    const dir = scratch();
    const store = `sqlite:${join(dir, "g.db")}`;
    const windows = [
      { id: "old", constraints: { expiresAt: "2020-06-01T00:00:00.000Z" } },
      { id: "later", constraints: { notBefore: "2099-01-01T00:00:00.000Z" } },
      { id: "future", issuedAt: "2099-02-01T00:00:00.000Z", constraints: {} },
    ];
    for (const window of windows) {
      const file = join(dir, `${window.id}.json`);
      writeFileSync(
        file,
        JSON.stringify({ ...grant, issuedAt: "2020-01-01T00:00:00.000Z", ...window }),
      );
      const added = tessera("grants", "add", "--store", store, "--file", file);
      expect(added.code, added.stderr).toBe(0);
    }
    const listed = tessera("grants", "list", "--store", store, "--namespace", "team").stdout;
    expect(listed).toContain(
      "old  subject=asker issuer=host unbounded expired 2020-06-01T00:00:00.000Z",
    );
    expect(listed).toContain(
      "later  subject=asker issuer=host unbounded not valid before 2099-01-01T00:00:00.000Z",
    );
    expect(listed).toContain(
      "future  subject=asker issuer=host unbounded not valid before 2099-02-01T00:00:00.000Z",
    );
    expect(listed).not.toContain("active");
  });

  it("refuses malformed grant files with a stable code and stores nothing", () => {
    const dir = scratch();
    const store = `sqlite:${join(dir, "g.db")}`;
    const notJson = join(dir, "bad.json");
    writeFileSync(notJson, "{not json");
    const wrongShape = join(dir, "shape.json");
    writeFileSync(wrongShape, JSON.stringify({ ...grant, capabilities: [] }));

    const first = tessera("grants", "add", "--store", store, "--file", notJson);
    expect([first.code, first.stderr]).toEqual([2, expect.stringContaining("invalid_input")]);
    const second = tessera("grants", "add", "--store", store, "--file", wrongShape);
    expect([second.code, second.stderr]).toEqual([2, expect.stringContaining("invalid_grant")]);
    // Nothing stored, not even a store: both were refused before it was opened.
    expect(existsSync(join(dir, "g.db"))).toBe(false);
    const listed = tessera("grants", "list", "--store", store, "--namespace", "team");
    expectRefusal(listed, "schema_unavailable");
  });

  it("refuses to revoke a grant that does not exist", async () => {
    const store = `sqlite:${join(scratch(), "g.db")}`;
    await (await openStores(store)).close();
    const run = tessera(
      "grants",
      "revoke",
      "--store",
      store,
      "--namespace",
      "team",
      "--id",
      "nope",
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("invalid_input");
  });
});

describe("tessera claims --in-doubt", () => {
  it("lists a claim whose outcome was never recorded, and not a settled one", async () => {
    const dir = join(scratch(), "claims");
    mkdirSync(dir, { mode: 0o700 });
    await claimDirWithOneInDoubt(dir);

    const run = tessera("claims", "--in-doubt", "--dir", dir, "--json");
    expect(run.code).toBe(0);
    const listed = JSON.parse(run.stdout) as Array<{ functionCallId: string }>;
    expect(listed.map((claim) => claim.functionCallId)).toEqual(["died-here"]);
  });

  it("refuses a missing directory and does not create it", () => {
    const dir = join(scratch(), "never-made");
    const run = tessera("claims", "--in-doubt", "--dir", dir);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("claim_dir_missing");
    expect(spawnSync("test", ["-e", dir]).status).not.toBe(0);
  });

  it("refuses a directory open to other users", () => {
    const dir = join(scratch(), "open");
    mkdirSync(dir, { mode: 0o777 });
    spawnSync("chmod", ["0777", dir]);
    const run = tessera("claims", "--in-doubt", "--dir", dir);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("claim_dir_insecure");
  });
});

describe("tessera audit", () => {
  it("explains a refusal from a JSON-lines log: spent versus never granted", () => {
    const dir = scratch();
    const log = join(dir, "audit.jsonl");
    const base = {
      source: "kernel",
      traceId: "t",
      actor: "asker",
      authority: "host",
      namespaceId: "team",
    };
    const events = [
      {
        ...base,
        at: "2026-11-29T00:00:00.000Z",
        outcome: "denied",
        code: "tool_unavailable",
        reason: "grant_exhausted",
        callId: "c-spent",
        grantId: "ticket-0",
      },
      {
        ...base,
        at: "2026-11-29T00:00:01.000Z",
        outcome: "denied",
        code: "no_matching_grant",
        reason: "no_capability",
        callId: "c-never",
      },
    ];
    writeFileSync(log, `${events.map((e) => JSON.stringify(e)).join("\n")}\n`);

    const spent = tessera("audit", "explain", "c-spent", "--file", log, "--json");
    expect(JSON.parse(spent.stdout)).toMatchObject({ verdict: "spent" });
    const never = tessera("audit", "explain", "c-never", "--file", log, "--json");
    expect(JSON.parse(never.stdout)).toMatchObject({ verdict: "never_granted" });
    const listed = tessera("audit", "--file", log, "--call-id", "c-never", "--json");
    expect(JSON.parse(listed.stdout)).toHaveLength(1);
  });

  it("explains for one principal when told which, and refuses half a principal", () => {
    const log = join(scratch(), "audit.jsonl");
    const principal = { source: "kernel", namespaceId: "team", actor: "asker", authority: "host" };
    // alice spends her ticket under c-1; later bob (same actor, another owner) reuses c-1.
    const events = [
      {
        ...principal,
        owner: "alice",
        at: "2026-11-29T00:00:00.000Z",
        traceId: "t-1",
        outcome: "denied",
        code: "tool_unavailable",
        reason: "grant_exhausted",
        callId: "c-1",
        grantId: "ticket-alice",
      },
      {
        ...principal,
        owner: "bob",
        at: "2026-11-29T00:00:01.000Z",
        traceId: "t-2",
        outcome: "denied",
        code: "no_matching_grant",
        reason: "no_capability",
        callId: "c-1",
      },
    ];
    writeFileSync(log, `${events.map((e) => JSON.stringify(e)).join("\n")}\n`);
    const explainAs = (...flags: string[]) => {
      const run = tessera("audit", "explain", "c-1", "--file", log, "--json", ...flags);
      expect(run.code).toBe(0);
      return JSON.parse(run.stdout) as { verdict: string; grantId?: string };
    };
    const who = ["--namespace", "team", "--actor", "asker", "--authority", "host"];

    expect(explainAs(...who, "--owner", "alice")).toMatchObject({
      verdict: "spent",
      grantId: "ticket-alice",
    });
    expect(explainAs(...who, "--owner", "bob")).toMatchObject({ verdict: "never_granted" });
    const carol = explainAs(...who, "--owner", "carol");
    expect(carol.verdict).toBe("unknown");
    expect(carol.grantId).toBeUndefined();
    // No --owner: the principal without an owner, who never used c-1.
    expect(explainAs(...who).verdict).toBe("unknown");
    // No principal at all: as core explains, by the principal that first used the ID.
    expect(explainAs().verdict).toBe("spent");

    for (const partial of [
      ["--actor", "asker"],
      ["--namespace", "team", "--actor", "asker"],
      ["--owner", "alice"],
    ]) {
      expectRefusal(tessera("audit", "explain", "c-1", "--file", log, ...partial), "invalid_usage");
    }
  });

  it("refuses a log that does not exist instead of creating it", () => {
    const missing = join(scratch(), "none.jsonl");
    const run = tessera("audit", "--file", missing);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(`tessera: file_not_found: no audit log at ${missing}\n`);
  });
});

describe("tessera serve", () => {
  it("listens, answers, and stops cleanly on SIGTERM", async () => {
    const dir = scratch();
    const principals = join(dir, "principals.json");
    writeFileSync(
      principals,
      JSON.stringify({
        principals: [
          {
            tokenSha256: "a".repeat(64),
            namespaceId: "team",
            actor: "asker",
            authority: "host",
            purpose: "triage",
          },
        ],
      }),
      { mode: 0o600 },
    );
    const served = await serveProcess([
      "--store",
      `sqlite:${join(dir, "s.db")}`,
      "--principals",
      principals,
      "--port",
      "0",
    ]);
    expect((await fetch(`${served.url}/healthz`)).status).toBe(200);
    expect(await rawGet(served.url, "/readyz")).toEqual({
      status: 200,
      body: { ready: true },
    });
    expect((await rawGet(served.url, "//")).status).toBe(404);
    expect(await served.stop()).toBe(0);
    expect(served.output()).toContain("tessera serve: stopped");
  });

  it("refuses a principals file that does not match its schema", () => {
    const dir = scratch();
    const principals = join(dir, "principals.json");
    writeFileSync(principals, JSON.stringify({ principals: [{ token: "plain-text" }] }), {
      mode: 0o600,
    });
    const run = tessera(
      "serve",
      "--store",
      `sqlite:${join(dir, "s.db")}`,
      "--principals",
      principals,
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("invalid_config");
  });
});
