/**
 * The audit hash chain against a real Redis: XADD cannot rewrite a stream entry, so an
 * attacker with server access rewrites the whole stream (reads every entry, deletes the key,
 * adds the entries back changed, rebuilds the index lists); the chain read back through the sink shows each edit,
 * deletion, insertion and reordering, at the right position. Entries written before the
 * chain read back as the unchained start of their stream.
 */
import { verifyAuditChain } from "@tessera/core";
import { storageDigest } from "@tessera/core/store-kit";
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

/**
 * Replaces the stream's entries with `change` applied to their JSON, in order. Re-added, the
 * entries take new IDs, so the call and trace index lists are rebuilt for them too, as a
 * thorough attacker would: left pointing at the old IDs they are a break of their own
 * (`misindexed`, see audit-index-tamper.test.ts), found before the edit these cases look for.
 */
async function rewrite(prefix: string, change: (entries: string[]) => void): Promise<void> {
  const key = `${prefix}audit`;
  await admin(url as string, async (redis) => {
    const entries = (await redis.xrange(key, "-", "+")).map(([, fields]) => fields[1] as string);
    change(entries);
    await redis.del(key);
    const lists = [
      ...(await redis.keys(`${prefix}audit-call:*`)),
      ...(await redis.keys(`${prefix}audit-trace:*`)),
    ];
    if (lists.length > 0) await redis.del(...lists);
    for (const json of entries) {
      const id = (await redis.xadd(key, "*", "e", json)) as string;
      let event: unknown;
      try {
        event = JSON.parse(json);
      } catch {
        continue; // text that is not JSON is filed under no call
      }
      const { callId, traceId } = (event ?? {}) as { callId?: unknown; traceId?: unknown };
      if (typeof callId === "string") {
        await redis.rpush(`${prefix}audit-call:${storageDigest(callId)}`, id);
      }
      if (typeof traceId === "string") {
        await redis.rpush(`${prefix}audit-trace:${storageDigest(traceId)}`, id);
      }
    }
  });
}

if (url) {
  describeAuditTamperCases("Redis", async () => {
    const opened = await openTestStores(url);
    const { prefix } = opened;
    return {
      store: opened.stores.audit,
      replace: (index, json) => rewrite(prefix, (entries) => entries.splice(index, 1, json)),
      remove: (index) => rewrite(prefix, (entries) => entries.splice(index, 1)),
      insertBefore: (index, json) => rewrite(prefix, (entries) => entries.splice(index, 0, json)),
      swap: (index) =>
        rewrite(prefix, (entries) => {
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
