import { CASE_KEYS } from "../demos/two-workers/index.js";
import { expectedCase, expectedScene, SCENE_NUMBERS } from "./expectations.js";
import type { CaseKey, ReportRun } from "./types.js";

/** One field where the run measured something other than the expectation. */
export interface Difference {
  /** Dotted path into the case or scene, e.g. `after.tool_callbacks`, `lines.1.code`. */
  readonly field: string;
  readonly measured: string;
  readonly expected: string;
}

export interface Verdict {
  /** `two-workers-one-id`…, or `fanout-scene-1`…: the id of the case's element on the page. */
  readonly id: string;
  readonly ok: boolean;
  readonly differences: readonly Difference[];
}

const show = (value: unknown): string =>
  value === undefined ? "absent" : (JSON.stringify(value) ?? String(value));

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const isScalarList = (value: readonly unknown[]) => value.every((v) => !isRecord(v));

/**
 * Walks the expectation: every field it names must hold the same value in the run (fields it
 * does not name, like a reply's text, are not part of the verdict). A list of scalars is
 * compared whole, so `[value, value]` against `[INVALID_FUNCTION_CALL, value]` reads as one
 * difference; a list of records item by item.
 */
export function differences(expected: unknown, measured: unknown, path = ""): Difference[] {
  const here = (): Difference[] => [
    { field: path || "(whole)", measured: show(measured), expected: show(expected) },
  ];
  if (Array.isArray(expected)) {
    if (!Array.isArray(measured)) return here();
    if (isScalarList(expected)) {
      return show(expected) === show(measured) ? [] : here();
    }
    if (expected.length !== measured.length) {
      return [
        {
          field: `${path}.length`,
          measured: String(measured.length),
          expected: String(expected.length),
        },
      ];
    }
    return expected.flatMap((item, i) => differences(item, measured[i], `${path}.${i}`));
  }
  if (isRecord(expected)) {
    if (!isRecord(measured)) return here();
    return Object.entries(expected).flatMap(([key, value]) =>
      differences(value, measured[key], path ? `${path}.${key}` : key),
    );
  }
  return Object.is(expected, measured) ? [] : here();
}

const verdict = (id: string, found: Difference[]): Verdict =>
  Object.freeze({ id, ok: found.length === 0, differences: Object.freeze(found) });

export function caseVerdict(run: ReportRun, key: CaseKey): Verdict {
  return verdict(key, differences(expectedCase(key, run.workers), run.twoWorkers[key]));
}

export function sceneVerdict(run: ReportRun, number: number): Verdict {
  const measured = run.fanout.scenes.find((scene) => scene.number === number);
  return verdict(
    `fanout-scene-${number}`,
    differences(expectedScene(number, run.fanout.recipients), measured),
  );
}

/** Every case and scene of the run, in page order. */
export function allVerdicts(run: ReportRun): Verdict[] {
  return [
    ...CASE_KEYS.map((key) => caseVerdict(run, key)),
    ...SCENE_NUMBERS.map((n) => sceneVerdict(run, n)),
  ];
}
