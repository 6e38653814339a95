/**
 * The audit table's index columns (`call_id`, `trace_id`) sit beside the hashed event, outside
 * the chain. An attacker with the file drops the append-only trigger and edits one of them to
 * hide a decision from `explain`: the shared cases (testkit) hold verify and reads to the event.
 */
import { openStores } from "@tessera/sqlite";
import { describeAuditIndexCases } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
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
