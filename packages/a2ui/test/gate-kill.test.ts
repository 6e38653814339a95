/**
 * kill -9 of gate workers sharing a claim directory, many rounds (the testkit's SIGKILL
 * suite): with receipts written after the reply, nothing runs twice and no receipt lies.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describeGateKillConformance, type OpenedStore, type StoreFactory } from "@tessera/testkit";
import { DirectoryClaimStore } from "../src/stores/directory/directory-store.js";

type Opened = OpenedStore<DirectoryClaimStore> & { readonly dir: string };

const factory: StoreFactory<DirectoryClaimStore, Opened> = {
  open: async () => {
    const root = mkdtempSync(path.join(tmpdir(), "tessera-gate-kill-"));
    const dir = path.join(root, "claims");
    mkdirSync(dir, { mode: 0o700 });
    const store = await DirectoryClaimStore.open(dir);
    return {
      store,
      dir,
      close: async () => {
        await store.close();
        rmSync(root, { recursive: true, force: true });
      },
    };
  },
  processSpec: ({ dir }) => ({
    module: "@tessera/a2ui",
    exportName: "DirectoryClaimStore.open",
    arg: dir,
  }),
};

describeGateKillConformance("a claim directory", factory);
