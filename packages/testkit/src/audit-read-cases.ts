import { type AuditEvent, type ReadableAuditSink, readAuditPages } from "@tessera/core";
import { expect } from "vitest";
import { auditEvent, content, pagesOf, plain } from "./audit-fixtures.js";
import { expectCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";

/**
 * Reading the trail back: filters by call and trace ID, a limit keeps the oldest events (or,
 * with `newest`, the newest), a malformed filter is refused, and `readPages` pages the trail
 * as it stood when the first page was read. Cases of `describeAuditSinkConformance`, declared
 * in its `describe`.
 */
export function auditReadCases<H extends OpenedStore<ReadableAuditSink>>(
  factory: StoreFactory<ReadableAuditSink, H>,
): void {
  const { use, check } = suiteCases(factory);

  check("filters by callId and traceId; a limit keeps the first events", () =>
    use(async ({ store }) => {
      const events = Array.from({ length: 12 }, (_, i) => auditEvent(i));
      for (const event of events) await store.append(event);
      expect(content(await store.read({ callId: "call-4" }))).toEqual(
        content([events[4] as AuditEvent]),
      );
      expect(content(await store.read({ traceId: "trace-1" }))).toEqual(
        content(events.filter((e) => e.traceId === "trace-1")),
      );
      expect(await store.read({ callId: "nothing" })).toEqual([]);
      // Every Tessera sink answers the oldest events first, so a limit keeps the first ones.
      expect(content(await store.read({ limit: 5 }))).toEqual(content(events.slice(0, 5)));
      expect(content(await store.read({ traceId: "trace-1", limit: 2 }))).toEqual(
        content(events.filter((e) => e.traceId === "trace-1").slice(0, 2)),
      );
      expect(await store.read({ limit: 0 })).toEqual([]);
    }),
  );

  check("newest with a limit keeps the last events, still oldest first", () =>
    use(async ({ store }) => {
      const events = Array.from({ length: 12 }, (_, i) => auditEvent(i));
      for (const event of events) await store.append(event);
      const last = await store.read({ limit: 3, newest: true });
      expect(content(last)).toEqual(content(events.slice(-3)));
      // The same events a whole read ends with, links included: a tail, not a re-reading.
      expect(last).toEqual((await store.read()).slice(-3));
      expect(content(await store.read({ traceId: "trace-1", limit: 2, newest: true }))).toEqual(
        content(events.filter((e) => e.traceId === "trace-1").slice(-2)),
      );
      expect(content(await store.read({ callId: "call-4", limit: 5, newest: true }))).toEqual(
        content([events[4] as AuditEvent]),
      );
      expect(content(await store.read({ limit: 50, newest: true }))).toEqual(content(events));
      expect(await store.read({ limit: 0, newest: true })).toEqual([]);
      // Without a limit it changes nothing; `newest: false` is the plain read.
      expect(content(await store.read({ newest: true }))).toEqual(content(events));
      expect(content(await store.read({ limit: 2, newest: false }))).toEqual(
        content(events.slice(0, 2)),
      );
    }),
  );

  check("read refuses a malformed filter with invalid_input", () =>
    use(async ({ store }) => {
      await store.append(auditEvent(0));
      const bad = [
        { limit: -1 },
        { limit: 1.5 },
        { limit: Number.NaN },
        { limit: "2" },
        { callId: 5 },
        { traceId: {} },
        { limit: 2, newest: "yes" },
      ];
      for (const filter of bad as Parameters<typeof store.read>[0][]) {
        await expectCode(() => store.read(filter), ["invalid_input"]);
      }
      expect(await store.read({ limit: 1 })).toHaveLength(1);
    }),
  );

  check("readPages gives the whole trail in order, pages of at most pageSize", () =>
    use(async ({ store }) => {
      expect(await pagesOf(store, 4)).toEqual([]);
      const events = Array.from({ length: 23 }, (_, i) =>
        auditEvent(i, { namespaceId: i % 3 === 0 ? "other" : "ns" }),
      );
      for (const event of events) await store.append(event);
      const whole = plain(await store.read());
      const pages = await pagesOf(store, 5);
      expect(pages.map((page) => page.length)).toEqual([5, 5, 5, 5, 3]);
      // The same events a whole read gives, links included.
      expect(plain(pages.flat())).toEqual(whole);
      expect(plain((await pagesOf(store, 23)).flat())).toEqual(whole);
      expect((await pagesOf(store)).map((page) => page.length)).toEqual([23]);
    }),
  );

  check("readPages is the trail as it stood when the first page was read", () =>
    use(async ({ store }) => {
      const before = Array.from({ length: 9 }, (_, i) => auditEvent(i));
      for (const event of before) await store.append(event);
      const read: AuditEvent[] = [];
      for await (const page of readAuditPages(store, { pageSize: 2 })) {
        // Appended between pages: after the trail the reader is walking.
        if (read.length === 0) await store.append(auditEvent(50 + read.length));
        read.push(...page);
      }
      expect(content(read)).toEqual(content(before));
      expect(content(await store.read())).toEqual(content([...before, auditEvent(50)]));
      // A reader that stops early gives the store back: the next reads are answered.
      for await (const _page of readAuditPages(store, { pageSize: 1 })) break;
      expect(await store.read({ limit: 1 })).toHaveLength(1);
    }),
  );

  check("readPages refuses a page size that is not a positive whole number", () =>
    use(async ({ store }) => {
      await store.append(auditEvent(0));
      for (const pageSize of [0, -1, 1.5, Number.NaN, "2"]) {
        await expectCode(() => pagesOf(store, pageSize as number), ["invalid_input"]);
      }
    }),
  );
}
