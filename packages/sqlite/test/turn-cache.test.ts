/**
 * The kernel's turn cache over SQLite: a turn opened on an unchanged grant set reads only the
 * holder's version, and every way a grant can change lands on the next turn with the cache
 * warm — the store's revoke, another connection's (as another process's), and plain SQL (the
 * version triggers see it too).
 */
import { createKernel, deriveGrant, type GrantInput, type GrantSource } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type OpenedSqlite, openFresh } from "./helpers.js";

const T0 = "2026-01-01T00:00:00.000Z";
const READ = { action: "files.read", resource: { namespace: "files", path: ["a"] } };
const ctx = { namespaceId: "ns", actor: "asker", authority: "host", traceId: "t", now: T0 };

function readGrant(id: string, overrides: Partial<GrantInput> = {}): GrantInput {
  return {
    id,
    namespaceId: "ns",
    issuer: "host",
    subject: "asker",
    capabilities: [
      { resource: { namespace: "files", path: ["a"] }, actions: ["files.read"], scope: "exact" },
    ],
    issuedAt: "2025-12-01T00:00:00.000Z",
    ...overrides,
  };
}

let opened: OpenedSqlite;
beforeEach(async () => {
  opened = await openFresh();
});
afterEach(async () => {
  await opened.close();
});

/** The SQLite grant store, counting full listings. */
function counting(): GrantSource & { listed: number } {
  const grants = opened.stores.grants;
  const source = {
    listed: 0,
    listGrants: (namespaceId: string, subject: string) => {
      source.listed++;
      return grants.listGrants(namespaceId, subject);
    },
    grantsVersion: (namespaceId: string, subject: string) =>
      (grants.grantsVersion as NonNullable<typeof grants.grantsVersion>)(namespaceId, subject),
  };
  return source;
}

async function decide(kernel: ReturnType<typeof createKernel>) {
  const turn = await kernel.openTurnAuthority(ctx);
  try {
    return (await turn.authorize(READ)).status;
  } finally {
    await turn.close();
  }
}

describe("turn cache over SQLite", () => {
  it("opens warm turns on one version read; the store's revoke lands on the next turn", async () => {
    const source = counting();
    const kernel = createKernel({ grants: source });
    await opened.stores.grants.add(readGrant("g"));
    for (let i = 0; i < 3; i++) expect(await decide(kernel)).toBe("allowed");
    expect(source.listed).toBe(1);
    expect(await opened.stores.grants.revoke("ns", "g")).toBe(true);
    expect(await decide(kernel)).toBe("denied");
    expect(source.listed).toBe(2);
  });

  it("a revoke through another connection to the file lands on the next turn", async () => {
    const kernel = createKernel({ grants: counting() });
    await opened.stores.grants.add(readGrant("g"));
    expect(await decide(kernel)).toBe("allowed");
    expect(await decide(kernel)).toBe("allowed");
    const other = await openStores(opened.url);
    try {
      expect(await other.grants.revoke("ns", "g")).toBe(true);
    } finally {
      await other.close();
    }
    expect(await decide(kernel)).toBe("denied");
  });

  it("an edit in plain SQL bumps the version too (revoke, delete)", async () => {
    const kernel = createKernel({ grants: counting() });
    await opened.stores.grants.add(readGrant("g"));
    await opened.stores.grants.add(readGrant("h"));
    expect(await decide(kernel)).toBe("allowed");
    const raw = new BetterSqlite3(opened.url.slice("sqlite:".length));
    try {
      raw.prepare("UPDATE tessera_grants SET revoked_at = ? WHERE id = 'g'").run(T0);
      expect(await decide(kernel)).toBe("allowed"); // h still stands
      raw.prepare("DELETE FROM tessera_grants WHERE id = 'h'").run();
      expect(await decide(kernel)).toBe("denied");
    } finally {
      raw.close();
    }
  });

  it("revoking a delegator's grant kills the derived one on the next turn, cache warm", async () => {
    const kernel = createKernel({ grants: counting() });
    const grants = opened.stores.grants;
    const root = await grants.add(readGrant("root", { subject: "agent" }));
    await grants.add(
      deriveGrant(
        root,
        {
          id: "leaf",
          subject: "asker",
          capabilities: root.capabilities.map((c) => ({ ...c })),
        },
        { issuer: "agent" },
      ),
    );
    expect(await decide(kernel)).toBe("allowed");
    expect(await decide(kernel)).toBe("allowed");
    expect(await grants.revoke("ns", "root")).toBe(true);
    expect(await decide(kernel)).toBe("denied");
  });
});
