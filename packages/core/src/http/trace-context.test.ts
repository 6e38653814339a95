import { describe, expect, it } from "vitest";
import {
  formatTraceparent,
  newCallId,
  newTraceId,
  parseTraceparent,
  parseTracestate,
} from "./trace-context.js";

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

describe("tracestate", () => {
  it("keeps the members as they came, without empty members and the whitespace around them", () => {
    expect(parseTracestate("congo=t61rcWkgMzE")).toBe("congo=t61rcWkgMzE");
    expect(parseTracestate(" rojo=00f067aa0ba902b7 ,\t, congo=t61rcWkgMzE ")).toBe(
      "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
    );
    // Multi-tenant keys, and values with inner spaces and any printable character but , and =.
    expect(parseTracestate("fw529a3039@dt=a b!~,t*/_-0@x-1=1")).toBe(
      "fw529a3039@dt=a b!~,t*/_-0@x-1=1",
    );
    // Repeated headers, as an array, are one list.
    expect(parseTracestate(["congo=1", "rojo=2"])).toBe("congo=1,rojo=2");
    const thirtyTwo = Array.from({ length: 32 }, (_, i) => `k${i}=v`).join(",");
    expect(parseTracestate(thirtyTwo)).toBe(thirtyTwo);
  });

  it.each([
    ["absent", undefined],
    ["empty", ""],
    ["only separators", " , ,"],
    ["a member without =", "congo"],
    ["an upper-case key", "Congo=1"],
    ["a key starting with a digit (no tenant)", "1congo=1"],
    ["an empty value", "congo="],
    ["a value with =", "congo=a=b"],
    ["a non-ASCII value", "congo=é"],
    ["NUL", "congo=\u0000"],
    ["a key twice", "congo=1,rojo=2,congo=3"],
    ["33 members", Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(",")],
    ["over 512 characters", `congo=${"x".repeat(507)}`],
    ["huge", `congo=${"x".repeat(1_000_000)}`],
    ["a key of 257 characters", `${"k".repeat(257)}=1`],
    ["a value of 257 characters", `congo=${"v".repeat(257)}`],
  ])("drops a header that is %s, whole", (_, header) => {
    expect(parseTracestate(header as string | undefined)).toBeUndefined();
  });
});
