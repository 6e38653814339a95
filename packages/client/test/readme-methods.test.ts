import { readFileSync } from "node:fs";
import { ROUTES, type RouteName } from "@tessera/core/http";
import { describe, expect, it } from "vitest";
import { TesseraClient } from "../src/index.js";

/**
 * The README's method table, row by row, against the client: before, it documented
 * `audit({ callId } | { traceId }, limit?)` (the limit is a field of the query; the second
 * argument is `{ signal }`) and left `deriveGrant` out.
 */

const README = readFileSync(new URL("../README.md", import.meta.url), "utf8");

interface Row {
  readonly name: string;
  readonly args: string;
  readonly route: string;
  readonly retried: string;
}

function rows(): Row[] {
  const table = /## Methods\n\n([\s\S]*?)\n\n/.exec(README)?.[1] ?? "";
  return table
    .split("\n")
    .slice(2)
    .map((line) => {
      const [method, route, retried] = line
        .split(/(?<!\\)\|/)
        .slice(1, -1)
        .map((cell) => cell.trim());
      const call = /^`(\w+)\((.*)\)`$/.exec(method ?? "");
      return {
        name: call?.[1] ?? `unreadable: ${line}`,
        args: (call?.[2] ?? "").replaceAll("\\|", "|"),
        route: /^`(.*)`$/.exec(route ?? "")?.[1] ?? `unreadable: ${line}`,
        retried: retried ?? "",
      };
    });
}

/** Top-level arguments of a documented call: commas inside braces do not split. */
function argumentCount(args: string): number {
  if (args.trim() === "") return 0;
  let depth = 0;
  let count = 1;
  for (const char of args) {
    if (char === "{" || char === "(") depth++;
    else if (char === "}" || char === ")") depth--;
    else if (char === "," && depth === 0) count++;
  }
  return count;
}

const methods = Object.getOwnPropertyNames(TesseraClient.prototype).filter(
  (name) => name !== "constructor",
);

describe("the client README's method table", () => {
  it("lists every public method once, and nothing else", () => {
    const named = rows().map((row) => row.name);
    expect([...named].sort()).toEqual([...methods].sort());
  });

  it("gives each method its route, its arguments (options last, not listed) and its retries", () => {
    for (const row of rows()) {
      const route = ROUTES[row.name as RouteName];
      const method = (
        TesseraClient.prototype as unknown as Record<string, (...a: never[]) => unknown>
      )[row.name];
      const retried =
        route.method === "GET"
          ? "yes"
          : "retrySafe" in route && route.retrySafe
            ? "yes (call ID)"
            : "no";
      expect({
        name: row.name,
        route: row.route,
        args: argumentCount(row.args),
        retried: row.retried,
      }).toEqual({
        name: row.name,
        route: `${route.method} ${route.path}`,
        // Every method takes `{ signal }` last, which the table leaves out.
        args: (method?.length ?? 0) - 1,
        retried,
      });
    }
  });

  it("documents audit's limit as a field of the query, as AuditQuery has it", () => {
    const audit = rows().find((row) => row.name === "audit");
    expect(audit?.args).toBe("{ callId, limit? } | { traceId, limit? }");
  });
});
