import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { arch, cpus, platform, release } from "node:os";
import { dirname } from "node:path";
import { TesseraError } from "@tessera/core";
import { runFanoutDemo } from "../demos/fanout/index.js";
import { runTwoWorkersDemo } from "../demos/two-workers/index.js";
import { openStoresByUrl } from "../stores.js";
import type { BenchResults } from "./bench.js";
import type { FanoutReport, MachineInfo, ReportRun, TwoWorkersReport } from "./types.js";

export interface DemoOptions {
  readonly workers: number;
  readonly store?: string;
}

/** Both demos' results; a parameter of `collectRun` so a test can hand it any results. */
export type RunDemos = (
  options: DemoOptions,
) => Promise<{ twoWorkers: TwoWorkersReport; fanout: FanoutReport }>;

/**
 * The demos as `tessera demo` runs them: two-workers in real OS processes (claims shared
 * through a fresh private directory, or through the store), then the five fan-out scenes
 * (tickets counted in memory, or in the same store).
 */
export const runDemos: RunDemos = async (options) => {
  const twoWorkers = await runTwoWorkersDemo({
    workers: options.workers,
    ...(options.store ? { store: options.store } : {}),
  });
  const stores = options.store ? await openStoresByUrl(options.store) : undefined;
  try {
    const fanout = await runFanoutDemo(stores ? { usage: () => stores.usage } : {});
    return { twoWorkers, fanout };
  } finally {
    await stores?.close();
  }
};

/** A store URL as the page may show it: no credentials, no query (which may hold a password). */
export function describeStore(url: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    try {
      const parsed = new URL(url);
      return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
    } catch {
      return `${url.slice(0, url.indexOf("//"))}//…`;
    }
  }
  return url.split("?")[0] as string;
}

function machine(): MachineInfo {
  const cores = cpus();
  return {
    platform: platform(),
    release: release(),
    arch: arch(),
    cpus: cores.length,
    model: cores[0]?.model.trim() || "unknown CPU",
    node: process.version,
  };
}

export interface CollectOptions extends DemoOptions {
  readonly bench?: BenchResults;
}

export async function collectRun(
  options: CollectOptions,
  demos: RunDemos = runDemos,
): Promise<ReportRun> {
  const started = new Date();
  const t0 = performance.now();
  const { twoWorkers, fanout } = await demos(options);
  return {
    startedAt: started.toISOString(),
    durationMs: Math.round(performance.now() - t0),
    machine: machine(),
    workers: options.workers,
    store: options.store ? describeStore(options.store) : null,
    twoWorkers,
    fanout,
    ...(options.bench ? { bench: options.bench } : {}),
  };
}

/**
 * Writes the page next to its final name, then renames it over: a reader (or `tessera
 * serve`) never sees half a page, and a failed run leaves the previous page in place.
 */
export function writePage(path: string, text: string): void {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(temporary, text, { mode: 0o644 });
    renameSync(temporary, path);
  } catch (error) {
    try {
      rmSync(temporary, { force: true });
    } catch {
      // nothing was created where nothing can be (the parent is a file, or unwritable)
    }
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    throw new TesseraError("invalid_usage", `cannot write the page to ${path} (${code})`, {
      cause: error,
    });
  }
}
