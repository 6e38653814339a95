import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ctx, grant, OWNER } from "../../test/fixtures.js";
import {
  type AuditEvent,
  createKernel,
  explain,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  InProcessTransport,
  isTesseraError,
  JsonlAuditSink,
  messageSendCapability,
} from "../index.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "tessera-audit-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const event = (callId: string): AuditEvent => ({
  at: "2026-01-01T00:00:00.000Z",
  source: "kernel",
  outcome: "denied",
  code: "no_matching_grant",
  reason: "no_capability",
  traceId: "t",
  callId,
});

describe("JsonlAuditSink", () => {
  it("appends one JSON line per event and reads them back, filtered", async () => {
    const path = join(dir, "audit.jsonl");
    const sink = JsonlAuditSink.open(path);
    sink.append(event("a"));
    sink.append(event("b"));
    sink.append(event("a"));
    expect(readFileSync(path, "utf8").trimEnd().split("\n")).toHaveLength(3);
    expect(await sink.read({ callId: "a" })).toMatchObject([event("a"), event("a")]);
    sink.close();
    sink.close(); // idempotent
  });

  it("never truncates: reopening appends after what is there", async () => {
    const path = join(dir, "audit.jsonl");
    const first = JsonlAuditSink.open(path);
    first.append(event("one"));
    first.close();
    const second = JsonlAuditSink.open(path, { fsync: "every" });
    second.append(event("two"));
    expect((await second.read()).map((e) => e.callId)).toEqual(["one", "two"]);
    second.close();
  });

  it("refuses a log holding a line that is not an event, naming only the line number", async () => {
    const path = join(dir, "audit.jsonl");
    const sink = JsonlAuditSink.open(path);
    sink.append(event("ok"));
    appendFileSync(path, '{"secret-token":"hunter2"\n');
    const error = await sink.read().catch((e: unknown) => e);
    expect(isTesseraError(error, "audit_unavailable")).toBe(true);
    expect(String((error as Error).message)).not.toContain("hunter2");
    expect((error as Error).message).toContain("line 2");
    sink.close();
  });

  it("throws audit_unavailable when appending to a closed log or opening an impossible path", () => {
    const sink = JsonlAuditSink.open(join(dir, "audit.jsonl"));
    sink.close();
    expect(() => sink.append(event("late"))).toThrowError(
      expect.objectContaining({ code: "audit_unavailable" }),
    );
    expect(() => JsonlAuditSink.open(join(dir, "missing", "audit.jsonl"))).toThrowError(
      expect.objectContaining({ code: "audit_unavailable" }),
    );
  });

  it("serves the kernel and explain: spent vs never granted survive on disk", async () => {
    const path = join(dir, "audit.jsonl");
    const audit = JsonlAuditSink.open(path);
    const grants = new InMemoryGrantStore();
    await grants.add(
      grant({ constraints: { maxUses: 1 }, capabilities: [messageSendCapability("bob", OWNER)] }),
    );
    const kernel = createKernel({
      grants,
      audit,
      usage: new InMemoryGrantUsageStore(),
      transport: InProcessTransport.echo(),
    });
    const turn = await kernel.openTurnAuthority(ctx());
    await turn.sendMessage({ recipient: "bob", payload: "q", callId: "first" });
    await turn.sendMessage({ recipient: "bob", payload: "q", callId: "again" });
    await turn.sendMessage({ recipient: "zed", payload: "q", callId: "stranger" });
    audit.close();
    const reopened = JsonlAuditSink.open(path);
    expect((await explain(reopened, "first")).verdict).toBe("allowed");
    expect((await explain(reopened, "again")).verdict).toBe("spent");
    expect((await explain(reopened, "stranger")).verdict).toBe("never_granted");
    reopened.close();
  });

  // /dev/full takes no byte: every write fails with ENOSPC, as on a full disk.
  it.skipIf(!existsSync("/dev/full"))(
    "throws audit_unavailable, with the system's error as cause, when the disk refuses a write",
    () => {
      const path = join(dir, "audit.jsonl");
      symlinkSync("/dev/full", path);
      const sink = JsonlAuditSink.open(path);
      let error: unknown;
      try {
        sink.append(event("full"));
      } catch (caught) {
        error = caught;
      }
      expect(isTesseraError(error, "audit_unavailable")).toBe(true);
      expect((error as Error).cause).toMatchObject({ code: "ENOSPC" });
      // The lock was let go: the next append fails the same way rather than waiting on it.
      expect(existsSync(`${path}.lock`)).toBe(false);
    },
  );

  // /dev/null takes every write but no fsync (EINVAL), as a log on a failing disk may not.
  it.skipIf(!existsSync("/dev/null"))(
    "close() throws audit_unavailable, with the system's error as cause, when its final fsync fails",
    () => {
      const path = join(dir, "audit.jsonl");
      symlinkSync("/dev/null", path);
      const sink = JsonlAuditSink.open(path);
      sink.append(event("flushed-at-close"));
      let error: unknown;
      try {
        sink.close();
      } catch (caught) {
        error = caught;
      }
      // Before: a plain Error (EINVAL) from fsyncSync.
      expect(isTesseraError(error, "audit_unavailable")).toBe(true);
      expect((error as Error).cause).toMatchObject({ code: "EINVAL" });
      expect((error as Error).message).toBe(
        "the audit log could not be flushed and closed (EINVAL)",
      );
      // The descriptor was let go with the failure: closing again has nothing left to do.
      expect(() => sink.close()).not.toThrow();
      expect(() => sink.append(event("late"))).toThrow(
        expect.objectContaining({ code: "audit_unavailable" }),
      );
    },
  );

  it("reports isTesseraError for a sink that cannot be opened", () => {
    let error: unknown;
    try {
      JsonlAuditSink.open(dir); // a directory cannot be opened for appending
    } catch (caught) {
      error = caught;
    }
    expect(isTesseraError(error, "audit_unavailable")).toBe(true);
  });
});

describe("JsonlAuditSink.openToRead", () => {
  it("reads and pages as the sink does, opening nothing for writing and making no lock file", async () => {
    const path = join(dir, "audit.jsonl");
    const sink = JsonlAuditSink.open(path);
    for (let i = 0; i < 5; i++) sink.append(event(`c${i}`));
    sink.close();
    const whole = await JsonlAuditSink.open(path).read();
    rmSync(`${path}.lock`, { force: true });
    const bytes = readFileSync(path, "utf8");

    const reader = JsonlAuditSink.openToRead(path);
    expect(await reader.read()).toEqual(whole);
    expect(await reader.read({ callId: "c3" })).toEqual([whole[3]]);
    const pages: number[] = [];
    for await (const page of reader.readPages?.({ pageSize: 2 }) ?? []) pages.push(page.length);
    expect(pages).toEqual([2, 2, 1]);
    expect(() => reader.append(event("late"))).toThrow(
      expect.objectContaining({ code: "audit_unavailable" }),
    );
    reader.close();
    expect(readFileSync(path, "utf8")).toBe(bytes);
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it("a path that is a directory names the system's reason (EISDIR), as reading and paging it do", async () => {
    const reader = JsonlAuditSink.openToRead(dir);
    // Before: "cannot read the audit log", with no reason.
    await expect(reader.read()).rejects.toMatchObject({
      code: "audit_unavailable",
      message: "cannot read the audit log (EISDIR)",
      cause: expect.objectContaining({ code: "EISDIR" }),
    });
    const paging = async () => {
      for await (const _page of reader.readPages?.() ?? []) {
        // nothing: a directory has no page
      }
    };
    await expect(paging()).rejects.toMatchObject({
      code: "audit_unavailable",
      message: "cannot read the audit log (EISDIR)",
    });
    expect(() => JsonlAuditSink.open(dir)).toThrow(
      expect.objectContaining({
        code: "audit_unavailable",
        message: "cannot open the audit log for appending (EISDIR)",
      }),
    );
    // A log that is missing says so the same way: the code, never the path or any content.
    await expect(JsonlAuditSink.openToRead(join(dir, "absent")).read()).rejects.toMatchObject({
      message: "cannot read the audit log (ENOENT)",
    });
  });

  it("a log that is not there is audit_unavailable, and is not made", async () => {
    const path = join(dir, "absent.jsonl");
    await expect(JsonlAuditSink.openToRead(path).read()).rejects.toMatchObject({
      code: "audit_unavailable",
    });
    expect(existsSync(path)).toBe(false);
  });
});
