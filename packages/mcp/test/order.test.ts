import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  type AuditEvent,
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "@tessera/core";
import { createMcpGateway, IDEMPOTENCY_KEY, type McpGateway } from "@tessera/mcp";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ALICE_TOKEN, PRINCIPALS, toolGrant } from "./support.js";

/**
 * The order of a call's store work: what may go out beside the claim, what waits for it, and
 * what waits for the reply. Every store is a memory store whose methods log when they start and
 * end, and some of them wait for a gate the test opens.
 */

interface Gate {
  readonly opened: Promise<void>;
  open(): void;
}

function gate(): Gate {
  let open = (): void => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Resolves once `log` holds `entry`. */
async function until(log: readonly string[], entry: string): Promise<void> {
  while (!log.includes(entry)) await new Promise((resolve) => setTimeout(resolve, 1));
}

interface Rig {
  readonly log: string[];
  readonly runs: () => number;
  readonly client: Client;
  readonly gateway: McpGateway;
}

let open: McpGateway | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

async function rig(options: {
  claimGate?: Gate;
  auditGate?: Gate;
  failAudit?: number;
}): Promise<Rig> {
  const log: string[] = [];
  const grants = new InMemoryGrantStore();
  await grants.add(toolGrant("alice", ["up", "echo"], { maxUses: 5 }));
  const readVersion = grants.grantsVersion.bind(grants);
  grants.grantsVersion = async (ns, subject) => {
    log.push("grant read");
    return readVersion(ns, subject);
  };
  const usage = new InMemoryGrantUsageStore();
  const consume = usage.tryConsume.bind(usage);
  usage.tryConsume = async (ns, id, max) => {
    log.push("spend");
    return consume(ns, id, max);
  };
  const claims = new InMemoryClaimStore();
  const claim = claims.claim.bind(claims);
  claims.claim = async (key, record) => {
    const answer = key.session.startsWith("mcp.result:");
    log.push(answer ? "answer kept" : "claim start");
    if (!answer) await options.claimGate?.opened;
    const claimed = await claim(key, record);
    if (!answer) log.push("claim end");
    return claimed;
  };
  const audit = new InMemoryAuditSink();
  const append = audit.append.bind(audit);
  let failures = options.failAudit ?? 0;
  audit.append = async (event: AuditEvent) => {
    log.push("audit start");
    await options.auditGate?.opened;
    if (failures > 0) {
      failures--;
      throw new Error("the audit store is down");
    }
    await append(event);
    log.push("audit end");
  };
  let runs = 0;
  const upstream = new McpServer({ name: "up", version: "1.0.0" });
  upstream.registerTool("echo", { inputSchema: { text: z.string() } }, async ({ text }) => {
    runs++;
    return { content: [{ type: "text", text }] };
  });
  const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
  await upstream.connect(upstreamSide);
  const gateway = await createMcpGateway({
    upstreams: { up: { transport: gatewaySide } },
    principals: PRINCIPALS,
    grants,
    usage,
    claims,
    audit,
  });
  open = gateway;
  const [mine, theirs] = InMemoryTransport.createLinkedPair();
  await gateway.serve(theirs, ALICE_TOKEN);
  const client = new Client({ name: "test", version: "1.0.0" });
  await client.connect(mine);
  return { log, runs: () => runs, client, gateway };
}

const call = (key: string) => ({
  name: "up.echo",
  arguments: { text: "hi" },
  _meta: { [IDEMPOTENCY_KEY]: key },
});

describe("a call's store work, in order", () => {
  it("the grant read goes out beside the claim; the spend and the upstream wait for the claim", async () => {
    const claimGate = gate();
    const { log, runs, client } = await rig({ claimGate });
    const reply = client.callTool(call("k-1"));
    await until(log, "claim start");
    await until(log, "grant read");
    expect(log).not.toContain("spend");
    expect(runs()).toBe(0);
    claimGate.open();
    await reply;
    const order = log.slice(0, log.indexOf("audit start"));
    expect(order.slice(0, 2).sort()).toEqual(["claim start", "grant read"]);
    expect(order.slice(2)).toEqual(["claim end", "spend"]);
    expect(runs()).toBe(1);
  });

  it("the answer is kept once the call's audit event has landed, after the reply", async () => {
    const auditGate = gate();
    const { log, client, gateway } = await rig({ auditGate });
    const reply = client.callTool(call("k-2"));
    await until(log, "audit start");
    // Give a write started beside the audit every chance to show.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(log).not.toContain("answer kept");
    auditGate.open();
    await reply;
    await gateway.close();
    expect(log.indexOf("answer kept")).toBeGreaterThan(log.indexOf("audit end"));
  });

  it("an audit sink that refuses: the caller gets audit_unavailable, the answer is still kept", async () => {
    const { runs, client } = await rig({ failAudit: 1 });
    const first = client.callTool(call("k-3"));
    await expect(first).rejects.toSatisfy(
      (e) => (e as { data?: { code?: string } }).data?.code === "audit_unavailable",
    );
    // The call did run: its replay is answered from the record, not run again.
    const replay = await client.callTool(call("k-3"));
    expect(replay.content).toEqual([{ type: "text", text: "hi" }]);
    expect(runs()).toBe(1);
  });
});
