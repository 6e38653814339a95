import { describe, expect, it } from "vitest";
import { boundedCanonicalJson, MAX_JSON_DEPTH, withinJsonDepth } from "./canonical-json.js";

function nested(levels: number): unknown {
  let value: unknown = "leaf";
  for (let i = 0; i < levels; i++) value = i % 2 === 0 ? { a: value } : [value];
  return value;
}

describe("bounded canonical JSON", () => {
  it("sorts keys, so key order makes no new value", () => {
    expect(boundedCanonicalJson({ b: 1, a: [true, null, "x"] })).toBe(
      '{"a":[true,null,"x"],"b":1}',
    );
    expect(boundedCanonicalJson({ a: 1, b: 2 })).toBe(boundedCanonicalJson({ b: 2, a: 1 }));
  });

  it(`accepts ${MAX_JSON_DEPTH} levels and refuses one more`, () => {
    expect(boundedCanonicalJson(nested(MAX_JSON_DEPTH))).toBe(
      JSON.stringify(nested(MAX_JSON_DEPTH)),
    );
    expect(boundedCanonicalJson(nested(MAX_JSON_DEPTH + 1))).toBeUndefined();
    expect(withinJsonDepth(nested(MAX_JSON_DEPTH))).toBe(true);
    expect(withinJsonDepth(nested(MAX_JSON_DEPTH + 1))).toBe(false);
  });

  it("answers for 100,000 levels and for a cycle without overflowing the stack", () => {
    expect(boundedCanonicalJson(nested(100_000))).toBeUndefined();
    expect(withinJsonDepth(nested(100_000))).toBe(false);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(boundedCanonicalJson(cycle)).toBeUndefined();
    expect(withinJsonDepth(cycle)).toBe(false);
  });

  it("counts every value against maxValues: at the bound it writes, one past it refuses", () => {
    // { a: [1, 2], b: { c: 3 } }: the object, the array, 1, 2, the inner object, 3: six values.
    const value = { a: [1, 2], b: { c: 3 } };
    expect(boundedCanonicalJson(value, 8, 6)).toBe('{"a":[1,2],"b":{"c":3}}');
    expect(boundedCanonicalJson(value, 8, 5)).toBeUndefined();
    // A toJSON value counts once, as what it writes.
    expect(boundedCanonicalJson({ at: new Date(0) }, 8, 2)).toBe(
      '{"at":"1970-01-01T00:00:00.000Z"}',
    );
    const wide = Array.from({ length: 10_000 }, (_, i) => i);
    expect(boundedCanonicalJson(wide, 8, 10_000)).toBeUndefined();
    expect(boundedCanonicalJson(wide, 8, 10_001)).toBe(JSON.stringify(wide));
  });

  it("scalars are within any depth", () => {
    expect(withinJsonDepth("text", 0)).toBe(true);
    expect(boundedCanonicalJson(undefined)).toBe("null");
  });
});
