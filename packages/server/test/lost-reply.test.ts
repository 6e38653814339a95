import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ActLedger,
  InProcessTransport,
  openStores,
  type StoreBundle,
  TesseraError,
  verifyAuditChain,
} from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { call, explainCall, principal, ticket } from "./support/service.js";

/**
 * A store reply lost after the act was committed (issue 22), through the service over SQLite:
 * the ledger records the act and then throws, as a store killed between its commit and its
 * reply does. The caller gets 503 and nothing is delivered; the kernel withdraws the act
 * (`drainWrites` gives the withdrawal its attempt), so a retry of the call ID gets the
 * withdrawal's denial, the ticket's use is back, and audit says allowed then act_withdrawn.
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

let stores: StoreBundle;
let server: RunningServer;
let loseNext = false;
const transport = new InProcessTransport({ fallback: async () => ({ reply: "ok" }) });

beforeAll(async () => {
  stores = await openStores(`sqlite:${join(mkdtempSync(join(tmpdir(), "lost-reply-")), "t.db")}`);
  await stores.grants.add(ticket("t-1", "colleague-1"));
  const acts = stores.acts as ActLedger;
  const lossy: ActLedger = {
    record: async (act) => {
      const result = await acts.record(act);
      if (loseNext && act.claim !== undefined) {
        loseNext = false;
        throw new TesseraError("claim_store_unavailable", "the store's reply was lost");
      }
      return result;
    },
    withdraw: (withdrawal) => (acts.withdraw as NonNullable<ActLedger["withdraw"]>)(withdrawal),
  };
  server = await listen({
    stores: { ...stores, acts: lossy },
    principals: [alice.config],
    transport,
    port: 0,
    log: false,
  });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

const body = { recipient: "colleague-1", payload: { q: 1 }, callId: "lost-1" };

describe("a lost store reply, through the service", () => {
  it("answers 503, then every retry gets the withdrawal's denial; the use is back", async () => {
    loseNext = true;
    const first = await call(server.url, "POST", "/v1/messages", { token: alice.token, body });
    expect(first.status).toBe(503);
    expect(transport.delivered).toHaveLength(0);
    // The retry waits on the claim in doubt until the withdrawal settles it (its first
    // attempt runs 50 ms after the failure), then replays the settled answer.
    const retry = await call(server.url, "POST", "/v1/messages", { token: alice.token, body });
    expect(retry).toMatchObject({
      status: 200,
      body: { status: "denied", code: "authority_unavailable" },
    });
    const again = await call(server.url, "POST", "/v1/messages", { token: alice.token, body });
    expect(again.body).toEqual(retry.body);
    expect(transport.delivered).toHaveLength(0);
    expect(await stores.usage.getUsage("team", "t-1")).toBe(0);
    expect(await stores.claims.listInDoubt()).toEqual([]);
    const events = await stores.audit.read({ callId: "lost-1" });
    expect(events.map((e) => `${e.outcome}:${e.reason}:${e.code ?? ""}`)).toEqual([
      "allowed:allowed:",
      "denied:act_withdrawn:authority_unavailable",
    ]);
    expect(verifyAuditChain(await stores.audit.read()).ok).toBe(true);
    const explained = await explainCall(server.url, alice.token, "lost-1");
    expect(explained.body).toMatchObject({
      verdict: "act_withdrawn",
      code: "authority_unavailable",
    });
    // The ticket spends again under a new call ID.
    const fresh = await call(server.url, "POST", "/v1/messages", {
      token: alice.token,
      body: { ...body, callId: "lost-2" },
    });
    expect(fresh.body).toMatchObject({ status: "delivered", grantId: "t-1" });
    expect(transport.delivered).toHaveLength(1);
  });
});
