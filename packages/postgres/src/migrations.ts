import { TesseraError } from "@tessera/core";
import { recordActsFunction, recordActsFunctionV6 } from "./act-function.js";
import { recordActsFunctionV7 } from "./act-function-v7.js";
import { recordActsFunctionV8 } from "./act-function-v8.js";
import { recordActsFunctionsV9 } from "./act-function-v9.js";
import { recordActsFunctionsV10 } from "./act-function-v10.js";
import type { Database } from "./database.js";
import { withdrawActFunction } from "./withdraw-function.js";

/**
 * Versioned schema changes, applied in order at open. Append only: a released step is never
 * edited, a change is a new step. Every lookup column holds a SHA-256 hex digest of the
 * untrusted IDs it stands for, and the IDs themselves are kept as JSON text: any string
 * (1 MB, NUL, quotes, SQL) is stored and returned exactly, and no index grows with key size.
 */
const MIGRATIONS: readonly {
  version: number;
  statements: (t: (name: string) => string) => string[];
}[] = [
  {
    version: 1,
    statements: (t) => [
      `CREATE TABLE ${t("usage")} (
          key text PRIMARY KEY,
          ids text NOT NULL,
          used bigint NOT NULL CHECK (used >= 0)
        )`,
      `CREATE TABLE ${t("claims")} (
          key text PRIMARY KEY,
          session_key text NOT NULL,
          record text NOT NULL,
          claimed_at bigint NOT NULL,
          receipt_status text,
          settled_at bigint
        )`,
      `CREATE INDEX claims_session ON ${t("claims")} (session_key)`,
      `CREATE INDEX claims_in_doubt ON ${t("claims")} (claimed_at) WHERE receipt_status IS NULL`,
      `CREATE TABLE ${t("grants")} (
          namespace_key text NOT NULL,
          grant_key text NOT NULL,
          subject_key text NOT NULL,
          body text NOT NULL,
          revoked_at text,
          seq bigserial NOT NULL,
          PRIMARY KEY (namespace_key, grant_key)
        )`,
      `CREATE INDEX grants_subject ON ${t("grants")} (namespace_key, subject_key)`,
      `CREATE TABLE ${t("audit")} (
          seq bigserial PRIMARY KEY,
          call_key text NOT NULL,
          trace_key text NOT NULL,
          event text NOT NULL
        )`,
      `CREATE INDEX audit_call ON ${t("audit")} (call_key)`,
      `CREATE INDEX audit_trace ON ${t("audit")} (trace_key)`,
    ],
  },
  {
    // The audit hash chain: each stream's head (by digest), moved with every append; seq 0
    // is a new stream's row, locked before its first event. Rows already in the audit table
    // stay as written, without chain fields: the unchained start of their stream. Triggers
    // refuse UPDATE, DELETE and TRUNCATE: rewriting history takes dropping them first.
    version: 2,
    statements: (t) => [
      `CREATE TABLE ${t("audit_heads")} (
          stream_key text PRIMARY KEY,
          seq bigint NOT NULL CHECK (seq >= 0),
          hash text NOT NULL
        )`,
      `CREATE FUNCTION ${t("audit_append_only")}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'the audit table is append-only'; END $$`,
      `CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON ${t("audit")}
        FOR EACH ROW EXECUTE FUNCTION ${t("audit_append_only")}()`,
      `CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON ${t("audit")}
        FOR EACH STATEMENT EXECUTE FUNCTION ${t("audit_append_only")}()`,
    ],
  },
  {
    // A version per (namespace, subject) for the kernel's turn cache, bumped by statement
    // triggers, so in the same transaction as the change whoever makes it (the store, the CLI,
    // plain SQL), once per holder per statement (a batch insert bumps each holder once), in
    // key order (two batches lock version rows in the same order and cannot deadlock). The
    // salt is drawn when a holder's row is made: a database rebuilt from scratch never repeats
    // a version a running kernel has cached. Holders with grants already get their row here.
    version: 3,
    statements: (t) => {
      const bump = (changed: string) => `
        INSERT INTO ${t("grant_versions")} AS v (namespace_key, subject_key, salt, bumps)
          SELECT namespace_key, subject_key, md5(random()::text || clock_timestamp()::text), 1
          FROM (${changed}) AS changed GROUP BY namespace_key, subject_key
          ORDER BY namespace_key, subject_key
        ON CONFLICT (namespace_key, subject_key) DO UPDATE SET bumps = v.bumps + 1;`;
      const fn = (name: string, changed: string) =>
        `CREATE FUNCTION ${t(name)}() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN ${bump(changed)} RETURN NULL; END $$`;
      return [
        `CREATE TABLE ${t("grant_versions")} (
            namespace_key text NOT NULL,
            subject_key text NOT NULL,
            salt text NOT NULL,
            bumps bigint NOT NULL,
            PRIMARY KEY (namespace_key, subject_key)
          )`,
        bump(`SELECT namespace_key, subject_key FROM ${t("grants")}`),
        fn("grant_versions_inserted", "SELECT namespace_key, subject_key FROM new_rows"),
        fn("grant_versions_deleted", "SELECT namespace_key, subject_key FROM old_rows"),
        // Only rows that changed: a revoke of a revoked grant rewrites the same values.
        fn(
          "grant_versions_updated",
          `SELECT namespace_key, subject_key FROM (SELECT * FROM old_rows EXCEPT SELECT * FROM new_rows) o
           UNION ALL
           SELECT namespace_key, subject_key FROM (SELECT * FROM new_rows EXCEPT SELECT * FROM old_rows) n`,
        ),
        `CREATE TRIGGER grants_version_insert AFTER INSERT ON ${t("grants")}
          REFERENCING NEW TABLE AS new_rows
          FOR EACH STATEMENT EXECUTE FUNCTION ${t("grant_versions_inserted")}()`,
        `CREATE TRIGGER grants_version_delete AFTER DELETE ON ${t("grants")}
          REFERENCING OLD TABLE AS old_rows
          FOR EACH STATEMENT EXECUTE FUNCTION ${t("grant_versions_deleted")}()`,
        `CREATE TRIGGER grants_version_update AFTER UPDATE ON ${t("grants")}
          REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
          FOR EACH STATEMENT EXECUTE FUNCTION ${t("grant_versions_updated")}()`,
      ];
    },
  },
  {
    // The act ledger: a claim keeps its answer in a column of its own (NULL until settled with
    // one; claims written before stay as they were), and `record_acts` records a batch of acts
    // (claim, spend, linked event, a denial's settle) inside the one statement that calls it.
    version: 4,
    statements: (t) => [`ALTER TABLE ${t("claims")} ADD COLUMN answer text`, recordActsFunction(t)],
  },
  {
    // `withdraw_act` withdraws an act whose record's answer was lost (claim settled failed
    // with its answer, use given back, event linked) inside the one statement that calls it.
    // No table changes: a version-4 build simply never calls it.
    version: 5,
    statements: (t) => [withdrawActFunction(t)],
  },
  {
    // `record_acts` reads a taken claim back by primary key whatever the table's statistics
    // (act-function.ts, `recordActsFunctionV6`): no table changes.
    version: 6,
    statements: (t) => [recordActsFunctionV6(t)],
  },
  {
    // `record_acts` planned once per connection: its table lookups rewritten as primary-key
    // probes and generic plans pinned on the function (`act-function-v7.ts`); no table changes.
    version: 7,
    statements: (t) => [recordActsFunctionV7(t)],
  },
  {
    // `record_acts` checks the grant versions an act was decided on (`act-function-v8.ts`):
    // a new overload beside version 7's, which a process of the previous release still calls.
    version: 8,
    statements: (t) => [recordActsFunctionV8(t)],
  },
  {
    // `record_acts` records a batch of one act with single-row statements
    // (`act-function-v9.ts`): both overloads replaced, same signatures; no table changes.
    version: 9,
    statements: (t) => recordActsFunctionsV9(t),
  },
  {
    // `record_acts` undoes an act whose spend lost when it came without its exhausted event
    // (`act-function-v10.ts`, `ActLedger.undoesLostSpends`): nothing of it written, its claim
    // passed to the batch's next act of its key or deleted. Both overloads replaced, same
    // signatures; no table changes.
    version: 10,
    statements: (t) => recordActsFunctionsV10(t),
  },
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** Advisory-lock class for Tessera migrations; the second key is a hash of the schema name. */
const LOCK_CLASS = 0x7e55e7a;

/**
 * Brings the schema to `SCHEMA_VERSION`. Two processes opening at once serialise on a
 * transaction-scoped advisory lock taken before anything else (even `CREATE SCHEMA IF NOT
 * EXISTS` races without it), so the second one finds the work done and applies nothing.
 * A database migrated by a newer Tessera is refused rather than half understood. `upTo` stops
 * at an older version: the tests build a store as a previous release left it.
 */
export async function migrate(db: Database, upTo: number = SCHEMA_VERSION): Promise<void> {
  await db.transaction("store_unavailable", async (client) => {
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [LOCK_CLASS, db.schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${db.schema}"`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${db.table("schema_version")} (
        version integer PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`,
    );
    const { rows } = await client.query<{ version: number | null }>(
      `SELECT max(version) AS version FROM ${db.table("schema_version")}`,
    );
    const current = rows[0]?.version ?? 0;
    if (current > SCHEMA_VERSION) {
      throw new TesseraError(
        "schema_unavailable",
        `schema ${db.schema} is at version ${current}, newer than this build (${SCHEMA_VERSION})`,
      );
    }
    for (const migration of MIGRATIONS) {
      if (migration.version <= current || migration.version > upTo) continue;
      for (const statement of migration.statements((name) => db.table(name))) {
        await client.query(statement);
      }
      await client.query(`INSERT INTO ${db.table("schema_version")} (version) VALUES ($1)`, [
        migration.version,
      ]);
    }
  });
}

/**
 * For a reader, which writes nothing: the schema holds a Tessera store, at a version this
 * build reads. An older version is read as it is (every version has the audit table this
 * build reads); a newer one is refused, as `migrate` refuses it. Returns the version found (a
 * claim reader refuses an older one).
 */
export async function checkReadable(db: Database): Promise<number> {
  let current: number | null | undefined;
  try {
    const { rows } = await db.query<{ version: number | null }>(
      "store_unavailable",
      `SELECT max(version) AS version FROM ${db.table("schema_version")}`,
    );
    current = rows[0]?.version;
  } catch (error) {
    // 42P01 undefined_table, 3F000 invalid_schema_name: nothing was ever written here.
    const code = (error as { cause?: { code?: unknown } }).cause?.code;
    if (code === "42P01" || code === "3F000") {
      throw new TesseraError("schema_unavailable", `schema ${db.schema} holds no Tessera store`);
    }
    throw error;
  }
  if (current === null || current === undefined) {
    throw new TesseraError("schema_unavailable", `schema ${db.schema} holds no Tessera store`);
  }
  if (current > SCHEMA_VERSION) {
    throw new TesseraError(
      "schema_unavailable",
      `schema ${db.schema} is at version ${current}, newer than this build (${SCHEMA_VERSION})`,
    );
  }
  return current;
}
