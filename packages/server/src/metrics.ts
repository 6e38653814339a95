import { performance } from "node:perf_hooks";
import { Counter, Registry } from "prom-client";
import type { ServiceStores } from "./stores.js";

type DecisionLabels = { route: string; outcome: string; code: string };

const STORE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** The service's Prometheus metrics, in a registry of its own (two services never mix). */
export class Metrics {
  readonly registry = new Registry();
  /** Decisions counted by `decided` since the counter was last read, keyed by label values. */
  readonly #tally = new Map<string, { labels: DecisionLabels; n: number }>();
  readonly decisions = new Counter({
    name: "tessera_decisions_total",
    help: "Decisions taken, by route, outcome (allowed, delivered, denied) and caller code.",
    labelNames: ["route", "outcome", "code"] as const,
    registers: [this.registry],
    // Added when the counter is read (a scrape), not per decision: see `decided`.
    collect: () => {
      for (const entry of this.#tally.values()) {
        if (entry.n === 0) continue;
        this.decisions.inc(entry.labels, entry.n);
        entry.n = 0;
      }
    },
  });
  readonly claims = new Counter({
    name: "tessera_claims_total",
    help: "Retry-safe calls by receipt status: dispatched, denied, failed, or none (a replay).",
    labelNames: ["route", "status"] as const,
    registers: [this.registry],
  });
  readonly answerWriteFailures = new Counter({
    name: "tessera_answer_write_failures_total",
    help: "Failed attempts to write a retry-safe call's answer after its reply (each is tried again).",
    registers: [this.registry],
  });
  readonly store = new StoreHistogram(
    "tessera_store_seconds",
    "Store call latency, by port and operation.",
    STORE_BUCKETS,
  );

  constructor() {
    this.registry.registerMetric(this.store as never);
  }

  /**
   * Counts one decision into `tessera_decisions_total`. prom-client's `inc` checks and hashes
   * the labels on every call (pre-bound children too); a tally keyed by the label values is
   * a map lookup, and a scrape adds what it holds. The set of keys is bounded: routes, outcomes
   * and caller codes are fixed vocabularies.
   */
  decided(route: string, outcome: string, code: string): void {
    const key = `${route}\u0000${outcome}\u0000${code}`;
    const entry = this.#tally.get(key);
    if (entry === undefined) this.#tally.set(key, { labels: { route, outcome, code }, n: 1 });
    else entry.n++;
  }

  /** The stores, each call timed into `tessera_store_seconds`. */
  timed(stores: ServiceStores): ServiceStores {
    return {
      grants: this.#timed("grants", stores.grants),
      usage: this.#timed("usage", stores.usage),
      audit: this.#timed("audit", stores.audit),
      claims: this.#timed("claims", stores.claims),
      ...(stores.acts === undefined ? {} : { acts: this.#timed("acts", stores.acts) }),
    };
  }

  #timed<T extends object>(port: string, target: T): T {
    const histogram = this.store;
    // One wrapper per method, made on first use, its series found then too: a decision calls
    // several store methods, and per-call closures and label lookups were measurable on the
    // denied path.
    const wrapped = new Map<string, unknown>();
    return new Proxy(target, {
      get(object, property) {
        const value = Reflect.get(object, property, object);
        if (typeof value !== "function" || typeof property !== "string") return value;
        const known = wrapped.get(property);
        if (known !== undefined) return known;
        const series = histogram.series(port, property);
        const timed = (...args: unknown[]) => {
          const start = performance.now();
          let result: unknown;
          try {
            result = value.apply(object, args);
          } catch (error) {
            series.since(start);
            throw error;
          }
          if (result instanceof Promise) {
            // Observed on a branch of its own, the store's promise handed back as is: chaining
            // (`finally`) put one more promise and microtask between every store answer and
            // the kernel awaiting it. The branch settles either way, so it is never unhandled.
            const observe = () => series.since(start);
            result.then(observe, observe);
            return result;
          }
          series.since(start);
          return result;
        };
        wrapped.set(property, timed);
        return timed;
      },
    });
  }
}

/** One label set's counts: per bucket (not cumulative), the sum in seconds, the count. */
class Series {
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = bounds.map(() => 0);
  }

  /** Records the time since `start` (a `performance.now()` reading). */
  since(start: number): void {
    const seconds = (performance.now() - start) / 1000;
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (seconds <= (bounds[i] as number)) {
        this.counts[i] = (this.counts[i] as number) + 1;
        break;
      }
    }
    this.sum += seconds;
    this.count++;
  }
}

/**
 * A histogram with the exposition of prom-client's, whose per-call cost is a clock read and a
 * bucket increment: prom-client's `startTimer` allocates a timer closure and validates and
 * hashes the labels on every observation, three times per denied send (grant version, usage,
 * audit append). Series are keyed once per store method, when its wrapper is made.
 */
class StoreHistogram {
  readonly type = "histogram";
  readonly aggregator = "sum";
  #series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
  ) {}

  series(port: string, op: string): Series {
    const key = `${port}\u0000${op}`;
    let series = this.#series.get(key);
    if (series === undefined) {
      series = new Series({ port, op }, this.bounds);
      this.#series.set(key, series);
    }
    return series;
  }

  /** What prom-client's registry reads for the text format: `le` apart from the series labels. */
  getForPromString() {
    const values: {
      labels: Record<string, string | number>;
      sharedLabels: Readonly<Record<string, string>>;
      value: number;
      metricName: string;
    }[] = [];
    for (const series of this.#series.values()) {
      // A series made for a method never called is not shown, as prom-client shows none.
      if (series.count === 0) continue;
      const sharedLabels = series.labels;
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += series.counts[i] as number;
        values.push({
          labels: { le },
          sharedLabels,
          value: cumulative,
          metricName: this.#of("bucket"),
        });
      });
      values.push(
        {
          labels: { le: "+Inf" },
          sharedLabels,
          value: series.count,
          metricName: this.#of("bucket"),
        },
        { labels: {}, sharedLabels, value: series.sum, metricName: this.#of("sum") },
        { labels: {}, sharedLabels, value: series.count, metricName: this.#of("count") },
      );
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    };
  }

  /** The JSON form (`registry.getMetricsAsJSON()`): series labels merged into each value's. */
  get() {
    const data = this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ labels, sharedLabels, value, metricName }) => ({
        labels: { ...labels, ...sharedLabels },
        value,
        metricName,
      })),
    };
  }

  reset(): void {
    for (const series of this.#series.values()) {
      series.counts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }

  #of(suffix: string): string {
    return `${this.name}_${suffix}`;
  }
}
