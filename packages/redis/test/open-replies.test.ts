import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { serviceUrl } from "@tessera/testkit";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openAuditReader, openStores } from "../src/index.js";
import { type RedisCluster, startRedisCluster } from "./support/redis-cluster.js";
import { admin, withParams } from "./support/redis-test-stores.js";

/**
 * An open refused by the server's reply says why. Before, a cluster node's URL without
 * `cluster=true` failed with "store_unavailable: could not open the Redis store (ReplyError)"
 * (the audit reader's open with `audit_unavailable…`), and every other refusal at open was
 * named "ReplyError" or "Error" too. Now a cluster node is named as one, with the URL option
 * to add (`invalid_config`: the URL is wrong, not the server down), and any other reply by its
 * first word (`NOAUTH`, `WRONGPASS`, `NOPERM`), never by the rest of the server's text.
 */
const enabled = serviceUrl("TESSERA_REDIS_URL") !== undefined;

const CLUSTER_NODE =
  /the Redis server at that URL is a node of a Redis Cluster \((it answered MOVED|INFO says cluster_enabled:1)\): add cluster=true to the URL/;

/** The error an open, or else the first read of what it opened, fails with. */
async function failureOf(open: () => Promise<{ close(): Promise<void> }>) {
  let opened: { close(): Promise<void> } | undefined;
  try {
    opened = await open();
  } catch (error) {
    return { at: "open", error: error as { code: string; message: string } };
  }
  try {
    const audit = (opened as { audit?: unknown }).audit ?? opened;
    await (audit as { read(filter: object): Promise<unknown> }).read({ limit: 1 });
    return { at: "nowhere", error: undefined };
  } catch (error) {
    return { at: "read", error: error as { code: string; message: string } };
  } finally {
    await opened.close();
  }
}

describe.runIf(enabled)("a Redis Cluster node opened without cluster=true", () => {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  const nodes = () => cluster?.nodes ?? [];

  it("openStores on each node: invalid_config, naming the cluster and cluster=true", async () => {
    for (const node of nodes()) {
      const url = withParams(node, { prefix: "tessera_test_cluster:" });
      const { at, error } = await failureOf(() => openStores(url));
      expect(at).toBe("open");
      expect(error?.code).toBe("invalid_config");
      expect(error?.message).toMatch(CLUSTER_NODE);
      // The reply's slot and address are the server's words: not echoed.
      expect(error?.message).not.toMatch(/\d+ 127\.0\.0\.1:\d+/);
    }
  });

  it("the audit reader on each node: the open, or its first read, names the cluster", async () => {
    const seen = new Set<string>();
    for (const node of nodes()) {
      const { at, error } = await failureOf(() => openAuditReader(node));
      seen.add(`${at} ${error?.code}`);
      expect(error?.message).toMatch(CLUSTER_NODE);
    }
    // The node holding the layout key's slot opens; the trail's key lies elsewhere.
    expect(
      [...seen].every((s) => s === "open invalid_config" || s === "read audit_unavailable"),
    ).toBe(true);
  });

  it("a database in the URL: the cluster node is named, not a missing database", async () => {
    const node = nodes()[0] as string;
    const { error } = await failureOf(() => openStores(`${node}/2`));
    expect(error?.code).toBe("invalid_config");
    expect(error?.message).toMatch(
      /node of a Redis Cluster \(INFO says cluster_enabled:1\): add cluster=true/,
    );
    expect(error?.message).not.toContain("no database");
  });

  it("with cluster=true and a tagged prefix the same node opens", async () => {
    const url = withParams(nodes()[0] as string, {
      cluster: "true",
      prefix: "{tessera_test_cluster}:",
      selfTest: "false",
    });
    const stores = await openStores(url);
    await stores.close();
  });
});

/** Waits until the server at `url` answers PING (it is starting). */
async function untilAnswering(url: string): Promise<void> {
  for (const end = Date.now() + 20_000; ; ) {
    const redis = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    redis.on("error", () => {});
    try {
      await redis.connect();
      await redis.ping();
      return;
    } catch (error) {
      if (Date.now() > end) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      redis.disconnect();
    }
  }
}

/** A loopback port nothing listens on now (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.runIf(enabled)("other refusals at open are named by the reply's first word", () => {
  let server: ChildProcess | undefined;
  let base = "";
  beforeAll(async () => {
    const port = await freePort();
    server = spawn(
      "redis-server",
      [
        ...["--port", String(port), "--bind", "127.0.0.1", "--requirepass", "secret"],
        ...["--save", "", "--appendonly", "no"],
      ],
      { stdio: "ignore" },
    );
    base = `redis://127.0.0.1:${port}`;
    const withPassword = `redis://:secret@127.0.0.1:${port}`;
    await untilAnswering(withPassword);
    await admin(withPassword, async (redis) => {
      // May connect, ping and ask INFO, nothing more: every store command is refused NOPERM.
      await redis.call(
        "ACL",
        "SETUSER",
        "pinger",
        "on",
        ">pw",
        "~*",
        "+ping",
        "+info",
        "+client",
        "+hello",
      );
    });
  }, 30_000);
  afterAll(async () => {
    if (server !== undefined && server.exitCode === null && server.signalCode === null) {
      const exited = new Promise((resolve) => server?.once("exit", resolve));
      server.kill("SIGKILL");
      await exited;
    }
  });

  const at = (userinfo: string) => base.replace("redis://", `redis://${userinfo}`);

  it.each([
    ["no password", "NOAUTH", ""],
    ["a wrong password", "WRONGPASS", ":wrong@"],
    ["a user allowed nothing a store needs", "NOPERM", "pinger:pw@"],
  ])("%s: (%s), for a writer's open and a reader's", async (_what, code, userinfo) => {
    const url = withParams(at(userinfo), { prefix: "tessera_test_replies:" });
    const writer = await failureOf(() => openStores(url));
    expect([writer.at, writer.error?.code, writer.error?.message]).toEqual([
      "open",
      "store_unavailable",
      `could not open the Redis store (${code})`,
    ]);
    const reader = await failureOf(() => openAuditReader(url));
    expect([reader.at, reader.error?.code, reader.error?.message]).toEqual([
      "open",
      "audit_unavailable",
      `could not open the Redis store (${code})`,
    ]);
  });
});
