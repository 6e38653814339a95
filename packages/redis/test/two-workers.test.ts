import { fileURLToPath } from "node:url";
import { serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { runGateWorkers } from "../../../test/support/gate-workers.js";
import { deletePrefix, freshPrefix, withParams } from "./support/redis-test-stores.js";

/**
 * Across machines, in miniature: gate workers in separate OS processes that share nothing
 * but the Redis server. One callback per (trusted session, functionCallId).
 */
const url = serviceUrl("TESSERA_REDIS_URL");
const suite = url ? describe : describe.skip;
const storeModule = fileURLToPath(new URL("../dist/index.js", import.meta.url));

const prefixes: string[] = [];
afterEach(async () => {
  for (const prefix of prefixes.splice(0)) await deletePrefix(url as string, prefix);
});

function freshUrl(): string {
  const prefix = freshPrefix();
  prefixes.push(prefix);
  return withParams(url as string, { prefix });
}

suite("gate workers sharing only Redis", () => {
  it("4 workers, one session, one call ID: one callback, three correlated refusals", async () => {
    const result = await runGateWorkers({
      storeModule,
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
      storeModule,
      url: freshUrl(),
      sessions: ["session-a", "session-b", "session-a", "session-b"],
      functionCallId: "call-42",
    });
    expect(result.callbacks).toBe(2);
    expect(result.statuses).toEqual(["dispatched", "dispatched", "none", "none"]);
  });
});
