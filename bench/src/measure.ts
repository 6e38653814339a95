import { performance } from "node:perf_hooks";

export interface Throughput {
  readonly opsPerSec: number;
  readonly ops: number;
  readonly ms: number;
}

/**
 * Runs `batch` (which performs `perBatch` operations) until at least `minMs` have passed,
 * after `warmupMs` of warm-up, and reports operations per second. Several short rounds are
 * taken and the best kept: these machines are noisy, and the best round is the one least
 * disturbed by the neighbours.
 */
export async function throughput(
  batch: () => unknown | Promise<unknown>,
  perBatch: number,
  options: { minMs?: number; warmupMs?: number; rounds?: number } = {},
): Promise<Throughput> {
  const { minMs = 300, warmupMs = 100, rounds = 3 } = options;
  await runFor(batch, warmupMs);
  let best: Throughput | undefined;
  for (let round = 0; round < rounds; round++) {
    const { batches, ms } = await runFor(batch, minMs);
    const ops = batches * perBatch;
    const result = { ops, ms, opsPerSec: (ops / ms) * 1000 };
    if (!best || result.opsPerSec > best.opsPerSec) best = result;
  }
  return best as Throughput;
}

async function runFor(
  batch: () => unknown | Promise<unknown>,
  minMs: number,
): Promise<{ batches: number; ms: number }> {
  const start = performance.now();
  let batches = 0;
  let elapsed = 0;
  do {
    const out = batch();
    if (out instanceof Promise) await out;
    batches++;
    elapsed = performance.now() - start;
  } while (elapsed < minMs);
  return { batches, ms: elapsed };
}

/**
 * `task` run by `inFlight` callers at once, each starting its next as soon as its last ended
 * (a closed loop, as a load generator's connections do), after `warmupMs` of the same:
 * operations completed per second over at least `minMs`. Unlike waves of `inFlight` joined by
 * `Promise.all`, which wait for each wave's slowest, this keeps `inFlight` in flight the whole
 * time. The best of `rounds` is kept, as `throughput` does.
 */
export async function throughputInFlight(
  task: () => Promise<unknown>,
  inFlight: number,
  options: { minMs?: number; warmupMs?: number; rounds?: number } = {},
): Promise<Throughput> {
  const { minMs = 300, warmupMs = 100, rounds = 3 } = options;
  await lanesFor(task, inFlight, warmupMs);
  let best: Throughput | undefined;
  for (let round = 0; round < rounds; round++) {
    const result = await lanesFor(task, inFlight, minMs);
    if (!best || result.opsPerSec > best.opsPerSec) best = result;
  }
  return best as Throughput;
}

async function lanesFor(
  task: () => Promise<unknown>,
  inFlight: number,
  minMs: number,
): Promise<Throughput> {
  const start = performance.now();
  const until = start + minMs;
  let ops = 0;
  const lane = async () => {
    while (performance.now() < until) {
      await task();
      ops++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  const ms = performance.now() - start;
  return { ops, ms, opsPerSec: (ops / ms) * 1000 };
}

/** Runs `task` with `inFlight` concurrent callers until `total` operations have completed. */
export async function concurrent(
  inFlight: number,
  total: number,
  task: (index: number) => Promise<unknown>,
): Promise<Throughput> {
  let next = 0;
  const start = performance.now();
  const lane = async () => {
    while (next < total) {
      const index = next++;
      await task(index);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  const ms = performance.now() - start;
  return { ops: total, ms, opsPerSec: (total / ms) * 1000 };
}

/** The middle value (mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  if (sorted.length % 2 === 1) return sorted[middle] as number;
  return ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/**
 * Measures two sides in alternating rounds, in ABBA order (whoever went second in one round
 * goes first in the next, so neither side always runs right after the other's fsyncs or
 * garbage); returns the median rate of each. Each side's callback measures one rate.
 */
export async function medianRatesAbba(
  rounds: number,
  ours: (round: number) => Promise<number>,
  theirs: (round: number) => Promise<number>,
): Promise<[number, number]> {
  const ourRates: number[] = [];
  const theirRates: number[] = [];
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      ourRates.push(await ours(round));
      theirRates.push(await theirs(round));
    } else {
      theirRates.push(await theirs(round));
      ourRates.push(await ours(round));
    }
  }
  return [median(ourRates), median(theirRates)];
}
