import type { AuditEvent } from "@tessera/core";

/** The newest `limit` matching events of a trail, oldest first (`read({ limit, newest })`). */
export type ReadNewest = (limit: number) => Promise<readonly AuditEvent[]>;

/** How far back one read of `--follow` looks first, and at most. */
export const FIRST_WINDOW = 1_000;
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
 * The events recorded after the one with identity `shown` (every event when nothing was shown),
 * oldest first. Each read asks only for the newest events, so following a trail of millions
 * costs what is new, not the whole trail per interval: the window starts at `FIRST_WINDOW` and
 * grows fourfold while it does not reach back to `shown`.
 */
export async function eventsSince(
  readNewest: ReadNewest,
  shown: string | undefined,
): Promise<NewEvents> {
  for (let window = FIRST_WINDOW; ; window = Math.min(window * 4, LAST_WINDOW)) {
    const page = await readNewest(window);
    const at = shown === undefined ? -1 : page.findLastIndex((e) => identityOf(e) === shown);
    // A page shorter than its window holds the whole (filtered) trail: nothing lies before it.
    if (at >= 0 || page.length < window) return { events: page.slice(at + 1), overrun: false };
    if (window === LAST_WINDOW) return { events: page, overrun: true };
  }
}

/**
 * Where `tail` reads from, and where `--follow` goes on from: `latest` reads the newest events
 * (at least `lines` of them, oldest first) and marks the newest as shown; each `next` answers
 * what was recorded since the last event shown.
 */
export interface TrailFollower {
  latest(lines: number): Promise<readonly AuditEvent[]>;
  next(): Promise<NewEvents>;
}

/** A store or a log: read from its newest end (`eventsSince`). */
export function followNewest(readNewest: ReadNewest): TrailFollower {
  let shown: string | undefined;
  const remember = (events: readonly AuditEvent[]) => {
    const newest = events[events.length - 1];
    if (newest !== undefined) shown = identityOf(newest);
  };
  return {
    async latest(lines) {
      const events = await readNewest(Math.max(lines, 1));
      remember(events);
      return events;
    },
    async next() {
      const fresh = await eventsSince(readNewest, shown);
      remember(fresh.events);
      return fresh;
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
