import { createHash } from "node:crypto";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type ClaimRecord, isTesseraError } from "@tessera/core";
import { claimKeyDigest } from "@tessera/core/store-kit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DirectoryClaimStore } from "./directory-store.js";

function record(body: string, worker = "test"): ClaimRecord {
  return {
    bodyHash: createHash("sha256").update(body).digest("hex"),
    claimedAt: 1_700_000_000_000,
    worker,
  };
}

async function codeOf(action: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await action();
  } catch (error) {
    if (isTesseraError(error)) return error.code;
    throw error;
  }
  return undefined;
}

/** Every path under `root`, relative, so a test can assert nothing landed anywhere else. */
function listing(root: string): string[] {
  return readdirSync(root, { recursive: true }).map(String).sort();
}

/** How many of this process's descriptors are open on files in `dir` (removed ones too). */
function openMarkerHandles(dir: string): number {
  const inside = `${realpathSync(dir)}/`;
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(inside)) count++;
    } catch {
      // closed since the listing (the listing's own descriptor, for one)
    }
  }
  return count;
}

let root: string;
let dir: string;

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), "tessera-dir-store-"));
  dir = path.join(root, "claims");
  mkdirSync(dir, { mode: 0o700 });
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("DirectoryClaimStore.open refuses an unsafe or missing directory", () => {
  it("a missing directory: claim_dir_missing, and it is not created", async () => {
    const missing = path.join(root, "nope");
    expect(await codeOf(() => DirectoryClaimStore.open(missing))).toBe("claim_dir_missing");
    expect(existsSync(missing)).toBe(false);
  });

  it.each([0o755, 0o750, 0o701, 0o770, 0o707])("mode %o: claim_dir_insecure", async (mode) => {
    chmodSync(dir, mode);
    expect(await codeOf(() => DirectoryClaimStore.open(dir))).toBe("claim_dir_insecure");
  });

  it("a symlink to a private directory: claim_dir_insecure", async () => {
    const link = path.join(root, "link");
    symlinkSync(dir, link);
    expect(await codeOf(() => DirectoryClaimStore.open(link))).toBe("claim_dir_insecure");
  });

  it("a regular file: claim_dir_insecure", async () => {
    const file = path.join(root, "file");
    writeFileSync(file, "", { mode: 0o600 });
    expect(await codeOf(() => DirectoryClaimStore.open(file))).toBe("claim_dir_insecure");
  });

  const canChown = process.getuid?.() === 0;
  it.runIf(canChown)("a directory owned by another user: claim_dir_insecure", async () => {
    chownSync(dir, 12345, 12345);
    expect(await codeOf(() => DirectoryClaimStore.open(dir))).toBe("claim_dir_insecure");
  });

  it("a private directory of the current user opens, and holds nothing until a claim", async () => {
    const store = await DirectoryClaimStore.open(dir);
    expect(store.directory).toBe(dir);
    expect(listing(dir)).toEqual([]);
    await store.close();
  });
});

describe("DirectoryClaimStore re-checks the directory before each claim", () => {
  it("removed mid-session: claim_dir_missing, never recreated", async () => {
    const store = await DirectoryClaimStore.open(dir);
    await store.claim({ session: "s", functionCallId: "1" }, record("1"));
    rmSync(dir, { recursive: true });
    expect(
      await codeOf(() => store.claim({ session: "s", functionCallId: "2" }, record("2"))),
    ).toBe("claim_dir_missing");
    expect(existsSync(dir)).toBe(false);
    await store.close();
  });

  it("replaced by a fresh directory: claim_dir_changed, the new one stays empty", async () => {
    const store = await DirectoryClaimStore.open(dir);
    await store.claim({ session: "s", functionCallId: "1" }, record("1"));
    renameSync(dir, path.join(root, "moved"));
    mkdirSync(dir, { mode: 0o700 });
    expect(
      await codeOf(() => store.claim({ session: "s", functionCallId: "1" }, record("1"))),
    ).toBe("claim_dir_changed");
    expect(
      await codeOf(() =>
        store.settle({ session: "s", functionCallId: "1" }, { status: "dispatched", settledAt: 1 }),
      ),
    ).toBe("claim_dir_changed");
    expect(listing(dir)).toEqual([]);
    await store.close();
  });

  it("swapped for a symlink to the original: claim_dir_changed", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const moved = path.join(root, "moved");
    renameSync(dir, moved);
    symlinkSync(moved, dir);
    expect(
      await codeOf(() => store.claim({ session: "s", functionCallId: "1" }, record("1"))),
    ).toBe("claim_dir_changed");
    expect(listing(moved)).toEqual([]);
    await store.close();
  });

  it("opened up to group/other mid-session: claim_dir_insecure", async () => {
    const store = await DirectoryClaimStore.open(dir);
    chmodSync(dir, 0o750);
    expect(
      await codeOf(() => store.claim({ session: "s", functionCallId: "1" }, record("1"))),
    ).toBe("claim_dir_insecure");
    expect(listing(dir)).toEqual([]);
    await store.close();
  });

  it("a closed store refuses with claim_store_unavailable", async () => {
    const store = await DirectoryClaimStore.open(dir);
    await store.close();
    expect(
      await codeOf(() => store.claim({ session: "s", functionCallId: "1" }, record("1"))),
    ).toBe("claim_store_unavailable");
  });
});

describe.each([
  ["per-claim fsync", {}],
  ["marker content fsynced too", { syncMarkerContent: true }],
])("DirectoryClaimStore claims (%s)", (_label, options) => {
  it("one marker per claim, named by the key digest, private to the owner", async () => {
    const store = await DirectoryClaimStore.open(dir, options);
    const key = { session: "s", functionCallId: "call-1" };
    expect(await store.claim(key, record("a"))).toEqual({ status: "claimed" });
    expect(listing(dir)).toEqual([claimKeyDigest(key)]);
    const again = await store.claim(key, record("changed", "other"));
    expect(again).toEqual({ status: "already_claimed", existing: { ...key, ...record("a") } });
    await store.close();
  });

  it("settle records the outcome in place; unsettled claims read in doubt", async () => {
    const store = await DirectoryClaimStore.open(dir, options);
    const done = { session: "s", functionCallId: "done" };
    const open = { session: "s", functionCallId: "open" };
    await store.claim(done, record("d"));
    await store.claim(open, record("o"));
    await store.settle(done, { status: "dispatched", settledAt: 5 });
    expect((await store.get(done))?.receipt).toEqual({ status: "dispatched", settledAt: 5 });
    expect(await store.listInDoubt()).toEqual([{ ...open, ...record("o") }]);
    expect(await store.listInDoubt("other")).toEqual([]);
    expect(listing(dir)).toHaveLength(2); // no temporary or outcome files left behind
    expect((await store.claim(done, record("d"))).status).toBe("already_claimed");
    // A fresh store on the same directory (a restarted worker) sees the same.
    const reopened = await DirectoryClaimStore.open(dir, options);
    expect((await reopened.claim(open, record("o"))).status).toBe("already_claimed");
    expect(await reopened.listInDoubt("s")).toEqual([{ ...open, ...record("o") }]);
    await reopened.close();
    await store.close();
  });

  it("64 concurrent claims of one key: exactly one wins; losers see the winner's record", async () => {
    const store = await DirectoryClaimStore.open(dir, options);
    const key = { session: "s", functionCallId: "hot" };
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) => store.claim(key, record(`${i}`, `w${i}`))),
    );
    const winners = results.flatMap((r, i) => (r.status === "claimed" ? [i] : []));
    expect(winners).toHaveLength(1);
    for (const r of results) {
      if (r.status === "already_claimed") expect(r.existing.worker).toBe(`w${winners[0]}`);
    }
    await store.close();
  });

  it("endSession removes that session's markers only", async () => {
    const store = await DirectoryClaimStore.open(dir, options);
    await store.claim({ session: "a", functionCallId: "1" }, record("1"));
    await store.claim({ session: "a", functionCallId: "2" }, record("2"));
    await store.claim({ session: "b", functionCallId: "1" }, record("1"));
    await store.endSession("a");
    expect(listing(dir)).toEqual([claimKeyDigest({ session: "b", functionCallId: "1" })]);
    expect(await store.get({ session: "a", functionCallId: "1" })).toBeUndefined();
    await store.close();
  });
});

describe("DirectoryClaimStore and hostile keys", () => {
  it("no session or ID can write outside the directory", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const hostile = [
      "../escape",
      "../../../../tmp/escape",
      "/etc/passwd",
      "a/b/c",
      "a\u0000b",
      "..",
      ".",
      "",
      "✓ заявка 😀",
      "x".repeat(100 * 1024),
    ];
    const keys = hostile.flatMap((value) => [
      { session: value, functionCallId: "plain" },
      { session: "plain", functionCallId: value },
    ]);
    for (const key of keys)
      expect(await store.claim(key, record("h"))).toEqual({ status: "claimed" });
    for (const key of keys) await store.settle(key, { status: "denied", settledAt: 1 });
    for (const key of keys)
      expect(await store.get(key)).toMatchObject({ ...key, receipt: { status: "denied" } });
    const names = listing(dir);
    expect(names).toHaveLength(new Set(keys.map(claimKeyDigest)).size);
    for (const name of names) expect(name).toMatch(/^[0-9a-f]{64}$/);
    expect(listing(root)).toEqual(["claims", ...names.map((n) => path.join("claims", n))].sort());
    await store.close();
  });

  it("a marker whose content was lost reads as claimed with an unknown record", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const key = { session: "s", functionCallId: "torn" };
    writeFileSync(path.join(dir, claimKeyDigest(key)), "", { mode: 0o600 });
    const result = await store.claim(key, record("t"));
    expect(result).toEqual({
      status: "already_claimed",
      existing: { ...key, bodyHash: "", claimedAt: 0 },
    });
    await store.close();
  });
});

describe("DirectoryClaimStore after another process ended the session", () => {
  // The other process is a second store on the same directory: all it does is remove the
  // marker, and it shares nothing with this store (its held markers are its own).
  it.skipIf(!existsSync("/proc/self/fd"))(
    "a re-claim of a key whose marker it still held closes that handle: no descriptor leaks",
    async () => {
      const store = await DirectoryClaimStore.open(dir);
      const other = await DirectoryClaimStore.open(dir);
      const key = { session: "s", functionCallId: "again" };
      expect(await store.claim(key, record("0"))).toEqual({ status: "claimed" });
      expect(openMarkerHandles(dir)).toBe(1);
      for (let i = 1; i <= 5; i++) {
        await other.endSession("s");
        expect(await store.claim(key, record(`${i}`))).toEqual({ status: "claimed" });
      }
      // Before, each re-claim dropped the handle it held without closing it: 6 were open here.
      expect(openMarkerHandles(dir)).toBe(1);
      // The handle kept is the new marker's: the settle lands in it, and closes it.
      await store.settle(key, { status: "dispatched", settledAt: 2 });
      expect(openMarkerHandles(dir)).toBe(0);
      expect(await other.get(key)).toMatchObject({
        bodyHash: record("5").bodyHash,
        receipt: { status: "dispatched" },
      });
      await Promise.all([store.close(), other.close()]);
    },
  );
});

describe("DirectoryClaimStore.get of a marker without a record line", () => {
  it.each([
    ["empty (its writer died after the create)", ""],
    ["a torn record line", '{"v":1,"session":"s","functionCall'],
  ])("%s: held, as a claim of it finds, never free", async (_, content) => {
    const store = await DirectoryClaimStore.open(dir);
    const key = { session: "s", functionCallId: "no-record" };
    writeFileSync(path.join(dir, claimKeyDigest(key)), content, { mode: 0o600 });
    expect((await store.inDoubtReport()).skipped).toEqual([
      { marker: claimKeyDigest(key), why: "no_record" },
    ]);
    const unknown = { ...key, bodyHash: "", claimedAt: 0 };
    // Before, `get` answered undefined (free) while a claim of the key was refused.
    expect(await store.get(key)).toEqual(unknown);
    expect(await store.claim(key, record("late"))).toEqual({
      status: "already_claimed",
      existing: unknown,
    });
    expect(await store.get(key)).toEqual(unknown);
    // Once the marker is gone the key is free again, for `get` as for `claim`.
    rmSync(path.join(dir, claimKeyDigest(key)));
    expect(await store.get(key)).toBeUndefined();
    await store.close();
  });
});

describe("DirectoryClaimStore.close with work under way", () => {
  it("lets claims and settles already started finish, and refuses what comes after", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const keys = Array.from({ length: 50 }, (_, i) => ({ session: "s", functionCallId: `c-${i}` }));
    const claimed = keys.map((key) => store.claim(key, record(key.functionCallId)));
    // Closed while every claim is between its create and its fsync: before, each failed on the
    // closed descriptor and left its marker behind, blocking an ID whose call never ran.
    await new Promise((resolve) => setImmediate(resolve));
    const closed = store.close();
    expect(await Promise.all(claimed)).toEqual(keys.map(() => ({ status: "claimed" })));
    await closed;
    expect(
      await codeOf(() => store.claim({ session: "s", functionCallId: "late" }, record("l"))),
    ).toBe("claim_store_unavailable");
    expect(listing(dir)).toHaveLength(keys.length);
    // Each marker is a whole claim the reopened store reads (in doubt: none was settled).
    const reopened = await DirectoryClaimStore.open(dir);
    const report = await reopened.inDoubtReport();
    expect(report.skipped).toEqual([]);
    expect(report.inDoubt.map((claim) => claim.functionCallId).sort()).toEqual(
      keys.map((key) => key.functionCallId).sort(),
    );
    await reopened.close();
  });
});

describe("DirectoryClaimStore.close with reads and session ends under way", () => {
  it("waits for them: listings see every claim, a session end removes its own markers and no other directory's", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const keysOf = (session: string) =>
      Array.from({ length: 200 }, (_, i) => ({ session, functionCallId: `c-${i}` }));
    const kept = keysOf("kept");
    const gone = keysOf("gone");
    for (const key of [...kept, ...gone]) await store.claim(key, record(key.functionCallId));
    const listed = store.listInDoubt("kept");
    const reported = store.inDoubtReport("kept");
    const got = store.get({ session: "kept", functionCallId: "c-199" });
    const ended = store.endSession("gone");
    await store.close();
    // A second claim directory opened right after the close: on Linux it may reuse the closed
    // store's descriptor number, which the store reaches its markers through
    // (/proc/self/fd/<fd>). Before, the session end went on through that number after the
    // close and removed this directory's markers of session "gone": claims another store held.
    const other = path.join(root, "other");
    mkdirSync(other, { mode: 0o700 });
    const second = await DirectoryClaimStore.open(other);
    for (const key of gone) await second.claim(key, record(key.functionCallId));
    // Before, the reads went on after the close and found nothing: a listing said no claim was
    // in doubt and `get` that the ID was free, while 200 claims were held.
    const ids = (claims: readonly { functionCallId: string }[]) =>
      claims.map((claim) => claim.functionCallId).sort();
    expect(ids(await listed)).toEqual(ids(kept));
    expect(ids((await reported).inDoubt)).toEqual(ids(kept));
    expect(await got).toMatchObject({ session: "kept", functionCallId: "c-199" });
    await ended;
    expect(listing(dir)).toHaveLength(kept.length);
    expect(listing(other)).toHaveLength(gone.length);
    expect(ids(await second.listInDoubt("gone"))).toEqual(ids(gone));
    await second.close();
    // Refused once closed, like claims and settles.
    expect(await codeOf(() => store.listInDoubt())).toBe("claim_store_unavailable");
    expect(await codeOf(() => store.endSession("kept"))).toBe("claim_store_unavailable");
    expect(await codeOf(() => store.get({ session: "kept", functionCallId: "c-0" }))).toBe(
      "claim_store_unavailable",
    );
  });
});
