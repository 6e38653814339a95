import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { openStores } from "@tessera/sqlite";
import { describe, expect, it } from "vitest";
import {
  CAN_RUN_AS_NOBODY,
  expectRefusal,
  scratch,
  tessera,
  tesseraAsNobody,
} from "./support/cli.js";

/** Why a store or file could not be used, said the same way by every command. */

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const REFUSED = "connection refused: nothing listens at that host and port";

describe("a store that is down, named to demo two-workers and report", () => {
  // Before: "store_unavailable: could not open the Redis store (Error)" and no cause, while
  // audit verify on the same URL said why; the demo opened it with core's openStores.
  it.each([
    ["Redis", (port: number) => `redis://127.0.0.1:${port}/7`],
    ["PostgreSQL", (port: number) => `postgres://postgres@127.0.0.1:${port}/x`],
  ])("%s: demo two-workers says connection refused, as audit verify does", async (_, url) => {
    const store = url(await closedPort());
    const demo = tessera("demo", "two-workers", "--store", store);
    expectRefusal(demo, "store_unavailable");
    expect(demo.stderr).toContain(REFUSED);
    expect(tessera("audit", "verify", "--store", store).stderr).toContain(REFUSED);
  });

  it("report --store says connection refused", async () => {
    const out = join(scratch(), "report.html");
    const store = `redis://127.0.0.1:${await closedPort()}/7`;
    const run = tessera("report", "--out", out, "--store", store);
    expectRefusal(run, "store_unavailable");
    expect(run.stderr).toContain(REFUSED);
  });
});

describe.skipIf(!CAN_RUN_AS_NOBODY)(
  "a SQLite store in a directory this user may not search (root: runs as nobody)",
  () => {
    async function storeInPrivateDirectory(): Promise<string> {
      const top = scratch();
      chmodSync(top, 0o755);
      const dir = join(top, "private");
      mkdirSync(dir, { mode: 0o700 }); // root's: nobody may not search it
      const path = join(dir, "tessera.db");
      await (await openStores(`sqlite:${path}`)).close();
      return path;
    }

    // Before: "schema_unavailable: no database file at … holds no Tessera store": existsSync is
    // false on EACCES, so a permission problem read as a missing store.
    it("audit verify says permission denied, not that no store is there", async () => {
      const path = await storeInPrivateDirectory();
      const run = tesseraAsNobody("audit", "verify", "--store", `sqlite:${path}`);
      expectRefusal(run, "audit_unavailable");
      expect(run.stderr).toContain(`(EACCES): permission denied: this user cannot reach ${path}`);
      expect(run.stderr).not.toContain("no database file");
    });

    it("a writer's open (grants list) says permission denied too", async () => {
      const path = await storeInPrivateDirectory();
      const run = tesseraAsNobody(
        "grants",
        "list",
        "--store",
        `sqlite:${path}`,
        "--namespace",
        "team",
      );
      expectRefusal(run, "store_unavailable");
      expect(run.stderr).toContain(`permission denied: this user cannot reach ${path}`);
    });

    it("a file that is really missing there is still schema_unavailable, for root", () => {
      const path = join(scratch(), "nothing-here.db");
      expectRefusal(tessera("audit", "verify", "--store", `sqlite:${path}`), "schema_unavailable");
    });
  },
);

describe("audit verify --checkpoint naming a file that is not there", () => {
  it("is file_not_found, as every other file the command names", () => {
    const dir = scratch();
    const log = join(dir, "audit.jsonl");
    spawnSync("touch", [log]);
    const run = tessera(
      ...["audit", "verify", "--file", log, "--checkpoint", join(dir, "nope.json")],
      ...["--public-key", join(dir, "key.pub")],
    );
    expectRefusal(run, "file_not_found");
    expect(run.stderr).toContain(`no checkpoint file at ${join(dir, "nope.json")}`);
  });
});
