/** One measured figure. `ratio` compares it to `baseline` measured in the same run. */
export interface BenchRow {
  readonly name: string;
  readonly unit: "ops/s" | "ms" | "µs" | "bytes" | "MB" | "writes/act";
  readonly value: number;
  /** The raw primitive or peer library, measured in the same run. */
  readonly baseline?: { readonly name: string; readonly value: number };
  /**
   * value / baseline.value for rates (higher is better) or, for overhead rows,
   * baseline cost over ours; say which in `ratioMeaning`.
   */
  readonly ratio?: number;
  readonly ratioMeaning?: string;
  /** The target, as text, and whether this run met it. */
  readonly target?: string;
  readonly met?: boolean;
}

export interface BenchSection {
  readonly name: string;
  readonly rows: BenchRow[];
  readonly notes: string[];
}

export interface BenchModule {
  run(): Promise<BenchSection>;
}

/** A rate beside its baseline from the same run; `met` when the ratio reaches `target.minRatio`. */
export function ratioRow(
  name: string,
  value: number,
  baseline: { readonly name: string; readonly value: number },
  ratioMeaning: string,
  target?: { readonly text: string; readonly minRatio: number },
): BenchRow {
  const ratio = value / baseline.value;
  return {
    name,
    unit: "ops/s",
    value,
    baseline,
    ratio,
    ratioMeaning,
    ...(target === undefined ? {} : { target: target.text, met: ratio >= target.minRatio }),
  };
}
