import { describe, expect, it } from "vitest";
import { cap, ctx, grant, OWNER, rig } from "../../test/fixtures.js";
import { CapabilitySchema, GrantSchema, isTesseraError, messageSendCapability } from "../index.js";
import { resourceLabel } from "./resource-label.js";

/**
 * Path segments a host might resolve (`..`), split (`/`, `\`) or print misleadingly (controls,
 * line separators, bidi overrides) are refused in grants and in requests, and the audit label
 * of what remains allowed names exactly one path.
 */

const UNSAFE: readonly [string, string][] = [
  ["dot", "."],
  ["dot-dot", ".."],
  ["empty", ""],
  ["slash", "/"],
  ["slash inside", "a/b"],
  ["backslash", "a\\b"],
  ["NUL", "nul\u0000"],
  ["tab", "a\tb"],
  ["newline", "a\nb"],
  ["carriage return", "a\rb"],
  ["DEL", "a\u007fb"],
  ["C1 NEL", "a\u0085b"],
  ["C1 CSI", "a\u009bb"],
  ["line separator", "a\u2028b"],
  ["paragraph separator", "a\u2029b"],
  ["left-to-right embedding", "a\u202ab"],
  ["right-to-left override", "txt\u202egpj.exe"],
  ["left-to-right isolate", "a\u2066b"],
  ["pop directional isolate", "a\u2069b"],
  // UTF-8 cannot hold one: a store or a host's file system would read U+FFFD.
  ["lone high surrogate", "a\ud800b"],
  ["lone low surrogate", "\udc00"],
];

/** Names that look odd but are one whole segment: they stay allowed. */
const SAFE = [
  "...",
  ".hidden",
  "a..b",
  "100%",
  "%2F",
  "a:b",
  "naïve",
  "名前",
  "a b",
  "cell-3",
  "🔑",
];

const capabilityAt = (path: string[]) => cap(path, { scope: "descendants" });

describe("path segments in grants", () => {
  it.each(UNSAFE)("the grant schema refuses a %s segment", (_name, segment) => {
    expect(CapabilitySchema.safeParse(capabilityAt(["docs", segment])).success).toBe(false);
    expect(GrantSchema.safeParse(grant({ capabilities: [capabilityAt([segment])] })).success).toBe(
      false,
    );
  });

  it("a grant source refuses such a grant with invalid_grant", async () => {
    const r = rig();
    const error = await r.grants
      .add(grant({ capabilities: [messageSendCapability("bob/../carol", OWNER)] }))
      .catch((e: unknown) => e);
    expect(isTesseraError(error, "invalid_grant")).toBe(true);
  });

  it.each(SAFE)("the grant schema accepts the segment %j", (segment) => {
    expect(CapabilitySchema.safeParse(capabilityAt(["docs", segment])).success).toBe(true);
  });
});

describe("path segments in requests", () => {
  it("a descendants grant never reaches a sibling through `..`", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [capabilityAt(["Workspace", "project-x"])] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const at = (path: string[]) =>
      turn.authorize({ action: "files.read", resource: { namespace: "files", path } });
    expect((await at(["Workspace", "project-x", "notes.md"])).status).toBe("allowed");
    expect(await at(["Workspace", "project-x", "..", "project-y", "secret.md"])).toEqual({
      status: "denied",
      code: "invalid_request",
    });
    expect(r.audit.events.at(-1)?.reason).toBe("invalid_request");
    expect(r.audit.events.at(-1)?.grantId).toBeUndefined();
  });

  it.each(UNSAFE)("authorize refuses a %s segment: invalid_request", async (_name, segment) => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap([], { scope: "descendants" })] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    const request = { action: "files.read", resource: { namespace: "files", path: [segment] } };
    expect(await turn.authorize(request)).toEqual({ status: "denied", code: "invalid_request" });
    expect(r.audit.events.at(-1)?.reason).toBe("invalid_request");
    // The same grant allows a safe segment: the refusal is about the segment alone.
    const safe = { ...request, resource: { namespace: "files", path: ["notes.md"] } };
    expect((await turn.authorize(safe)).status).toBe("allowed");
  });

  it.each(UNSAFE)("sendMessage refuses a %s recipient: nothing is delivered", async (_n, to) => {
    const r = rig();
    await r.grants.add(
      grant({
        capabilities: [
          { ...messageSendCapability("x", OWNER), resource: root(), scope: "descendants" },
        ],
      }),
    );
    const turn = await r.kernel.openTurnAuthority(ctx());
    expect(await turn.sendMessage({ recipient: to, payload: "q" })).toEqual({
      status: "denied",
      code: "invalid_request",
    });
    expect(r.transport.delivered).toHaveLength(0);
    expect((await turn.sendMessage({ recipient: "bob", payload: "q" })).status).toBe("delivered");
  });
});

/** The root of the message namespace, owned by the fixture owner: covers every recipient. */
function root() {
  return { namespace: "messages", path: [] as string[], owner: OWNER };
}

describe("the audit label of a resource", () => {
  it("names one path: separators and `%` inside a part are percent-encoded", () => {
    const pairs: [string, string[], string, string[]][] = [
      ["a", ["b:", "c"], "a:/b", ["c"]],
      ["files", ["%2F"], "files", ["/"]],
      ["files", ["a%2Fb"], "files", ["a", "b"]],
      ["files", [], "files:", []],
      ["files", ["a", ""], "files", ["a"]],
    ];
    for (const [ns1, path1, ns2, path2] of pairs) {
      expect(resourceLabel(ns1, path1)).not.toBe(resourceLabel(ns2, path2));
    }
    expect(resourceLabel("files", ["docs", "cell-3"])).toBe("files:/docs/cell-3");
    expect(resourceLabel("files", ["100%"])).toBe("files:/100%25");
    expect(resourceLabel("a:/b", ["c"])).toBe("a%3A%2Fb:/c");
    expect(resourceLabel("ns\u202e", [])).toBe("ns%E2%80%AE:/");
  });

  it("the kernel writes the encoded label to audit", async () => {
    const r = rig();
    await r.grants.add(grant({ capabilities: [cap([], { scope: "descendants" })] }));
    const turn = await r.kernel.openTurnAuthority(ctx());
    await turn.authorize({
      action: "files.read",
      resource: { namespace: "files", path: ["a%2Fb"] },
    });
    expect(r.audit.events.at(-1)).toMatchObject({
      reason: "allowed",
      resource: "files:/a%252Fb",
    });
  });
});
