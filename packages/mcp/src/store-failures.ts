/**
 * A store write the gateway could not make and answered without: the audit event of a call
 * that already failed for another reason, or a forwarded call's answer kept for its duplicates.
 * The caller's answer never depends on it, so it is not the caller's error; it is reported here.
 */
export interface StoreFailure {
  /** Which write: `audit_event` (a failed call's own event), `answer` (a settle). */
  readonly write: "audit_event" | "answer";
  readonly callId: string;
  /** The store's code (`claim_store_unavailable`, …), or `error`. */
  readonly code: string;
  /** What became of it: dropped, retried, given up. */
  readonly detail: string;
}

export type StoreFailureObserver = (failure: StoreFailure) => void;

/**
 * The default observer: one JSON line on standard error, in the shape of `tessera mcp`'s
 * decision lines (standard output is the protocol under `--stdio`), at warning level.
 */
export const logStoreFailure: StoreFailureObserver = (failure) => {
  const line = { level: 40, time: Date.now(), msg: "store_write_failed", ...failure };
  process.stderr.write(`${JSON.stringify(line)}\n`);
};
