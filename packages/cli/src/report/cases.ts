import { CASE_KEYS } from "../demos/two-workers/index.js";
import { figure, figureList, plural, verdictNote } from "./format.js";
import { type Html, html } from "./html.js";
import type { CaseKey, PhaseMeasure, ReportRun } from "./types.js";
import type { Verdict } from "./verdicts.js";

/** The seed's words for each case (page copy; every figure beside it comes from the run). */
const CASE_COPY: Record<CaseKey, { title: string; summary: string }> = {
  "two-workers-one-id": {
    title: "Two workers, one ID",
    summary: "Same functionCallId and host session. The callback is simulated.",
  },
  "same-id-changed-body": {
    title: "Same ID, changed body",
    summary:
      "Same functionCallId and host session; every later worker sends different args. The callback is simulated.",
  },
  "new-worker-old-id": {
    title: "New worker, old ID",
    summary:
      "Same functionCallId and host session; the second process starts after the first has exited. The callback is simulated.",
  },
  "two-trusted-sessions": {
    title: "Two trusted sessions",
    summary:
      "Same functionCallId and host session except for the two separate host sessions. The callback is simulated.",
  },
};

/** A case's title, for the failure summary at the top of the page. */
export const caseTitle = (key: string): string | undefined =>
  (CASE_COPY as Record<string, { title: string } | undefined>)[key]?.title;

const FIELDS: readonly [keyof PhaseMeasure, string][] = [
  ["tool_callbacks", "callbacks"],
  ["claimed", "claimed"],
  ["reused", "reused"],
  ["claim_markers", "claim markers"],
  ["response_codes", "response codes"],
  ["receipt_statuses", "receipt statuses"],
];

function cell(path: string, value: number | readonly string[]): Html {
  return typeof value === "number" ? figure(path, value) : figureList(path, value);
}

/** Callbacks before and after, as bars on one scale, each with its figure in words beside it. */
function callbackBars(key: CaseKey, before: PhaseMeasure, after: PhaseMeasure): Html {
  const most = Math.max(before.tool_callbacks, after.tool_callbacks, 1);
  const row = (label: string, phase: "before" | "after", measure: PhaseMeasure) => {
    const width = (measure.tool_callbacks / most) * 100;
    return html`<div class="bar-row">
<span class="bar-name">${label}</span>
<svg class="bar ${phase}" viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true" focusable="false"><rect width="${width.toFixed(2)}" height="10"></rect></svg>
<span class="bar-value">${figure(`twoWorkers.${key}.${phase}.tool_callbacks`, measure.tool_callbacks)} ${plural(measure.tool_callbacks, "callback")}</span>
</div>`;
  };
  return html`<div class="bars">${row("Process memory", "before", before)}${row("Shared claim", "after", after)}</div>`;
}

function caseCard(run: ReportRun, key: CaseKey, verdict: Verdict): Html {
  const result = run.twoWorkers[key];
  const copy = CASE_COPY[key];
  const headingId = `${key}-title`;
  if (!result) {
    return html`<article class="case fail" id="${key}" aria-labelledby="${headingId}">
<h3 id="${headingId}">${copy.title}</h3>
<p>This run has no result for the case.</p>
${verdictNote(verdict)}
</article>`;
  }
  const verdictJson = JSON.stringify({ before: result.before, after: result.after }, null, 2);
  return html`<article class="case ${verdict.ok ? "ok" : "fail"}" id="${key}" aria-labelledby="${headingId}">
<p class="mode">${figure(`twoWorkers.${key}.mode`, result.mode)}</p>
<h3 id="${headingId}">${copy.title}</h3>
<p>${copy.summary}</p>
${callbackBars(key, result.before, result.after)}
<table class="fields">
<caption>What each phase measured</caption>
<thead><tr><th scope="col">Field</th><th scope="col">Process memory</th><th scope="col">Shared claim</th></tr></thead>
<tbody>${FIELDS.map(
    ([field, label]) =>
      html`<tr><th scope="row">${label}</th><td>${cell(`twoWorkers.${key}.before.${field}`, result.before[field])}</td><td>${cell(`twoWorkers.${key}.after.${field}`, result.after[field])}</td></tr>`,
  )}</tbody>
</table>
${verdictNote(verdict)}
<details>
<summary>Inspect measured verdicts</summary>
<pre class="json" data-json="twoWorkers.${key}">${verdictJson}</pre>
</details>
</article>`;
}

export function casesSection(run: ReportRun, verdicts: ReadonlyMap<string, Verdict>): Html {
  const shared = run.store === null ? "one shared, private claim directory" : "one shared store";
  return html`<section class="cases" aria-labelledby="cases-title">
<p class="kicker">${CASE_KEYS.length} cases, each run twice</p>
<h2 id="cases-title">Replay across the process line.</h2>
<p>Each case reruns the gate in separate OS processes: first with claims in each process's memory, then with ${shared}. A shared exclusive claim is created before approval and dispatch. These numbers are generated from the executable two-worker run, including a worker restart and a distinct-session control.</p>
<div class="case-grid">${CASE_KEYS.map((key) => caseCard(run, key, verdicts.get(key) as Verdict))}</div>
</section>`;
}
