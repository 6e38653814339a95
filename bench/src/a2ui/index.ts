import { type BenchRow, type BenchSection, ratioRow } from "../report.js";
import { CLAIMS_PER_ROUND, type DurableCase, measureDurable, ROUNDS } from "./durable.js";
import { memoryGateRate } from "./gate.js";

/**
 * The A2UI gate: durable claims on the directory store beside the raw primitive (same run),
 * with group commit (as shipped) and without it (one directory fsync per claim), and
 * `gate.handle` end to end with the memory and the directory store.
 */

const WITHIN = 1.3;

const CASES: DurableCase[] = [
  { label: "primitive, sequential", variant: { kind: "primitive" }, inFlight: 1 },
  { label: "store, sequential", variant: { kind: "store", options: {} }, inFlight: 1 },
  { label: "primitive, 8 in flight", variant: { kind: "primitive" }, inFlight: 8 },
  { label: "store, 8 in flight", variant: { kind: "store", options: {} }, inFlight: 8 },
  {
    label: "no group commit, 8 in flight",
    variant: { kind: "store", options: { groupCommit: false } },
    inFlight: 8,
  },
  { label: "primitive, 32 in flight", variant: { kind: "primitive" }, inFlight: 32 },
  { label: "store, 32 in flight", variant: { kind: "store", options: {} }, inFlight: 32 },
  {
    label: "no group commit, 32 in flight",
    variant: { kind: "store", options: { groupCommit: false } },
    inFlight: 32,
  },
  {
    label: "content fsynced too, sequential",
    variant: { kind: "store", options: { syncMarkerContent: true } },
    inFlight: 1,
  },
  { label: "gate, sequential", variant: { kind: "gate", settle: "after-reply" }, inFlight: 1 },
  { label: "gate, 8 in flight", variant: { kind: "gate", settle: "after-reply" }, inFlight: 8 },
  {
    label: "gate before-reply, sequential",
    variant: { kind: "gate", settle: "before-reply" },
    inFlight: 1,
  },
  {
    label: "gate before-reply, 8 in flight",
    variant: { kind: "gate", settle: "before-reply" },
    inFlight: 8,
  },
];

/** Issue 14: `gate.handle` end to end, one durable write (the claim) on its critical path. */
const GATE_MIN_RATIO = 0.8;

function compared(
  name: string,
  value: number,
  baselineName: string,
  baseline: number,
  target?: string,
  minRatio = 1 / WITHIN,
): BenchRow {
  return ratioRow(
    name,
    value,
    { name: baselineName, value: baseline },
    "ours ÷ primitive (higher is better; 1.00 = as fast as the raw syscalls)",
    target === undefined ? undefined : { text: target, minRatio },
  );
}

export async function run(): Promise<BenchSection> {
  const rates = await measureDurable(CASES);
  const rate = (label: string) => rates.get(label) ?? Number.NaN;
  const primitiveSeq = rate("primitive, sequential");
  const primitive8 = rate("primitive, 8 in flight");
  const primitive32 = rate("primitive, 32 in flight");
  const target = `within ${WITHIN}× of the primitive`;
  const rows: BenchRow[] = [
    compared(
      "durable claims/s, directory store, sequential",
      rate("store, sequential"),
      "open wx + write + fsync(dir)",
      primitiveSeq,
      target,
    ),
    compared(
      "durable claims/s, directory store, 8 in flight",
      rate("store, 8 in flight"),
      "same primitive, 8 in flight",
      primitive8,
      target,
    ),
    compared(
      "durable claims/s, directory store, 32 in flight",
      rate("store, 32 in flight"),
      "same primitive, 32 in flight",
      primitive32,
      target,
    ),
    compared(
      "durable claims/s, store without group commit, 8 in flight",
      rate("no group commit, 8 in flight"),
      "same primitive, 8 in flight",
      primitive8,
    ),
    compared(
      "durable claims/s, store without group commit, 32 in flight",
      rate("no group commit, 32 in flight"),
      "same primitive, 32 in flight",
      primitive32,
    ),
    compared(
      "durable claims/s, marker content fsynced too, sequential",
      rate("content fsynced too, sequential"),
      "open wx + write + fsync(dir)",
      primitiveSeq,
    ),
  ];

  const memory = await memoryGateRate();
  rows.push({
    name: "gate.handle calls/s, memory store (schema validation included)",
    unit: "ops/s",
    value: memory,
    target: "≥ 100,000/s",
    met: memory >= 100_000,
  });
  const gateTarget = `≥ ${GATE_MIN_RATIO}× the primitive`;
  rows.push(
    compared(
      "gate.handle calls/s, directory store (receipt after the reply), sequential",
      rate("gate, sequential"),
      "open wx + write + fsync(dir)",
      primitiveSeq,
      gateTarget,
      GATE_MIN_RATIO,
    ),
    compared(
      "gate.handle calls/s, directory store (receipt after the reply), 8 in flight",
      rate("gate, 8 in flight"),
      "same primitive, 8 in flight",
      primitive8,
      gateTarget,
      GATE_MIN_RATIO,
    ),
    compared(
      "gate.handle calls/s, directory store (receipt before the reply), sequential",
      rate("gate before-reply, sequential"),
      "open wx + write + fsync(dir)",
      primitiveSeq,
    ),
    compared(
      "gate.handle calls/s, directory store (receipt before the reply), 8 in flight",
      rate("gate before-reply, 8 in flight"),
      "same primitive, 8 in flight",
      primitive8,
    ),
  );

  const gain8 = rate("store, 8 in flight") / rate("no group commit, 8 in flight");
  const gain32 = rate("store, 32 in flight") / rate("no group commit, 32 in flight");
  return {
    name: "a2ui",
    rows,
    notes: [
      `durable figures: best of ${ROUNDS} interleaved rounds of ${CLAIMS_PER_ROUND} claims, each in a fresh private directory`,
      `group commit (shipped, on by default) vs one fsync per claim: ${gain8.toFixed(2)}× at 8 in flight, ${gain32.toFixed(2)}× at 32; against the primitive (one fsync per claim): ${(rate("store, 8 in flight") / primitive8).toFixed(2)}× and ${(rate("store, 32 in flight") / primitive32).toFixed(2)}×`,
      "the directory store fsyncs the directory (the marker's name is the claim); fsyncing each marker's content too is an option, measured above",
      "gate.handle with the directory store also settles each call (a receipt line appended to the marker, not fsynced); after the reply by default, and each round's time includes gate.close(), which drains those receipts",
    ],
  };
}
