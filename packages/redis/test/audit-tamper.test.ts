/**
 * The audit hash chain against a real Redis: XADD cannot rewrite a stream entry, so an
 * attacker with server access rewrites the whole stream (reads every entry, deletes the key,
 * adds the entries back changed); the chain read back through the sink shows each edit,
 * deletion, insertion and reordering, at the right position. Entries written before the
 * chain read back as the unchained start of their stream.
 */
import { verifyAuditChain } from "@tessera/core";
import { auditEvent, describeAuditTamperCases, serviceUrl } from "@tessera/testkit";
import { describe, expect, it } from "vitest";
import { LAYOUT_VERSION, openStores } from "../src/index.js";
import {
  admin,
  deletePrefix,
  freshPrefix,
  openTestStores,
  withParams,
} from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");

/** Replaces the stream's entries with `change` applied to their JSON, in order. */
async function rewrite(key: string, change: (entries: string[]) => void): Promise<void> {
  await admin(url as string, async (redis) => {
    const entries = (await redis.xrange(key, "-", "+")).map(([, fields]) => fields[1] as string);
    change(entries);
    await redis.del(key);
    for (const json of entries) await redis.xadd(key, "*", "e", json);
  });
}

if (url) {
  describeAuditTamperCases("Redis", async () => {
    const opened = await openTestStores(url);
    const key = `${opened.prefix}audit`;
    return {
      store: opened.stores.audit,
      replace: (index, json) => rewrite(key, (entries) => entries.splice(index, 1, json)),
      remove: (index) => rewrite(key, (entries) => entries.splice(index, 1)),
      insertBefore: (index, json) => rewrite(key, (entries) => entries.splice(index, 0, json)),
      swap: (index) =>
        rewrite(key, (entries) => {
          const [first, second] = entries.splice(index, 2);
          entries.splice(index, 0, second as string, first as string);
        }),
      close: () => opened.close(),
    };
  });

  it("Redis: a prefix at layout version 2 moves to the current one; its entries stay, as the unchained start of their stream", async () => {
    const prefix = freshPrefix();
    try {
      // As the version-2 build left it: the event's JSON, no chain fields, no head.
      await admin(url, async (redis) => {
        await redis.set(`${prefix}layout-version`, "2");
        for (let i = 0; i < 3; i++) {
          const event = auditEvent(i, { namespaceId: "ns" });
          await redis.xadd(`${prefix}audit`, "*", "e", JSON.stringify(event));
        }
      });
      const stores = await openStores(withParams(url, { prefix }));
      try {
        expect(await admin(url, (redis) => redis.get(`${prefix}layout-version`))).toBe(
          String(LAYOUT_VERSION),
        );
        for (let i = 3; i < 6; i++) {
          await stores.audit.append(auditEvent(i, { namespaceId: "ns" }));
        }
        const read = await stores.audit.read();
        expect(read.map((event) => event.seq)).toEqual([undefined, undefined, undefined, 1, 2, 3]);
        const verdict = verifyAuditChain(read);
        expect(verdict.ok).toBe(true);
        expect(verdict.streams).toEqual([
          expect.objectContaining({ stream: "ns", events: 6, unchained: 3 }),
        ]);
      } finally {
        await stores.close();
      }
    } finally {
      await deletePrefix(url, prefix);
    }
  });
} else {
  describe("redis audit tampering", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set", () => {});
  });
}
