/**
 * Characters that print as something other than themselves or act on whatever shows them: C0
 * and C1 controls (U+009B is a terminal's CSI), DEL, the line and paragraph separators, and the
 * bidi marks, embeddings, overrides and isolates (which can make one ID read as another).
 * A regular-expression class body, shared by the rules that refuse them.
 */
export const UNPRINTABLE_CLASS =
  "\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069";

const UNPRINTABLE = new RegExp(`[${UNPRINTABLE_CLASS}]`);

/**
 * True when `value` holds no such character and no lone surrogate: it shows as what it is, on
 * one line. A lone surrogate is not text: UTF-8 (a SQLite column, a Redis key, a log line)
 * turns every one into U+FFFD, so two IDs differing only there would become one.
 */
export function isPrintable(value: string): boolean {
  return !UNPRINTABLE.test(value) && value.isWellFormed();
}
