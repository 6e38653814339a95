/**
 * The claim directory's rare faults: a write that fails after the exclusive create (a full
 * disk), and entries named like markers that are not regular files (a FIFO, a directory, a
 * symlink). Each must leave the store truthful and responsive.
 */
import { execFileSync } from "node:child_process";
import {
  closeSync,
  constants,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { type FileHandle, open, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type ClaimKey, type ClaimRecord, isTesseraError } from "@tessera/core";
import { claimKeyDigest } from "@tessera/core/store-kit";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DirectoryClaimStore } from "./directory-store.js";

// The store's unlink, passed through unless a test makes it fail once.
vi.mock("node:fs/promises", async (importOriginal) => {
  const actual = await importOriginal<typeof import("node:fs/promises")>();
  return { ...actual, unlink: vi.fn(actual.unlink) };
});

const RECORD: ClaimRecord = { bodyHash: "h", claimedAt: 1_700_000_000_000, worker: "test" };

let root: string;
let dir: string;
const fifos: string[] = [];

beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), "tessera-dir-faults-"));
  dir = path.join(root, "claims");
  mkdirSync(dir, { mode: 0o700 });
});

afterEach(async () => {
  vi.restoreAllMocks();
  // A reader blocked in open() on a FIFO (the bug these tests pin) is released by a writer;
  // opened synchronously, because the blocked readers may hold every libuv thread.
  for (const fifo of fifos.splice(0)) {
    try {
      closeSync(openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK));
    } catch {
      // already removed
    }
  }
  rmSync(root, { recursive: true, force: true });
});

/** The marker path the store uses for `key` (the same digest it computes). */
function markerOf(key: ClaimKey): string {
  return path.join(dir, claimKeyDigest(key));
}

function mkfifo(file: string): void {
  execFileSync("mkfifo", ["-m", "600", file]);
  fifos.push(file);
}

/** Rejects if `promise` takes longer than `ms`: a hang is the failure these tests look for. */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hung for ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function codeOf(action: Promise<unknown>): Promise<string | undefined> {
  try {
    await action;
  } catch (error) {
    if (isTesseraError(error)) return error.code;
    throw error;
  }
  return undefined;
}

/** The prototype every `FileHandle` shares, to inject one failing call. */
async function fileHandlePrototype(): Promise<FileHandle> {
  const handle = await open(root, constants.O_RDONLY);
  await handle.close();
  return Object.getPrototypeOf(handle);
}

function enospc(): NodeJS.ErrnoException {
  return Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
}

describe("a write that fails after the exclusive create (full disk)", () => {
  it("the marker is removed: claim_store_unavailable, and the ID is still free", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const key = { session: "s", functionCallId: "full" };
    vi.spyOn(await fileHandlePrototype(), "writeFile").mockRejectedValueOnce(enospc());
    expect(await codeOf(store.claim(key, RECORD))).toBe("claim_store_unavailable");
    expect(readdirSync(dir)).toEqual([]);
    // Nothing ran, and nothing is refused forever: the same ID claims once space is back.
    expect(await store.claim(key, RECORD)).toEqual({ status: "claimed" });
    await store.close();
  });

  it("a failed directory fsync removes the marker the same way", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const key = { session: "s", functionCallId: "nosync" };
    vi.spyOn(await fileHandlePrototype(), "sync").mockRejectedValueOnce(enospc());
    expect(await codeOf(store.claim(key, RECORD))).toBe("claim_store_unavailable");
    expect(readdirSync(dir)).toEqual([]);
    expect(await store.claim(key, RECORD)).toEqual({ status: "claimed" });
    await store.close();
  });

  it("a marker that cannot be removed either stays, and the in-doubt report names it", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const key = { session: "s", functionCallId: "stuck" };
    vi.spyOn(await fileHandlePrototype(), "writeFile").mockRejectedValueOnce(enospc());
    vi.mocked(unlink).mockRejectedValueOnce(Object.assign(new Error("EIO"), { code: "EIO" }));
    const error = await store.claim(key, RECORD).catch((e: unknown) => e);
    expect(isTesseraError(error, "claim_store_unavailable")).toBe(true);
    expect((error as Error).message).toMatch(/stays claimed/);
    expect(readdirSync(dir)).toEqual([claimKeyDigest(key)]);
    expect(await store.inDoubtReport()).toEqual({
      inDoubt: [],
      skipped: [{ marker: claimKeyDigest(key), why: "no_record" }],
    });
    await store.close();
  });
});

describe("entries named like markers that are not regular files", () => {
  it("a FIFO: claim, get, listInDoubt and endSession answer at once; the report names it", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const fifoKey = { session: "s", functionCallId: "fifo" };
    const realKey = { session: "s", functionCallId: "real" };
    await store.claim(realKey, RECORD); // a genuine claim in doubt beside it
    mkfifo(markerOf(fifoKey));
    expect(await within(2000, codeOf(store.claim(fifoKey, RECORD)))).toBe(
      "claim_store_unavailable",
    );
    expect(await within(2000, codeOf(store.get(fifoKey)))).toBe("claim_store_unavailable");
    expect(await within(2000, store.listInDoubt())).toMatchObject([realKey]);
    expect(await within(2000, store.inDoubtReport("s"))).toEqual({
      inDoubt: [expect.objectContaining(realKey)],
      skipped: [{ marker: claimKeyDigest(fifoKey), why: "not_a_file" }],
    });
    await within(2000, store.endSession("s"));
    expect(readdirSync(dir)).toEqual([claimKeyDigest(fifoKey)]); // left for the operator
    await store.close();
  });

  it("repeated FIFO hits do not starve other claims in the process (libuv threadpool)", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const keys = Array.from({ length: 8 }, (_, i) => ({ session: "s", functionCallId: `f${i}` }));
    for (const key of keys) mkfifo(markerOf(key));
    const hits = await within(
      3000,
      Promise.all(keys.map((key) => codeOf(store.claim(key, RECORD)))),
    );
    expect(hits).toEqual(keys.map(() => "claim_store_unavailable"));
    const fresh = { session: "s", functionCallId: "fresh" };
    expect(await within(2000, store.claim(fresh, RECORD))).toEqual({ status: "claimed" });
    await store.close();
  });

  it("a settle whose marker was replaced by a FIFO fails at once instead of waiting", async () => {
    const writer = await DirectoryClaimStore.open(dir);
    const key = { session: "s", functionCallId: "swapped" };
    await writer.claim(key, RECORD);
    await writer.close();
    rmSync(markerOf(key));
    mkfifo(markerOf(key));
    const other = await DirectoryClaimStore.open(dir); // holds no open marker for the key
    expect(
      await within(2000, codeOf(other.settle(key, { status: "dispatched", settledAt: 1 }))),
    ).toBe("claim_store_unavailable");
    await other.close();
  });

  it.each([
    ["a directory", (file: string) => mkdirSync(file, { mode: 0o700 })],
    [
      "a symlink to a real marker",
      (file: string) => {
        const elsewhere = path.join(root, "elsewhere");
        writeFileSync(
          elsewhere,
          `${JSON.stringify({ v: 1, session: "s", functionCallId: "x", bodyHash: "h", claimedAt: 1 })}\n`,
        );
        symlinkSync(elsewhere, file);
      },
    ],
  ])(
    "%s: listInDoubt skips it and still lists the rest; the report names it",
    async (_label, plant) => {
      const store = await DirectoryClaimStore.open(dir);
      const realKey = { session: "s", functionCallId: "real" };
      const oddKey = { session: "s", functionCallId: "odd" };
      await store.claim(realKey, RECORD);
      plant(markerOf(oddKey));
      expect(await store.listInDoubt()).toMatchObject([realKey]);
      expect(await store.listInDoubt("s")).toMatchObject([realKey]);
      expect(await store.inDoubtReport()).toEqual({
        inDoubt: [expect.objectContaining(realKey)],
        skipped: [{ marker: claimKeyDigest(oddKey), why: "not_a_file" }],
      });
      expect(await codeOf(store.claim(oddKey, RECORD))).toBe("claim_store_unavailable");
      await store.endSession("s");
      expect(readdirSync(dir)).toEqual([claimKeyDigest(oddKey)]);
      await store.close();
    },
  );

  it("an empty marker (a worker killed before its record line) is reported, not listed", async () => {
    const store = await DirectoryClaimStore.open(dir);
    const key = { session: "s", functionCallId: "torn" };
    writeFileSync(markerOf(key), "", { mode: 0o600 });
    expect(await store.listInDoubt()).toEqual([]);
    expect(await store.inDoubtReport()).toEqual({
      inDoubt: [],
      skipped: [{ marker: claimKeyDigest(key), why: "no_record" }],
    });
    await store.close();
  });
});
