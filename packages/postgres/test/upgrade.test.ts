/**
 * A schema the previous release left (version 3: claims without answers, an audit chain
 * linked with the v1 rule) opens with this build, migrates in place to the current version,
 * and keeps everything readable: old claims read back as they were (no answer), an old
 * in-doubt claim can be settled with an answer (or withdrawn: its record read as the old
 * release spelled it), a retry of an old call ID collides with its claim, and acts recorded
 * now link after the old chain's head so the whole trail verifies. A version-4 schema (the
 * act ledger without `withdraw_act`) moves to the current version, and an act recorded before is
 * withdrawn after. A version-9 schema refuses an act that undoes its lost spend (fail closed)
 * until it is upgraded.
 */
import { type AuditEvent, verifyAuditChain } from "@tessera/core";
import {
  auditEventHash,
  type ChainHead,
  claimKeyDigest,
  EMPTY_HEAD,
  storageDigest,
} from "@tessera/core/store-kit";
import { actEvent, serviceUrl, spendingAct, withdrawalOf } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresActLedger } from "../src/act-ledger.js";
import { parsePostgresUrl } from "../src/config.js";
import { Database } from "../src/database.js";
import { openStores, SCHEMA_VERSION } from "../src/index.js";
import { migrate } from "../src/migrations.js";
import { admin, dropSchema, freshSchema, withParams } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** An event linked as the previous release linked it (v1: the hash over the whole event). */
function linkV1(content: AuditEvent, head: ChainHead): AuditEvent {
  const linked = { ...content, seq: head.seq + 1, prev: head.hash };
  return { ...linked, hash: auditEventHash(linked) };
}

const oldClaim = (id: string) => ({
  session: "s",
  functionCallId: id,
  bodyHash: "b".repeat(64),
  claimedAt: 1_700_000_000_000,
  worker: "pid 1 on old-host",
});

/** Writes, with plain SQL in the version-3 layout, what the previous release wrote. */
async function writeOldRelease(target: string, schema: string): Promise<AuditEvent[]> {
  const db = new Database(parsePostgresUrl(target));
  try {
    await migrate(db, 3);
  } finally {
    await db.close();
  }
  const s = `"${schema}"`;
  for (const [id, status, at] of [
    ["old-settled", "dispatched", 1_700_000_000_500],
    ["old-doubt", null, null],
    ["old-withdraw", null, null],
  ] as const) {
    await admin(
      url as string,
      `INSERT INTO ${s}.claims (key, session_key, record, claimed_at, receipt_status, settled_at)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [
        claimKeyDigest({ session: "s", functionCallId: id }),
        storageDigest("s"),
        JSON.stringify(oldClaim(id)),
        1_700_000_000_000,
        status,
        at,
      ],
    );
  }
  let head = EMPTY_HEAD;
  const events: AuditEvent[] = [];
  for (const id of ["old-1", "old-2", "old-3"]) {
    const event = linkV1(actEvent(id), head);
    head = { seq: event.seq as number, hash: event.hash as string };
    events.push(event);
    await admin(
      url as string,
      `INSERT INTO ${s}.audit (call_key, trace_key, event) VALUES ($1, $2, $3)`,
      [storageDigest(event.callId), storageDigest(event.traceId), JSON.stringify(event)],
    );
  }
  await admin(
    url as string,
    `INSERT INTO ${s}.audit_heads (stream_key, seq, hash) VALUES ($1, $2, $3)`,
    [storageDigest("ns-acts"), head.seq, head.hash],
  );
  return events;
}

suite("postgres upgrade from schema version 3", () => {
  it("migrates in place; old claims, old chain and new acts all read back and verify", async () => {
    const schema = freshSchema();
    cleanups.push(() => dropSchema(url as string, schema));
    const target = withParams(url as string, { schema });
    const old = await writeOldRelease(target, schema);

    const stores = await openStores(target);
    cleanups.push(() => stores.close());
    const versions = await admin<{ version: number }>(
      url as string,
      `SELECT version FROM "${schema}".schema_version ORDER BY version`,
    );
    expect(versions.map((row) => row.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(SCHEMA_VERSION).toBe(10);
    // Version 8 adds the checked overload beside version 7's, which a process of the previous
    // release still calls while the new one rolls out.
    const overloads = await admin<{ args: number }>(
      url as string,
      `SELECT pronargs AS args FROM pg_proc WHERE proname = 'record_acts'
        AND pronamespace = '"${schema}"'::regnamespace ORDER BY pronargs`,
    );
    expect(overloads.map((row) => row.args)).toEqual([14, 18]);

    // Old claims as they were: the settled one with its receipt and no answer.
    const settledKey = { session: "s", functionCallId: "old-settled" };
    expect(await stores.claims.get(settledKey)).toEqual({
      ...oldClaim("old-settled"),
      receipt: { status: "dispatched", settledAt: 1_700_000_000_500 },
    });
    // Both claimed at the same instant: their order between them is not the contract.
    const inDoubt = await stores.claims.listInDoubt("s");
    expect(inDoubt.sort((a, b) => a.functionCallId.localeCompare(b.functionCallId))).toEqual([
      oldClaim("old-doubt"),
      oldClaim("old-withdraw"),
    ]);
    // The old in-doubt claim settles with an answer now, once.
    const doubtKey = { session: "s", functionCallId: "old-doubt" };
    await stores.claims.settle(doubtKey, { status: "failed", settledAt: 9 }, { error: "lost" });
    await stores.claims.settle(doubtKey, { status: "dispatched", settledAt: 10 }, { late: true });
    expect(await stores.claims.get(doubtKey)).toEqual({
      ...oldClaim("old-doubt"),
      receipt: { status: "failed", settledAt: 9 },
      answer: { error: "lost" },
    });
    // A retry of an old call ID collides with the old claim through the ledger.
    const retry = await stores.acts.record(spendingAct("old-settled"));
    expect(retry).toEqual({
      status: "already_claimed",
      existing: await stores.claims.get(settledKey),
    });

    // New acts link after the v1 head, in SQL; the sink's own appends join the same chain.
    expect((await stores.acts.record(spendingAct("new-1"))).status).toBe("recorded");
    await stores.audit.append(actEvent("new-2"));
    expect(
      (await stores.acts.record({ event: actEvent("new-3", "no_matching_grant") })).status,
    ).toBe("recorded");
    const events = await stores.audit.read();
    expect(events.slice(0, 3)).toEqual(old);
    expect(events.map((event) => [event.callId, event.seq])).toEqual([
      ["old-1", 1],
      ["old-2", 2],
      ["old-3", 3],
      ["new-1", 4],
      ["new-2", 5],
      ["new-3", 6],
    ]);
    expect(events[3]?.prev).toBe(old[2]?.hash);
    expect(verifyAuditChain(events)).toMatchObject({ ok: true, events: 6 });
    // Nothing spent by the collided retry; one use by the new act.
    expect(await stores.usage.getUsage("ns-acts", "ticket")).toBe(1);

    // An old in-doubt claim is withdrawn: its record compared as the old release wrote it
    // (worker included), its event linked after the new ones.
    const { session: _s, functionCallId: _f, ...oldRecord } = oldClaim("old-withdraw");
    const withdrawKey = { session: "s", functionCallId: "old-withdraw" };
    const oldAct = {
      ...spendingAct("old-withdraw"),
      claim: { key: withdrawKey, record: oldRecord },
    };
    const withdraw = stores.acts.withdraw?.bind(stores.acts);
    expect(withdraw).toBeDefined();
    expect(await withdraw?.({ ...withdrawalOf(spendingAct("old-withdraw")) })).toBe("kept");
    expect(await withdraw?.(withdrawalOf(oldAct))).toBe("withdrawn");
    expect((await stores.claims.get(withdrawKey))?.receipt?.status).toBe("failed");
    // The old act spent nothing this counter knows of: never below zero.
    expect(await stores.usage.getUsage("ns-acts", "ticket")).toBe(0);
    const after = await stores.audit.read();
    expect(after.map((event) => [event.callId, event.seq]).slice(6)).toEqual([["old-withdraw", 7]]);
    expect(verifyAuditChain(after)).toMatchObject({ ok: true, events: 7 });
  });
});

suite("postgres upgrade from schema version 4", () => {
  it("moves to the current version; an act recorded at version 4 is withdrawn after the upgrade", async () => {
    const schema = freshSchema();
    cleanups.push(() => dropSchema(url as string, schema));
    const target = withParams(url as string, { schema });
    const db = new Database(parsePostgresUrl(target));
    const act = spendingAct("v4-act", "ticket", 3);
    try {
      await migrate(db, 4);
      // The version-4 ledger: `record_acts` alone.
      const ledger = new PostgresActLedger(db);
      expect(await ledger.record(spendingAct("v4-kept", "ticket", 3))).toMatchObject({ used: 1 });
      expect(await ledger.record(act)).toMatchObject({ status: "recorded", used: 2 });
    } finally {
      await db.close();
    }

    const stores = await openStores(target);
    cleanups.push(() => stores.close());
    const versions = await admin<{ version: number }>(
      url as string,
      `SELECT version FROM "${schema}".schema_version ORDER BY version`,
    );
    expect(versions.map((row) => row.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await stores.acts.withdraw?.(withdrawalOf(act))).toBe("withdrawn");
    expect(await stores.usage.getUsage("ns-acts", "ticket")).toBe(1);
    expect(await stores.claims.listInDoubt("s")).toEqual([
      expect.objectContaining({ functionCallId: "v4-kept" }),
    ]);
    const events = await stores.audit.read();
    expect(events.map((event) => [event.callId, event.reason, event.seq])).toEqual([
      ["v4-kept", "allowed", 1],
      ["v4-act", "allowed", 2],
      ["v4-act", "act_withdrawn", 3],
    ]);
    expect(verifyAuditChain(events)).toMatchObject({ ok: true, events: 3 });
  });
});

suite("postgres upgrade from schema version 9", () => {
  it("an act that undoes its lost spend fails closed on the version-9 function, and is undone after the upgrade", async () => {
    const schema = freshSchema();
    cleanups.push(() => dropSchema(url as string, schema));
    const target = withParams(url as string, { schema });
    const { exhausted: _dropped, ...undoing } = spendingAct("v9-lost", "ticket", 1);
    const db = new Database(parsePostgresUrl(target));
    try {
      await migrate(db, 9);
      const ledger = new PostgresActLedger(db);
      expect(await ledger.record(spendingAct("v9-won", "ticket", 1))).toMatchObject({ used: 1 });
      // Version 9 knows nothing of the mark: its NULL link is refused, the batch rolled back.
      await expect(ledger.record(undoing)).rejects.toMatchObject({
        code: "claim_store_unavailable",
      });
    } finally {
      await db.close();
    }

    const stores = await openStores(target);
    cleanups.push(() => stores.close());
    const versions = await admin<{ version: number }>(
      url as string,
      `SELECT version FROM "${schema}".schema_version ORDER BY version`,
    );
    expect(versions.map((row) => row.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await stores.acts.record(undoing)).toEqual({ status: "spend_lost" });
    expect(await stores.claims.get({ session: "s", functionCallId: "v9-lost" })).toBeUndefined();
    expect(await stores.usage.getUsage("ns-acts", "ticket")).toBe(1);
    const events = await stores.audit.read();
    expect(events.map((event) => event.callId)).toEqual(["v9-won"]);
    expect(verifyAuditChain(events)).toMatchObject({ ok: true, events: 1 });
  });
});
