import { TesseraError } from "@tessera/core";
import type { SqliteDatabase } from "./database.js";
import type { UnavailableCode } from "./unavailable.js";

/**
 * Versioned schema. A migration is never edited once released: a change is a new entry.
 * Every table is prefixed `tessera_` so the store can share a host's database file.
 */
const MIGRATIONS: readonly { readonly version: number; readonly sql: string }[] = [
  {
    version: 1,
    sql: `
      -- WITHOUT ROWID: the key is the table, one b-tree per write instead of two.
      CREATE TABLE tessera_usage (
        namespace_id TEXT NOT NULL,
        grant_id     TEXT NOT NULL,
        used         INTEGER NOT NULL CHECK (used >= 0),
        PRIMARY KEY (namespace_id, grant_id)
      ) WITHOUT ROWID;

      -- Keyed by (session, functionCallId) itself: SQLite compares TEXT by length and bytes,
      -- so NUL, quotes or separators inside either part can never make two keys collide,
      -- and the session prefix of the key serves endSession and listInDoubt(session).
      CREATE TABLE tessera_claims (
        session          TEXT NOT NULL,
        function_call_id TEXT NOT NULL,
        body_hash        TEXT NOT NULL,
        claimed_at       INTEGER NOT NULL,
        worker           TEXT,
        receipt_status   TEXT CHECK (receipt_status IN ('dispatched', 'denied', 'failed')),
        settled_at       INTEGER,
        PRIMARY KEY (session, function_call_id)
      ) WITHOUT ROWID;

      CREATE TABLE tessera_grants (
        namespace_id TEXT NOT NULL,
        id           TEXT NOT NULL,
        subject      TEXT NOT NULL,
        issuer       TEXT NOT NULL,
        revoked_at   TEXT,
        body         TEXT NOT NULL CHECK (json_valid(body)),
        PRIMARY KEY (namespace_id, id)
      );
      CREATE INDEX tessera_grants_subject ON tessera_grants (namespace_id, subject);

      CREATE TABLE tessera_audit (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        call_id  TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        event    TEXT NOT NULL CHECK (json_valid(event))
      );
      CREATE INDEX tessera_audit_call ON tessera_audit (call_id);
      CREATE INDEX tessera_audit_trace ON tessera_audit (trace_id);
      CREATE TRIGGER tessera_audit_no_update BEFORE UPDATE ON tessera_audit
        BEGIN SELECT RAISE(ABORT, 'tessera_audit is append-only'); END;
      CREATE TRIGGER tessera_audit_no_delete BEFORE DELETE ON tessera_audit
        BEGIN SELECT RAISE(ABORT, 'tessera_audit is append-only'); END;
    `,
  },
  {
    // The audit hash chain: each stream's head, moved with every append. Rows already in
    // tessera_audit stay as written, without chain fields: the unchained start of a stream.
    version: 2,
    sql: `
      CREATE TABLE tessera_audit_heads (
        stream TEXT PRIMARY KEY,
        seq    INTEGER NOT NULL CHECK (seq > 0),
        hash   TEXT NOT NULL
      ) WITHOUT ROWID;
    `,
  },
  {
    // A version per (namespace, subject) for the kernel's turn cache, bumped by triggers, so
    // in the same transaction as the change whoever writes it (the store, the CLI, plain
    // SQL). The salt is drawn when a holder's row is first made: a file rebuilt from scratch
    // never repeats a version a running kernel has cached. Holders with grants already get
    // their row here; a holder without one has never held a grant (version "0").
    version: 3,
    sql: `
      CREATE TABLE tessera_grant_versions (
        namespace_id TEXT NOT NULL,
        subject      TEXT NOT NULL,
        salt         TEXT NOT NULL,
        bumps        INTEGER NOT NULL,
        PRIMARY KEY (namespace_id, subject)
      ) WITHOUT ROWID;
      INSERT INTO tessera_grant_versions (namespace_id, subject, salt, bumps)
        SELECT namespace_id, subject, lower(hex(randomblob(8))), 1
        FROM tessera_grants GROUP BY namespace_id, subject;
      CREATE TRIGGER tessera_grants_version_insert AFTER INSERT ON tessera_grants
      BEGIN
        INSERT INTO tessera_grant_versions (namespace_id, subject, salt, bumps)
          VALUES (NEW.namespace_id, NEW.subject, lower(hex(randomblob(8))), 1)
          ON CONFLICT (namespace_id, subject) DO UPDATE SET bumps = bumps + 1;
      END;
      CREATE TRIGGER tessera_grants_version_update AFTER UPDATE ON tessera_grants
        WHEN OLD.revoked_at IS NOT NEW.revoked_at OR OLD.body IS NOT NEW.body
          OR OLD.subject IS NOT NEW.subject OR OLD.namespace_id IS NOT NEW.namespace_id
          OR OLD.id IS NOT NEW.id OR OLD.issuer IS NOT NEW.issuer
      BEGIN
        INSERT INTO tessera_grant_versions (namespace_id, subject, salt, bumps)
          VALUES (OLD.namespace_id, OLD.subject, lower(hex(randomblob(8))), 1)
          ON CONFLICT (namespace_id, subject) DO UPDATE SET bumps = bumps + 1;
        INSERT INTO tessera_grant_versions (namespace_id, subject, salt, bumps)
          VALUES (NEW.namespace_id, NEW.subject, lower(hex(randomblob(8))), 1)
          ON CONFLICT (namespace_id, subject) DO UPDATE SET bumps = bumps + 1;
      END;
      CREATE TRIGGER tessera_grants_version_delete AFTER DELETE ON tessera_grants
      BEGIN
        INSERT INTO tessera_grant_versions (namespace_id, subject, salt, bumps)
          VALUES (OLD.namespace_id, OLD.subject, lower(hex(randomblob(8))), 1)
          ON CONFLICT (namespace_id, subject) DO UPDATE SET bumps = bumps + 1;
      END;
    `,
  },
  {
    // Claims keep their answer (a reply, a message ID, a tool result) in a column of their
    // own, written by the settle that writes the receipt. Claims settled before it have none.
    version: 4,
    sql: `
      ALTER TABLE tessera_claims
        ADD COLUMN answer TEXT CHECK (answer IS NULL OR json_valid(answer));
    `,
  },
];

export const SCHEMA_VERSION = MIGRATIONS.at(-1)?.version ?? 0;

/**
 * Brings the schema to `SCHEMA_VERSION`. Everything happens inside BEGIN IMMEDIATE, so when
 * two processes open a new file at once, one migrates while the other waits for the write
 * lock (busy timeout), then finds the version already current and does nothing. A file
 * written by a newer Tessera is refused rather than guessed at. `target` (tests only) stops at
 * an older version, to build a file as an earlier release left it.
 */
export function migrate(
  db: SqliteDatabase,
  failCode: UnavailableCode,
  target = SCHEMA_VERSION,
): number {
  const applied = db.run(failCode, () =>
    db.immediate(() => {
      db.exec(
        "CREATE TABLE IF NOT EXISTS tessera_schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
      );
      const row = db
        .statement("SELECT max(version) AS version FROM tessera_schema_version")
        .get() as {
        version: number | null;
      };
      const current = row.version ?? 0;
      if (current > SCHEMA_VERSION) {
        throw new TesseraError(
          "schema_unavailable",
          `the database schema (version ${current}) is newer than this @tessera/sqlite (${SCHEMA_VERSION})`,
        );
      }
      const pending = MIGRATIONS.filter(
        (migration) => migration.version > current && migration.version <= target,
      );
      for (const migration of pending) {
        db.exec(migration.sql);
        db.statement("INSERT INTO tessera_schema_version (version, applied_at) VALUES (?, ?)").run(
          migration.version,
          new Date().toISOString(),
        );
      }
      return pending.length;
    }),
  );
  return applied;
}

/**
 * For a reader, which writes nothing: the file holds a Tessera store, at a version this build
 * reads. An older version is read as it is (every version has the audit table this build
 * reads); a newer one is refused, as `migrate` refuses it. Returns the version found (a claim
 * reader refuses an older one).
 */
export function checkReadable(db: SqliteDatabase, failCode: UnavailableCode): number {
  const found = db.run(
    failCode,
    () =>
      db
        .statement(
          "SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = 'tessera_schema_version'",
        )
        .get() as { found: number } | undefined,
  );
  const current =
    found === undefined
      ? undefined
      : db.run(
          failCode,
          () =>
            (
              db.statement("SELECT max(version) AS version FROM tessera_schema_version").get() as {
                version: number | null;
              }
            ).version,
        );
  if (current === undefined || current === null) {
    throw new TesseraError("schema_unavailable", "the database file holds no Tessera store");
  }
  if (current > SCHEMA_VERSION) {
    throw new TesseraError(
      "schema_unavailable",
      `the database schema (version ${current}) is newer than this @tessera/sqlite (${SCHEMA_VERSION})`,
    );
  }
  return current;
}
