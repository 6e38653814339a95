import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openStores } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { scratch, tessera } from "./support/cli.js";

/**
 * A listing that finds nothing says so on stderr and keeps stdout to one line per item: before,
 * `grants list` of a mistyped namespace and `audit list` of an empty trail printed nothing at
 * all, which a person could not tell from a command that did nothing.
 */
const GRANT = {
  subject: "agent",
  capabilities: [
    { resource: { namespace: "messages", path: ["bob"] }, actions: ["send"], scope: "exact" },
  ],
};

function emptyStore() {
  const dir = scratch();
  return { dir, store: `sqlite:${join(dir, "t.db")}?create=true` };
}

describe("listings that find nothing", () => {
  it("grants list: a note on stderr, nothing on stdout; one line per grant once there is one", async () => {
    const { dir, store } = emptyStore();
    // A store with nothing in it yet (grants list works on an existing store, never makes one).
    await (await openStores(store)).close();
    const none = tessera("grants", "list", "--store", store, "--namespace", "team");
    expect([none.code, none.stdout]).toEqual([0, ""]);
    expect(none.stderr).toBe("no grants in namespace team\n");

    const file = join(dir, "grant.json");
    writeFileSync(file, JSON.stringify(GRANT));
    const args = ["--namespace", "team", "--issuer", "host"];
    expect(tessera("grants", "add", "--store", store, "--file", file, ...args).code).toBe(0);
    const one = tessera("grants", "list", "--store", store, "--namespace", "team");
    expect([one.code, one.stderr]).toEqual([0, ""]);
    expect(one.stdout.trimEnd().split("\n")).toHaveLength(1);
    expect(one.stdout).toContain("subject=agent");
  });

  it("grants list --json: [] and no note, so a script reads stdout alone", async () => {
    const { store } = emptyStore();
    await (await openStores(store)).close();
    const none = tessera("grants", "list", "--store", store, "--namespace", "team", "--json");
    expect([none.code, none.stdout, none.stderr]).toEqual([0, "[]\n", ""]);
  });

  it("audit list, query and tail of an empty trail say there is nothing; --json stays []", async () => {
    const { store } = emptyStore();
    // A store with nothing in it yet: the audit commands read, and never create, a store.
    await (await openStores(store)).close();
    const note = "no decisions found: the trail is empty, or none match\n";
    for (const args of [["list"], ["query", "--call-id", "c-1"], ["tail"]]) {
      const run = tessera("audit", ...args, "--store", store);
      expect([args, run.code, run.stdout, run.stderr]).toEqual([args, 0, "", note]);
    }
    const json = tessera("audit", "list", "--store", store, "--json");
    expect([json.code, json.stdout, json.stderr]).toEqual([0, "[]\n", ""]);
  });
});
