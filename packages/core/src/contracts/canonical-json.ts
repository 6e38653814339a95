/**
 * How deep a JSON value a decision accepts: objects and arrays nested more than this are
 * `invalid_request` (the kernel's message payload, the service's retry-safe bodies, the MCP
 * gateway's tool arguments), as they are `VALIDATION_FAILED` in the A2UI gate. The walks that
 * hash or serialize such a value recurse once per level, and a few thousand levels — ten
 * kilobytes of brackets, far under any size limit — overflow the stack: the bound is checked
 * first, by a walk whose own recursion it bounds.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * JSON with every object's keys sorted (key order does not make a different value), or
 * `undefined` when objects and arrays nest deeper than `maxDepth` or the walk meets more than
 * `maxValues` values (every value counts: objects, arrays and what they hold): a cycle ends
 * there too, so this never overflows the stack and never loops. Object members whose value is
 * `undefined` are left out and other non-JSON values written as `JSON.stringify` writes them
 * (`undefined` alone, or in an array, as `null`). Written out by hand: it runs on every
 * retry-safe call, A2UI call and MCP tool call.
 */
export function boundedCanonicalJson(
  value: unknown,
  maxDepth: number = MAX_JSON_DEPTH,
  maxValues: number = Number.POSITIVE_INFINITY,
): string | undefined {
  return canonical(value, maxDepth, { left: maxValues });
}

function canonical(value: unknown, depth: number, budget: { left: number }): string | undefined {
  if (--budget.left < 0) return undefined;
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (depth === 0) return undefined;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") {
    // A Date, say: its JSON is what a transport would send.
    budget.left++;
    return canonical((value as { toJSON: () => unknown }).toJSON(), depth, budget);
  }
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      const item = canonical(value[i], depth - 1, budget);
      if (item === undefined) return undefined;
      out += (i === 0 ? "" : ",") + item;
    }
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length > 1) keys.sort();
  let out = "{";
  let first = true;
  for (const key of keys) {
    const item = record[key];
    if (item === undefined) continue;
    const text = canonical(item, depth - 1, budget);
    if (text === undefined) return undefined;
    out += `${first ? "" : ","}${JSON.stringify(key)}:${text}`;
    first = false;
  }
  return `${out}}`;
}

/**
 * Do objects and arrays in `value` nest at most `maxDepth` deep? Bounded like the walk above,
 * and cheap on the common case: a string or number answers at once.
 */
export function withinJsonDepth(value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== "object") return true;
  if (maxDepth === 0) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (!withinJsonDepth(item, maxDepth - 1)) return false;
    return true;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (!withinJsonDepth((value as Record<string, unknown>)[key], maxDepth - 1)) return false;
  }
  return true;
}
