import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";

const run = promisify(execFile);

/** A real three-node Redis Cluster of this test's own: its processes, in a temp folder. */
export interface RedisCluster {
  /** `redis://127.0.0.1:<first node>`: the node a cluster client starts from. */
  readonly url: string;
  /** Every node's `redis://` URL, to reach each directly (CLIENT KILL). */
  readonly nodes: readonly string[];
  stop(): Promise<void>;
}

/** Whether `port` and its cluster bus port (`port + 10000`) are free on 127.0.0.1. */
async function free(port: number): Promise<boolean> {
  for (const candidate of [port, port + 10_000]) {
    const ok = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once("error", () => resolve(false));
      server.listen(candidate, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (!ok) return false;
  }
  return true;
}

async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if (!ports.includes(port) && (await free(port))) ports.push(port);
  }
  return ports;
}

async function until(check: () => Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`the test cluster did not come up: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function ask<T>(port: number, work: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0 });
  redis.on("error", () => {});
  await redis.connect();
  try {
    return await work(redis);
  } finally {
    redis.disconnect();
  }
}

/**
 * Starts three `redis-server --cluster-enabled yes` on free ports, each in a folder of a temp
 * directory, joins them with `redis-cli --cluster create … --cluster-replicas 0`, and waits
 * until every node reports `cluster_state:ok`. `stop` kills the three (by their own PIDs) and
 * removes the folder.
 */
export async function startRedisCluster(): Promise<RedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), "tessera-redis-cluster-"));
  const ports = await freePorts(3);
  const children: ChildProcess[] = [];
  const stop = async () => {
    for (const child of children) child.kill("SIGKILL");
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) resolve();
            else child.once("exit", () => resolve());
          }),
      ),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      const child = spawn(
        "redis-server",
        [
          "--port",
          String(port),
          "--bind",
          "127.0.0.1",
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          `nodes-${port}.conf`,
          "--dir",
          dir,
          "--save",
          "",
          "--appendonly",
          "no",
        ],
        { stdio: "ignore" },
      );
      children.push(child);
    }
    for (const port of ports) {
      await until(async () => (await ask(port, (r) => r.ping())) === "PONG", `node ${port}`);
    }
    await run("redis-cli", [
      "--cluster",
      "create",
      ...ports.map((port) => `127.0.0.1:${port}`),
      "--cluster-replicas",
      "0",
      "--cluster-yes",
    ]);
    for (const port of ports) {
      await until(
        async () =>
          ((await ask(port, (r) => r.cluster("INFO"))) as string).includes("cluster_state:ok"),
        `cluster_state on ${port}`,
      );
    }
    const nodes = ports.map((port) => `redis://127.0.0.1:${port}`);
    return { url: nodes[0] as string, nodes, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
