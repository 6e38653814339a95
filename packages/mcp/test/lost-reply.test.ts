import {
  type ActLedger,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantUsageStore,
  TesseraError,
  verifyAuditChain,
} from "@tessera/core";
import { composeActLedger } from "@tessera/core/store-kit";
import { afterEach, describe, expect, it } from "vitest";
import { ALICE_TOKEN, type Harness, startHarness, toolGrant } from "./support.js";

/**
 * A store reply lost after the gateway's act was recorded (issue 22): the call fails
 * `claim_store_unavailable` and nothing is forwarded; the gateway's kernel withdraws the act
 * in the background, so a retry with the same idempotency key is refused
 * `authority_unavailable` (the withdrawal's answer), the ticket's use is back, and audit holds
 * the allowed event, then `act_withdrawn` stamped with the call's tool like the act's.
 */
const KEY = "io.tessera/idempotency-key";
const CODE = "io.tessera/code";
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/**
 * A ledger over `inner` whose first act with a claim is recorded and then reported lost (the
 * store's reply never came); `withdraw` is `inner`'s unless given.
 */
function losingFirstReply(inner: ActLedger, withdraw?: ActLedger["withdraw"]): ActLedger {
  let loseNext = true;
  return {
    record: async (act) => {
      const result = await inner.record(act);
      if (loseNext && act.claim !== undefined) {
        loseNext = false;
        throw new TesseraError("claim_store_unavailable", "the store's reply was lost");
      }
      return result;
    },
    withdraw:
      withdraw ??
      ((withdrawal) => (inner.withdraw as NonNullable<ActLedger["withdraw"]>)(withdrawal)),
  };
}

describe("a lost store reply at the MCP gateway", () => {
  it("is withdrawn: the retry is refused authority_unavailable, the use is back, nothing ran", async () => {
    const claims = new InMemoryClaimStore();
    const usage = new InMemoryGrantUsageStore();
    const audit = new InMemoryAuditSink();
    const acts = losingFirstReply(composeActLedger({ claims, usage, audit }));
    const grant = toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 });
    harness = await startHarness({ claims, usage, audit, acts }, [grant]);
    const alice = await harness.client(ALICE_TOKEN);
    const call = {
      name: "messages.send_message",
      arguments: { to: "bob", text: "hi" },
      _meta: { [KEY]: "lost-1" },
    };
    await expect(alice.callTool(call)).rejects.toSatisfy(
      (e) => (e as { data?: { code?: string } }).data?.code === "claim_store_unavailable",
    );
    expect(harness.counts("send_message")).toBe(0);
    // The withdrawal runs in the background (first attempt after 50 ms): wait for its settle.
    for (let i = 0; i < 200; i++) {
      if ((await claims.listInDoubt()).length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(await claims.listInDoubt()).toEqual([]);
    expect(await usage.getUsage("acme", grant.id)).toBe(0);
    const retry = await alice.callTool(call);
    expect(retry.isError).toBe(true);
    expect(retry._meta?.[CODE]).toBe("authority_unavailable");
    expect(harness.counts("send_message")).toBe(0);
    const events = await audit.read();
    const withdrawn = events.filter((e) => e.reason === "act_withdrawn");
    expect(withdrawn).toHaveLength(1);
    const allowed = events.find((e) => e.reason === "allowed" && e.callId === withdrawn[0]?.callId);
    expect(allowed).toBeDefined();
    expect(withdrawn[0]).toMatchObject({
      outcome: "denied",
      code: "authority_unavailable",
      receipt: "failed",
      grantId: grant.id,
      traceId: allowed?.traceId,
    });
    expect(withdrawn[0]?.detail).toContain("tool messages.send_message");
    expect(verifyAuditChain(events).ok).toBe(true);
    // The ticket's use is back: a new key runs the tool, once.
    const fresh = await alice.callTool({ ...call, _meta: { [KEY]: "lost-2" } });
    expect(fresh.isError ?? false).toBe(false);
    expect(harness.counts("send_message")).toBe(1);
  });

  it("closing the gateway gives a pending withdrawal its last try before the stores close", async () => {
    const claims = new InMemoryClaimStore();
    const usage = new InMemoryGrantUsageStore();
    const audit = new InMemoryAuditSink();
    const inner = composeActLedger({ claims, usage, audit });
    let storeDown = true;
    let withdrawn = 0;
    const acts = losingFirstReply(inner, async (withdrawal) => {
      if (storeDown) throw new TesseraError("claim_store_unavailable", "still down");
      withdrawn++;
      return (inner.withdraw as NonNullable<ActLedger["withdraw"]>)(withdrawal);
    });
    const grant = toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 });
    harness = await startHarness({ claims, usage, audit, acts }, [grant]);
    const alice = await harness.client(ALICE_TOKEN);
    await expect(
      alice.callTool({
        name: "messages.send_message",
        arguments: { to: "bob", text: "hi" },
        _meta: { [KEY]: "lost-at-close" },
      }),
    ).rejects.toBeDefined();
    // Background tries fail meanwhile (at 50, 150, 350 and 750 ms); the next would come ~1.5 s in.
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(await claims.listInDoubt()).toHaveLength(1);
    storeDown = false;
    const closing = harness;
    harness = undefined;
    await closing.close();
    // Withdrawn by the close itself, not by a background try after it.
    expect(withdrawn).toBe(1);
    expect(await claims.listInDoubt()).toEqual([]);
    expect(await usage.getUsage("acme", grant.id)).toBe(0);
    expect((await audit.read()).filter((e) => e.reason === "act_withdrawn")).toHaveLength(1);
  });
});
