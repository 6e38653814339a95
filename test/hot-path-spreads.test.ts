/**
 * No object literal on an act's path spreads an object and then names more members
 * (`{ ...event, seq }`). Node 20's V8 builds a fresh hidden class for every such literal it
 * evaluates: about 1 µs a literal and a map left for the collector, against tens of
 * nanoseconds for the same object set field by field or built by `Object.assign`, so a kernel
 * decision that made two of them ran at half its rate. `docs/architecture.md` ("Object spreads
 * on hot paths") has the measurement and the forms to use instead.
 *
 * The files checked are the ones every act runs through: the kernel, the audit chain, the
 * in-memory stores, the store kit, the A2UI gate, the stores' act ledgers, claim stores and
 * audit sinks, and the service's principals and retries. Spreading a literal (`...(x ? {} : { x })`)
 * is fine: V8 copies its fields in place.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const HOT_FOLDERS = [
  "packages/core/src/kernel",
  "packages/core/src/audit",
  "packages/core/src/memory",
  "packages/core/src/stores",
  "packages/a2ui/src/gate",
];
const HOT_FILE = /^(act-|claim-store|audit-)[\w-]*\.ts$/;
const HOT_FILE_FOLDERS = ["packages/sqlite/src", "packages/postgres/src", "packages/redis/src"];
/** The service's per-request parts; its route files register routes with spreads, once. */
const HOT_FILES = ["packages/server/src/principals.ts", "packages/server/src/retry.ts"];

function isSource(name: string): boolean {
  return name.endsWith(".ts") && !name.endsWith(".test.ts") && !name.endsWith(".d.ts");
}

function hotFiles(): string[] {
  const inFolders = HOT_FOLDERS.flatMap((folder) =>
    readdirSync(join(ROOT, folder), { withFileTypes: true, recursive: true })
      .filter((entry) => entry.isFile() && isSource(entry.name))
      .map((entry) => relative(ROOT, join(entry.parentPath, entry.name))),
  );
  const named = HOT_FILE_FOLDERS.flatMap((folder) =>
    readdirSync(join(ROOT, folder))
      .filter((name) => isSource(name) && HOT_FILE.test(name))
      .map((name) => join(folder, name)),
  );
  return [...inFolders, ...named, ...HOT_FILES];
}

/** A literal object, or a choice between literal objects: spreading one copies in place. */
function isLiteralObject(expression: ts.Expression): boolean {
  let e = expression;
  while (ts.isParenthesizedExpression(e)) e = e.expression;
  if (ts.isObjectLiteralExpression(e)) return true;
  if (ts.isConditionalExpression(e))
    return isLiteralObject(e.whenTrue) && isLiteralObject(e.whenFalse);
  if (ts.isBinaryExpression(e) && e.operatorToken.kind === ts.SyntaxKind.AmpersandAmpersandToken) {
    return isLiteralObject(e.right);
  }
  return false;
}

/** Line numbers (1-based) of literals that spread an object and then name more members. */
function slowSpreads(fileName: string, text: string): number[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const lines: number[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isObjectLiteralExpression(node)) {
      const first = node.properties.findIndex(
        (member) => ts.isSpreadAssignment(member) && !isLiteralObject(member.expression),
      );
      if (first >= 0 && first < node.properties.length - 1) {
        lines.push(source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return lines;
}

describe("object spreads on an act's path", () => {
  it("the check finds the slow form and passes the others", () => {
    const sample = [
      "const a = { ...event, seq };", // 1: slow
      "const b = { seq, ...event };", // 2
      "const c = { ...event };", // 3
      "const d = { a: 1, ...(x === undefined ? {} : { x }), b };", // 4
      "const e = { ...base, ...(x && { x }) };", // 5: slow
      "const f = Object.assign({}, event, { seq });", // 6
    ].join("\n");
    expect(slowSpreads("sample.ts", sample)).toEqual([1, 5]);
  });

  const files = hotFiles();
  it("covers the files every act runs through", () => {
    expect(files).toContain("packages/core/src/kernel/ledger-lease.ts");
    expect(files).toContain("packages/core/src/audit/chain.ts");
    expect(files).toContain("packages/sqlite/src/audit-link.ts");
    expect(files).toContain("packages/redis/src/act-ledger.ts");
    expect(files).toContain("packages/postgres/src/claim-store.ts");
  });

  it.each(files)("%s has none", (file) => {
    expect(slowSpreads(file, readFileSync(join(ROOT, file), "utf8"))).toEqual([]);
  });
});
