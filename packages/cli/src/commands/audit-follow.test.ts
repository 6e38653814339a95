import type { AuditEvent } from "@tessera/core";
import { propertyParameters } from "@tessera/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  FIRST_WINDOW,
  followByCount,
  followNewest,
  LAST_WINDOW,
  LOOKBACK,
  type TrailFollower,
} from "./audit-follow.js";

/**
 * A trail as a store keeps it: each event numbered when it is written (its place in the
 * trail) and visible once its write commits, so a lower number can become visible after a
 * higher one (PostgreSQL's key). Within a stream a write starts only once the one before it
 * committed (the sink holds the stream's head), so each stream's `seq` turns visible in order.
 */
class Trail {
  readonly rows: { event: AuditEvent; visible: boolean }[] = [];
  readonly #heads = new Map<string, number>();
  readonly #open = new Map<string, number[]>();
  /** Each read's window, in order. */
  readonly windows: number[] = [];

  constructor(readonly match: (event: AuditEvent) => boolean = () => true) {}

  /** Numbers `count` events of `stream`; they stay invisible until `commit(stream)`. */
  begin(stream: string, count: number): void {
    if (this.#open.has(stream)) throw new Error(`${stream} is being written`);
    const rows: number[] = [];
    for (let i = 0; i < count; i++) {
      const seq = (this.#heads.get(stream) ?? 0) + 1;
      this.#heads.set(stream, seq);
      const n = this.rows.length;
      const event = { callId: `c${n}`, namespaceId: stream, seq, hash: `${stream}#${seq}` };
      this.rows.push({ event: event as unknown as AuditEvent, visible: false });
      rows.push(n);
    }
    this.#open.set(stream, rows);
  }

  commit(stream: string): void {
    for (const n of this.#open.get(stream) ?? [])
      (this.rows[n] as { visible: boolean }).visible = true;
    this.#open.delete(stream);
  }

  write(stream: string, count: number): void {
    this.begin(stream, count);
    this.commit(stream);
  }

  get writing(): readonly string[] {
    return [...this.#open.keys()];
  }

  /** What `read({ limit, newest: true })` answers: the newest visible (matching) events. */
  readonly readNewest = async (limit: number): Promise<readonly AuditEvent[]> => {
    this.windows.push(limit);
    const visible = this.rows.filter((row) => row.visible && this.match(row.event));
    return visible.slice(Math.max(0, visible.length - limit)).map((row) => row.event);
  };

  visible(): AuditEvent[] {
    return this.rows.filter((row) => row.visible && this.match(row.event)).map((r) => r.event);
  }
}

const names = (events: readonly AuditEvent[]) => events.map((event) => event.hash);
const next = async (follower: TrailFollower) => names((await follower.next()).events);

describe("followNewest: each event once, however the streams' writes commit", () => {
  it("a few new events on a long trail cost one window, not the trail", async () => {
    const trail = new Trail();
    trail.write("team", 100_000);
    const follower = followNewest(trail.readNewest);
    await follower.latest(3);
    trail.write("team", 5);
    trail.windows.length = 0;
    expect(await next(follower)).toEqual([
      "team#100001",
      "team#100002",
      "team#100003",
      "team#100004",
      "team#100005",
    ]);
    expect(trail.windows).toEqual([FIRST_WINDOW]);
    expect(await next(follower)).toEqual([]);
  });

  it("more new events than a window: the window grows until it reaches back far enough", async () => {
    const trail = new Trail();
    trail.write("team", 90_000);
    const follower = followNewest(trail.readNewest);
    await follower.latest(1);
    trail.write("team", 10_000);
    trail.windows.length = 0;
    const fresh = await next(follower);
    expect(fresh).toHaveLength(10_000);
    expect([fresh[0], fresh.at(-1)]).toEqual(["team#90001", "team#100000"]);
    expect(trail.windows).toEqual([FIRST_WINDOW, 4 * FIRST_WINDOW, 16 * FIRST_WINDOW]);
  });

  it("an event committed behind one already shown, in another stream, is shown once", async () => {
    const trail = new Trail();
    trail.write("team", 10);
    const follower = followNewest(trail.readNewest);
    await follower.latest(1);
    // team2's write takes its number first; team's next commits first and is shown.
    trail.begin("team2", 2);
    trail.write("team", 1);
    expect(await next(follower)).toEqual(["team#11"]);
    trail.commit("team2");
    // Before: nothing, ever — the follower went on from team#11, past team2's numbers.
    expect(await next(follower)).toEqual(["team2#1", "team2#2"]);
    trail.write("team2", 1);
    expect(await next(follower)).toEqual(["team2#3"]);
  });

  it("a late commit further back than the lookback: its stream's next event brings it", async () => {
    const trail = new Trail();
    trail.write("a", 1);
    trail.write("b", 1);
    const follower = followNewest(trail.readNewest);
    await follower.latest(2);
    trail.begin("a", 1);
    trail.write("b", 3 * LOOKBACK);
    expect(await next(follower)).toHaveLength(3 * LOOKBACK);
    trail.commit("a");
    trail.write("a", 1);
    // a#3 is new and a#2 is missing before it: the read reaches back to a#2.
    expect(await next(follower)).toEqual(["a#2", "a#3"]);
  });

  it("streams written before following began are not shown again; a new stream is", async () => {
    const trail = new Trail();
    trail.write("old", 5);
    trail.write("team", 5_000);
    const follower = followNewest(trail.readNewest);
    expect(names(await follower.latest(2))).toEqual(["team#4999", "team#5000"]);
    trail.write("old", 1);
    trail.write("fresh", 2);
    expect(await next(follower)).toEqual(["old#6", "fresh#1", "fresh#2"]);
  });

  it("with a filter a stream's seqs are not consecutive: nothing twice, nothing missed", async () => {
    const trail = new Trail((event) => Number(event.callId.slice(1)) % 3 === 0);
    trail.write("team", 30);
    const follower = followNewest(trail.readNewest);
    await follower.latest(1);
    trail.write("team", 30);
    const fresh = await next(follower);
    expect(fresh).toEqual(Array.from({ length: 10 }, (_, i) => `team#${31 + 3 * i}`));
    expect(await next(follower)).toEqual([]);
  });

  it("events without a chain link (an older trail): each new one once", async () => {
    const events: AuditEvent[] = Array.from(
      { length: 5 },
      (_, i) => ({ callId: `u${i}` }) as unknown as AuditEvent,
    );
    const follower = followNewest(async (limit) => events.slice(-limit));
    expect(await follower.latest(1)).toEqual([events[4]]);
    events.push({ callId: "u5" } as unknown as AuditEvent);
    expect((await follower.next()).events).toEqual([{ callId: "u5" }]);
    expect((await follower.next()).events).toEqual([]);
  });

  it("past the last window it says so and answers the newest it reached", async () => {
    const trail = new Trail();
    trail.write("team", 1);
    const follower = followNewest(trail.readNewest);
    await follower.latest(1);
    trail.write("team", LAST_WINDOW + 10);
    const fresh = await follower.next();
    expect(fresh.overrun).toBe(true);
    expect(fresh.events).toHaveLength(LAST_WINDOW);
    expect(fresh.events.at(-1)?.hash).toBe(`team#${LAST_WINDOW + 11}`);
    expect((await follower.next()).events).toEqual([]);
  });

  it("latest reads the lookback once and answers the lines asked for (one for -n 0)", async () => {
    const trail = new Trail();
    trail.write("team", 5_000);
    const follower = followNewest(trail.readNewest);
    expect(names(await follower.latest(3))).toEqual(["team#4998", "team#4999", "team#5000"]);
    expect(await followNewest(trail.readNewest).latest(0)).toHaveLength(1);
    expect(await followNewest(new Trail().readNewest).latest(5)).toEqual([]);
    expect(Math.max(...trail.windows)).toBe(LOOKBACK);
  });

  /**
   * Any interleaving of writes on three streams, numbered before they commit, with the
   * follower starting and reading anywhere in between: it shows exactly the events that were
   * not visible when it started, each once, each stream in `seq` order. (Late commits stay
   * within the lookback here: fewer events are written after the start than `LOOKBACK`.)
   */
  it("property: every event not there at the start is shown once, in its stream's order", async () => {
    const step = fc.oneof(
      fc.record({
        kind: fc.constant("begin" as const),
        stream: fc.constantFrom("a", "b", "c"),
        count: fc.integer({ min: 1, max: 15 }),
      }),
      fc.record({ kind: fc.constant("commit" as const), stream: fc.constantFrom("a", "b", "c") }),
      fc.record({ kind: fc.constant("read" as const) }),
    );
    const scenario = fc.record({
      before: fc.array(fc.tuple(fc.constantFrom("a", "b", "c"), fc.nat(1_500)), {
        maxLength: 3,
      }),
      steps: fc.array(step, { maxLength: 60 }),
      startAt: fc.nat(60),
      lines: fc.nat(30),
      filtered: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(scenario, async ({ before, steps, startAt, lines, filtered }) => {
        const trail = new Trail(
          filtered ? (event) => Number(event.callId.slice(1)) % 2 === 0 : undefined,
        );
        for (const [stream, count] of before) trail.write(stream, count);
        let follower: TrailFollower | undefined;
        let there = new Set<string | undefined>();
        const shown: AuditEvent[] = [];
        const start = async () => {
          there = new Set(names(trail.visible()));
          follower = followNewest(trail.readNewest);
          await follower.latest(lines);
        };
        for (const [index, s] of steps.entries()) {
          if (index === startAt) await start();
          if (s.kind === "begin" && !trail.writing.includes(s.stream)) {
            trail.begin(s.stream, s.count);
          }
          if (s.kind === "commit") trail.commit(s.stream);
          if (s.kind === "read" && follower !== undefined) {
            const fresh = await follower.next();
            expect(fresh.overrun).toBe(false);
            shown.push(...fresh.events);
          }
        }
        if (follower === undefined) await start();
        for (const stream of trail.writing) trail.commit(stream);
        shown.push(...((await follower?.next())?.events ?? []));
        const expected = names(trail.visible()).filter((hash) => !there.has(hash));
        expect(names(shown).sort()).toEqual(expected.sort());
        for (const stream of ["a", "b", "c"]) {
          const seqs = shown.filter((e) => e.namespaceId === stream).map((e) => e.seq as number);
          expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
        }
      }),
      propertyParameters({ numRuns: 300 }),
    );
  });
});

describe("followByCount: a service's capped answer", () => {
  it("what is new lies past the count seen", async () => {
    const event = (i: number) => ({ callId: `c${i}`, hash: `h${i}` }) as unknown as AuditEvent;
    const answer = [event(0), event(1)];
    const follower = followByCount(async () => [...answer]);
    expect(await follower.latest(10)).toHaveLength(2);
    expect((await follower.next()).events).toEqual([]);
    answer.push(event(2));
    expect(await follower.next()).toEqual({ events: [event(2)], overrun: false });
  });
});
