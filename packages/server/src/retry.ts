import { createHash } from "node:crypto";
import { hostname } from "node:os";
import {
  type ActOptions,
  type AlreadyClaimed,
  type ClaimKey,
  type ClaimStore,
  isTesseraError,
  type JsonValue,
  type StoredClaim,
} from "@tessera/core";
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
/** A failed answer write is tried again after this pause, doubling up to the next. */
const FIRST_PAUSE_MS = 50;
const MAX_PAUSE_MS = 2_000;
/** How long closing waits for answers the store keeps refusing before it gives them up. */
const CLOSE_WAIT_MS = 5_000;

export interface AnswerWritesOptions {
  readonly windowMs?: number;
  readonly maxWaiting?: number;
  /** Called for each failed attempt to write an answer (the service counts them). */
  readonly onFailure?: (error: unknown) => void;
  /**
   * Called with the ID of an answer handed over after `close` (a request the drain cut off
   * whose handler finished later) that could not be written: `close` has returned the others,
   * so this is the only word of it. Its call stays in doubt.
   */
  readonly onAbandoned?: (id: string) => void;
}

/** One answer being written: who waits for its next attempt to end. */
interface Pending {
  /** Cuts the pause before the next attempt short (set while it waits). */
  wake: (() => void) | undefined;
  readonly attempted: (() => void)[];
}

/**
 * Answers written after their reply, by claim: a retry reaching this same service meanwhile
 * waits for the write instead of polling, and closing the service waits for them, so the host
 * closes its stores once every answer has landed.
 *
 * An answer the store refuses while it is down is tried again (50 ms, doubling to 2 s) until
 * it lands or the service closes: dropped, it would leave its call in doubt for good (every
 * retry `call_in_progress`) although it ran and has an answer. `drain` gives every pending
 * answer one attempt now and waits for it, never for a store that stays down; `close` drains
 * until all landed or 5 s passed, then stops and returns the calls whose answers were not
 * written (they stay in doubt, listed by the claim store's `listInDoubt`).
 */
export class AnswerWrites {
  readonly #pending = new Map<string, Pending>();
  readonly #onFailure: ((error: unknown) => void) | undefined;
  readonly #onAbandoned: ((id: string) => void) | undefined;
  #closed = false;
  /**
   * Answers whose replies are out wait here for others (up to 10 ms, or 256 of them), then
   * start in one tick: the store writes their settles (receipt and answer) in one statement
   * (one commit), instead of one per answer. Starting only after the
   * window also keeps a synchronous driver (better-sqlite3) from committing, fsync included,
   * before the caller's reply was written to its socket.
   */
  readonly #window: WriteWindow;

  constructor(options: AnswerWritesOptions = {}) {
    this.#window = new WriteWindow(
      options.windowMs ?? WINDOW_MS,
      options.maxWaiting ?? MAX_WAITING,
    );
    this.#onFailure = options.onFailure;
    this.#onAbandoned = options.onAbandoned;
  }

  /** Answers not written yet (waiting for the window, being written, or waiting to try again). */
  get size(): number {
    return this.#pending.size;
  }

  later(id: string, write: () => Promise<void>): void {
    const pending: Pending = { wake: undefined, attempted: [] };
    this.#pending.set(id, pending);
    const afterClose = this.#closed;
    void this.#window
      .join()
      .then(() => this.#land(pending, write))
      .then((landed) => {
        if (!landed && afterClose) this.#onAbandoned?.(id);
      })
      .finally(() => {
        if (this.#pending.get(id) === pending) this.#pending.delete(id);
        ended(pending);
      });
  }

  /**
   * The next attempt of `id`'s pending write, started now (no window, no pause): a retry
   * waiting on it reads the claim once it ended, landed or not, and never waits out a store
   * that stays down.
   */
  wait(id: string): Promise<void> | undefined {
    const pending = this.#pending.get(id);
    if (pending === undefined) return undefined;
    return this.#nextAttempt(pending);
  }

  /** Gives every pending answer one attempt now and waits for those attempts (see the class). */
  async drain(): Promise<void> {
    await Promise.all([...this.#pending.values()].map((pending) => this.#nextAttempt(pending)));
  }

  /**
   * Drains until every answer landed or `waitMs` passed, then stops trying: the calls whose
   * answers were not written are returned (their claims stay in doubt).
   */
  async close(waitMs = CLOSE_WAIT_MS): Promise<string[]> {
    const until = Date.now() + waitMs;
    while (this.#pending.size > 0 && Date.now() < until) {
      const round = this.drain();
      const timer = new Promise<void>((resolve) => setTimeout(resolve, 50).unref());
      // At least a short pause per round, so a store refusing at once is not spun against.
      await Promise.all([round, timer]);
    }
    const unwritten = [...this.#pending.keys()];
    this.#closed = true;
    for (const pending of this.#pending.values()) pending.wake?.();
    return unwritten;
  }

  #nextAttempt(pending: Pending): Promise<void> {
    const attempt = new Promise<void>((resolve) => pending.attempted.push(resolve));
    this.#window.release();
    pending.wake?.();
    return attempt;
  }

  /** Writes until it lands (true), the write is refused for good, or this is closed. */
  async #land(pending: Pending, write: () => Promise<void>): Promise<boolean> {
    for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_PAUSE_MS)) {
      try {
        await write();
        return true;
      } catch (error) {
        this.#onFailure?.(error);
        // A refusal on the store's own terms (a claim that is not there) will not change.
        if (isTesseraError(error) && !error.code.endsWith("_unavailable")) return false;
      }
      ended(pending);
      if (this.#closed) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(wake, pause);
        timer.unref();
        function wake(): void {
          clearTimeout(timer);
          pending.wake = undefined;
          resolve();
        }
        pending.wake = wake;
      });
      if (this.#closed) return false;
    }
  }
}

/** Tells whoever waits for this answer's next attempt that it ended. */
function ended(pending: Pending): void {
  for (const resolve of pending.attempted.splice(0)) resolve();
}

/** The claim a retry-safe call gives its decision, recorded in the same act. */
export type CallClaim = NonNullable<ActOptions["claim"]>;

/** A decision made with (or, past the depth bound, without) its call's claim. */
export type Decide<A> = (
  claim: CallClaim | undefined,
) => Promise<{ answer: A; settled: Settled } | AlreadyClaimed>;

/**
 * Safe retries: (principal, call ID) is claimed in the same act as the decision (the kernel's
 * act ledger: claim, spend and audit event in one transaction), so of every request carrying
 * it exactly one decides, spends and delivers, and the caller waits for one durable write. A
 * denial's claim is settled in that same write with the refusal as its answer; an allowed
 * act's answer (and receipt) is written into its claim after the reply (see `AnswerWrites`),
 * a field of its own. A later request with the same body reads that answer back; with another
 * body it is a conflict.
 *
 * A crash between the act and its answer leaves the call in doubt (listed by the store's
 * `listInDoubt`): it is never decided again, and retries answer `call_in_progress`. An act
 * whose store reply was lost (the caller got a 503, nothing ran) is withdrawn by the kernel in
 * the background: retries then read its answer, an `authority_unavailable` denial.
 */
export async function once<A>(
  claims: ClaimStore,
  principal: string,
  callId: string,
  body: unknown,
  decide: Decide<A>,
  options: RetryOptions,
): Promise<{ answer: A; replayed: boolean; settled?: Settled }> {
  const key: ClaimKey = { session: retrySession(principal), functionCallId: callId };
  const bodyHash = digest(body);
  if (bodyHash === undefined) {
    // Nested past MAX_JSON_DEPTH: no hash, so no claim. Nothing is at stake in deciding it
    // unclaimed: the only unbounded field of a retry-safe body is a message payload, and the
    // kernel refuses one that deep (`invalid_request`, its one audit event) before it spends
    // or delivers anything, so a retry meets the same refusal and nothing runs twice.
    const decided = await decide(undefined);
    if ("existing" in decided) throw new Error("a decision without a claim collided");
    return Object.assign({}, decided, { replayed: false });
  }
  const decided = await decide({
    key,
    record: { bodyHash, claimedAt: Date.now(), worker: WORKER },
  });
  if ("existing" in decided) {
    if (decided.existing.bodyHash !== bodyHash) {
      throw new HttpProblem(
        "call_id_conflict",
        "this call ID was used before with a different body: use a new call ID",
        "callId",
      );
    }
    // An answer this service is still writing: wait for it, then read the claim it settled.
    const pending = options.writes.wait(pendingId(key));
    let existing = decided.existing;
    if (pending !== undefined) {
      await pending;
      existing = (await claims.get(key)) ?? existing;
    }
    const answer = await recorded<A>(claims, key, principal, existing, options.waitMs);
    return { answer, replayed: true };
  }
  const { answer, settled } = decided;
  // A denial's claim was settled, answer and all, in its act; the others are settled now.
  if (settled !== "denied") {
    options.writes.later(pendingId(key), () =>
      claims.settle(key, { status: settled, settledAt: Date.now() }, answer as JsonValue),
    );
  }
  return { answer, replayed: false, settled };
}

function pendingId(key: ClaimKey): string {
  return `${key.session}\u0000${key.functionCallId}`;
}

/**
 * The first request's answer: the claim's own when it was settled with one, else read again
 * while the first request is still deciding or writing it, up to `waitMs`. A claim settled by
 * the release before the ledger kept its answer under a second key (`LEGACY_ANSWERS`): read
 * there, so calls made before an upgrade still replay.
 */
async function recorded<A>(
  claims: ClaimStore,
  key: ClaimKey,
  principal: string,
  first: StoredClaim,
  waitMs: number,
): Promise<A> {
  const until = Date.now() + waitMs;
  let stored: StoredClaim | undefined = first;
  for (let pause = 10; ; pause = Math.min(pause * 2, 200)) {
    // Settled with an answer: the dispatched call's, a refusal's, or a withdrawal's (an act
    // whose store reply was lost, nothing run: `{ status: "denied", code }`, replayed as the
    // denial it is).
    if (stored?.answer !== undefined) return stored.answer as A;
    if (stored?.receipt !== undefined) {
      const legacy = await legacyAnswer<A>(claims, principal, key.functionCallId);
      if (legacy !== undefined) return legacy;
      // Settled without an answer: none will come, so waiting longer cannot help.
      break;
    }
    // Gone (its session ended): nothing left to wait for; the caller's next try decides.
    if (stored === undefined || Date.now() >= until) break;
    await new Promise((resolve) => setTimeout(resolve, pause));
    stored = await claims.get(key);
  }
  throw new HttpProblem(
    "call_in_progress",
    "the first request with this call ID has not answered yet (or its server stopped mid-way): retry later",
    "callId",
  );
}

/** Where the release before the act ledger kept a retry-safe call's answer: JSON in `worker`. */
const LEGACY_ANSWERS = "tessera.service.answer:";

async function legacyAnswer<A>(
  claims: ClaimStore,
  principal: string,
  callId: string,
): Promise<A | undefined> {
  const old = await claims.get({
    session: `${LEGACY_ANSWERS}${principal}`,
    functionCallId: callId,
  });
  if (old?.worker === undefined) return undefined;
  try {
    return (JSON.parse(old.worker) as { answer: A }).answer;
  } catch {
    return undefined;
  }
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
