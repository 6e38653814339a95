/**
 * The suites must catch broken stores, or they prove nothing. Each store below is correct
 * except for one deliberate flaw, and declares the cases that flaw must fail as
 * `knownFailures` (run as `it.fails`): if a suite ever stops catching the flaw, the case
 * passes and this file fails. Every other case must still pass against the flawed store.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { InMemoryClaimStore } from "@tessera/a2ui";
import type {
  AuditEvent,
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  ConsumeResult,
  Grant,
  GrantInput,
  GrantStore,
  GrantUsageStore,
  ReadableAuditSink,
  ReleaseResult,
  StoredClaim,
} from "@tessera/core";
import { TesseraError } from "@tessera/core";
import {
  type AuditFilter,
  type AuditPageOptions,
  auditStreamOf,
  type ChainHead,
  checkAuditFilter,
  checkClaimKey,
  checkId,
  checkMaxUses,
  checkPageSize,
  checkReceipt,
  checkRecord,
  checkRevocationInstant,
  checkSession,
  EMPTY_HEAD,
  linkAuditEvent,
  parseAuditEvent,
  parseGrantInput,
} from "@tessera/core/store-kit";
import {
  describeAuditSinkConformance,
  describeClaimStoreConformance,
  describeGateWorkersConformance,
  describeGrantStoreConformance,
  describeUsageStoreConformance,
} from "@tessera/testkit";

const pause = () => new Promise<void>((resolve) => setImmediate(resolve));
const pairKey = (a: string, b: string) => JSON.stringify([a, b]);

class UsageStore implements GrantUsageStore {
  readonly #used = new Map<string, number>();
  constructor(
    private readonly flaw: "none" | "yields-between-read-and-write" | "joins-keys-with-colon",
  ) {}

  #key(namespaceId: string, grantId: string): string {
    return this.flaw === "joins-keys-with-colon"
      ? `${namespaceId}:${grantId}`
      : pairKey(namespaceId, grantId);
  }

  // The input checks every store shares (store-kit): each store here differs by its flaw only.
  async getUsage(namespaceId: string, grantId: string): Promise<number> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    return this.#used.get(this.#key(namespaceId, grantId)) ?? 0;
  }

  async tryConsume(namespaceId: string, grantId: string, maxUses: number): Promise<ConsumeResult> {
    return this.tryConsumeMany(namespaceId, grantId, 1, maxUses);
  }

  async tryConsumeMany(
    namespaceId: string,
    grantId: string,
    count: number,
    maxUses: number,
  ): Promise<ConsumeResult> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkMaxUses(count);
    checkMaxUses(maxUses);
    const key = this.#key(namespaceId, grantId);
    const used = this.#used.get(key) ?? 0;
    if (this.flaw === "yields-between-read-and-write") await pause();
    if (used + count > maxUses) return { consumed: false, used };
    this.#used.set(key, used + count);
    return { consumed: true, used: used + count };
  }

  async release(namespaceId: string, grantId: string): Promise<ReleaseResult> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    const key = this.#key(namespaceId, grantId);
    const used = this.#used.get(key) ?? 0;
    if (this.flaw === "yields-between-read-and-write") await pause();
    if (used === 0) return { released: false, used: 0 };
    this.#used.set(key, used - 1);
    return { released: true, used: used - 1 };
  }
}

class ClaimMap implements ClaimStore {
  readonly #claims = new Map<string, StoredClaim>();
  constructor(private readonly flaw: "yields-between-check-and-insert" | "last-writer-wins") {}

  async claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    checkClaimKey(key);
    checkRecord(record);
    const id = pairKey(key.session, key.functionCallId);
    const existing = this.#claims.get(id);
    if (this.flaw === "yields-between-check-and-insert") await pause();
    const stored = { session: key.session, functionCallId: key.functionCallId, ...record };
    if (existing && this.flaw === "last-writer-wins") {
      this.#claims.set(id, stored);
      return { status: "already_claimed", existing: stored };
    }
    if (existing) return { status: "already_claimed", existing };
    this.#claims.set(id, stored);
    return { status: "claimed" };
  }

  async settle(key: ClaimKey, receipt: ClaimReceipt): Promise<void> {
    checkClaimKey(key);
    checkReceipt(receipt);
    const id = pairKey(key.session, key.functionCallId);
    const existing = this.#claims.get(id);
    if (!existing) throw new TesseraError("invalid_input", "settle: no such claim");
    if (!existing.receipt) this.#claims.set(id, { ...existing, receipt: { ...receipt } });
  }

  async get(key: ClaimKey): Promise<StoredClaim | undefined> {
    checkClaimKey(key);
    return this.#claims.get(pairKey(key.session, key.functionCallId));
  }

  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    checkSession(session, true);
    return [...this.#claims.values()]
      .filter((claim) => !claim.receipt && (session === undefined || claim.session === session))
      .sort((a, b) => a.claimedAt - b.claimedAt);
  }

  async endSession(session: string): Promise<void> {
    checkSession(session);
    for (const [id, claim] of this.#claims) if (claim.session === session) this.#claims.delete(id);
  }

  async close(): Promise<void> {}
}

class GrantMap implements GrantStore {
  readonly #grants = new Map<string, Grant>();

  async add(input: GrantInput): Promise<Grant> {
    const grant = parseGrantInput(input);
    this.#grants.set(pairKey(grant.namespaceId, grant.id), grant);
    return grant;
  }

  /** The flaw: says a grant was revoked even when there was none to revoke. */
  async revoke(namespaceId: string, grantId: string, at = new Date()): Promise<boolean> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkRevocationInstant(at);
    const key = pairKey(namespaceId, grantId);
    const grant = this.#grants.get(key);
    if (grant) this.#grants.set(key, { ...grant, revokedAt: at.toISOString() });
    return true;
  }

  async listGrants(namespaceId: string, subject: string): Promise<readonly unknown[]> {
    checkId(subject, "subject");
    return (await this.listNamespace(namespaceId)).filter((grant) => grant.subject === subject);
  }

  async listNamespace(namespaceId: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    return [...this.#grants.values()].filter((grant) => grant.namespaceId === namespaceId);
  }
}

/** The flaw: answers newest first. */
type AuditFlaw =
  | "none"
  | "newest-first"
  | "yields-between-head-and-append"
  | "one-stream-for-all"
  | "keeps-the-writer-links"
  | "ignores-newest"
  | "pages-repeat-an-event"
  | "pages-grow-while-read";

class ChainedAudit implements ReadableAuditSink {
  readonly #events: string[] = [];
  readonly #heads = new Map<string, ChainHead>();
  constructor(private readonly flaw: AuditFlaw) {}

  async append(input: AuditEvent): Promise<void> {
    const event = parseAuditEvent(input);
    const stream = this.flaw === "one-stream-for-all" ? "" : auditStreamOf(event);
    const head = this.#heads.get(stream) ?? EMPTY_HEAD;
    if (this.flaw === "yields-between-head-and-append") await pause();
    const linked =
      this.flaw === "keeps-the-writer-links" && event.seq !== undefined
        ? event
        : linkAuditEvent(event, head);
    this.#heads.set(stream, { seq: linked.seq ?? 0, hash: linked.hash ?? "" });
    this.#events.push(JSON.stringify(linked));
  }

  async read(filter: AuditFilter = {}) {
    checkAuditFilter(filter);
    const events = this.#events
      .map((json) => JSON.parse(json) as AuditEvent)
      .filter((e) => filter.callId === undefined || e.callId === filter.callId)
      .filter((e) => filter.traceId === undefined || e.traceId === filter.traceId);
    if (this.flaw === "newest-first") events.reverse();
    if (filter.limit === undefined) return events;
    const newest = filter.newest === true && this.flaw !== "ignores-newest";
    return newest ? events.slice(events.length - filter.limit) : events.slice(0, filter.limit);
  }

  async *readPages(options: AuditPageOptions = {}): AsyncGenerator<readonly AuditEvent[]> {
    const pageSize = checkPageSize(options);
    // Through `read`, so that every other flaw shows in the pages too.
    const events = [...(await this.read())];
    // Paging with ">=" instead of ">": each page starts again at the last one's last event.
    const step = this.flaw === "pages-repeat-an-event" ? Math.max(1, pageSize - 1) : pageSize;
    for (let from = 0; from < events.length; from += step) {
      yield events.slice(from, from + pageSize);
      // No end fixed at the start: what was appended meanwhile is read as well.
      if (this.flaw === "pages-grow-while-read")
        events.push(...(await this.read()).slice(events.length));
    }
  }
}

const inMemory = <S>(make: () => S) => ({
  open: async () => ({ store: make(), close: async () => {} }),
});

describeUsageStoreConformance(
  "reference usage store (no flaw)",
  inMemory(() => new UsageStore("none")),
);

describeUsageStoreConformance("usage store that yields between read and write", {
  ...inMemory(() => new UsageStore("yields-between-read-and-write")),
  knownFailures: [
    "64 concurrent callers in one process",
    "64 concurrent carves and spends",
    "64 concurrent releases",
  ],
});

describeUsageStoreConformance("usage store that joins keys with a colon", {
  ...inMemory(() => new UsageStore("joins-keys-with-colon")),
  knownFailures: ["hostile namespace and grant IDs are counted apart"],
});

const RACY_FILE_STORE = fileURLToPath(
  new URL("./fixtures/racy-file-usage-store.mjs", import.meta.url),
);

describeUsageStoreConformance("file usage store without a lock", {
  open: async () => {
    const dir = mkdtempSync(join(tmpdir(), "tessera-racy-"));
    const path = join(dir, "counts.json");
    const { openRacyFileUsageStore } = (await import(RACY_FILE_STORE)) as {
      openRacyFileUsageStore(path: string): GrantUsageStore;
    };
    return {
      store: openRacyFileUsageStore(path),
      path,
      close: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
  processSpec: ({ path }) => ({
    module: RACY_FILE_STORE,
    exportName: "openRacyFileUsageStore",
    arg: path,
  }),
  knownFailures: [
    "64 concurrent callers in one process",
    "64 concurrent callers on 64 grants",
    "8 OS processes x 1000 consumes",
    "64 concurrent carves and spends",
    "64 concurrent releases",
    "8 OS processes x 4 rounds of carves",
  ],
});

describeClaimStoreConformance("claim store that yields between check and insert", {
  ...inMemory(() => new ClaimMap("yields-between-check-and-insert")),
  knownFailures: ["64 concurrent claims of one key"],
});

describeClaimStoreConformance("claim store where the last writer wins", {
  ...inMemory(() => new ClaimMap("last-writer-wins")),
  knownFailures: [
    "claims once; a second claim is refused and carries the existing record",
    "settle records the receipt",
    "64 concurrent claims of one key",
  ],
});

const PROCESS_MEMORY_CLAIMS = fileURLToPath(
  new URL("./fixtures/process-memory-claim-store.mjs", import.meta.url),
);

// Every gate worker believes it was first: each case must see the extra callbacks (or, after
// a kill -9, the claim missing from every other process) and fail.
describeGateWorkersConformance("claims kept in each process's own memory", {
  open: async () => {
    const store = new InMemoryClaimStore();
    return { store, close: () => store.close() };
  },
  processSpec: () => ({
    module: PROCESS_MEMORY_CLAIMS,
    exportName: "openProcessMemoryClaimStore",
    arg: null,
  }),
  knownFailures: [
    "4 OS processes, one session, one call ID",
    "two trusted sessions may use the same call ID",
    "a worker killed between claim and callback",
  ],
});

describeGrantStoreConformance("grant store whose revoke always says true", {
  ...inMemory(() => new GrantMap()),
  knownFailures: ["revoke marks the grant in that namespace only"],
});

describeAuditSinkConformance(
  "reference audit sink (no flaw)",
  inMemory(() => new ChainedAudit("none")),
);

// Reversed, every chain reads as reordered: each case that verifies the trail fails too.
describeAuditSinkConformance("audit sink that answers newest first", {
  ...inMemory(() => new ChainedAudit("newest-first")),
  knownFailures: [
    "reads back every event in append order",
    "every event read back carries seq, prev and hash",
    "each namespace is its own stream",
    "only the sink links",
    "filters by callId and traceId; a limit keeps the first events",
    "newest with a limit keeps the last events",
    "hostile and oversize fields",
    "64 concurrent appends are all kept, in one chain per stream",
    "readPages is the trail as it stood when the first page was read",
  ],
});

// Paged by ">=" on the last key read: verify would see every page's first event twice.
describeAuditSinkConformance("audit sink whose pages repeat an event", {
  ...inMemory(() => new ChainedAudit("pages-repeat-an-event")),
  knownFailures: [
    "readPages gives the whole trail in order",
    "readPages is the trail as it stood when the first page was read",
  ],
});

// Pages with no end fixed at the start: a reader of a busy trail might never finish.
describeAuditSinkConformance("audit sink whose pages take in events appended while read", {
  ...inMemory(() => new ChainedAudit("pages-grow-while-read")),
  knownFailures: ["readPages is the trail as it stood when the first page was read"],
});

// A sink written before `newest`: a tail would show the oldest events as if they were the last.
describeAuditSinkConformance("audit sink that ignores newest", {
  ...inMemory(() => new ChainedAudit("ignores-newest")),
  knownFailures: ["newest with a limit keeps the last events"],
});

// Two appends read the same head: two events at one position, a fork in the chain.
describeAuditSinkConformance("audit sink that yields between reading the head and appending", {
  ...inMemory(() => new ChainedAudit("yields-between-head-and-append")),
  knownFailures: ["64 concurrent appends are all kept, in one chain per stream"],
});

describeAuditSinkConformance("audit sink that links every namespace into one stream", {
  ...inMemory(() => new ChainedAudit("one-stream-for-all")),
  knownFailures: [
    "each namespace is its own stream",
    "hostile and oversize fields",
    "64 concurrent appends are all kept, in one chain per stream",
  ],
});

describeAuditSinkConformance("audit sink that keeps chain fields the writer passed", {
  ...inMemory(() => new ChainedAudit("keeps-the-writer-links")),
  knownFailures: ["only the sink links"],
});
