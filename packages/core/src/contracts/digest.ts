import * as crypto from "node:crypto";

/**
 * SHA-256 hex over length-prefixed parts: no two different tuples can collide by
 * concatenation, and the result is a fixed-size, inert key.
 */
export function storageDigest(...parts: readonly string[]): string {
  const preimage = preimageOf(parts);
  const cached = recent.get(preimage);
  if (cached !== undefined) return cached;
  const hex = sha256Hex(Buffer.from(preimage, "utf16le"));
  if (preimage.length <= CACHEABLE_LENGTH) {
    // Namespaces, grants and sessions repeat on every decision: remember the last few
    // thousand digests instead of hashing again. Cleared wholesale when full (bounded memory).
    if (recent.size >= CACHE_ENTRIES) recent.clear();
    recent.set(preimage, hex);
  }
  return hex;
}

/**
 * The same digest as `storageDigest`, for parts that never repeat (a call ID, a claim key):
 * caching those would only churn the cache and keep dead strings alive.
 */
export function uniqueStorageDigest(...parts: readonly string[]): string {
  return sha256Hex(Buffer.from(preimageOf(parts), "utf16le"));
}

// Lengths in UTF-16 units keep the tuple unambiguous, and hashing the UTF-16 code units
// (not UTF-8) keeps lone surrogates apart: UTF-8 would turn them all into U+FFFD.
function preimageOf(parts: readonly string[]): string {
  let preimage = "";
  for (const part of parts) preimage += `${part.length}:${part}`;
  return preimage;
}

const CACHE_ENTRIES = 4096;
const CACHEABLE_LENGTH = 512;
const recent = new Map<string, string>();

/**
 * One-shot `crypto.hash` (Node 20.12+) is about twice as fast as a Hash object on inputs
 * this small, and a claim hashes a fresh call ID every time; older Node 20 falls back.
 */
const sha256Hex: (data: Buffer) => string =
  typeof crypto.hash === "function"
    ? (data) => crypto.hash("sha256", data, "hex")
    : (data) => crypto.createHash("sha256").update(data).digest("hex");
