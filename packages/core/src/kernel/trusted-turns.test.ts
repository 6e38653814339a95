import { describe, expect, it } from "vitest";
import { ctx, grant, NS, OWNER, rig } from "../../test/fixtures.js";
import { MESSAGE_SEND_ACTION, messageSendCapability } from "../contracts/messages.js";
import { deriveGrant } from "../delegation/derive.js";
import { InMemoryClaimStore } from "../memory/claim-store.js";
import type { Act, ActLedger } from "../ports/act-ledger.js";
import type { GrantSource } from "../ports/grant-source.js";
import { composeActLedger } from "../stores/composed-act-ledger.js";
import { createKernel } from "./kernel.js";

/**
 * Warm turns taken on trust: when the act ledger checks grant versions in each act's
 * transaction (`checksVersionsIn` = the source's `versionSpace`), a turn whose grants are
 * cached opens without reading their version; an act that stands on them carries the versions
 * and the ledger refuses it `stale` when one moved (nothing written), after which the kernel
 * reads the grants and decides again. A refusal is confirmed by a version read before it
 * stands. The ledger here checks against the in-memory grant store, as a shared store does in
 * its transaction; every version the kernel reads is counted.
 */

function trustingRig(options: { ledgerSpace?: object } = {}) {
  const base = rig();
  const space = {};
  let versionReads = 0;
  const source: GrantSource = {
    listGrants: (ns, subject) => base.grants.listGrants(ns, subject),
    grantsVersion: async (ns, subject) => {
      versionReads++;
      return base.grants.grantsVersion(ns, subject);
    },
    versionSpace: space,
  };
  const claims = new InMemoryClaimStore();
  const inner = composeActLedger({ claims, usage: base.usage, audit: base.audit });
  const recorded: Act[] = [];
  let stale = 0;
  const acts: ActLedger = {
    checksVersionsIn: options.ledgerSpace ?? space,
    async record(act) {
      recorded.push(act);
      for (const check of act.versions ?? []) {
        if ((await base.grants.grantsVersion(check.namespaceId, check.subject)) !== check.version) {
          stale++;
          return { status: "stale" };
        }
      }
      const { versions: _versions, ...rest } = act;
      return inner.record(rest);
    },
  };
  const delivered: string[] = [];
  const kernel = createKernel({
    grants: source,
    usage: base.usage,
    audit: base.audit,
    acts,
    clock: base.clock,
    transport: {
      deliver: async (envelope) => {
        delivered.push(envelope.callId as string);
        return { status: "delivered", reply: "ok" };
      },
    },
  });
  const ticketTo = (recipient: string, id: string, maxUses = 10) =>
    base.grants.add(
      grant({
        id,
        capabilities: [messageSendCapability(recipient, OWNER)],
        constraints: { maxUses },
      }),
    );
  const send = async (recipient: string, callId: string) => {
    const turn = await kernel.openTurnAuthority(ctx());
    try {
      return await turn.sendMessage({ recipient, payload: "hi", callId });
    } finally {
      await turn.close();
    }
  };
  return {
    ...base,
    kernel,
    recorded,
    delivered,
    ticketTo,
    send,
    get versionReads() {
      return versionReads;
    },
    get stale() {
      return stale;
    },
    resetReads: () => {
      versionReads = 0;
    },
  };
}

describe("warm turns taken on trust", () => {
  it("a warm turn reads no version: its act carries the version, checked by the ledger alone", async () => {
    const r = trustingRig();
    await r.ticketTo("bob", "t-bob");
    expect(await r.send("bob", "c1")).toMatchObject({ status: "delivered" });
    expect(r.versionReads).toBe(1);
    r.resetReads();
    expect(await r.send("bob", "c2")).toMatchObject({ status: "delivered" });
    expect(r.versionReads).toBe(0);
    const version = await r.grants.grantsVersion(NS, ctx().actor);
    expect(r.recorded.at(-1)?.versions).toEqual([
      { namespaceId: NS, subject: ctx().actor, version },
    ]);
    expect(r.delivered).toEqual(["c1", "c2"]);
  });

  it("a grant revoked between turns: the warm act is stale, read again and refused; nothing spent or sent", async () => {
    const r = trustingRig();
    await r.ticketTo("bob", "t-bob");
    expect(await r.send("bob", "c1")).toMatchObject({ status: "delivered" });
    expect(await r.usage.getUsage(NS, "t-bob")).toBe(1);
    await r.grants.revoke(NS, "t-bob");
    r.resetReads();
    // Refused as a turn that read the revocation refuses: the grant is there, revoked.
    expect(await r.send("bob", "c2")).toEqual({ status: "denied", code: "tool_unavailable" });
    expect(r.stale).toBe(1);
    // The stale act wrote nothing; the grants were read once more, the refusal recorded.
    expect(r.versionReads).toBe(1);
    expect(await r.usage.getUsage(NS, "t-bob")).toBe(1);
    expect(r.delivered).toEqual(["c1"]);
    await r.kernel.drain?.();
    const events = r.audit.events.filter((event) => event.callId === "c2");
    expect(events.map((event) => event.outcome)).toEqual(["denied"]);
  });

  it("a grant added since the cache filled: a warm refusal is confirmed first, and the new grant allows", async () => {
    const r = trustingRig();
    await r.ticketTo("bob", "t-bob");
    expect(await r.send("carol", "c1")).toMatchObject({ status: "denied" });
    await r.ticketTo("carol", "t-carol");
    r.resetReads();
    expect(await r.send("carol", "c2")).toMatchObject({ status: "delivered", grantId: "t-carol" });
    expect(r.versionReads).toBe(1);
    expect(r.delivered).toEqual(["c2"]);
  });

  it("a warm refusal that stands costs the one version read every refusal had", async () => {
    const r = trustingRig();
    await r.ticketTo("bob", "t-bob");
    await r.send("bob", "c1");
    r.resetReads();
    expect(await r.send("carol", "c2")).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.versionReads).toBe(1);
    expect(r.stale).toBe(0);
  });

  it("many sends in flight on one warm turn over a revoked grant: one read, every one refused", async () => {
    const r = trustingRig();
    await r.ticketTo("bob", "t-bob");
    await r.send("bob", "c0");
    await r.grants.revoke(NS, "t-bob");
    r.resetReads();
    const turn = await r.kernel.openTurnAuthority(ctx());
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        turn.sendMessage({ recipient: "bob", payload: "hi", callId: `m${i}` }),
      ),
    );
    await turn.close();
    for (const result of results) expect(result).toMatchObject({ status: "denied" });
    expect(r.versionReads).toBe(1);
    expect(r.delivered).toEqual(["c0"]);
    expect(await r.usage.getUsage(NS, "t-bob")).toBe(1);
  });

  it("once an act's versions are checked, the turn stands on them: later acts carry none", async () => {
    const r = trustingRig();
    await r.ticketTo("bob", "t-bob");
    await r.send("bob", "c0");
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.sendMessage({ recipient: "bob", payload: "1", callId: "w1" })).toMatchObject({
      status: "delivered",
    });
    expect(await turn.sendMessage({ recipient: "bob", payload: "2", callId: "w2" })).toMatchObject({
      status: "delivered",
    });
    await turn.close();
    expect(r.recorded.at(-2)?.versions).toHaveLength(1);
    expect(r.recorded.at(-1)?.versions).toBeUndefined();
  });

  it("listTools on a warm turn confirms its grants first (a tool granted since is listed)", async () => {
    const r = trustingRig();
    await r.ticketTo("bob", "t-bob");
    await r.send("bob", "c0");
    await r.grants.add(
      grant({
        id: "reader",
        capabilities: [
          {
            resource: { namespace: "files", path: ["cells"], owner: OWNER },
            actions: ["files.read"],
            scope: "exact",
          },
        ],
      }),
    );
    r.resetReads();
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.listTools()).toEqual(["files.read", MESSAGE_SEND_ACTION].sort());
    await turn.close();
    expect(r.versionReads).toBe(1);
  });

  it("a chain's holders are checked too: an ancestor's new grant makes the warm act stale", async () => {
    const r = trustingRig();
    const top = await r.grants.add(
      grant({
        id: "top",
        subject: "parent",
        capabilities: [messageSendCapability("bob", OWNER)],
        constraints: { maxUses: 10 },
      }),
    );
    await r.grants.add(
      deriveGrant(
        top,
        {
          id: "leaf",
          subject: ctx().actor,
          capabilities: [messageSendCapability("bob", OWNER)],
          constraints: { maxUses: 5 },
        },
        { issuer: "parent" },
      ),
    );
    expect(await r.send("bob", "c1")).toMatchObject({ status: "delivered", grantId: "leaf" });
    await r.grants.add(
      grant({
        id: "other",
        subject: "parent",
        capabilities: [messageSendCapability("dave", OWNER)],
      }),
    );
    r.resetReads();
    expect(await r.send("bob", "c2")).toMatchObject({ status: "delivered", grantId: "leaf" });
    expect(r.stale).toBe(1);
    const subjects = r.recorded
      .find((act) => act.event.callId === "c2")
      ?.versions?.map((v) => v.subject);
    expect(subjects).toEqual([ctx().actor, "parent"]);
  });

  it("a ledger that checks another store's versions: every turn reads its version, acts carry none", async () => {
    const r = trustingRig({ ledgerSpace: {} });
    await r.ticketTo("bob", "t-bob");
    await r.send("bob", "c1");
    r.resetReads();
    expect(await r.send("bob", "c2")).toMatchObject({ status: "delivered" });
    expect(r.versionReads).toBe(1);
    expect(r.recorded.every((act) => act.versions === undefined)).toBe(true);
  });
});
