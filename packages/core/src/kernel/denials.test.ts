import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../contracts/schemas.js";
import type { AppendOptions, AuditSink, ReadableAuditSink } from "../ports/audit-sink.js";
import { DenialRecorder } from "./denials.js";

/**
 * How the recorder hands events to its sink: written after the reply they are appended
 * `unflushed` (the sink may skip its own fsync, within the bound it documents); written
 * before the reply — by choice, or while the sink fails — they are appended as any event.
 */

function event(callId: string): AuditEvent {
  return {
    at: "2026-01-01T00:00:00.000Z",
    source: "kernel",
    outcome: "denied",
    code: "tool_unavailable",
    reason: "no_capability",
    traceId: "t-1",
    callId,
    actor: "asker",
    namespaceId: "ns",
  };
}

function recordingSink(fail: () => boolean = () => false) {
  const seen: { callId: string; options: AppendOptions | undefined }[] = [];
  const sink: AuditSink = {
    append: async (appended: AuditEvent, options?: AppendOptions) => {
      if (fail()) throw new Error("disk full");
      seen.push({ callId: appended.callId, options });
    },
  };
  return { sink, seen };
}

describe("DenialRecorder", () => {
  it("after the reply, an event is appended unflushed, once the window is drained", async () => {
    const { sink, seen } = recordingSink();
    const recorder = new DenialRecorder(sink);
    expect(recorder.record(event("d-1"))).toBeUndefined();
    expect(recorder.record(event("d-2"))).toBeUndefined();
    expect(seen).toEqual([]);
    await recorder.drain();
    expect(seen).toEqual([
      { callId: "d-1", options: { unflushed: true } },
      { callId: "d-2", options: { unflushed: true } },
    ]);
  });

  it('"before-reply" appends without the option, and the answer waits for it', async () => {
    const { sink, seen } = recordingSink();
    const recorder = new DenialRecorder(sink, "before-reply");
    await recorder.record(event("d-1"));
    expect(seen).toEqual([{ callId: "d-1", options: undefined }]);
  });

  it("while the sink fails, denials are written before the reply, after the kept ones", async () => {
    let down = true;
    const { sink, seen } = recordingSink(() => down);
    const recorder = new DenialRecorder(sink, "after-reply", { firstMs: 60_000, maxMs: 60_000 });
    recorder.record(event("kept-1"));
    await recorder.drain();
    expect(recorder.failing).toBe(true);
    await expect(recorder.record(event("refused-2"))).rejects.toMatchObject({
      code: "audit_unavailable",
    });
    down = false;
    await recorder.record(event("ok-3"));
    expect(recorder.failing).toBe(false);
    recorder.record(event("late-4"));
    await recorder.drain();
    recorder.close();
    // The event refused after its reply is written first, once the sink takes writes again;
    // the one refused before its reply was answered 503 and is not kept.
    expect(seen).toEqual([
      { callId: "kept-1", options: undefined },
      { callId: "ok-3", options: undefined },
      { callId: "late-4", options: { unflushed: true } },
    ]);
  });

  it("turns back by itself once the sink writes again: no denial needs to arrive", async () => {
    let down = true;
    let attempts = 0;
    const { sink, seen } = recordingSink(() => {
      attempts++;
      return down;
    });
    const recorder = new DenialRecorder(sink, "after-reply", { firstMs: 5, maxMs: 20 });
    recorder.record(event("kept-1"));
    recorder.record(event("kept-2"));
    await recorder.drain();
    expect(recorder.failing).toBe(true);
    // Retried in the background while the sink stays down, and kept meanwhile.
    await waitFor(() => attempts >= 6);
    expect(recorder.failing).toBe(true);
    expect(seen).toEqual([]);
    down = false;
    await waitFor(() => !recorder.failing);
    expect(seen.map((s) => s.callId)).toEqual(["kept-1", "kept-2"]);
    recorder.close();
  });

  it("close stops the retries: a sink down for good keeps nothing running", async () => {
    let attempts = 0;
    const { sink } = recordingSink(() => {
      attempts++;
      return true;
    });
    const recorder = new DenialRecorder(sink, "after-reply", { firstMs: 5, maxMs: 5 });
    recorder.record(event("kept-1"));
    await recorder.drain();
    recorder.close();
    const after = attempts;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(attempts).toBe(after);
    expect(recorder.failing).toBe(true);
  });

  it("a background retry that finds nothing kept leaves later blips written and readiness back", async () => {
    let down = true;
    const { sink, seen } = recordingSink(() => down);
    const recorder = new DenialRecorder(sink, "after-reply", { firstMs: 40, maxMs: 80 });
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    try {
      recorder.record(event("a"));
      await waitFor(() => recorder.failing);
      down = false;
      // A request flushes what was kept before the retry timer fires: the timer then finds
      // nothing kept, and its flush ends at once.
      await recorder.record(event("b"));
      expect(recorder.failing).toBe(false);
      await sleep(60);
      // A second blip: kept, then written by the background retry once the sink is back.
      down = true;
      recorder.record(event("c"));
      await waitFor(() => recorder.failing);
      down = false;
      await waitFor(() => !recorder.failing);
      expect(seen.map((s) => s.callId)).toEqual(["a", "b", "c"]);
    } finally {
      recorder.close();
    }
  });
});

describe("DenialRecorder: a write whose reply was lost", () => {
  it("is not written twice to a sink that can be read: the retry finds it there", async () => {
    const stored: AuditEvent[] = [];
    let loseReplies = 2;
    const sink: ReadableAuditSink = {
      append: async (appended: AuditEvent) => {
        stored.push(appended);
        // Written, but the caller never hears so (a cut connection after the commit).
        if (loseReplies-- > 0) throw new Error("connection reset");
      },
      read: async (filter) => stored.filter((e) => e.callId === filter?.callId),
    };
    const recorder = new DenialRecorder(sink, "after-reply", { firstMs: 20, maxMs: 40 });
    try {
      recorder.record(event("a"));
      recorder.record(event("b"));
      await waitFor(() => recorder.failing);
      await waitFor(() => !recorder.failing);
      expect(stored.map((e) => e.callId)).toEqual(["a", "b"]);
      // Another decision of the same content and call ID, later and heard: written again.
      await recorder.drain();
      recorder.record(event("a"));
      await recorder.drain();
      expect(stored.map((e) => e.callId)).toEqual(["a", "b", "a"]);
    } finally {
      recorder.close();
    }
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the condition");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
