import { randomUUID } from "node:crypto";
import { type GrantUsageStore, TesseraError } from "@tessera/core";
import type { FanoutReport, FanoutScene } from "./report.js";
import { colleague, makeUsage, sceneWorld, ticketStates, withTickets } from "./scenes.js";

export interface FanoutOptions {
  /** How many colleagues scene 1 asks (default 3). */
  readonly recipients?: number;
  /**
   * Opens the usage store each scene counts tickets in (scenes 1-4; scene 5 has none).
   * Called once per scene. Each scene and each run uses a fresh namespace in it.
   */
  readonly usage?: () => Promise<GrantUsageStore> | GrantUsageStore;
}

const WORDS = [
  "zero",
  "one",
  "two",
  "three",
  "four",
  "five",
  "six",
  "seven",
  "eight",
  "nine",
  "ten",
];
const count = (n: number, noun: string) =>
  `${WORDS[n] ?? n.toLocaleString("en-US")} ${noun}${n === 1 ? "" : "s"}`;

/** 1. N colleagues, N single-use tickets, one turn: N distinct deliveries. */
async function sceneOne(runId: string, n: number, options: FanoutOptions): Promise<FanoutScene> {
  const names = Array.from({ length: n }, (_, i) => colleague(i));
  const world = await sceneWorld(runId, 1, names, await makeUsage(options.usage));
  const { lines, turn } = await world.askInOneTurn(names);
  const ticketed = await withTickets(world, lines);
  const delivered = world.transport.delivered;
  const allDistinct =
    new Set(delivered.map((e) => e.recipient)).size === delivered.length &&
    new Set(delivered.map((e) => e.messageId)).size === delivered.length;
  return {
    number: 1,
    title: `${count(n, "colleague")}, ${count(n, "single-use ticket")}, one turn`,
    lines: ticketed,
    deliveries: delivered.length,
    allDistinct,
    turn: turn.status,
    asExpected:
      turn.status === "completed" &&
      delivered.length === n &&
      allDistinct &&
      ticketed.every((l) => l.ticket?.used === 1),
  };
}

/** 2. The same question twice of one colleague: the replay is refused at discovery. */
async function sceneTwo(runId: string, options: FanoutOptions): Promise<FanoutScene> {
  const world = await sceneWorld(runId, 2, [colleague(0)], await makeUsage(options.usage));
  const { lines, turn } = await world.askInOneTurn([colleague(0), colleague(0)]);
  const replay = lines[1];
  const ticket = (await ticketStates(world, [colleague(0)])).get(colleague(0));
  return {
    number: 2,
    title: "the same question asked twice of one colleague",
    lines: lines.map((line) => (line.verdict === "SENT" && ticket ? { ...line, ticket } : line)),
    deliveries: world.transport.delivered.length,
    turn: turn.status,
    asExpected:
      turn.status === "completed" &&
      world.transport.delivered.length === 1 &&
      replay?.code === "tool_unavailable" &&
      replay.reason === "grant_exhausted",
  };
}

/** 3. A colleague nobody issued a ticket for: refused on the recipient, nothing spent. */
async function sceneThree(runId: string, options: FanoutOptions): Promise<FanoutScene> {
  const world = await sceneWorld(runId, 3, [colleague(0)], await makeUsage(options.usage));
  const {
    lines: [line],
    turn,
  } = await world.askInOneTurn([colleague(1)]);
  const ticket = (await ticketStates(world, [colleague(0)])).get(colleague(0));
  return {
    number: 3,
    title: "a colleague nobody issued a ticket for",
    lines: line ? [{ ...line, ...(ticket ? { ticket } : {}) }] : [],
    deliveries: world.transport.delivered.length,
    turn: turn.status,
    asExpected:
      turn.status === "completed" &&
      world.transport.delivered.length === 0 &&
      line?.code === "no_matching_grant" &&
      ticket?.used === 0,
  };
}

/** 4. The owner revokes one ticket before the turn; the other ticket is untouched. */
async function sceneFour(runId: string, options: FanoutOptions): Promise<FanoutScene> {
  const names = [colleague(0), colleague(1)];
  const world = await sceneWorld(runId, 4, names, await makeUsage(options.usage));
  // Revoked before the turn opens: a store edit made during a turn lands on the next one.
  await world.grants.revoke(world.namespaceId, world.ticketIds.get(colleague(0)) as string);
  const { lines, turn } = await world.askInOneTurn(names);
  const ticketed = await withTickets(world, lines);
  const [revoked, kept] = ticketed;
  return {
    number: 4,
    title: "the owner revokes one ticket; the other is untouched",
    lines: ticketed,
    deliveries: world.transport.delivered.length,
    turn: turn.status,
    asExpected:
      turn.status === "completed" &&
      world.transport.delivered.length === 1 &&
      revoked?.reason === "revoked" &&
      revoked.code === "no_matching_grant" &&
      kept?.verdict === "SENT" &&
      kept.ticket?.revoked === false,
  };
}

/** 5. No usage store: a single-use ticket cannot be counted, so every send fails closed. */
async function sceneFive(runId: string): Promise<FanoutScene> {
  const names = [colleague(0), colleague(1)];
  const world = await sceneWorld(runId, 5, names, undefined);
  const { lines, turn } = await world.askInOneTurn(names);
  return {
    number: 5,
    title: "no usage store, so a single-use ticket cannot be counted",
    lines,
    deliveries: world.transport.delivered.length,
    turn: turn.status,
    asExpected:
      turn.status === "completed" &&
      world.transport.delivered.length === 0 &&
      lines.every((l) => l.code === "tool_unavailable" && l.reason === "usage_store_unavailable"),
  };
}

/** Runs the five scenes of recipient-scoped single-use messaging; every figure is measured. */
export async function runFanoutDemo(options: FanoutOptions = {}): Promise<FanoutReport> {
  const recipients = options.recipients ?? 3;
  if (!Number.isInteger(recipients) || recipients < 1 || recipients > 100_000) {
    throw new TesseraError("invalid_input", "recipients must be a whole number from 1 to 100000");
  }
  const runId = randomUUID();
  const scenes = [
    await sceneOne(runId, recipients, options),
    await sceneTwo(runId, options),
    await sceneThree(runId, options),
    await sceneFour(runId, options),
    await sceneFive(runId),
  ];
  return { recipients, usageStore: options.usage ? "host" : "memory", scenes };
}
