import { describe, expect, it } from "vitest";
import {
  allVerdicts,
  collectRun,
  describeStore,
  differences,
  escapeHtml,
  html,
  renderReport,
} from "../dist/report/index.js";
import { copy, seedRun } from "./support/report.js";

describe("the html template", () => {
  it("escapes every interpolated string, including attribute quotes", () => {
    const name = `<script>alert("x")</script>' onload='x`;
    const out = html`<td title="${name}">${name}</td>`.text;
    expect(out).toBe(
      '<td title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onload=&#39;x">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onload=&#39;x</td>',
    );
    expect(escapeHtml("a & b")).toBe("a &amp; b");
  });

  it("nests templates and arrays without escaping them twice", () => {
    const items = ["<a>", "b&"].map((x) => html`<li>${x}</li>`);
    expect(html`<ul>${items}</ul>`.text).toBe("<ul><li>&lt;a&gt;</li><li>b&amp;</li></ul>");
  });

  it("refuses to print an object as [object Object]", () => {
    expect(() => html`${{ a: 1 }}`).toThrow(TypeError);
  });

  it("counts the run's simulated effects instead of printing a bare zero", () => {
    const run = copy(seedRun());
    let callbacks = 0;
    for (const result of Object.values(run.twoWorkers)) {
      if (result) callbacks += result.before.tool_callbacks + result.after.tool_callbacks;
    }
    const deliveries = run.fanout.scenes.reduce((sum, scene) => sum + scene.deliveries, 0);
    expect(callbacks).toBeGreaterThan(0);
    const page = renderReport(run).html;
    expect(page).toContain(`the run's ${callbacks} callbacks each wrote one line`);
    expect(page).toContain(`its ${deliveries} deliveries went to an in-process echo`);
    const fewer = copy(run);
    (fewer.fanout.scenes[0] as { deliveries: number }).deliveries += 5;
    expect(renderReport(fewer).html).toContain(`its ${deliveries + 5} deliveries`);
  });

  it("escapes what a run carries: a hostile recipient name and store URL reach the page as text", () => {
    const run = copy(seedRun());
    const scene = run.fanout.scenes[0] as unknown as { lines: { recipient: string }[] };
    (scene.lines[0] as { recipient: string }).recipient = "<img src=x onerror=alert(1)>";
    const page = renderReport({ ...run, store: "sqlite:/tmp/<b>.db" }).html;
    expect(page).not.toContain("<img src=x");
    expect(page).toContain("&lt;img src=x onerror=alert(1)&gt;");
    expect(page).toContain("sqlite:/tmp/&lt;b&gt;.db");
  });
});

describe("verdicts: the run against the seed's expectation", () => {
  it("passes every case and scene of a run that measured what the seed says", () => {
    const verdicts = allVerdicts(seedRun());
    expect(verdicts.map((v) => v.id)).toEqual([
      "two-workers-one-id",
      "same-id-changed-body",
      "new-worker-old-id",
      "two-trusted-sessions",
      "fanout-scene-1",
      "fanout-scene-2",
      "fanout-scene-3",
      "fanout-scene-4",
      "fanout-scene-5",
    ]);
    expect(verdicts.filter((v) => !v.ok)).toEqual([]);
  });

  it("fails a case whose shared claim let the duplicate run, naming each wrong field", () => {
    const run = copy(seedRun());
    const after = run.twoWorkers["two-workers-one-id"].after as unknown as Record<string, unknown>;
    after.tool_callbacks = 2;
    after.response_codes = ["value", "value"];
    const failed = allVerdicts(run).filter((v) => !v.ok);
    expect(failed.map((v) => v.id)).toEqual(["two-workers-one-id"]);
    expect(failed[0]?.differences).toEqual([
      { field: "after.tool_callbacks", measured: "2", expected: "1" },
      {
        field: "after.response_codes",
        measured: '["value","value"]',
        expected: '["INVALID_FUNCTION_CALL","value"]',
      },
    ]);
  });

  it("fails a scene whose replay was told the wrong caller code, or that lost a line", () => {
    const run = copy(seedRun());
    const lines = run.fanout.scenes[1]?.lines as unknown as Record<string, unknown>[];
    (lines[1] as Record<string, unknown>).code = "no_matching_grant";
    (run.fanout.scenes[4] as unknown as { lines: unknown[] }).lines.pop();
    const failed = allVerdicts(run).filter((v) => !v.ok);
    expect(failed.map((v) => [v.id, v.differences[0]?.field])).toEqual([
      ["fanout-scene-2", "lines.1.code"],
      ["fanout-scene-5", "lines.length"],
    ]);
  });

  it("fails a case or scene the run does not have", () => {
    const run = copy(seedRun()) as unknown as {
      twoWorkers: Record<string, unknown>;
      fanout: { scenes: unknown[] };
    };
    delete run.twoWorkers["new-worker-old-id"];
    run.fanout.scenes.splice(2, 1);
    const failed = allVerdicts(run as never).filter((v) => !v.ok);
    expect(failed.map((v) => v.id)).toEqual(["new-worker-old-id", "fanout-scene-3"]);
    expect(renderReport(run as never).failed).toHaveLength(2);
  });

  it("scales the seed's figures with --workers: every worker but the winner is refused", () => {
    const run = copy(seedRun());
    (run as { workers: number }).workers = 3;
    const failed = allVerdicts(run).filter((v) => !v.ok);
    // The two-worker measurements no longer satisfy a three-worker expectation…
    expect(failed.map((v) => v.id)).toEqual([
      "two-workers-one-id",
      "same-id-changed-body",
      "two-trusted-sessions",
    ]);
    // …while the restart case always runs two processes.
    const one = failed[0]?.differences.find((d) => d.field === "after.reused");
    expect(one).toEqual({ field: "after.reused", measured: "1", expected: "2" });
  });

  it("compares scalar lists whole and records field by field", () => {
    expect(differences({ a: [1, 2], b: { c: "x" } }, { a: [1, 2], b: { c: "x", d: 1 } })).toEqual(
      [],
    );
    expect(differences({ code: undefined }, { code: "tool_unavailable" })).toEqual([
      { field: "code", measured: '"tool_unavailable"', expected: "absent" },
    ]);
  });
});

describe("the page", () => {
  it("shows a passing run as passing and names no failure", () => {
    const page = renderReport(seedRun());
    expect(page.failed).toEqual([]);
    expect(page.html).toContain("All 9 measured verdicts match the expected ones.");
    expect(page.html).not.toContain("FAILED");
  });

  it("marks a wrong verdict in text, beside its case and at the top", () => {
    const run = copy(seedRun());
    (run.twoWorkers["two-workers-one-id"].after as { tool_callbacks: number }).tool_callbacks = 2;
    const page = renderReport(run).html;
    expect(page).toContain("FAILED: 1 of 9 measured verdicts differ from the expected ones.");
    expect(page).toMatch(
      /id="two-workers-one-id"[\s\S]*FAILED: the measured verdict differs[\s\S]*after\.tool_callbacks<\/code>: measured <code>2<\/code>, expected <code>1<\/code>/,
    );
    // The figure shown is the run's, not the expectation.
    expect(page).toContain(
      'data-field="twoWorkers.two-workers-one-id.after.tool_callbacks">2</span>',
    );
  });

  it("is one file that asks for nothing: no script, no external URL, a policy that forbids fetches", () => {
    const page = renderReport({ ...seedRun(), bench: undefined }).html;
    expect(page).not.toMatch(/<script|<link|<img|<iframe|@import|url\(|https?:\/\//i);
    expect(page).toMatch(/Content-Security-Policy" content="default-src &#39;none&#39;/);
  });

  it("puts headings in order and a scope on every table header", () => {
    const page = renderReport(seedRun()).html;
    expect(page.match(/<h1[ >]/g)).toHaveLength(1);
    expect(page.match(/<th(?![^>]*scope=)[ >]/g)).toBeNull();
    expect(page.match(/<svg(?![^>]*aria-hidden="true")/g)).toBeNull();
  });
});

describe("collectRun", () => {
  it("runs the demos it is given and records where, when and with which store", async () => {
    const seed = seedRun();
    let asked: unknown;
    const run = await collectRun(
      { workers: 2, store: "postgres://user:secret@db:5432/tessera?password=also" },
      async (options) => {
        asked = options;
        return { twoWorkers: seed.twoWorkers, fanout: seed.fanout };
      },
    );
    expect(asked).toEqual({
      workers: 2,
      store: "postgres://user:secret@db:5432/tessera?password=also",
    });
    expect(run.store).toBe("postgres://db:5432/tessera");
    expect(run.twoWorkers).toBe(seed.twoWorkers);
    expect(Date.parse(run.startedAt)).not.toBeNaN();
    expect(run.machine.cpus).toBeGreaterThan(0);
  });

  it("keeps credentials and queries of store URLs off the page", () => {
    expect(describeStore("redis://:pw@cache:6379/0")).toBe("redis://cache:6379/0");
    expect(describeStore("sqlite:/var/lib/t.db?key=pw")).toBe("sqlite:/var/lib/t.db");
  });
});
