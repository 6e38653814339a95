/**
 * A receipt's commit needs no flush of its own (a lost receipt reads in_doubt): settles run
 * with synchronous_commit off for their own transaction, claims keep the server's setting.
 * A trigger on the claims table records the setting each writing transaction ran under.
 */
import { serviceUrl } from "@tessera/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { admin, openTestStores, type TestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");
const suite = url ? describe : describe.skip;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Stores whose claims table logs `synchronous_commit` for every row written, in order. */
async function watched(): Promise<{ test: TestStores; log: () => Promise<string[]> }> {
  const test = await openTestStores(url as string);
  cleanups.push(() => test.close());
  const s = `"${test.schema}"`;
  await admin(
    url as string,
    `CREATE TABLE ${s}.sync_log (n serial PRIMARY KEY, op text, setting text);
     CREATE FUNCTION ${s}.log_sync() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO ${s}.sync_log (op, setting)
           VALUES (TG_OP, current_setting('synchronous_commit'));
         RETURN NULL;
       END $$;
     CREATE TRIGGER log_sync AFTER INSERT OR UPDATE ON ${s}.claims
       FOR EACH ROW EXECUTE FUNCTION ${s}.log_sync();`,
  );
  const log = async () =>
    (
      await admin<{ op: string; setting: string }>(
        url as string,
        `SELECT op, setting FROM ${s}.sync_log ORDER BY n`,
      )
    ).map((row) => `${row.op}:${row.setting}`);
  return { test, log };
}

const record = (tag: string) => ({ bodyHash: tag.padEnd(64, "0"), claimedAt: 1, worker: tag });
const key = (id: string) => ({ session: "s", functionCallId: id });
const receipt = { status: "dispatched", settledAt: 2 } as const;

suite("postgres receipt commits", () => {
  it("a settle commits with synchronous_commit off; the claim after it keeps the server's", async () => {
    const { test, log } = await watched();
    const claims = test.stores.claims;
    const [server] = await admin<{ setting: string }>(
      url as string,
      "SELECT current_setting('synchronous_commit') AS setting",
    );
    expect(server?.setting).not.toBe("off");
    await claims.claim(key("a"), record("a"));
    await claims.settle(key("a"), receipt);
    // Same pool, likely the same connection: the settle's setting must not outlive it.
    await claims.claim(key("b"), record("b"));
    expect(await log()).toEqual([
      `INSERT:${server?.setting}`,
      "UPDATE:off",
      `INSERT:${server?.setting}`,
    ]);
    expect((await claims.get(key("a")))?.receipt).toEqual(receipt);
  });

  it("a batch of settles commits with it off, and claims in flight beside it keep theirs", async () => {
    const { test, log } = await watched();
    const claims = test.stores.claims;
    const ids = Array.from({ length: 16 }, (_, i) => `k${i}`);
    await Promise.all(ids.map((id) => claims.claim(key(id), record(id))));
    const before = (await log()).length;
    await Promise.all([
      ...ids.map((id) => claims.settle(key(id), receipt)),
      ...ids.map((id) => claims.claim(key(`new-${id}`), record(id))),
    ]);
    const after = (await log()).slice(before);
    expect(after.filter((entry) => entry.startsWith("UPDATE:"))).toEqual(
      ids.map(() => "UPDATE:off"),
    );
    expect(after.filter((entry) => entry.startsWith("INSERT:"))).toHaveLength(16);
    expect(after.filter((entry) => entry.startsWith("INSERT:") && entry.endsWith(":off"))).toEqual(
      [],
    );
    for (const id of ids) expect((await claims.get(key(id)))?.receipt).toEqual(receipt);
  });
});
