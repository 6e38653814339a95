import { describe, expect, it } from "vitest";
import { cap, ctx, grant, NS, OWNER, rig } from "../../test/fixtures.js";
import { verifyAuditChain } from "../audit/verify.js";
import { TesseraError } from "../contracts/errors.js";
import { messageSendCapability } from "../contracts/messages.js";
import { InMemoryClaimStore } from "../memory/claim-store.js";
import type { Act, ActLedger } from "../ports/act-ledger.js";
import type { Clock } from "../ports/clock.js";
import type { GrantSource } from "../ports/grant-source.js";
import { composeActLedger } from "../stores/composed-act-ledger.js";
import { createKernel } from "./kernel.js";
import type { AuthorizeRequest, KernelOptions, SendMessageRequest } from "./types.js";

/**
 * The caller's request object is read once, at entry, into a snapshot the kernel owns: a host
 * that reuses one object for its next call, a getter or a Proxy that answers differently on
 * each read, cannot make the kernel decide one thing and do or record another. A read that
 * throws is a malformed request (`invalid_request`, one event, nothing spent). A clock that
 * gives no instant fails closed before anything is spent; a lease closed while its act was
 * being recorded does nothing more.
 */

const READ = "files.read";

/** A kernel over the in-memory act ledger; `record` can be held until released. */
function ledgerRig(extra: Partial<KernelOptions> = {}) {
  const base = rig();
  const claims = new InMemoryClaimStore();
  const inner = composeActLedger({ claims, usage: base.usage, audit: base.audit });
  let hold: Promise<void> | undefined;
  let recording: (() => void) | undefined;
  const acts: ActLedger = {
    async record(act: Act) {
      recording?.();
      if (hold !== undefined) await hold;
      return inner.record(act);
    },
    withdraw: (withdrawal) =>
      (inner.withdraw as NonNullable<ActLedger["withdraw"]>).call(inner, withdrawal),
  };
  const delivered: string[] = [];
  const kernel = createKernel({
    grants: base.grants,
    usage: base.usage,
    audit: base.audit,
    acts,
    clock: base.clock,
    transport: {
      deliver: async (envelope) => {
        delivered.push(`${envelope.callId}->${envelope.recipient}:${String(envelope.payload)}`);
        return { status: "delivered" };
      },
    },
    ...extra,
  });
  /** Holds every record from now on; resolves once one is waiting; `release` lets them go. */
  const holdRecords = () => {
    let release = () => {};
    hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const waiting = new Promise<void>((resolve) => {
      recording = resolve;
    });
    return { waiting, release };
  };
  return { ...base, claims, kernel, delivered, holdRecords };
}

/** Warm turns on trust, as trusted-turns.test.ts: a moved version makes the act `stale`. */
function trustingRig() {
  const base = rig();
  const space = {};
  const source: GrantSource = {
    listGrants: (ns, subject) => base.grants.listGrants(ns, subject),
    grantsVersion: (ns, subject) => base.grants.grantsVersion(ns, subject),
    versionSpace: space,
  };
  const inner = composeActLedger({
    claims: new InMemoryClaimStore(),
    usage: base.usage,
    audit: base.audit,
  });
  let stale = 0;
  const acts: ActLedger = {
    checksVersionsIn: space,
    async record(act) {
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
        delivered.push(`${envelope.callId}->${envelope.recipient}`);
        return { status: "delivered" };
      },
    },
  });
  return {
    ...base,
    kernel,
    delivered,
    get stale() {
      return stale;
    },
  };
}

const labels = async (audit: {
  read(): Promise<readonly { callId: string; reason: string; resource?: string }[]>;
}) => (await audit.read()).map((event) => `${event.callId}:${event.reason}:${event.resource}`);

describe("a request is read once, into the kernel's own snapshot", () => {
  for (const ledger of [false, true]) {
    const which = ledger ? "over an act ledger" : "without a ledger";

    it(`a reused send request: each call delivers to the recipient it was decided for (${which})`, async () => {
      const r = ledger ? ledgerRig() : { ...rig(), delivered: undefined };
      for (const recipient of ["bob", "carol"]) {
        await r.grants.add(grant({ capabilities: [messageSendCapability(recipient, OWNER)] }));
      }
      const turn = await r.kernel.openTurnAuthority(ctx());
      const request = { recipient: "", payload: "", callId: "" };
      const pending = [];
      for (const recipient of ["bob", "carol", "mallory"]) {
        request.recipient = recipient;
        request.payload = `for ${recipient}`;
        request.callId = `call-${recipient}`;
        pending.push(turn.sendMessage(request));
      }
      const results = await Promise.all(pending);
      await r.kernel.drain?.();
      expect(results.map((result) => result.status)).toEqual(["delivered", "delivered", "denied"]);
      const delivered =
        r.delivered ??
        r.transport.delivered.map((e) => `${e.callId}->${e.recipient}:${String(e.payload)}`);
      expect(delivered).toEqual(["call-bob->bob:for bob", "call-carol->carol:for carol"]);
      expect((await labels(r.audit)).sort()).toEqual([
        "call-bob:allowed:messages:/bob",
        "call-carol:allowed:messages:/carol",
        "call-mallory:no_capability:messages:/mallory",
      ]);
    });

    it(`a getter or a Proxy cannot answer the check one path and the decision another (${which})`, async () => {
      const r = ledger ? ledgerRig() : rig();
      await r.grants.add(
        grant({ capabilities: [cap(["proj"], { actions: [READ], scope: "descendants" })] }),
      );
      const turn = await r.kernel.openTurnAuthority(ctx());
      let reads = 0;
      const flipping = {
        action: READ,
        callId: "flip",
        get resource() {
          reads++;
          return { namespace: "files", path: reads === 1 ? ["proj", "ok"] : ["proj", ".."] };
        },
      };
      expect(await turn.authorize(flipping)).toMatchObject({ status: "allowed" });
      expect(reads).toBe(1);
      const segmentReads = new Map<PropertyKey, number>();
      const path = new Proxy(["proj", "ok"], {
        get(target, key, receiver) {
          segmentReads.set(key, (segmentReads.get(key) ?? 0) + 1);
          if (key === "1" && (segmentReads.get(key) ?? 0) > 1) return "..";
          return Reflect.get(target, key, receiver);
        },
      });
      const proxied = { action: READ, callId: "proxy", resource: { namespace: "files", path } };
      expect(await turn.authorize(proxied)).toMatchObject({ status: "allowed" });
      expect(segmentReads.get("1")).toBe(1);
      expect(segmentReads.get("length")).toBe(1);
      await r.kernel.drain?.();
      expect(await labels(r.audit)).toEqual([
        "flip:allowed:files:/proj/ok",
        "proxy:allowed:files:/proj/ok",
      ]);
    });

    it(`a request or payload whose read throws is refused invalid_request, with its event (${which})`, async () => {
      const r = ledger ? ledgerRig() : rig();
      await r.grants.add(
        grant({
          capabilities: [messageSendCapability("bob", OWNER)],
          constraints: { maxUses: 5 },
        }),
      );
      const turn = await r.kernel.openTurnAuthority(ctx());
      const boom = () => {
        throw new Error("boom");
      };
      const refused = { status: "denied", code: "invalid_request" };
      const sends: SendMessageRequest[] = [
        {
          callId: "s-recipient",
          payload: 1,
          get recipient(): string {
            return boom();
          },
        },
        {
          callId: "s-payload",
          recipient: "bob",
          get payload() {
            return boom();
          },
        },
        {
          callId: "s-deep",
          recipient: "bob",
          payload: {
            inner: {
              get x() {
                return boom();
              },
            },
          },
        },
        new Proxy({} as SendMessageRequest, { get: boom }),
      ];
      for (const request of sends) expect(await turn.sendMessage(request)).toEqual(refused);
      const authorizes: AuthorizeRequest[] = [
        {
          callId: "a-resource",
          action: READ,
          get resource(): AuthorizeRequest["resource"] {
            return boom();
          },
        },
        new Proxy({} as AuthorizeRequest, { get: boom }),
      ];
      for (const request of authorizes) expect(await turn.authorize(request)).toEqual(refused);
      await r.kernel.drain?.();
      const events = await r.audit.read();
      expect(events).toHaveLength(6);
      expect(events.every((event) => event.reason === "invalid_request")).toBe(true);
      expect(events.slice(0, 3).map((event) => event.callId)).toEqual([
        "s-recipient",
        "s-payload",
        "s-deep",
      ]);
      expect(
        await r.usage.getUsage(NS, (await r.grants.listGrants(NS, ctx().actor))[0]?.id ?? ""),
      ).toBe(0);
      expect(verifyAuditChain(events).ok).toBe(true);
    });
  }

  it("a decision made again on grants that proved stale is made on the snapshot", async () => {
    const r = trustingRig();
    const x = await r.grants.add(grant({ capabilities: [cap(["x"], { actions: ["delete"] })] }));
    await r.grants.add(grant({ capabilities: [cap(["y"], { actions: ["delete"] })] }));
    await r.grants.add(grant({ capabilities: [messageSendCapability("bob", OWNER)] }));
    await r.grants.add(grant({ capabilities: [messageSendCapability("carol", OWNER)] }));
    const warm = await r.kernel.openTurnAuthority(ctx());
    expect(
      await warm.authorize({ action: "delete", resource: { namespace: "files", path: ["y"] } }),
    ).toMatchObject({ status: "allowed" });
    await warm.close();
    // Revoked by another process: the warm turn's act is stale, and decided again.
    await r.grants.revoke(NS, x.id);
    const turn = await r.kernel.openTurnAuthority(ctx());
    const request = {
      action: "delete",
      resource: { namespace: "files", path: ["x"] },
      callId: "del-x",
    };
    const pending = turn.authorize(request);
    request.resource = { namespace: "files", path: ["y"] };
    request.callId = "del-y";
    expect(await pending).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(r.stale).toBe(1);
    await r.kernel.drain?.();
    expect((await labels(r.audit)).slice(1)).toEqual(["del-x:revoked:files:/x"]);
    await turn.close();
  });

  it("a send made again after a stale act goes to the recipient it was asked for", async () => {
    const r = trustingRig();
    const bob = await r.grants.add(grant({ capabilities: [messageSendCapability("bob", OWNER)] }));
    await r.grants.add(grant({ capabilities: [messageSendCapability("carol", OWNER)] }));
    const warm = await r.kernel.openTurnAuthority(ctx());
    await warm.sendMessage({ recipient: "carol", payload: "warm", callId: "warm" });
    await warm.close();
    await r.grants.revoke(NS, bob.id);
    const turn = await r.kernel.openTurnAuthority(ctx());
    const request = { recipient: "bob", payload: "p", callId: "to-bob" };
    const pending = turn.sendMessage(request);
    request.recipient = "carol";
    request.callId = "to-carol";
    expect(await pending).toMatchObject({ status: "denied" });
    expect(r.stale).toBe(1);
    expect(r.delivered).toEqual(["warm->carol"]);
    await turn.close();
  });
});

describe("a context that cannot be read", () => {
  it("a throwing getter or Proxy trap is invalid_input, as a malformed context", async () => {
    const r = rig();
    const boom = () => {
      throw new Error("boom");
    };
    const contexts = [
      {
        ...ctx(),
        get actor(): string {
          return boom();
        },
      },
      new Proxy(ctx(), { get: boom }),
      new Proxy(ctx(), { ownKeys: boom }),
    ];
    for (const context of contexts) {
      const opened = r.kernel.openTurnAuthority(context);
      await expect(opened).rejects.toBeInstanceOf(TesseraError);
      await expect(opened).rejects.toMatchObject({ code: "invalid_input" });
    }
  });
});

describe("a clock that gives no instant fails closed", () => {
  const clocks: [string, Clock][] = [
    ["NaN", { now: () => Number.NaN }],
    ["an ISO string", { now: () => new Date().toISOString() as unknown as number }],
    ["a Date", { now: () => new Date() as unknown as number }],
    ["Infinity", { now: () => Number.POSITIVE_INFINITY }],
    ["past a Date's range", { now: () => 9e15 }],
    [
      "one that throws",
      {
        now: () => {
          throw new Error("no time");
        },
      },
    ],
  ];
  for (const ledger of [false, true]) {
    for (const [name, clock] of clocks) {
      it(`${name}: expired and bounded grants decide nothing, nothing spent (${ledger ? "ledger" : "plain"})`, async () => {
        const r = ledger ? ledgerRig({ clock }) : rig({ extra: { clock } });
        const expired = await r.grants.add(
          grant({
            capabilities: [cap(["x"], { actions: [READ] })],
            constraints: { expiresAt: "2020-06-01T00:00:00.000Z" },
          }),
        );
        const ticket = await r.grants.add(
          grant({
            capabilities: [messageSendCapability("bob", OWNER)],
            constraints: { maxUses: 3 },
          }),
        );
        const turn = await r.kernel.openTurnAuthority(ctx());
        const unavailable = { code: "authority_unavailable" };
        await expect(
          turn.authorize({ action: READ, resource: { namespace: "files", path: ["x"] } }),
        ).rejects.toMatchObject(unavailable);
        await expect(turn.sendMessage({ recipient: "bob", payload: 1 })).rejects.toMatchObject(
          unavailable,
        );
        await expect(turn.listTools()).rejects.toMatchObject(unavailable);
        await r.kernel.drain?.();
        expect(await r.usage.getUsage(NS, ticket.id)).toBe(0);
        expect(await r.usage.getUsage(NS, expired.id)).toBe(0);
        expect(await r.audit.read()).toEqual([]);
      });
    }
  }

  it("createKernel refuses a clock without now", () => {
    const r = rig();
    for (const clock of [5, {}, { now: 1 }, null]) {
      expect(() =>
        createKernel({ grants: r.grants, clock: clock as unknown as Clock }),
      ).toThrowError(expect.objectContaining({ code: "invalid_config" }));
    }
  });
});

describe("options a decision would trip over late are refused when the kernel is made", () => {
  it("a transport without deliver, a denials mode not documented", () => {
    const r = rig();
    for (const transport of [{}, { deliver: "x" }, null]) {
      expect(() =>
        createKernel({
          grants: r.grants,
          transport: transport as unknown as KernelOptions["transport"],
        }),
      ).toThrowError(expect.objectContaining({ code: "invalid_config" }));
    }
    for (const denials of ["sometimes", null, true]) {
      expect(() =>
        createKernel({ grants: r.grants, denials: denials as unknown as KernelOptions["denials"] }),
      ).toThrowError(expect.objectContaining({ code: "invalid_config" }));
    }
    expect(() => createKernel({ grants: r.grants, denials: "before-reply" })).not.toThrow();
  });
});

describe("a lease closed while its act is recorded does nothing more", () => {
  it("without a claim: refused turn_closed, nothing delivered, the use stays spent, audit says so", async () => {
    const r = ledgerRig();
    const ticket = await r.grants.add(
      grant({ capabilities: [messageSendCapability("bob", OWNER)], constraints: { maxUses: 5 } }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    const { waiting, release } = r.holdRecords();
    const pending = turn.sendMessage({ recipient: "bob", payload: "wire it", callId: "late" });
    await waiting;
    await turn.close();
    release();
    expect(await pending).toEqual({ status: "denied", code: "turn_closed" });
    expect(r.delivered).toEqual([]);
    expect(await r.usage.getUsage(NS, ticket.id)).toBe(1);
    await r.kernel.drain?.();
    const events = await r.audit.read({ callId: "late" });
    expect(events.map((event) => [event.reason, event.code])).toEqual([
      ["allowed", null],
      ["turn_closed", "turn_closed"],
    ]);
    expect(verifyAuditChain(await r.audit.read()).ok).toBe(true);
  });

  it("with a claim: withdrawn now, its use given back, its retries read turn_closed", async () => {
    const r = ledgerRig();
    const ticket = await r.grants.add(
      grant({ capabilities: [messageSendCapability("bob", OWNER)], constraints: { maxUses: 5 } }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    const claim = {
      key: { session: "svc", functionCallId: "late" },
      record: { bodyHash: "h".repeat(64), claimedAt: 1 },
    };
    const { waiting, release } = r.holdRecords();
    const pending = turn.sendMessage(
      { recipient: "bob", payload: "wire it", callId: "late" },
      { claim },
    );
    await waiting;
    await turn.close();
    release();
    expect(await pending).toEqual({ status: "denied", code: "turn_closed" });
    expect(r.delivered).toEqual([]);
    expect(await r.usage.getUsage(NS, ticket.id)).toBe(0);
    expect(await r.claims.get(claim.key)).toMatchObject({
      receipt: { status: "failed" },
      answer: { status: "denied", code: "turn_closed" },
    });
    const events = await r.audit.read({ callId: "late" });
    expect(events.map((event) => [event.reason, event.code])).toEqual([
      ["allowed", null],
      ["act_withdrawn", "turn_closed"],
    ]);
    // The use is back for the next turn.
    const next = await r.kernel.openTurnAuthority(ctx({ traceId: "t-2" }));
    expect(await next.sendMessage({ recipient: "bob", payload: 1, callId: "next" })).toMatchObject({
      status: "delivered",
    });
  });

  it("an authorize recorded after its lease closed is refused too", async () => {
    const r = ledgerRig();
    await r.grants.add(grant({ capabilities: [cap(["x"], { actions: [READ] })] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const { waiting, release } = r.holdRecords();
    const pending = turn.authorize({
      action: READ,
      resource: { namespace: "files", path: ["x"] },
      callId: "late",
    });
    await waiting;
    await turn.close();
    release();
    expect(await pending).toEqual({ status: "denied", code: "turn_closed" });
  });
});
