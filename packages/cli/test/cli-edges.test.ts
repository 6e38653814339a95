import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectRefusal, scratch, tessera } from "./support/cli.js";

/** Item 16: every misuse at the CLI's edges is a stable code, exit 2, and no stack. */

function principalsFile(dir: string): string {
  const path = join(dir, "principals.json");
  writeFileSync(
    path,
    JSON.stringify({
      principals: [
        { tokenSha256: "a".repeat(64), namespaceId: "team", actor: "asker", authority: "host" },
      ],
    }),
    { mode: 0o600 },
  );
  return path;
}

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("files named on the command line", () => {
  it("refuses a missing grant file with file_not_found", () => {
    const dir = scratch();
    const run = tessera(
      "grants",
      "add",
      "--store",
      `sqlite:${join(dir, "g.db")}`,
      "--file",
      join(dir, "no-such-grant.json"),
    );
    expectRefusal(run, "file_not_found");
  });

  it("refuses a missing principals file with file_not_found", () => {
    const dir = scratch();
    const run = tessera(
      "serve",
      "--store",
      `sqlite:${join(dir, "s.db")}`,
      "--principals",
      join(dir, "none.json"),
    );
    expectRefusal(run, "file_not_found");
  });
});

describe("tessera serve cannot listen", () => {
  let holder: Server;
  let heldPort: number;

  beforeAll(async () => {
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    heldPort = (holder.address() as { port: number }).port;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => holder.close(() => resolve()));
  });

  it("says address_in_use for a port another process holds", () => {
    const dir = scratch();
    const run = tessera(
      "serve",
      "--store",
      `sqlite:${join(dir, "s.db")}`,
      "--principals",
      principalsFile(dir),
      "--port",
      String(heldPort),
    );
    expectRefusal(run, "address_in_use");
    expect(run.stderr).toContain(String(heldPort));
  });

  it("says address_unavailable for an address this machine does not have", () => {
    const dir = scratch();
    const run = tessera(
      "serve",
      "--store",
      `sqlite:${join(dir, "s.db")}`,
      "--principals",
      principalsFile(dir),
      "--host",
      "192.0.2.1", // TEST-NET-1: never a local address
      "--port",
      "0",
    );
    expectRefusal(run, "address_unavailable");
  });
});

describe("command-line values", () => {
  it.each([
    [["grants", "list", "--store", "sqlite::memory:", "--namespace", ""]],
    [["grants", "revoke", "--store", "sqlite::memory:", "--namespace", "team", "--id", ""]],
    [["grants", "list", "--store", "", "--namespace", "team"]],
    [["audit", "--file", ""]],
    [["claims", "--in-doubt", "--dir", ""]],
  ])("refuses an empty value in %j with invalid_usage", (args) => {
    expectRefusal(tessera(...args), "invalid_usage");
  });

  it.each([
    [["claims"]],
    [["claims", "--in-doubt", "--dir", "x", "--store", "sqlite::memory:"]],
    [["audit", "list", "--store", "sqlite::memory:", "--file", "x"]],
  ])(
    "refuses a command line that cannot run, %j, with invalid_usage (not invalid_config)",
    (args) => {
      expectRefusal(tessera(...args), "invalid_usage");
    },
  );

  it("names an unknown option", () => {
    const run = tessera(
      "grants",
      "list",
      "--store",
      "sqlite::memory:",
      "--namespace",
      "team",
      "--bogus",
    );
    expectRefusal(run, "invalid_usage");
    expect(run.stderr).toContain("--bogus");
  });
});

describe("stores that do not open say why", () => {
  it("names an unknown store URL option", () => {
    const run = tessera(
      "grants",
      "list",
      "--store",
      `sqlite:${join(scratch(), "g.db")}?synchronus=normal`,
      "--namespace",
      "team",
    );
    expectRefusal(run, "invalid_config");
    expect(run.stderr).toContain('"synchronus"');
  });

  it("names a fragment as the fault, not the option its text follows", () => {
    const run = tessera(
      "audit",
      "list",
      "--store",
      `sqlite:${join(scratch(), "g.db")}?create=false#x`,
    );
    expectRefusal(run, "invalid_config");
    expect(run.stderr).toContain("fragment");
    expect(run.stderr).not.toContain("at fault");
  });

  /** `grants add` of one grant to `store`: a writer's open, which may make the store. */
  function addGrant(store: string) {
    const file = join(scratch(), "grant.json");
    writeFileSync(
      file,
      JSON.stringify({
        subject: "agent",
        capabilities: [
          { resource: { namespace: "messages", path: ["bob"] }, actions: ["send"], scope: "exact" },
        ],
      }),
    );
    return tessera(
      "grants",
      "add",
      "--store",
      store,
      "--file",
      file,
      "--namespace",
      "team",
      "--issuer",
      "host",
    );
  }

  it("says the SQLite file's directory is missing", () => {
    const dir = join(scratch(), "not-made", "deeper");
    const run = addGrant(`sqlite:${dir}/g.db`);
    expectRefusal(run, "store_unavailable");
    expect(run.stderr).toContain("directory");
    expect(run.stderr).toContain("does not exist");
  });

  it("says the SQLite file is missing when the URL forbids creating it", () => {
    const file = join(scratch(), "g.db");
    const run = addGrant(`sqlite:${file}?create=false`);
    expectRefusal(run, "store_unavailable");
    expect(run.stderr).toContain("no database file");
  });

  describe("a port where something else listens", () => {
    let silent: Server;
    let port: number;

    beforeAll(async () => {
      // Accepts and says nothing, as a server of another kind waiting for its own protocol.
      silent = createServer(() => {});
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      port = (silent.address() as { port: number }).port;
    });

    afterAll(async () => {
      silent.unref();
      await new Promise<void>((resolve) => {
        silent.close(() => resolve());
        setTimeout(resolve, 100);
      });
    });

    it.each([
      ["PostgreSQL", (p: number) => `postgres://u@127.0.0.1:${p}/db?connectTimeoutMs=500`],
      ["Redis", (p: number) => `redis://127.0.0.1:${p}?connectTimeoutMs=500&commandTimeoutMs=500`],
    ])("says nothing answered as %s", (kind, url) => {
      const run = tessera("grants", "list", "--store", url(port), "--namespace", "team");
      expectRefusal(run, "store_unavailable");
      expect(run.stderr).toContain(`nothing answered as ${kind}`);
    });
  });

  const pg = process.env.TESSERA_PG_URL;
  describe.skipIf(!pg)("PostgreSQL (TESSERA_PG_URL)", () => {
    const variant = (edit: (url: URL) => void) => {
      const url = new URL(pg as string);
      edit(url);
      return url.toString();
    };

    it("says connection refused for a port nothing listens on", async () => {
      const port = await closedPort();
      const run = tessera(
        "grants",
        "list",
        "--store",
        variant((u) => {
          u.hostname = "127.0.0.1";
          u.port = String(port);
        }),
        "--namespace",
        "team",
      );
      expectRefusal(run, "store_unavailable");
      expect(run.stderr).toContain("connection refused");
    });

    it("says the database does not exist", () => {
      const url = variant((u) => {
        u.pathname = "/tessera_no_such_database";
      });
      const run = tessera("grants", "list", "--store", url, "--namespace", "team");
      expectRefusal(run, "store_unavailable");
      expect(run.stderr).toContain("database does not exist");
    });

    it("says authentication failed for a role the server refuses", () => {
      const url = variant((u) => {
        u.username = "tessera_no_such_role";
        u.password = "wrong";
      });
      const run = tessera("grants", "list", "--store", url, "--namespace", "team");
      expectRefusal(run, "store_unavailable");
      expect(run.stderr).toContain("authentication failed");
    });
  });

  const redis = process.env.TESSERA_REDIS_URL;
  describe.skipIf(!redis)("Redis (TESSERA_REDIS_URL)", () => {
    it("says connection refused for a port nothing listens on", async () => {
      const url = new URL(redis as string);
      url.hostname = "127.0.0.1";
      url.port = String(await closedPort());
      const run = tessera("grants", "list", "--store", url.toString(), "--namespace", "team");
      expectRefusal(run, "store_unavailable");
      expect(run.stderr).toContain("connection refused");
    });

    it("says authentication failed for a user the server refuses", () => {
      const url = new URL(redis as string);
      url.username = "tessera-no-such-user";
      url.password = "wrong";
      const run = tessera("grants", "list", "--store", url.toString(), "--namespace", "team");
      expectRefusal(run, "store_unavailable");
      expect(run.stderr).toContain("authentication failed");
    });
  });
});
