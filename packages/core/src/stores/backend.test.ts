import { describe, expect, it } from "vitest";
import { auditEventOf } from "../../test/fixtures.js";
import { InMemoryAuditSink } from "../memory/audit-sink.js";
import { type ConnectOptions, type StoreBackend, storeOpeners } from "./backend.js";

/** A backend that records what the openers asked of it. */
function recordingBackend(withInspect: boolean) {
  const calls: string[] = [];
  const unused = () => {
    throw new Error("not used here");
  };
  const backend: StoreBackend<{ readonly readOnly: boolean }> = {
    name: "Recording",
    connect: (_url: string, options?: ConnectOptions) => {
      calls.push(`connect readOnly=${options?.readOnly === true}`);
      return { readOnly: options?.readOnly === true };
    },
    prepare: () => {
      calls.push("prepare");
    },
    ...(withInspect
      ? {
          inspect: () => {
            calls.push("inspect");
          },
        }
      : {}),
    disconnect: () => {
      calls.push("disconnect");
    },
    usage: unused,
    grants: unused,
    claims: unused,
    audit: () => new InMemoryAuditSink(),
  };
  return { calls, openers: storeOpeners(backend) };
}

describe("storeOpeners: the audit reader", () => {
  it("connects read-only and inspects, never migrating or self-testing", async () => {
    const { calls, openers } = recordingBackend(true);
    const reader = await openers.openAuditReader("recording:");
    expect(await reader.read()).toEqual([]);
    // Refused by the reader itself, whatever the backend's credentials would allow.
    expect(() => reader.append(auditEventOf("c"))).toThrow(
      expect.objectContaining({ code: "audit_unavailable" }),
    );
    await reader.close();
    expect(calls).toEqual(["connect readOnly=true", "inspect", "disconnect"]);
  });

  it("a writer's open prepares, and is never read-only", async () => {
    const { calls, openers } = recordingBackend(true);
    await (await openers.openAuditSink("recording:")).close();
    expect(calls).toEqual(["connect readOnly=false", "prepare", "disconnect"]);
  });

  it("a backend without inspect opens its readers as writers", async () => {
    const { calls, openers } = recordingBackend(false);
    await (await openers.openAuditReader("recording:")).close();
    expect(calls).toEqual(["connect readOnly=true", "prepare", "disconnect"]);
  });

  it("a failed inspection closes the connection; a driver's failure is audit_unavailable", async () => {
    const calls: string[] = [];
    const failing = storeOpeners({
      ...({} as StoreBackend<object>),
      name: "Failing",
      connect: () => ({}),
      prepare: () => undefined,
      inspect: () => {
        throw Object.assign(new Error("none"), { code: "x" });
      },
      disconnect: () => {
        calls.push("disconnect");
      },
    });
    await expect(failing.openAuditReader("failing:")).rejects.toMatchObject({
      code: "audit_unavailable",
    });
    expect(calls).toEqual(["disconnect"]);
  });
});
