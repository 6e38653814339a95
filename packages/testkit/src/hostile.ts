/**
 * Keys a store must keep apart and hand back byte for byte. Each one has broken a real
 * store somewhere: path traversal into a directory store, NUL truncating a C string,
 * quotes and SQL fragments reaching a query that was built by concatenation, multi-byte
 * characters counted as bytes, and separators making two different pairs collide.
 */
export const HOSTILE_KEYS: readonly string[] = [
  "../../../etc/passwd",
  "..\\..\\windows",
  "a\u0000b",
  "\u0000",
  "'; drop table claims; --",
  "\"quoted\" 'single' `back`",
  "Robert'); DELETE FROM grants;--",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal placeholder is the point
  "%s%n%x {{template}} ${dollar}",
  "ünïcödé ключ 鍵 🔑",
  "\u202eright-to-left",
  "line\nbreak\r\ttab",
  " leading and trailing ",
  "*",
  "?",
  "key:with:colons",
];

/** Two pairs that collide if a store joins them with ":" or "/" without escaping. */
export const COLLIDING_PAIRS: readonly (readonly [string, string])[] = [
  ["a", "b:c"],
  ["a:b", "c"],
  ["a/b", "c"],
  ["a", "b/c"],
];

/** One mebibyte of text: an oversize key or payload. */
export function oversize(seed = "x"): string {
  return seed.repeat(Math.ceil((1024 * 1024) / seed.length)).slice(0, 1024 * 1024);
}
