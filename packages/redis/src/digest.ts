import { createHash } from "node:crypto";

/**
 * SHA-256 hex over length-prefixed parts, the same construction as `claimKeyDigest`: no two
 * different tuples can collide by concatenation, and the result is a fixed-size, inert key.
 */
export function digest(...parts: readonly string[]): string {
  const hash = createHash("sha256");
  for (const part of parts) {
    hash.update(`${Buffer.byteLength(part)}:`);
    hash.update(part);
  }
  return hash.digest("hex");
}
