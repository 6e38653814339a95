import { relative } from "node:path";
import type { Reporter, TestCase, TestModule } from "vitest/node";

/**
 * Closes a test run with what it did not check and why, said once: the skipped tests grouped
 * by file (each file's skipped suite names the service or tool it needs), and the expected
 * failures counted and named. Backend suites skip only outside CI (services.ts); under
 * `CI=true` a missing service fails the run instead.
 *
 * "Expected fail" (vitest's `it.fails`) is used in one place: the testkit's conformance
 * suites run against deliberately broken stores (packages/testkit/test/broken-stores.test.ts),
 * and each case that must catch a store's flaw is expected to fail there. It passes when the
 * suite caught the flaw, and fails the run the day a suite stops catching it.
 */
export class RunSummary implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const skipped = new Map<string, { count: number; why: string }>();
    const expectedFailures = new Map<string, number>();
    for (const module of modules) {
      const file = relative(process.cwd(), module.moduleId);
      for (const test of module.children.allTests()) {
        if (test.options.fails === true && test.result().state === "passed") {
          expectedFailures.set(file, (expectedFailures.get(file) ?? 0) + 1);
        }
        if (test.result().state !== "skipped") continue;
        const entry = skipped.get(file) ?? { count: 0, why: reasonOf(test) };
        entry.count++;
        skipped.set(file, entry);
      }
    }
    const lines: string[] = [];
    const total = sum(skipped.values());
    if (total === 0) lines.push("[tessera] nothing skipped");
    else {
      lines.push(`[tessera] skipped ${total} test(s) in ${skipped.size} file(s):`);
      for (const [file, { count, why }] of [...skipped].sort()) {
        lines.push(`  ${file}: ${count} (${why})`);
      }
      const missing = (["TESSERA_PG_URL", "TESSERA_REDIS_URL"] as const).filter(
        (name) => !process.env[name],
      );
      if (missing.length > 0) {
        lines.push(
          `  ${missing.join(" and ")} not set: the suites of those backends skip (set them to run them; under CI=true they must be set)`,
        );
      }
    }
    const expected = [...expectedFailures.values()].reduce((a, b) => a + b, 0);
    if (expected > 0) {
      lines.push(
        `[tessera] ${expected} expected failure(s) happened as expected (it.fails: conformance cases run against deliberately broken stores, each must catch its flaw; in ${[...expectedFailures.keys()].join(", ")})`,
      );
    }
    process.stdout.write(`\n${lines.join("\n")}\n`);
  }
}

/** The names of a skipped test and its suites, innermost last: they say what it needs. */
function reasonOf(test: TestCase): string {
  const names: string[] = [];
  let parent: TestCase["parent"] | undefined = test.parent;
  while (parent !== undefined && parent.type === "suite") {
    names.unshift(parent.name);
    parent = parent.parent;
  }
  names.push(test.name);
  const note =
    test.result().state === "skipped" ? (test.result() as { note?: string }).note : undefined;
  return note ?? names.join(" › ");
}

function sum(entries: Iterable<{ count: number }>): number {
  let total = 0;
  for (const { count } of entries) total += count;
  return total;
}
