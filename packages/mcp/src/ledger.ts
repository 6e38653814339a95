import * as crypto from "node:crypto";
import { hostname } from "node:os";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import {
  type ActOptions,
  type ClaimStore,
  isTesseraError,
  type JsonValue,
  type StoredClaim,
} from "@tessera/core";
import { WriteWindow } from "@tessera/core/store-kit";
import type { CallKeys } from "./call-keys.js";
import { logStoreFailure, type StoreFailureObserver } from "./store-failures.js";

/**
 * Replay protection for `tools/call` over the claim of the call's act. The call's key is
 * claimed in the same act as its decision (the act ledger: claim, spend and audit event in one
 * write, before anything is forwarded); of every request carrying it exactly one goes on. A
 * refusal settles its claim in that same write, with `{ status: "denied", code }` as its
 * answer. A forwarded call's answer (the tool result, or the error it ended with) and receipt
 * are settled into the claim's own `answer` field after the caller has its reply
 * (`settleLater`, in a write window shared by the answers in flight): a gateway that dies in
 * between leaves the call unsettled with no answer, which every later duplicate reads as in
 * doubt — the truth, since the call did run. Duplicates arriving in this process meanwhile wait
 * for the write; those reaching another process read the call in progress. Never forwarded
 * either way. A settle the store refuses (a blip) is tried again in the background for a while,
 * and this process answers its own duplicates from the answer it holds meanwhile; given up (or
 * at close), the claim stays unsettled and this process answers them in doubt.
 *
 * The release before the act ledger kept the answer under a second key (session prefix
 * `mcp.result:`, JSON in `worker`): a settled claim without an answer is looked up there, so
 * calls recorded before an upgrade still replay. Nothing is written there any more.
 */

/** What the first call of a key ended with, replayed to every duplicate. */
export type Recorded =
  | { readonly kind: "result"; readonly result: CallToolResult }
  | { readonly kind: "error"; readonly code: string; readonly message: string }
  /** Forwarded, then no answer (timeout, lost connection): it may have run. Never settled. */
  | { readonly kind: "in_doubt"; readonly message: string };

/** A refusal's answer, as the act ledger settles it. */
export interface DeniedRecord {
  readonly kind: "denied";
  readonly code: string;
}

export type Duplicate =
  | { readonly kind: "conflict"; readonly trace: string | undefined }
  | {
      readonly kind: "recorded";
      readonly recorded: Recorded | DeniedRecord;
      readonly trace: string | undefined;
    }
  | { readonly kind: "in_progress"; readonly trace: string | undefined }
  | { readonly kind: "in_doubt"; readonly trace: string | undefined };

interface ClaimMeta {
  /** host:pid of the gateway that claimed. */
  readonly w: string;
  /** That gateway process's random ID: a restarted gateway may get the same pid (PID 1). */
  readonly i?: string;
  /** The first call's trace, so every duplicate's audit event joins it. */
  readonly t: string;
  /** Epoch ms after which the first call must have ended, had its gateway lived. */
  readonly d: number;
}

const HOST = hostname();
const WORKER = `${HOST}:${process.pid}`;
const INSTANCE = crypto.randomUUID();
/** How long answers written after their replies wait for others to share a commit with. */
const WINDOW_MS = 10;
const MAX_WAITING = 256;
/** In-doubt calls this process remembers, so its own duplicates read them in doubt at once. */
const MAX_REMEMBERED = 4096;

/**
 * How a settle the store refused is tried again: after `firstDelayMs`, then twice as long each
 * time up to `maxDelayMs`, until `giveUpAfterMs` has passed since it first failed.
 */
export interface SettleRetry {
  readonly firstDelayMs: number;
  readonly maxDelayMs: number;
  readonly giveUpAfterMs: number;
}
/** About twelve tries over two minutes: a store restart, not an outage of hours. */
const SETTLE_RETRY: SettleRetry = { firstDelayMs: 250, maxDelayMs: 15_000, giveUpAfterMs: 120_000 };
/**
 * Answers held in memory while their settle is retried: each may be up to the claim store's
 * bound on an answer (1 MiB), so past this many a failed settle is given up at once.
 */
const MAX_RETRYING = 256;

/** A forwarded call's answer whose settle failed, held while it is tried again. */
interface Unsettled {
  readonly keys: CallKeys;
  readonly callId: string;
  readonly answer: Recorded;
  readonly status: "dispatched" | "failed";
  readonly settledAt: number;
  /** performance.now() of the first failure. */
  readonly since: number;
  delayMs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

export class CallLedger {
  readonly #claims: ClaimStore;
  /** Answers being written after their reply, by call key: duplicates here wait for them. */
  readonly #pending = new Map<string, Promise<void>>();
  /** Answers whose replies are out wait here to share a commit (see `settleLater`). */
  readonly #window = new WriteWindow(WINDOW_MS, MAX_WAITING);
  /**
   * Calls this process forwarded that came back with no answer. Their claims stay unsettled
   * (listed in doubt); another process reads them in progress until their deadline passes.
   */
  readonly #inDoubt = new Set<string>();
  /** Answers whose settle failed, by call key, tried again in the background (`#retry`). */
  readonly #unsettled = new Map<string, Unsettled>();
  readonly #retry: SettleRetry;
  readonly #onStoreFailure: StoreFailureObserver;
  /** Set by `drain`: a settle failing from then on is not retried. */
  #closing = false;

  constructor(
    claims: ClaimStore,
    options: {
      readonly onStoreFailure?: StoreFailureObserver;
      readonly settleRetry?: SettleRetry;
    } = {},
  ) {
    this.#claims = claims;
    this.#onStoreFailure = options.onStoreFailure ?? logStoreFailure;
    this.#retry = options.settleRetry ?? SETTLE_RETRY;
  }

  /** The claim a call's act records with its decision. */
  claimOf(
    keys: CallKeys,
    bodyHash: string,
    trace: string,
    now: number,
    deadline: number,
  ): NonNullable<ActOptions["claim"]> {
    const meta: ClaimMeta = { w: WORKER, i: INSTANCE, t: trace, d: deadline };
    return { key: keys.claim, record: { bodyHash, claimedAt: now, worker: JSON.stringify(meta) } };
  }

  /** What a request whose act found the key claimed (`existing`) is told. */
  async duplicateOf(
    keys: CallKeys,
    bodyHash: string,
    existing: StoredClaim,
    now: number,
  ): Promise<Duplicate> {
    const first = metaOf(existing);
    const t = first?.t;
    if (existing.bodyHash !== bodyHash) return { kind: "conflict", trace: t };
    const id = pendingKey(keys);
    let stored: StoredClaim | undefined = existing;
    const pending = this.#pending.get(id);
    if (pending !== undefined) {
      // A duplicate waiting here has no reason to wait for the window as well.
      this.#window.release();
      await pending;
    }
    // This process's own call: its answer held while its settle is retried, or in doubt. Never
    // "in progress" for a call that has finished here, whatever the store says.
    const held = this.#unsettled.get(id);
    if (held !== undefined) return { kind: "recorded", recorded: held.answer, trace: t };
    if (this.#inDoubt.has(id)) return { kind: "in_doubt", trace: t };
    if (pending !== undefined) {
      stored = await this.#claims.get(keys.claim);
    } else if (existing.receipt === undefined) {
      // The act read the claim unsettled, but its answer may have landed since: the act's
      // write waits for its fsync (on a durable store), and this process's own answer may
      // have been written and left `#pending` meanwhile. Read again rather than answer
      // "in progress" for a call that has finished.
      stored = (await this.#claims.get(keys.claim)) ?? existing;
    }
    const recorded = await this.#recorded(keys, stored);
    if (recorded !== undefined) {
      if (recorded.kind === "in_doubt") return { kind: "in_doubt", trace: t };
      return { kind: "recorded", recorded, trace: t };
    }
    if (stored?.receipt !== undefined) return { kind: "in_doubt", trace: t };
    return inDoubt(first, now) ? { kind: "in_doubt", trace: t } : { kind: "in_progress", trace: t };
  }

  /**
   * Settles the claim with `status` and `answer` in its own field, off the caller's path: once
   * `after` (the call's audit events) has landed and the reply has gone out, in a write window
   * shared by the answers in flight (one commit for all of them). A call in doubt (`status`
   * undefined) is not settled: its claim stays listed by `listInDoubt`. A failed write is
   * reported and tried again in the background (`#retryLater`), never the caller's error: the
   * caller already has the answer of what did happen.
   */
  settleLater(
    keys: CallKeys,
    callId: string,
    answer: Recorded,
    status: "dispatched" | "failed" | undefined,
    now: number,
    after?: Promise<unknown>,
  ): void {
    const id = pendingKey(keys);
    if (status === undefined) {
      this.#rememberInDoubt(id);
      return;
    }
    // Started once `after` has landed and the reply has gone out: on a durable store its commit
    // then never queues beside the writes the reply waits for.
    const start = after === undefined ? nextTurn() : after.then(nextTurn, nextTurn);
    const write = start
      .then(() => this.#window.join())
      .then(() => this.#settle(keys, answer, status, now))
      .catch((error: unknown) =>
        this.#retryLater(id, { keys, callId, answer, status, settledAt: now }, error),
      )
      .finally(() => {
        if (this.#pending.get(id) === write) this.#pending.delete(id);
      });
    this.#pending.set(id, write);
  }

  /**
   * Resolves once every answer written after its reply has landed or failed (before closing the
   * store); each answer still being retried gets one last try, then retrying stops.
   */
  async drain(): Promise<void> {
    this.#closing = true;
    while (this.#pending.size > 0) {
      this.#window.release();
      await Promise.race([Promise.all(this.#pending.values()), nextTurn()]);
    }
    const held = [...this.#unsettled.entries()];
    for (const [, unsettled] of held) clearTimeout(unsettled.timer);
    await Promise.all(held.map(([id, unsettled]) => this.#tryAgain(id, unsettled)));
  }

  #settle(
    keys: CallKeys,
    answer: Recorded,
    status: "dispatched" | "failed",
    settledAt: number,
  ): Promise<void> {
    return this.#claims.settle(keys.claim, { status, settledAt }, answer as unknown as JsonValue);
  }

  /** A settle that failed: held and tried again later, or given up (see `SettleRetry`). */
  #retryLater(
    id: string,
    failed: Omit<Unsettled, "since" | "delayMs" | "timer">,
    error: unknown,
  ): void {
    const code = codeOf(error);
    // A store that refused the answer itself (`invalid_input`) will refuse it again.
    if (this.#closing || code === "invalid_input" || this.#unsettled.size >= MAX_RETRYING) {
      this.#giveUp(id, failed.callId, code);
      return;
    }
    const unsettled: Unsettled = {
      ...failed,
      since: performance.now(),
      delayMs: this.#retry.firstDelayMs,
      timer: undefined,
    };
    this.#unsettled.set(id, unsettled);
    this.#schedule(id, unsettled);
    this.#onStoreFailure({
      write: "answer",
      callId: failed.callId,
      code,
      detail:
        "the answer was not kept: tried again in the background, this process answers duplicates meanwhile",
    });
  }

  #schedule(id: string, unsettled: Unsettled): void {
    unsettled.timer = setTimeout(() => {
      unsettled.timer = undefined;
      if (!this.#closing) void this.#tryAgain(id, unsettled);
    }, unsettled.delayMs);
    // A host may exit with answers still being retried: they are then in doubt, as on a crash.
    unsettled.timer.unref?.();
  }

  async #tryAgain(id: string, unsettled: Unsettled): Promise<void> {
    try {
      await this.#settle(unsettled.keys, unsettled.answer, unsettled.status, unsettled.settledAt);
      this.#unsettled.delete(id);
    } catch (error) {
      // Close's last try may overlap a timer's: the one that settled it has the last word.
      if (this.#unsettled.get(id) !== unsettled) return;
      const elapsed = performance.now() - unsettled.since;
      if (this.#closing || elapsed + unsettled.delayMs >= this.#retry.giveUpAfterMs) {
        this.#giveUp(id, unsettled.callId, codeOf(error));
        return;
      }
      unsettled.delayMs = Math.min(unsettled.delayMs * 2, this.#retry.maxDelayMs);
      this.#schedule(id, unsettled);
    }
  }

  /** The claim stays unsettled: listed in doubt, and this process answers duplicates so. */
  #giveUp(id: string, callId: string, code: string): void {
    this.#unsettled.delete(id);
    this.#rememberInDoubt(id);
    this.#onStoreFailure({
      write: "answer",
      callId,
      code,
      detail: "the answer was not kept and is no longer tried: the call is in doubt",
    });
  }

  #rememberInDoubt(id: string): void {
    if (this.#inDoubt.size >= MAX_REMEMBERED) this.#inDoubt.clear();
    this.#inDoubt.add(id);
  }

  /** The claim's own answer; for a claim settled by the previous release, its second key's. */
  async #recorded(
    keys: CallKeys,
    stored: StoredClaim | undefined,
  ): Promise<Recorded | DeniedRecord | undefined> {
    const answer = stored?.answer;
    if (answer !== undefined) return answerOf(answer);
    if (stored?.receipt === undefined) return undefined;
    const legacy = await this.#claims.get(keys.legacy);
    if (legacy?.worker === undefined) return undefined;
    try {
      return JSON.parse(legacy.worker) as Recorded;
    } catch {
      return { kind: "in_doubt", message: "the recorded answer is unreadable" };
    }
  }
}

/** A claim's answer as the gateway kept it, or the act ledger's refusal `{ status, code }`. */
function answerOf(answer: JsonValue): Recorded | DeniedRecord {
  const value = answer as { kind?: unknown; status?: unknown; code?: unknown };
  if (value !== null && typeof value === "object") {
    if (value.status === "denied" && typeof value.code === "string") {
      return { kind: "denied", code: value.code };
    }
    if (value.kind === "result" || value.kind === "error" || value.kind === "in_doubt") {
      return value as unknown as Recorded;
    }
  }
  return { kind: "in_doubt", message: "the recorded answer is unreadable" };
}

function codeOf(error: unknown): string {
  return isTesseraError(error) ? error.code : "error";
}

/** Resolves after the I/O of this turn of the event loop (the reply's write among it). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function pendingKey(keys: CallKeys): string {
  return `${keys.claim.session}\u0000${keys.claim.functionCallId}`;
}

function metaOf(claim: StoredClaim): ClaimMeta | undefined {
  try {
    const meta = JSON.parse(claim.worker ?? "") as Partial<ClaimMeta>;
    if (typeof meta.w === "string" && typeof meta.t === "string" && typeof meta.d === "number") {
      return meta as ClaimMeta;
    }
  } catch {}
  return undefined;
}

/**
 * An unsettled claim is in doubt once nobody can still be finishing it: its deadline (the
 * upstream timeout) has passed, or the gateway process that claimed it, on this host, is gone.
 * Otherwise it is in progress. Either way it is never forwarded again.
 */
function inDoubt(meta: ClaimMeta | undefined, now: number): boolean {
  if (meta === undefined) return true;
  if (now > meta.d) return true;
  const [host, pid] = [
    meta.w.slice(0, meta.w.lastIndexOf(":")),
    Number(meta.w.slice(meta.w.lastIndexOf(":") + 1)),
  ];
  if (host !== HOST || !Number.isSafeInteger(pid)) return false;
  // This very process is still finishing it; an earlier process with our pid is gone.
  if (pid === process.pid) return meta.i !== INSTANCE;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}
