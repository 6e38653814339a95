/**
 * The shared AuditSink conformance suite (@tessera/testkit) against the JSON-lines file sink,
 * including its cross-process cases: each worker process opens the same file with
 * `JsonlAuditSink.open(path)` from the built package.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeAuditSinkConformance } from "@tessera/testkit";
import { JsonlAuditSink } from "../src/index.js";

describeAuditSinkConformance("JsonlAuditSink", {
  open: async () => {
    const dir = mkdtempSync(join(tmpdir(), "tessera-jsonl-conformance-"));
    const path = join(dir, "audit.jsonl");
    const store = JsonlAuditSink.open(path);
    return {
      store,
      path,
      close: async () => {
        store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  processSpec: (opened) => ({
    module: "@tessera/core",
    exportName: "JsonlAuditSink.open",
    arg: opened.path,
  }),
});
