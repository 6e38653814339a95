import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { auditHashMatches, auditStreamOf, type ChainHead, EMPTY_HEAD } from "./chain.js";
import type { MisindexedAt } from "./unreadable.js";
import type {
  AuditBreak,
  AuditBreakKind,
  AuditStreamReport,
  AuditVerification,
} from "./verify-types.js";

type Linked = AuditEvent & { seq: number; prev: string; hash: string };

interface Entry {
  readonly event: AuditEvent;
  readonly index: number;
}

/** A gap in a stream's `seq`: `deleted` unless later events of the stream fill all of it. */
interface Gap {
  readonly from: number;
  readonly to: number;
  readonly found: Set<number>;
  readonly at: Entry;
}

/** What the walk keeps of one stream: counters, the head, and one event awaiting its successor. */
interface StreamState {
  readonly stream: string;
  events: number;
  unchained: number;
  began: boolean;
  head: ChainHead;
  /** The index of the event that set `head`, to name it when its successor shows a rewrite. */
  headIndex: number | undefined;
  /** The head before that event: the stream's verified head if that event was rewritten. */
  headBefore: ChainHead;
  /** An event is judged when the next one of its stream is known (or the trail ends). */
  pending: Entry | undefined;
  gap: Gap | undefined;
  broken: Broken | undefined;
}

/** A stream's first break, and its head verified in order before it. */
interface Broken {
  readonly found: Omit<AuditBreak, "stream">;
  readonly verified: ChainHead;
}

export interface AuditTrailWalkerOptions {
  /**
   * Positions whose hash the walk keeps (when they verify in order), for checking signed
   * checkpoints against it: `verifyAuditCheckpoint` with this walker as the trail.
   */
  readonly watch?: readonly { readonly stream: string; readonly seq: number }[];
}

/**
 * Verifies a trail given a page at a time, in the sink's read order, holding per stream a few
 * counters, its head and one event: what `tessera audit verify` walks a trail of any length
 * with. `verifyAuditChain` is the same walk over one list.
 *
 * An event is judged when the next event of its stream arrives, since a rewritten event shows
 * only in its successor's `prev`. A gap in `seq` is judged at the end: the missing positions
 * may still come later in the trail (`reordered`) or never (`deleted`); until then the walk
 * keeps the positions of the gap that later events fill, which for an intact trail is none.
 */
export class AuditTrailWalker {
  readonly #streams = new Map<string, StreamState>();
  readonly #watch = new Map<string, Set<number>>();
  readonly #hashes = new Map<string, Map<number, string>>();
  #events = 0;
  #unreadableAt: number | undefined;
  #result: AuditVerification | undefined;

  constructor(options: AuditTrailWalkerOptions = {}) {
    for (const { stream, seq } of options.watch ?? []) {
      let seqs = this.#watch.get(stream);
      if (seqs === undefined) {
        seqs = new Set();
        this.#watch.set(stream, seqs);
      }
      seqs.add(seq);
    }
  }

  /** The next events of the trail, in read order. */
  push(events: readonly AuditEvent[]): void {
    if (this.#result !== undefined) {
      throw new TesseraError("invalid_input", "the walk has ended: no events can be added");
    }
    for (const event of events) {
      if (this.#unreadableAt !== undefined) return;
      const index = this.#events++;
      // A caller's list may hold what a tampered store gave back (JSON null): a break, not a crash.
      if (typeof event !== "object" || event === null) {
        this.#unreadableAt = index;
        return;
      }
      this.#take(this.#stateOf(auditStreamOf(event)), { event, index });
    }
  }

  /** The verdict on everything pushed. Ends the walk; asked again, it answers the same. */
  result(): AuditVerification {
    if (this.#result !== undefined) return this.#result;
    if (this.#unreadableAt !== undefined) {
      const unreadable = unreadableTrail(this.#unreadableAt);
      this.#result = unreadable;
      return unreadable;
    }
    const reports: AuditStreamReport[] = [];
    let first: AuditBreak | undefined;
    for (const state of this.#streams.values()) {
      if (state.pending !== undefined) {
        state.broken = this.#judge(state, state.pending, undefined);
        state.pending = undefined;
      }
      if (state.gap !== undefined) state.broken = judgeGap(state, state.gap);
      const report = reportOf(state, state.broken?.verified ?? state.head, state.broken?.found);
      reports.push(report);
      if (report.break !== undefined && (first === undefined || report.break.index < first.index)) {
        first = report.break;
      }
    }
    const streams = Object.freeze(reports);
    const events = this.#events;
    const result: AuditVerification =
      first === undefined
        ? Object.freeze({ ok: true as const, events, streams })
        : Object.freeze({ ok: false as const, events, streams, break: first });
    this.#result = result;
    return result;
  }

  /**
   * The hash of the event at `seq` in `stream` if it verified in order, undefined if it did
   * not. Only watched positions are kept: asking for another is a mistake in the caller.
   */
  hashAt(stream: string, seq: number): string | undefined {
    if (this.#watch.get(stream)?.has(seq) !== true) {
      throw new TesseraError("invalid_input", `the walk did not watch seq ${seq} of that stream`);
    }
    const verified = this.result().streams.find((report) => report.stream === stream);
    if (verified === undefined || verified.head.seq < seq) return undefined;
    return this.#hashes.get(stream)?.get(seq);
  }

  #stateOf(stream: string): StreamState {
    let state = this.#streams.get(stream);
    if (state === undefined) {
      state = {
        stream,
        events: 0,
        unchained: 0,
        began: false,
        head: EMPTY_HEAD,
        headIndex: undefined,
        headBefore: EMPTY_HEAD,
        pending: undefined,
        gap: undefined,
        broken: undefined,
      };
      this.#streams.set(stream, state);
    }
    return state;
  }

  #take(state: StreamState, entry: Entry): void {
    state.events++;
    if (state.broken !== undefined) return;
    if (state.gap !== undefined) {
      fill(state.gap, entry.event);
      return;
    }
    if (!state.began) {
      if (hasNoLink(entry.event)) {
        state.unchained++;
        return;
      }
      state.began = true;
    }
    const pending = state.pending;
    state.pending = entry;
    if (pending !== undefined) {
      state.broken = this.#judge(state, pending, entry.event);
      if (state.broken !== undefined || state.gap !== undefined) state.pending = undefined;
    }
  }

  /** Judges `entry` knowing the next event of its stream: moves the head, or records a break. */
  #judge(state: StreamState, entry: Entry, next: AuditEvent | undefined): Broken | undefined {
    const { event, index } = entry;
    const head = state.head;
    const expectedSeq = head.seq + 1;
    const at = (kind: AuditBreakKind, detail: string): Broken => ({
      found: {
        kind,
        index,
        ...(event.seq === undefined ? {} : { seq: event.seq }),
        expectedSeq,
        detail,
      },
      verified: head,
    });
    // A break found at `entry` but lying in the event before it, which verified in order.
    const atHead = (kind: AuditBreakKind, detail: string, headIndex: number): Broken => ({
      found: { kind, index: headIndex, seq: head.seq, expectedSeq: head.seq, detail },
      verified: state.headBefore,
    });

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
      state.gap = { from: expectedSeq, to: event.seq - 1, found: new Set(), at: entry };
      if (next !== undefined) fill(state.gap, next);
      return undefined;
    }
    if (event.seq < expectedSeq) {
      // A second event at the position just taken: if the chain carries on from this one,
      // the one taken first is the intruder.
      if (
        state.headIndex !== undefined &&
        event.seq === head.seq &&
        next !== undefined &&
        linksTo(next, event)
      ) {
        const detail = `seq ${event.seq} appears twice; the chain continues from the later one`;
        return atHead("inserted", detail, state.headIndex);
      }
      return at("inserted", `seq ${event.seq} appears twice`);
    }
    if (event.prev !== head.hash) {
      const nextFits = next === undefined || !isLinked(next) || linksTo(next, event);
      if (state.headIndex !== undefined && nextFits) {
        const detail = `the event after it (seq ${event.seq}) does not link to its hash: it was rewritten`;
        return atHead("edited", detail, state.headIndex);
      }
      return at("edited", `the event does not link to the hash of seq ${head.seq}`);
    }
    state.headBefore = head;
    state.head = { seq: event.seq, hash: event.hash };
    state.headIndex = index;
    if (this.#watch.get(state.stream)?.has(event.seq) === true) {
      let hashes = this.#hashes.get(state.stream);
      if (hashes === undefined) {
        hashes = new Map();
        this.#hashes.set(state.stream, hashes);
      }
      hashes.set(event.seq, event.hash);
    }
    return undefined;
  }
}

/**
 * The verdict on a trail whose event at `position` (read order) is unreadable: broken there,
 * nothing after it walked. What a sink's `UnreadableAuditEvent` becomes in `tessera audit verify`.
 * With `misindexed` (the error's own field), the event read but a store index disagrees with it:
 * the break is `misindexed`, in the event's stream and at its `seq`.
 */
export function unreadableTrail(
  position: number,
  misindexed?: MisindexedAt,
): AuditVerification & { readonly ok: false } {
  const found: AuditBreak =
    misindexed === undefined
      ? {
          kind: "unreadable",
          stream: "",
          index: position,
          expectedSeq: 0,
          detail: "the stored event is not a JSON event object: the trail cannot be read past it",
        }
      : {
          kind: "misindexed",
          stream: misindexed.stream,
          index: position,
          ...(misindexed.seq === undefined ? {} : { seq: misindexed.seq }),
          expectedSeq: misindexed.seq ?? 0,
          detail: `the ${misindexed.index} index disagrees with the ${
            misindexed.seq === undefined ? "unchained event" : `event at seq ${misindexed.seq}`
          }: a read by its ${misindexed.index} misses it`,
        };
  return Object.freeze({
    ok: false as const,
    events: position,
    streams: Object.freeze([]),
    break: Object.freeze(found),
  });
}

/** A gap's verdict, once the whole trail has been seen. */
function judgeGap(state: StreamState, gap: Gap): Broken {
  const { event, index } = gap.at;
  const seq = event.seq as number;
  const found: Omit<AuditBreak, "stream"> =
    gap.found.size === gap.to - gap.from + 1
      ? {
          index,
          seq,
          expectedSeq: gap.from,
          kind: "reordered",
          detail: `seq ${seq} comes before seq ${gap.from}, which follows it`,
        }
      : {
          index,
          seq,
          expectedSeq: gap.from,
          kind: "deleted",
          detail: `events ${describeRange(gap.from, gap.to)} are missing`,
        };
  return { found, verified: state.head };
}

function reportOf(
  state: StreamState,
  verified: ChainHead,
  found?: Omit<AuditBreak, "stream">,
): AuditStreamReport {
  const { stream } = state;
  return Object.freeze({
    stream,
    events: state.events,
    unchained: state.unchained,
    head: Object.freeze({ seq: verified.seq, hash: verified.hash }),
    ...(found === undefined ? {} : { break: Object.freeze({ stream, ...found }) }),
  });
}

function fill(gap: Gap, event: AuditEvent): void {
  const seq = event.seq;
  if (typeof seq === "number" && seq >= gap.from && seq <= gap.to) gap.found.add(seq);
}

function hasNoLink(event: AuditEvent): boolean {
  return event.seq === undefined && event.prev === undefined && event.hash === undefined;
}

function isLinked(event: AuditEvent): event is Linked {
  return event.seq !== undefined && event.prev !== undefined && event.hash !== undefined;
}

function linksTo(next: AuditEvent, event: Linked): boolean {
  return next.seq === event.seq + 1 && next.prev === event.hash;
}

function describeRange(from: number, to: number): string {
  return from === to ? `at seq ${from}` : `from seq ${from} to ${to}`;
}
