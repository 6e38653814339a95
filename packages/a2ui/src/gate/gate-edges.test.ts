import { InMemoryClaimStore } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { CATALOG_ID, callMessage, NO_ARGS } from "../../test/fixtures/catalog.js";
import {
  correlatedId,
  countingClaims,
  errorCode,
  expectValidReply,
  setup,
} from "../../test/fixtures/gate-setup.js";
import { bodyHash, isUsableCallId, MAX_ARGS_DEPTH } from "./message.js";

/** `{ x: { x: … } }`, `levels` objects deep (the outermost counts as one). */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { x: value };
  return value;
}

/** A catalog function that takes any object as args, so only the gate's own bounds apply. */
const ANY_ARGS_CATALOG = {
  catalogId: CATALOG_ID,
  functions: {
    take: {
      type: "object",
      returnType: "number",
      allowedCallers: "agentOnly",
      properties: { call: { const: "take" }, args: { type: "object" } },
      required: ["call"],
    },
  },
};

describe("the body hash: a missing args and an empty args are one body", () => {
  it("hashes the same", () => {
    const base = { functionCallId: "1", catalogId: CATALOG_ID, call: "noArgs" };
    expect(bodyHash(base)).toBe(bodyHash({ ...base, args: {} }));
    expect(bodyHash(base)).not.toBe(bodyHash({ ...base, args: { a: 1 } }));
  });

  it("a retry that only adds `args: {}` is audited as the same body", async () => {
    const { gate, calls } = setup({ catalog: ANY_ARGS_CATALOG });
    const first = await gate.handle("s", callMessage("r", NO_ARGS, "take"));
    expect(first.receipt.status).toBe("dispatched");
    const retry = await gate.handle("s", callMessage("r", {}, "take"));
    expect(retry.receipt).toMatchObject({ status: "none", changedBody: false });
    const changed = await gate.handle("s", callMessage("r", { a: 1 }, "take"));
    expect(changed.receipt).toMatchObject({ status: "none", changedBody: true });
    expect(calls).toHaveLength(1);
  });
});

describe("call IDs: only printable characters are echoed", () => {
  it.each([
    ["C0 (U+0001)", "a\u0001b"],
    ["DEL", "a\u007fb"],
    ["C1 NEL (U+0085)", "a\u0085b"],
    ["C1 CSI (U+009B)", "a\u009b31mred"],
    ["LINE SEPARATOR (U+2028)", "a\u2028b"],
    ["PARAGRAPH SEPARATOR (U+2029)", "a\u2029b"],
    ["LRE (U+202A)", "a\u202ab"],
    ["RLO (U+202E)", "txt.\u202eexe"],
    ["LRI (U+2066)", "a\u2066b"],
    ["PDI (U+2069)", "a\u2069b"],
    ["RLM (U+200F)", "a\u200fb"],
    ["ALM (U+061C)", "a\u061cb"],
  ])("an ID with %s is refused, uncorrelated, before any claim", async (_label, id) => {
    const claims = countingClaims(new InMemoryClaimStore());
    const { gate, calls } = setup({ claims });
    const result = await gate.handle("s", callMessage(id));
    expectValidReply(result);
    expect(errorCode(result)).toBe("VALIDATION_FAILED");
    expect(correlatedId(result)).toBeUndefined();
    expect(JSON.stringify(result.reply)).not.toContain(id);
    expect(result.receipt).toMatchObject({ status: "denied", reason: "invalid_message" });
    expect(result.receipt.functionCallId).toBeUndefined();
    expect(claims.claimCalls).toBe(0);
    expect(calls).toHaveLength(0);
  });

  it("the refused set is exactly \\p{Cc}, \\p{Bidi_Control}, U+2028/2029 and lone surrogates", () => {
    // In a /u pattern \p{Cs} matches a surrogate only when it is alone: a pair is one code point.
    const refused = /[\p{Cc}\p{Bidi_Control}\u2028\u2029\p{Cs}]/u;
    for (let code = 0; code <= 0xffff; code++) {
      const id = `a${String.fromCharCode(code)}b`;
      if (isUsableCallId(id) === refused.test(id)) expect.fail(`U+${code.toString(16)}`);
    }
  });

  it("IDs with ordinary non-ASCII text and emoji still pass", async () => {
    const { gate } = setup();
    for (const id of ["מזהה-1", "الطلب", "👩‍👩‍👧", "a b", "ü\u00a0x"]) {
      expect((await gate.handle("s", callMessage(id))).receipt.status).toBe("dispatched");
    }
  });
});

describe("args depth is bounded before the claim", () => {
  it(`args ${MAX_ARGS_DEPTH} levels deep are accepted`, async () => {
    const { gate, calls } = setup({ catalog: ANY_ARGS_CATALOG });
    const result = await gate.handle("s", callMessage("ok", nested(MAX_ARGS_DEPTH), "take"));
    expect(result.receipt.status).toBe("dispatched");
    expect(calls).toHaveLength(1);
  });

  const deep = (id: string, levels: number) => callMessage(id, nested(levels), "take");
  it.each([
    ["one level too deep, as an object", () => deep("d", MAX_ARGS_DEPTH + 1)],
    ["20,000 levels, as an object", () => deep("d", 20_000)],
    ["20,000 levels, as JSON text", () => textOf(deep("d", 2), 20_000)],
    ["400,000 levels of arrays, as JSON text", () => arrayText("d", 400_000)],
    ["a cycle (an in-process host)", () => cyclic("d")],
  ])("%s: VALIDATION_FAILED on the ID, invalid_message, nothing claimed", async (_l, message) => {
    const claims = countingClaims(new InMemoryClaimStore());
    const { gate, calls, audit } = setup({ catalog: ANY_ARGS_CATALOG, claims });
    const result = await gate.handle("s", message());
    expectValidReply(result);
    expect(errorCode(result)).toBe("VALIDATION_FAILED");
    expect(correlatedId(result)).toBe("d");
    expect(result.receipt).toMatchObject({
      status: "denied",
      reason: "invalid_message",
      functionCallId: "d",
    });
    expect(audit.events[0]).toMatchObject({ reason: "invalid_message", code: "VALIDATION_FAILED" });
    expect(claims.claimCalls).toBe(0);
    expect(calls).toHaveLength(0);
    // The ID was not used up: a well-formed call may still take it.
    expect((await gate.handle("s", callMessage("d", {}, "take"))).receipt.status).toBe(
      "dispatched",
    );
  });
});

describe("a message object whose getters throw (an in-process host)", () => {
  it.each([
    [
      "on callRendererFunction",
      () => ({
        version: "v1.0",
        get callRendererFunction(): never {
          throw new Error("getter");
        },
      }),
      undefined,
    ],
    [
      "inside args",
      () =>
        callMessage("g", {
          get a(): never {
            throw new Error("getter");
          },
        }),
      "g",
    ],
  ])("%s: VALIDATION_FAILED, nothing claimed or run", async (_label, message, id) => {
    const claims = countingClaims(new InMemoryClaimStore());
    const { gate, calls } = setup({ catalog: ANY_ARGS_CATALOG, claims });
    const result = await gate.handle("s", message());
    expectValidReply(result);
    expect(errorCode(result)).toBe("VALIDATION_FAILED");
    expect(correlatedId(result)).toBe(id);
    expect(result.receipt).toMatchObject({ status: "denied", reason: "invalid_message" });
    expect(claims.claimCalls).toBe(0);
    expect(calls).toHaveLength(0);
  });
});

describe("a denied or failed call uses up its ID; a refusal before the claim does not", () => {
  it("after a refused approval or a throwing callback the same ID is a duplicate", async () => {
    let approve = false;
    let fail = true;
    const { gate } = setup({
      approve: () => approve,
      invoke: () => {
        if (fail) throw new Error("x");
        return 1;
      },
    });
    expect((await gate.handle("s", callMessage("denied"))).receipt.status).toBe("denied");
    approve = true;
    expect((await gate.handle("s", callMessage("failed"))).receipt.status).toBe("failed");
    fail = false;
    for (const id of ["denied", "failed"]) {
      expect((await gate.handle("s", callMessage(id))).receipt).toMatchObject({
        status: "none",
        reason: "duplicate_call",
      });
    }
    expect((await gate.handle("s", callMessage("new-id"))).receipt.status).toBe("dispatched");
  });
});

function textOf(message: Record<string, unknown>, levels: number): string {
  const args = `${'{"x":'.repeat(levels - 1)}{}${"}".repeat(levels - 1)}`;
  return JSON.stringify(message).replace('{"x":{}}', args);
}

function arrayText(id: string, levels: number): string {
  const args = `{"x":${"[".repeat(levels)}${"]".repeat(levels)}}`;
  return JSON.stringify(callMessage(id, 0, "take")).replace('"args":0', `"args":${args}`);
}

function cyclic(id: string): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  args.self = args;
  return callMessage(id, args, "take");
}
