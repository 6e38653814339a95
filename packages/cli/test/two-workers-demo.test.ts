import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { DirectoryClaimStore } from "@tessera/a2ui";
import { serviceUrl } from "@tessera/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { removeRun } from "../../../test/support/scratch-stores.js";
import { quoteCall } from "../dist/demos/two-workers/catalog.js";
import {
  CASE_KEYS,
  formatTwoWorkersReport,
  runTwoWorkersDemo,
} from "../dist/demos/two-workers/index.js";
import { DemoWorker } from "../dist/demos/two-workers/spawn.js";

/** The verdicts the seed page lists for a correct gate with two workers. */
const memory = {
  tool_callbacks: 2,
  claimed: 2,
  reused: 0,
  claim_markers: 0,
  response_codes: ["value", "value"],
  receipt_statuses: ["dispatched", "dispatched"],
};
const sharedOnce = {
  tool_callbacks: 1,
  claimed: 1,
  reused: 1,
  claim_markers: 1,
  response_codes: ["INVALID_FUNCTION_CALL", "value"],
  receipt_statuses: ["dispatched", "none"],
};
const SEED_VERDICTS = {
  "two-workers-one-id": { mode: "parallel OS processes", before: memory, after: sharedOnce },
  "same-id-changed-body": { mode: "parallel OS processes", before: memory, after: sharedOnce },
  "new-worker-old-id": { mode: "sequential new OS process", before: memory, after: sharedOnce },
  "two-trusted-sessions": {
    mode: "parallel OS processes",
    before: memory,
    after: { ...memory, claim_markers: 2 },
  },
};

const scratch = mkdtempSync(path.join(tmpdir(), "tessera-demo-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("two-workers demo text", () => {
  it("ends with exactly one newline", () => {
    const text = formatTwoWorkersReport(
      SEED_VERDICTS as Parameters<typeof formatTwoWorkersReport>[0],
    );
    expect(text.endsWith("\n")).toBe(true);
    expect(text.endsWith("\n\n")).toBe(false);
  });
});

describe("two-workers demo, real OS processes", () => {
  it("the four cases reproduce the seed page's verdicts, measured from the run", async () => {
    const report = await runTwoWorkersDemo();
    expect(Object.keys(report)).toEqual([...CASE_KEYS]);
    expect(report).toEqual(SEED_VERDICTS);
    const text = formatTwoWorkersReport(report);
    expect(text).toContain("Process memory: 2 callbacks / Shared claim: 1 callback");
    expect(text).toContain("Process memory: 2 callbacks / Shared claim: 2 callbacks");
    expect(text).toContain("The callback is simulated");
  });

  it("--workers 3: three callbacks from process memory, one from the shared claim", async () => {
    const report = await runTwoWorkersDemo({ workers: 3, only: ["two-workers-one-id"] });
    expect(report["two-workers-one-id"].before.tool_callbacks).toBe(3);
    expect(report["two-workers-one-id"].after).toEqual({
      tool_callbacks: 1,
      claimed: 1,
      reused: 2,
      claim_markers: 1,
      response_codes: ["INVALID_FUNCTION_CALL", "INVALID_FUNCTION_CALL", "value"],
      receipt_statuses: ["dispatched", "none", "none"],
    });
  });

  it("refuses a bad worker count or an unknown store URL", async () => {
    await expect(runTwoWorkersDemo({ workers: 1 })).rejects.toMatchObject({
      code: "invalid_config",
    });
    await expect(runTwoWorkersDemo({ store: "mysql://x" })).rejects.toMatchObject({
      code: "unsupported_store_url",
    });
  });

  it("--store sqlite:… : the shared SQLite store gives the same verdicts", async () => {
    const url = `sqlite:${path.join(scratch, "claims.db")}`;
    const report = await runTwoWorkersDemo({ store: url });
    expect(report).toEqual(SEED_VERDICTS);
    // Each case used a fresh session namespace, so a second run does not collide with the first.
    const again = await runTwoWorkersDemo({ store: url, only: ["new-worker-old-id"] });
    expect(again["new-worker-old-id"]).toEqual(SEED_VERDICTS["new-worker-old-id"]);
  });
});

/** The shared database stores, when their URLs are set (CI sets them; locally they skip). */
describe.each([
  ["PostgreSQL", "TESSERA_PG_URL", "schema"],
  ["Redis", "TESSERA_REDIS_URL", "prefix"],
] as const)("--store with %s", (_label, variable, option) => {
  const base = serviceUrl(variable);
  // A schema or key prefix of this run's own, removed afterwards (a failure fails the file).
  const run = `cli_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  afterAll(async () => {
    if (base !== undefined) await removeRun(option, base, run);
  });
  it.runIf(base !== undefined)(
    "a duplicate is refused across processes; sessions stay independent",
    async () => {
      const url = new URL(base as string);
      url.searchParams.set(option, option === "prefix" ? `${run}:` : run);
      const only = ["two-workers-one-id", "two-trusted-sessions"] as const;
      const report = await runTwoWorkersDemo({ store: url.toString(), only });
      for (const key of only) expect(report[key]).toEqual(SEED_VERDICTS[key]);
    },
  );
});

describe("demo worker test hook: pause between claim and callback", () => {
  it("kill -9 there: the claim is in doubt, the next worker refuses, nothing ran", async () => {
    const dir = path.join(scratch, "kill9-claims");
    mkdirSync(dir, { mode: 0o700 });
    const callbacksFile = path.join(scratch, "kill9-callbacks.jsonl");
    const base = {
      store: { kind: "directory", dir } as const,
      session: "s",
      message: quoteCall("c-9", 1),
      callbacksFile,
    };
    const doomed = new DemoWorker({ ...base, pauseAfterClaim: true });
    await doomed.ready();
    doomed.go();
    await doomed.line((line) => line === "paused");
    await doomed.kill("SIGKILL");

    const store = await DirectoryClaimStore.open(dir);
    expect(await store.listInDoubt("s")).toMatchObject([{ session: "s", functionCallId: "c-9" }]);
    const next = new DemoWorker(base);
    await next.ready();
    next.go();
    expect(await next.outcome()).toEqual({
      responseCode: "INVALID_FUNCTION_CALL",
      receiptStatus: "none",
      claimed: 0,
      reused: 1,
    });
    expect(existsSync(callbacksFile)).toBe(false);
    await store.close();
  });
});
