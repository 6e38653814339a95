import { UNPRINTABLE_CLASS } from "./printable.js";

/**
 * Which strings may be one segment of a resource path, for grants and requests alike.
 *
 * The kernel compares segments whole and never resolves them, but the host that acts on an
 * authorized path may: a descendants grant on `Workspace/project-x` must not reach
 * `Workspace/project-x/../project-y` because a file system later folds the `..` away. So
 * segments that a host could resolve (`.`, `..`), split (`/`, `\`) or print as something else
 * (C0 and C1 controls, DEL, line and paragraph separators, bidi embeddings, overrides, isolates
 * and marks) are refused outright rather than interpreted.
 */

const UNSAFE_CHARACTER = new RegExp(`[${UNPRINTABLE_CLASS}/\\\\]`);

/**
 * True for a non-empty segment a host cannot resolve, split or misprint (length is checked
 * apart), and that is well-formed text: no lone surrogate, which UTF-8 cannot hold.
 */
export function isSafeSegment(segment: string): boolean {
  return (
    segment !== "" &&
    segment !== "." &&
    segment !== ".." &&
    !UNSAFE_CHARACTER.test(segment) &&
    segment.isWellFormed()
  );
}

/**
 * What a label part must encode: `%` (so encoding is reversible), the label's separators `:`
 * and `/`, and everything a segment may not contain (namespaces are IDs, not segments, and may).
 * One character class, not an alternation: this runs on every decision.
 */
const LABEL_ESCAPED_CLASS = `[%:${UNSAFE_CHARACTER.source.slice(1, -1)}]`;
const NEEDS_ESCAPE = new RegExp(LABEL_ESCAPED_CLASS);
const LABEL_ESCAPED = new RegExp(LABEL_ESCAPED_CLASS, "g");
const utf8 = new TextEncoder();

function percentEncode(character: string): string {
  let encoded = "";
  for (const byte of utf8.encode(character)) {
    encoded += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return encoded;
}

/** One part of an audit label, percent-encoded where it could be mistaken for structure. */
export function encodeLabelPart(part: string): string {
  // Most parts need nothing: test first so the common case builds no new string.
  return NEEDS_ESCAPE.test(part) ? part.replace(LABEL_ESCAPED, percentEncode) : part;
}
