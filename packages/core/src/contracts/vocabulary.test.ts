import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { AUDIT_REASONS, CALLER_CODES, ERROR_CODES, RECEIPT_STATUSES } from "./vocabulary.js";

const doc = readFileSync(new URL("../../../../docs/codes.md", import.meta.url), "utf8");

/** The backticked names in the first column of the table under `## heading`. */
function namesUnder(heading: string): string[] {
  const section = doc.split(/^## /m).find((part) => part.startsWith(heading));
  if (!section) throw new Error(`docs/codes.md has no section "${heading}"`);
  return [...section.matchAll(/^\| `([^`]+)` *\|/gm)].map((match) => match[1] as string);
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
});
