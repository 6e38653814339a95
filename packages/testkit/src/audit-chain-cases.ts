import type { AuditEvent, ReadableAuditSink } from "@tessera/core";
import { expect } from "vitest";
import { auditEvent, content, expectOneChain, plain, seqsOf, upTo } from "./audit-fixtures.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";

/** The `prev` of each stream's first event: there is no event before it to link to. */
const GENESIS = "0".repeat(64);

/**
 * The trail as a hash chain (core's `audit/chain.ts`): events read back in append order, each
 * linked by the sink (`seq`, `prev`, `hash`), one stream per namespace, and chain fields a
 * writer passes replaced. Cases of `describeAuditSinkConformance`, declared in its `describe`.
 */
export function auditChainCases<H extends OpenedStore<ReadableAuditSink>>(
  factory: StoreFactory<ReadableAuditSink, H>,
): void {
  const { use, check } = suiteCases(factory);

  check("reads back every event in append order", () =>
    use(async ({ store }) => {
      const events = Array.from({ length: 20 }, (_, i) => auditEvent(i));
      for (const event of events) await store.append(event);
      expect(content(await store.read())).toEqual(content(events));
    }),
  );

  check("every event read back carries seq, prev and hash, and the trail verifies", () =>
    use(async ({ store }) => {
      const events = Array.from({ length: 12 }, (_, i) => auditEvent(i, { namespaceId: "ns" }));
      for (const event of events) await store.append(event);
      const read = await store.read();
      expect(read.map((event) => event.seq)).toEqual(upTo(12));
      expect(read[0]?.prev).toBe(GENESIS);
      for (const [i, event] of read.entries()) {
        expect(event.hash).toMatch(/^[0-9a-f]{64}$/);
        if (i > 0) expect(event.prev).toBe(read[i - 1]?.hash);
      }
      expectOneChain(read);
      // A filtered read hands back the same linked events, not relinked copies.
      expect(plain(await store.read({ callId: "call-5" }))).toEqual(plain([read[5] as AuditEvent]));
    }),
  );

  check("each namespace is its own stream; events without one share a stream", () =>
    use(async ({ store }) => {
      const streams = ["a", "b", undefined] as const;
      const events = Array.from({ length: 15 }, (_, i) =>
        auditEvent(i, { namespaceId: streams[i % 3] }),
      );
      for (const event of events) await store.append(event);
      const read = await store.read();
      expect(content(read)).toEqual(content(events));
      for (const stream of streams) {
        expect(seqsOf(read, stream)).toEqual(upTo(5));
        expect(read.find((event) => event.namespaceId === stream)?.prev).toBe(GENESIS);
      }
      expectOneChain(read);
    }),
  );

  check("only the sink links: chain fields a writer passes are replaced", () =>
    use(async ({ store }) => {
      await store.append(auditEvent(0, { namespaceId: "ns" }));
      const forged = { seq: 7, prev: "f".repeat(64), hash: "e".repeat(64) };
      await store.append(auditEvent(1, { namespaceId: "ns", ...forged }));
      const read = await store.read();
      expect(read.map((event) => event.seq)).toEqual([1, 2]);
      expect(read[1]?.prev).toBe(read[0]?.hash);
      expect(read[1]?.hash).not.toBe(forged.hash);
      expectOneChain(read);
    }),
  );
}
