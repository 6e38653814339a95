/**
 * `openAuditReader` against a real server, as an auditor opens it: an ACL user allowed read
 * commands on the prefix's keys and nothing more reads and pages through the trail; the reader
 * writes nothing (no layout version set on an empty prefix); a prefix without a store, or newer
 * than this build, is `schema_unavailable`.
 */
import { randomBytes } from "node:crypto";
import { TesseraError } from "@tessera/core";
import { auditEvent, expectReadOnlyReader, serviceUrl } from "@tessera/testkit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openAuditReader } from "../src/index.js";
import { LAYOUT_VERSION } from "../src/layout.js";
import { admin, freshPrefix, openTestStores, withParams } from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");

if (url) {
  const user = `tessera_auditor_${randomBytes(4).toString("hex")}`;
  const password = randomBytes(12).toString("hex");
  const as = (prefix: string) => {
    const reader = new URL(withParams(url, { prefix }));
    reader.username = user;
    reader.password = password;
    return reader.toString();
  };

  describe("Redis openAuditReader", () => {
    // Read commands and the connection's own (HELLO, CLIENT SETNAME), on test keys only: not
    // INFO, which ioredis's ready check would send (a reader skips it).
    beforeAll(() =>
      admin(url, (redis) =>
        redis.acl(
          "SETUSER",
          user,
          "on",
          `>${password}`,
          "~tessera_test:*",
          "+@read",
          "+@connection",
        ),
      ),
    );
    afterAll(() => admin(url, (redis) => redis.acl("DELUSER", user)));

    it("reads the trail with read commands alone, and writes nothing", async () => {
      const opened = await openTestStores(url);
      const warned = vi.spyOn(console, "warn");
      try {
        for (let i = 0; i < 7; i++) await opened.stores.audit.append(auditEvent(i));
        const whole = await opened.stores.audit.read();
        const reader = await openAuditReader(as(opened.prefix));
        try {
          await expectReadOnlyReader(reader, whole);
        } finally {
          await reader.close();
        }
        expect(await opened.stores.audit.read()).toHaveLength(7);
        // Not even ioredis's "skipping the ready check" on stderr.
        expect(warned).not.toHaveBeenCalled();
      } finally {
        warned.mockRestore();
        await opened.close();
      }
    });

    it("a prefix with no store is schema_unavailable, and nothing is written under it", async () => {
      const prefix = freshPrefix();
      const error = await openAuditReader(withParams(url, { prefix })).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TesseraError);
      expect(error).toMatchObject({ code: "schema_unavailable" });
      const keys = await admin(url, (redis) => redis.keys(`${prefix}*`));
      expect(keys).toEqual([]);
    });

    it("a prefix newer than this build is schema_unavailable", async () => {
      const opened = await openTestStores(url);
      try {
        await admin(url, (redis) =>
          redis.set(`${opened.prefix}layout-version`, String(LAYOUT_VERSION + 1)),
        );
        const error = await openAuditReader(withParams(url, { prefix: opened.prefix })).catch(
          (e: unknown) => e,
        );
        expect(error).toMatchObject({ code: "schema_unavailable" });
      } finally {
        await opened.close();
      }
    });
  });
} else {
  describe("Redis openAuditReader", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set", () => {});
  });
}
