import { MAX_BEARER_CHARS } from "@tessera/core/http";
import { TesseraClientError } from "./errors.js";

/** The client's options checked when it is made: what it could not send is refused then. */

export function checkedBaseUrl(raw: string): string {
  let base: URL | undefined;
  try {
    base = new URL(raw);
  } catch {
    base = undefined;
  }
  if (base === undefined || (base.protocol !== "http:" && base.protocol !== "https:")) {
    throw new TesseraClientError(
      "invalid_config",
      "url must be an absolute http:// or https:// URL",
      { field: "url" },
    );
  }
  // A password in the URL would reach every error message that shows the URL, and fetch
  // refuses such a URL anyway: the principal is named by `token`, never by the URL.
  if (base.username !== "" || base.password !== "") {
    throw new TesseraClientError(
      "invalid_config",
      "url must not hold credentials (user:password@): name the principal with `token`",
      { field: "url" },
    );
  }
  // Routes are appended to the URL as text: a query or fragment would swallow them
  // (`http://host/?x=1` sent `GET /?x=1/v1/tools`).
  if (base.search !== "" || base.hash !== "" || raw.includes("?") || raw.includes("#")) {
    throw new TesseraClientError(
      "invalid_config",
      "url must not hold a query or a fragment: it is the service's base URL",
      { field: "url" },
    );
  }
  return base.href.replace(/\/+$/, "");
}

/**
 * What the service reads as a bearer token (`bearerToken`: no whitespace, at most
 * MAX_BEARER_CHARS) and a header can carry (no control characters, nothing above U+00FF). A
 * token pasted with its newline is the usual slip. The message never shows the token: it is a
 * secret.
 */
const SENDABLE_TOKEN = new RegExp(`^[\\x21-\\x7e\\xa1-\\xff]{1,${MAX_BEARER_CHARS}}$`);

export function checkedToken(token: string | undefined): string | undefined {
  if (token === undefined || SENDABLE_TOKEN.test(token)) return token;
  const why =
    token === ""
      ? "is empty"
      : token.length > MAX_BEARER_CHARS
        ? `is longer than ${MAX_BEARER_CHARS} characters`
        : "holds whitespace, a control character (a newline?) or a character a header cannot carry";
  throw new TesseraClientError("invalid_config", `token ${why}`, { field: "token" });
}

/** The largest delay `setTimeout` (and so `AbortSignal.timeout`) takes: 2^31 − 1 ms. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * Each attempt's deadline. Outside 1 … 2^31 − 1 whole ms, `AbortSignal.timeout` throws a
 * RangeError on every call (NaN, −1, Infinity, 2^40), or fires at once (0): refused here.
 */
export function checkedTimeoutMs(timeoutMs: number | undefined): number {
  if (timeoutMs === undefined) return 10_000;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS) {
    throw new TesseraClientError(
      "invalid_config",
      `timeoutMs must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`,
      { field: "timeoutMs" },
    );
  }
  return timeoutMs;
}

/** The default `maxResponseBytes`: 64 MiB, far above any answer a service gives. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/**
 * The most bytes of an answer's body the client reads. A service (or whatever answers in its
 * place) that streams a body without end would otherwise fill the host's memory until the
 * attempt's deadline: gigabytes on loopback.
 */
export function checkedMaxResponseBytes(maxResponseBytes: number | undefined): number {
  if (maxResponseBytes === undefined) return DEFAULT_MAX_RESPONSE_BYTES;
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes < 1) {
    throw new TesseraClientError(
      "invalid_config",
      `maxResponseBytes must be a whole number of bytes from 1 to ${Number.MAX_SAFE_INTEGER}`,
      { field: "maxResponseBytes" },
    );
  }
  return maxResponseBytes;
}
