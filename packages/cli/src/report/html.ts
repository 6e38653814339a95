/**
 * A tagged template that escapes every interpolated value, so nothing a run or a benchmark
 * file carries (a recipient name, a store URL, a benchmark label) can become markup. The
 * page has no framework: each section is a function returning `Html`.
 *
 * Attribute values must be written quoted (`class="${x}"`): escaping quotes is what keeps a
 * value inside its attribute.
 */

const brand = Symbol("html");

export interface Html {
  readonly [brand]: true;
  readonly text: string;
}

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => ENTITIES[char] as string);
}

function isHtml(value: unknown): value is Html {
  return typeof value === "object" && value !== null && brand in value;
}

/** Markup this module trusts as written: only for constants of the page itself (the stylesheet). */
export function trusted(text: string): Html {
  return { [brand]: true, text };
}

/** One interpolated value: markup from `html` as is, arrays item by item, text escaped. */
function render(value: unknown): string {
  if (isHtml(value)) return value.text;
  if (Array.isArray(value)) return value.map(render).join("");
  if (value === undefined || value === null || value === false) return "";
  if (typeof value === "string") return escapeHtml(value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") {
    return escapeHtml(String(value));
  }
  // An object would print as "[object Object]": a slip in a template, never wanted output.
  throw new TypeError(`html: cannot interpolate a ${typeof value}`);
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let text = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) text += render(values[i]) + (strings[i + 1] ?? "");
  return trusted(text);
}
