/** What the demo parent sends a worker process (first stdin line) and what it prints back. */

export type WorkerStore =
  /** Each process keeps its claims in its own memory: the "before". */
  | { readonly kind: "memory" }
  /** One private claim directory shared by every worker: the "after". */
  | { readonly kind: "directory"; readonly dir: string }
  /** A shared database store, opened in each worker with the CLI's `openStoresByUrl(url)`. */
  | { readonly kind: "url"; readonly url: string };

export interface WorkerConfig {
  readonly store: WorkerStore;
  readonly session: string;
  readonly message: unknown;
  /** The simulated callback appends one line here per run. */
  readonly callbacksFile: string;
  /** Test hook: stop after the claim, before the callback (also TESSERA_DEMO_PAUSE_AFTER_CLAIM=1). */
  readonly pauseAfterClaim?: boolean;
}

export interface WorkerOutcome {
  /** `"value"`, or the error code of the reply. */
  readonly responseCode: string;
  readonly receiptStatus: string;
  /** What the claim store answered this worker: measured at the store, not inferred. */
  readonly claimed: number;
  readonly reused: number;
}
