import { createHash } from "node:crypto";
import { hostname } from "node:os";
import type { ClaimKey, ClaimStore } from "@tessera/core";
import { boundedCanonicalJson, MAX_JSON_DEPTH, WriteWindow } from "@tessera/core/store-kit";
import { HttpProblem } from "./errors.js";

/** Who claimed, for an operator reading an in-doubt call. */
const WORKER = `${hostname()}:${process.pid}`;

/** The claim-store session of a principal's retry-safe calls. */
export function retrySession(principal: string): string {
  return `tessera.service:${principal}`;
}

/** How the first request of a call ID ended, for its claim's receipt and the metrics. */
export type Settled = "dispatched" | "denied" | "failed";

export interface RetryOptions {
  /** How long a retry waits for the first request of its call ID to answer. */
  readonly waitMs: number;
  /** The answers this service is still writing after their replies. */
  readonly writes: AnswerWrites;
}

/** How long answers written after their replies wait for others to share a commit with. */
const WINDOW_MS = 10;
const MAX_WAITING = 256;

/**
 * Answers written after their reply, by claim: a retry reaching this same service meanwhile
 * waits for the write instead of polling, and closing the service waits for all of them, so
 * the host closes its stores only once every answer has landed.
 */
export class AnswerWrites {
  readonly #pending = new Map<string, Promise<void>>();
  /**
   * Answers whose replies are out wait here for others (up to 10 ms, or 256 of them), then
   * start in one tick: the store writes their claims in one statement and their settles in
   * another (one commit each), instead of two statements per answer. Starting only after the
   * window also keeps a synchronous driver (better-sqlite3) from committing, fsync included,
   * before the caller's reply was written to its socket.
   */
  readonly #window: WriteWindow;

  constructor(windowMs = WINDOW_MS, maxWaiting = MAX_WAITING) {
    this.#window = new WriteWindow(windowMs, maxWaiting);
  }

  later(id: string, write: () => Promise<void>): void {
    const written: Promise<void> = this.#window
      .join()
      .then(write)
      .catch(() => undefined)
      .finally(() => {
        if (this.#pending.get(id) === written) this.#pending.delete(id);
      });
    this.#pending.set(id, written);
  }

  /** The pending write of `id`, started now: a retry waiting on it has no reason to wait for the window too. */
  wait(id: string): Promise<void> | undefined {
    const pending = this.#pending.get(id);
    if (pending !== undefined) this.#window.release();
    return pending;
  }

  async drain(): Promise<void> {
    while (this.#pending.size > 0) {
      this.#window.release();
      await Promise.all(this.#pending.values());
    }
  }
}

/**
 * Safe retries: (principal, call ID) is claimed in the shared claim store *before* the kernel
 * decides, so of every request carrying it exactly one decides, spends and delivers. The answer
 * is then stored under a second key of the same store, in the record's free-form `worker`
 * field (the port's only field that holds data), and both claims are settled. A later request
 * with the same body reads that answer back; with another body it is a conflict.
 *
 * Only the claim has to be durable before deciding (the kernel's spend and audit event are
 * durable before it answers): the answer and the receipts are written after the reply, so the
 * caller waits for the claim, the spend and the audit event, never for the answer's own
 * commit (see `AnswerWrites`). A crash between the claim and the answer —
 * before or just after the reply — leaves the call in doubt (listed by the store's
 * `listInDoubt`): it is never decided again, and retries answer `call_in_progress`.
 */
export async function once<A>(
  claims: ClaimStore,
  principal: string,
  callId: string,
  body: unknown,
  decide: () => Promise<{ answer: A; settled: Settled }>,
  options: RetryOptions,
): Promise<{ answer: A; replayed: boolean; settled?: Settled }> {
  const key: ClaimKey = { session: retrySession(principal), functionCallId: callId };
  const answerKey: ClaimKey = {
    session: `tessera.service.answer:${principal}`,
    functionCallId: callId,
  };
  const bodyHash = digest(body);
  if (bodyHash === undefined) {
    // Nested past MAX_JSON_DEPTH: no hash, so no claim. Nothing is at stake in deciding it
    // unclaimed: the only unbounded field of a retry-safe body is a message payload, and the
    // kernel refuses one that deep (`invalid_request`, its one audit event) before it spends
    // or delivers anything, so a retry meets the same refusal and nothing runs twice.
    return { ...(await decide()), replayed: false };
  }
  const claimed = await claims.claim(key, { bodyHash, claimedAt: Date.now(), worker: WORKER });
  if (claimed.status === "already_claimed") {
    if (claimed.existing.bodyHash !== bodyHash) {
      throw new HttpProblem(
        "call_id_conflict",
        "this call ID was used before with a different body: use a new call ID",
        "callId",
      );
    }
    await options.writes.wait(pendingId(key));
    return { answer: await recorded<A>(claims, answerKey, options.waitMs), replayed: true };
  }
  const { answer, settled } = await decide();
  // The answer's claim first, the settles after it: a key settled while its answer is still
  // missing would no longer read in doubt, yet its retries could never be answered.
  options.writes.later(pendingId(key), async () => {
    await claims.claim(answerKey, {
      bodyHash,
      claimedAt: Date.now(),
      worker: JSON.stringify({ answer }),
    });
    const receipt = { status: settled, settledAt: Date.now() } as const;
    await Promise.all([claims.settle(answerKey, receipt), claims.settle(key, receipt)]);
  });
  return { answer, replayed: false, settled };
}

function pendingId(key: ClaimKey): string {
  return `${key.session}\u0000${key.functionCallId}`;
}

/** The first request's answer, waiting a little while it is still being decided. */
async function recorded<A>(claims: ClaimStore, key: ClaimKey, waitMs: number): Promise<A> {
  const until = Date.now() + waitMs;
  for (let pause = 10; ; pause = Math.min(pause * 2, 200)) {
    const stored = await claims.get(key);
    if (stored?.worker !== undefined) return (JSON.parse(stored.worker) as { answer: A }).answer;
    if (Date.now() >= until) break;
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
  throw new HttpProblem(
    "call_in_progress",
    "the first request with this call ID has not answered yet (or its server stopped mid-way): retry later",
    "callId",
  );
}

/**
 * SHA-256 of the body as canonical JSON (keys sorted): key order does not make a new body.
 * Undefined for a body nested past MAX_JSON_DEPTH, which is not walked further (a recursive
 * walk of ten thousand levels overflowed the stack: a 500).
 */
export function digest(value: unknown): string | undefined {
  // Two levels over the kernel's bound: a message payload sits at { route, body: { payload } },
  // and every payload the kernel would deliver must be claimed (hashed) first.
  const text = boundedCanonicalJson(value, MAX_JSON_DEPTH + 2);
  return text === undefined ? undefined : createHash("sha256").update(text).digest("hex");
}
