import { type AuditEvent, openStores, type StoreBundle, verifyAuditChain } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drive, type Job, plan, type Seen } from "./support/crash-load.js";
import {
  type OwnDatabase,
  postgresBin,
  redisServerBin,
  startPostgres,
  startRedis,
} from "./support/databases.js";
import {
  type ServeProcess,
  serveProcess,
  serviceFiles,
  startReceiver,
} from "./support/processes.js";
import { CATALOG, call, principal } from "./support/service.js";

/**
 * Kill the database, not just the worker (issue 22). Each backend runs on a server this file
 * starts (its own PostgreSQL cluster, its own Redis with AOF `always`), under a real
 * `tessera serve`. Concurrent clients fight over single-use tickets with retry-safe sends
 * (distinct call IDs per ticket, some sent twice at once) and wrong-recipient sends with and
 * without a call ID; a third of the way in, the database is `kill -9`ed, restarted on the same
 * port and data directory, and the clients retry their call IDs. Twice per backend, over one
 * service. Then: nothing spent or delivered twice, no spend without its event, every decision a
 * client received in audit (denials without a call ID: all but those of the write window,
 * counted), and every call ID answered again, or in doubt only when its delivery happened.
 *
 * A reply the database never sent (the act committed, the service heard an error, answered 503
 * and ran nothing: Redis about one crash in five) is withdrawn by the service's kernel once the
 * database is back: its retries get the withdrawal's denial (`authority_unavailable`), audit
 * holds its allowed event then `act_withdrawn`, and its ticket's use is back (issue 22).
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

const ROUNDS = 2;
const TICKETS = 24;
const CALLS_PER_TICKET = 3;
const STRANGERS = 12;
const WORKERS = 12;
/** How long the database stays dead. */
const OUTAGE_MS = 800;
/** How long clients keep retrying once it is back (a call in doubt answers 409 after 5 s). */
const SETTLE_MS = 8_000;
/**
 * How long before the kill a denial without a call ID may have been answered and still be lost:
 * its event was still waiting for the store (window, then queue) when the database died.
 */
const LOST_DENIAL_MAX_AGE_MS = 2_000;
/** How long the last pass retries each call ID. */
const LAST_PASS_MS = 7_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const pg = postgresBin();
const redis = redisServerBin();
const backends = [
  ["PostgreSQL", pg === undefined ? undefined : () => startPostgres(pg), "initdb/pg_ctl"],
  ["Redis", redis === undefined ? undefined : () => startRedis(redis), "redis-server"],
] as const;

for (const [name, start, binaries] of backends) {
  if (start === undefined) {
    if (process.env.CI === "true") {
      it(`kill -9 of ${name} under load`, () => {
        throw new Error(`CI must run this: ${binaries} not found`);
      });
    } else {
      console.warn(`kill-database: ${name} skipped, ${binaries} not found on this machine`);
      describe.skip(`kill -9 of ${name} under load`, () => undefined);
    }
    continue;
  }

  describe(`kill -9 of ${name} under load, restarted on the same data`, () => {
    let db: OwnDatabase;
    let stores: StoreBundle;
    let serve: ServeProcess;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;

    beforeAll(async () => {
      db = await start();
      stores = await openStores(db.url);
      receiver = await startReceiver();
      const recipients = Array.from({ length: ROUNDS }, (_, r) =>
        Array.from({ length: TICKETS }, (_, t) => `r-${r}-${t}`),
      ).flat();
      const files = serviceFiles(receiver.base, [alice.config], recipients, CATALOG);
      serve = await serveProcess(["--store", db.url, ...files]);
    }, 60_000);

    afterAll(async () => {
      try {
        await serve?.stop(3000);
        await receiver?.close();
        await stores?.close();
      } finally {
        await db?.remove();
      }
    }, 30_000);

    const send = async (recipient: string, callId: string | undefined) => {
      const answer = await fetch(`${serve.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${alice.token}` },
        body: JSON.stringify({
          recipient,
          payload: { to: recipient },
          ...(callId ? { callId } : {}),
        }),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
    };

    for (let round = 0; round < ROUNDS; round++) {
      it(`round ${round + 1}: nothing twice, no spend without its event, every answer in audit`, async () => {
        const { tickets, jobs } = plan(String(round), TICKETS, CALLS_PER_TICKET, STRANGERS);
        for (const grant of tickets) await stores.grants.add(grant);

        // The database dies once a third of the clients have their answer.
        let deadline = Date.now() + 60_000;
        let answered = 0;
        const times = { killAt: 0, backAt: 0 };
        let crash: Promise<void> | undefined;
        const onAnswer = () => {
          if (++answered !== Math.floor(jobs.length / 3) || crash !== undefined) return;
          crash = (async () => {
            times.killAt = Date.now();
            await db.kill();
            await sleep(OUTAGE_MS);
            await db.restart();
            times.backAt = Date.now();
            deadline = times.backAt + SETTLE_MS;
          })();
        };
        const seen = await drive(jobs, WORKERS, send, () => deadline, onAnswer);
        await crash;
        expect(times.killAt, "the database was killed mid-load").toBeGreaterThan(0);
        await sleep(300); // answers settled after their replies (≤ 10 ms window) land
        expect(
          serve.child.exitCode ?? serve.child.signalCode,
          serve.output().slice(-4000),
        ).toBeNull();

        const retried = await retryEveryCall(seen);
        const inDoubt = await listInDoubt();
        const events = await withRetry(() => stores.audit.read());
        const figures = await check(round, tickets, seen, retried, inDoubt, events, times);
        console.log(`kill-database ${name} round ${round + 1}: ${JSON.stringify(figures)}`);
        expect(serve.child.exitCode, "tessera serve outlived its database").toBeNull();
      }, 90_000);
    }

    it("the audit chain verifies after the crashes", async () => {
      const events = await withRetry(() => stores.audit.read());
      const verified = verifyAuditChain(events);
      expect(verified.ok, JSON.stringify(verified.ok ? {} : verified.break)).toBe(true);
      expect(verified.events).toBe(events.length);
    }, 30_000);

    /** Every call ID once more, as a client that lost its answer would: answer again, or in doubt. */
    async function retryEveryCall(seen: readonly Seen[]) {
      const callIds = new Map<string, Job>();
      for (const s of seen) if (s.job.callId !== undefined) callIds.set(s.job.callId, s.job);
      const until = Date.now() + LAST_PASS_MS;
      const results = new Map<string, { status: number; body: Record<string, unknown> }>();
      await Promise.all(
        [...callIds.values()].map(async (job) => {
          for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
            const answer = await send(job.recipient, job.callId).catch(() => ({
              status: 0,
              body: {},
            }));
            results.set(job.callId as string, answer);
            if (answer.status === 200 || Date.now() > until) return;
            await sleep(pause);
          }
        }),
      );
      return results;
    }

    async function listInDoubt(): Promise<Set<string>> {
      const listed = await call(serve.url, "GET", "/v1/claims/in-doubt", { token: alice.token });
      expect(listed.status).toBe(200);
      return new Set(
        listed.body.claims.map((c: { functionCallId: string }) => c.functionCallId) as string[],
      );
    }

    async function check(
      round: number,
      tickets: readonly { id: string }[],
      seen: readonly Seen[],
      retried: Map<string, { status: number; body: Record<string, unknown> }>,
      inDoubt: Set<string>,
      events: readonly AuditEvent[],
      times: { killAt: number; backAt: number },
    ) {
      const prefix = `c-${round}-`;
      const deliveries = new Map<string, number>();
      for (const c of receiver.deliveries) deliveries.set(c, (deliveries.get(c) ?? 0) + 1);
      const byCall = new Map<string, AuditEvent[]>();
      for (const e of events) byCall.set(e.callId, [...(byCall.get(e.callId) ?? []), e]);

      // No call delivered twice; no ticket delivered or spent twice; no spend without its event.
      for (const [callId, n] of deliveries)
        expect(n, `deliveries of ${callId}`).toBeLessThanOrEqual(1);
      let spent = 0;
      for (const t of tickets) {
        const recipient = t.id.slice("t-".length);
        const delivered = [...deliveries.keys()].filter((c) =>
          c.startsWith(`c-${recipient.slice(2)}-`),
        );
        expect(delivered.length, `deliveries under ${t.id}`).toBeLessThanOrEqual(1);
        const used = await withRetry(() => stores.usage.getUsage("team", t.id));
        expect(used, `uses of ${t.id}`).toBeLessThanOrEqual(1);
        // A withdrawn act gave its use back: its allowed event is followed by act_withdrawn.
        const allowed = events.filter((e) => e.grantId === t.id && e.outcome === "allowed");
        const withdrawn = events.filter((e) => e.grantId === t.id && e.reason === "act_withdrawn");
        expect(
          allowed.length - withdrawn.length,
          `allowed events of ${t.id} not withdrawn (used ${used})`,
        ).toBe(used);
        spent += used;
      }
      // Every delivery has its allowed event (the act was durable before the effect).
      for (const callId of deliveries.keys()) {
        if (!callId.startsWith(prefix)) continue;
        const allowed = byCall.get(callId)?.filter((e) => e.outcome === "allowed") ?? [];
        expect(allowed.length, `allowed event of delivered ${callId}`).toBe(1);
      }

      // Every decision a client received is in audit.
      let answeredWithId = 0;
      const lostDenials: Seen[] = [];
      let denialsWithoutId = 0;
      for (const s of seen) {
        if (s.answer === undefined) continue;
        if (s.job.callId === undefined) {
          denialsWithoutId++;
          expect(s.answer.status).toBe("denied");
          const label = new RegExp(`/${s.job.recipient}(?![\\w-])`);
          const found = events.some((e) => e.outcome === "denied" && label.test(e.resource ?? ""));
          if (!found) lostDenials.push(s);
          continue;
        }
        answeredWithId++;
        const recorded = byCall.get(s.job.callId) ?? [];
        const outcome = s.answer.status === "delivered" ? "allowed" : "denied";
        expect(
          recorded.filter(
            (e) => e.outcome === outcome && (outcome === "allowed" || e.code === s.answer?.code),
          ),
          `${s.job.callId} answered ${JSON.stringify(s.answer)}; audit ${JSON.stringify(recorded)}`,
        ).toHaveLength(1);
        if (outcome === "allowed") expect(deliveries.get(s.job.callId)).toBe(1);
      }
      // Denials without a call ID are written after their reply: a crash may lose those whose
      // write had not landed yet (the ≤ 10 ms window, then the store's write queue: measured up
      // to ~0.7 s on PostgreSQL under this load, printed as lostDenialAgesMs), never others.
      for (const s of lostDenials) {
        const answeredAt = s.answeredAt ?? 0;
        expect(answeredAt, `lost denial ${s.job.recipient}`).toBeGreaterThanOrEqual(
          times.killAt - LOST_DENIAL_MAX_AGE_MS,
        );
        expect(answeredAt).toBeLessThanOrEqual(times.backAt);
      }

      // No claim blocks its call ID forever: each gets an answer again (the one first given,
      // when a client had it), or stays in doubt only when its delivery may have happened.
      const blocked: string[] = [];
      const doubtful: string[] = [];
      for (const [callId, answer] of retried) {
        const first = seen.find((s) => s.job.callId === callId && s.answer !== undefined)?.answer;
        if (answer.status === 200) {
          if (first !== undefined) expect(answer.body, callId).toEqual(first);
          continue;
        }
        if (answer.status === 409 && answer.body.error !== undefined && inDoubt.has(callId)) {
          doubtful.push(callId);
          if (deliveries.get(callId) !== 1) blocked.push(callId);
        } else blocked.push(`${callId} (${answer.status})`);
      }
      // What each blocked call ID saw and left, for the failure message.
      const evidence = blocked.map((callId) => ({
        callId,
        statuses: seen.filter((s) => s.job.callId === callId).map((s) => s.statuses),
        audit: (byCall.get(callId) ?? []).map((e) => `${e.outcome}:${e.reason}:${e.grantId ?? ""}`),
        kill: times,
      }));
      // A store that records an act and dies before its reply (seen on Redis: the script ran
      // and reached the AOF, the reply was lost, the service answered 503 and ran nothing) no
      // longer blocks its call ID: the kernel withdrew the act once the store was back. Its
      // retry answered the withdrawal's denial; audit holds the allowed event, then
      // act_withdrawn; nothing was delivered. No call ID stays blocked.
      expect(evidence, `call IDs blocked with no delivery: ${JSON.stringify(evidence)}`).toEqual(
        [],
      );
      const lostReplies: string[] = [];
      for (const [callId, recorded] of byCall) {
        if (!callId.startsWith(prefix)) continue;
        if (!recorded.some((e) => e.reason === "act_withdrawn")) continue;
        lostReplies.push(callId);
        expect(
          recorded.map((e) => `${e.outcome}:${e.reason}:${e.code ?? ""}`),
          `audit of withdrawn ${callId}`,
        ).toEqual(["allowed:allowed:", "denied:act_withdrawn:authority_unavailable"]);
        expect(recorded[1]?.grantId, callId).toBe(recorded[0]?.grantId);
        expect(deliveries.get(callId), `deliveries of withdrawn ${callId}`).toBeUndefined();
        expect(inDoubt.has(callId), `withdrawn ${callId} in doubt`).toBe(false);
        expect(retried.get(callId), `retry of withdrawn ${callId}`).toEqual({
          status: 200,
          body: { status: "denied", code: "authority_unavailable" },
        });
      }
      // Two clients asking one call ID at once got one answer.
      for (const s of seen) {
        if (s.job.duplicate !== true || s.answer === undefined) continue;
        const twin = seen.find((o) => o !== s && o.job.callId === s.job.callId)?.answer;
        if (twin !== undefined) expect(s.answer, s.job.callId).toEqual(twin);
      }
      return {
        requests: seen.reduce((n, s) => n + s.statuses.length, 0),
        failedAttempts: seen.reduce((n, s) => n + s.statuses.filter((x) => x !== 200).length, 0),
        answeredWithCallId: answeredWithId,
        ticketsSpent: spent,
        answers: tally(seen.map((s) => s.answer && `${s.answer.status}:${s.answer.code ?? ""}`)),
        delivered: [...deliveries.keys()].filter((c) => c.startsWith(prefix)).length,
        denialsWithoutCallId: denialsWithoutId,
        denialsLost: lostDenials.length,
        lostDenialAgesMs: lostDenials.map((d) => times.killAt - (d.answeredAt ?? 0)),
        inDoubtAfterDelivery: doubtful.length,
        withdrawnAfterLostReply: lostReplies.length,
        outageMs: times.backAt - times.killAt,
      };
    }
  });
}

function tally(values: readonly (string | undefined)[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) if (v !== undefined) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}

/** A read right after a restart may meet a connection the crash left dead: try a few times. */
async function withRetry<T>(read: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await read();
    } catch (error) {
      if (i >= 20) throw error;
      await sleep(250);
    }
  }
}
