import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { type GrantInput, type GrantUsageStore, InMemoryGrantUsageStore } from "@tessera/core";
import { afterEach, describe, expect, it } from "vitest";
import { ALICE_TOKEN, type Harness, startHarness, textOf, toolGrant, UPSTREAM } from "./support.js";

/**
 * The upstream's life as the gateway follows it: an upstream that exits is started again for
 * the next call (never for the call it died in), with a bounded backoff while it cannot come
 * back; an upstream whose tools change is read again and the gateway's clients are told.
 */
const KEY = "io.tessera/idempotency-key";
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function rpcCode(error: unknown): string | undefined {
  return (error as { data?: { code?: string } }).data?.code;
}

/**
 * A harness whose upstream also logs its starts and can be told to refuse to start (`refuse`)
 * or to start and never answer its handshake (`hang`).
 */
async function lifeHarness(
  restartBackoffMs = 250,
  extra: { upstreamTimeoutMs?: number; grants?: GrantInput[]; usage?: GrantUsageStore } = {},
): Promise<{ harness: Harness; starts(): number; refuse: string; hang: string }> {
  const dir = join(
    process.env.TMPDIR ?? "/tmp",
    `tessera-mcp-life-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
  );
  const startFile = `${dir}.starts`;
  const refuse = `${dir}.refuse`;
  const hang = `${dir}.hang`;
  const countFile = `${dir}.count`;
  const h = await startHarness(
    {
      ...(extra.usage === undefined ? {} : { usage: extra.usage }),
      limits: {
        restartBackoffMs,
        ...(extra.upstreamTimeoutMs === undefined
          ? {}
          : { upstreamTimeoutMs: extra.upstreamTimeoutMs }),
      },
      upstreams: {
        messages: {
          command: process.execPath,
          args: [UPSTREAM],
          env: {
            COUNT_FILE: countFile,
            START_FILE: startFile,
            REFUSE_FILE: refuse,
            HANG_FILE: hang,
            PATH: process.env.PATH ?? "",
          },
        },
      },
    },
    extra.grants ?? [toolGrant("alice", ["messages"], { scope: "descendants" })],
  );
  const close = h.close;
  const harness: Harness = {
    ...h,
    countFile,
    counts: (tool) =>
      existsSync(countFile)
        ? readFileSync(countFile, "utf8")
            .split("\n")
            .filter((l) => l !== "" && (tool === undefined || JSON.parse(l).tool === tool)).length
        : 0,
    close: async () => {
      await close();
      for (const f of [startFile, refuse, hang, countFile]) rmSync(f, { force: true });
    },
  };
  const starts = () =>
    existsSync(startFile) ? readFileSync(startFile, "utf8").split("\n").length - 1 : 0;
  return { harness, starts, refuse, hang };
}

describe("an upstream that exits", () => {
  it("is started again for the next call; the call it died in stays in doubt and is never re-sent", async () => {
    const life = await lifeHarness();
    harness = life.harness;
    const alice = await harness.client(ALICE_TOKEN);
    expect(life.starts()).toBe(1);
    const crash = { name: "messages.crash", arguments: {}, _meta: { [KEY]: "crash-1" } };
    await expect(alice.callTool(crash)).rejects.toSatisfy((e) => rpcCode(e) === "call_in_doubt");

    const after = await alice.callTool({ name: "messages.echo", arguments: { text: "back" } });
    expect(textOf(after)).toBe("back");
    expect(life.starts()).toBe(2);
    // The replay of the call that died is answered from its claim, not forwarded to the new one.
    await expect(alice.callTool(crash)).rejects.toSatisfy((e) => rpcCode(e) === "call_in_doubt");
    expect(harness.counts("crash")).toBe(1);
    expect(harness.counts("echo")).toBe(1);
  });

  it("while it cannot start, calls fail without a start per call (bounded backoff); then it comes back", async () => {
    // A first wait long enough that the calls below all fall inside it, even on a loaded machine.
    const life = await lifeHarness(3000);
    harness = life.harness;
    const alice = await harness.client(ALICE_TOKEN);
    await expect(alice.callTool({ name: "messages.crash", arguments: {} })).rejects.toSatisfy(
      (e) => rpcCode(e) === "call_in_doubt",
    );
    writeFileSync(life.refuse, "");
    // The first call tries one start, which exits at once: the call fails, nothing ran.
    await expect(
      alice.callTool({ name: "messages.echo", arguments: { text: "a" } }),
    ).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    const tried = life.starts();
    expect(tried).toBe(2);
    // Within the backoff, calls fail at once, without starting it again.
    for (let i = 0; i < 3; i++) {
      await expect(
        alice.callTool({ name: "messages.echo", arguments: { text: `b${i}` } }),
      ).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    }
    expect(life.starts()).toBe(tried);
    rmSync(life.refuse);
    // The backoff is bounded: it starts again within a few of its first steps.
    let answer: unknown;
    for (let i = 0; i < 60 && answer === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      answer = await alice
        .callTool({ name: "messages.echo", arguments: { text: "c" } })
        .catch(() => undefined);
    }
    expect(textOf(answer)).toBe("c");
    expect(harness.counts("echo")).toBe(1);
  });
  it("and starts again hanging in its handshake fails the next call within the call's deadline, nothing sent, its ticket's use given back", async () => {
    const usage = new InMemoryGrantUsageStore();
    const ticket = toolGrant("alice", ["messages", "send_message", "bob"], { maxUses: 1 });
    const life = await lifeHarness(100, {
      upstreamTimeoutMs: 1500,
      grants: [toolGrant("alice", ["messages", "crash"]), ticket],
      usage,
    });
    harness = life.harness;
    const alice = await harness.client(ALICE_TOKEN);
    await expect(alice.callTool({ name: "messages.crash", arguments: {} })).rejects.toSatisfy(
      (e) => rpcCode(e) === "call_in_doubt",
    );
    writeFileSync(life.hang, "");
    const call = {
      name: "messages.send_message",
      arguments: { to: "bob", text: "hi" },
      _meta: { [KEY]: "hung-start" },
    };
    // Before, the call waited for the SDK's own 60 s handshake timeout: this client gave up first.
    const failed = await alice.callTool(call, undefined, { timeout: 20_000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(rpcCode(failed)).toBe("upstream_failed");
    expect(String((failed as Error).message)).toContain("did not start");
    expect(harness.counts("send_message")).toBe(0);
    const events = await harness.audit.read({ callId: "hung-start" });
    expect(events.map((e) => e.reason)).toEqual(["allowed", "delivery_failed", "use_returned"]);
    // The ticket's use came back: bob's ticket reaches the tool again.
    expect(await usage.getUsage("acme", ticket.id)).toBe(0);
    expect((await alice.listTools()).tools.map((t) => t.name)).toContain("messages.send_message");
    // Its replay is the same error, never forwarded.
    await expect(alice.callTool(call)).rejects.toSatisfy((e) => rpcCode(e) === "upstream_failed");
    expect(harness.counts("send_message")).toBe(0);
    // Closing the gateway ends the start still hanging (harness.close below) at once.
  }, 40_000);
});

describe("an upstream whose tools change", () => {
  it("is listed again, and the gateway's clients get notifications/tools/list_changed", async () => {
    const life = await lifeHarness();
    harness = life.harness;
    const alice = await harness.client(ALICE_TOKEN);
    const names = async () => (await alice.listTools()).tools.map((t) => t.name);
    expect(await names()).not.toContain("messages.extra_1");
    const told = new Promise<void>((resolve) =>
      alice.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()),
    );
    expect(textOf(await alice.callTool({ name: "messages.grow", arguments: {} }))).toBe("grown 1");
    await told;
    expect(await names()).toContain("messages.extra_1");
    const extra = await alice.callTool({ name: "messages.extra_1", arguments: {} });
    expect(textOf(extra)).toBe("extra");
    expect(harness.counts("extra_1")).toBe(1);
  });
});
