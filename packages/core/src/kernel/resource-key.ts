/**
 * Injective string keys for resources, so the index can look a resource up in a Map instead of
 * comparing paths grant by grant. Every part is length-prefixed: no segment content (slashes,
 * colons, anything) can make two different paths share a key, and segments compare whole —
 * `cell-3` and `cell-30` have different keys, and neither is a prefix of the other's.
 */

/** Marks a capability that names no owner: it covers the resource whoever owns it. */
const ANY_OWNER = "*";

export function ownerPart(owner: string | undefined): string {
  return owner === undefined ? ANY_OWNER : `o${owner.length}:${owner}`;
}

/** Key of `namespace` + owner part + the first `length` segments of `path`. */
export function resourceKey(
  namespace: string,
  owner: string,
  path: readonly string[],
  length: number = path.length,
): string {
  let key = `${namespace.length}:${namespace}|${owner}|`;
  for (let i = 0; i < length; i++) {
    const segment = path[i] as string;
    key += `${segment.length}:${segment}/`;
  }
  return key;
}

/** Human form for audit: `namespace:/seg/seg`. Segments are redacted by the caller if needed. */
export function resourceLabel(namespace: string, path: readonly string[]): string {
  return `${namespace}:/${path.join("/")}`;
}
