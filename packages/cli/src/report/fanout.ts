import { figure, verdictNote } from "./format.js";
import { type Html, html } from "./html.js";
import type { FanoutReport, ReportRun } from "./types.js";
import type { Verdict } from "./verdicts.js";

type Scene = FanoutReport["scenes"][number];
type Line = Scene["lines"][number];

/** The seed's sentences for each scene, shown only when the run showed what they explain. */
const EXPLANATIONS: Record<number, string> = {
  2: "A spent bounded grant is not reach, so the replay is refused at discovery. The caller learns nothing about the ticket.",
  3: "Refused on the recipient, not on discovery: the asker still holds an unspent ticket, so the tool is visible.",
  4: "A store edit made during a turn lands on the next one, so the owner revokes before the turn opens.",
  5: "Fails closed before the transport is reached.",
};

function ticketCell(path: string, line: Line): Html {
  const t = line.ticket;
  if (t === undefined) return html`—`;
  const whose = t.of === line.recipient ? "" : `${t.of}'s ticket `;
  return html`${whose}spent ${figure(`${path}.ticket.used`, t.used)}/${figure(`${path}.ticket.maxUses`, t.maxUses)}${t.revoked ? ", revoked" : ""}`;
}

function lineRow(path: string, line: Line): Html {
  return html`<tr>
<td class="lead"><strong class="tag ${line.verdict === "SENT" ? "sent" : "deny"}">${figure(`${path}.verdict`, line.verdict)}</strong></td>
<th scope="row" class="lead">${figure(`${path}.recipient`, line.recipient)}</th>
<td data-label="Caller code"><span>${line.code === undefined ? html`—` : html`<code>${figure(`${path}.code`, line.code)}</code>`}</span></td>
<td data-label="Audit reason"><span><code>${figure(`${path}.reason`, line.reason)}</code></span></td>
<td data-label="Ticket"><span>${ticketCell(path, line)}</span></td>
</tr>`;
}

function sceneBlock(scene: Scene, index: number, verdict: Verdict): Html {
  const path = `fanout.scenes.${index}`;
  const id = `fanout-scene-${scene.number}`;
  const explanation = EXPLANATIONS[scene.number];
  return html`<section class="scene ${verdict.ok ? "ok" : "fail"}" id="${id}" aria-labelledby="${id}-title">
<h3 id="${id}-title">${scene.number}. ${scene.title}</h3>
<table class="tickets stack">
<caption>Each send attempt of scene ${scene.number}, in order</caption>
<thead><tr><th scope="col">Verdict</th><th scope="col">Recipient</th><th scope="col">Caller code</th><th scope="col">Audit reason</th><th scope="col">Ticket</th></tr></thead>
<tbody>${scene.lines.map((line, i) => lineRow(`${path}.lines.${i}`, line))}</tbody>
</table>
<p class="deliveries">deliveries: ${figure(`${path}.deliveries`, scene.deliveries)}${scene.allDistinct === undefined ? "" : html`, all distinct: ${figure(`${path}.allDistinct`, scene.allDistinct)}`}</p>
${verdict.ok && explanation ? html`<p>${explanation}</p>` : ""}
${verdictNote(verdict)}
</section>`;
}

export function fanoutSection(run: ReportRun, verdicts: ReadonlyMap<string, Verdict>): Html {
  const { fanout } = run;
  const missing = [1, 2, 3, 4, 5].filter((n) => !fanout.scenes.some((s) => s.number === n));
  return html`<section class="fanout" aria-labelledby="fanout-title">
<p class="kicker">Five scenes, one turn each</p>
<h2 id="fanout-title">Recipient-scoped single-use messaging.</h2>
<p>When one agent asks ${figure("fanout.recipients", fanout.recipients)} recipients a question, that is as many authorizations, not one. Each recipient gets its own grant with one exact <code>messageSendCapability(recipient, owner)</code> and <code>constraints.maxUses: 1</code>; one grant covering every recipient would share one budget, so the first send would spend the rest. Each scene builds its own kernel, tickets and usage store, because a spent ticket stays spent.</p>
${fanout.scenes.map((scene, i) => sceneBlock(scene, i, verdicts.get(`fanout-scene-${scene.number}`) as Verdict))}
${missing.map(
  (n) =>
    html`<section class="scene fail" id="fanout-scene-${n}"><h3>Scene ${n}</h3><p>This run has no result for the scene.</p>${verdictNote(verdicts.get(`fanout-scene-${n}`) as Verdict)}</section>`,
)}
<p>Scenes 2 and 3 are the two refusals worth telling apart: a replay is refused at discovery (the caller is told <code>tool_unavailable</code>, audit says <code>grant_exhausted</code>), a wrong recipient at the capability check (<code>no_matching_grant</code>). A consumer that needs to tell "spent" from "never granted" reads audit, not the refusal.</p>
</section>`;
}
