import {
  type AuditEvent,
  type ReadableAuditSink,
  readAuditPages,
  verifyAuditChain,
} from "@tessera/core";
import { describe, expect } from "vitest";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { HOSTILE_KEYS, oversize } from "./hostile.js";
import { raceInProcesses } from "./processes.js";

const UNAVAILABLE = ["audit_unavailable"];
/** Appends per process in the cross-process case: enough to interleave, cheap on fsync. */
const PER_PROCESS = 40;
/** Rounds of the cross-process race on the same store: later rounds link to a long chain. */
const ROUNDS = 2;
/** The cross-process case starts 8 processes per round: on a loaded machine, minutes. */
const ROUNDS_TIMEOUT_MS = 180_000;
const GENESIS = "0".repeat(64);

export function auditEvent(index: number, overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, index)).toISOString(),
    source: "kernel",
    outcome: index % 2 === 0 ? "allowed" : "denied",
    code: index % 2 === 0 ? null : "no_matching_grant",
    reason: index % 2 === 0 ? "allowed" : "no_capability",
    traceId: `trace-${index % 3}`,
    callId: `call-${index}`,
    actor: "agent",
    grantId: index % 2 === 0 ? `grant-${index}` : undefined,
    ...overrides,
  };
}

/** Drops keys whose value is undefined: a store may not keep "absent" and "undefined" apart. */
function plain(events: readonly AuditEvent[]): AuditEvent[] {
  return events.map((event) => JSON.parse(JSON.stringify(event)) as AuditEvent);
}

/** What the writer gave: the event without the chain fields its sink added. */
function content(events: readonly AuditEvent[]): AuditEvent[] {
  return plain(events).map(({ seq: _seq, prev: _prev, hash: _hash, ...rest }) => rest);
}

/** The trail verifies as one chain per stream; on failure the message names the break. */
function expectOneChain(events: readonly AuditEvent[]): void {
  const verdict = verifyAuditChain(events);
  expect(verdict.ok ? "verified" : verdict.break).toBe("verified");
}

/** `seq` of each event of `stream`, in read order. */
function seqsOf(events: readonly AuditEvent[], stream: string | undefined): (number | undefined)[] {
  return events.filter((event) => event.namespaceId === stream).map((event) => event.seq);
}

/** Every page `readPages` gives, in order. */
async function pagesOf(store: ReadableAuditSink, pageSize?: number): Promise<AuditEvent[][]> {
  if (store.readPages === undefined) throw new Error("the sink has no readPages");
  const pages: AuditEvent[][] = [];
  for await (const page of store.readPages(pageSize === undefined ? {} : { pageSize })) {
    pages.push([...page]);
  }
  return pages;
}

const upTo = (count: number) => Array.from({ length: count }, (_, i) => i + 1);

/**
 * The `ReadableAuditSink` contract: append-only, read back in append order, filters by call
 * and trace ID, a limit bounds the answer (the oldest events, or with `newest` the newest); concurrent and cross-process appends are all kept
 * (each process's own order preserved); an outage fails closed. And the trail is a hash chain
 * per stream (core's `audit/chain.ts`): every event comes back linked by the sink, and
 * `verifyAuditChain` accepts the whole trail however many writers, in one process or in
 * many, appended at once.
 */
export function describeAuditSinkConformance<H extends OpenedStore<ReadableAuditSink>>(
  name: string,
  factory: StoreFactory<ReadableAuditSink, H>,
): void {
  const { use, check, crossProcess, skipNote, outageCase, outageNote } = suiteCases(factory);

  describe(`AuditSink conformance: ${name}`, () => {
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
        expect(plain(await store.read({ callId: "call-5" }))).toEqual(
          plain([read[5] as AuditEvent]),
        );
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

    check(
      "an ID with a lone surrogate is refused with invalid_input; a detail keeps it whole",
      () =>
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

    check("64 concurrent appends are all kept, in one chain per stream", () =>
      use(async ({ store }) => {
        await Promise.all(
          Array.from({ length: 64 }, (_, i) =>
            Promise.resolve(store.append(auditEvent(i, { namespaceId: i % 4 === 0 ? "b" : "a" }))),
          ),
        );
        const read = await store.read();
        expect(new Set(read.map((e) => e.callId)).size).toBe(64);
        expect(seqsOf(read, "a")).toEqual(upTo(48));
        expect(seqsOf(read, "b")).toEqual(upTo(16));
        expectOneChain(read);
      }),
    );

    crossProcess(
      `8 OS processes append ${PER_PROCESS} events each, ${ROUNDS} rounds: all kept, each process's order preserved, one chain per stream${skipNote}`,
      () =>
        use(async (opened) => {
          const spec = factory.processSpec?.(opened);
          if (!spec) throw new Error("unreachable: guarded by processSpec");
          for (let round = 0; round < ROUNDS; round++) {
            // Two streams, both written by every process at once.
            await raceInProcesses(spec, 8, (worker) => ({
              kind: "append",
              events: Array.from({ length: PER_PROCESS }, (_, i) =>
                auditEvent(i, {
                  callId: `r${round}-p${worker}-${i}`,
                  traceId: `r${round}-p${worker}`,
                  namespaceId: i % 2 === 0 ? "even" : "odd",
                }),
              ),
            }));
            const events = await opened.store.read();
            expect(events).toHaveLength(8 * PER_PROCESS * (round + 1));
            for (let worker = 0; worker < 8; worker++) {
              const mine = events
                .filter((e) => e.traceId === `r${round}-p${worker}`)
                .map((e) => e.callId);
              expect(mine).toEqual(
                Array.from({ length: PER_PROCESS }, (_, i) => `r${round}-p${worker}-${i}`),
              );
            }
            const perStream = 4 * PER_PROCESS * (round + 1);
            expect(seqsOf(events, "even")).toEqual(upTo(perStream));
            expect(seqsOf(events, "odd")).toEqual(upTo(perStream));
            expectOneChain(events);
          }
        }),
      ROUNDS_TIMEOUT_MS,
    );

    outageCase(`outage: fails closed with audit_unavailable, recovers${outageNote}`, () =>
      use(async (opened) => {
        const outage = factory.outage?.(opened);
        if (!outage) throw new Error("unreachable: guarded by outage");
        const { store } = opened;
        await store.append(auditEvent(0));
        await outage.interrupt();
        try {
          if (outage.kind !== "blip") {
            await expectCode(() => Promise.resolve(store.append(auditEvent(1))), UNAVAILABLE);
            await expectCode(() => store.read(), UNAVAILABLE);
          } else {
            await resultOrCode(() => Promise.resolve(store.append(auditEvent(1))), UNAVAILABLE);
          }
        } finally {
          await outage.restore();
        }
        await store.append(auditEvent(2));
        const ids = (await store.read()).map((e) => e.callId);
        expect(ids[0]).toBe("call-0");
        expect(ids.at(-1)).toBe("call-2");
        expect(ids.filter((id) => id === "call-2")).toHaveLength(1);
        // Whatever the failed append came to, the chain carries on from what was stored.
        expectOneChain(await store.read());
      }),
    );
  });
}

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
