import type { AuditEvent } from "@tessera/core";
import { describe, expect, it } from "vitest";
import {
  eventsSince,
  FIRST_WINDOW,
  followByCount,
  followNewest,
  identityOf,
  LAST_WINDOW,
} from "./audit-follow.js";

const event = (i: number) => ({ callId: `c${i}`, hash: `h${i}` }) as unknown as AuditEvent;

/** A trail of `length` events read from its newest end, counting the windows asked for. */
function trail(length: number) {
  const events = Array.from({ length }, (_, i) => event(i));
  const windows: number[] = [];
  const readNewest = async (limit: number) => {
    windows.push(limit);
    return events.slice(Math.max(0, events.length - limit));
  };
  return { events, windows, readNewest };
}

describe("eventsSince: following a trail from its newest end", () => {
  it("a few new events on a long trail cost one window, not the trail", async () => {
    const { events, windows, readNewest } = trail(1_000_000);
    const shown = identityOf(events[999_994] as AuditEvent);
    const fresh = await eventsSince(readNewest, shown);
    expect(fresh.events.map((e) => e.callId)).toEqual([
      "c999995",
      "c999996",
      "c999997",
      "c999998",
      "c999999",
    ]);
    expect([fresh.overrun, windows]).toEqual([false, [FIRST_WINDOW]]);
  });

  it("nothing new is an empty answer", async () => {
    const { events, readNewest } = trail(10);
    expect(await eventsSince(readNewest, identityOf(events[9] as AuditEvent))).toEqual({
      events: [],
      overrun: false,
    });
  });

  it("more new events than a window: the window grows until it reaches the last one shown", async () => {
    const { events, windows, readNewest } = trail(100_000);
    const fresh = await eventsSince(readNewest, identityOf(events[89_999] as AuditEvent));
    expect(fresh.events).toHaveLength(10_000);
    expect(fresh.events[0]?.callId).toBe("c90000");
    expect([fresh.overrun, windows]).toEqual([false, [1_000, 4_000, 16_000]]);
  });

  it("nothing shown yet: the whole (short) trail, in one read", async () => {
    const { windows, readNewest } = trail(7);
    const fresh = await eventsSince(readNewest, undefined);
    expect(fresh.events.map((e) => e.callId)).toEqual(["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
    expect(windows).toEqual([FIRST_WINDOW]);
  });

  it("past the last window it says so and answers the newest it reached", async () => {
    const { events, readNewest } = trail(LAST_WINDOW + 10);
    const fresh = await eventsSince(readNewest, identityOf(events[0] as AuditEvent));
    expect(fresh.overrun).toBe(true);
    expect(fresh.events).toHaveLength(LAST_WINDOW);
    expect(fresh.events.at(-1)?.callId).toBe(`c${LAST_WINDOW + 9}`);
  });
});

describe("the followers tail uses", () => {
  it("followNewest: latest marks what it read as shown; next answers each event once", async () => {
    const { events, windows, readNewest } = trail(5_000);
    const follower = followNewest(readNewest);
    expect((await follower.latest(3)).map((e) => e.callId)).toEqual(["c4997", "c4998", "c4999"]);
    expect((await follower.next()).events).toEqual([]);
    events.push(event(5_000), event(5_001));
    expect((await follower.next()).events.map((e) => e.callId)).toEqual(["c5000", "c5001"]);
    expect((await follower.next()).events).toEqual([]);
    // -n 0 still reads one event, to know where to go on from; no read was of the whole trail.
    const fromNothing = followNewest(readNewest);
    expect(await fromNothing.latest(0)).toHaveLength(1);
    expect(Math.max(...windows)).toBe(FIRST_WINDOW);
  });

  it("followByCount: a service's capped answer, what is new lies past the count seen", async () => {
    const answer = [event(0), event(1)];
    const follower = followByCount(async () => [...answer]);
    expect(await follower.latest(10)).toHaveLength(2);
    expect((await follower.next()).events).toEqual([]);
    answer.push(event(2));
    expect(await follower.next()).toEqual({ events: [event(2)], overrun: false });
  });
});
