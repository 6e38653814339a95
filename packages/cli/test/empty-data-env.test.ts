import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectRefusal, scratch, tesseraWith } from "./support/cli.js";

/**
 * An empty `TESSERA_DATA` (`TESSERA_DATA=$UNSET_VAR`) is refused by every command that reads
 * it, in the same words (`invalid_config: TESSERA_DATA is set but empty`), never taken as
 * unset. Before, serve, tokens and init refused it while the audit, claims and explain
 * commands read it as unset (and said only to name a source, or took the service's path).
 * A source named on the command line outranks it, as it outranks a set one.
 */

const EMPTY = { TESSERA_DATA: "" };

const READERS: readonly (readonly string[])[] = [
  ["audit", "list"],
  ["audit", "verify"],
  ["audit", "explain", "c-1"],
  ["audit", "query", "--call-id", "c-1"],
  ["audit", "tail"],
  ["explain", "c-1"],
  ["claims", "--in-doubt"],
  ["grants", "list"],
  ["serve"],
  ["tokens", "list"],
  ["init"],
];

describe("an empty TESSERA_DATA", () => {
  it("is refused alike by every command that reads it", () => {
    for (const args of READERS) {
      const refused = tesseraWith(EMPTY, ...args);
      expectRefusal(refused, "invalid_config");
      expect(refused.stderr, args.join(" ")).toBe(
        "tessera: invalid_config: TESSERA_DATA is set but empty\n",
      );
    }
  });

  it("is not consulted where a source is named", () => {
    const data = join(scratch(), "data");
    expect(tesseraWith({}, "init", data, "--json").code).toBe(0);
    for (const args of [
      ["audit", "list", "--data", data],
      ["audit", "query", "--data", data, "--call-id", "c-1"],
      ["audit", "tail", "--store", `sqlite:${join(data, "tessera.db")}`],
      ["explain", "c-1", "--data", data],
      ["claims", "--in-doubt", "--data", data],
    ]) {
      const read = tesseraWith(EMPTY, ...args, "--json");
      expect(read.code, `${args.join(" ")}: ${read.stderr}`).toBe(0);
    }
  });
});
