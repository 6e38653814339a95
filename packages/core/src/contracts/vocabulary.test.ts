import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  AUDIT_REASONS,
  CALLER_CODES,
  ERROR_CATALOG,
  ERROR_CODES,
  GATE_REASONS,
  KERNEL_REASONS,
  RECEIPT_STATUSES,
} from "./vocabulary.js";

const doc = readFileSync(new URL("../../../../docs/codes.md", import.meta.url), "utf8");

/** The rows of the table under `## heading`: the backticked name, then the other cells. */
function rowsUnder(heading: string): [string, ...string[]][] {
  const section = doc.split(/^## /m).find((part) => part.startsWith(heading));
  if (!section) throw new Error(`docs/codes.md has no section "${heading}"`);
  return [...section.matchAll(/^\| `([^`]+)` *\|(.*)$/gm)].map((match) => [
    match[1] as string,
    ...(match[2] as string)
      .split("|")
      .slice(0, -1)
      .map((cell) => cell.trim()),
  ]);
}

function namesUnder(heading: string): string[] {
  return rowsUnder(heading).map(([name]) => name);
}

describe("docs/codes.md lists exactly the vocabulary", () => {
  it.each([
    ["Caller codes", [...CALLER_CODES]],
    ["Audit reasons", Object.keys(AUDIT_REASONS)],
    ["Error codes", [...ERROR_CODES]],
    ["Receipt statuses", [...RECEIPT_STATUSES]],
  ])("%s", (heading, names) => {
    expect(namesUnder(heading).sort()).toEqual([...names].sort());
  });

  it("has no duplicate names in the code lists", () => {
    expect(new Set(CALLER_CODES).size).toBe(CALLER_CODES.length);
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
  });

  it("shows each error code's meaning and HTTP status as the catalogue has them", () => {
    const documented = Object.fromEntries(
      rowsUnder("Error codes").map(([code, meaning, status]) => [
        code,
        { meaning, httpStatus: Number(status) },
      ]),
    );
    expect(documented).toEqual(ERROR_CATALOG);
  });

  it("shows each audit reason's stage as the vocabulary has it", () => {
    const documented = Object.fromEntries(rowsUnder("Audit reasons").map(([r, s]) => [r, s]));
    expect(documented).toEqual(AUDIT_REASONS);
  });
});

describe("the reason tables", () => {
  it("split every audit reason into the kernel's or the gate's, never both", () => {
    const kernel = Object.keys(KERNEL_REASONS);
    const gate = Object.keys(GATE_REASONS);
    expect(kernel.filter((reason) => gate.includes(reason))).toEqual([]);
    expect([...kernel, ...gate].sort()).toEqual(Object.keys(AUDIT_REASONS).sort());
  });

  it("ERROR_CODES is the catalogue's keys, in order", () => {
    expect(ERROR_CODES).toEqual(Object.keys(ERROR_CATALOG));
    expect(Object.isFrozen(ERROR_CODES)).toBe(true);
  });
});
