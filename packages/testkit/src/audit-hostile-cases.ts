import type { AuditEvent, ReadableAuditSink } from "@tessera/core";
import { expect } from "vitest";
import { auditEvent, content, expectOneChain } from "./audit-fixtures.js";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { HOSTILE_KEYS, oversize } from "./hostile.js";

/**
 * What a hostile or careless caller cannot do to the trail: change it through what a read
 * returned, slip hostile, oversize or lone-surrogate fields past the sink, or read another
 * call's events with an ID that looks like a pattern. Cases of `describeAuditSinkConformance`,
 * declared in its `describe`.
 */
export function auditHostileCases<H extends OpenedStore<ReadableAuditSink>>(
  factory: StoreFactory<ReadableAuditSink, H>,
): void {
  const { use, check } = suiteCases(factory);

  check("is append-only: changing what read returned changes nothing stored", () =>
    use(async ({ store }) => {
      await store.append(auditEvent(0));
      const first = (await store.read()) as AuditEvent[];
      try {
        (first[0] as { callId: string }).callId = "tampered";
        first.length = 0;
      } catch {
        // Frozen results are fine too.
      }
      expect(content(await store.read())).toEqual(content([auditEvent(0)]));
    }),
  );

  check("hostile and oversize fields are kept exactly or refused with invalid_input", () =>
    use(async ({ store }) => {
      const hostile = HOSTILE_KEYS.map((key, i) =>
        auditEvent(i, { callId: key, traceId: key, detail: key, actor: key, namespaceId: key }),
      );
      for (const event of hostile) await store.append(event);
      for (const event of hostile) {
        expect(content(await store.read({ callId: event.callId }))).toEqual(content([event]));
      }
      const big = auditEvent(99, { detail: oversize("ü") });
      const outcome = await resultOrCode(
        () => Promise.resolve(store.append(big)),
        ["invalid_input", "audit_unavailable"],
      );
      if (outcome.ok) {
        expect(content(await store.read({ callId: "call-99" }))).toEqual(content([big]));
      }
      await store.append(auditEvent(100));
      expect(await store.read({ callId: "call-100" })).toHaveLength(1);
      expectOneChain(await store.read());
    }),
  );

  check("an ID with a lone surrogate is refused with invalid_input; a detail keeps it whole", () =>
    use(async ({ store }) => {
      // UTF-8 turns a lone surrogate into U+FFFD: two call IDs or streams differing only
      // there would meet in an index column or a key, and the trail would read as tampered.
      for (const field of ["callId", "traceId", "namespaceId", "actor", "grantId"] as const) {
        await expectCode(
          () => Promise.resolve(store.append(auditEvent(0, { [field]: "a\ud800" }))),
          ["invalid_input"],
        );
      }
      await expectCode(
        () => Promise.resolve(store.append(auditEvent(0, { chain: ["g", "\udc00"] }))),
        ["invalid_input"],
      );
      expect(await store.read()).toEqual([]);
      const kept = auditEvent(1, { detail: "a\ud800b" });
      await store.append(kept);
      expect(content(await store.read())).toEqual(content([kept]));
    }),
  );

  check("a read by call or trace ID matches it exactly: no pattern, case or prefix match", () =>
    use(async ({ store }) => {
      // Each would match `job_1` or `job%` in an unescaped SQL LIKE, a glob or a prefix scan.
      const ids = ["job_1", "jobX1", "job%", "jobYY", "JOB_1", "job_10", "job"];
      for (const [i, id] of ids.entries()) {
        await store.append(auditEvent(i, { callId: id, traceId: `t-${id}` }));
      }
      for (const id of ids) {
        expect((await store.read({ callId: id })).map((e) => e.callId)).toEqual([id]);
        expect((await store.read({ traceId: `t-${id}` })).map((e) => e.callId)).toEqual([id]);
      }
    }),
  );
}
