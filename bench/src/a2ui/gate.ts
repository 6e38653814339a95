import { InMemoryClaimStore } from "@tessera/a2ui";
import { throughput } from "../measure.js";
import { BATCH, gateOver, MESSAGES } from "./fixtures.js";

/**
 * `gate.handle` end to end over the memory store: schema validation, catalog, claim,
 * callback, settle (after the reply, drained at the end of each batch). Sequential calls, a fresh session per batch of 1,000 so every call is a
 * first call (and the store stays small).
 */
export async function memoryGateRate(): Promise<number> {
  const claims = new InMemoryClaimStore();
  const gate = gateOver(claims);
  let batch = 0;
  const { opsPerSec } = await throughput(
    async () => {
      const session = `s${batch++}`;
      for (const message of MESSAGES) {
        const { receipt } = await gate.handle(session, message);
        if (receipt.status !== "dispatched") throw new Error("bench: call not dispatched");
      }
      await gate.drain();
      await claims.endSession(session);
    },
    BATCH,
    { minMs: 500, warmupMs: 300, rounds: 3 },
  );
  return opsPerSec;
}
