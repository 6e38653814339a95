import type { A2uiSettleRequest } from "@tessera/core/http";
import { TesseraClientError } from "./errors.js";

/**
 * What a request is built from, checked before anything is sent: an ID a URL cannot carry and
 * a body JSON cannot write are the caller's to fix, so they are `invalid_input` after one
 * attempt, never retried as if the service were down.
 */

export interface RequestParts {
  readonly body?: unknown;
  /** Query values; `undefined` leaves one out. */
  readonly query?: Readonly<Record<string, unknown>>;
  /** Path parameters (`:grantId`): IDs, each one required. */
  readonly params?: Readonly<Record<string, unknown>>;
  /** The query fields that are IDs, and whether each must be given. */
  readonly queryIds?: Readonly<Record<string, "required" | "optional">>;
}

/**
 * The request's URL, or why its path and query cannot name what the caller asked for. Every
 * ID that goes in the URL (a path parameter, a query field in `queryIds`) is checked here, by
 * {@link urlIdProblem}, before anything is sent. The ID is never echoed.
 */
export function requestUrl(
  base: string,
  path: string,
  parts: RequestParts,
): { ok: true; url: string } | { ok: false; error: TesseraClientError } {
  const ids: Record<string, "required" | "optional"> = { ...parts.queryIds };
  for (const field of Object.keys(parts.params ?? {})) ids[field] = "required";
  const values: Record<string, unknown> = { ...parts.query, ...parts.params };
  for (const [field, need] of Object.entries(ids)) {
    const error = urlIdProblem(values[field], field, need === "required");
    if (error !== undefined) return { ok: false, error };
  }
  // Any other query value (`limit`) goes as `String(value)`, for the service to parse; a
  // lone surrogate in it would still be written as U+FFFD, so it is refused as in an ID.
  for (const [field, value] of Object.entries(parts.query ?? {})) {
    if (typeof value === "string" && !value.isWellFormed())
      return { ok: false, error: loneSurrogate(field) };
  }
  const filled = path.replace(/:(\w+)/g, (_, key: string) =>
    // Checked above: every path parameter is a string.
    encodeURIComponent(String(parts.params?.[key] ?? "")),
  );
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(parts.query ?? {})) {
    if (value !== undefined) query.set(key, String(value));
  }
  const search = query.size > 0 ? `?${query}` : "";
  return { ok: true, url: `${base}${filled}${search}` };
}

/**
 * Why an ID cannot go in a URL, or `undefined` when it can (an optional one may be left out).
 *
 * It must be a string. A JavaScript caller (or TypeScript through `any`) can pass anything, and
 * a URL holds only text: `revokeGrant(5)` asked to revoke the grant "5", `explain(null)` the
 * call "null", and `revokeGrant(undefined)` sent `DELETE /v1/grants/`, another route. The
 * Python client refuses such IDs too (`_sendable`), with the same code and field.
 *
 * It must be well-formed UTF-16. A lone surrogate (half of a pair) is not text:
 * `encodeURIComponent` throws on it and `URLSearchParams` writes it as U+FFFD, so
 * `explain("c-\ud800")` would ask about `c-\ufffd`, another call's verdict. The service
 * refuses such IDs; so does the client.
 */
function urlIdProblem(
  value: unknown,
  field: string,
  required: boolean,
): TesseraClientError | undefined {
  if (value === undefined && !required) return undefined;
  if (typeof value !== "string") {
    return new TesseraClientError(
      "invalid_input",
      `${field} must be a string, not ${typeName(value)}: a URL would carry another ID (or none), so nothing was sent`,
      { field },
    );
  }
  return value.isWellFormed() ? undefined : loneSurrogate(field);
}

function loneSurrogate(field: string): TesseraClientError {
  return new TesseraClientError(
    "invalid_input",
    `${field} holds a lone surrogate (half of a UTF-16 pair), which a URL cannot carry: it would name another ID, and the service refuses it, so nothing was sent`,
    { field },
  );
}

/** A value's type for a message (as Python's `type(value).__name__`), never the value. */
function typeName(value: unknown): string {
  if (value === null) return "null";
  return Array.isArray(value) ? "array" : typeof value;
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

/** A settle as the wire carries it: a `value` key holding `undefined` is the JSON `null`. */
export function settleBody(request: A2uiSettleRequest): A2uiSettleRequest {
  const fields = request as { readonly value?: unknown; readonly error?: unknown };
  return Object.hasOwn(request, "value") && fields.value === undefined && fields.error === undefined
    ? { ...request, value: null }
    : request;
}
