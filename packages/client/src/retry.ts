import { TesseraClientError } from "./errors.js";

/** How a retry-safe call is tried again. */
export interface RetryPolicy {
  /** Attempts in all, the first included (default 3; 1 turns retries off). */
  readonly attempts?: number;
  /** The first backoff's ceiling in ms (default 100); each later one doubles it. */
  readonly baseDelayMs?: number;
  /** No backoff is longer than this, `Retry-After` included (default 2000). */
  readonly maxDelayMs?: number;
}

export interface ResolvedRetry {
  readonly attempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

/** The longest delay a timer takes (setTimeout fires at once past it). */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** The policy with its defaults, checked when the client is made: `invalid_config` otherwise. */
export function resolveRetry(policy: RetryPolicy | undefined): ResolvedRetry {
  const attempts = policy?.attempts ?? 3;
  const baseDelayMs = policy?.baseDelayMs ?? 100;
  const maxDelayMs = policy?.maxDelayMs ?? 2000;
  for (const [name, value] of Object.entries({ attempts, baseDelayMs, maxDelayMs })) {
    const least = name === "attempts" ? 1 : 0;
    if (typeof value !== "number" || !(value >= least && value <= MAX_DELAY_MS)) {
      throw new TesseraClientError(
        "invalid_config",
        `retry.${name} must be a number from ${least} to ${MAX_DELAY_MS}`,
        { field: `retry.${name}` },
      );
    }
  }
  return { attempts: Math.floor(attempts), baseDelayMs, maxDelayMs };
}

/**
 * Full-jitter exponential backoff (a random wait up to base·2^n): clients that failed together
 * do not come back together. A `Retry-After` from the service is honoured up to the cap.
 */
export function backoffMs(
  policy: ResolvedRetry,
  retry: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  // 2 ** retry is Infinity from the 1024th retry on (attempts go up to 2^31 − 1): the cap then
  // holds, but 0 · Infinity is NaN, so a base of 0 stays 0 without it.
  const grown = policy.baseDelayMs === 0 ? 0 : policy.baseDelayMs * 2 ** retry;
  const ceiling = Math.min(policy.maxDelayMs, grown);
  const jittered = Math.floor(random() * ceiling);
  return retryAfterMs === undefined
    ? jittered
    : Math.min(policy.maxDelayMs, Math.max(jittered, retryAfterMs));
}

/** `Retry-After` as seconds or an HTTP date, in ms from now; undefined when absent or unreadable. */
export function parseRetryAfter(header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** HTTP statuses that say "not now" rather than "no": the same request may succeed later. */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
