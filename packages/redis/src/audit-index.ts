import type { AuditEvent } from "@tessera/core";
import { storageDigest, uniqueStorageDigest } from "@tessera/core/store-kit";
import type { Connection } from "./connection.js";

const CODE = "audit_unavailable";

/** Which index list an event is missing from. */
export type MissingIndex = "call ID" | "trace ID";

/** One event's entry ID looked for in one index list, halving `[low, high]` each round. */
interface Search {
  readonly event: number;
  readonly index: MissingIndex;
  /** Undefined for an ID that is not text: no list holds it. */
  readonly key: string | undefined;
  readonly id: string;
  low: number;
  high: number;
  found: boolean;
}

/**
 * The first of a page's events (with their stream entry IDs, in stream order) that is missing
 * from the call or trace index list it was written to, or undefined when every one is in both.
 * A list renamed, emptied or rewritten to hide an event from `explain` shows here.
 *
 * Every writer pushes an entry's ID onto its lists in the script that adds the entry, and
 * entry IDs only grow, so each list is sorted: an ID is found by halving, about log2 of the
 * list's length in LINDEX per event, all of a page's searches a round trip per halving. A
 * trace may span the whole trail; scanning its list (LPOS) for each of its events would cost
 * the square of its length. Only read commands, so an auditor's read-only ACL user verifies.
 *
 * Not covered: an ID added to a list it does not belong in. Reads by ID drop such an entry
 * (its event's own IDs decide), so it hides nothing and misattributes nothing.
 */
export async function firstMissingFromIndex(
  connection: Connection,
  ids: readonly string[],
  events: readonly AuditEvent[],
): Promise<{ readonly event: number; readonly index: MissingIndex } | undefined> {
  // Per event, the first list it is missing from (the call's before the trace's).
  const missing: (MissingIndex | undefined)[] = [];
  const searches: Search[] = [];
  events.forEach((event, at) => {
    const id = ids[at] as string;
    for (const [index, list, eventId] of [
      ["call ID", "audit-call", event.callId],
      ["trace ID", "audit-trace", event.traceId],
    ] as const) {
      // An event whose ID is not text was filed under no list: a search that never runs.
      if (typeof eventId !== "string") {
        searches.push({ event: at, index, key: undefined, id, low: 0, high: -1, found: false });
        continue;
      }
      // Call IDs never repeat: their digest skips the cache that trace IDs use.
      const digest = index === "call ID" ? uniqueStorageDigest : storageDigest;
      const key = connection.key(list, digest(eventId));
      searches.push({ event: at, index, key, id, low: 0, high: -1, found: false });
    }
  });
  const keys = [
    ...new Set(searches.flatMap((search) => (search.key === undefined ? [] : [search.key]))),
  ];
  const lengths = await connection.run(CODE, (redis) =>
    Promise.all(keys.map((key) => redis.llen(key))),
  );
  const lengthOf = new Map(keys.map((key, at) => [key, lengths[at] as number]));
  for (const search of searches) {
    if (search.key !== undefined) search.high = (lengthOf.get(search.key) as number) - 1;
  }
  for (;;) {
    const open = searches.filter((search) => !search.found && search.low <= search.high);
    if (open.length === 0) break;
    const middles = open.map((search) => Math.floor((search.low + search.high) / 2));
    const listed = await connection.run(CODE, (redis) =>
      Promise.all(
        open.map((search, at) => redis.lindex(search.key as string, middles[at] as number)),
      ),
    );
    open.forEach((search, at) => {
      const middle = middles[at] as number;
      const entry = listed[at];
      const order = typeof entry === "string" ? compareEntryIds(entry, search.id) : undefined;
      if (order === 0) search.found = true;
      else if (order === undefined)
        search.high = -1; // not an entry ID: the list was written over
      else if (order < 0) search.low = middle + 1;
      else search.high = middle - 1;
    });
  }
  // Searches are pushed call first, so `??=` keeps the call's list when both miss.
  for (const search of searches) if (!search.found) missing[search.event] ??= search.index;
  const event = missing.findIndex((index) => index !== undefined);
  return event === -1 ? undefined : { event, index: missing[event] as MissingIndex };
}

const ENTRY_ID = /^(\d+)-(\d+)$/;

/**
 * The order of two stream entry IDs (`<ms>-<n>`), compared as whole numbers of any length, or
 * undefined when either is not an entry ID.
 */
export function compareEntryIds(a: string, b: string): number | undefined {
  const left = ENTRY_ID.exec(a);
  const right = ENTRY_ID.exec(b);
  if (left === null || right === null) return undefined;
  return (
    compareDigits(left[1] as string, right[1] as string) ||
    compareDigits(left[2] as string, right[2] as string)
  );
}

/** Decimal digits without leading zeros (as Redis writes them), compared as numbers. */
function compareDigits(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}
