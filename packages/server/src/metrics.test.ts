import {
  InMemoryAuditSink,
  InMemoryClaimStore,
  InMemoryGrantStore,
  InMemoryGrantUsageStore,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { Metrics } from "./metrics.js";

/** Every line of one series of `tessera_store_seconds`, value as written. */
function series(text: string, port: string, op: string): Map<string, number> {
  const lines = new Map<string, number>();
  const labels = `port="${port}",op="${op}"`;
  for (const line of text.split("\n")) {
    const match = /^(tessera_store_seconds_\w+)\{(?:le="([^"]+)",)?([^}]*)\} (\S+)$/.exec(line);
    if (match === null || match[3] !== labels) continue;
    const key = match[2] === undefined ? (match[1] as string) : `le=${match[2]}`;
    lines.set(key, Number(match[4]));
  }
  return lines;
}

describe("store latency histogram", () => {
  it("counts every call, answered, refused or thrown, in cumulative buckets", async () => {
    const metrics = new Metrics();
    const audit = new InMemoryAuditSink();
    const grants = new InMemoryGrantStore();
    const failing = Object.assign(new InMemoryGrantUsageStore(), {
      getUsage: async () => {
        throw new Error("down");
      },
      tryConsume: () => {
        throw new Error("refused at once");
      },
    });
    const stores = metrics.timed({
      grants,
      usage: failing,
      audit,
      claims: new InMemoryClaimStore(),
    });
    for (let i = 0; i < 3; i++) await stores.grants.grantsVersion?.("ns", `actor-${i}`);
    await expect(stores.usage.getUsage("ns", "g")).rejects.toThrow("down");
    expect(() => stores.usage.tryConsume("ns", "g", 1)).toThrow("refused at once");

    const text = await metrics.registry.metrics();
    const version = series(text, "grants", "grantsVersion");
    expect(version.get("tessera_store_seconds_count")).toBe(3);
    expect(version.get("le=+Inf")).toBe(3);
    expect(version.get("tessera_store_seconds_sum")).toBeGreaterThanOrEqual(0);
    // Cumulative: never decreasing, and the last bound holds every call shorter than it.
    const bounds = [...version].filter(([key]) => key.startsWith("le=")).map(([, n]) => n);
    expect(bounds).toHaveLength(13);
    expect(bounds).toEqual([...bounds].sort((a, b) => a - b));
    expect(bounds[11]).toBe(3);
    expect(series(text, "usage", "getUsage").get("tessera_store_seconds_count")).toBe(1);
    expect(series(text, "usage", "tryConsume").get("tessera_store_seconds_count")).toBe(1);
    // A method never called shows no series.
    expect(text).not.toContain('op="append"');

    metrics.registry.resetMetrics();
    expect(await metrics.registry.metrics()).not.toContain('op="grantsVersion"');
  });
});

describe("decision counter", () => {
  it("shows every decision at each scrape, counts kept across scrapes", async () => {
    const metrics = new Metrics();
    const count = async (labels: string) => {
      const text = await metrics.registry.metrics();
      const line = text.split("\n").find((l) => l.startsWith(`tessera_decisions_total{${labels}}`));
      return line === undefined ? 0 : Number(line.split(" ").at(-1));
    };
    const denied = 'route="send",outcome="denied",code="no_matching_grant"';
    for (let i = 0; i < 5; i++) metrics.decided("send", "denied", "no_matching_grant");
    metrics.decided("authorize", "allowed", "");
    expect(await count(denied)).toBe(5);
    expect(await count('route="authorize",outcome="allowed",code=""')).toBe(1);
    metrics.decided("send", "denied", "no_matching_grant");
    expect(await count(denied)).toBe(6);
    expect(await count(denied)).toBe(6);
  });
});
