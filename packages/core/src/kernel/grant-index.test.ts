import { describe, expect, it } from "vitest";
import { cap, ctx, grant } from "../../test/fixtures.js";
import { type Grant, GrantSchema } from "../contracts/schemas.js";
import { buildGrantIndex, coveringBuckets } from "./grant-index.js";

/**
 * The trie keeps a path only exact grants name as a bare bucket until something else reaches
 * it. Whatever order grants arrive in, a path is covered by exactly the grants naming it
 * exactly and the descendants grants naming a prefix of it.
 */

const parse = (g: ReturnType<typeof grant>): Grant => GrantSchema.parse(g);

const exactA = parse(grant({ id: "exact-a", capabilities: [cap(["a"])] }));
const exactA2 = parse(grant({ id: "exact-a-2", capabilities: [cap(["a"])] }));
const underA = parse(
  grant({ id: "under-a", capabilities: [cap(["a"], { scope: "descendants" })] }),
);
const exactAB = parse(grant({ id: "exact-a-b", capabilities: [cap(["a", "b"])] }));
const exactRoot = parse(grant({ id: "exact-root", capabilities: [cap([])] }));

function covering(grants: Grant[], path: string[]): string[] {
  const entry = buildGrantIndex(grants, ctx()).get("files.read");
  if (entry === undefined) return [];
  return coveringBuckets(entry, "files", path)
    .flat()
    .map((g) => g.id)
    .sort();
}

function orders<T>(items: T[]): T[][] {
  if (items.length <= 1) return [items];
  return items.flatMap((item, i) =>
    orders([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

describe("grant index leaves", () => {
  it("covers each path with the same grants whatever order they were indexed in", () => {
    for (const grants of orders([exactA, exactA2, underA, exactAB, exactRoot])) {
      expect(covering(grants, [])).toEqual(["exact-root"]);
      expect(covering(grants, ["a"])).toEqual(["exact-a", "exact-a-2", "under-a"]);
      expect(covering(grants, ["a", "b"])).toEqual(["exact-a-b", "under-a"]);
      expect(covering(grants, ["a", "b", "c"])).toEqual(["under-a"]);
      expect(covering(grants, ["b"])).toEqual([]);
    }
  });

  it("never lets a leaf bucket cover a longer path", () => {
    expect(covering([exactA], ["a", "b"])).toEqual([]);
    expect(covering([exactA, exactA2], ["a"])).toEqual(["exact-a", "exact-a-2"]);
    expect(covering([exactAB], ["a"])).toEqual([]);
  });
});
