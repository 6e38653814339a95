/**
 * The child side of every cross-process test: the conformance cases and the gate workers.
 * Spawned as plain `node worker.js` with an IPC channel; opens the store the parent
 * describes, says "ready", waits for "run", does the task against the real store (or runs a
 * gate over it) and reports. Nothing here shares memory with the parent: only the store does.
 */
import type { AuditSink, ClaimStore, GrantInput, GrantStore, GrantUsageStore } from "@tessera/core";
import type { ProcessSpec } from "./factory.js";
import { runGateTask } from "./gate-task.js";
import { openFromSpec } from "./open-spec.js";
import type { FromWorker, ToWorker, WorkerResult, WorkerTask } from "./worker-protocol.js";

type AnyPort = GrantUsageStore & ClaimStore & GrantStore & AuditSink;

let port: AnyPort | undefined;
let closeAll: (() => Promise<void>) | undefined;

function send(message: FromWorker): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send(message, undefined, undefined, () => resolve());
  });
}

async function openPort(spec: ProcessSpec): Promise<void> {
  const opened = await openFromSpec(spec);
  const bundle = opened as Record<string, unknown>;
  const chosen = spec.pick === undefined ? opened : bundle[spec.pick];
  if (chosen === undefined || chosen === null) {
    throw new Error(`worker: ${spec.exportName} returned no port ${spec.pick ?? ""}`);
  }
  port = chosen as AnyPort;
  const closer = bundle.close;
  if (typeof closer === "function") closeAll = async () => closer.call(bundle);
}

async function run(task: WorkerTask): Promise<WorkerResult> {
  const store = port as AnyPort;
  switch (task.kind) {
    case "consume": {
      const consumedAt: number[] = [];
      let refused = 0;
      for (let i = 0; i < task.times; i++) {
        const result = await store.tryConsume(task.namespaceId, task.grantId, task.maxUses);
        if (result.consumed) consumedAt.push(result.used);
        else refused++;
      }
      return { kind: "consume", consumedAt, refused };
    }
    case "carve": {
      if (typeof store.tryConsumeMany !== "function") {
        throw new Error("worker: the usage store has no tryConsumeMany");
      }
      const consumeMany = store.tryConsumeMany.bind(store);
      const spans: [number, number][][] = [];
      let refused = 0;
      for (const grantId of task.grantIds) {
        const won: [number, number][] = [];
        for (const count of task.counts) {
          const result =
            count === 1
              ? await store.tryConsume(task.namespaceId, grantId, task.maxUses)
              : await consumeMany(task.namespaceId, grantId, count, task.maxUses);
          if (result.consumed) won.push([result.used, count]);
          else refused++;
        }
        spans.push(won);
      }
      return { kind: "carve", spans, refused };
    }
    case "claimAll": {
      const won: number[] = [];
      let lost = 0;
      const order = task.keys.map((_, index) => index);
      if (task.reverse) order.reverse();
      for (const index of order) {
        const result = await store.claim(
          task.keys[index] as (typeof task.keys)[number],
          task.record,
        );
        if (result.status === "claimed") won.push(index);
        else lost++;
      }
      return { kind: "claimAll", won, lost };
    }
    case "claimAndHang": {
      const result = await store.claim(task.key, task.record);
      if (result.status !== "claimed") throw new Error("worker: the probe key was already claimed");
      await send({ type: "claimed" });
      // Block between claim and settle until the parent kills this process with SIGKILL.
      setInterval(() => {}, 60_000);
      return new Promise<never>(() => {});
    }
    case "addGrants": {
      for (const grant of task.grants) await store.add(grant);
      return { kind: "addGrants", added: task.grants.length };
    }
    case "churnGrants": {
      let revoked = 0;
      for (let i = 0; i < task.grants.length; i++) {
        await store.add(task.grants[i] as GrantInput);
        if ((i + 1) % task.revokeEvery === 0) {
          const previous = task.grants[i - 1] as GrantInput;
          if (await store.revoke(previous.namespaceId, previous.id)) revoked++;
        }
      }
      return { kind: "churnGrants", added: task.grants.length, revoked };
    }
    case "watchGrants":
      return { kind: "watchGrants", ...(await watchGrants(store, task)) };
    case "append": {
      for (const event of task.events) await store.append(event);
      return { kind: "append", appended: task.events.length };
    }
    case "gate":
      return { kind: "gate", outcomes: await runGateTask(store, task, send) };
  }
}

async function watchGrants(
  store: GrantStore,
  task: Extract<WorkerTask, { kind: "watchGrants" }>,
): Promise<{ reads: [string, string, string][]; done: boolean }> {
  if (typeof store.grantsVersion !== "function") throw new Error("worker: no grantsVersion");
  const reads: [string, string, string][] = [];
  const deadline = Date.now() + task.deadlineMs;
  while (Date.now() < deadline) {
    const before = await store.grantsVersion(task.namespaceId, task.subject);
    const grants = (await store.listGrants(task.namespaceId, task.subject)) as {
      id: string;
      revokedAt?: string;
    }[];
    const after = await store.grantsVersion(task.namespaceId, task.subject);
    const set = grants.map((g) => `${g.id}:${g.revokedAt === undefined ? 0 : 1}`).sort();
    reads.push([before, set.join(","), after]);
    const revoked = grants.filter((g) => g.revokedAt !== undefined).length;
    if (grants.length === task.finalSize && revoked === task.finalRevoked) {
      return { reads, done: true };
    }
  }
  return { reads, done: false };
}

function failure(error: unknown): FromWorker {
  const code = (error as { code?: unknown })?.code;
  return {
    type: "failed",
    code: typeof code === "string" ? code : undefined,
    message: error instanceof Error ? error.message : String(error),
  };
}

// The parent is gone (test runner killed or timed out): never outlive it as an orphan.
process.on("disconnect", () => process.exit(1));

process.on("message", (message: ToWorker) => {
  void (async () => {
    try {
      if (message.type === "open") {
        await openPort(message.spec);
        await send({ type: "ready" });
        return;
      }
      const result = await run(message.task);
      await closeAll?.();
      await send({ type: "done", result });
      process.exit(0);
    } catch (error) {
      await send(failure(error));
      process.exit(1);
    }
  })();
});
