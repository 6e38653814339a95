import {
  AuditEventSchema,
  type ClaimStore,
  InMemoryClaimStore,
  isTesseraError,
  TesseraError,
} from "@tessera/core";
import { propertyParameters } from "@tessera/testkit";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CATALOG_ID, callMessage, NO_ARGS, TEST_CATALOG } from "../../test/fixtures/catalog.js";
import {
  correlatedId,
  errorCode,
  expectValidReply,
  setup,
} from "../../test/fixtures/gate-setup.js";
import { FunctionCallGate } from "./gate.js";
import { isUsableCallId } from "./message.js";

describe("FunctionCallGate: the allowed path", () => {
  it("runs the callback once and answers with its value", async () => {
    const { gate, calls, claims, audit } = setup();
    const result = await gate.handle("session-a", callMessage("call-1"));
    expectValidReply(result);
    expect(result.reply).toEqual({
      version: "v1.0",
      rendererFunctionResponse: { functionCallId: "call-1", value: 3 },
    });
    expect(result.receipt).toEqual({
      status: "dispatched",
      reason: "dispatched",
      session: "session-a",
      functionCallId: "call-1",
    });
    expect(calls).toEqual([
      {
        session: "session-a",
        functionCallId: "call-1",
        catalogId: CATALOG_ID,
        call: "add",
        args: { a: 1, b: 2 },
      },
    ]);
    // The receipt is written after the reply (with others in its window); drain sends it.
    await gate.drain();
    const stored = await claims.get({ session: "session-a", functionCallId: "call-1" });
    expect(stored?.receipt).toEqual({ status: "dispatched", settledAt: 1_700_000_000_000 });
    expect(audit.events).toHaveLength(1);
    expect(audit.events[0]).toMatchObject({
      source: "gate",
      outcome: "allowed",
      code: null,
      reason: "dispatched",
      session: "session-a",
      receipt: "dispatched",
      callId: "call-1",
    });
    expect(Object.isFrozen(result) && Object.isFrozen(result.reply)).toBe(true);
  });

  it("accepts raw JSON text as well as a parsed object", async () => {
    const { gate, calls } = setup();
    const result = await gate.handle("s", JSON.stringify(callMessage("raw", { a: 2, b: 5 })));
    expectValidReply(result);
    expect(result.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
  });

  it("rendererOrAgent functions and functions without args are callable by an agent", async () => {
    const { gate } = setup({ invoke: () => undefined });
    const shared = await gate.handle("s", callMessage("1", { a: 1, b: 1 }, "sharedAdd"));
    const bare = await gate.handle("s", callMessage("2", NO_ARGS, "noArgs"));
    for (const result of [shared, bare]) {
      expectValidReply(result);
      expect(result.receipt.status).toBe("dispatched");
    }
    // A callback that returns nothing answers `null`: the protocol needs a value.
    expect(bare.reply).toEqual({
      version: "v1.0",
      rendererFunctionResponse: { functionCallId: "2", value: null },
    });
  });

  it("function names that look like paths are looked up literally", async () => {
    const { gate, calls } = setup();
    const result = await gate.handle("s", callMessage("p", { a: 1, b: 1 }, "odd/name~1"));
    expect(result.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
  });
});

describe("FunctionCallGate: duplicates", () => {
  it("a retry in the same session is refused, correlated, and runs nothing", async () => {
    const { gate, calls, audit } = setup();
    await gate.handle("s", callMessage("dup"));
    await gate.drain();
    const again = await gate.handle("s", callMessage("dup"));
    expectValidReply(again);
    expect(again.reply).toEqual({
      version: "v1.0",
      error: {
        code: "INVALID_FUNCTION_CALL",
        functionCallId: "dup",
        message: expect.any(String),
      },
    });
    expect(again.receipt).toMatchObject({
      status: "none",
      reason: "duplicate_call",
      previous: "dispatched",
      changedBody: false,
    });
    expect(calls).toHaveLength(1);
    expect(audit.events.at(-1)).toMatchObject({
      outcome: "denied",
      code: "INVALID_FUNCTION_CALL",
      reason: "duplicate_call",
      receipt: "none",
    });
  });

  it("the same ID with a changed body is refused the same way", async () => {
    const { gate, calls } = setup();
    await gate.handle("s", callMessage("dup", { a: 1, b: 2 }));
    const changed = await gate.handle("s", callMessage("dup", { a: 100, b: 200 }));
    expectValidReply(changed);
    expect(errorCode(changed)).toBe("INVALID_FUNCTION_CALL");
    expect(changed.receipt).toMatchObject({ status: "none", changedBody: true });
    expect(calls).toHaveLength(1);
  });

  it("concurrent calls with one ID in one process: exactly one callback", async () => {
    const { gate, calls } = setup();
    const results = await Promise.all(
      Array.from({ length: 32 }, () => gate.handle("s", callMessage("hot"))),
    );
    expect(results.filter((r) => r.receipt.status === "dispatched")).toHaveLength(1);
    expect(results.filter((r) => r.receipt.status === "none")).toHaveLength(31);
    expect(calls).toHaveLength(1);
  });

  it("another trusted session may use the same ID independently", async () => {
    const { gate, calls } = setup();
    const first = await gate.handle("session-a", callMessage("shared"));
    const second = await gate.handle("session-b", callMessage("shared"));
    expect([first.receipt.status, second.receipt.status]).toEqual(["dispatched", "dispatched"]);
    expect(calls.map((c) => c.session)).toEqual(["session-a", "session-b"]);
  });

  it("property: callbacks run exactly once per distinct (session, ID)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.tuple(fc.constantFrom("s1", "s2", "s3"), fc.string({ minLength: 1, maxLength: 4 })),
          {
            maxLength: 60,
          },
        ),
        async (pairs) => {
          const { gate, calls } = setup();
          const printable = pairs.filter(([, id]) => isUsableCallId(id));
          const results = await Promise.all(
            printable.map(([session, id]) => gate.handle(session, callMessage(id))),
          );
          const distinct = new Set(printable.map((pair) => JSON.stringify(pair)));
          expect(calls).toHaveLength(distinct.size);
          expect(results.filter((r) => r.receipt.status === "dispatched")).toHaveLength(
            distinct.size,
          );
          for (const result of results) expectValidReply(result);
        },
      ),
      propertyParameters({ numRuns: 50 }),
    );
  });
});

describe("FunctionCallGate: catalog checks (each refused before any claim)", () => {
  it.each([
    [
      "an unknown catalog",
      callMessage("c", { a: 1, b: 2 }, "add", "https://other.test/catalog"),
      "unknown_catalog",
    ],
    [
      "an undeclared function",
      callMessage("c", { a: 1, b: 2 }, "deleteEverything"),
      "unknown_function",
    ],
    [
      "a rendererOnly function",
      callMessage("c", { a: 1, b: 2 }, "rendererAdd"),
      "caller_not_allowed",
    ],
    [
      "a function with the default (rendererOnly) callers",
      callMessage("c", { a: 1, b: 2 }, "defaultAdd"),
      "caller_not_allowed",
    ],
    [
      "a function that requires user activation",
      callMessage("c", { a: 1, b: 2 }, "openPanel"),
      "user_activation_required",
    ],
    ["args of the wrong type", callMessage("c", { a: "1", b: 2 }, "add"), "invalid_args"],
    [
      "args with an undeclared field",
      callMessage("c", { a: 1, b: 2, c: 3 }, "add"),
      "invalid_args",
    ],
    ["missing required args", callMessage("c", NO_ARGS, "add"), "invalid_args"],
  ])("refuses %s with INVALID_FUNCTION_CALL", async (_label, message, reason) => {
    const { gate, calls, claims, audit } = setup();
    const result = await gate.handle("s", message);
    expectValidReply(result);
    expect(errorCode(result)).toBe("INVALID_FUNCTION_CALL");
    expect(correlatedId(result)).toBe("c");
    expect(result.receipt).toMatchObject({ status: "denied", reason });
    expect(calls).toHaveLength(0);
    // Refused before the claim: the ID is still free for a well-formed call.
    expect(await claims.get({ session: "s", functionCallId: "c" })).toBeUndefined();
    expect(audit.events[0]).toMatchObject({
      outcome: "denied",
      reason,
      code: "INVALID_FUNCTION_CALL",
    });
    const retry = await gate.handle("s", callMessage("c"));
    expect(retry.receipt.status).toBe("dispatched");
  });
});

describe("FunctionCallGate: policy and approval", () => {
  it("the approval hook sees the call after it is claimed and before the callback", async () => {
    const seen: string[] = [];
    const claims = new InMemoryClaimStore();
    const { gate } = setup({
      claims,
      approve: async (invocation) => {
        const claim = await claims.get(invocation);
        seen.push(claim ? "claimed" : "unclaimed");
        return true;
      },
      invoke: () => {
        seen.push("callback");
        return 1;
      },
    });
    const result = await gate.handle("s", callMessage("ordered"));
    expect(result.receipt.status).toBe("dispatched");
    expect(seen).toEqual(["claimed", "callback"]);
  });

  it("a refused approval consumes the claim; a new ID is a new attempt", async () => {
    let allow = false;
    const { gate, calls, claims } = setup({ approve: () => allow });
    const refused = await gate.handle("s", callMessage("ask"));
    expectValidReply(refused);
    expect(errorCode(refused)).toBe("EXECUTION_FAILED");
    expect(correlatedId(refused)).toBe("ask");
    expect(refused.receipt).toMatchObject({ status: "denied", reason: "approval_denied" });
    await gate.drain();
    expect((await claims.get({ session: "s", functionCallId: "ask" }))?.receipt?.status).toBe(
      "denied",
    );
    allow = true;
    const retry = await gate.handle("s", callMessage("ask"));
    expect(retry.receipt).toMatchObject({ status: "none", previous: "denied" });
    const fresh = await gate.handle("s", callMessage("ask-again"));
    expect(fresh.receipt.status).toBe("dispatched");
    expect(calls.map((c) => c.functionCallId)).toEqual(["ask-again"]);
  });

  it("a policy refusal is reported as policy_denied", async () => {
    const { gate, calls } = setup({ approve: () => ({ allow: false, reason: "policy_denied" }) });
    const result = await gate.handle("s", callMessage("p"));
    expect(result.receipt).toMatchObject({ status: "denied", reason: "policy_denied" });
    expect(calls).toHaveLength(0);
  });

  it("an approval object that allows lets the call through", async () => {
    const { gate, calls } = setup({ approve: () => ({ allow: true }) });
    expect((await gate.handle("s", callMessage("p"))).receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
  });

  it("an approval hook that throws refuses (fails closed) and consumes the claim", async () => {
    const { gate, calls, claims } = setup({
      approve: () => {
        throw new Error("approver offline");
      },
    });
    const result = await gate.handle("s", callMessage("t"));
    expectValidReply(result);
    expect(result.receipt).toMatchObject({ status: "denied", reason: "approval_denied" });
    expect(calls).toHaveLength(0);
    await gate.drain();
    expect((await claims.get({ session: "s", functionCallId: "t" }))?.receipt?.status).toBe(
      "denied",
    );
  });
});

describe("FunctionCallGate: failures", () => {
  it("a callback that throws gives an execution error and a failed receipt", async () => {
    const { gate, claims, audit } = setup({
      invoke: () => {
        throw new Error("secret internal detail");
      },
    });
    const result = await gate.handle("s", callMessage("boom"));
    expectValidReply(result);
    expect(result.reply).toEqual({
      version: "v1.0",
      rendererFunctionResponse: {
        functionCallId: "boom",
        error: { code: "EXECUTION_FAILED", message: expect.any(String) },
      },
    });
    expect(JSON.stringify(result.reply)).not.toContain("secret");
    expect(result.receipt).toMatchObject({ status: "failed", reason: "callback_failed" });
    await gate.drain();
    expect((await claims.get({ session: "s", functionCallId: "boom" }))?.receipt?.status).toBe(
      "failed",
    );
    expect(audit.events[0]).toMatchObject({ reason: "callback_failed", receipt: "failed" });
    const retry = await gate.handle("s", callMessage("boom"));
    expect(retry.receipt).toMatchObject({ status: "none", previous: "failed" });
  });

  it("a callback whose value JSON cannot carry: a valid execution error and a failed receipt", async () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const values: unknown[] = [10n, { id: 1n }, cycle, () => 1, Symbol("s")];
    for (const [i, value] of values.entries()) {
      const { gate, claims, audit } = setup({ invoke: () => value });
      const id = `nj-${i}`;
      const result = await gate.handle("s", callMessage(id));
      // Before, the reply carried the value as it was: a BigInt or a cycle made the host's
      // JSON.stringify of the reply throw after the callback had run, and a function or a
      // symbol gave a reply without `value`, which the official schema refuses.
      expect(() => JSON.stringify(result.reply)).not.toThrow();
      expectValidReply({ ...result, reply: JSON.parse(JSON.stringify(result.reply)) });
      expect(errorCode(result)).toBe("EXECUTION_FAILED");
      expect(result.receipt).toMatchObject({ status: "failed", reason: "callback_failed" });
      await gate.drain();
      expect((await claims.get({ session: "s", functionCallId: id }))?.receipt?.status).toBe(
        "failed",
      );
      expect(audit.events[0]).toMatchObject({
        reason: "callback_failed",
        receipt: "failed",
        detail: "callback returned a value that is not JSON",
      });
    }
    // JSON-able values still go through as they are (undefined as null).
    for (const value of [
      undefined,
      null,
      0,
      Number.NaN,
      "x",
      [1, undefined],
      { at: new Date(0) },
    ]) {
      const { gate } = setup({ invoke: () => value });
      const result = await gate.handle("s", callMessage("ok"));
      expect(result.receipt.status).toBe("dispatched");
      expectValidReply({ ...result, reply: JSON.parse(JSON.stringify(result.reply)) });
    }
  });

  it("a claim store that is down fails closed: no callback, an execution error", async () => {
    const down: ClaimStore = {
      ...new InMemoryClaimStore(),
      claim: async () => {
        throw new TesseraError("claim_store_unavailable", "down");
      },
      settle: async () => undefined,
      get: async () => undefined,
      listInDoubt: async () => [],
      endSession: async () => undefined,
      close: async () => undefined,
    };
    const { gate, calls } = setup({ claims: down });
    const result = await gate.handle("s", callMessage("x"));
    expectValidReply(result);
    expect(errorCode(result)).toBe("EXECUTION_FAILED");
    expect(result.receipt).toMatchObject({ status: "denied", reason: "claim_store_unavailable" });
    expect(calls).toHaveLength(0);
  });

  it("a claim store answering neither shape fails closed the same way, not with a TypeError", async () => {
    // A host's own store: before, `handle` rejected with a TypeError reading `.status` of
    // undefined, or `.receipt` of an `existing` that was not there.
    for (const answer of [
      undefined,
      null,
      {},
      { status: "taken" },
      { status: "already_claimed" },
      { status: "already_claimed", existing: { receipt: { status: "dispatched" } } },
    ]) {
      const odd: ClaimStore = new InMemoryClaimStore();
      odd.claim = async () => answer as never;
      const { gate, calls } = setup({ claims: odd });
      const result = await gate.handle("s", callMessage("x"));
      expectValidReply(result);
      expect([answer, errorCode(result)]).toEqual([answer, "EXECUTION_FAILED"]);
      expect(result.receipt).toMatchObject({ status: "denied", reason: "claim_store_unavailable" });
      expect(calls).toHaveLength(0);
    }
  });

  it("a store that cannot record the outcome leaves the claim in doubt; the reply stands", async () => {
    const claims = new InMemoryClaimStore();
    claims.settle = async () => {
      throw new TesseraError("claim_store_unavailable", "down");
    };
    const { gate, calls } = setup({ claims });
    const result = await gate.handle("s", callMessage("x"));
    expect(result.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
    expect(await claims.listInDoubt("s")).toMatchObject([{ functionCallId: "x" }]);
    expect((await gate.handle("s", callMessage("x"))).receipt).toMatchObject({
      status: "none",
      previous: "in_doubt",
    });
  });

  it("an audit sink that throws does not turn a decision into an exception", async () => {
    const { gate, calls } = setup({
      audit: {
        append: () => {
          throw new Error("disk full");
        },
      },
    });
    expect((await gate.handle("s", callMessage("a"))).receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
  });

  it("a session that is not a non-empty string is a host error (rejected, nothing claimed)", async () => {
    const { gate, calls, claims } = setup();
    // A lone surrogate too: a store writing the session as UTF-8 would read back U+FFFD.
    for (const session of ["", undefined, 42, "s\ud800"]) {
      await expect(gate.handle(session as string, callMessage("x"))).rejects.toSatisfy((error) =>
        isTesseraError(error, "invalid_input"),
      );
    }
    expect(calls).toHaveLength(0);
    expect(await claims.listInDoubt()).toEqual([]);
  });

  it("a gate without a claim store or a callback refuses to start", () => {
    expect(() => new FunctionCallGate({ catalog: TEST_CATALOG } as never)).toThrow(TesseraError);
  });
});

describe("FunctionCallGate: malformed and hostile messages", () => {
  const ok = callMessage("fine") as { callRendererFunction: Record<string, unknown> };
  const cases: [string, unknown, "correlated" | "uncorrelated"][] = [
    ["text that is not JSON", "{not json", "uncorrelated"],
    ["an empty string", "", "uncorrelated"],
    ["JSON null", "null", "uncorrelated"],
    ["a number", 42, "uncorrelated"],
    ["an array", [callMessage("x")], "uncorrelated"],
    ["a message without callRendererFunction", { version: "v1.0" }, "uncorrelated"],
    ["a message without version", { callRendererFunction: ok.callRendererFunction }, "correlated"],
    ["the wrong version", { ...ok, version: "v0.9" }, "correlated"],
    ["an extra top-level field", { ...ok, sneaky: true }, "correlated"],
    [
      "an extra field in callFunction",
      callMessage("fine", { a: 1, b: 2 }) && {
        version: "v1.0",
        callRendererFunction: {
          functionCallId: "fine",
          callFunction: { call: "add", catalogId: CATALOG_ID, args: { a: 1, b: 2 }, evil: 1 },
        },
      },
      "correlated",
    ],
    [
      "a missing catalogId",
      {
        version: "v1.0",
        callRendererFunction: { functionCallId: "fine", callFunction: { call: "add", args: {} } },
      },
      "correlated",
    ],
    [
      "a missing functionCallId",
      {
        version: "v1.0",
        callRendererFunction: { callFunction: { call: "add", catalogId: CATALOG_ID } },
      },
      "uncorrelated",
    ],
    ["a numeric functionCallId", callMessage(7), "uncorrelated"],
    ["an empty functionCallId", callMessage(""), "uncorrelated"],
    ["a functionCallId with NUL", callMessage("a\u0000b"), "uncorrelated"],
    ["a functionCallId with a newline", callMessage("a\nb"), "uncorrelated"],
    ["a 100 KB functionCallId", callMessage("x".repeat(100 * 1024)), "uncorrelated"],
    [
      "another A2UI message type",
      { version: "v1.0", deleteSurface: { surfaceId: "s" } },
      "uncorrelated",
    ],
    ["text over the size limit", `"${"x".repeat(1 << 20)}"`, "uncorrelated"],
  ];

  it.each(cases)(
    "%s: a clear VALIDATION_FAILED reply, nothing claimed or run",
    async (_label, message, shape) => {
      const { gate, calls, claims, audit } = setup();
      const result = await gate.handle("s", message);
      expectValidReply(result);
      expect(errorCode(result)).toBe("VALIDATION_FAILED");
      if (shape === "correlated") expect(correlatedId(result)).toBe("fine");
      else
        expect(result.reply).toMatchObject({ error: { surfaceId: "", path: expect.any(String) } });
      expect(result.receipt).toMatchObject({ status: "denied", reason: "invalid_message" });
      expect(calls).toHaveLength(0);
      expect(await claims.listInDoubt()).toEqual([]);
      expect(audit.events).toHaveLength(1);
      // Hostile content is never echoed into the reply text.
      expect(JSON.stringify(result.reply)).not.toContain("xxxxxxxx");
      expect(JSON.stringify(result.reply)).not.toContain("\\u0000");
    },
  );

  it.each([
    ["a path traversal", "../../etc/passwd"],
    ["a slash", "a/b"],
    ["non-ASCII", "заявка-ü-✓-😀"],
  ])(
    "an ID with %s is a plain ID: claimed under a hash and answered on the same ID",
    async (_label, id) => {
      const { gate, calls } = setup();
      const result = await gate.handle("s", callMessage(id));
      expectValidReply(result);
      expect(correlatedId(result)).toBe(id);
      expect(result.receipt.status).toBe("dispatched");
      expect((await gate.handle("s", callMessage(id))).receipt.status).toBe("none");
      expect(calls).toHaveLength(1);
    },
  );

  it("refusal texts never echo attacker-chosen object keys", async () => {
    const { gate } = setup();
    const key = "<script>alert(1)</script>";
    const result = await gate.handle("s", { ...callMessage("k"), [key]: 1 });
    expect(JSON.stringify(result.reply)).not.toContain("script");
  });
});

describe("FunctionCallGate: audit", () => {
  it("writes one schema-valid event per decision", async () => {
    const { gate, audit } = setup({ approve: (call) => call.functionCallId !== "no" });
    await gate.handle("s", callMessage("yes"));
    await gate.handle("s", callMessage("yes"));
    await gate.handle("s", callMessage("no"));
    await gate.handle("s", "garbage");
    await gate.handle("s", callMessage("c", { a: 1, b: 2 }, "rendererAdd"));
    expect(audit.events.map((e) => e.reason)).toEqual([
      "dispatched",
      "duplicate_call",
      "approval_denied",
      "invalid_message",
      "caller_not_allowed",
    ]);
    for (const event of audit.events) expect(AuditEventSchema.safeParse(event).success).toBe(true);
  });
});
