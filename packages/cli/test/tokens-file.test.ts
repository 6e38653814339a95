import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { isTesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { lockPathFor, withFileLock } from "../src/config/file-lock.js";
import {
  BIN,
  CAN_RUN_AS_NOBODY,
  NOBODY_UID,
  scratch,
  tessera,
  tesseraAsNobody,
} from "./support/cli.js";

/**
 * `tessera tokens add` and `revoke` edit the principals file one process at a time (a lock file
 * beside it), so no edit is lost and a revoked token never comes back with another's rewrite;
 * and an edit keeps the file's owner, so root editing the service user's file does not take it
 * from the service.
 */

interface FilePrincipal {
  tokenSha256: string;
  actor: string;
}

function principalsFile(dir: string): string {
  const path = join(dir, "principals.json");
  const first = {
    tokenSha256: "a".repeat(64),
    namespaceId: "team",
    actor: "first",
    authority: "host",
  };
  writeFileSync(path, JSON.stringify({ principals: [first] }), { mode: 0o600 });
  return path;
}

function listed(path: string): FilePrincipal[] {
  return (JSON.parse(readFileSync(path, "utf8")) as { principals: FilePrincipal[] }).principals;
}

/** `tessera …` in its own process, not waited for: many run at once. */
function running(
  ...args: string[]
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args]);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

function addJson(path: string, actor: string) {
  return running("tokens", "add", "--actor", actor, "--principals", path, "--json");
}

/** The files beside the principals file other than itself: no lock or temporary left behind. */
function leftBeside(path: string): string[] {
  const dir = join(path, "..");
  return readdirSync(dir).filter((name) => name !== "principals.json");
}

describe("tokens add and revoke from many processes at once", () => {
  it("keeps every token that an add printed, over three rounds of eight", async () => {
    const path = principalsFile(scratch());
    const printed: string[] = [];
    for (let round = 0; round < 3; round += 1) {
      const runs = await Promise.all(
        Array.from({ length: 8 }, (_, i) => addJson(path, `r${round}-${i}`)),
      );
      for (const run of runs) {
        expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
        printed.push(
          (JSON.parse(run.stdout) as { principal: FilePrincipal }).principal.tokenSha256,
        );
      }
    }
    const inFile = listed(path).map((p) => p.tokenSha256);
    expect(inFile).toHaveLength(1 + 24);
    expect(inFile).toEqual(expect.arrayContaining(printed));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(leftBeside(path)).toEqual([]);
  }, 120_000);

  it("never lets a concurrent add bring back a token that revoke removed", async () => {
    const path = principalsFile(scratch());
    for (let round = 0; round < 4; round += 1) {
      const victim = await addJson(path, `victim-${round}`);
      const digest = (JSON.parse(victim.stdout) as { principal: FilePrincipal }).principal
        .tokenSha256;
      const [revoked, ...added] = await Promise.all([
        running("tokens", "revoke", digest, "--principals", path, "--json"),
        addJson(path, `a-${round}`),
        addJson(path, `b-${round}`),
        addJson(path, `c-${round}`),
      ]);
      expect(revoked?.stderr).toBe("");
      expect(JSON.parse(revoked?.stdout ?? "")).toMatchObject({
        removed: { actor: `victim-${round}` },
      });
      const actors = listed(path).map((p) => p.actor);
      expect(listed(path).map((p) => p.tokenSha256)).not.toContain(digest);
      for (const run of added) expect(run.code).toBe(0);
      expect(actors).toEqual(expect.arrayContaining([`a-${round}`, `b-${round}`, `c-${round}`]));
    }
    expect(leftBeside(path)).toEqual([]);
  }, 120_000);
});

describe("the principals file's lock", () => {
  it("lets go of the lock when an edit is refused", () => {
    const path = principalsFile(scratch());
    const run = tessera("tokens", "revoke", "b".repeat(64), "--principals", path);
    expect(run.stderr).toMatch(/^tessera: invalid_input: no principal/);
    expect(leftBeside(path)).toEqual([]);
  });

  it("takes over a lock whose process has died", () => {
    const path = principalsFile(scratch());
    const gone = spawnSync(process.execPath, ["-e", ""]).pid;
    writeFileSync(lockPathFor(path), `${gone} ${hostname()}\n`);
    const run = tessera("tokens", "add", "--actor", "after", "--principals", path);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(listed(path).map((p) => p.actor)).toEqual(["first", "after"]);
    expect(leftBeside(path)).toEqual([]);
  });

  it("waits for a live holder, then says unavailable, naming the lock file; nothing runs", () => {
    const path = principalsFile(scratch());
    const lock = lockPathFor(path);
    // This test's own process holds it, and is alive.
    writeFileSync(lock, `${process.pid} ${hostname()}\n`);
    let ran = false;
    const started = Date.now();
    const refused = refusal(() =>
      withFileLock(
        path,
        () => {
          ran = true;
        },
        { waitMs: 300 },
      ),
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(ran).toBe(false);
    expect(refused.code).toBe("unavailable");
    expect(refused.message).toContain(`locked by pid ${process.pid} on ${hostname()}`);
    expect(refused.message).toContain(`remove ${lock}`);
    expect(existsSync(lock)).toBe(true);
  });

  it("never takes over a lock from another host, or one whose holder it cannot tell", () => {
    const path = principalsFile(scratch());
    const lock = lockPathFor(path);
    const gone = spawnSync(process.execPath, ["-e", ""]).pid;
    for (const holder of [`${gone} elsewhere.example\n`, ""]) {
      writeFileSync(lock, holder);
      expect(refusal(() => withFileLock(path, () => 1, { waitMs: 100 })).code).toBe("unavailable");
      expect(readFileSync(lock, "utf8")).toBe(holder);
    }
  });

  it("holds the lock during the edit and removes it after", () => {
    const path = principalsFile(scratch());
    const during = withFileLock(path, () => readFileSync(lockPathFor(path), "utf8"));
    expect(during).toBe(`${process.pid} ${hostname()}\n`);
    expect(existsSync(lockPathFor(path))).toBe(false);
  });
});

/** A directory and principals file of the service user `nobody`, as a package would install them. */
function serviceUsersFile(group: number): string {
  const top = scratch();
  chmodSync(top, 0o755);
  const dir = join(top, "tessera");
  mkdirSync(dir, { mode: 0o700 });
  chownSync(dir, NOBODY_UID, group);
  const path = principalsFile(dir);
  chownSync(path, NOBODY_UID, group);
  return path;
}

describe.skipIf(!CAN_RUN_AS_NOBODY)(
  "the principals file's owner (needs root, the nobody user and runuser)",
  () => {
    it("stays the service user's when root adds and revokes, so the service still reads it", () => {
      const nogroup = Number(spawnSync("id", ["-g", "nobody"], { encoding: "utf8" }).stdout.trim());
      const path = serviceUsersFile(nogroup);
      const added = tessera("tokens", "add", "--actor", "second", "--principals", path, "--json");
      expect(added.stderr).toBe("");
      const { tokenSha256 } = (JSON.parse(added.stdout) as { principal: FilePrincipal }).principal;
      expect(owner(path)).toEqual({ uid: NOBODY_UID, gid: nogroup, mode: 0o600 });
      expect(tesseraAsNobody("tokens", "list", "--principals", path).code).toBe(0);

      const revoked = tessera("tokens", "revoke", tokenSha256, "--principals", path);
      expect(revoked.stderr).toBe("");
      expect(owner(path)).toEqual({ uid: NOBODY_UID, gid: nogroup, mode: 0o600 });
      const read = tesseraAsNobody("tokens", "list", "--principals", path);
      expect(read.stdout).toMatch(/^1 principal\(s\)/);
    });

    it("refuses, changing nothing, when its user cannot give the copy the file's group", () => {
      // nobody may write the file, but cannot hand a file to group root: no silent regroup.
      const path = serviceUsersFile(0);
      const before = readFileSync(path, "utf8");
      const run = tesseraAsNobody("tokens", "add", "--actor", "second", "--principals", path);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(
        /^tessera: invalid_usage: .* belongs to uid \d+ gid 0, which this user/,
      );
      expect(readFileSync(path, "utf8")).toBe(before);
      expect(owner(path)).toEqual({ uid: NOBODY_UID, gid: 0, mode: 0o600 });
      expect(leftBeside(path)).toEqual([]);
    });
  },
);

function owner(path: string) {
  const stat = statSync(path);
  return { uid: stat.uid, gid: stat.gid, mode: stat.mode & 0o777 };
}

function refusal(run: () => unknown): { code: string; message: string } {
  try {
    run();
  } catch (error) {
    if (isTesseraError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error("not refused");
}
