/**
 * The audit hash chain against a real PostgreSQL schema: the audit table refuses UPDATE,
 * DELETE and TRUNCATE; an attacker with SQL access drops those triggers and edits, deletes,
 * inserts and reorders rows; the chain read back through the sink shows each, at the right
 * position. Rows written before the chain (schema version 1) read back as the unchained
 * start of their stream.
 */
import { verifyAuditChain } from "@tessera/core";
import { storageDigest } from "@tessera/core/store-kit";
import { auditEvent, describeAuditTamperCases, serviceUrl } from "@tessera/testkit";
import { describe, expect, it } from "vitest";
import { admin, openTestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");

/** SQL as the attacker (or the test) runs it, on its own connection. */
const sql = (text: string, values: unknown[] = []) => admin(url as string, text, values);

if (url) {
  describeAuditTamperCases("PostgreSQL", async () => {
    const opened = await openTestStores(url);
    const audit = `"${opened.schema}".audit`;
    await sql(
      `DROP TRIGGER audit_no_change ON ${audit}; DROP TRIGGER audit_no_truncate ON ${audit}`,
    );
    // The row at a read position: `seq` is the table's append order, which reads follow.
    const rowAt = async (index: number): Promise<string> => {
      const rows = await sql(`SELECT seq FROM ${audit} ORDER BY seq`);
      const row = rows[index] as { seq: string } | undefined;
      if (row === undefined) throw new Error(`no row at ${index}`);
      return row.seq;
    };
    return {
      store: opened.stores.audit,
      replace: async (index, json) => {
        await sql(`UPDATE ${audit} SET event = $1 WHERE seq = $2`, [json, await rowAt(index)]);
      },
      remove: async (index) => {
        await sql(`DELETE FROM ${audit} WHERE seq = $1`, [await rowAt(index)]);
      },
      insertBefore: async (index, json) => {
        const seq = await rowAt(index);
        const event = JSON.parse(json) as { callId: string; traceId: string };
        // Moves every later row up by one (through negative numbers, as the key is unique).
        await sql(
          `BEGIN;
           UPDATE ${audit} SET seq = -seq WHERE seq >= ${Number(seq)};
           UPDATE ${audit} SET seq = 1 - seq WHERE seq < 0;
           COMMIT`,
        );
        await sql(
          `INSERT INTO ${audit} (seq, call_key, trace_key, event) VALUES ($1, $2, $3, $4)`,
          [seq, storageDigest(event.callId), storageDigest(event.traceId), json],
        );
      },
      swap: async (index) => {
        const [a, b] = [Number(await rowAt(index)), Number(await rowAt(index + 1))];
        await sql(
          `BEGIN;
           UPDATE ${audit} SET seq = -1 WHERE seq = ${a};
           UPDATE ${audit} SET seq = ${a} WHERE seq = ${b};
           UPDATE ${audit} SET seq = ${b} WHERE seq = -1;
           COMMIT`,
        );
      },
      close: () => opened.close(),
    };
  });

  describe("PostgreSQL audit table", () => {
    it("refuses UPDATE, DELETE and TRUNCATE while its triggers stand", async () => {
      const opened = await openTestStores(url);
      try {
        await opened.stores.audit.append(auditEvent(0, { namespaceId: "ns" }));
        const audit = `"${opened.schema}".audit`;
        for (const statement of [
          `UPDATE ${audit} SET event = event`,
          `DELETE FROM ${audit}`,
          `TRUNCATE ${audit}`,
        ]) {
          await expect(sql(statement)).rejects.toThrow(/append-only/);
        }
        expect(await opened.stores.audit.read()).toHaveLength(1);
      } finally {
        await opened.close();
      }
    });

    it("rows written before the chain stay, as the unchained start of their stream", async () => {
      const opened = await openTestStores(url);
      try {
        // As the version-1 sink wrote them: the event's JSON, no chain fields, no head row.
        const legacy = [0, 1, 2].map((i) => auditEvent(i, { namespaceId: "ns" }));
        for (const event of legacy) {
          await sql(
            `INSERT INTO "${opened.schema}".audit (call_key, trace_key, event) VALUES ($1, $2, $3)`,
            [storageDigest(event.callId), storageDigest(event.traceId), JSON.stringify(event)],
          );
        }
        for (let i = 3; i < 6; i++) {
          await opened.stores.audit.append(auditEvent(i, { namespaceId: "ns" }));
        }
        const read = await opened.stores.audit.read();
        expect(read.map((event) => event.seq)).toEqual([undefined, undefined, undefined, 1, 2, 3]);
        const verdict = verifyAuditChain(read);
        expect(verdict.ok).toBe(true);
        expect(verdict.streams).toEqual([
          expect.objectContaining({ stream: "ns", events: 6, unchained: 3 }),
        ]);
      } finally {
        await opened.close();
      }
    });
  });
} else {
  describe("postgres audit tampering", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
