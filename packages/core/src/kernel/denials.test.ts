import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../contracts/schemas.js";
import type { AppendOptions, AuditSink } from "../ports/audit-sink.js";
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

  it("while the sink fails, denials are written before the reply, without the option", async () => {
    let down = true;
    const { sink, seen } = recordingSink(() => down);
    const recorder = new DenialRecorder(sink);
    recorder.record(event("lost-1"));
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
    expect(seen).toEqual([
      { callId: "ok-3", options: undefined },
      { callId: "late-4", options: { unflushed: true } },
    ]);
  });
});
