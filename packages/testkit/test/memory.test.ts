/**
 * The conformance suites against the in-process stores of @tessera/core and @tessera/a2ui.
 * They are one process only, so the cross-process cases skip and say why. Each export is
 * looked up by name so this file keeps compiling while those packages are being written;
 * a store that is not exported yet gets one visible skipped case instead of silence.
 * (The suites found three gaps here — a NaN bound consumed, read results mutable, limit 0
 * answering one event — tracked as knownFailures until @tessera/core fixed them.)
 */
import * as a2ui from "@tessera/a2ui";
import type { ClaimStore, GrantStore, GrantUsageStore, ReadableAuditSink } from "@tessera/core";
import * as core from "@tessera/core";
import {
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeGrantStoreConformance,
  describeUsageStoreConformance,
} from "@tessera/testkit";
import { it } from "vitest";

type Constructor<T> = new () => T;

function exported<T>(module: object, name: string): Constructor<T> | undefined {
  const value = (module as Record<string, unknown>)[name];
  return typeof value === "function" ? (value as Constructor<T>) : undefined;
}

function missing(name: string): void {
  it.skip(`${name} conformance (skipped: ${name} is not exported yet)`, () => {});
}

const UsageStore = exported<GrantUsageStore>(core, "InMemoryGrantUsageStore");
if (UsageStore) {
  describeUsageStoreConformance("InMemoryGrantUsageStore", {
    open: async () => ({ store: new UsageStore(), close: async () => {} }),
  });
} else missing("InMemoryGrantUsageStore");

const GrantSource = exported<GrantStore>(core, "InMemoryGrantSource");
if (GrantSource) {
  describeGrantStoreConformance("InMemoryGrantSource", {
    open: async () => ({ store: new GrantSource(), close: async () => {} }),
  });
} else missing("InMemoryGrantSource");

const AuditSink = exported<ReadableAuditSink>(core, "InMemoryAuditSink");
if (AuditSink) {
  describeAuditSinkConformance("InMemoryAuditSink", {
    open: async () => ({ store: new AuditSink(), close: async () => {} }),
  });
} else missing("InMemoryAuditSink");

const ClaimStoreClass = exported<ClaimStore>(a2ui, "MemoryClaimStore");
if (ClaimStoreClass) {
  describeClaimStoreConformance("MemoryClaimStore", {
    open: async () => {
      const store = new ClaimStoreClass();
      return { store, close: () => store.close() };
    },
  });
} else missing("MemoryClaimStore");
