import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, tessera } from "./support/cli.js";
import {
  ARTIFACTS,
  BENCH_RESULTS,
  chromiumPresent,
  copy,
  launchChromium,
  valueAt,
} from "./support/report.js";

/**
 * The measured-verdicts page in a real browser (Debian's Chromium, headless): the figures in
 * the DOM against the JSON of the same run, every disclosure, no request leaving the page, no
 * console error, phone and desktop widths, print. Screenshots land in .tmp/artifacts/report/.
 */

type Callbacks = Record<string, unknown> & { tool_callbacks: number };

interface RunJson {
  run: Record<string, unknown> & {
    twoWorkers: Record<string, { before: Callbacks; after: Callbacks }>;
    fanout: { scenes: { deliveries: number }[] };
    bench: { sections: { name: string; rows: { name: string; ratio?: number }[] }[] };
  };
  verdicts: { id: string; ok: boolean }[];
}

const present = chromiumPresent();

describe.skipIf(!present)("the report page in Chromium", () => {
  let browser: Browser;
  let live: RunJson;
  let livePage: string;
  let wrongPage: string;
  let wrongExit: number | null;

  beforeAll(async () => {
    const dir = scratch();
    livePage = join(dir, "live", "index.html");
    const run = tessera("report", "--out", livePage, "--bench", BENCH_RESULTS, "--json");
    expect(run.stderr).toContain("all 9 measured verdicts as expected");
    live = JSON.parse(run.stdout) as RunJson;

    // The same run with one case broken on purpose: the gate let the duplicate run.
    const wrong = copy(live);
    const after = wrong.run.twoWorkers["two-workers-one-id"]?.after as Record<string, unknown>;
    after.tool_callbacks = 2;
    after.receipt_statuses = ["dispatched", "dispatched"];
    const saved = join(dir, "wrong.json");
    writeFileSync(saved, JSON.stringify(wrong));
    wrongPage = join(dir, "wrong", "index.html");
    wrongExit = tessera("report", "--results", saved, "--out", wrongPage).code;

    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
  });

  /** Opens a page file, recording every request it makes and every console error. */
  async function open(file: string, width = 1280) {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const requests: string[] = [];
    const errors: string[] = [];
    // Anything other than the file itself or inline data is recorded and refused.
    await context.route("**/*", (route) => {
      const url = route.request().url();
      requests.push(url);
      return url.startsWith("file://") || url.startsWith("data:")
        ? route.continue()
        : route.abort();
    });
    const page = await context.newPage();
    page.on("request", (request) => requests.push(request.url()));
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning") errors.push(message.text());
    });
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(pathToFileURL(file).href, { waitUntil: "load" });
    return { page, requests, errors, close: () => context.close() };
  }

  async function figures(page: Page) {
    return page.$$eval("[data-field]", (nodes) =>
      nodes.map((node) => ({
        field: node.getAttribute("data-field") as string,
        list: node.hasAttribute("data-list"),
        text: node.textContent ?? "",
      })),
    );
  }

  it("shows every figure as the run's JSON has it", async () => {
    const { page, close } = await open(livePage);
    const shown = await figures(page);
    for (const { field, list, text } of shown) {
      const value = valueAt(live.run, field);
      expect(value, field).not.toBeUndefined();
      expect(text, field).toBe(list ? (value as string[]).join(", ") : String(value));
    }
    const fields = new Set(shown.map((s) => s.field));
    // Non-vacuous: the headline, every case's six fields in both phases, every scene's lines.
    for (const key of Object.keys(live.run.twoWorkers)) {
      for (const phase of ["before", "after"]) {
        for (const f of [
          "tool_callbacks",
          "claimed",
          "reused",
          "claim_markers",
          "response_codes",
          "receipt_statuses",
        ]) {
          expect(fields.has(`twoWorkers.${key}.${phase}.${f}`), `${key}.${phase}.${f}`).toBe(true);
        }
      }
    }
    expect(fields.has("fanout.scenes.1.lines.1.code")).toBe(true);
    expect(fields.has("fanout.scenes.4.deliveries")).toBe(true);
    expect(await page.locator(".stats strong").allTextContents()).toEqual(["2", "1", "No"]);
    // The third headline counts this run's simulated effects rather than printing a bare zero.
    const callbacks = Object.values(live.run.twoWorkers).reduce(
      (sum, result) => sum + result.before.tool_callbacks + result.after.tool_callbacks,
      0,
    );
    const deliveries = live.run.fanout.scenes.reduce((sum, scene) => sum + scene.deliveries, 0);
    const effects = await page.locator(".stats li").nth(2).textContent();
    expect(effects).toContain(`${callbacks} callbacks each wrote one line to a scratch file`);
    expect(effects).toContain(`${deliveries} deliveries went to an in-process echo`);
    expect(await page.locator("h1").textContent()).toBe("Two workers. One ID. Two callbacks.");
    await close();
  });

  it("draws each benchmark ratio with the figure from the results file beside it", async () => {
    const { page, close } = await open(livePage);
    const shown = await page.$$eval("[data-ratio]", (nodes) =>
      nodes.map((n) => ({
        key: n.getAttribute("data-ratio") as string,
        text: n.textContent ?? "",
      })),
    );
    const expected = live.run.bench.sections.flatMap((s) =>
      s.rows
        .filter((r) => r.ratio !== undefined)
        .map((r) => ({ key: `${s.name}|${r.name}`, ratio: r.ratio as number })),
    );
    expect(shown.map((s) => s.key)).toEqual(expected.map((e) => e.key));
    for (const [i, { text }] of shown.entries()) {
      const ratio = expected[i]?.ratio as number;
      const digits = text.replace(/[×,]/g, "");
      const read = Number(digits);
      // The page rounds to the digits it prints: the figure must be within half of the last one.
      const decimals = digits.includes(".") ? (digits.split(".")[1] ?? "").length : 0;
      expect(Math.abs(read - ratio), text).toBeLessThanOrEqual(0.5 * 10 ** -decimals + 1e-9);
    }
    await close();
  });

  it("opens every disclosure onto the case's verdict JSON", async () => {
    const { page, close } = await open(livePage);
    const disclosures = page.locator("details");
    const count = await disclosures.count();
    expect(count).toBe(Object.keys(live.run.twoWorkers).length);
    for (let i = 0; i < count; i++) {
      const details = disclosures.nth(i);
      const pre = details.locator("pre");
      expect(await pre.isVisible()).toBe(false);
      await details.locator("summary").click();
      expect(await details.getAttribute("open")).toBe("");
      expect(await pre.isVisible()).toBe(true);
      const key = (await pre.getAttribute("data-json"))?.replace("twoWorkers.", "") as string;
      const { before, after } = live.run.twoWorkers[key] as { before: unknown; after: unknown };
      expect(JSON.parse((await pre.textContent()) ?? "")).toEqual({ before, after });
    }
    await page.screenshot({
      path: join(ARTIFACTS, "desktop-disclosures-open.png"),
      fullPage: true,
    });
    await close();
  });

  it("asks for nothing beyond its own file and logs no error, at desktop and phone widths", async () => {
    for (const [width, name] of [
      [1280, "desktop"],
      [390, "phone"],
    ] as const) {
      const { page, requests, errors, close } = await open(livePage, width);
      await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
      expect([...new Set(requests)]).toEqual([pathToFileURL(livePage).href]);
      expect(errors).toEqual([]);
      // Nothing wider than the screen: the page scrolls down, never sideways.
      const overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth",
      );
      expect(overflow, `${name} horizontal overflow`).toBeLessThanOrEqual(0);
      await close();
    }
  });

  it("is built for people: one h1, scoped table headers, bars with their figures as text", async () => {
    const { page, close } = await open(livePage);
    const levels = await page.$$eval("h1, h2, h3", (hs) => hs.map((h) => Number(h.tagName[1])));
    expect(levels.filter((l) => l === 1)).toHaveLength(1);
    for (let i = 1; i < levels.length; i++) {
      expect((levels[i] as number) - (levels[i - 1] as number)).toBeLessThanOrEqual(1);
    }
    expect(await page.locator("th:not([scope])").count()).toBe(0);
    expect(await page.locator("table:not(:has(caption))").count()).toBe(0);
    // Every bar is hidden from assistive technology and has its figure in words beside it.
    const bars = await page.$$eval("svg", (svgs) =>
      svgs.map((s) => ({
        hidden: s.getAttribute("aria-hidden"),
        beside: s.closest(".bar-row, tr")?.textContent?.replace(/\s+/g, " ").trim() ?? "",
      })),
    );
    expect(bars.length).toBeGreaterThan(8);
    for (const bar of bars) {
      expect(bar.hidden).toBe("true");
      expect(bar.beside).toMatch(/\d/);
    }
    await close();
  });

  it("prints with every disclosure's content shown", async () => {
    const { page, close } = await open(livePage);
    await page.emulateMedia({ media: "print" });
    const pres = page.locator("details pre");
    for (let i = 0; i < (await pres.count()); i++) expect(await pres.nth(i).isVisible()).toBe(true);
    await page.pdf({ path: join(ARTIFACTS, "print.pdf"), format: "A4" });
    await close();
  });

  it("shows a deliberately wrong verdict as a failure, in text, and the command exits 2", async () => {
    expect(wrongExit).toBe(2);
    for (const [width, name] of [
      [1280, "failure-desktop"],
      [390, "failure-phone"],
    ] as const) {
      const { page, errors, close } = await open(wrongPage, width);
      const summary = page.locator("[data-summary]");
      expect(await summary.getAttribute("data-summary")).toBe("fail");
      expect(await summary.isVisible()).toBe(true);
      expect(await summary.textContent()).toContain("FAILED: 1 of 9 measured verdicts differ");
      const card = page.locator("#two-workers-one-id");
      const note = card.locator("[data-verdict]");
      expect(await note.getAttribute("data-verdict")).toBe("fail");
      expect(await note.isVisible()).toBe(true);
      const text = (await note.textContent()) ?? "";
      expect(text).toContain("FAILED");
      expect(text).toContain("after.tool_callbacks: measured 2, expected 1");
      expect(text).toContain('after.receipt_statuses: measured ["dispatched","dispatched"]');
      // The card shows the run's figure, and the other cases still pass.
      expect(
        await card
          .locator('[data-field="twoWorkers.two-workers-one-id.after.tool_callbacks"]')
          .first()
          .textContent(),
      ).toBe("2");
      expect(await page.locator('[data-verdict="pass"]').count()).toBe(8);
      await card.scrollIntoViewIfNeeded();
      await card.screenshot({ path: join(ARTIFACTS, `${name}-case.png`) });
      await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
      expect(errors).toEqual([]);
      await close();
    }
  });
});
