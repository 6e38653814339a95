import { describe, expect, it } from "vitest";
import { runGateWorkers } from "./gate-workers.js";

export interface SharedStoreUnderTest {
  /** "PostgreSQL", "Redis": what the workers share and nothing else. */
  readonly name: string;
  /** The backend's built module, whose `openClaimStore(url)` each worker calls. */
  readonly storeModule: string;
  /** A store URL isolated for one test (own schema or key prefix); undefined skips the suite. */
  readonly freshUrl: (() => string) | undefined;
}

/**
 * Across machines, in miniature: gate workers in separate OS processes that share nothing
 * but one database. One callback per (trusted session, functionCallId). Declared once here,
 * run by every shared backend.
 */
export function describeGateWorkersSharing(store: SharedStoreUnderTest): void {
  const suite = store.freshUrl ? describe : describe.skip;
  const freshUrl = () => (store.freshUrl as () => string)();

  suite(`gate workers sharing only ${store.name}`, () => {
    it("4 workers, one session, one call ID: one callback, three correlated refusals", async () => {
      const result = await runGateWorkers({
        storeModule: store.storeModule,
        url: freshUrl(),
        sessions: ["host-session-1", "host-session-1", "host-session-1", "host-session-1"],
        functionCallId: "call-42",
      });
      expect(result.callbacks).toBe(1);
      expect(result.statuses).toEqual(["dispatched", "none", "none", "none"]);
      expect(result.replies).toEqual([
        "INVALID_FUNCTION_CALL",
        "INVALID_FUNCTION_CALL",
        "INVALID_FUNCTION_CALL",
        "value",
      ]);
    });

    it("two trusted sessions may use the same call ID: one callback each", async () => {
      const result = await runGateWorkers({
        storeModule: store.storeModule,
        url: freshUrl(),
        sessions: ["session-a", "session-b", "session-a", "session-b"],
        functionCallId: "call-42",
      });
      expect(result.callbacks).toBe(2);
      expect(result.statuses).toEqual(["dispatched", "dispatched", "none", "none"]);
    });
  });
}
