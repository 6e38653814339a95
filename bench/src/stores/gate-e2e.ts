/**
 * `gate.handle` end to end over a durable claim store (validation, catalog, claim, callback,
 * settle) beside the raw claim primitive, at the same concurrency, alternated in slices
 * (ABBA, median slice rate per side). Receipts written after the reply (the gate's default)
 * carry the target; receipts written before it are measured for comparison. Every gate slice
 * ends with `gate.drain()` inside its timing, so the receipts it deferred are paid for.
 */
import type { ClaimResult, ClaimStore, FunctionCallGate, SettleTiming } from "@tessera/a2ui";
import { BATCH, gateOver, MESSAGES } from "../a2ui/fixtures.js";
import { concurrent, medianRatesAbba } from "../measure.js";
import { type BenchRow, ratioRow } from "../report.js";

/** Issue 14: one durable write on a call's critical path, the claim. */
export const GATE_TARGET = {
  text: "≥ 0.8× the raw claim primitive at the same concurrency",
  minRatio: 0.8,
} as const;
const RATIO_MEANING = "gate.handle/s ÷ raw claim primitive/s, same concurrency, same run";
const SLICES = 8;

export interface GateCase {
  readonly inFlight: number;
  readonly settle: SettleTiming;
  /** Calls per slice. */
  readonly ops: number;
}

/** After and before the reply, at concurrency 1 and 8. */
export function gateCases(opsAtOne: number, opsAtEight: number): GateCase[] {
  return (["after-reply", "before-reply"] as const).flatMap((settle) => [
    { inFlight: 1, settle, ops: opsAtOne },
    { inFlight: 8, settle, ops: opsAtEight },
  ]);
}

/**
 * One row per case. `rawClaim(i)` writes one fresh claim row the raw way (each `i` is used
 * once); `rawName` names it in the row.
 */
export async function gateHandleRows(
  backend: string,
  claims: ClaimStore,
  rawClaim: (i: number) => Promise<unknown>,
  rawName: string,
  cases: readonly GateCase[],
): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  let raw = 0;
  const nextRaw = () => rawClaim(raw++);
  for (const [index, { inFlight, settle, ops }] of cases.entries()) {
    const gate = gateOver(claims, settle);
    try {
      const [value, baseline] = await gateBesideRaw(
        gate,
        `gate-e2e-${process.pid}-${Date.now()}-${index}`,
        inFlight,
        ops,
        nextRaw,
      );
      const when =
        settle === "after-reply" ? "receipt after the reply" : "receipt before the reply";
      rows.push(
        ratioRow(
          `${backend} gate.handle/s end to end (${when}), c=${inFlight}`,
          value,
          { name: `${rawName}, c=${inFlight}`, value: baseline },
          RATIO_MEANING,
          settle === "after-reply" ? GATE_TARGET : undefined,
        ),
      );
    } finally {
      await gate.close();
    }
  }
  return rows;
}

const CLAIMED: ClaimResult = Object.freeze({ status: "claimed" });

/**
 * A claim port that is the raw primitive and nothing else: `claim` sends `rawClaim(i)` (no key
 * digests, no record JSON, no reply check) and `settle` writes nothing. No store can do less
 * per call, so the gate over it bounds the gate over any store of the backend from above.
 */
function rawClaimPort(rawClaim: (i: number) => Promise<unknown>, first: number): ClaimStore {
  let i = first;
  const nothing = async () => undefined;
  return {
    claim: () => rawClaim(i++).then(() => CLAIMED),
    settle: nothing,
    get: nothing,
    listInDoubt: async () => [],
    endSession: nothing,
    close: nothing,
  };
}

/**
 * Information beside the target rows: `gate.handle` over `rawClaimPort` at `inFlight`, against
 * the raw primitive alone at the same concurrency (ABBA, median slices). Its ratio is the most
 * a gate over this backend can reach here whatever its store does, since the gate's own work
 * (parsing, validation, catalog, body hash, callback) is all it adds.
 */
export async function gateCeilingRow(
  backend: string,
  rawClaim: (i: number) => Promise<unknown>,
  rawName: string,
  inFlight: number,
  ops: number,
): Promise<BenchRow> {
  // Key ranges apart from each other and from the target rows' raw keys.
  const gate = gateOver(rawClaimPort(rawClaim, 1 << 28), "after-reply");
  let raw = 1 << 29;
  try {
    const [value, baseline] = await gateBesideRaw(
      gate,
      `gate-ceiling-${process.pid}-${Date.now()}`,
      inFlight,
      ops,
      () => rawClaim(raw++),
    );
    return ratioRow(
      `${backend} gate.handle/s over the bare ${rawName} itself (no store, no receipts: the ceiling), c=${inFlight}`,
      value,
      { name: `${rawName}, c=${inFlight}`, value: baseline },
      "gate over the raw primitive ÷ raw primitive, same concurrency, same run (informational: bounds every store of this backend)",
    );
  } finally {
    await gate.close();
  }
}

/**
 * `gate.handle` (every call dispatched, its receipts drained inside the slice) and the raw claim
 * (`nextRaw`, a fresh row each time) at `inFlight`: one warm-up slice each, then `SLICES`
 * alternated (ABBA); the median slice rate of each.
 */
async function gateBesideRaw(
  gate: FunctionCallGate,
  session: string,
  inFlight: number,
  ops: number,
  nextRaw: () => Promise<unknown>,
): Promise<[number, number]> {
  let call = 0;
  const gateSlice = async () => {
    const start = performance.now();
    await concurrent(inFlight, ops, async () => {
      const i = call++;
      const { receipt } = await gate.handle(
        `${session}-${Math.floor(i / BATCH)}`,
        MESSAGES[i % BATCH],
      );
      if (receipt.status !== "dispatched") throw new Error("bench: call not dispatched");
    });
    await gate.drain();
    return (ops / (performance.now() - start)) * 1000;
  };
  const rawSlice = async () => (await concurrent(inFlight, ops, nextRaw)).opsPerSec;
  await gateSlice();
  await rawSlice();
  return medianRatesAbba(SLICES, gateSlice, rawSlice);
}
