import { type Html, html } from "./html.js";
import type { Verdict } from "./verdicts.js";

const WORDS = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"];

/** "Two" for the headline; digits past nine. */
export const inWords = (n: number): string => WORDS[n] ?? n.toLocaleString("en-US");

export const plural = (n: number, word: string): string => (n === 1 ? word : `${word}s`);

/**
 * Text that may wrap after each underscore: `INVALID_FUNCTION_CALL` in a phone-wide cell
 * breaks between words, not mid-word. `<wbr>` adds no text, so the DOM reads the same.
 */
export function breakable(text: string): Html {
  return html`${text.split(/(?<=_)/).map((part, i) => (i === 0 ? part : html`<wbr>${part}`))}`;
}

/** A measured figure, marked with the path of its value in the run's JSON (`--json`). */
export function figure(path: string, value: number | boolean | string): Html {
  return html`<span class="figure" data-field="${path}">${breakable(String(value))}</span>`;
}

/** A measured list, comma-separated, marked as `figure` is. */
export function figureList(path: string, values: readonly string[]): Html {
  return html`<span class="figure" data-field="${path}" data-list="">${breakable(values.join(", "))}</span>`;
}

/**
 * A case's or scene's verdict: in words and a symbol as well as colour, so it reads in
 * grey print and to a screen reader; a failure lists each field the run got wrong.
 */
export function verdictNote(verdict: Verdict): Html {
  if (verdict.ok) {
    return html`<p class="verdict ok" data-verdict="pass"><span aria-hidden="true">✓</span> As expected: the measured verdict matches the expected one.</p>`;
  }
  return html`<div class="verdict fail" data-verdict="fail">
<p><strong><span aria-hidden="true">✗</span> FAILED: the measured verdict differs from the expected one.</strong></p>
<ul>${verdict.differences.map(
    (d) =>
      html`<li><code>${d.field}</code>: measured <code>${breakable(d.measured)}</code>, expected <code>${breakable(d.expected)}</code></li>`,
  )}</ul>
</div>`;
}
