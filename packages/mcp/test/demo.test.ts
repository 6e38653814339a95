import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const DEMO = fileURLToPath(new URL("../../../examples/mcp-gateway/demo.mjs", import.meta.url));

interface Row {
  to: string;
  refused: boolean;
  code: string | null;
  verdict: string;
  reason?: string;
  forwarded: boolean;
  spent?: number;
  replayed?: boolean;
}

describe("npm run example:mcp-gateway", () => {
  it("prints the fan-out through MCP as the run measured it", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [DEMO, "--json"]);
    const { scenes } = JSON.parse(stdout) as {
      scenes: { rows: Row[]; deliveries: number; distinct?: boolean; listedAfter?: string[] }[];
    };
    const [fanout, replay, wrong, revoked] = scenes;
    expect(fanout?.rows.map((r) => [r.to, r.refused, r.spent, r.forwarded])).toEqual([
      ["colleague-0", false, 1, true],
      ["colleague-1", false, 1, true],
      ["colleague-2", false, 1, true],
    ]);
    expect(fanout).toMatchObject({ deliveries: 3, distinct: true, listedAfter: [] });
    expect(replay?.rows.map((r) => [r.refused, r.forwarded, r.code, r.reason])).toEqual([
      [false, true, null, "allowed"],
      [false, false, null, "allowed"],
      [true, false, "tool_unavailable", "grant_exhausted"],
    ]);
    expect(replay?.deliveries).toBe(1);
    expect(wrong?.rows[0]).toMatchObject({ code: "no_matching_grant", spent: 0, forwarded: false });
    expect(wrong?.deliveries).toBe(0);
    expect(revoked?.rows.map((r) => [r.to, r.code, r.reason])).toEqual([
      ["colleague-0", "no_matching_grant", "revoked"],
      ["colleague-1", null, "allowed"],
    ]);
    expect(revoked?.deliveries).toBe(1);
  });
});
