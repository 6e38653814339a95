import { TesseraClientError } from "./errors.js";

/**
 * What a request is built from, checked before anything is sent: an ID a URL cannot carry and
 * a body JSON cannot write are the caller's to fix, so they are `invalid_input` after one
 * attempt, never retried as if the service were down.
 */

export interface RequestParts {
  readonly body?: unknown;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly params?: Readonly<Record<string, string>>;
}

/**
 * The request's URL, or why its path and query cannot name what the caller asked for. A lone
 * surrogate (half of a UTF-16 pair) is not text: `encodeURIComponent` throws on it and
 * `URLSearchParams` writes it as U+FFFD, so `explain("c-\ud800")` would ask about `c-\ufffd`,
 * another call's verdict. The service refuses such IDs; so does the client, for every path
 * parameter and query value (grant, call and trace IDs alike). The ID is never echoed.
 */
export function requestUrl(
  base: string,
  path: string,
  parts: RequestParts,
): { ok: true; url: string } | { ok: false; error: TesseraClientError } {
  const fields = { ...parts.params, ...parts.query };
  for (const [field, value] of Object.entries(fields)) {
    if (typeof value === "string" && !value.isWellFormed()) {
      return {
        ok: false,
        error: new TesseraClientError(
          "invalid_input",
          `${field} holds a lone surrogate (half of a UTF-16 pair), which a URL cannot carry: it would name another ID, and the service refuses it, so nothing was sent`,
          { field },
        ),
      };
    }
  }
  const filled = path.replace(/:(\w+)/g, (_, key: string) =>
    encodeURIComponent(parts.params?.[key] ?? ""),
  );
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(parts.query ?? {})) {
    if (value !== undefined) query.set(key, String(value));
  }
  const search = query.size > 0 ? `?${query}` : "";
  return { ok: true, url: `${base}${filled}${search}` };
}

/**
 * The body as JSON, written once for every attempt, or why it cannot be. `JSON.stringify`
 * throws a TypeError (a BigInt, a cycle), a RangeError (a payload nested deeper than the
 * stack) or whatever a `toJSON` throws; none of these is a network failure, and the same body
 * would fail the same way on every retry. The engine's own messages name no values, so they
 * are shown; a `toJSON`'s own error is the caller's and stays in `cause`.
 */
export function requestBody(
  label: string,
  body: unknown,
): { ok: true; text: string | undefined } | { ok: false; error: TesseraClientError } {
  if (body === undefined) return { ok: true, text: undefined };
  let text: string | undefined;
  try {
    text = JSON.stringify(body);
  } catch (error) {
    const why =
      error instanceof TypeError || error instanceof RangeError
        ? error.message
        : `${error instanceof Error ? error.name : "a value"} thrown by a toJSON (see cause)`;
    return {
      ok: false,
      error: new TesseraClientError(
        "invalid_input",
        `${label} could not be sent: its body cannot be written as JSON (${why})`,
        { cause: error },
      ),
    };
  }
  if (text === undefined) {
    return {
      ok: false,
      error: new TesseraClientError(
        "invalid_input",
        `${label} could not be sent: its body is written as no JSON at all (a toJSON that returns undefined?)`,
      ),
    };
  }
  return { ok: true, text };
}
