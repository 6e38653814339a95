/**
 * openTurnAuthority checks the common access-context shape without the schema (kernel.ts,
 * `parseContext`). Both paths must accept and refuse alike, and a turn must see the context
 * the schema would have produced: these cases compare the kernel with the schema itself.
 */
import { describe, expect, it } from "vitest";
import { AccessContextSchema } from "../contracts/schemas.js";
import { InMemoryAuditSink } from "../memory/audit-sink.js";
import { InMemoryGrantStore } from "../memory/grant-store.js";
import { createKernel } from "./kernel.js";

const base = { namespaceId: "ns", actor: "asker", authority: "host", traceId: "t" };
const long = "x".repeat(512);
const emoji = "😀".repeat(300); // 300 code points, 600 UTF-16 units: the schema counts points.

class Context {
  namespaceId = "ns";
  actor = "asker";
  authority = "host";
  traceId = "t";
}

const cases: [string, unknown][] = [
  ["the four required IDs", base],
  ["with owner and purpose", { ...base, owner: "alice", purpose: "support" }],
  ["keys in another order", { traceId: "t", authority: "host", actor: "asker", namespaceId: "ns" }],
  ["an ID of 512 characters", { ...base, actor: long }],
  ["an ID of 513 characters", { ...base, actor: `${long}x` }],
  ["an ID of 300 emoji", { ...base, actor: emoji }],
  ["an empty ID", { ...base, actor: "" }],
  ["a missing required ID", { namespaceId: "ns", actor: "asker", authority: "host" }],
  ["a number for an ID", { ...base, traceId: 7 }],
  ["an optional ID set to undefined", { ...base, owner: undefined }],
  ["an optional ID set to null", { ...base, purpose: null }],
  ["an unknown key", { ...base, extra: "x" }],
  ["now", { ...base, now: "2026-01-01T00:00:00.000Z" }],
  ["a malformed now", { ...base, now: "yesterday" }],
  ["a class instance", new Context()],
  ["a null-prototype object", Object.assign(Object.create(null), base)],
  ["an array", [base]],
  ["null", null],
  ["a string", "ns"],
];

/** The principal fields of the event a refused decision records: the context the turn holds. */
async function contextSeen(input: unknown) {
  const audit = new InMemoryAuditSink();
  const kernel = createKernel({ grants: new InMemoryGrantStore(), audit });
  let turn: Awaited<ReturnType<typeof kernel.openTurnAuthority>>;
  try {
    turn = await kernel.openTurnAuthority(input as typeof base);
  } catch (error) {
    return { code: (error as { code?: string }).code };
  }
  await turn.authorize({ action: "files.read", resource: { namespace: "files", path: ["a"] } });
  await turn.close();
  const [event] = audit.events;
  const { namespaceId, actor, authority, owner, purpose, traceId } = event ?? {};
  return { seen: { namespaceId, actor, authority, owner, purpose, traceId } };
}

describe("openTurnAuthority accepts exactly the contexts the schema accepts", () => {
  it.each(cases)("%s", async (_, input) => {
    const schema = AccessContextSchema.safeParse(input);
    const result = await contextSeen(input);
    if (!schema.success) {
      expect(result).toEqual({ code: "invalid_input" });
      return;
    }
    const { namespaceId, actor, authority, owner, purpose, traceId } = schema.data;
    expect(result).toEqual({ seen: { namespaceId, actor, authority, owner, purpose, traceId } });
  });

  it("a turn keeps its own copy: changing the input after opening changes nothing", async () => {
    const input = { ...base, owner: "alice" };
    const kernel = createKernel({ grants: new InMemoryGrantStore() });
    const turn = await kernel.openTurnAuthority(input);
    input.traceId = "changed";
    expect(turn.traceId).toBe("t");
    await turn.close();
  });
});
