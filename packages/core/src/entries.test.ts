import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import * as main from "./index.js";
import * as storeKit from "./store-kit.js";
import * as testing from "./testing.js";

/** Runtime names the main entry keeps for one release only, each now at home in a subpath. */
const DEPRECATED: Record<string, unknown> = {
  ManualClock: testing.ManualClock,
  fixedClock: testing.fixedClock,
  ScriptedDriver: testing.ScriptedDriver,
  checkClaimKey: storeKit.checkClaimKey,
  checkRecord: storeKit.checkRecord,
  checkReceipt: storeKit.checkReceipt,
  claimKeyDigest: storeKit.claimKeyDigest,
  storageDigest: storeKit.storageDigest,
  uniqueStorageDigest: storeKit.uniqueStorageDigest,
  redact: storeKit.redact,
  InMemoryGrantSource: main.InMemoryGrantStore,
};

describe("the entry points", () => {
  it("the main entry holds what a host wires and calls (a new name is a decision)", () => {
    const host = Object.keys(main).filter((name) => !(name in DEPRECATED));
    expect(host.sort()).toEqual(
      [
        "A2UI_CALL_ACTION",
        "A2UI_NAMESPACE",
        "AUDIT_REASONS",
        "AccessContextSchema",
        "AuditEventSchema",
        "CALLER_CODES",
        "CapabilitySchema",
        "ERROR_CATALOG",
        "AuditTrailWalker",
        "ERROR_CODES",
        "GrantSchema",
        "InMemoryAuditSink",
        "InMemoryClaimStore",
        "InMemoryGrantStore",
        "InMemoryGrantUsageStore",
        "InProcessTransport",
        "JsonlAuditSink",
        "MESSAGE_NAMESPACE",
        "MESSAGE_SEND_ACTION",
        "MAX_DELEGATION_DEPTH",
        "RECEIPT_STATUSES",
        "TesseraError",
        "TurnExecutor",
        "UnreadableAuditEvent",
        "a2uiFunctionCapability",
        "a2uiFunctionResource",
        "addDerivedGrant",
        "carveDelegatedUses",
        "createKernel",
        "decidedBy",
        "deriveGrant",
        "explain",
        "findSharedBudgets",
        "isTesseraError",
        "isPrintable",
        "issueFanoutTickets",
        "messageResource",
        "messageSendCapability",
        "openAuditReader",
        "openClaimReader",
        "openStores",
        "readAuditPages",
        "releaseUse",
        "signAuditCheckpoint",
        "storePackageFor",
        "systemClock",
        "unreadableTrail",
        "verifyAuditChain",
        "verifyAuditCheckpoint",
      ].sort(),
    );
  });

  it("keeps every moved name as an alias of the very same value", () => {
    const exported = new Map<string, unknown>(Object.entries(main));
    for (const [name, value] of Object.entries(DEPRECATED)) {
      expect(exported.get(name), name).toBe(value);
    }
    expect(new main.ManualClock(5)).toBeInstanceOf(testing.ManualClock);
  });

  it("testing holds the clocks and the scripted driver; store-kit the store author's helpers", () => {
    expect(Object.keys(testing).sort()).toEqual(["ManualClock", "ScriptedDriver", "fixedClock"]);
    expect(Object.keys(storeKit).sort()).toEqual(
      [
        "AuditAppendQueue",
        "EMPTY_HEAD",
        "GENESIS_HASH",
        "WriteWindow",
        "AUDIT_LINK_DOMAIN",
        "auditContentDigest",
        "auditHolds",
        "auditEventHash",
        "auditHashMatches",
        "auditLinkHash",
        "auditStreamOf",
        "boundedCanonicalJson",
        "MAX_JSON_DEPTH",
        "withinJsonDepth",
        "MAX_ANSWER_BYTES",
        "checkAct",
        "checkVersions",
        "checkWithdrawal",
        "checkAuditFilter",
        "checkPageSize",
        "checkCarve",
        "checkClaimKey",
        "checkId",
        "checkMaxUses",
        "checkReceipt",
        "checkRecord",
        "checkRevocationInstant",
        "checkSession",
        "checkStoreUrlQuery",
        "claimKeyDigest",
        "composeActLedger",
        "deniedAnswerOf",
        "flagOption",
        "linkAuditEvent",
        "misindexedAuditEvent",
        "observeActLedger",
        "octalMode",
        "openFailure",
        "parseAuditEvent",
        "parseGrantInput",
        "parseStoredAuditEvent",
        "readGuardedFile",
        "readPrivateFile",
        "redact",
        "serializeAnswer",
        "sqliteUrlOf",
        "storageDigest",
        "storeOpeners",
        "uniqueStorageDigest",
        "wrapActLedger",
        "WRITABLE_BY_OTHERS",
      ].sort(),
    );
  });
});

describe("openStores(url): one seam for every backend", () => {
  it("names the package for each scheme, and refuses any other", () => {
    expect(main.storePackageFor("sqlite:./x.db")).toBe("@tessera/sqlite");
    expect(main.storePackageFor("SQLite::memory:")).toBe("@tessera/sqlite");
    expect(main.storePackageFor("postgres://h/db")).toBe("@tessera/postgres");
    expect(main.storePackageFor("postgresql://h/db")).toBe("@tessera/postgres");
    expect(main.storePackageFor("redis://h")).toBe("@tessera/redis");
    expect(main.storePackageFor("rediss://h")).toBe("@tessera/redis");
    for (const url of ["mysql://h/db", "./tessera.db", "", "sqlite", 42 as unknown as string]) {
      expect(() => main.storePackageFor(url)).toThrow(
        expect.objectContaining({ code: "unsupported_store_url" }),
      );
    }
  });

  it("refuses an unknown scheme before loading anything", async () => {
    await expect(main.openStores("mongodb://h/db")).rejects.toMatchObject({
      code: "unsupported_store_url",
    });
  });

  it("a scheme whose package is not installed is unsupported_store_url naming the package", () => {
    // Core installed alone, as a host that never added a backend has it.
    const root = mkdtempSync(join(tmpdir(), "tessera-core-alone-"));
    try {
      const here = dirname(fileURLToPath(import.meta.url));
      const installed = join(root, "node_modules", "@tessera", "core");
      mkdirSync(installed, { recursive: true });
      cpSync(join(here, "..", "dist"), join(installed, "dist"), { recursive: true });
      cpSync(join(here, "..", "package.json"), join(installed, "package.json"));
      const zod = dirname(createRequire(import.meta.url).resolve("zod/package.json"));
      symlinkSync(zod, join(root, "node_modules", "zod"));
      writeFileSync(
        join(root, "probe.mjs"),
        `import { openStores } from "@tessera/core";
const answers = [];
for (const url of ["sqlite:./t.db", "postgres://h/db", "redis://h"]) {
  try { await openStores(url); answers.push("opened"); }
  catch (error) { answers.push([error.code, error.message]); }
}
console.log(JSON.stringify(answers));`,
      );
      const out = execFileSync(process.execPath, ["probe.mjs"], { cwd: root, encoding: "utf8" });
      const answers = JSON.parse(out) as [string, string][];
      expect(answers.map(([code]) => code)).toEqual([
        "unsupported_store_url",
        "unsupported_store_url",
        "unsupported_store_url",
      ]);
      expect(answers.map(([, message]) => message)).toEqual([
        expect.stringContaining("npm install @tessera/sqlite"),
        expect.stringContaining("npm install @tessera/postgres"),
        expect.stringContaining("npm install @tessera/redis"),
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
