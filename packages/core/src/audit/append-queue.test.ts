import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../contracts/schemas.js";
import { AuditAppendQueue } from "./append-queue.js";

const event = (callId: string, namespaceId?: string): AuditEvent => ({
  at: "2026-01-01T00:00:00.000Z",
  source: namespaceId === undefined ? "gate" : "kernel",
  outcome: "denied",
  code: "no_matching_grant",
  reason: "no_capability",
  traceId: "t",
  callId,
  ...(namespaceId === undefined ? {} : { namespaceId }),
});

interface Write {
  readonly stream: string;
  readonly head: number;
  readonly calls: readonly string[];
}

/** A queue whose head counts events written; each write waits until the test releases it. */
function recordingQueue(maxBatch: number) {
  const writes: Write[] = [];
  const gates: ((fail?: Error) => void)[] = [];
  const queue = new AuditAppendQueue<number>({
    maxBatch,
    startHead: 0,
    write: (stream, head, events) => {
      writes.push({ stream, head, calls: events.map((e) => e.callId) });
      return new Promise((resolve, reject) => {
        gates.push((fail) => (fail ? reject(fail) : resolve(head + events.length)));
      });
    },
  });
  const release = async (fail?: Error) => {
    const gate = gates.shift();
    if (gate === undefined) throw new Error("no write in flight");
    gate(fail);
    // Lets the queue see the answer and start its next write.
    await new Promise<void>((resolve) => setImmediate(resolve));
  };
  return { queue, writes, release };
}

describe("AuditAppendQueue", () => {
  it("keeps one write in flight per stream; what waits goes in the next, in batches, in order", async () => {
    const { queue, writes, release } = recordingQueue(2);
    const appended = ["a", "b", "c", "d"].map((id) => queue.append(event(id, "n")));
    expect(writes).toEqual([{ stream: "n", head: 0, calls: ["a"] }]);
    await release();
    expect(writes.at(-1)).toEqual({ stream: "n", head: 1, calls: ["b", "c"] });
    await release();
    expect(writes.at(-1)).toEqual({ stream: "n", head: 3, calls: ["d"] });
    await release();
    await Promise.all(appended);
    expect(writes).toHaveLength(3);
  });

  it("streams do not wait for one another", async () => {
    const { queue, writes, release } = recordingQueue(8);
    const appended = [event("a", "n1"), event("b", "n2"), event("c")].map((e) => queue.append(e));
    expect(writes.map((w) => w.stream)).toEqual(["n1", "n2", ""]);
    for (let i = 0; i < 3; i++) await release();
    await Promise.all(appended);
  });

  it("a failed write rejects its batch only, and the next starts from the start head again", async () => {
    const { queue, writes, release } = recordingQueue(8);
    await Promise.all([queue.append(event("a", "n")), release()]);
    const failed = queue.append(event("b", "n"));
    const outcome = failed.then(
      () => "written",
      (error: Error) => error.message,
    );
    const later = queue.append(event("c", "n"));
    await release(new Error("lost"));
    expect(await outcome).toBe("lost");
    expect(writes.at(-1)).toEqual({ stream: "n", head: 0, calls: ["c"] });
    await release();
    await later;
  });

  it("refuses a malformed event before any write", async () => {
    const { queue, writes } = recordingQueue(8);
    const bad = { ...event("a", "n"), outcome: "maybe" } as unknown as AuditEvent;
    await expect(queue.append(bad)).rejects.toMatchObject({ code: "invalid_input" });
    expect(writes).toEqual([]);
  });
});
