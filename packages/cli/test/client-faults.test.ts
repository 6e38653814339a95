import { describe, expect, it } from "vitest";
import { expectRefusal, tesseraWith } from "./support/cli.js";

/** Fault reports from testers, each run as a user would: the built binary, a clean env. */

describe("a --url that is not an absolute http(s) URL", () => {
  it("is invalid_config, exit 2, as the same value in TESSERA_URL is; no stack", () => {
    const args = ["audit", "query", "--call-id", "x"];
    const fromFlag = tesseraWith({ TESSERA_TOKEN: "x" }, ...args, "--url", "127.0.0.1:18301");
    expectRefusal(fromFlag, "invalid_config");
    expect(fromFlag.stderr).toContain("--url: expected an http:// or https:// URL");
    expect(fromFlag.stderr).not.toContain("unexpected failure");
    const fromEnv = tesseraWith({ TESSERA_TOKEN: "x", TESSERA_URL: "127.0.0.1:18301" }, ...args);
    expectRefusal(fromEnv, "invalid_config");
  });
});

describe("grants revoke --id . (or ..) against a service", () => {
  it("is refused before sending, naming the --store way to revoke it", () => {
    for (const id of [".", ".."]) {
      // Port 9 (discard): nothing answers there, and nothing should be asked.
      const run = tesseraWith(
        { TESSERA_TOKEN: "x" },
        ...["grants", "revoke", "--id", id, "--url", "http://127.0.0.1:9"],
      );
      expectRefusal(run, "invalid_input");
      expect(run.stderr).toContain("cannot be named in a URL path");
      expect(run.stderr).toContain(`tessera grants revoke --id ${id} --store`);
    }
  });
});
