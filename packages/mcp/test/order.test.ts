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
    log.push("claim start");
    await options.claimGate?.opened;
    const claimed = await claim(key, record);
    log.push("claim end");
    return claimed;
  };
  const settle = claims.settle.bind(claims);
  claims.settle = async (key, receipt, answer) => {
    log.push(answer === undefined ? "settled" : "answer kept");
    return settle(key, receipt, answer);
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
    log.push("upstream");
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

  it("the act (claim, spend, event) lands before the upstream runs; the answer is kept after the reply", async () => {
    const auditGate = gate();
    const { log, runs, client, gateway } = await rig({ auditGate });
    const reply = client.callTool(call("k-2"));
    await until(log, "audit start");
    // Give the upstream, or a write started beside the act's event, every chance to show.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs()).toBe(0);
    expect(log).not.toContain("answer kept");
    auditGate.open();
    await reply;
    await gateway.close();
    const act = log.indexOf("audit end");
    expect(log.slice(log.indexOf("claim start"), act + 1)).toEqual([
      "claim start",
      "claim end",
      "spend",
      "audit start",
      "audit end",
    ]);
    expect(log.indexOf("upstream")).toBeGreaterThan(act);
    // One event per allowed call (the act's): the receipt and answer go into the claim.
    expect(log.filter((e) => e === "audit start")).toHaveLength(1);
    expect(log.indexOf("answer kept")).toBeGreaterThan(log.indexOf("upstream"));
  });

  it("an audit sink that refuses the act's event: the caller is told nothing ran, and nothing did", async () => {
    const { runs, client } = await rig({ failAudit: 1 });
    const first = client.callTool(call("k-3"));
    await expect(first).rejects.toSatisfy(
      (e) => (e as { data?: { code?: string } }).data?.code === "claim_store_unavailable",
    );
    // No effect without its record: the upstream never ran.
    expect(runs()).toBe(0);
  });
});
