import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { explain } from "@tessera/core";
import { explainPrincipal } from "@tessera/mcp";
import { afterEach, describe, expect, it } from "vitest";
import {
  ALICE_TOKEN,
  DAVE_TOKEN,
  type Harness,
  PRINCIPALS,
  startHarness,
  textOf,
  toolGrant,
} from "./support.js";

const KEY = "io.tessera/idempotency-key";
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function rpcCode(error: unknown): string | undefined {
  return error instanceof McpError
    ? (error.data as { code?: string } | undefined)?.code
    : undefined;
}

async function names(client: Awaited<ReturnType<Harness["client"]>>): Promise<string[]> {
  return (await client.listTools()).tools.map((t) => t.name).sort();
}

describe("the MCP gateway over Streamable HTTP (official SDK client)", () => {
  it("lists only the tools the caller may run now, per principal", async () => {
    harness = await startHarness({}, [
      toolGrant("alice", ["messages", "echo"]),
      toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 }),
      toolGrant("dave", ["messages", "slow"]),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const dave = await harness.client(DAVE_TOKEN);
    expect(await names(alice)).toEqual(["messages.echo", "messages.send_message"]);
    expect(await names(dave)).toEqual(["messages.slow"]);
  });

  it("a grant store that does not answer is an error on tools/list, never an empty list", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const alice = await harness.client(ALICE_TOKEN);
    expect(await names(alice)).toEqual(["messages.echo"]);
    const grants = harness.grants;
    const listGrants = grants.listGrants;
    grants.listGrants = async () => {
      throw new Error("connection refused");
    };
    try {
      await expect(alice.listTools()).rejects.toSatisfy(
        (e) => rpcCode(e) === "grant_store_unavailable",
      );
    } finally {
      grants.listGrants = listGrants;
    }
    expect(await names(alice)).toEqual(["messages.echo"]);
  });

  it("runs a single-use ticket once; spent, the tool vanishes and is refused like one never granted", async () => {
    harness = await startHarness({}, [
      toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 }),
      toolGrant("alice", ["messages", "echo"]),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const first = await alice.callTool({
      name: "messages.send_message",
      arguments: { to: "bob", text: "hi" },
    });
    expect(first.isError).toBeFalsy();
    expect(textOf(first)).toBe("sent to bob: hi");
    expect(harness.counts("send_message")).toBe(1);

    const again = await alice.callTool({
      name: "messages.send_message",
      arguments: { to: "bob", text: "hi again" },
    });
    expect(again.isError).toBe(true);
    expect(textOf(again)).toBe("tool_unavailable");
    expect(harness.counts("send_message")).toBe(1);
    expect(await names(alice)).toEqual(["messages.echo"]);

    const never = await alice.callTool({ name: "messages.slow", arguments: { ms: 1 } });
    expect(textOf(never)).toBe("tool_unavailable");
    expect(never._meta?.["io.tessera/code"]).toBe("tool_unavailable");
    expect(harness.counts("slow")).toBe(0);

    // The owner tells spent from never granted through explain on the MCP call IDs.
    const who = explainPrincipal(PRINCIPALS[0] as (typeof PRINCIPALS)[0]);
    const firstId = first._meta?.["io.tessera/call-id"] as string;
    const againId = again._meta?.["io.tessera/call-id"] as string;
    const neverId = never._meta?.["io.tessera/call-id"] as string;
    expect((await explain(harness.audit, firstId, who)).verdict).toBe("allowed");
    expect((await explain(harness.audit, againId, who)).verdict).toBe("spent");
    expect((await explain(harness.audit, neverId, who)).verdict).toBe("never_granted");
  });

  it("a wrong recipient is refused at the capability, and nothing is spent", async () => {
    harness = await startHarness({}, [
      toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 }),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const wrong = await alice.callTool({
      name: "messages.send_message",
      arguments: { to: "mallory", text: "x" },
    });
    expect(textOf(wrong)).toBe("no_matching_grant");
    const right = await alice.callTool({
      name: "messages.send_message",
      arguments: { to: "bob", text: "x" },
    });
    expect(right.isError).toBeFalsy();
    expect(harness.counts("send_message")).toBe(1);
  });

  it("a spent ticket whose tool another ticket still reaches is refused no_matching_grant (the wrong-recipient rule)", async () => {
    harness = await startHarness({}, [
      toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 }),
      toolGrant("alice", ["messages", "send_message", "carol"], { maxUses: 1 }),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const send = (to: string) =>
      alice.callTool({ name: "messages.send_message", arguments: { to, text: "x" } });
    expect((await send("bob")).isError).toBeFalsy();
    // Carol's ticket keeps the tool listed, so bob's spent one reads like any wrong recipient.
    expect(await names(alice)).toContain("messages.send_message");
    const again = await send("bob");
    expect(textOf(again)).toBe("no_matching_grant");
    expect(harness.counts("send_message")).toBe(1);
    // The owner still learns it was spent.
    const who = explainPrincipal(PRINCIPALS[0] as (typeof PRINCIPALS)[0]);
    const againId = again._meta?.["io.tessera/call-id"] as string;
    expect((await explain(harness.audit, againId, who)).verdict).toBe("spent");
    // Once carol's is spent too, the tool is gone: tool_unavailable.
    expect((await send("carol")).isError).toBeFalsy();
    expect(textOf(await send("carol"))).toBe("tool_unavailable");
  });

  it("writes one audit event per allowed call, its act's: principal, tool, args digest (never the args), decision, latency", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const alice = await harness.client(ALICE_TOKEN);
    const secret = "the-secret-argument-value";
    const result = await alice.callTool({ name: "messages.echo", arguments: { text: secret } });
    const callId = result._meta?.["io.tessera/call-id"] as string;
    const events = await harness.audit.read({ callId });
    expect(events).toHaveLength(1);
    const event = events[0];
    expect(event).toMatchObject({
      actor: "alice",
      namespaceId: "acme",
      action: "tools/call",
      reason: "allowed",
    });
    // Recorded with the claim before forwarding: the receipt is settled into the claim.
    expect(event?.receipt).toBeUndefined();
    expect(event?.resource).toBe("mcp:/messages/echo");
    expect(event?.detail).toMatch(/tool messages\.echo/);
    expect(event?.detail).toMatch(/args sha256:[0-9a-f]{64}/);
    expect(event?.detail).toMatch(/latency \d+ ms/);
    expect(JSON.stringify(harness.audit.events)).not.toContain(secret);
  });

  it("a replay with the same key, sequential, gets the recorded result and is never forwarded", async () => {
    harness = await startHarness({}, [
      toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 }),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const call = {
      name: "messages.send_message",
      arguments: { to: "bob", text: "once" },
      _meta: { [KEY]: "k-1" },
    };
    const first = await alice.callTool(call);
    const second = await alice.callTool(call);
    expect(second).toEqual(first);
    // A new connection (its JSON-RPC ids start again from 0) with the same key: still a replay.
    const again = await harness.client(ALICE_TOKEN);
    expect(await again.callTool(call)).toEqual(first);
    expect(harness.counts("send_message")).toBe(1);
    // The same key for another call is a conflict, not a fresh call.
    const other = alice.callTool({ ...call, arguments: { to: "bob", text: "changed" } });
    await expect(other).rejects.toSatisfy((e) => rpcCode(e) === "call_id_conflict");
    expect(harness.counts("send_message")).toBe(1);
  });

  it("25 concurrent replays of one key reach the upstream once", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "slow"])]);
    const clients = await Promise.all(
      Array.from({ length: 5 }, () => harness?.client(ALICE_TOKEN)),
    );
    const settled = await Promise.allSettled(
      Array.from({ length: 25 }, (_, i) =>
        clients[i % 5]?.callTool({
          name: "messages.slow",
          arguments: { ms: 200 },
          _meta: { [KEY]: "race-1" },
        }),
      ),
    );
    expect(harness.counts("slow")).toBe(1);
    const ok = settled.filter((s) => s.status === "fulfilled");
    const refused = settled.filter((s) => s.status === "rejected");
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of refused)
      expect(rpcCode((r as PromiseRejectedResult).reason)).toBe("call_in_progress");
    for (const r of ok)
      expect(textOf((r as PromiseFulfilledResult<unknown>).value)).toBe("slept 200");
  });

  it("the JSON-RPC id is a key within its session: a retried id is answered, not re-run", async () => {
    harness = await startHarness({}, [toolGrant("alice", ["messages", "echo"])]);
    const alice = await harness.client(ALICE_TOKEN);
    const a = await alice.callTool({ name: "messages.echo", arguments: { text: "a" } });
    const b = await alice.callTool({ name: "messages.echo", arguments: { text: "b" } });
    expect([textOf(a), textOf(b)]).toEqual(["a", "b"]);
    expect(harness.counts("echo")).toBe(2);
  });

  it("a second principal is unaffected by the first's keys and tickets", async () => {
    harness = await startHarness({}, [
      toolGrant("alice", ["messages", "echo"]),
      toolGrant("dave", ["messages", "echo"], { maxUses: 1 }),
    ]);
    const alice = await harness.client(ALICE_TOKEN);
    const dave = await harness.client(DAVE_TOKEN);
    const call = {
      name: "messages.echo",
      arguments: { text: "same" },
      _meta: { [KEY]: "shared-key" },
    };
    expect(textOf(await alice.callTool(call))).toBe("same");
    expect(textOf(await dave.callTool(call))).toBe("same");
    expect(harness.counts("echo")).toBe(2);
  });

  it("stateless: a call without an idempotency key is refused as non-replayable", async () => {
    harness = await startHarness({ stateless: true }, [toolGrant("alice", ["messages", "echo"])]);
    const alice = await harness.client(ALICE_TOKEN);
    await expect(
      alice.callTool({ name: "messages.echo", arguments: { text: "x" } }),
    ).rejects.toSatisfy((e) => rpcCode(e) === "idempotency_key_required");
    const keyed = { name: "messages.echo", arguments: { text: "x" }, _meta: { [KEY]: "s-1" } };
    expect(textOf(await alice.callTool(keyed))).toBe("x");
    expect(textOf(await alice.callTool(keyed))).toBe("x");
    expect(harness.counts("echo")).toBe(1);
  });
});
