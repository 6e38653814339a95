import { randomUUID } from "node:crypto";
import type { TesseraError } from "@tessera/core";
import { type Connection, script, type UnavailableCode } from "./connection.js";

/**
 * Taking turns when optimistic writers keep colliding.
 *
 * Every write script here is a compare-and-write: the client links events after the heads it
 * knows, and the script writes only when they still hold. Alone, that never retries. Between
 * processes it favours whoever just won: the winner knows the new head at once and sends its
 * next batch while the losers are still learning it, so under a steady stream of writes a
 * loser can lose for as long as the others have work (CI saw one lose 64 times in a row on a
 * Redis Cluster with 8 processes appending to one stream).
 *
 * So a writer that has lost twice asks for the turn with its next try: a try that finds the
 * assumptions stale and the turn free takes it (`<prefix>write-turn`, set to the writer's
 * token for `TURN_TTL_MS`). While the turn is held, every other writer's script writes
 * nothing and answers what it found, so the holder's next try, planned from the heads its
 * failed try was answered, is the one that writes; that write gives the turn back. A holder
 * that dies lets it lapse after `TURN_TTL_MS`. The key carries the prefix, hence its hash
 * tag: on a cluster it lives in the slot of the keys it guards.
 */
export const TURN_TTL_MS = 500;
/** The try from which a writer that keeps losing asks for the turn. */
const ASK_FROM_TRY = 3;
/** How long a write may keep losing before it fails closed. */
const CONTENTION_BUDGET_MS = 10_000;

/**
 * Lua, run after a script's reads: names the turn's key, this writer's token and whether this
 * try asks for the turn (`'1'` or `'0'`) from the script's `KEYS`/`ARGV` expressions given,
 * and sets `turnRefused` when another writer holds the turn (the script then writes nothing).
 */
export function turnCheck(key: string, writer: string, ask: string): string {
  return `
local turnKey = ${key}
local writer = ${writer}
local askTurn = ${ask}
local turnHolder = redis.call('GET', turnKey)
local turnRefused = turnHolder and turnHolder ~= writer
`;
}

/**
 * Lua for a try that writes nothing: keeps or takes the turn as asked. Leaves `turnMine`
 * 1 when this writer holds the turn after the try, else 0.
 */
export const TURN_ON_STALE = `
local turnMine = 0
if not turnRefused then
  if turnHolder == writer then
    redis.call('PEXPIRE', turnKey, ${TURN_TTL_MS})
    turnMine = 1
  elseif askTurn == '1' then
    redis.call('SET', turnKey, writer, 'PX', ${TURN_TTL_MS})
    turnMine = 1
  end
end
`;

/** Lua for a try that wrote: the turn, if this writer held it, is given back. */
export const TURN_ON_WRITE = `
if turnHolder == writer then redis.call('DEL', turnKey) end
`;

const GIVE_BACK = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`);

/** The turn's key under `connection`'s prefix. */
export function turnKeyOf(connection: Connection): string {
  return connection.key("write-turn");
}

/** A writer's token: one per ledger or sink object, so its turn is told from others'. */
export function newWriterToken(): string {
  return randomUUID();
}

/** Who writes, and what its failures are called: the same for every write of one object. */
export interface TurnWriter {
  readonly connection: Connection;
  readonly code: UnavailableCode;
  /** `newWriterToken()`: tells this writer's turn from others'. */
  readonly token: string;
}

/**
 * The tries of one write: whether a try asks for the turn, how long to step aside between
 * tries, when to give up (`CONTENTION_BUDGET_MS`, then `failure`), and whether the turn is
 * held, so that a write ending without writing gives it back (`end`).
 */
export class WriteTries {
  readonly #deadline = Date.now() + CONTENTION_BUDGET_MS;
  readonly #writer: TurnWriter;
  readonly #failure: () => TesseraError;
  #tries = 0;
  #holdsTurn = false;

  constructor(writer: TurnWriter, failure: () => TesseraError) {
    this.#writer = writer;
    this.#failure = failure;
  }

  /** Starts a try: `"1"` when it asks for the turn should it find the heads moved. */
  next(): "0" | "1" {
    this.#tries++;
    return this.#tries >= ASK_FROM_TRY ? "1" : "0";
  }

  /** What a lost try answered: whether this writer holds the turn now. */
  found(holdsTurn: boolean): void {
    this.#holdsTurn = holdsTurn;
  }

  /**
   * Between a lost try and the next. A holder of the turn goes on at once (everyone else
   * waits for it); from the third try on others step aside for a random moment, so they do
   * not collide again in step. Throws `failure` once the budget is spent.
   */
  async lost(): Promise<void> {
    if (Date.now() >= this.#deadline) throw this.#failure();
    if (this.#holdsTurn || this.#tries < 2) return;
    const ms = Math.random() * Math.min(this.#tries, 8);
    await new Promise((resolve) => setTimeout(resolve, ms));
  }

  /**
   * The write ends without a try that wrote (everything answered from what was found, or a
   * failure): a turn still held is given back, best effort; one not given back lapses after
   * `TURN_TTL_MS`. A try that wrote gave it back in its own script.
   */
  end(): void {
    if (!this.#holdsTurn) return;
    this.#holdsTurn = false;
    const { connection, code, token } = this.#writer;
    connection.eval(code, GIVE_BACK, [turnKeyOf(connection)], [token]).catch(() => undefined);
  }
}
