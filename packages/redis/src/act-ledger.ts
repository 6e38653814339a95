import {
  type Act,
  type ActLedger,
  type ActResult,
  type AuditEvent,
  TesseraError,
  type Withdrawal,
  type WithdrawResult,
} from "@tessera/core";
import {
  auditStreamOf,
  type ChainHead,
  checkAct,
  checkVersions,
  deniedAnswerOf,
  EMPTY_HEAD,
  linkAuditEvent,
  storageDigest,
} from "@tessera/core/store-kit";
import { answerFollowers, asPortFailure, type Pending, type Plan } from "./act-batch.js";
import { decodeCounter, RECORD_ACTS, readReply, type StaleReply } from "./act-script.js";
import { withdrawAct } from "./act-withdraw.js";
import { decodeHead, encodeHead } from "./chain-head.js";
import { claimKeyOf, claimValueOf, settlementOf } from "./claim-store.js";
import type { Connection } from "./connection.js";
import { usageKeyOf } from "./usage-store.js";
import { newWriterToken, type TurnWriter, turnKeyOf, WriteTries } from "./write-turn.js";

const CODE = "store_unavailable";
const STALE: ActResult = Object.freeze({ status: "stale" });
const SPEND_LOST: ActResult = Object.freeze({ status: "spend_lost" });
/** Acts per script at most: bounds the script's run, which blocks the server meanwhile. */
const MAX_BATCH = 128;
/** Counters remembered between batches; past this the memory is dropped (one more try). */
const MAX_REMEMBERED = 10_000;

/**
 * The act ledger on Redis: each batch of acts in flight is ONE script call (`RECORD_ACTS`),
 * which writes every act of the batch whole — claim, spend and event — or none of them.
 *
 * Lua in Redis has no SHA-256, so the links are computed here, as the audit sink does: this
 * process remembers each stream's head and each spent counter's value (what its own batches
 * wrote; unknown ones are taken as empty and zero), decides each act's spend and links its
 * event from them, and the script writes only if all of that still holds and no claim key is
 * held. Otherwise it answers what it found: acts whose claim is held are answered
 * `already_claimed` with the holder's claim, and the rest is decided and linked again. So a
 * lone writer sends one script per batch, and a process's first act on a stream or counter
 * another process moved costs one more. Writers that keep colliding take turns (`write-turn.ts`).
 *
 * An act with a spend and no `exhausted` event (`undoesLostSpends`) is decided the same way:
 * when the counter it would spend is at its bound, it writes nothing (no claim, no event, no
 * use) and is answered `spend_lost` — but it stays in the script, which still checks its grant
 * versions and its claim key (so `stale` and `already_claimed` come first), and the counter's
 * value it was decided on, like every other assumption of the batch. Acts after it in the
 * batch decide from the counters and heads as it left them, which it did not move.
 *
 * `withdraw` is one script too (`act-withdraw.ts`), linked from the same remembered heads.
 *
 * Batching: one script in flight; acts recorded meanwhile wait and leave together as the next
 * batch (at most `MAX_BATCH`), each caller answered from its own act's outcome. Of acts with
 * one claim key in a batch only the first is sent; the later ones are answered
 * `already_claimed` with the claim it leaves, as if they had come right after it; when it
 * leaves none (it was `stale`, or its spend lost), they go back to the queue's front.
 */
export class RedisActLedger implements ActLedger {
  /** The script compares each act's grant versions with this connection's (`Act.versions`). */
  readonly checksVersionsIn: object;
  /** An act whose spend lost without an `exhausted` event writes nothing: `spend_lost`. */
  readonly undoesLostSpends = true;
  readonly #connection: Connection;
  readonly #ttlMs: number;
  readonly #heads = new Map<string, ChainHead>();
  readonly #counters = new Map<string, number>();
  /** This ledger as a writer taking turns (`write-turn.ts`). */
  readonly #writer: TurnWriter;
  #queue: Pending[] = [];
  #scheduled = false;
  #running = false;

  constructor(connection: Connection, claimTtlMs: number) {
    this.#connection = connection;
    this.#ttlMs = claimTtlMs;
    this.checksVersionsIn = connection.versionSpace;
    this.#writer = { connection, code: CODE, token: newWriterToken() };
  }

  record(act: Act): Promise<ActResult> {
    let checked: { event: AuditEvent; exhausted?: AuditEvent };
    let usageKey: string | undefined;
    let versions: Pending["versions"];
    try {
      checked = checkAct(act, { checksVersions: true, undoesLostSpends: true });
      if (act.spend !== undefined) {
        usageKey = usageKeyOf(this.#connection, act.spend.namespaceId, act.spend.grantId);
      }
      // The key and field the grant store bumps (grant-store.ts): one hash per namespace.
      versions = checkVersions(act).map((check) => ({
        key: this.#connection.key("grants-versions", storageDigest(check.namespaceId)),
        field: storageDigest(check.subject),
        version: check.version,
      }));
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<ActResult>((resolve, reject) => {
      // `checked` last: a spread followed by more members is Node 20's slow path.
      this.#queue.push({
        act,
        ...(act.claim === undefined
          ? {}
          : {
              claimKey: claimKeyOf(this.#connection, act.claim.key),
              claimRecord: claimValueOf(act.claim.key, act.claim.record),
            }),
        ...(usageKey === undefined ? {} : { usageKey }),
        versions,
        resolve,
        reject,
        ...checked,
      });
      this.#schedule();
    });
  }

  /**
   * One script call (`WITHDRAW_ACT`, `act-withdraw.ts`): the claim compared and settled, the
   * use given back and the event linked and appended, all or nothing. Not batched: withdrawals
   * are rare (a lost reply). It links from, and moves, the heads this ledger remembers.
   */
  withdraw(withdrawal: Withdrawal): Promise<WithdrawResult> {
    return withdrawAct(this.#connection, this.#heads, withdrawal);
  }

  /** Acts recorded in this tick leave together; none wait behind an idle connection. */
  #schedule(): void {
    if (this.#scheduled || this.#running) return;
    this.#scheduled = true;
    process.nextTick(() => {
      this.#scheduled = false;
      void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#running = true;
    try {
      while (this.#queue.length > 0) await this.#write(this.#takeBatch());
    } finally {
      this.#running = false;
    }
  }

  /** Up to `MAX_BATCH` acts in order; an act whose claim key is taken follows its first. */
  #takeBatch(): Pending[] {
    const batch: Pending[] = [];
    const claimed = new Map<string, Pending>();
    let taken = 0;
    for (const pending of this.#queue) {
      if (batch.length >= MAX_BATCH) break;
      taken++;
      const first = pending.claimKey === undefined ? undefined : claimed.get(pending.claimKey);
      if (first !== undefined) {
        first.followers ??= [];
        first.followers.push(pending);
        continue;
      }
      if (pending.claimKey !== undefined) claimed.set(pending.claimKey, pending);
      batch.push(pending);
    }
    this.#queue = this.#queue.slice(taken);
    return batch;
  }

  /**
   * Writes `batch` whole, deciding again while what it assumed is stale (taking turns with
   * other writers when it keeps losing, `write-turn.ts`); never throws.
   */
  async #write(batch: Pending[]): Promise<void> {
    let acts = batch;
    const tries = new WriteTries(
      this.#writer,
      () => new TesseraError(CODE, "the acts' streams kept moving: too many concurrent writers"),
    );
    try {
      while (acts.length > 0) {
        const plan = this.#plan(acts, tries.next());
        const reply = readReply(
          await this.#connection.eval(CODE, RECORD_ACTS, plan.keys, plan.args),
        );
        if (reply === "written") {
          for (const stream of plan.streams) this.#heads.set(stream.name, stream.end);
          for (const counter of plan.counters) this.#remember(counter.key, counter.end);
          const again: Pending[] = [];
          acts.forEach((pending, i) => {
            const result = plan.results[i] as ActResult;
            pending.resolve(result);
            if (pending.followers === undefined) return;
            // A lost spend left no claim: the acts that followed it on its key are decided
            // alone, from the queue's front, as if they had come right after it.
            if (result === SPEND_LOST) again.push(...pending.followers);
            else answerFollowers(pending.followers, plan.claimValues[i] ?? "");
          });
          if (again.length > 0) this.#queue.unshift(...again);
          return;
        }
        acts = this.#learn(acts, plan, reply);
        tries.found(reply.holdsTurn);
        if (acts.length > 0) await tries.lost();
      }
      // Every act was answered from what the script found: nothing to hold the turn for.
      tries.end();
    } catch (error) {
      tries.end();
      // A reply lost after the script ran leaves this process's memory wrong: forget it,
      // the next batch learns the truth from the script.
      this.#heads.clear();
      this.#counters.clear();
      for (const pending of acts) {
        const failure = asPortFailure(error, pending.act);
        pending.reject(failure);
        for (const follower of pending.followers ?? []) follower.reject(failure);
      }
    }
  }

  /**
   * Takes in what a stale script found: the heads and counters to decide from next time, and
   * the acts whose claim is held, answered now (nothing of them is written). Returns the acts
   * left to write.
   */
  #learn(acts: readonly Pending[], plan: Plan, stale: StaleReply): Pending[] {
    plan.streams.forEach((stream, i) => {
      this.#heads.set(stream.name, decodeHead(stale.heads[i] ?? "", CODE));
    });
    plan.counters.forEach((counter, i) => {
      this.#remember(counter.key, decodeCounter(stale.counters[i] ?? ""));
    });
    const left: Pending[] = [];
    acts.forEach((pending, i) => {
      if (stale.moved.has(i)) {
        // Decided on grants that changed: nothing written, the kernel decides again. Acts
        // that followed it on its claim key go back to the queue's front, to be decided alone.
        pending.resolve(STALE);
        if (pending.followers) this.#queue.unshift(...pending.followers);
        return;
      }
      const held = stale.taken.get(i);
      if (held === undefined) {
        left.push(pending);
        return;
      }
      answerFollowers([pending, ...(pending.followers ?? [])], held);
    });
    return left;
  }

  #remember(key: string, value: number): void {
    if (this.#counters.size >= MAX_REMEMBERED && !this.#counters.has(key)) this.#counters.clear();
    this.#counters.set(key, value);
  }

  /**
   * Decides every act of the batch in order from the remembered heads and counters: which
   * event it records (the spend wins while the counter is below its bound), that event's link,
   * and its claim as stored (settled `denied`, with the refusal as answer, for a denial). An
   * act whose spend loses without an `exhausted` event records nothing (`spend_lost`): it is
   * sent with its claim key (checked, never written) and an empty event, and moves no stream.
   */
  #plan(acts: readonly Pending[], askTurn: "0" | "1"): Plan {
    const keys = [
      this.#connection.key("audit"),
      this.#connection.key("audit-heads"),
      turnKeyOf(this.#connection),
    ];
    const positions = new Map<string, number>();
    const position = (key: string): number => {
      let at = positions.get(key);
      if (at === undefined) {
        at = keys.push(key);
        positions.set(key, at);
      }
      return at;
    };
    const streams = new Map<string, { start: ChainHead; end: ChainHead }>();
    const counters = new Map<string, { start: number; end: number }>();
    const actArgs: (string | number)[] = [];
    const results: ActResult[] = [];
    const claimValues: string[] = [];
    for (const pending of acts) {
      let recorded = pending.event;
      let used: number | undefined;
      const spend = pending.act.spend;
      if (spend !== undefined && pending.usageKey !== undefined) {
        let counter = counters.get(pending.usageKey);
        if (counter === undefined) {
          const start = this.#counters.get(pending.usageKey) ?? 0;
          counter = { start, end: start };
          counters.set(pending.usageKey, counter);
        }
        if (counter.end < spend.maxUses) counter.end += 1;
        else if (pending.exhausted !== undefined) recorded = pending.exhausted;
        else {
          // Checked (claim key, versions, the counter's value), never written.
          claimValues.push("");
          actArgs.push(
            pending.claimKey === undefined ? 0 : position(pending.claimKey),
            "",
            0,
            0,
            "",
          );
          results.push(SPEND_LOST);
          continue;
        }
        used = counter.end;
      }
      const name = auditStreamOf(recorded);
      let stream = streams.get(name);
      if (stream === undefined) {
        const start = this.#heads.get(name) ?? EMPTY_HEAD;
        stream = { start, end: start };
        streams.set(name, stream);
      }
      const linked = linkAuditEvent(recorded, stream.end);
      stream.end = { seq: linked.seq, hash: linked.hash };
      let claimValue = "";
      if (pending.claimRecord !== undefined) {
        const denied = deniedAnswerOf(recorded);
        claimValue =
          denied === undefined
            ? pending.claimRecord
            : `${pending.claimRecord}\n${settlementOf(
                { status: "denied", settledAt: Date.parse(recorded.at) },
                denied,
              )}`;
      }
      claimValues.push(claimValue);
      actArgs.push(
        pending.claimKey === undefined ? 0 : position(pending.claimKey),
        claimValue,
        position(this.#connection.key("audit-call", storageDigest(recorded.callId))),
        position(this.#connection.key("audit-trace", storageDigest(recorded.traceId))),
        JSON.stringify(linked),
      );
      results.push(
        Object.freeze({
          status: "recorded",
          recorded: recorded === pending.event ? "event" : "exhausted",
          ...(used === undefined ? {} : { used }),
        }),
      );
    }
    const args: (string | number)[] = [this.#ttlMs, streams.size];
    for (const [name, { start, end }] of streams) {
      args.push(name, encodeHead(start), encodeHead(end));
    }
    args.push(counters.size);
    for (const [key, { start, end }] of counters) args.push(position(key), start, end);
    args.push(acts.length, ...actArgs);
    const checks: (string | number)[] = [];
    acts.forEach((pending, i) => {
      for (const check of pending.versions) {
        checks.push(i + 1, position(check.key), check.field, check.version);
      }
    });
    args.push(checks.length / 4, ...checks, this.#writer.token, askTurn);
    return {
      keys,
      args,
      streams: [...streams].map(([name, heads]) => ({ name, ...heads })),
      counters: [...counters].map(([key, values]) => ({ key, ...values })),
      results,
      claimValues,
    };
  }
}
