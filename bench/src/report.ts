/** One measured figure. `ratio` compares it to `baseline` measured in the same run. */
export interface BenchRow {
  readonly name: string;
  readonly unit: "ops/s" | "ms" | "bytes" | "MB";
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
