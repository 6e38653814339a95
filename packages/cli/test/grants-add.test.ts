import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectRefusal, scratch, tessera } from "./support/cli.js";

/** A grant request as `grants issue` takes it: no id, issuedAt, namespaceId or issuer. */
const request = {
  subject: "agent",
  capabilities: [
    {
      resource: { namespace: "messages", path: ["bob"] },
      actions: ["messages.send"],
      scope: "exact",
    },
  ],
  constraints: { maxUses: 1 },
};

function setup(value: unknown) {
  const dir = scratch();
  const file = join(dir, "grant.json");
  writeFileSync(file, JSON.stringify(value));
  return { store: `sqlite:${join(dir, "g.db")}?create=true`, file };
}

describe("tessera grants add --store", () => {
  it("fills id, issuedAt, namespaceId and issuer as grants issue does", () => {
    const { store, file } = setup(request);
    const before = Date.now();
    const added = tessera(
      "grants",
      "add",
      "--store",
      store,
      "--file",
      file,
      "--namespace",
      "default",
      "--issuer",
      "host",
      "--json",
    );
    expect(added.stderr).toBe("");
    const grant = JSON.parse(added.stdout) as Record<string, string>;
    expect(grant).toMatchObject({ ...request, namespaceId: "default", issuer: "host" });
    expect(grant.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(grant.issuedAt as string)).toBeGreaterThanOrEqual(before - 1000);
    const listed = tessera("grants", "list", "--store", store, "--namespace", "default", "--json");
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id: grant.id })]);
  });

  it("refuses a file without a namespace or issuer when no flag gives it, naming the flag", () => {
    const { store, file } = setup(request);
    const run = tessera("grants", "add", "--store", store, "--file", file, "--issuer", "host");
    expectRefusal(run, "invalid_usage");
    expect(run.stderr).toContain("--namespace");
  });

  it("refuses a flag that disagrees with the file, and keeps a file's own values", () => {
    const { store, file } = setup({ ...request, id: "t-1", namespaceId: "team", issuer: "host" });
    const clash = tessera("grants", "add", "--store", store, "--file", file, "--namespace", "x");
    expectRefusal(clash, "invalid_usage");
    const kept = tessera("grants", "add", "--store", store, "--file", file, "--json");
    expect(JSON.parse(kept.stdout)).toMatchObject({ id: "t-1", namespaceId: "team" });
  });
});
