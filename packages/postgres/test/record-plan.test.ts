/**
 * `record_acts` must not scan the claims table, nor the counters. PL/pgSQL keeps a generic plan
 * per statement (schema version 7 pins generic plans on the function), made while the table
 * was small; the version-4 text read taken claims back through a join
 * that such a plan answers by hashing the whole table, so once the table outgrew its
 * statistics (before autovacuum analyzed it) every batch read every claim. Counted here by
 * the table's own statistics (`pg_stat_user_tables.seq_scan`), once the store's backend has
 * flushed them (its inserts are counted too, so the test knows the counts are in): the current
 * function scans nothing, whether an act comes alone (schema 9's single-act path) or in a
 * batch; the version-4 text, put back in the same schema, scans on every act,
 * so the count can fail. The control needs its cached plan to live through the test, which a
 * schema created or dropped anywhere in the database ends: this file runs alone
 * (vitest.config.ts, `ALONE`), and autovacuum is kept off its tables.
 */
import type { Act } from "@tessera/core";
import { serviceUrl, spendingAct } from "@tessera/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordActsFunction } from "../src/act-function.js";
import { openTestStores, type TestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;
const FILL = 50_000;
const ACTS = 20;
/** Version 7's argument list: the overload the version-4 text replaces in the control. */
const V7_ARGS =
  "text[], text[], text[], bigint[], text[], text[], bigint[], text[], text[], text[], text[], text[], text[], bigint[]";

/** An act checked against the version of a holder without grants ("0"), as a warm turn sends it. */
function checkedAct(callId: string): Act {
  const act = spendingAct(callId, "g", 1e9);
  return { ...act, versions: [{ namespaceId: "ns-acts", subject: "nobody", version: "0" }] };
}

suite("postgres record_acts: no scan of the claims table, whatever its statistics", () => {
  let admin: pg.Client;
  const opened: TestStores[] = [];
  let n = 0;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: url as string });
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.end();
    for (const stores of opened) await stores.close();
  });

  /**
   * A fresh store whose `record_acts` is `text`, used while its tables are small (past the
   * five custom plans PL/pgSQL makes before it settles on a generic one), then grown far past
   * what its statistics say, as a busy first minute does.
   */
  async function grownStore(
    text?: (t: (name: string) => string) => string,
  ): Promise<{ stores: TestStores; t: (name: string) => string }> {
    const stores = await openTestStores(url as string);
    opened.push(stores);
    const t = (name: string) => `"${stores.schema}"."${name}"`;
    if (text !== undefined) await admin.query(text(t));
    // Statistics that say "one page", as autovacuum leaves them on a new deployment's tables:
    // a plan made now would rather scan them. They must stay so until the acts are counted:
    // autovacuum's own analyze of the grown tables (due within a minute or so of the fill)
    // makes the cached plans be made again from the real sizes, and the control then stopped
    // scanning (CI counted 0 of 20 on a loaded machine; an ANALYZE put there does the same).
    const tables = [t("claims"), t("usage"), t("grant_versions")];
    for (const table of tables) {
      await admin.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
    }
    await admin.query(`ANALYZE ${tables.join(", ")}`);
    for (let i = 0; i < 12; i++) {
      await stores.stores.acts.record(spendingAct(`warm-${n++}`, "g", 1e9));
      await stores.stores.acts.record(checkedAct(`warm-${n++}`));
    }
    await admin.query(
      `INSERT INTO ${t("claims")} (key, session_key, record, claimed_at)
       SELECT 'fill-' || g, 'fill', '{}', 0 FROM generate_series(1, ${FILL}) AS g`,
    );
    await admin.query(
      `INSERT INTO ${t("usage")} (key, ids, used)
       SELECT 'fill-' || g, '[]', 0 FROM generate_series(1, ${FILL}) AS g`,
    );
    await admin.query(
      `INSERT INTO ${t("grant_versions")} (namespace_key, subject_key, salt, bumps)
       SELECT 'fill-' || g, 'fill', 'salt', 1 FROM generate_series(1, ${FILL}) AS g`,
    );
    return { stores, t };
  }

  async function counts(
    schema: string,
  ): Promise<{ seqScans: number; usageScans: number; versionScans: number; inserted: number }> {
    await admin.query("SELECT pg_stat_clear_snapshot()");
    const { rows } = await admin.query<{ relname: string; seq_scan: string; n_tup_ins: string }>(
      `SELECT relname, seq_scan, n_tup_ins FROM pg_stat_user_tables
       WHERE schemaname = $1 AND relname IN ('claims', 'usage', 'grant_versions')`,
      [schema],
    );
    const of = (name: string) => rows.find((row) => row.relname === name);
    return {
      seqScans: Number(of("claims")?.seq_scan),
      usageScans: Number(of("usage")?.seq_scan),
      versionScans: Number(of("grant_versions")?.seq_scan),
      inserted: Number(of("claims")?.n_tup_ins),
    };
  }

  /**
   * The table's counts once every insert made so far is in them (every backend's, the fill's
   * included): a backend flushes its statistics at most once a second, when it goes idle, so
   * wait past that, record one more act to make the store's backend go idle again, and read
   * until the inserts counted reach the rows in the table. Counts read before that could
   * hold the fill but not the store's acts (CI once counted 10 scans for 20 acts).
   */
  async function settledCounts(stores: TestStores): ReturnType<typeof counts> {
    for (let waited = 0; waited < 20_000; waited += 1_100) {
      const { rows } = await admin.query<{ n: string }>(
        `SELECT count(*) AS n FROM "${stores.schema}".claims`,
      );
      const now = await counts(stores.schema);
      if (now.inserted >= Number(rows[0]?.n)) return now;
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await stores.stores.acts.record(spendingAct(`flush-${n++}`, "g", 1e9));
    }
    throw new Error("the store's statistics never came in");
  }

  /** Records `ACTS` acts and answers how many scans they made, once their stats are in. */
  async function scansOf(
    stores: TestStores,
    act: (callId: string) => Act = (callId) => spendingAct(callId, "g", 1e9),
    together = 1,
  ): Promise<{ claims: number; usage: number; versions: number }> {
    const before = await settledCounts(stores);
    // `together` acts issued in one tick travel as one batch: past one, the batch's path.
    for (let i = 0; i < ACTS; i += together) {
      const answers = await Promise.all(
        Array.from({ length: together }, () => stores.stores.acts.record(act(`act-${n++}`))),
      );
      for (const answer of answers) expect(answer).toMatchObject({ status: "recorded" });
    }
    // The acts `settledCounts` adds are counted too: they scan as the measured ones do.
    const after = await settledCounts(stores);
    return {
      claims: after.seqScans - before.seqScans,
      usage: after.usageScans - before.usageScans,
      versions: after.versionScans - before.versionScans,
    };
  }

  it("the current record_acts finds claims and counters by key, not by scanning them", async () => {
    const { stores } = await grownStore();
    // Autovacuum may scan a grown table once or twice meanwhile; an act never does.
    const scans = await scansOf(stores);
    expect(scans.claims).toBeLessThan(ACTS / 4);
    expect(scans.usage).toBeLessThan(ACTS / 4);
  });

  it("a batch of several acts (not the single act's path) finds them by key too", async () => {
    const { stores } = await grownStore();
    const plain = await scansOf(stores, undefined, 4);
    expect(plain.claims).toBeLessThan(ACTS / 4);
    expect(plain.usage).toBeLessThan(ACTS / 4);
    const checked = await scansOf(stores, checkedAct, 4);
    expect(checked.claims).toBeLessThan(ACTS / 4);
    expect(checked.versions).toBeLessThan(ACTS / 4);
  });

  it("the checked overload (schema 8) finds grant versions by key too", async () => {
    const { stores } = await grownStore();
    const scans = await scansOf(stores, checkedAct);
    expect(scans.claims).toBeLessThan(ACTS / 4);
    expect(scans.usage).toBeLessThan(ACTS / 4);
    expect(scans.versions).toBeLessThan(ACTS / 4);
  });

  it("the version-4 text scans the table on every act (the count can fail)", async () => {
    // Dropped first: a replacement would keep the current function's pinned plan mode.
    const { stores } = await grownStore(
      (t) => `DROP FUNCTION ${t("record_acts")}(${V7_ARGS}); ${recordActsFunction(t)}`,
    );
    expect((await scansOf(stores)).claims).toBeGreaterThanOrEqual(ACTS);
  });
});
