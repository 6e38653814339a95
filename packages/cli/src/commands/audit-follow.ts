import type { AuditEvent } from "@tessera/core";
import { auditStreamOf } from "@tessera/core/store-kit";

/** The newest `limit` matching events of a trail, oldest first (`read({ limit, newest })`). */
export type ReadNewest = (limit: number) => Promise<readonly AuditEvent[]>;

/**
 * How many events behind the newest one read each read of `--follow` looks at again. A store
 * may number an event before it commits it (PostgreSQL's key is taken at insert), so an event
 * of one stream can become visible behind events of another stream that were already read;
 * such late commits are found in this stretch.
 */
export const LOOKBACK = 1_000;
/** How far back one read of `--follow` looks first (the lookback and what is new), and at most. */
export const FIRST_WINDOW = 2 * LOOKBACK;
export const LAST_WINDOW = 256_000;

/** An event as read from its sink, told from every other: the sink's link covers all of it. */
export function identityOf(event: AuditEvent): string {
  return event.hash ?? JSON.stringify(event);
}

export interface NewEvents {
  readonly events: readonly AuditEvent[];
  /** More arrived than `LAST_WINDOW` reaches back to: the oldest of them are not in `events`. */
  readonly overrun: boolean;
}

/**
 * Where `tail` reads from, and where `--follow` goes on from: `latest` reads the newest events
 * (at least `lines` of them, oldest first) and marks them, and every event before them, as
 * shown; each `next` answers what was recorded since, each event once.
 */
export interface TrailFollower {
  latest(lines: number): Promise<readonly AuditEvent[]>;
  next(): Promise<NewEvents>;
}

/**
 * What has been shown of a trail read from its newest end. The trail's order across streams
 * is not the order events became visible in (see `LOOKBACK`), so "after the last event shown"
 * would skip a late one for good. Within a stream it is: a sink links an event only after the
 * one before it is stored, so each stream's `seq` (1, 2, 3…) is visible in order, and a read
 * that holds an event holds every earlier one of its stream. So what was shown is kept per
 * stream, as the highest `seq` shown.
 */
interface Shown {
  /** Per stream, the highest `seq` shown, or read before following began. */
  readonly seqs: Map<string, number>;
  /**
   * The event the next read must reach back to, `LOOKBACK` behind the newest read; undefined
   * when the last read held the whole trail (the next must reach its start). A stream not in
   * `seqs` has no event at or after it that was visible then: one there now is new.
   */
  anchor: string | undefined;
  /** Events without a chain link (a trail from before it) read from the anchor on. */
  unlinked: Set<string>;
}

interface Page {
  readonly events: readonly AuditEvent[];
  /** The anchor's index in `events`; -1 when absent, and every event counts as after it. */
  readonly from: number;
  /** The read held the whole trail. */
  readonly whole: boolean;
  readonly overrun: boolean;
}

/**
 * Reads the newest events, four times as far back each time (`FIRST_WINDOW` up to
 * `LAST_WINDOW`) until the read reaches back to the anchor and, for every stream shown before,
 * to the event after its last one shown: a stream's next event lies behind the anchor when it
 * committed late, and its successor is already here. A read shorter than its window holds
 * the whole trail: nothing lies before it.
 */
async function readBack(readNewest: ReadNewest, shown: Shown): Promise<Page> {
  for (let window = FIRST_WINDOW; ; window = Math.min(window * 4, LAST_WINDOW)) {
    const events = await readNewest(window);
    const whole = events.length < window;
    const anchor = shown.anchor;
    const from = anchor === undefined ? -1 : events.findLastIndex((e) => identityOf(e) === anchor);
    const reached = anchor === undefined ? whole : from >= 0;
    if (whole || (reached && !skipsAhead(events, shown.seqs))) {
      return { events, from, whole, overrun: false };
    }
    if (window === LAST_WINDOW) return { events, from, whole, overrun: true };
  }
}

/**
 * Whether some stream shown before starts in `events` past the `seq` after its last one shown:
 * the read does not reach back to all of it yet. (The first of a stream in `events` is its
 * lowest: a stream is stored in `seq` order.) With a filter (`--call-id`, `--trace-id`) a
 * stream's events are not consecutive, and the read reaches back to its last one shown.
 */
function skipsAhead(events: readonly AuditEvent[], seqs: ReadonlyMap<string, number>): boolean {
  const seen = new Set<string>();
  for (const event of events) {
    if (typeof event.seq !== "number") continue;
    const stream = auditStreamOf(event);
    if (seen.has(stream)) continue;
    seen.add(stream);
    const last = seqs.get(stream);
    if (last !== undefined && event.seq > last + 1) return true;
  }
  return false;
}

/**
 * The events of `page` not shown yet, oldest first, and `shown` moved past them. An event of a
 * stream shown before is new when its `seq` is past the last one shown, wherever it lies; one
 * of a stream not seen yet when it lies after the anchor (before it, the stream's events were
 * there before following began); one without a link when it lies after the anchor and was
 * not read there before.
 */
function take(shown: Shown, page: Page): AuditEvent[] {
  const fresh: AuditEvent[] = [];
  const highest = new Map<string, number>();
  page.events.forEach((event, index) => {
    if (typeof event.seq !== "number") {
      if (index > page.from && !shown.unlinked.has(identityOf(event))) fresh.push(event);
      return;
    }
    const stream = auditStreamOf(event);
    const last = shown.seqs.get(stream);
    if (last === undefined ? index > page.from : event.seq > last) fresh.push(event);
    highest.set(stream, event.seq);
  });
  for (const [stream, seq] of highest) {
    shown.seqs.set(stream, Math.max(shown.seqs.get(stream) ?? 0, seq));
  }
  anchorAt(page, shown);
  return fresh;
}

/** The next read reaches back `LOOKBACK` behind the newest event of this one. */
function anchorAt(page: Page, shown: Shown): void {
  const { events } = page;
  const at = events.length - 1 - LOOKBACK;
  const start = at < 0 && page.whole ? undefined : Math.max(at, 0);
  const anchor = start === undefined ? undefined : events[start];
  shown.anchor = anchor === undefined ? undefined : identityOf(anchor);
  shown.unlinked = new Set(
    events
      .slice(start ?? 0)
      .filter((event) => typeof event.seq !== "number")
      .map(identityOf),
  );
}

/**
 * A store or a log, read from its newest end: each read asks only for the newest events, so
 * following a trail of millions costs what is new and the lookback, not the whole trail per
 * interval.
 */
export function followNewest(readNewest: ReadNewest): TrailFollower {
  const shown: Shown = { seqs: new Map(), anchor: undefined, unlinked: new Set() };
  return {
    async latest(lines) {
      // The lookback too, to know where each stream stood: a stream written next has its
      // last event there, or is new.
      const window = Math.max(lines, LOOKBACK);
      const events = await readNewest(window);
      take(shown, { events, from: -1, whole: events.length < window, overrun: false });
      return events.slice(-Math.max(lines, 1));
    },
    async next() {
      const page = await readBack(readNewest, shown);
      return { events: take(shown, page), overrun: page.overrun };
    },
  };
}

/**
 * A service, which answers one call or trace oldest first, capped (`readAll`): what is new
 * lies past the count already seen.
 */
export function followByCount(readAll: () => Promise<readonly AuditEvent[]>): TrailFollower {
  let seen = 0;
  return {
    async latest() {
      const events = await readAll();
      seen = events.length;
      return events;
    },
    async next() {
      const now = await readAll();
      const fresh = now.slice(seen);
      seen = Math.max(seen, now.length);
      return { events: fresh, overrun: false };
    },
  };
}
