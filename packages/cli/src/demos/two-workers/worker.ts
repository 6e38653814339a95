/**
 * One demo worker OS process: builds the same gate either way, over its own memory or over
 * the shared store; waits at the barrier; handles one call; prints what happened.
 */
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { DirectoryClaimStore, FunctionCallGate, InMemoryClaimStore } from "@tessera/a2ui";
import type { ClaimStore } from "@tessera/core";
import { openStoresByUrl } from "../../stores.js";
import { DEMO_CATALOG } from "./catalog.js";
import type { WorkerConfig, WorkerOutcome } from "./protocol.js";

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const config = JSON.parse((await lines.next()).value as string) as WorkerConfig;
const pause = config.pauseAfterClaim === true || process.env.TESSERA_DEMO_PAUSE_AFTER_CLAIM === "1";

let store: ClaimStore;
let close: () => Promise<void>;
if (config.store.kind === "memory") {
  store = new InMemoryClaimStore();
  close = () => store.close();
} else if (config.store.kind === "directory") {
  store = await DirectoryClaimStore.open(config.store.dir);
  close = () => store.close();
} else {
  // The CLI's opener: a worker that cannot reach the store says why, as the CLI does.
  const opened = await openStoresByUrl(config.store.url);
  store = opened.claims;
  close = () => opened.close();
}

// Count what the store itself answered, so "claimed" and "reused" are measured, not inferred.
let claimed = 0;
let reused = 0;
const counted: ClaimStore = {
  claim: async (key, record) => {
    const result = await store.claim(key, record);
    if (result.status === "claimed") claimed++;
    else reused++;
    return result;
  },
  settle: (key, receipt) => store.settle(key, receipt),
  get: (key) => store.get(key),
  listInDoubt: (session) => store.listInDoubt(session),
  endSession: (session) => store.endSession(session),
  close: () => store.close(),
};

const gate = new FunctionCallGate({
  claims: counted,
  catalog: DEMO_CATALOG,
  // The simulated tool: it records that it ran, and nothing else happens.
  invoke: (call) => {
    appendFileSync(
      config.callbacksFile,
      `${JSON.stringify({ pid: process.pid, session: call.session, id: call.functionCallId })}\n`,
    );
    const { quantity } = call.args as { quantity: number };
    return { sku: "tile-7", quantity, total: quantity * 3 };
  },
  approve: pause
    ? () => {
        process.stdout.write("paused\n");
        return new Promise<boolean>(() => undefined); // killed here by the test
      }
    : undefined,
});

process.stdout.write("ready\n");
for (
  let line = await lines.next();
  !line.done && line.value.trim() !== "go";
  line = await lines.next()
) {
  // wait at the barrier
}

const { reply, receipt } = await gate.handle(config.session, config.message);
const r = reply as {
  error?: { code: string };
  rendererFunctionResponse?: { error?: { code: string } };
};
const outcome: WorkerOutcome = {
  responseCode: r.error?.code ?? r.rendererFunctionResponse?.error?.code ?? "value",
  receiptStatus: receipt.status,
  claimed,
  reused,
};
// The receipt is written after the reply: let it land before the store closes and we exit.
await gate.close();
await close();
process.stdout.write(`${JSON.stringify(outcome)}\n`);
process.exit(0);
