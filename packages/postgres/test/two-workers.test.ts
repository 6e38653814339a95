import { fileURLToPath } from "node:url";
import { serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { runGateWorkers } from "../../../test/support/gate-workers.js";
import { dropSchema, freshSchema, withParams } from "./support/pg-test-stores.js";

/**
 * Across machines, in miniature: gate workers in separate OS processes that share nothing
 * but the PostgreSQL database. One callback per (trusted session, functionCallId).
 */
const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;
const storeModule = fileURLToPath(new URL("../dist/index.js", import.meta.url));

const schemas: string[] = [];
afterEach(async () => {
  for (const schema of schemas.splice(0)) await dropSchema(url as string, schema);
});

function freshUrl(): string {
  const schema = freshSchema();
  schemas.push(schema);
  return withParams(url as string, { schema });
}

suite("gate workers sharing only PostgreSQL", () => {
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
