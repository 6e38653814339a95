import { type AuditEvent, type ReadableAuditSink, readAuditPages } from "@tessera/core";
import { expect } from "vitest";
import { auditEvent } from "./audit-fixtures.js";

/**
 * What an audit reader (`openAuditReader`, opened with credentials that only read) must do
 * with a trail of 7 events its writer appended: read them back exactly, page them in 3, 3, 1,
 * and refuse an append with `audit_unavailable` (the store, not the reader, refusing it).
 */
export async function expectReadOnlyReader(
  reader: ReadableAuditSink,
  written: readonly AuditEvent[],
): Promise<void> {
  expect(written).toHaveLength(7);
  expect(await reader.read()).toEqual(written);
  const pages: number[] = [];
  for await (const page of readAuditPages(reader, { pageSize: 3 })) pages.push(page.length);
  expect(pages).toEqual([3, 3, 1]);
  const refused = await Promise.resolve()
    .then(() => reader.append(auditEvent(99)))
    .catch((error: unknown) => error);
  expect(refused).toMatchObject({ code: "audit_unavailable" });
}
