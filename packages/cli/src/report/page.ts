import { createHash } from "node:crypto";
import { benchSection } from "./bench.js";
import { casesSection, caseTitle } from "./cases.js";
import { fanoutSection } from "./fanout.js";
import { figure, inWords, plural } from "./format.js";
import { type Html, html, trusted } from "./html.js";
import { STYLES } from "./styles.js";
import type { ReportRun } from "./types.js";
import { allVerdicts, type Verdict } from "./verdicts.js";

/**
 * Every effect the run produced, counted from its own results: each callback appended a line
 * to a scratch file and each delivery reached the in-process echo transport. None of them is
 * live; the page says how many there were rather than printing a bare zero.
 */
export function simulatedEffects(run: ReportRun): Html {
  let callbacks = 0;
  for (const result of Object.values(run.twoWorkers)) {
    if (result) callbacks += result.before.tool_callbacks + result.after.tool_callbacks;
  }
  const deliveries = run.fanout.scenes.reduce((sum, scene) => sum + scene.deliveries, 0);
  return html`<strong>No</strong> live messages or external effects: the run's ${callbacks} ${plural(callbacks, "callback")} each wrote one line to a scratch file, and its ${deliveries} ${deliveries === 1 ? "delivery" : "deliveries"} went to an in-process echo`;
}

/** The headline case: its before/after callbacks are the page's first two figures. */
const HEADLINE = "two-workers-one-id";

/** "Two workers, one ID" or "Fan-out scene 2: the same question asked twice…", for a verdict. */
function verdictTitle(run: ReportRun, id: string): string {
  const scene = /^fanout-scene-(\d+)$/.exec(id)?.[1];
  if (scene === undefined) return caseTitle(id) ?? id;
  const title = run.fanout.scenes.find((s) => s.number === Number(scene))?.title;
  return `Fan-out scene ${scene}${title ? `: ${title}` : ""}`;
}

function hero(run: ReportRun, verdicts: readonly Verdict[]): Html {
  const headline = run.twoWorkers[HEADLINE];
  const processes = headline?.before.response_codes.length ?? 0;
  const before = headline?.before.tool_callbacks ?? 0;
  const after = headline?.after.tool_callbacks ?? 0;
  const failed = verdicts.filter((v) => !v.ok);
  const shared = run.store === null ? "one shared, private claim directory" : "one shared store";
  return html`<header class="hero">
<p class="kicker">Tessera · measured verdicts</p>
<h1>${inWords(processes)} workers.<br> One ID.<br> ${inWords(before)} ${plural(before, "callback")}.</h1>
<p class="lede">A host can check an A2UI call ID perfectly inside one process and still lose the replay check when another worker handles the same call. Here ${inWords(processes).toLowerCase()} actual Node processes exercise the same function gate.</p>
${
  failed.length === 0
    ? html`<p class="summary ok" data-summary="pass"><span aria-hidden="true">✓</span> All ${verdicts.length} measured verdicts match the expected ones.</p>`
    : html`<div class="summary fail" data-summary="fail" role="alert"><p><strong><span aria-hidden="true">✗</span> FAILED: ${failed.length} of ${verdicts.length} measured verdicts differ from the expected ones.</strong></p><ul>${failed.map((v) => html`<li><a href="#${v.id}">${verdictTitle(run, v.id)}</a></li>`)}</ul></div>`
}
<p class="meta">Measured <time datetime="${run.startedAt}">${run.startedAt.replace("T", " ").slice(0, 16)} UTC</time> on ${run.machine.platform} ${run.machine.arch}, ${run.machine.cpus} CPUs · shared claims: ${run.store ?? "a private claim directory"} · <a href="#run-title">about this run</a></p>
<ul class="stats">
<li><strong>${figure(`twoWorkers.${HEADLINE}.before.tool_callbacks`, before)}</strong> ${plural(before, "callback")} with separate process memory</li>
<li><strong>${figure(`twoWorkers.${HEADLINE}.after.tool_callbacks`, after)}</strong> ${plural(after, "callback")} with ${shared}</li>
<li>${simulatedEffects(run)}<sup><a href="#simulated" aria-label="how this is known">*</a></sup></li>
</ul>
</header>`;
}

/** The gate's order, as DESIGN.md draws it: nothing runs before the shared claim is taken. */
const CHAIN = [
  "agent call ID",
  "trusted session",
  "exclusive claim",
  "policy + approval",
  "simulated callback",
] as const;

function boundary(run: ReportRun): Html {
  const directory = run.store === null;
  return html`<section class="boundary" aria-labelledby="boundary-title">
<p class="kicker">The host boundary</p>
<h2 id="boundary-title">Claim before the callback.</h2>
<ol class="chain" aria-label="the order of the gate's steps">
${CHAIN.map((step) => html`<li><span>${step}</span></li>`)}
</ol>
<p>A duplicate in the same host session receives a correlated <code>INVALID_FUNCTION_CALL</code> before any dispatch receipt. A different trusted session may use that ID independently. ${
    directory
      ? "The directory is provisioned by the host, retained for the full session lifetime, checked for ownership and permissions, and never silently recreated after loss."
      : "The shared store is provisioned by the host and holds one claim per trusted session and call ID for the session's lifetime."
  }</p>
<p class="claim-boundary"><strong>Claim boundary.</strong> Simulated callback and approval. ${
    directory
      ? "Local private filesystem only; not multi-machine coordination, authenticated user consent, or proof of delivery. The host must protect the directory from same-user tampering, authenticate its session identity and approval, and coordinate through a suitable durable store across machines."
      : "Not authenticated user consent or proof of delivery. The host must authenticate its session identity and approval and keep the store durable across its machines."
  } A new ID is a new attempt and still needs action authorization.</p>
</section>`;
}

function runInfo(run: ReportRun): Html {
  const m = run.machine;
  return html`<section class="run" aria-labelledby="run-title">
<h2 id="run-title">This run</h2>
<dl>
<dt>Started</dt><dd><time datetime="${run.startedAt}">${run.startedAt}</time>, took ${(run.durationMs / 1000).toFixed(1)} s</dd>
<dt>Machine</dt><dd>${m.platform} ${m.release} ${m.arch}, ${m.cpus} CPUs (${m.model}), Node ${m.node}</dd>
<dt>Processes per parallel case</dt><dd>${figure("workers", run.workers)}</dd>
<dt>Shared claims (after)</dt><dd>${run.store ?? "a fresh private claim directory per case (mode 0700), removed afterwards"}</dd>
<dt>Ticket usage (fan-out)</dt><dd>${run.store ?? "an in-memory usage store per scene"}</dd>
</dl>
<p id="simulated"><span aria-hidden="true">*</span> Nothing here reaches the outside: each worker's callback appends one line to a scratch file (that is how callbacks are counted), and the fan-out's transport is an in-process echo. The demos are built that way; the counts beside the claim are this run's own callbacks and deliveries.</p>
<p>Generated by <code>tessera report</code>; <code>npm run report</code> writes it again from a new run.</p>
</section>`;
}

export interface RenderedReport {
  readonly html: string;
  readonly verdicts: readonly Verdict[];
  readonly failed: readonly Verdict[];
}

/** The whole page: one file, inline CSS and SVG, no script, no request of any kind. */
export function renderReport(run: ReportRun): RenderedReport {
  const verdicts = allVerdicts(run);
  const byId = new Map(verdicts.map((v) => [v.id, v]));
  // The policy forbids every fetch, so a stray URL in the page fails loudly in a browser
  // instead of quietly phoning out; the one stylesheet is allowed by its hash.
  const styleHash = createHash("sha256").update(STYLES).digest("base64");
  const csp = `default-src 'none'; style-src 'sha256-${styleHash}'; img-src data:; form-action 'none'; base-uri 'none'`;
  const page = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="referrer" content="no-referrer">
<title>Tessera — measured verdicts</title>
<style>${trusted(STYLES)}</style>
</head>
<body>
<main>
${hero(run, verdicts)}
${casesSection(run, byId)}
${boundary(run)}
${fanoutSection(run, byId)}
${run.bench ? benchSection(run.bench) : ""}
${runInfo(run)}
</main>
</body>
</html>
`;
  return { html: page.text, verdicts, failed: verdicts.filter((v) => !v.ok) };
}
