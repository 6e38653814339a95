import {
  createKernel,
  deriveGrant,
  type Grant,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  MESSAGE_NAMESPACE,
  MESSAGE_SEND_ACTION,
  messageSendCapability,
} from "@tessera/core";
import { throughput } from "../measure.js";
import type { BenchRow } from "../report.js";
import { CTX, NS, recipient } from "./kernel-fixtures.js";

/**
 * Opening a turn whose actor holds 10,000 grants, 1,000 of them derived at depth 3 (host →
 * r0 → r1 → r2 → asker), against the same turn with 10,000 root grants. The derived turn also
 * reads the three delegators' grants (3,000 more) and checks every link, so the ratio shows
 * what chain resolution costs; it is indexed (one listing per delegator), never a scan per
 * grant.
 */

const GRANTS = 10_000;
const DERIVED = 1_000;
const ISSUED = "2026-01-01T00:00:00.000Z";
const HOLDERS = ["r0", "r1", "r2", CTX.actor];

async function rootStore(): Promise<InMemoryGrantStore> {
  const store = new InMemoryGrantStore();
  for (let i = 0; i < GRANTS; i++) {
    await store.add({
      id: `grant-${i}`,
      namespaceId: NS,
      issuer: CTX.authority,
      subject: CTX.actor,
      capabilities: [messageSendCapability(recipient(i), CTX.owner)],
      issuedAt: ISSUED,
    });
  }
  return store;
}

async function derivedStore(): Promise<InMemoryGrantStore> {
  const store = new InMemoryGrantStore();
  for (let i = 0; i < GRANTS - DERIVED; i++) {
    await store.add({
      id: `grant-${i}`,
      namespaceId: NS,
      issuer: CTX.authority,
      subject: CTX.actor,
      capabilities: [messageSendCapability(recipient(i), CTX.owner)],
      issuedAt: ISSUED,
    });
  }
  for (let i = GRANTS - DERIVED; i < GRANTS; i++) {
    let grant: Grant = await store.add({
      id: `grant-${i}-d0`,
      namespaceId: NS,
      issuer: CTX.authority,
      subject: "r0",
      capabilities: [messageSendCapability(recipient(i), CTX.owner)],
      issuedAt: ISSUED,
    });
    for (let depth = 1; depth <= 3; depth++) {
      const child = deriveGrant(
        grant,
        {
          id: depth === 3 ? `grant-${i}` : `grant-${i}-d${depth}`,
          subject: HOLDERS[depth] as string,
          capabilities: [messageSendCapability(recipient(i), CTX.owner)],
        },
        { issuer: HOLDERS[depth - 1] as string },
      );
      grant = await store.add(child);
    }
  }
  return store;
}

async function openRate(store: InMemoryGrantStore, check: string): Promise<number> {
  const kernel = createKernel({ grants: store, usage: new InMemoryGrantUsageStore() });
  const probe = await kernel.openTurnAuthority(CTX);
  const decided = await probe.authorize({
    action: MESSAGE_SEND_ACTION,
    resource: { namespace: MESSAGE_NAMESPACE, path: [check], owner: CTX.owner },
  });
  if (decided.status !== "allowed") throw new Error("bench setup: the derived grant must allow");
  const { opsPerSec } = await throughput(
    async () => {
      const turn = await kernel.openTurnAuthority(CTX);
      await turn.close();
    },
    1,
    { minMs: 1500, warmupMs: 500, rounds: 3 },
  );
  return opsPerSec;
}

export async function delegationRows(): Promise<BenchRow[]> {
  // The last grant is derived in the second store: the probe proves its chain resolves.
  const last = recipient(GRANTS - 1);
  const roots = await openRate(await rootStore(), last);
  const derived = await openRate(await derivedStore(), last);
  const slowdown = roots / derived;
  return [
    {
      name: "open a turn: 10,000 grants, 1,000 derived at depth 3 (chains resolved) vs 10,000 root grants",
      unit: "ops/s",
      value: derived,
      baseline: { name: "10,000 root grants", value: roots },
      ratio: slowdown,
      ratioMeaning: "time to open with derived grants / time with root grants; ≤ 1.5 is the target",
      target: "within 1.5× (ratio ≤ 1.5)",
      met: slowdown <= 1.5,
    },
  ];
}
