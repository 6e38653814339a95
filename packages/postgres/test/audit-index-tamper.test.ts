/**
 * The audit table's index columns (`call_key`, `trace_key`: digests of the call and trace IDs)
 * sit beside the hashed event, outside the chain. An attacker with SQL access disables the
 * append-only trigger and edits one of them to hide a decision from `explain`, as an auditor
 * did: the shared cases (testkit) hold verify and reads to the event.
 */
import { storageDigest } from "@tessera/core/store-kit";
import { describeAuditIndexCases, serviceUrl } from "@tessera/testkit";
import { describe, it } from "vitest";
import { admin, openTestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");

if (url) {
  describeAuditIndexCases("PostgreSQL digest columns", async () => {
    const opened = await openTestStores(url);
    const audit = `"${opened.schema}".audit`;
    return {
      store: opened.stores.audit,
      // The digest every writer files an ID under, with the trigger off for the statement.
      refile: async (index, event, id) => {
        const column = index === "call" ? "call_key" : "trace_key";
        await admin(
          url,
          `BEGIN;
           ALTER TABLE ${audit} DISABLE TRIGGER audit_no_change;
           UPDATE ${audit} SET ${column} = '${storageDigest(id)}'
             WHERE event::jsonb->>'callId' = 'call-${event}';
           ALTER TABLE ${audit} ENABLE TRIGGER audit_no_change;
           COMMIT`,
        );
      },
      close: () => opened.close(),
    };
  });
} else {
  describe("audit index: PostgreSQL digest columns", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
