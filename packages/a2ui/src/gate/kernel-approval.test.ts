import {
  type AccessContext,
  type AuthorizeResult,
  a2uiFunctionCapability,
  createKernel,
  explain,
  type GrantInput,
  InMemoryAuditSink,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { CATALOG_ID, callMessage } from "../../test/fixtures/catalog.js";
import { errorCode, setup } from "../../test/fixtures/gate-setup.js";
import { kernelApproval } from "./kernel-approval.js";

/** The gate's approval decided by the kernel: an A2UI call is an act like any other. */
const NOW = 1_700_000_000_000;
const ctx = (actor: string): AccessContext => ({
  namespaceId: "team",
  actor,
  authority: "host",
  owner: "alice",
  traceId: "t",
});

function grant(id: string, subject: string, call: string, maxUses?: number): GrantInput {
  return {
    id,
    namespaceId: "team",
    issuer: "host",
    subject,
    capabilities: [a2uiFunctionCapability(CATALOG_ID, call)],
    ...(maxUses === undefined ? {} : { constraints: { maxUses } }),
    issuedAt: new Date(NOW - 60_000).toISOString(),
  };
}

async function rig(onDecision?: (answer: AuthorizeResult) => void) {
  const grants = new InMemoryGrantStore();
  const usage = new InMemoryGrantUsageStore();
  const audit = new InMemoryAuditSink();
  await grants.add(grant("g-add", "asker", "add"));
  await grants.add(grant("g-once", "once", "add", 1));
  await grants.add(grant("g-odd", "odd", "odd/name~1"));
  const kernel = createKernel({ grants, usage, audit, clock: { now: () => NOW } });
  // The host's session names the actor it acts for; an unknown session has nobody.
  const approve = kernelApproval(
    kernel,
    ({ session }) => (session === "nobody" ? undefined : ctx(session)),
    onDecision,
  );
  return { usage, ...setup({ approve, audit }), audit };
}

describe("kernelApproval", () => {
  it("runs a call the actor's grant covers", async () => {
    const { gate, calls, audit } = await rig();
    const result = await gate.handle("asker", callMessage("c-1"));
    expect(result.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
    expect(audit.events.map((e) => [e.source, e.reason, e.action ?? null])).toEqual([
      ["kernel", "allowed", "a2ui.call"],
      ["gate", "dispatched", null],
    ]);
    expect(audit.events[0]?.resource).toBe(
      `a2ui:/${encodeURIComponent(encodeURIComponent(CATALOG_ID))}/add`,
    );
  });

  it("refuses another function, another actor, and a session with nobody: denied, nothing runs", async () => {
    const { gate, calls, audit } = await rig();
    const other = await gate.handle("asker", callMessage("c-2", { a: 1, b: 2 }, "sharedAdd"));
    const stranger = await gate.handle("stranger", callMessage("c-3"));
    const nobody = await gate.handle("nobody", callMessage("c-4"));
    for (const result of [other, stranger, nobody]) {
      expect(result.receipt).toMatchObject({ status: "denied", reason: "policy_denied" });
      expect(errorCode(result)).toBe("EXECUTION_FAILED");
    }
    expect(calls).toHaveLength(0);
    // The kernel recorded its refusal, with the reason the owner needs.
    expect((await explain(audit, "c-2")).verdict).toBe("never_granted");
    expect((await explain(audit, "c-3")).verdict).toBe("never_granted");
  });

  it("spends a bounded grant once: the second call is refused as spent", async () => {
    const { gate, calls, usage, audit } = await rig();
    const [a, b] = await Promise.all([
      gate.handle("once", callMessage("o-1")),
      gate.handle("once", callMessage("o-2")),
    ]);
    expect([a?.receipt.status, b?.receipt.status].sort()).toEqual(["denied", "dispatched"]);
    expect(calls).toHaveLength(1);
    expect(await usage.getUsage("team", "g-once")).toBe(1);
    const refused = a?.receipt.status === "denied" ? "o-1" : "o-2";
    // The kernel's event is the owner's answer (the library's gate events name only the session).
    expect((await explain(audit, refused)).verdict).toBe("spent");
  });

  it("an onDecision hook that throws or rejects changes nothing: the allowed call runs on the use it spent", async () => {
    for (const hook of [
      () => {
        throw new Error("metrics backend down");
      },
      async () => {
        throw new Error("metrics backend down");
      },
    ]) {
      const { gate, calls, usage } = await rig(hook);
      const result = await gate.handle("once", callMessage("m-1"));
      // Before, the throw after the kernel's allow made the gate refuse (approval_denied) a
      // call whose bounded use was already spent: nothing ran, and the use was gone.
      expect(result.receipt).toMatchObject({ status: "dispatched", reason: "dispatched" });
      expect(calls).toHaveLength(1);
      expect(await usage.getUsage("team", "g-once")).toBe(1);
    }
  });

  it("names a function whose name holds a slash as one whole segment", async () => {
    const { gate, calls } = await rig();
    const result = await gate.handle("odd", callMessage("n-1", { a: 1, b: 2 }, "odd/name~1"));
    expect(result.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
    const add = await gate.handle("odd", callMessage("n-2"));
    expect(add.receipt.status).toBe("denied");
  });
});
