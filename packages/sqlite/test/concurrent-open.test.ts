/**
 * Eight OS processes open the same new file at the same instant: one migrates, the others
 * wait on BEGIN IMMEDIATE and find the schema current; every one passes its self-test and
 * can work. Run as plain node against the built package, as a host would.
 */
import { SCHEMA_VERSION } from "@tessera/sqlite";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, expect, it } from "vitest";
import { freshFile, runScript } from "./helpers.js";

const SCRIPT = `
import { openStores } from "@tessera/sqlite";
const [url, startAt, index] = process.argv.slice(1);
while (Date.now() < Number(startAt)) {}
const stores = await openStores(url);
const claim = await stores.claims.claim({ session: "open", functionCallId: "shared" }, {
  bodyHash: "b", claimedAt: Date.now(), worker: "p" + index,
});
const used = await stores.usage.tryConsume("ns", "g", 3);
await stores.close();
process.stdout.write(JSON.stringify({ claim: claim.status, consumed: used.consumed }));
`;

function runOpener(url: string, startAt: number, index: number): Promise<string> {
  return runScript(SCRIPT, [url, String(startAt), String(index)]);
}

const file = freshFile();
afterEach(() => file.dispose());

it("8 processes opening a new file at once: one schema, every self-test passes", async () => {
  const url = `sqlite:${file.path}`;
  const startAt = Date.now() + 1500;
  const outputs = await Promise.all(
    Array.from({ length: 8 }, (_, index) => runOpener(url, startAt, index)),
  );
  const results = outputs.map((out) => JSON.parse(out) as { claim: string; consumed: boolean });
  expect(results.filter((r) => r.claim === "claimed")).toHaveLength(1);
  expect(results.filter((r) => r.consumed)).toHaveLength(3);
  const raw = new BetterSqlite3(file.path);
  expect(raw.prepare("SELECT count(*) AS n FROM tessera_schema_version").get()).toEqual({
    n: SCHEMA_VERSION,
  });
  expect(raw.prepare("SELECT used FROM tessera_usage").all()).toEqual([{ used: 3 }]);
  raw.close();
});
