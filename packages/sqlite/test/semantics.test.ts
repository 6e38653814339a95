/**
 * SQLite choices the conformance suites leave open: duplicate grants, monotonic revocation,
 * invalid input, the audit table's append-only triggers.
 */
import { statSync } from "node:fs";
import type { AuditEvent } from "@tessera/core";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type OpenedSqlite, openFresh } from "./helpers.js";

async function codeOf(action: () => unknown): Promise<string | undefined> {
  try {
    await action();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

const grant = {
  id: "g",
  namespaceId: "ns",
  issuer: "host",
  subject: "agent",
  capabilities: [
    { resource: { namespace: "m", path: ["bob"] }, actions: ["send"], scope: "exact" as const },
  ],
  issuedAt: "2026-01-01T00:00:00.000Z",
};

let opened: OpenedSqlite;
beforeEach(async () => {
  opened = await openFresh();
});
afterEach(() => opened.close());

describe("grants", () => {
  it("adding an existing ID is refused with invalid_grant, so a revoked grant stays revoked", async () => {
    const { grants } = opened.stores;
    await grants.add(grant);
    await grants.revoke("ns", "g", new Date("2026-02-01T00:00:00.000Z"));
    expect(await codeOf(() => grants.add(grant))).toBe("invalid_grant");
    expect(await grants.listNamespace("ns")).toMatchObject([
      { id: "g", revokedAt: "2026-02-01T00:00:00.000Z" },
    ]);
  });

  it("a stored grant edited into an invalid one is refused naming the grant", async () => {
    const { grants } = opened.stores;
    await grants.add(grant);
    const raw = new BetterSqlite3(opened.url.slice("sqlite:".length));
    raw.exec("UPDATE tessera_grants SET body = '{}' WHERE id = 'g'");
    raw.close();
    await expect(grants.listNamespace("ns")).rejects.toMatchObject({
      code: "invalid_grant",
      message: expect.stringContaining("the stored grant g does not validate"),
    });
  });

  it("a second revocation keeps the first instant and still reports the grant exists", async () => {
    const { grants } = opened.stores;
    await grants.add(grant);
    expect(await grants.revoke("ns", "g", new Date("2026-02-01T00:00:00.000Z"))).toBe(true);
    expect(await grants.revoke("ns", "g", new Date("2026-03-01T00:00:00.000Z"))).toBe(true);
    expect((await grants.listNamespace("ns"))[0]?.revokedAt).toBe("2026-02-01T00:00:00.000Z");
  });

  it("refuses an invalid revocation instant with invalid_input", async () => {
    await opened.stores.grants.add(grant);
    expect(await codeOf(() => opened.stores.grants.revoke("ns", "g", new Date("nope")))).toBe(
      "invalid_input",
    );
    expect((await opened.stores.grants.listNamespace("ns"))[0]?.revokedAt).toBeUndefined();
  });
});

describe("claims", () => {
  it("refuses non-string keys, a bad record and a bad receipt with invalid_input", async () => {
    const { claims } = opened.stores;
    const bad = [
      () =>
        claims.claim({ session: 1, functionCallId: "x" } as never, { bodyHash: "h", claimedAt: 1 }),
      () =>
        claims.claim(
          { session: "s", functionCallId: "x" },
          { bodyHash: "h", claimedAt: Number.NaN },
        ),
      () => claims.claim({ session: "s", functionCallId: "x" }, { bodyHash: 5 } as never),
      () =>
        claims.settle({ session: "s", functionCallId: "x" }, {
          status: "in_doubt",
          settledAt: 1,
        } as never),
      () => claims.listInDoubt(7 as never),
    ];
    for (const action of bad) expect(await codeOf(action)).toBe("invalid_input");
    expect(await claims.listInDoubt()).toEqual([]);
  });
});

describe("usage", () => {
  it("refuses a bound that is not a positive integer with invalid_input and spends nothing", async () => {
    const { usage } = opened.stores;
    for (const bad of [0, -1, 2.5, Number.NaN]) {
      expect(await codeOf(() => usage.tryConsume("ns", "g", bad))).toBe("invalid_input");
    }
    expect(await usage.getUsage("ns", "g")).toBe(0);
  });

  it("consumes let SQLite checkpoint the WAL, so it stops growing at the auto-checkpoint size", async () => {
    // A consume ending at its RETURNING row (reset, not stepped to the end) skips SQLite's
    // auto-checkpoint: the WAL then grows by one frame per consume for the life of the
    // connection, and every synchronous=FULL commit pays for the file growing. NORMAL only
    // keeps this quick: the checkpoint rule does not depend on it.
    const fresh = await openFresh("synchronous=normal");
    try {
      for (let i = 0; i < 1500; i++) await fresh.stores.usage.tryConsume("ns", `g${i % 10}`, 1e9);
      expect(await fresh.stores.usage.getUsage("ns", "g0")).toBe(150);
      const path = fresh.url.slice("sqlite:".length);
      const raw = new BetterSqlite3(path, { readonly: true });
      const frame = Number(raw.pragma("page_size", { simple: true })) + 24;
      raw.close();
      // 1000 frames (the default wal_autocheckpoint), plus the schema's and some slack.
      expect(statSync(`${path}-wal`).size).toBeLessThan(1100 * frame);
    } finally {
      await fresh.close();
    }
  });
});

describe("audit", () => {
  const event: AuditEvent = {
    at: "2026-01-01T00:00:00.000Z",
    source: "gate",
    outcome: "denied",
    code: "INVALID_FUNCTION_CALL",
    reason: "duplicate_call",
    traceId: "t",
    callId: "c",
    session: "s",
    receipt: "none",
  };

  it("refuses an event that does not validate with invalid_input and stores nothing", async () => {
    const { audit } = opened.stores;
    expect(await codeOf(() => audit.append({ ...event, reason: "made_up" } as never))).toBe(
      "invalid_input",
    );
    expect(await codeOf(() => audit.append({ ...event, extra: 1 } as never))).toBe("invalid_input");
    expect(await audit.read()).toEqual([]);
  });

  it("limit keeps the first events, in append order", async () => {
    const { audit } = opened.stores;
    for (let i = 0; i < 5; i++) await audit.append({ ...event, callId: `c${i}` });
    expect((await audit.read({ limit: 2 })).map((e) => e.callId)).toEqual(["c0", "c1"]);
    expect(await codeOf(() => audit.read({ limit: -1 }))).toBe("invalid_input");
  });

  it("the table itself refuses UPDATE and DELETE", async () => {
    await opened.stores.audit.append(event);
    const raw = new BetterSqlite3(opened.url.slice("sqlite:".length));
    expect(() => raw.exec("UPDATE tessera_audit SET call_id = 'x'")).toThrow(/append-only/);
    expect(() => raw.exec("DELETE FROM tessera_audit")).toThrow(/append-only/);
    raw.close();
    expect(await opened.stores.audit.read()).toMatchObject([event]);
  });
});
