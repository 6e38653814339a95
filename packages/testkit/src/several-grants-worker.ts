/**
 * The child side of `describeSeveralGrantsRace`: plain `node several-grants-worker.js <json>`.
 * Opens the bundle the parent names (a `ProcessSpec` without `pick`), opens one turn on a
 * kernel over it, sends `sends` messages at once and prints the grants that delivered, as
 * JSON on stdout. Nothing is shared with the parent but the store.
 */
import { createKernel, InProcessTransport, type StoreBundle } from "@tessera/core";
import type { ProcessSpec } from "./factory.js";
import { openFromSpec } from "./open-spec.js";

interface Job {
  readonly spec: ProcessSpec;
  readonly worker: number;
  readonly sends: number;
}

const job = JSON.parse(process.argv[2] as string) as Job;
const stores = (await openFromSpec(job.spec)) as StoreBundle;
const kernel = createKernel({
  grants: stores.grants,
  usage: stores.usage,
  audit: stores.audit,
  acts: stores.acts,
  transport: InProcessTransport.echo(),
});
const turn = await kernel.openTurnAuthority({
  namespaceId: "ns",
  actor: "asker",
  authority: "host",
  owner: "alice",
  traceId: `w${job.worker}`,
});
const results = await Promise.all(
  Array.from({ length: job.sends }, (_, i) =>
    turn.sendMessage({ recipient: "bob", payload: i, callId: `w${job.worker}-${i}` }),
  ),
);
await turn.close();
await kernel.drain?.();
await stores.close();
const delivered = results.flatMap((result) =>
  result.status === "delivered" ? [result.grantId] : [],
);
process.stdout.write(JSON.stringify({ delivered }));
