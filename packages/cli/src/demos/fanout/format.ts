import type { FanoutLine, FanoutReport, FanoutScene } from "./report.js";

/**
 * The five scenes in the seed's layout. Every figure comes from the report; the explanatory
 * sentences are printed only when the run showed what they explain, and a scene that did not
 * is flagged instead.
 */

const pad = (text: string, width: number) => text.padEnd(width);

function ticketText(line: FanoutLine): string {
  const t = line.ticket;
  if (t === undefined) return "";
  return `ticket spent ${t.used}/${t.maxUses}`;
}

function lineText(scene: number, line: FanoutLine): string {
  const head = `  ${pad(line.verdict, 7)}${pad(line.recipient, 15)}`;
  if (line.verdict === "SENT") {
    if (scene === 4)
      return `${head}${line.ticket?.revoked === false ? "ticket untouched" : "ticket revoked"}`;
    const reply =
      line.reply === undefined
        ? ""
        : `reply from ${line.recipient}` === line.reply
          ? line.reply
          : `reply: ${line.reply}`;
    return `${head}${pad(ticketText(line), 19)}${reply}`.trimEnd();
  }
  switch (scene) {
    case 2:
      return `${head}caller is told ${line.code}, audit says ${line.reason}`;
    case 3:
      return `${head}${pad(line.code ?? "", 20)}${line.ticket ? `${line.ticket.of}'s ${ticketText(line)}` : ""}`.trimEnd();
    case 4:
      return `${head}${pad(line.reason, 10)}${line.code}`;
    default:
      return `${head}${line.code}`;
  }
}

const EXPLANATIONS: Record<number, (scene: FanoutScene) => string[]> = {
  1: (s) => [`deliveries: ${s.deliveries}, all distinct: ${s.allDistinct}`],
  2: (s) => [
    "A spent bounded grant is not reach, so the replay is refused at discovery.",
    `The caller learns nothing about the ticket. deliveries: ${s.deliveries}`,
  ],
  3: (s) => [
    "Refused on the recipient, not on discovery: the asker still holds an unspent",
    `ticket, so the tool is visible. deliveries: ${s.deliveries}`,
  ],
  4: (s) => [`deliveries: ${s.deliveries}`],
  5: (s) => [`Fails closed before the transport is reached. deliveries: ${s.deliveries}`],
};

function sceneText(scene: FanoutScene): string {
  const out = [`${scene.number}. ${scene.title}`, ""];
  for (const line of scene.lines) out.push(lineText(scene.number, line));
  out.push("");
  if (scene.asExpected) {
    for (const sentence of EXPLANATIONS[scene.number]?.(scene) ?? []) out.push(`  ${sentence}`);
  } else {
    out.push(
      `  NOT AS EXPECTED: this run did not show the scene's property. deliveries: ${scene.deliveries}`,
    );
  }
  return out.join("\n");
}

export function formatFanoutReport(report: FanoutReport): string {
  return `${report.scenes.map(sceneText).join("\n\n")}\n`;
}
