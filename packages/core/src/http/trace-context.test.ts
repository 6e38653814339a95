import { describe, expect, it } from "vitest";
import { formatTraceparent, newCallId, newTraceId, parseTraceparent } from "./trace-context.js";

describe("traceparent", () => {
  const id = "4bf92f3577b34da6a3ce929d0e0e4736";
  const parent = "00f067aa0ba902b7";

  it("reads a version-00 header and writes it back", () => {
    const header = `00-${id}-${parent}-01`;
    expect(parseTraceparent(header)).toEqual({ traceId: id, parentId: parent, sampled: true });
    expect(formatTraceparent(id, parent, true)).toBe(header);
    expect(parseTraceparent(`00-${id}-${parent}-00`)?.sampled).toBe(false);
  });

  it("accepts a later version's extra fields, not version 00's", () => {
    expect(parseTraceparent(`01-${id}-${parent}-01-what-comes-next`)?.traceId).toBe(id);
    expect(parseTraceparent(`00-${id}-${parent}-01-extra`)).toBeUndefined();
  });

  it.each([
    ["absent", undefined],
    ["repeated", [`00-${id}-${parent}-01`, `00-${id}-${parent}-01`]],
    ["upper case", `00-${id.toUpperCase()}-${parent}-01`],
    ["all-zero trace ID", `00-${"0".repeat(32)}-${parent}-01`],
    ["all-zero parent", `00-${id}-${"0".repeat(16)}-01`],
    ["version ff", `ff-${id}-${parent}-01`],
    ["short trace ID", `00-${id.slice(1)}-${parent}-01`],
    ["huge", `00-${id}-${parent}-01-${"x".repeat(1_000_000)}`],
    ["NUL", `00-${id}-${parent}-01\u0000`],
  ])("ignores a header that is %s", (_, header) => {
    expect(parseTraceparent(header as string | undefined)).toBeUndefined();
  });

  it("mints trace IDs a receiver accepts", () => {
    const minted = newTraceId();
    expect(minted).toMatch(/^[0-9a-f]{32}$/);
    expect(parseTraceparent(formatTraceparent(minted, parent, false))?.traceId).toBe(minted);
    expect(newTraceId()).not.toBe(minted);
  });

  it("mints call and trace IDs that lead with the clock (UUID version 7) and never repeat", async () => {
    const before = Date.now();
    const call = newCallId();
    expect(call).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const clock = Number.parseInt(call.replaceAll("-", "").slice(0, 12), 16);
    expect(clock).toBeGreaterThanOrEqual(before);
    expect(clock).toBeLessThanOrEqual(Date.now());
    // Later IDs sort after earlier ones once the clock has moved: an index grows at its end.
    const trace = newTraceId();
    await new Promise((resolve) => setTimeout(resolve, 3));
    expect(newCallId() > call).toBe(true);
    expect(newTraceId() > trace).toBe(true);
    const many = new Set(Array.from({ length: 10_000 }, () => newCallId()));
    expect(many.size).toBe(10_000);
  });
});
