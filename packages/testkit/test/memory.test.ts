/**
 * The conformance suites against the in-process stores of @tessera/core and @tessera/a2ui.
 * They are one process only, so the cross-process cases skip and say why. Each export is
 * looked up by name so this file keeps compiling while those packages are being written;
 * a store that is not exported yet gets one visible skipped case instead of silence.
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
    // Known gap (packages/core/src/memory/usage-store.ts): a NaN, fractional or infinite
    // bound is compared as is, so `tryConsume(ns, id, NaN)` consumes. The kernel only passes
    // validated integers; the store itself should refuse. Remove once fixed.
    knownFailures: ["never consumes on a bound that is not a positive integer"],
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
    // Known gaps (packages/core/src/memory/audit-sink.ts): `read` hands out the stored event
    // objects, so a reader can rewrite history; `limit: 0` returns one event. Remove once fixed.
    knownFailures: [
      "is append-only: changing what read returned changes nothing stored",
      "filters by callId and traceId; a limit keeps the first events",
    ],
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
