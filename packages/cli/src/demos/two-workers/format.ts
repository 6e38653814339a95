import { CASES } from "./cases.js";
import type { PhaseMeasure, TwoWorkersReport } from "./run.js";

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

function detail(label: string, phase: PhaseMeasure): string {
  return (
    `    ${label} claimed ${phase.claimed}, reused ${phase.reused}, claim markers ${phase.claim_markers}, ` +
    `responses [${phase.response_codes.join(", ")}], receipts [${phase.receipt_statuses.join(", ")}]`
  );
}

/** The demo as text: one headline per case, every figure taken from the report. */
export function formatTwoWorkersReport(report: TwoWorkersReport): string {
  const lines = [
    "Two workers. One ID. — replay across the process line",
    "Each case runs the same A2UI function gate in separate OS processes, first with claims in",
    "each process's memory, then with one shared claim store. The callback is simulated: it",
    "appends a line to a file and nothing else happens.",
    "",
  ];
  for (const definition of CASES) {
    const result = report[definition.key];
    if (!result) continue;
    const processes = result.before.response_codes.length;
    lines.push(`${definition.title} (${definition.key}) — ${processes} ${definition.mode}`);
    lines.push(`  ${definition.summary} The callback is simulated.`);
    lines.push(
      `  Process memory: ${plural(result.before.tool_callbacks, "callback")} / Shared claim: ${plural(result.after.tool_callbacks, "callback")}`,
    );
    lines.push(detail("before:", result.before));
    lines.push(detail("after: ", result.after));
    lines.push("");
  }
  lines.push(
    "Claim boundary: the claim is taken before approval and dispatch; a duplicate in the same",
    "session gets a correlated INVALID_FUNCTION_CALL and runs nothing; another trusted session",
    "may reuse the ID. A claim directory is local and private to one machine: it is not",
    "multi-machine coordination, authenticated consent or proof of delivery.",
  );
  // Ends with a newline, as the fan-out report does: the shell prompt starts on its own line.
  return `${lines.join("\n")}\n`;
}
