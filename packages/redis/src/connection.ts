import { createHash } from "node:crypto";
import { isTesseraError, TesseraError } from "@tessera/core";
import { Cluster, type Command } from "ioredis";
import { type Client, createClient } from "./client.js";
import { clusterEvidence } from "./cluster-probe.js";
import { CommandCounter } from "./command-counter.js";
import type { RedisConfig } from "./config.js";
import { clusterNodeMessage, isClusterReply, namingReply, replyCode } from "./reply-errors.js";

export type UnavailableCode =
  | "store_unavailable"
  | "usage_store_unavailable"
  | "claim_store_unavailable"
  | "grant_store_unavailable"
  | "audit_unavailable";

/** A Lua script run by digest (EVALSHA), loaded on demand when the server does not know it. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

export function script(source: string): Script {
  return { source, sha: createHash("sha1").update(source).digest("hex") };
}

/**
 * One ioredis connection shared by every port of an `openStores` bundle, configured to fail
 * rather than wait: no offline queue (a command issued while disconnected is rejected at
 * once), no retry of in-flight commands after a reconnect (a retried SET NX could report a
 * claim this caller never saw), and a per-command timeout. Reconnection runs in the
 * background, so the store answers again as soon as the server is back.
 */
export class Connection {
  readonly redis: Client;
  readonly prefix: string;
  /**
   * The identity of this prefix's grant versions (`GrantSource.versionSpace`): the grant store
   * hands it out and the act ledger checks against it, both over this connection.
   */
  readonly versionSpace: object = Object.freeze({});
  /** What this connection sent, counted where ioredis writes it. */
  readonly sent = new CommandCounter();
  /** Whether the URL said `cluster=true`: without it, a cluster node's reply is explained. */
  readonly #cluster: boolean;
  /** The server's last refusal of the connection itself (`WRONGPASS`), for an open's error. */
  #refused: unknown;
  /** What `beforeClose` registered. */
  readonly #beforeClose: (() => void)[] = [];
  #closed = false;

  /**
   * `readOnly`: an audit reader's connection. It skips ioredis's ready check, whose `INFO` an
   * auditor's ACL user need not be allowed (ioredis would print a warning and go on); a server
   * still loading its data answers the reader's first read with an error, which fails closed.
   */
  constructor(config: RedisConfig, { readOnly = false }: { readOnly?: boolean } = {}) {
    this.prefix = config.prefix;
    this.#cluster = config.cluster;
    this.redis = createClient(config, readOnly);
    // Errors reach callers through their commands; without a listener ioredis would also
    // print every reconnect failure. A refused handshake (AUTH, the ready check's INFO) only
    // comes this way, the commands failing as "Connection is closed.": kept, to name it.
    this.redis.on("error", (error: unknown) => {
      if (replyCode(error) !== undefined) this.#refused = error;
    });
    // Every command (EVALSHA included) goes through sendCommand: count it there, and hold
    // the process open while it waits for the reply (see #hold).
    // (A cluster's sendCommand takes a third argument, the node of a redirect: passed on.)
    const client = this.redis as unknown as {
      sendCommand(command: Command, ...rest: unknown[]): unknown;
    };
    const send = client.sendCommand.bind(client);
    client.sendCommand = (command, ...rest) => {
      this.sent.count(command.name);
      this.#hold(command.promise);
      return send(command, ...rest);
    };
    // A fresh socket (connect, reconnect) starts idle unless a command already waits on it.
    this.redis.on("ready", () => {
      if (this.#waiting === 0) this.#socket()?.unref();
    });
    // The retry timer is set right after this event: it does not hold the process either.
    this.redis.on("reconnecting", () => {
      process.nextTick(() => {
        (
          this.redis as unknown as { reconnectTimeout?: NodeJS.Timeout | null }
        ).reconnectTimeout?.unref();
      });
    });
  }

  /** Commands sent and not yet answered. */
  #waiting = 0;

  /**
   * The bundle's rule on every backend (see `StoreBundle`): an idle connection does not keep
   * the process alive, so a process whose work is done exits whether or not it closed the
   * bundle (PostgreSQL's pool does the same with `allowExitOnIdle`; SQLite holds only a file).
   * The socket is referenced while a reply is awaited — a process never exits mid-command —
   * and unreferenced once the last one settles.
   */
  #hold(reply: Promise<unknown>): void {
    if (this.#waiting++ === 0) this.#held(true);
    const release = (): void => {
      if (--this.#waiting === 0) this.#held(false);
    };
    reply.then(release, release);
  }

  /**
   * Refs or unrefs the socket, unless it is not connected: Node answers a ref or unref of a
   * socket without a handle (still connecting, or destroyed by a lost connection) by queueing a
   * `connect` listener each time, and a destroyed one never connects. Commands failing in turn
   * during an outage piled such listeners up (MaxListenersExceededWarning, seen in the outage
   * tests). A new socket is held until "ready" lets it go idle (above), so nothing is lost.
   */
  #held(held: boolean): void {
    const socket = this.#socket();
    if (socket === undefined || socket.pending === true || socket.destroyed === true) return;
    if (held) socket.ref();
    else socket.unref();
  }

  #socket():
    | { ref(): void; unref(): void; readonly pending?: boolean; readonly destroyed?: boolean }
    | undefined {
    return (this.redis as unknown as { stream?: { ref(): void; unref(): void } }).stream;
  }

  key(...parts: string[]): string {
    return `${this.prefix}${parts.join(":")}`;
  }

  /** `<prefix>claim:<session digest>:<ID digest>`, without `key`'s array: a claim's path. */
  claimKey(sessionDigest: string, idDigest: string): string {
    return `${this.prefix}claim:${sessionDigest}:${idDigest}`;
  }

  /** Runs `work`, turning any failure (disconnected, timeout, server error) into `failCode`. */
  async run<T>(failCode: UnavailableCode, work: (redis: Client) => Promise<T>): Promise<T> {
    if (this.#closed) throw new TesseraError(failCode, "the Redis store is closed");
    try {
      return await work(this.redis);
    } catch (error) {
      if (error instanceof TesseraError) throw error;
      throw this.#failure(failCode, error);
    }
  }

  /**
   * One command and its reply check as one promise: no async frame, no second `then` (the
   * claim's path). A failure to answer becomes `failCode`; what `check` throws stands.
   */
  send<Reply, Result>(
    failCode: UnavailableCode,
    work: (redis: Client) => Promise<Reply>,
    check: (reply: Reply) => Result,
  ): Promise<Result> {
    if (this.#closed) {
      return Promise.reject(new TesseraError(failCode, "the Redis store is closed"));
    }
    return work(this.redis).then(check, (error: unknown) => {
      throw this.#failure(failCode, error);
    });
  }

  /**
   * EVALSHA, falling back to EVAL when the server does not know the script (after a restart
   * or a SCRIPT FLUSH). One promise chain, no extra async frames: this is every claim's and
   * every consume's path.
   */
  eval(
    failCode: UnavailableCode,
    code: Script,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    if (this.#closed) {
      return Promise.reject(new TesseraError(failCode, "the Redis store is closed"));
    }
    const fail = (error: unknown): never => {
      throw this.#failure(failCode, error);
    };
    return this.redis.evalsha(code.sha, keys.length, ...keys, ...args).catch((error: unknown) => {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) return fail(error);
      return this.redis.eval(code.source, keys.length, ...keys, ...args).catch(fail);
    });
  }

  /**
   * A command that failed, as `failCode`: named by the reply's code when the server refused it
   * (`NOPERM`), and explained when a cluster node answered a client the URL did not make a
   * cluster client (`MOVED`: the key's slot is on another node).
   */
  #failure(failCode: UnavailableCode, error: unknown): TesseraError {
    const code = replyCode(error);
    const message =
      code === undefined
        ? `Redis did not answer (${errorName(error)})`
        : !this.#cluster && isClusterReply(code)
          ? clusterNodeMessage(`it answered ${code}`)
          : `Redis refused the command (${code})`;
    return new TesseraError(failCode, message, { cause: error });
  }

  async connect(failCode: UnavailableCode): Promise<void> {
    try {
      await this.redis.connect();
    } catch (error) {
      this.redis.disconnect();
      const cause = replyCode(error) === undefined ? (this.#refused ?? error) : error;
      const code = replyCode(cause);
      if (!this.#cluster && isClusterReply(code)) {
        throw new TesseraError("invalid_config", clusterNodeMessage(`it answered ${code}`), {
          cause,
        });
      }
      const failure = new TesseraError(
        failCode,
        `could not connect to Redis (${code ?? errorName(error)})`,
        { cause },
      );
      throw code === undefined ? failure : namingReply(failure, code, cause);
    }
    await this.#checkDatabase(failCode);
  }

  /**
   * Refuses a cluster node opened without `cluster=true` before anything is read or written:
   * waiting for a `MOVED` depended on which node the URL named (the one holding every key
   * the open touched opened, and its first command for another slot failed). One `INFO
   * cluster` at open; a user not allowed `INFO` is not told, and meets the `MOVED` instead.
   */
  async refuseClusterNode(): Promise<void> {
    const evidence = await clusterEvidence(this.redis, this.#cluster, "");
    if (evidence !== undefined)
      throw new TesseraError("invalid_config", clusterNodeMessage(evidence));
  }

  /**
   * Why an open failed after connecting (the layout check, the self-test), said with its cause
   * while the connection is still open: a cluster node opened without `cluster=true` is named
   * as one (`invalid_config`: the URL is wrong) whether it answered `MOVED` or something else
   * (`SELECT`, a script's keys: then its `INFO` says so); any other refusal by the reply's code.
   */
  async explainOpenFailure(error: unknown): Promise<unknown> {
    // A reader skips the ready check: a refused AUTH then shows as its first command failing.
    const reply = replyCode(error) === undefined ? this.#refused : error;
    const code = replyCode(reply);
    // A reader on the node that holds the layout key's slot may find no store there (or
    // another's): on a cluster, the URL says cluster=true before anything else can be judged.
    if (code === undefined && !isTesseraError(error, "schema_unavailable")) return error;
    const evidence = await clusterEvidence(this.redis, this.#cluster, code ?? "");
    if (evidence !== undefined) {
      return new TesseraError("invalid_config", clusterNodeMessage(evidence), { cause: error });
    }
    return code === undefined ? error : namingReply(error, code, reply);
  }

  /**
   * The database a URL names (`redis://host/5`) is selected by ioredis as it connects, but a
   * `SELECT` the server refuses (an index past its `databases`) is only emitted as an error
   * event and the connection stays on database 0: every key would land where the URL did not
   * say. Selected once more here, and refused at open when the server says no.
   */
  async #checkDatabase(failCode: UnavailableCode): Promise<void> {
    if (this.redis instanceof Cluster) return;
    const db = this.redis.options.db ?? 0;
    if (db === 0) return;
    try {
      await this.redis.select(db);
    } catch (error) {
      // A server that answered but refused the index: the URL is wrong, not the server down.
      // Anything else (the socket lost meanwhile) is the outage it looks like. A cluster node
      // refuses every SELECT: that is said instead.
      const refused = error instanceof Error && error.name === "ReplyError";
      const cluster = refused
        ? await clusterEvidence(this.redis, this.#cluster, replyCode(error) ?? "")
        : undefined;
      this.redis.disconnect();
      throw new TesseraError(
        refused ? "invalid_config" : failCode,
        cluster !== undefined
          ? clusterNodeMessage(cluster)
          : refused
            ? `the Redis server has no database ${db}, the one the URL names (/${db}): it keeps fewer (\`databases\` in its configuration)`
            : `could not select Redis database ${db} (${errorName(error)})`,
        { cause: error },
      );
    }
  }

  /**
   * Runs `flush` as the connection closes, before it refuses commands: a store that holds what
   * a tick queued until the next one (the claim store's batches) sends it ahead of the QUIT,
   * so a claim issued just before the bundle closes still gets its answer.
   */
  beforeClose(flush: () => void): void {
    this.#beforeClose.push(flush);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    for (const flush of this.#beforeClose) flush();
    this.#closed = true;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}

/** The error's class or code, never its message (which may quote a key or a value). */
function errorName(error: unknown): string {
  if (typeof error === "object" && error !== null) {
    if ("code" in error && typeof error.code === "string") return error.code;
    if (error instanceof Error) return error.name;
  }
  return "unknown error";
}
