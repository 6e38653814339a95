/**
 * The claim-store conformance suite against DirectoryClaimStore: the embedded default, safe
 * across processes on one machine, so it also runs the 8-process race and the kill -9 case,
 * and gate workers in separate processes sharing only the directory.
 * The host provisions the directory (private, mode 0700); the store never creates it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DirectoryClaimStore } from "@tessera/a2ui";
import type { ClaimStore } from "@tessera/core";
import {
  describeClaimStoreConformance,
  describeGateWorkersConformance,
  type OpenedStore,
  type StoreFactory,
} from "@tessera/testkit";

const directoryFactory: StoreFactory<ClaimStore, OpenedStore<ClaimStore> & { dir: string }> = {
  open: async () => {
    // mkdtemp creates the directory with mode 0700, as the store requires.
    const dir = mkdtempSync(join(tmpdir(), "tessera-claims-"));
    const store = await DirectoryClaimStore.open(dir);
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
};

describeClaimStoreConformance("DirectoryClaimStore", directoryFactory);
describeGateWorkersConformance("DirectoryClaimStore", directoryFactory);
