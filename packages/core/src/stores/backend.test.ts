import { describe, expect, it } from "vitest";
import { auditEventOf } from "../../test/fixtures.js";
import { InMemoryAuditSink } from "../memory/audit-sink.js";
import { InMemoryClaimStore } from "../memory/claim-store.js";
import {
  type ConnectOptions,
  type StoreBackend,
  type StoreVersion,
  storeOpeners,
} from "./backend.js";

/** A backend that records what the openers asked of it; `version` adds the version hook. */
function recordingBackend(withInspect: boolean, version?: StoreVersion) {
  const calls: string[] = [];
  const claims = new InMemoryClaimStore();
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
    ...(version === undefined
      ? {}
      : {
          version: () => {
            calls.push("version");
            return version;
          },
        }),
    disconnect: () => {
      calls.push("disconnect");
    },
    usage: unused,
    grants: unused,
    claims: () => claims,
    audit: () => new InMemoryAuditSink(),
  };
  return { calls, claims, openers: storeOpeners(backend) };
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

describe("storeOpeners: the claim reader", () => {
  const key = { session: "s", functionCallId: "c" };

  it("connects read-only, inspects and reads the version, never migrating", async () => {
    const { calls, claims, openers } = recordingBackend(true, { store: 4, build: 4 });
    await claims.claim(key, { bodyHash: "h", claimedAt: 1 });
    const reader = await openers.openClaimReader("recording:");
    expect((await reader.listInDoubt()).map((claim) => claim.functionCallId)).toEqual(["c"]);
    expect((await reader.get(key))?.bodyHash).toBe("h");
    await reader.close();
    expect(calls).toEqual(["connect readOnly=true", "inspect", "version", "disconnect"]);
  });

  it("hands out the reads only: nothing that claims, settles or forgets a call", async () => {
    const { openers } = recordingBackend(true, { store: 4, build: 4 });
    const reader = await openers.openClaimReader("recording:");
    expect(Object.keys(reader).sort()).toEqual(["close", "get", "listInDoubt"]);
    for (const write of ["claim", "settle", "endSession"]) expect(reader).not.toHaveProperty(write);
    expect(Object.isFrozen(reader)).toBe(true);
    await reader.close();
  });

  it("refuses a store older than this build, saying how to upgrade it, and closes it", async () => {
    const { calls, openers } = recordingBackend(true, { store: 3, build: 4 });
    const refused = openers.openClaimReader("recording:");
    await expect(refused).rejects.toMatchObject({
      code: "schema_unavailable",
      message: expect.stringMatching(
        /at version 3, older than this build \(4\): listing its claims would need it upgraded.*service.*--upgrade/,
      ),
    });
    expect(calls).toEqual(["connect readOnly=true", "inspect", "version", "disconnect"]);
  });

  it("a backend without the version hook opens its claim readers as writers", async () => {
    const { calls, openers } = recordingBackend(true);
    const reader = await openers.openClaimReader("recording:");
    expect(reader).not.toHaveProperty("claim");
    await reader.close();
    expect(calls).toEqual(["connect readOnly=false", "prepare", "disconnect"]);
  });

  it("a driver's failure is claim_store_unavailable", async () => {
    const failing = storeOpeners({
      ...({} as StoreBackend<object>),
      name: "Failing",
      connect: () => {
        throw Object.assign(new Error("refused"), { code: "ECONNREFUSED" });
      },
      version: () => ({ store: 1, build: 1 }),
    });
    await expect(failing.openClaimReader("failing:")).rejects.toMatchObject({
      code: "claim_store_unavailable",
      message: "could not open the Failing store (ECONNREFUSED)",
    });
  });
});
