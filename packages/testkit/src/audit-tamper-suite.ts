import {
  type AuditBreakKind,
  type AuditEvent,
  AuditTrailWalker,
  type AuditVerification,
  type ReadableAuditSink,
  readAuditPages,
  UnreadableAuditEvent,
  unreadableTrail,
  verifyAuditChain,
} from "@tessera/core";
import { auditEventHash, linkAuditEvent } from "@tessera/core/store-kit";
import { describe, expect, it } from "vitest";
import { auditEvent } from "./audit-fixtures.js";

/**
 * A sink's stored trail opened as an attacker holding the database would open it: the
 * append-only guards (triggers) already dropped, rows reached by their position in the
 * sink's read order, the stored JSON text written directly.
 */
export interface TamperableTrail {
  readonly store: ReadableAuditSink;
  /** Overwrites the stored event at `index`. */
  replace(index: number, json: string): Promise<void>;
  /** Deletes the stored event at `index`. */
  remove(index: number): Promise<void>;
  /** Stores `json` so that it reads back at `index`, before the event that was there. */
  insertBefore(index: number, json: string): Promise<void>;
  /** Exchanges the stored events at `index` and `index + 1`. */
  swap(index: number): Promise<void>;
  close(): Promise<void>;
}

/** Trail length; every fifth event is in a second namespace, so indexes and seqs differ. */
const LENGTH = 10;
/** Where the trail is attacked: events 5 and 6 are both in "ns", as are 3 and 4. */
const AT = 5;
/** The last event of "ns" (the one after it is in "other"). */
const LAST_IN_NS = LENGTH - 2;

function seedEvent(i: number): AuditEvent {
  return auditEvent(i, { namespaceId: i % 5 === 4 ? "other" : "ns" });
}

type Tamper = (trail: TamperableTrail, read: readonly AuditEvent[]) => Promise<void>;

const at = (read: readonly AuditEvent[], index: number): AuditEvent => {
  const event = read[index];
  if (event === undefined) throw new Error(`no event at ${index}`);
  return event;
};

/**
 * The four tamperings of issue 13 (and two stronger variants) done to a real store, each
 * checked against what `verifyAuditChain` reports over the sink's own read: the kind of
 * break, the list position, and the stream. An attacker who recomputes hashes is assumed:
 * the chain rule is public.
 */
const CASES: readonly [string, AuditBreakKind, number, Tamper][] = [
  [
    "an edited event (content changed, hash kept)",
    "edited",
    AT,
    (trail, read) => trail.replace(AT, JSON.stringify({ ...at(read, AT), detail: "rewritten" })),
  ],
  [
    "an edited event whose own hash was recomputed",
    "edited",
    AT,
    (trail, read) => {
      const { hash: _hash, ...rest } = { ...at(read, AT), detail: "rewritten" };
      return trail.replace(AT, JSON.stringify({ ...rest, hash: auditEventHash(rest) }));
    },
  ],
  ["a deleted event", "deleted", AT, (trail) => trail.remove(AT)],
  [
    "an inserted event without chain fields",
    "inserted",
    AT,
    (trail) => trail.insertBefore(AT, JSON.stringify(auditEvent(90, { namespaceId: "ns" }))),
  ],
  [
    "an inserted event linked to its predecessor with a recomputed hash",
    "inserted",
    AT,
    (trail, read) => {
      const before = at(read, AT - 1);
      const forged = linkAuditEvent(auditEvent(91, { namespaceId: "ns" }), {
        seq: before.seq ?? 0,
        hash: before.hash ?? "",
      });
      return trail.insertBefore(AT, JSON.stringify(forged));
    },
  ],
  ["two events swapped", "reordered", AT, (trail) => trail.swap(AT)],
  [
    // The sink keeps the head apart from the trail: the next event still links to the
    // deleted one, so the deletion shows from then on (until then only a checkpoint can).
    "a deleted last event, once the next one is appended,",
    "deleted",
    LENGTH - 1,
    async (trail) => {
      await trail.remove(LAST_IN_NS);
      await trail.store.append(auditEvent(92, { namespaceId: "ns" }));
    },
  ],
];

/** The verdict walked a page of `pageSize` at a time, as `tessera audit verify` walks it. */
async function verifyByPages(
  store: ReadableAuditSink,
  pageSize: number,
): Promise<AuditVerification> {
  const walker = new AuditTrailWalker();
  for await (const page of readAuditPages(store, { pageSize })) walker.push(page);
  return walker.result();
}

export function describeAuditTamperCases(name: string, open: () => Promise<TamperableTrail>): void {
  describe(`audit tampering: ${name}`, () => {
    for (const [title, kind, index, tamper] of CASES) {
      it(`${title} is reported as ${kind} at position ${index}`, async () => {
        const trail = await open();
        try {
          for (let i = 0; i < LENGTH; i++) await trail.store.append(seedEvent(i));
          const read = await trail.store.read();
          expect(verifyAuditChain(read).ok).toBe(true);
          await tamper(trail, read);
          const verdict = verifyAuditChain(await trail.store.read());
          expect(verdict.ok).toBe(false);
          if (verdict.ok) return;
          expect(verdict.break).toMatchObject({ kind, index, stream: "ns" });
          // Read a few events at a time, the break is the same, wherever the pages cut.
          expect(await verifyByPages(trail.store, 3)).toEqual(verdict);
        } finally {
          await trail.close();
        }
      });
    }

    // Not an event at all: the read names the position instead of crashing on the row
    // (JSON null was a TypeError in verify, text that is not JSON a SyntaxError in read).
    for (const [title, json] of [
      ["JSON null", "null"],
      ["text that is not JSON", "{not json"],
      ["a JSON number", "42"],
    ] as const) {
      it(`an event replaced by ${title} reads as unreadable at position ${AT}`, async () => {
        const trail = await open();
        try {
          for (let i = 0; i < LENGTH; i++) await trail.store.append(seedEvent(i));
          await trail.replace(AT, json);
          const error = await trail.store.read().then(
            () => undefined,
            (thrown: unknown) => thrown,
          );
          expect(error).toBeInstanceOf(UnreadableAuditEvent);
          expect(error).toMatchObject({ code: "audit_unavailable", position: AT });
          expect(unreadableTrail((error as UnreadableAuditEvent).position).break).toMatchObject({
            kind: "unreadable",
            index: AT,
          });
          // Met in the third page of two, it is named by its place in the whole trail.
          const paged = await verifyByPages(trail.store, 2).then(
            () => undefined,
            (thrown: unknown) => thrown,
          );
          expect(paged).toBeInstanceOf(UnreadableAuditEvent);
          expect(paged).toMatchObject({ code: "audit_unavailable", position: AT });
        } finally {
          await trail.close();
        }
      });
    }
  });
}
