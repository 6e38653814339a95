import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  type ActLedger,
  type AuditEvent,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
  TesseraError,
} from "@tessera/core";
import { composeActLedger } from "@tessera/core/store-kit";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createMcpGateway, type McpGateway } from "./gateway.js";
import { IDEMPOTENCY_KEY } from "./keys.js";
import { observeActs } from "./observe.js";
import { tokenDigest } from "./principals.js";

/**
 * `observeActs` (the decision log `tessera mcp` and `openMcpGateway({ onDecision })` put
 * around the store's act ledger) keeps what that ledger declares. Before, it kept `record`
 * only: a lost store reply was never withdrawn (its call ID blocked, read in progress then in
 * doubt, though nothing ran, and the single-use ticket's use kept spent), and the ledger's
 * version checks and lost-spend undo were hidden from the kernel.
 */
const TOKEN = "observe-token-0123456789";
let gateway: McpGateway | undefined;
let client: Client | undefined;
afterEach(async () => {
  await client?.close();
  await gateway?.close();
  client = undefined;
  gateway = undefined;
});

/** `inner`, whose first act with a claim is recorded and then reported lost. */
function losingFirstReply(inner: ActLedger): ActLedger {
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
    withdraw: (withdrawal) => (inner.withdraw as NonNullable<ActLedger["withdraw"]>)(withdrawal),
  };
}

describe("observeActs", () => {
  it("keeps the ledger's withdraw, version checks and lost-spend undo", async () => {
    const space = {};
    const inner: ActLedger = {
      record: async () => ({ status: "recorded", recorded: "event" }),
      withdraw: async () => "withdrawn",
      checksVersionsIn: space,
      undoesLostSpends: true,
    };
    const observed = observeActs(inner, () => undefined);
    expect(observed.checksVersionsIn).toBe(space);
    expect(observed.undoesLostSpends).toBe(true);
    expect(typeof observed.withdraw).toBe("function");
  });

  it("a lost reply behind the decision log is withdrawn: the retry gets a decision, the use is back, nothing ran", async () => {
    const claims = new InMemoryClaimStore();
    const usage = new InMemoryGrantUsageStore();
    const audit = new InMemoryAuditSink();
    const grants = new InMemoryGrantStore();
    await grants.add({
      id: "ticket-bob",
      namespaceId: "acme",
      issuer: "host",
      subject: "alice",
      capabilities: [
        {
          resource: { namespace: "mcp", path: ["up", "send", "bob"] },
          actions: ["tools/call"],
          scope: "exact",
        },
      ],
      constraints: { maxUses: 1 },
      issuedAt: "2020-01-01T00:00:00.000Z",
    });
    let runs = 0;
    const upstream = new McpServer({ name: "up", version: "1.0.0" });
    upstream.registerTool("send", { inputSchema: { to: z.string() } }, async ({ to }) => {
      runs++;
      return { content: [{ type: "text", text: `sent to ${to}` }] };
    });
    const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
    await upstream.connect(upstreamSide);
    const seen: AuditEvent[] = [];
    gateway = await createMcpGateway({
      upstreams: { up: { transport: gatewaySide } },
      tools: { up: { send: { bind: ["to"] } } },
      principals: [
        {
          tokenSha256: tokenDigest(TOKEN),
          namespaceId: "acme",
          actor: "alice",
          authority: "host",
        },
      ],
      grants,
      usage,
      claims,
      audit,
      acts: observeActs(losingFirstReply(composeActLedger({ claims, usage, audit })), (event) =>
        seen.push(event),
      ),
    });
    const [mine, theirs] = InMemoryTransport.createLinkedPair();
    await gateway.serve(theirs, TOKEN);
    client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(mine);
    const call = {
      name: "up.send",
      arguments: { to: "bob" },
      _meta: { [IDEMPOTENCY_KEY]: "lost-behind-log" },
    };
    await expect(client.callTool(call)).rejects.toSatisfy(
      (e) => (e as { data?: { code?: string } }).data?.code === "claim_store_unavailable",
    );
    // The withdrawal runs in the background: wait for its settle.
    for (let i = 0; i < 200; i++) {
      if ((await claims.listInDoubt()).length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(await claims.listInDoubt()).toEqual([]);
    expect(await usage.getUsage("acme", "ticket-bob")).toBe(0);
    const retry = await client.callTool(call);
    expect(retry.isError).toBe(true);
    expect(retry._meta?.["io.tessera/code"]).toBe("authority_unavailable");
    expect(runs).toBe(0);
    // The withdrawal's event is logged like any decision.
    expect(seen.map((e) => e.reason)).toContain("act_withdrawn");
    // The ticket's use is back: a new key runs the tool, once.
    const fresh = await client.callTool({ ...call, _meta: { [IDEMPOTENCY_KEY]: "fresh" } });
    expect(fresh.isError ?? false).toBe(false);
    expect(runs).toBe(1);
  });
});
