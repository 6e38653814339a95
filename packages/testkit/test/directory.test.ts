/**
 * The claim-store conformance suite against DirectoryClaimStore: the embedded default, safe
 * across processes on one machine, so it also runs the 8-process race and the kill -9 case.
 * The host provisions the directory (private, mode 0700); the store never creates it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as a2ui from "@tessera/a2ui";
import type { ClaimStore } from "@tessera/core";
import { describeClaimStoreConformance } from "@tessera/testkit";
import { it } from "vitest";

interface DirectoryClaimStoreClass {
  open(dir: string): Promise<ClaimStore>;
}

const Directory = (a2ui as Record<string, unknown>).DirectoryClaimStore as
  | DirectoryClaimStoreClass
  | undefined;

if (Directory && typeof Directory.open === "function") {
  describeClaimStoreConformance("DirectoryClaimStore", {
    open: async () => {
      // mkdtemp creates the directory with mode 0700, as the store requires.
      const dir = mkdtempSync(join(tmpdir(), "tessera-claims-"));
      const store = await Directory.open(dir);
      return {
        store,
        dir,
        close: async () => {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    processSpec: ({ dir }) => ({
      module: "@tessera/a2ui",
      exportName: "DirectoryClaimStore.open",
      arg: dir,
    }),
  });
} else {
  it.skip("DirectoryClaimStore conformance (skipped: not exported by @tessera/a2ui yet)", () => {});
}
