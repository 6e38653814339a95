/**
 * Claim answers in the directory store: kept in the receipt line of the marker, read back by
 * `get` and by a loser's `already_claimed`, the first settle standing answer included; and
 * the marker format's compatibility with the previous release both ways (its markers read
 * here, and this release's receipt lines read by its rule).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { isTesseraError } from "@tessera/core";
import { claimKeyDigest, MAX_ANSWER_BYTES } from "@tessera/core/store-kit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DirectoryClaimStore } from "./directory-store.js";

const record = { bodyHash: "b".repeat(64), claimedAt: 1_700_000_000_000, worker: "w" };
const key = (id: string) => ({ session: "s", functionCallId: id });

let root: string;
let dir: string;
let store: DirectoryClaimStore;
beforeEach(async () => {
  root = mkdtempSync(path.join(tmpdir(), "tessera-dir-answer-"));
  dir = path.join(root, "claims");
  mkdirSync(dir, { mode: 0o700 });
  store = await DirectoryClaimStore.open(dir);
});
afterEach(async () => {
  await store.close();
  rmSync(root, { recursive: true, force: true });
});

async function codeOf(action: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await action();
  } catch (error) {
    if (isTesseraError(error)) return error.code;
    throw error;
  }
  return undefined;
}

/** The previous release's rule for a marker's outcome: the first complete receipt line. */
function previousReleaseReceipt(text: string): { status: string; settledAt: number } | undefined {
  for (const line of text.split("\n").slice(1)) {
    try {
      const parsed = JSON.parse(line);
      if (
        ["dispatched", "denied", "failed"].includes(parsed?.status) &&
        typeof parsed.settledAt === "number"
      ) {
        return { status: parsed.status, settledAt: parsed.settledAt };
      }
    } catch {
      // a torn line: skipped, as that release did
    }
  }
  return undefined;
}

describe("DirectoryClaimStore answers", () => {
  it("settle keeps the answer; get and a loser's already_claimed read it back", async () => {
    await store.claim(key("a"), record);
    const answer = { messageId: "m-1", reply: { text: "line one\nline two", n: [1, null] } };
    await store.settle(key("a"), { status: "dispatched", settledAt: 5 }, answer);
    expect(await store.get(key("a"))).toEqual({
      ...key("a"),
      ...record,
      receipt: { status: "dispatched", settledAt: 5 },
      answer,
    });
    const other = await DirectoryClaimStore.open(dir);
    try {
      const lost = await other.claim(key("a"), record);
      expect(lost).toEqual({
        status: "already_claimed",
        existing: expect.objectContaining({ answer }),
      });
    } finally {
      await other.close();
    }
    expect(await store.listInDoubt()).toEqual([]);
  });

  it("the first settle stands, answer included; a settle without one keeps none; null is kept", async () => {
    await store.claim(key("b"), record);
    await store.settle(key("b"), { status: "failed", settledAt: 1 }, { first: true });
    await store.settle(key("b"), { status: "dispatched", settledAt: 2 }, { first: false });
    expect(await store.get(key("b"))).toMatchObject({
      receipt: { status: "failed", settledAt: 1 },
      answer: { first: true },
    });
    await store.claim(key("c"), record);
    await store.settle(key("c"), { status: "dispatched", settledAt: 3 });
    expect(await store.get(key("c"))).not.toHaveProperty("answer");
    // Settled from another process's store (no held marker): the answer still lands.
    await store.claim(key("d"), record);
    const other = await DirectoryClaimStore.open(dir);
    try {
      await other.settle(key("d"), { status: "dispatched", settledAt: 4 }, null);
    } finally {
      await other.close();
    }
    expect(await store.get(key("d"))).toMatchObject({ answer: null });
  });

  it("an answer that is not JSON-safe or too large is refused before the marker is touched", async () => {
    await store.claim(key("e"), record);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const settle = (answer: unknown) =>
      store.settle(key("e"), { status: "dispatched", settledAt: 1 }, answer as never);
    expect(await codeOf(() => settle(cyclic))).toBe("invalid_input");
    expect(await codeOf(() => settle("x".repeat(MAX_ANSWER_BYTES + 1)))).toBe("invalid_input");
    expect((await store.get(key("e")))?.receipt).toBeUndefined();
    await settle({ ok: true });
    expect(await store.get(key("e"))).toMatchObject({ answer: { ok: true } });
  });
});

describe("marker compatibility with the previous release", () => {
  it("its markers, settled or in doubt, read back as they were; one in doubt settles with an answer", async () => {
    const recordLine = (id: string) =>
      `{"v":1,"session":"s","functionCallId":"${id}","bodyHash":"h","claimedAt":1,"worker":"old"}\n`;
    const settled = `${recordLine("old-settled")}{"status":"dispatched","settledAt":2}\n`;
    writeFileSync(path.join(dir, claimKeyDigest(key("old-settled"))), settled, { mode: 0o600 });
    writeFileSync(path.join(dir, claimKeyDigest(key("old-doubt"))), recordLine("old-doubt"), {
      mode: 0o600,
    });
    expect(await store.get(key("old-settled"))).toEqual({
      ...key("old-settled"),
      bodyHash: "h",
      claimedAt: 1,
      worker: "old",
      receipt: { status: "dispatched", settledAt: 2 },
    });
    expect(await store.listInDoubt()).toEqual([
      { ...key("old-doubt"), bodyHash: "h", claimedAt: 1, worker: "old" },
    ]);
    await store.settle(key("old-doubt"), { status: "failed", settledAt: 3 }, { error: "e" });
    expect(await store.get(key("old-doubt"))).toMatchObject({ answer: { error: "e" } });
  });

  it("this release's markers keep the record line as it was and read by the previous rule", async () => {
    await store.claim(key("new"), record);
    await store.settle(key("new"), { status: "denied", settledAt: 9 }, { status: "denied" });
    const text = readFileSync(path.join(dir, claimKeyDigest(key("new"))), "utf8");
    const [first, second, rest] = text.split("\n");
    expect(JSON.parse(first ?? "")).toEqual({ v: 1, ...key("new"), ...record });
    expect(JSON.parse(second ?? "")).toEqual({
      status: "denied",
      settledAt: 9,
      answer: { status: "denied" },
    });
    expect(rest).toBe("");
    expect(previousReleaseReceipt(text)).toEqual({ status: "denied", settledAt: 9 });
  });
});
