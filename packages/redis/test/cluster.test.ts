import { randomBytes } from "node:crypto";
import {
  type ActLedgerPorts,
  describeActLedgerConformance,
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeUsageStoreConformance,
  type OpenedStore,
  type StoreFactory,
  serviceUrl,
} from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStores, type RedisStores } from "../src/index.js";
import { type RedisCluster, startRedisCluster } from "./support/redis-cluster.js";
import { killOwnClients, waitUntilAnswering, withParams } from "./support/redis-test-stores.js";

/**
 * The act ledger, claims, usage and audit conformance suites on a real three-node Redis
 * Cluster this test starts (`redis-server --cluster-enabled yes` ×3, `redis-cli --cluster
 * create`) and kills afterwards. Each case opens `?cluster=true` with a prefix of its own that
 * opens with a hash tag (`{…}`), so every key of the case, and every script, lies in one slot;
 * the cases spread over the three nodes. The outage is a blip: every node `CLIENT KILL`s the
 * case's connections, and the cluster client reconnects by itself.
 */
const enabled = serviceUrl("TESSERA_REDIS_URL") !== undefined;

let cluster: RedisCluster | undefined;
if (enabled) {
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
}

type Opened<S> = OpenedStore<S> & { readonly url: string; readonly name: string };

function clusterUrl(): { url: string; name: string } {
  if (cluster === undefined) throw new Error("the test cluster is not running");
  const run = randomBytes(4).toString("hex");
  const name = `tessera_cluster_${run}`;
  return {
    name,
    url: withParams(cluster.url, {
      cluster: "true",
      prefix: `{t${run}}:`,
      name,
      commandTimeoutMs: "20000",
      connectTimeoutMs: "20000",
    }),
  };
}

function factory<S>(
  pick: (stores: RedisStores) => S,
  port: keyof Omit<RedisStores, "close" | "acts"> | undefined,
  probe: (store: S) => Promise<unknown>,
): StoreFactory<S, Opened<S>> {
  return {
    open: async () => {
      const { url, name } = clusterUrl();
      const stores = await openStores(url);
      return { store: pick(stores), url, name, close: () => stores.close() };
    },
    ...(port === undefined
      ? {}
      : {
          processSpec: ({ url }: Opened<S>) => ({
            module: "@tessera/redis",
            exportName: "openStores",
            arg: url,
            pick: port,
          }),
        }),
    outage: ({ name, store }) => ({
      kind: "blip",
      interrupt: async () => {
        for (const node of cluster?.nodes ?? []) await killOwnClients(node, name);
      },
      restore: () => waitUntilAnswering(() => probe(store)),
    }),
  };
}

if (enabled) {
  describe("Redis Cluster", () => {
    it("a prefix without a hash tag is refused with invalid_config on a cluster", async () => {
      const url = withParams((cluster as RedisCluster).url, { cluster: "true", prefix: "t:" });
      await expect(openStores(url)).rejects.toMatchObject({ code: "invalid_config" });
    });
  });
  describeActLedgerConformance(
    "redis cluster",
    factory<ActLedgerPorts>(
      (stores) => stores,
      undefined,
      (store) => store.claims.get({ session: "p", functionCallId: "p" }),
    ),
  );
  describeClaimStoreConformance(
    "redis cluster",
    factory(
      (stores) => stores.claims,
      "claims",
      (store) => store.get({ session: "p", functionCallId: "p" }),
    ),
  );
  describeUsageStoreConformance(
    "redis cluster",
    factory(
      (stores) => stores.usage,
      "usage",
      (store) => store.getUsage("p", "p"),
    ),
  );
  describeAuditSinkConformance(
    "redis cluster",
    factory(
      (stores) => stores.audit,
      "audit",
      (store) => store.read({ callId: "p" }),
    ),
  );
} else {
  describe("redis cluster", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set (the Redis tests run where Redis is installed)", () => {});
  });
}
