import { performance } from "node:perf_hooks";
import autocannon from "autocannon";

/** What a connection's context carries between the requests of its sequence. */
export type Context = Record<string, unknown>;

export interface LoadRequest {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly setupRequest?: (request: autocannon.Request, context: Context) => autocannon.Request;
  readonly onResponse?: (status: number, body: string, context: Context) => void;
}

/** A sequence of requests each connection repeats in order against `url`. */
export interface Load {
  readonly url: string;
  readonly requests: readonly LoadRequest[];
}

export interface LoadResult {
  /** Answered requests per second (every answer must be a 2xx, or the run fails). */
  readonly rate: number;
  readonly p50: number;
  readonly p99: number;
}

/**
 * Runs `load` for `ms` with `connections` in flight. The rate is completed requests over the
 * wall time we measured: autocannon's own per-second samples are too coarse for slices under
 * a few seconds. A non-2xx answer is a broken bench, not a figure: it throws.
 */
export async function load(load: Load, ms: number, connections: number): Promise<LoadResult> {
  const start = performance.now();
  // autocannon's histogram keeps whole milliseconds; its `response` event has the exact time.
  const times: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: load.url,
        connections,
        pipelining: 1,
        duration: ms / 1000,
        requests: load.requests as autocannon.Request[],
      },
      (error, done) => (error ? reject(error) : resolve(done)),
    );
    instance.on("response", (_client, _status, _bytes, responseTime) => times.push(responseTime));
  });
  const elapsed = performance.now() - start;
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `bench: ${load.url}${load.requests[0]?.path}: ${result.non2xx} non-2xx answers, ${result.errors} errors`,
    );
  }
  return {
    rate: (result.requests.total / elapsed) * 1000,
    p50: percentile(times, 0.5),
    p99: percentile(times, 0.99),
  };
}

function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}
