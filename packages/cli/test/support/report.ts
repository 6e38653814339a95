import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Browser } from "playwright-core";
import type { ReportRun } from "../../dist/report/index.js";

/** Debian's package; playwright-core never downloads a browser here. */
export const CHROMIUM = "/usr/bin/chromium";
export const REPO = fileURLToPath(new URL("../../../../", import.meta.url));
export const BENCH_RESULTS = `${REPO}bench/results/latest.json`;
export const ARTIFACTS = `${REPO}.tmp/artifacts/report`;

/**
 * Whether the browser tests can run. Under CI a missing Chromium is a failure with the fix in
 * its message (`.ci/run` installs it); elsewhere the tests are skipped.
 */
export function chromiumPresent(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI === "true") {
    throw new Error(
      `the report's browser tests need Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`,
    );
  }
  return false;
}

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import("playwright-core");
  return chromium.launch({ executablePath: CHROMIUM });
}

/** The value at a `data-field` path (`twoWorkers.two-workers-one-id.after.claimed`). */
export function valueAt(root: unknown, path: string): unknown {
  let here: unknown = root;
  for (const key of path.split(".")) {
    if (typeof here !== "object" || here === null) return undefined;
    here = (here as Record<string, unknown>)[key];
  }
  return here;
}

const phase = (processes: number, oneRan: boolean, markers: number) =>
  oneRan
    ? {
        tool_callbacks: 1,
        claimed: 1,
        reused: processes - 1,
        claim_markers: 1,
        response_codes: [...Array(processes - 1).fill("INVALID_FUNCTION_CALL"), "value"],
        receipt_statuses: ["dispatched", ...Array(processes - 1).fill("none")],
      }
    : {
        tool_callbacks: processes,
        claimed: processes,
        reused: 0,
        claim_markers: markers,
        response_codes: Array(processes).fill("value"),
        receipt_statuses: Array(processes).fill("dispatched"),
      };

const ticket = (of: string, used: number, revoked = false) => ({ of, used, maxUses: 1, revoked });
const sent = (r: string) => ({
  verdict: "SENT" as const,
  recipient: r,
  reason: "allowed" as const,
  reply: `reply from ${r}`,
  ticket: ticket(r, 1),
});

/** A run as the seed pages describe it (two workers, three colleagues): every verdict passes. */
export function seedRun(): ReportRun {
  const parallel = "parallel OS processes" as const;
  return {
    startedAt: "2026-11-30T10:00:00.000Z",
    durationMs: 9600,
    machine: {
      platform: "linux",
      release: "6.1",
      arch: "x64",
      cpus: 2,
      model: "AMD EPYC",
      node: "v20.20.2",
    },
    workers: 2,
    store: null,
    twoWorkers: {
      "two-workers-one-id": {
        mode: parallel,
        before: phase(2, false, 0),
        after: phase(2, true, 1),
      },
      "same-id-changed-body": {
        mode: parallel,
        before: phase(2, false, 0),
        after: phase(2, true, 1),
      },
      "new-worker-old-id": {
        mode: "sequential new OS process",
        before: phase(2, false, 0),
        after: phase(2, true, 1),
      },
      "two-trusted-sessions": {
        mode: parallel,
        before: phase(2, false, 0),
        after: phase(2, false, 2),
      },
    },
    fanout: {
      recipients: 3,
      usageStore: "memory",
      scenes: [
        {
          number: 1,
          title: "three colleagues, three single-use tickets, one turn",
          lines: ["colleague-0", "colleague-1", "colleague-2"].map(sent),
          deliveries: 3,
          allDistinct: true,
          turn: "completed",
          asExpected: true,
        },
        {
          number: 2,
          title: "the same question asked twice of one colleague",
          lines: [
            sent("colleague-0"),
            {
              verdict: "DENY",
              recipient: "colleague-0",
              code: "tool_unavailable",
              reason: "grant_exhausted",
            },
          ],
          deliveries: 1,
          turn: "completed",
          asExpected: true,
        },
        {
          number: 3,
          title: "a colleague nobody issued a ticket for",
          lines: [
            {
              verdict: "DENY",
              recipient: "colleague-1",
              code: "no_matching_grant",
              reason: "no_capability",
              ticket: ticket("colleague-0", 0),
            },
          ],
          deliveries: 0,
          turn: "completed",
          asExpected: true,
        },
        {
          number: 4,
          title: "the owner revokes one ticket; the other is untouched",
          lines: [
            {
              verdict: "DENY",
              recipient: "colleague-0",
              code: "no_matching_grant",
              reason: "revoked",
              ticket: ticket("colleague-0", 0, true),
            },
            sent("colleague-1"),
          ],
          deliveries: 1,
          turn: "completed",
          asExpected: true,
        },
        {
          number: 5,
          title: "no usage store, so a single-use ticket cannot be counted",
          lines: ["colleague-0", "colleague-1"].map((r) => ({
            verdict: "DENY" as const,
            recipient: r,
            code: "tool_unavailable" as const,
            reason: "usage_store_unavailable" as const,
          })),
          deliveries: 0,
          turn: "completed",
          asExpected: true,
        },
      ],
    },
  };
}

/** A deep copy to break on purpose. */
export const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;
