import { type GrantUsageStore, InMemoryGrantUsageStore, isTesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { formatFanoutReport, runFanoutDemo } from "./index.js";

describe("the recipient fan-out demo", () => {
  it("shows the five scenes, each as expected, with figures from the run", async () => {
    const report = await runFanoutDemo({});
    expect(report.recipients).toBe(3);
    expect(report.scenes.map((s) => [s.number, s.asExpected, s.deliveries])).toEqual([
      [1, true, 3],
      [2, true, 1],
      [3, true, 0],
      [4, true, 1],
      [5, true, 0],
    ]);
    // Each scene ran as one turn of a scripted driver under a TurnExecutor, to completion.
    expect(report.scenes.map((s) => s.turn)).toEqual(Array(5).fill("completed"));
    const [one, two, three, four, five] = report.scenes;
    expect(one?.allDistinct).toBe(true);
    expect(one?.lines.map((l) => l.ticket?.used)).toEqual([1, 1, 1]);
    expect(two?.lines[1]).toMatchObject({
      verdict: "DENY",
      code: "tool_unavailable",
      reason: "grant_exhausted",
    });
    expect(three?.lines[0]).toMatchObject({
      verdict: "DENY",
      recipient: "colleague-1",
      code: "no_matching_grant",
      ticket: { of: "colleague-0", used: 0, maxUses: 1 },
    });
    expect(four?.lines.map((l) => [l.verdict, l.reason, l.code])).toEqual([
      ["DENY", "revoked", "no_matching_grant"],
      ["SENT", "allowed", undefined],
    ]);
    expect(five?.lines.map((l) => [l.code, l.reason])).toEqual([
      ["tool_unavailable", "usage_store_unavailable"],
      ["tool_unavailable", "usage_store_unavailable"],
    ]);
  });

  it("prints the seed's layout", async () => {
    const text = formatFanoutReport(await runFanoutDemo({}));
    expect(text).toContain("1. three colleagues, three single-use tickets, one turn");
    expect(text).toMatch(/ {2}SENT {3}colleague-0 {4}ticket spent 1\/1 {3}reply from colleague-0/);
    expect(text).toContain("deliveries: 3, all distinct: true");
    expect(text).toContain(
      "DENY   colleague-0    caller is told tool_unavailable, audit says grant_exhausted",
    );
    expect(text).toContain(
      "DENY   colleague-1    no_matching_grant   colleague-0's ticket spent 0/1",
    );
    expect(text).toContain("DENY   colleague-0    revoked   no_matching_grant");
    expect(text).toContain("SENT   colleague-1    ticket untouched");
    expect(text).toContain("Fails closed before the transport is reached. deliveries: 0");
    expect(text).not.toContain("NOT AS EXPECTED");
  });

  it("recipients: 7 gives 7 distinct deliveries", async () => {
    const report = await runFanoutDemo({ recipients: 7 });
    const one = report.scenes[0];
    expect(one?.deliveries).toBe(7);
    expect(one?.allDistinct).toBe(true);
    expect(new Set(one?.lines.map((l) => l.recipient)).size).toBe(7);
    expect(formatFanoutReport(report)).toContain(
      "1. seven colleagues, seven single-use tickets, one turn",
    );
  });

  it("is plain JSON", async () => {
    const report = await runFanoutDemo({ recipients: 2 });
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
  });

  it("with a shared host store: one store per scene, fresh namespaces, nothing leaks between runs", async () => {
    const shared = new InMemoryGrantUsageStore();
    const namespaces = new Set<string>();
    let opened = 0;
    const factory = (): GrantUsageStore => {
      opened++;
      return {
        getUsage: (ns, id) => {
          namespaces.add(ns);
          return shared.getUsage(ns, id);
        },
        tryConsume: (ns, id, max) => {
          namespaces.add(ns);
          return shared.tryConsume(ns, id, max);
        },
      };
    };
    const first = await runFanoutDemo({ usage: factory });
    const second = await runFanoutDemo({ usage: factory });
    expect(opened).toBe(8); // scenes 1-4 of each run; scene 5 has no store by design
    expect(first.usageStore).toBe("host");
    for (const report of [first, second]) {
      expect(report.scenes.every((s) => s.asExpected)).toBe(true);
    }
    expect(namespaces.size).toBe(8);
  });

  it.each([0, -1, 2.5, 100_001])(
    "refuses recipients: %s with invalid_input",
    async (recipients) => {
      const error = await runFanoutDemo({ recipients }).catch((e: unknown) => e);
      expect(isTesseraError(error, "invalid_input")).toBe(true);
    },
  );
});
