/**
 * The grant-version read (and the usage read, `getUsage`) checks that the path still names
 * the opened file at most once per `VERSION_CHECK_MS` (database.ts): a turn opened on it is at most that much older than its
 * read. These tests pin the bound from the other side: past the window the version read of a
 * moved, deleted or doubly named file fails closed, and so does a turn opened on it, with the
 * kernel's cache warm; and after any check that failed it checks again at once.
 */
import { linkSync, renameSync, rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { createKernel, type GrantInput } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { VERSION_CHECK_MS } from "../src/database.js";
import { freshFile } from "./helpers.js";

const ctx = { namespaceId: "ns", actor: "asker", authority: "host", traceId: "t" };
const READ = { action: "files.read", resource: { namespace: "files", path: ["a"] } };
const grant: GrantInput = {
  id: "g",
  namespaceId: "ns",
  issuer: "host",
  subject: "asker",
  capabilities: [
    { resource: { namespace: "files", path: ["a"] }, actions: ["files.read"], scope: "exact" },
  ],
  issuedAt: "2025-12-01T00:00:00.000Z",
};

const files: { dispose(): void }[] = [];
afterEach(() => {
  for (const made of files.splice(0)) made.dispose();
});

async function opened() {
  const made = freshFile();
  files.push(made);
  const stores = await openStores(`sqlite:${made.path}`);
  await stores.grants.add(grant);
  const kernel = createKernel({ grants: stores.grants });
  return { path: made.path, stores, kernel };
}

async function codeOf(action: () => unknown): Promise<string | undefined> {
  try {
    await action();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

async function decide(kernel: ReturnType<typeof createKernel>): Promise<string> {
  const turn = await kernel.openTurnAuthority(ctx);
  try {
    const result = await turn.authorize(READ);
    return result.status === "allowed" ? "allowed" : result.code;
  } finally {
    await turn.close();
  }
}

/** Longer than the window, whatever the timer's rounding. */
const pastTheWindow = () => sleep(VERSION_CHECK_MS * 5 + 5);

const versionOf = (stores: Awaited<ReturnType<typeof opened>>["stores"]) => () =>
  stores.grants.grantsVersion?.("ns", "asker");

describe("the grant-version read's file check", () => {
  it("a file moved away: past the window the version read and a warm turn fail closed", async () => {
    const { path, stores, kernel } = await opened();
    expect(await decide(kernel)).toBe("allowed");
    renameSync(path, `${path}.away`);
    await pastTheWindow();
    expect(await codeOf(versionOf(stores))).toBe("grant_store_unavailable");
    expect(await decide(kernel)).toBe("authority_unavailable");
    renameSync(`${path}.away`, path);
    expect(await decide(kernel)).toBe("allowed");
    await stores.close();
  });

  it("a file deleted and replaced: past the window the old file's version is not read", async () => {
    const { path, stores, kernel } = await opened();
    expect(await decide(kernel)).toBe("allowed");
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
    const replacement = await openStores(`sqlite:${path}`);
    await pastTheWindow();
    expect(await codeOf(versionOf(stores))).toBe("grant_store_unavailable");
    expect(await decide(kernel)).toBe("authority_unavailable");
    await replacement.close();
    await stores.close();
  });

  it("a second name: past the window the version read fails closed until it is removed", async () => {
    const { path, stores, kernel } = await opened();
    expect(await decide(kernel)).toBe("allowed");
    linkSync(path, `${path}.second`);
    await pastTheWindow();
    expect(await codeOf(versionOf(stores))).toBe("grant_store_unavailable");
    expect(await decide(kernel)).toBe("authority_unavailable");
    rmSync(`${path}.second`);
    expect(await decide(kernel)).toBe("allowed");
    await stores.close();
  });

  it("the usage read is checked the same way: past the window a moved file fails it closed", async () => {
    const { path, stores } = await opened();
    expect(await stores.usage.getUsage("ns", "g")).toBe(0);
    renameSync(path, `${path}.away`);
    await pastTheWindow();
    expect(await codeOf(() => stores.usage.getUsage("ns", "g"))).toBe("usage_store_unavailable");
    // Checked again at once after the failed check: back in place, it reads.
    renameSync(`${path}.away`, path);
    expect(await stores.usage.getUsage("ns", "g")).toBe(0);
    await stores.close();
  });

  it("after a check that failed, the next version read checks at once", async () => {
    const { path, stores } = await opened();
    const before = await versionOf(stores)();
    renameSync(path, `${path}.away`);
    // A write checks before it runs, window or not: it fails, and so does the read after it.
    expect(await codeOf(() => stores.usage.tryConsume("ns", "g", 1))).toBe(
      "usage_store_unavailable",
    );
    expect(await codeOf(versionOf(stores))).toBe("grant_store_unavailable");
    renameSync(`${path}.away`, path);
    expect(await versionOf(stores)()).toBe(before);
    await stores.close();
  });
});
