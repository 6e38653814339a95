import * as crypto from "node:crypto";
import { hostname } from "node:os";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { ClaimKey, ClaimStore, StoredClaim } from "@tessera/core";
import { WriteWindow } from "@tessera/core/store-kit";

/**
 * Replay protection for `tools/call` over the claim-store port. The call's key is claimed
 * *before* anything is decided, spent or forwarded; of every request carrying it exactly one
 * goes on. The port's receipt holds a status only, so the answer a duplicate must get back is
 * kept beside it, under a second key of the same store (prefix `mcp.result:`), in the record's
 * free-form `worker` field: one store, one connection, shared by every gateway process. The
 * answer is written before the call's own claim is settled, so a settled claim always has one.
 *
 * Only the claim must be durable before anything is forwarded. The answer and the receipts are
 * written after the caller has its reply (`recordLater`): a gateway that dies in between leaves
 * the call unsettled with no answer, which every later duplicate reads as in doubt — the truth,
 * since the call did run. Duplicates arriving in this process meanwhile wait for the write;
 * those reaching another process read the call in progress. Never forwarded either way.
 */

/** What the first call of a key ended with, replayed to every duplicate. */
export type Recorded =
  | { readonly kind: "result"; readonly result: CallToolResult }
  | { readonly kind: "error"; readonly code: string; readonly message: string }
  /** Forwarded, then no answer (timeout, lost connection): it may have run. Never settled. */
  | { readonly kind: "in_doubt"; readonly message: string };

export type Duplicate =
  | { readonly kind: "conflict"; readonly trace: string | undefined }
  | { readonly kind: "recorded"; readonly recorded: Recorded; readonly trace: string | undefined }
  | { readonly kind: "in_progress"; readonly trace: string | undefined }
  | { readonly kind: "in_doubt"; readonly trace: string | undefined };

/**
 * A `Recorded` already serialized, for a caller that has its result's JSON in hand (it measured
 * the result's size with it): the answer is then not serialized twice.
 */
export class RecordedJson {
  readonly json: string;
  constructor(json: string) {
    this.json = json;
  }
}

export interface CallKeys {
  readonly claim: ClaimKey;
  readonly result: ClaimKey;
}

export function callKeys(scope: string, id: string): CallKeys {
  return {
    claim: { session: `mcp:${scope}`, functionCallId: id },
    result: { session: `mcp.result:${scope}`, functionCallId: id },
  };
}

/** SHA-256 of canonical JSON (keys sorted): key order does not make a new call. */
export function digest(value: unknown): string {
  return sha256Hex(canonical(value));
}

/** SHA-256 hex of a string: one-shot `crypto.hash` (Node 20.12+) where there is one. */
export const sha256Hex: (text: string) => string =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha256", text, "hex")
    : (text) => crypto.createHash("sha256").update(text).digest("hex");

/** JSON with every object's keys sorted: the text `digest` hashes. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

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

export class CallLedger {
  readonly #claims: ClaimStore;
  /** Answers being written after their reply, by call key: duplicates here wait for them. */
  readonly #pending = new Map<string, Promise<void>>();
  /** Answers whose replies are out wait here to share a commit (see `recordLater`). */
  readonly #window = new WriteWindow(WINDOW_MS, MAX_WAITING);

  constructor(claims: ClaimStore) {
    this.#claims = claims;
  }

  /** Claims the key; on a duplicate, says what the first call came to. */
  async claim(
    keys: CallKeys,
    bodyHash: string,
    trace: string,
    now: number,
    deadline: number,
  ): Promise<{ readonly kind: "claimed" } | Duplicate> {
    const meta: ClaimMeta = { w: WORKER, i: INSTANCE, t: trace, d: deadline };
    const claimed = await this.#claims.claim(keys.claim, {
      bodyHash,
      claimedAt: now,
      worker: JSON.stringify(meta),
    });
    if (claimed.status === "claimed") return { kind: "claimed" };
    const existing = claimed.existing;
    const first = metaOf(existing);
    const t = first?.t;
    if (existing.bodyHash !== bodyHash) return { kind: "conflict", trace: t };
    const pending = this.#pending.get(pendingKey(keys));
    if (pending !== undefined) {
      // A duplicate waiting here has no reason to wait for the window as well.
      this.#window.release();
      await pending;
    }
    const recorded = await this.#recorded(keys.result);
    if (recorded !== undefined) {
      if (recorded.kind === "in_doubt") return { kind: "in_doubt", trace: t };
      return { kind: "recorded", recorded, trace: t };
    }
    return inDoubt(first, now) ? { kind: "in_doubt", trace: t } : { kind: "in_progress", trace: t };
  }

  /**
   * Keeps the answer, then settles the claim with `status`; an in-doubt call keeps its answer
   * only (its claim stays unsettled, so operators find it with `listInDoubt`).
   */
  async record(
    keys: CallKeys,
    bodyHash: string,
    recorded: Recorded | RecordedJson,
    status: "dispatched" | "denied" | "failed" | undefined,
    now: number,
  ): Promise<void> {
    await this.#claims.claim(keys.result, {
      bodyHash,
      claimedAt: now,
      worker: recorded instanceof RecordedJson ? recorded.json : JSON.stringify(recorded),
    });
    // The answer's own key is settled at once, so that `listInDoubt` lists calls, not answers;
    // an in-doubt answer settles as `failed` (no outcome came back), its call stays unsettled.
    // Both at once: duplicates read the answer's key, not the receipt, so order is not needed.
    await Promise.all([
      this.#claims.settle(keys.result, { status: status ?? "failed", settledAt: now }),
      status === undefined
        ? undefined
        : this.#claims.settle(keys.claim, { status, settledAt: now }),
    ]);
  }

  /**
   * `record`, off the caller's path: the reply goes out while the answer is written. A failed
   * write is swallowed (the call then reads in doubt, never forwarded again): the caller already
   * has the answer of what did happen.
   */
  recordLater(
    keys: CallKeys,
    bodyHash: string,
    recorded: Recorded | RecordedJson,
    status: "dispatched" | "denied" | "failed" | undefined,
    now: number,
    after?: Promise<unknown>,
  ): void {
    const id = pendingKey(keys);
    // Started once `after` (the call's audit event) has landed and the reply has gone out: on
    // a durable store its commit then never queues beside the writes the reply waits for.
    const start = after === undefined ? nextTurn() : after.then(nextTurn, nextTurn);
    const write = start
      .then(() => this.#window.join())
      .then(() => this.record(keys, bodyHash, recorded, status, now))
      .catch(() => undefined)
      .finally(() => {
        if (this.#pending.get(id) === write) this.#pending.delete(id);
      });
    this.#pending.set(id, write);
  }

  /** Resolves once every answer written after its reply has landed (before closing the store). */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) {
      this.#window.release();
      await Promise.race([Promise.all(this.#pending.values()), nextTurn()]);
    }
  }

  async #recorded(key: ClaimKey): Promise<Recorded | undefined> {
    const stored = await this.#claims.get(key);
    if (stored?.worker === undefined) return undefined;
    try {
      return JSON.parse(stored.worker) as Recorded;
    } catch {
      return { kind: "in_doubt", message: "the recorded answer is unreadable" };
    }
  }
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
