/**
 * The conformance suites against the in-process stores of @tessera/core and @tessera/a2ui.
 * They are one process only, so the cross-process cases skip and say why.
 * (The suites found three gaps here — a NaN bound consumed, read results mutable, limit 0
 * answering one event — which @tessera/core has fixed.)
 */
import { InMemoryClaimStore } from "@tessera/a2ui";
import { InMemoryAuditSink, InMemoryGrantStore, InMemoryGrantUsageStore } from "@tessera/core";
import { composeActLedger } from "@tessera/core/store-kit";
import {
  describeActLedgerConformance,
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeGrantStoreConformance,
  describeUsageStoreConformance,
} from "@tessera/testkit";

describeUsageStoreConformance("InMemoryGrantUsageStore", {
  open: async () => ({ store: new InMemoryGrantUsageStore(), close: async () => {} }),
});

describeGrantStoreConformance("InMemoryGrantStore", {
  open: async () => ({ store: new InMemoryGrantStore(), close: async () => {} }),
});

describeAuditSinkConformance("InMemoryAuditSink", {
  open: async () => ({ store: new InMemoryAuditSink(), close: async () => {} }),
});

describeClaimStoreConformance("InMemoryClaimStore", {
  open: async () => {
    const store = new InMemoryClaimStore();
    return { store, close: () => store.close() };
  },
});

describeActLedgerConformance("composeActLedger over the in-memory ports", {
  open: async () => {
    const claims = new InMemoryClaimStore();
    const usage = new InMemoryGrantUsageStore();
    const audit = new InMemoryAuditSink();
    const acts = composeActLedger({ claims, usage, audit });
    return { store: { acts, claims, usage, audit }, close: () => claims.close() };
  },
});
