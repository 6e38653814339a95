import { spawn } from "node:child_process";
import {
  type ClaimReader,
  type ClaimStore,
  type Closable,
  type GrantStore,
  type GrantUsageStore,
  openAuditReader,
  openClaimReader,
  openStores,
  type ReadableAuditSink,
  type StoreBundle,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { auditEvent } from "./audit-fixtures.js";
import { expectClosedStoresRefuse } from "./closed-stores.js";
import { errorCode } from "./errors.js";

/** What every backend package exports to be opened by URL. */
export interface BackendOpeners {
  openStores(url: string): Promise<StoreBundle>;
  openClaimStore(url: string): Promise<ClaimStore>;
  openUsageStore(url: string): Promise<Closable<GrantUsageStore>>;
  openGrantStore(url: string): Promise<Closable<GrantStore>>;
  openAuditSink(url: string): Promise<Closable<ReadableAuditSink>>;
  openAuditReader(url: string): Promise<Closable<ReadableAuditSink>>;
  openClaimReader(url: string): Promise<ClaimReader>;
}

export interface BundleFactory {
  /** The backend package's module (`import * as backend from "@tessera/sqlite"`). */
  readonly backend: BackendOpeners;
  /** The URL of a fresh, empty store, and how to remove it after the test. */
  fresh(): Promise<{ readonly url: string; remove(): Promise<void> }>;
  /**
   * A URL of this backend with nothing behind it (a port nothing listens on, a directory
   * that does not exist). It should carry a password where the scheme has one: the suite
   * checks that no error message repeats it.
   */
  readonly unreachableUrl: string;
}

/** Each opener and the code it fails with when its store cannot be reached. */
const OPENERS = [
  ["openStores", "store_unavailable"],
  ["openClaimStore", "claim_store_unavailable"],
  ["openUsageStore", "usage_store_unavailable"],
  ["openGrantStore", "grant_store_unavailable"],
  ["openAuditSink", "audit_unavailable"],
] as const;

async function failureOf(action: () => Promise<unknown>): Promise<Error> {
  try {
    const opened = (await action()) as { close?: () => Promise<void> };
    await opened.close?.();
  } catch (error) {
    if (error instanceof Error) return error;
    throw error;
  }
  return expect.fail("expected the open to fail, but it resolved");
}

/**
 * The child of the exit case: opens the bundle by URL through core (which loads the backend),
 * uses every port, closes the claim store only, and says so.
 */
const BUNDLE_CHILD = `
import { openStores } from "@tessera/core";
const stores = await openStores(process.env.TESSERA_BUNDLE_URL);
await stores.usage.tryConsume("ns", "g", 1);
await stores.grants.listNamespace("ns");
await stores.audit.read();
await stores.claims.listInDoubt("s");
await stores.claims.close();
console.log("claims closed");`;

/** How soon after its last line the child must have exited (PostgreSQL's idle timeout is 10 s). */
const EXIT_WITHIN_MS = 5_000;
/** After this the child is killed and the case fails: it was never going to exit. */
const GIVE_UP_MS = 30_000;

/** Runs `source` as an ES module in a child Node process; resolves once it exits (or is killed). */
function runChild(
  url: string,
  source: string,
): Promise<{ code: number | null; output: string; afterDoneMs: number }> {
  return new Promise((resolve, reject) => {
    // Run from the working directory, so that "@tessera/core" resolves as the tests' does.
    const child = spawn(process.execPath, ["--input-type=module", "-e", source], {
      env: { ...process.env, TESSERA_BUNDLE_URL: url },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let doneAt = Number.NaN;
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (Number.isNaN(doneAt) && output.includes("claims closed")) doneAt = Date.now();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const killer = setTimeout(() => child.kill("SIGKILL"), GIVE_UP_MS);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(killer);
      resolve({ code, output, afterDoneMs: Date.now() - doneAt });
    });
  });
}

/** Options every backend reads the same way, each with a value none of them accepts. */
const BAD_OPTIONS = [["selfTest", "maybe"]] as const;

/**
 * The `openStores(url)` contract every backend shares: core's `openStores` reaches the
 * backend by its URL and hands back one `StoreBundle`; a bundle's claim store closes alone;
 * a store that cannot be reached fails each opener with that opener's code, in one message
 * shape, with the driver's error as `cause` and no password in the text; an option value
 * the backend refuses is `invalid_config`. Once per backend these drifted apart.
 */
export function describeStoreBundleConformance(name: string, factory: BundleFactory): void {
  describe(`StoreBundle conformance: ${name}`, () => {
    it("core's openStores(url) opens this backend's bundle, whose close() closes every port", async () => {
      const { url, remove } = await factory.fresh();
      try {
        const stores = await openStores(url);
        expect(Object.isFrozen(stores)).toBe(true);
        expect(Object.keys(stores).sort()).toEqual([
          "acts",
          "audit",
          "claims",
          "close",
          "grants",
          "usage",
        ]);
        expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
        await stores.close();
        await expectClosedStoresRefuse(stores);
        // The backend's own openStores sees what core's wrote: one store, two doors.
        const again = await factory.backend.openStores(url);
        expect(await again.usage.getUsage("ns", "g")).toBe(1);
        await again.close();
      } finally {
        await remove();
      }
    });

    it("core's openAuditReader(url) reads what the bundle wrote; where no store is, it says so", async () => {
      const { url, remove } = await factory.fresh();
      try {
        // Nothing there yet: the reader says so (each backend's own test checks it wrote nothing).
        expect(errorCode(await failureOf(() => openAuditReader(url)))).toBe("schema_unavailable");
        const stores = await openStores(url);
        for (let i = 0; i < 3; i++) await stores.audit.append(auditEvent(i));
        const written = await stores.audit.read();
        await stores.close();
        for (const open of [openAuditReader, factory.backend.openAuditReader]) {
          const reader = await open(url);
          expect(await reader.read()).toEqual(written);
          await reader.close();
        }
      } finally {
        await remove();
      }
    });

    it("core's openClaimReader(url) lists what the bundle claimed; where no store is, it says so", async () => {
      const { url, remove } = await factory.fresh();
      try {
        expect(errorCode(await failureOf(() => openClaimReader(url)))).toBe("schema_unavailable");
        const stores = await openStores(url);
        const key = { session: "s", functionCallId: "in-doubt" };
        await stores.claims.claim(key, { bodyHash: "h", claimedAt: 1 });
        await stores.close();
        for (const open of [openClaimReader, factory.backend.openClaimReader]) {
          const reader = await open(url);
          expect((await reader.listInDoubt()).map((claim) => claim.functionCallId)).toEqual([
            "in-doubt",
          ]);
          expect(await reader.get(key)).toMatchObject({ bodyHash: "h", claimedAt: 1 });
          expect(reader).not.toHaveProperty("claim");
          await reader.close();
        }
      } finally {
        await remove();
      }
    });

    it("closing a bundle's claim store closes that port only: the bundle owns the connection", async () => {
      const { url, remove } = await factory.fresh();
      try {
        const stores = await factory.backend.openStores(url);
        await stores.claims.close();
        expect(errorCode(await failureOf(() => stores.claims.listInDoubt()))).toBe(
          "claim_store_unavailable",
        );
        expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
        expect(await stores.grants.listNamespace("ns")).toEqual([]);
        expect(await stores.audit.read()).toEqual([]);
        await stores.close();
      } finally {
        await remove();
      }
    });

    it("a process that opens the bundle and closes only its claim store exits on its own", async () => {
      const { url, remove } = await factory.fresh();
      try {
        // Every port used, so every connection the bundle opens is open; then only the claim
        // store closed. An idle connection must not hold the process (it did on Redis, for
        // good; PostgreSQL let go only when its idle timeout fired, 10 s later).
        const run = await runChild(url, BUNDLE_CHILD);
        expect(run.output).toContain("claims closed");
        expect(run.code).toBe(0);
        expect(run.afterDoneMs).toBeLessThan(EXIT_WITHIN_MS);
        // The same process closing the whole bundle exits too.
        const closed = await runChild(url, `${BUNDLE_CHILD}\nawait stores.close();`);
        expect(closed.code).toBe(0);
        expect(closed.afterDoneMs).toBeLessThan(EXIT_WITHIN_MS);
      } finally {
        await remove();
      }
    });

    it("a store it cannot reach fails each opener with its own code, one message shape, the cause kept", async () => {
      const secret = new URL(factory.unreachableUrl, "file:").password;
      for (const [opener, code] of OPENERS) {
        const error = await failureOf(() => factory.backend[opener](factory.unreachableUrl));
        expect(errorCode(error), opener).toBe(code);
        expect(error.message, opener).toMatch(/^could not open the \w+ store \(.+\)$/);
        expect(error.cause, opener).toBeDefined();
        expect(error.message, opener).not.toContain(factory.unreachableUrl);
        if (secret !== "") expect(error.message, opener).not.toContain(secret);
      }
    });

    it("an option value it refuses is invalid_config from every opener and from core's openStores", async () => {
      const { url, remove } = await factory.fresh();
      try {
        for (const [name, value] of BAD_OPTIONS) {
          const bad = `${url}${url.includes("?") ? "&" : "?"}${name}=${value}`;
          for (const [opener] of OPENERS) {
            const error = await failureOf(() => factory.backend[opener](bad));
            expect(errorCode(error), `${opener} ${name}=${value}`).toBe("invalid_config");
          }
          expect(errorCode(await failureOf(() => openStores(bad)))).toBe("invalid_config");
          const reading = await failureOf(() => factory.backend.openAuditReader(bad));
          expect(errorCode(reading), `openAuditReader ${name}=${value}`).toBe("invalid_config");
          const listing = await failureOf(() => factory.backend.openClaimReader(bad));
          expect(errorCode(listing), `openClaimReader ${name}=${value}`).toBe("invalid_config");
        }
      } finally {
        await remove();
      }
    });
  });
}
