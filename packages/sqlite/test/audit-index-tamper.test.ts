/**
 * The audit table's index columns (`call_id`, `trace_id`) sit beside the hashed event, outside
 * the chain. An attacker with the file drops the append-only trigger and edits one of them to
 * hide a decision from `explain`: the shared cases (testkit) hold verify and reads to the event.
 */
import { openStores } from "@tessera/sqlite";
import { auditEvent, describeAuditIndexCases, verifyAuditByPages } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { chainOf } from "../src/audit-link.js";
import { parseSqliteUrl } from "../src/config.js";
import { SqliteDatabase } from "../src/database.js";
import { migrate } from "../src/migrations.js";
import { freshFile } from "./helpers.js";

describeAuditIndexCases("SQLite columns", async () => {
  const file = freshFile();
  const stores = await openStores(`sqlite:${file.path}`);
  const raw = new BetterSqlite3(file.path);
  raw.exec("DROP TRIGGER tessera_audit_no_update");
  return {
    store: stores.audit,
    refile: async (index, event, id) => {
      const column = index === "call" ? "call_id" : "trace_id";
      raw
        .prepare(`UPDATE tessera_audit SET ${column} = ? WHERE json_extract(event, '$.callId') = ?`)
        .run(id, `call-${event}`);
    },
    close: async () => {
      raw.close();
      await stores.close();
      file.dispose();
    },
  };
});

describe("a trail written before lone surrogates were refused", () => {
  it("verifies, and a read by such a call ID finds its event", async () => {
    const file = freshFile();
    const url = `sqlite:${file.path}`;
    // Written as an older release did: linked and inserted without today's ID check, so the
    // call_id column holds U+FFFD where the event's JSON keeps the surrogate escaped.
    const db = SqliteDatabase.open(parseSqliteUrl(url), "audit_unavailable");
    migrate(db, "audit_unavailable");
    const old = [auditEvent(0, { callId: "a\ud800" }), auditEvent(1, { traceId: "t\udc00" })];
    db.batch(() => {
      for (const event of old) chainOf(db).append(event);
    });
    db.close();
    const stores = await openStores(url);
    try {
      expect(await verifyAuditByPages(stores.audit)).toMatchObject({ ok: true, events: 2 });
      expect((await stores.audit.read({ callId: "a\ud800" })).map((e) => e.callId)).toEqual([
        "a\ud800",
      ]);
      expect(await stores.audit.read({ callId: "a\ud801" })).toEqual([]);
    } finally {
      await stores.close();
      file.dispose();
    }
  });
});
