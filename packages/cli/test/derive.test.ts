import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Capability, createKernel, type Grant, openStores } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { scratch, tessera } from "./support/cli.js";

/**
 * `tessera grants derive` on a real SQLite store: the derived grant is stored, counts for the
 * delegate through its chain, refuses what widens (nothing stored, nothing spent), carves a
 * bounded child's uses out of its parent, and dies with its parent's revocation.
 */

const NS = "team";
const ISSUED = "2026-01-01T00:00:00.000Z";

function capability(path: string[], actions: string[]): Capability {
  return { resource: { namespace: "files", path, owner: "alice" }, actions, scope: "descendants" };
}

const PARENT: Grant = {
  id: "parent",
  namespaceId: NS,
  issuer: "host",
  subject: "agent",
  capabilities: [capability(["cells"], ["read", "write"])],
  constraints: { maxUses: 5 },
  issuedAt: ISSUED,
};

/** A request for the delegate to read one cell, `uses` times. */
function readCell(id: string, cell: string, uses: number) {
  return {
    id,
    subject: "sub-agent",
    capabilities: [capability(["cells", cell], ["read"])],
    constraints: { maxUses: uses },
  };
}

function setUp() {
  const dir = scratch();
  const store = `sqlite:${join(dir, "tessera.db")}`;
  const parentFile = join(dir, "parent.json");
  writeFileSync(parentFile, JSON.stringify(PARENT));
  const added = tessera("grants", "add", "--store", store, "--file", parentFile);
  expect(added.code, added.stderr).toBe(0);
  const requestFile = (name: string, request: object) => {
    const path = join(dir, `${name}.json`);
    writeFileSync(path, JSON.stringify(request));
    return path;
  };
  const derive = (file: string, issuer = "agent") =>
    tessera(
      "grants",
      "derive",
      "--store",
      store,
      "--namespace",
      NS,
      "--parent",
      "parent",
      "--issuer",
      issuer,
      "--file",
      file,
      "--json",
    );
  return { store, requestFile, derive };
}

/** A refusal under --json: exit 2, the stable code as JSON on stderr. */
function expectRefusal(run: ReturnType<typeof tessera>, code: string): void {
  expect(run.code, run.stderr).toBe(2);
  expect(JSON.parse(run.stderr)).toMatchObject({ error: { code } });
}

/** One turn of the delegate under the host's authority, reading `cells/<cell>`. */
async function readAsDelegate(store: string, cell: string, action = "read") {
  const stores = await openStores(store);
  try {
    const kernel = createKernel({
      grants: stores.grants,
      usage: stores.usage,
      audit: stores.audit,
    });
    const turn = await kernel.openTurnAuthority({
      traceId: `t-${cell}-${action}`,
      namespaceId: NS,
      actor: "sub-agent",
      authority: "host",
      owner: "alice",
    });
    try {
      const result = await turn.authorize({
        action,
        resource: { namespace: "files", path: ["cells", cell], owner: "alice" },
        callId: `c-${cell}-${action}`,
      });
      const events = await stores.audit.read({ callId: `c-${cell}-${action}` });
      return {
        result,
        chain: events.at(-1)?.chain,
        parentUses: await stores.usage.getUsage(NS, "parent"),
      };
    } finally {
      await turn.close();
    }
  } finally {
    await stores.close();
  }
}

describe("tessera grants derive", () => {
  it("stores a narrower child that counts for the delegate through its chain, and carves its uses", async () => {
    const { store, requestFile, derive } = setUp();
    const run = derive(requestFile("child", readCell("child", "a", 2)));
    expect(run.code, run.stderr).toBe(0);
    const child = JSON.parse(run.stdout) as Grant;
    expect(child).toMatchObject({ id: "child", issuer: "agent", parentId: "parent", depth: 1 });

    const allowed = await readAsDelegate(store, "a");
    expect(allowed.result).toMatchObject({ status: "allowed", grantId: "child" });
    expect(allowed.chain).toEqual(["parent", "child"]);
    // Two uses carved at derivation; the child's own use is its own counter.
    expect(allowed.parentUses).toBe(2);

    const sibling = await readAsDelegate(store, "b");
    expect(sibling.result).toEqual({ status: "denied", code: "no_matching_grant" });
    // The delegate holds no grant for writing at all: the tool is not even visible.
    const write = await readAsDelegate(store, "a", "write");
    expect(write.result).toEqual({ status: "denied", code: "tool_unavailable" });
  });

  it("refuses a widened child with the axis's code and stores nothing", async () => {
    const { store, requestFile, derive } = setUp();
    const wider = derive(
      requestFile("wider", {
        id: "wider",
        subject: "sub-agent",
        capabilities: [capability(["cells"], ["read", "delete"])],
        constraints: { maxUses: 1 },
      }),
    );
    expectRefusal(wider, "delegation_wider_action");
    const notHolder = derive(requestFile("other", readCell("other", "a", 1)), "someone-else");
    expectRefusal(notHolder, "delegation_not_holder");
    const list = tessera("grants", "list", "--store", store, "--namespace", NS, "--json");
    expect((JSON.parse(list.stdout) as Grant[]).map((g) => g.id)).toEqual(["parent"]);
    expect((await readAsDelegate(store, "a")).parentUses).toBe(0);
  });

  it("refuses a child asking for more uses than the parent has left, spending none", async () => {
    const { store, requestFile, derive } = setUp();
    const first = derive(requestFile("first", readCell("first", "a", 4)));
    expect(first.code, first.stderr).toBe(0);
    const second = derive(requestFile("second", readCell("second", "b", 2)));
    expectRefusal(second, "delegation_budget_exhausted");
    const after = await readAsDelegate(store, "b");
    expect(after.result).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(after.parentUses).toBe(4);
  });

  it("refuses a child whose ID is taken, and gives back the uses it carved", async () => {
    const { store, requestFile, derive } = setUp();
    const file = requestFile("child", readCell("child", "a", 2));
    expect(derive(file).code).toBe(0);
    expectRefusal(derive(file), "invalid_grant");
    expect((await readAsDelegate(store, "b")).parentUses).toBe(2);
    // So the parent still has the three uses it had before the refused derive.
    const third = derive(requestFile("third", readCell("third", "c", 3)));
    expect(third.code, third.stderr).toBe(0);
  });

  it("names the field of a malformed request, as grants add does, and stores nothing", async () => {
    const { store, requestFile, derive } = setUp();
    const bad = {
      ...readCell("bad", "a", 1),
      capabilities: [{ ...capability(["cells"], []), actions: "read" }],
    };
    const refused = derive(requestFile("bad", bad));
    expectRefusal(refused, "invalid_grant");
    // Before: "the grant does not match the grant schema", with no field named.
    expect(JSON.parse(refused.stderr).error.message).toMatch(
      /^the grant does not match the grant schema: capabilities\.0\.actions: /,
    );
    const noId = derive(requestFile("no-id", { ...readCell("x", "a", 1), id: undefined }));
    expect(JSON.parse(noId.stderr).error.message).toMatch(/: id: /);
    // Nothing stored, nothing carved: the parent's five uses are all there for a good child.
    const good = derive(requestFile("good", readCell("good", "a", 5)));
    expect(good.code, good.stderr).toBe(0);
    expect((await readAsDelegate(store, "a")).result.status).toBe("allowed");
  });

  it("a revoked parent kills the derived grant from the next turn on", async () => {
    const { store, requestFile, derive } = setUp();
    const run = derive(requestFile("child", readCell("child", "a", 2)));
    expect(run.code, run.stderr).toBe(0);
    expect((await readAsDelegate(store, "a")).result.status).toBe("allowed");
    const revoked = tessera(
      "grants",
      "revoke",
      "--store",
      store,
      "--namespace",
      NS,
      "--id",
      "parent",
    );
    expect(revoked.code, revoked.stderr).toBe(0);
    // Nothing the delegate holds counts any more, so reading is not even visible.
    expect((await readAsDelegate(store, "a")).result).toEqual({
      status: "denied",
      code: "tool_unavailable",
    });
  });
});
