import {
  createKernel,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  type KernelOptions,
  messageSendCapability,
} from "@tessera/core";
import { medianRatesAbba, throughput } from "../measure.js";
import type { BenchRow } from "../report.js";
import { CTX, NS, recipient, sendRequest } from "./kernel-fixtures.js";

/**
 * Issue 14: a host that serves requests opens one turn per request. A one-shot decision is
 * open turn, decide, close, on a kernel that has served that holder before: with a versioned
 * grant source it costs one version read, whatever the grant set's size. 10,000 grants held
 * against 10, measured in alternating slices (ABBA), median rate per side.
 */

const BATCH = 1_000;
const ROUNDS = 8;

async function oneShot(grants: number, options: Partial<KernelOptions> = {}) {
  const source = new InMemoryGrantStore();
  await source.addMany(
    Array.from({ length: grants }, (_, i) => ({
      id: `grant-${i}`,
      namespaceId: NS,
      issuer: CTX.authority,
      subject: CTX.actor,
      capabilities: [messageSendCapability(recipient(i), CTX.owner)],
      issuedAt: "2026-01-01T00:00:00.000Z",
    })),
  );
  // No audit sink: an in-memory audit write (linked into the hash chain) costs more than the
  // whole rest of a one-shot decision, and would hide what this row measures, the opening.
  const kernel = createKernel({ grants: source, usage: new InMemoryGrantUsageStore(), ...options });
  // The allowed recipient is the last grant added: no scan could find it early.
  const request = sendRequest(recipient(grants - 1));
  const once = async () => {
    const turn = await kernel.openTurnAuthority(CTX);
    const result = await turn.authorize(request);
    await turn.close();
    if (result.status !== "allowed") throw new Error("bench: the one-shot decision was refused");
  };
  await once();
  return async (round: number) => {
    const options = { minMs: 150, warmupMs: round < 2 ? 100 : 0, rounds: 1 };
    const { opsPerSec } = await throughput(
      async () => {
        for (let i = 0; i < BATCH; i++) await once();
      },
      BATCH,
      options,
    );
    return opsPerSec;
  };
}

export async function oneShotRows(): Promise<BenchRow[]> {
  const [large, small] = await medianRatesAbba(ROUNDS, await oneShot(10_000), await oneShot(10));
  const uncached = await oneShot(10_000, { turnCache: false });
  const cold = await uncached(0);
  return [
    {
      name: "one-shot decision (open turn, decide, close), in memory: 10,000 grants held vs 10",
      unit: "ops/s",
      value: large,
      baseline: { name: "10 grants held", value: small },
      ratio: large / small,
      ratioMeaning: "rate with 10,000 grants / rate with 10; ≥ 0.5 means within 2×",
      target: "within 2× (ratio ≥ 0.5)",
      met: large / small >= 0.5,
    },
    {
      name: "  the same with turnCache: false (every turn reads, validates and indexes 10,000)",
      unit: "ops/s",
      value: cold,
    },
  ];
}
