/**
 * The claim-store conformance suite against DirectoryClaimStore: the embedded default, safe
 * across processes on one machine, so it also runs the 8-process race and the kill -9 case,
 * and gate workers in separate processes sharing only the directory.
 * The host provisions the directory (private, mode 0700); the store never creates it.
 *
 * The act ledger suite against the composition the embedded stores use (`composeActLedger`
 * over the claim directory, usage in memory and the JSON-lines audit log): one write after
 * another, not one transaction, so it has no outage hook (a fault between two steps leaves
 * part of an act; docs/stores.md says what).
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DirectoryClaimStore } from "@tessera/a2ui";
import { type ClaimStore, InMemoryGrantUsageStore, JsonlAuditSink } from "@tessera/core";
import { composeActLedger } from "@tessera/core/store-kit";
import {
  type ActLedgerPorts,
  describeActLedgerConformance,
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

describeActLedgerConformance<OpenedStore<ActLedgerPorts>>(
  "composeActLedger over DirectoryClaimStore, in-memory usage and JsonlAuditSink",
  {
    open: async () => {
      const root = mkdtempSync(join(tmpdir(), "tessera-acts-"));
      const dir = join(root, "claims");
      mkdirSync(dir, { mode: 0o700 });
      const claims = await DirectoryClaimStore.open(dir);
      const usage = new InMemoryGrantUsageStore();
      const audit = JsonlAuditSink.open(join(root, "audit.jsonl"));
      const acts = composeActLedger({ claims, usage, audit });
      return {
        store: { acts, claims, usage, audit },
        close: async () => {
          await claims.close();
          audit.close();
          rmSync(root, { recursive: true, force: true });
        },
      };
    },
  },
);
