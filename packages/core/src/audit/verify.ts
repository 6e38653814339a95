import type { AuditEvent } from "../contracts/schemas.js";
import { auditHashMatches, auditStreamOf, type ChainHead, EMPTY_HEAD } from "./chain.js";

/**
 * How a stream's chain broke, as the first event that does not fit shows it:
 * - `edited`: an event's content no longer matches its hash, or an event was rewritten with
 *   its own hash recomputed, which its successor's `prev` still contradicts;
 * - `deleted`: events are missing before this one (a gap in `seq` that no later event fills);
 * - `inserted`: an event that does not belong: one with no chain fields after the chain
 *   began (or only some of them), or a second event at a position already taken;
 * - `reordered`: every position is present, but not in order;
 * - `unreadable`: the stored event is not an event at all (not JSON, or JSON `null`): the
 *   trail cannot be walked past it. Its stream is unknown and reported as `""`; see
 *   `unreadableTrail`.
 */
export type AuditBreakKind = "edited" | "deleted" | "inserted" | "reordered" | "unreadable";

/** The first break found in a stream, and where. */
export interface AuditBreak {
  readonly kind: AuditBreakKind;
  readonly stream: string;
  /** Index of the event in the list that was verified (the sink's read order). */
  readonly index: number;
  /** The event's own `seq`, when it has one. */
  readonly seq?: number;
  /** The `seq` the chain expected at this point. */
  readonly expectedSeq: number;
  /** For people: what did not match. Names positions only, never event content. */
  readonly detail: string;
}

export interface AuditStreamReport {
  readonly stream: string;
  /** Every event of the stream in the list, the unchained prefix included. */
  readonly events: number;
  /**
   * Events at the stream's start that carry no chain fields: written before the sink
   * linked events. They are reported, not treated as a break, and the chain proves nothing
   * about them.
   */
  readonly unchained: number;
  /** The last event verified in order (the one before the break, if any). */
  readonly head: ChainHead;
  readonly break?: AuditBreak;
}

export type AuditVerification =
  | {
      readonly ok: true;
      readonly events: number;
      readonly streams: readonly AuditStreamReport[];
    }
  | {
      readonly ok: false;
      readonly events: number;
      readonly streams: readonly AuditStreamReport[];
      /** The break with the lowest index over every stream. */
      readonly break: AuditBreak;
    };

type Linked = AuditEvent & { seq: number; prev: string; hash: string };

interface Entry {
  readonly event: AuditEvent;
  readonly index: number;
}

/**
 * Walks the hash chain of every stream in `events`, given in the sink's read order (append
 * order), and reports each stream's first break. Pure: it reads nothing but its argument.
 *
 * An edit that recomputes the edited event's own hash is consistent by itself; it shows as a
 * broken link on the NEXT event, whose `prev` still commits to the old content. That is
 * reported as `edited` at the rewritten event (the one before the broken link), unless the
 * event after the link does not link to its own successor either, in which case it is the
 * one that does not fit and is reported. An edit to a stream's last event, a deletion of its
 * last events and a rewrite of the whole stream with every hash recomputed cannot show in the
 * trail alone: a signed checkpoint kept elsewhere is what proves those.
 */
export function verifyAuditChain(events: readonly AuditEvent[]): AuditVerification {
  const streams = new Map<string, Entry[]>();
  for (const [index, event] of events.entries()) {
    // A caller's list may hold what a tampered store gave back (JSON null): a break, not a crash.
    if (typeof event !== "object" || event === null) return unreadableTrail(index);
    const stream = auditStreamOf(event);
    let entries = streams.get(stream);
    if (entries === undefined) {
      entries = [];
      streams.set(stream, entries);
    }
    entries.push({ event, index });
  }
  const reports: AuditStreamReport[] = [];
  let first: AuditBreak | undefined;
  for (const [stream, entries] of streams) {
    const report = verifyStream(stream, entries);
    reports.push(report);
    if (report.break !== undefined && (first === undefined || report.break.index < first.index)) {
      first = report.break;
    }
  }
  const frozen = Object.freeze(reports);
  return first === undefined
    ? Object.freeze({ ok: true as const, events: events.length, streams: frozen })
    : Object.freeze({ ok: false as const, events: events.length, streams: frozen, break: first });
}

/**
 * The verdict on a trail whose event at `position` (read order) is unreadable: broken there,
 * nothing after it walked. What a sink's `UnreadableAuditEvent` becomes in `tessera audit verify`.
 */
export function unreadableTrail(position: number): AuditVerification & { readonly ok: false } {
  return Object.freeze({
    ok: false as const,
    events: position,
    streams: Object.freeze([]),
    break: Object.freeze({
      kind: "unreadable" as const,
      stream: "",
      index: position,
      expectedSeq: 0,
      detail: "the stored event is not a JSON event object: the trail cannot be read past it",
    }),
  });
}

function hasNoLink(event: AuditEvent): boolean {
  return event.seq === undefined && event.prev === undefined && event.hash === undefined;
}

function isLinked(event: AuditEvent): event is Linked {
  return event.seq !== undefined && event.prev !== undefined && event.hash !== undefined;
}

function verifyStream(stream: string, entries: readonly Entry[]): AuditStreamReport {
  let unchained = 0;
  for (const entry of entries) {
    if (!hasNoLink(entry.event)) break;
    unchained++;
  }

  // The positions some event claims: a gap that a later event fills is a reordering.
  const positions = new Set<number>();
  for (const { event } of entries.slice(unchained)) {
    if (event.seq !== undefined) positions.add(event.seq);
  }

  let head: ChainHead = EMPTY_HEAD;
  // The entry that set `head`, to name it when its successor shows it was rewritten.
  let headEntry: Entry | undefined;
  const finish = (found?: Omit<AuditBreak, "stream">, verified = head): AuditStreamReport =>
    Object.freeze({
      stream,
      events: entries.length,
      unchained,
      head: Object.freeze({ seq: verified.seq, hash: verified.hash }),
      ...(found === undefined ? {} : { break: Object.freeze({ stream, ...found }) }),
    });

  for (let i = unchained; i < entries.length; i++) {
    const entry = entries[i] as Entry;
    const event = entry.event;
    const expectedSeq = head.seq + 1;
    const at = (kind: AuditBreakKind, detail: string) =>
      finish({ kind, index: entry.index, ...seqOf(event), expectedSeq, detail });
    // A break found at `entry` but lying in the event before it, which verified in order.
    const atHead = (kind: AuditBreakKind, detail: string, previous: Entry) =>
      finish(
        { kind, index: previous.index, ...seqOf(previous.event), expectedSeq: head.seq, detail },
        headBefore(entries, unchained, previous),
      );

    if (!isLinked(event)) {
      return at(
        "inserted",
        hasNoLink(event)
          ? "an event without chain fields after the chain began"
          : "an event with only some of its chain fields",
      );
    }
    if (!auditHashMatches(event)) {
      return at("edited", "the event's content does not match its hash");
    }
    if (event.seq > expectedSeq) {
      // More missing positions than events claim: some of them cannot be refilled.
      let refilled = event.seq - expectedSeq <= positions.size;
      for (let seq = expectedSeq; seq < event.seq && refilled; seq++) {
        refilled = positions.has(seq);
      }
      return refilled
        ? at("reordered", `seq ${event.seq} comes before seq ${expectedSeq}, which follows it`)
        : at("deleted", `events ${describeRange(expectedSeq, event.seq - 1)} are missing`);
    }
    const next = entries[i + 1]?.event;
    if (event.seq < expectedSeq) {
      // A second event at the position just taken: if the chain carries on from this one,
      // the one taken first is the intruder.
      if (
        headEntry !== undefined &&
        event.seq === head.seq &&
        next !== undefined &&
        linksTo(next, event)
      ) {
        return atHead(
          "inserted",
          `seq ${event.seq} appears twice; the chain continues from the later one`,
          headEntry,
        );
      }
      return at("inserted", `seq ${event.seq} appears twice`);
    }
    if (event.prev !== head.hash) {
      const nextFits = next === undefined || !isLinked(next) || linksTo(next, event);
      if (headEntry !== undefined && nextFits) {
        return atHead(
          "edited",
          `the event after it (seq ${event.seq}) does not link to its hash: it was rewritten`,
          headEntry,
        );
      }
      return at("edited", `the event does not link to the hash of seq ${head.seq}`);
    }
    head = { seq: event.seq, hash: event.hash };
    headEntry = entry;
  }
  return finish();
}

function seqOf(event: AuditEvent): { seq?: number } {
  return event.seq === undefined ? {} : { seq: event.seq };
}

function linksTo(next: AuditEvent, event: Linked): boolean {
  return next.seq === event.seq + 1 && next.prev === event.hash;
}

/** The head just before `entry`, which verified in order up to it. */
function headBefore(entries: readonly Entry[], unchained: number, entry: Entry): ChainHead {
  const position = entries.indexOf(entry);
  const before = position > unchained ? (entries[position - 1]?.event as Linked) : undefined;
  return Object.freeze(before === undefined ? EMPTY_HEAD : { seq: before.seq, hash: before.hash });
}

function describeRange(from: number, to: number): string {
  return from === to ? `at seq ${from}` : `from seq ${from} to ${to}`;
}
