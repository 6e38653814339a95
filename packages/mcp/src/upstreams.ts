import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type Tool, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { TesseraError } from "@tessera/core";
import { TOOL_NAME, type ToolRules } from "./config.js";
import {
  type UpstreamFetch,
  UpstreamLost,
  UpstreamUnreached,
  upstreamFetch,
} from "./http-fetch.js";
import type { ToolRef } from "./tool-grants.js";
import type { UpstreamInput } from "./types.js";
import { ClientCredentials } from "./upstream-auth.js";
import { CallTransport } from "./upstream-http.js";

/** One tool as the gateway exposes it: `server.tool`, with the upstream's definition. */
export interface CatalogEntry extends ToolRef {
  readonly exposedName: string;
  readonly definition: Tool;
  readonly upstream: Upstream;
}

export interface Upstreams {
  /** Live: an upstream's entries are replaced when it says its tools changed or restarts. */
  readonly catalog: ReadonlyMap<string, CatalogEntry>;
  close(): Promise<void>;
}

/** Restart backoff after an upstream fails to start: doubling from the configured first wait. */
const MAX_RETRY_MS = 30_000;

const GATEWAY_INFO = { name: "tessera-mcp-gateway", version: "0.1.0" };

/**
 * One upstream server and its SDK client. A client whose connection closed (a stdio server
 * that exited, say) is replaced by a new one on the next call that needs it, no sooner than its
 * backoff allows; the call that was in flight when it died is not among those: it stays in
 * doubt (see forward.ts), so a restart never runs anything twice. An HTTP client is retired the
 * same way when its connection fails or the upstream no longer knows its session (404): the
 * next call opens a new session, as the MCP spec asks. A handshake whose connection is lost
 * is made once more at once (it runs no call). A host-built transport cannot be reopened, so
 * such an upstream is not restarted.
 */
export class Upstream {
  readonly name: string;
  readonly #input: UpstreamInput;
  readonly #onTools: (upstream: Upstream, tools: Tool[]) => void;
  readonly #firstRetryMs: number;
  /** The upstream's own token (OAuth client credentials), kept across its clients. */
  readonly #auth: ClientCredentials | undefined;
  #client: Client | undefined;
  #connecting: Promise<Client> | undefined;
  /** The client of a handshake under way: closing the upstream ends it rather than waits. */
  #handshaking: Client | undefined;
  #fetch: UpstreamFetch | undefined;
  #failures = 0;
  #notBefore = 0;
  #closed = false;
  #used = false;
  /** Requests in flight per client: a retired client is closed once its last one is done. */
  readonly #busy = new Map<Client, number>();
  readonly #retired = new WeakSet<Client>();

  constructor(
    name: string,
    input: UpstreamInput,
    onTools: (upstream: Upstream, tools: Tool[]) => void,
    firstRetryMs: number,
    now: () => number = Date.now,
  ) {
    this.name = name;
    this.#auth =
      "url" in input && input.auth !== undefined
        ? new ClientCredentials(input.auth, now)
        : undefined;
    this.#firstRetryMs = firstRetryMs;
    this.#input = input;
    this.#onTools = onTools;
  }

  /** The connected client, (re)connecting if it is gone and its backoff has passed. */
  client(): Promise<Client> {
    if (this.#client !== undefined) return Promise.resolve(this.#client);
    if (this.#connecting !== undefined) return this.#connecting;
    if (this.#closed) return Promise.reject(new Error("upstream not connected: closed"));
    if (this.#used && "transport" in this.#input) {
      return Promise.reject(new Error("upstream not connected: its transport closed"));
    }
    if (Date.now() < this.#notBefore) {
      return Promise.reject(new Error("upstream not connected: restart backing off"));
    }
    this.#connecting = this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #connect(): Promise<Client> {
    this.#used = true;
    try {
      try {
        return await this.#handshake();
      } catch (error) {
        // A kept-alive connection the upstream closed as the handshake took it (it dropped
        // every connection, say, as it does when a call is lost): nothing of a call was sent,
        // and a handshake only opens a session, so one more, on a new connection, is safe.
        if (this.#closed || !lostConnection(error)) throw error;
        return await this.#handshake();
      }
    } catch (error) {
      this.#failures++;
      this.#notBefore =
        Date.now() + Math.min(MAX_RETRY_MS, this.#firstRetryMs * 2 ** (this.#failures - 1));
      throw error;
    }
  }

  /** One client, connected and its tools listed; closed again if any of that fails. */
  async #handshake(): Promise<Client> {
    const client = new Client(GATEWAY_INFO);
    this.#handshaking = client;
    try {
      await client.connect(this.#transport());
      const tools = await listAll(client);
      if (this.#closed) throw new Error("closed while connecting");
      // Registered after the first listing: that listing is the table, a change re-reads it.
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        if (this.#client !== client) return;
        listAll(client).then(
          (next) => this.#client === client && this.#onTools(this, next),
          () => undefined,
        );
      });
      client.onclose = () => {
        if (this.#client === client) this.#client = undefined;
      };
      this.#client = client;
      this.#failures = 0;
      this.#onTools(this, tools);
      return client;
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    } finally {
      if (this.#handshaking === client) this.#handshaking = undefined;
    }
  }

  /** Runs one request on `client` (counted, so retiring it never cuts another call off). */
  async run<T>(client: Client, request: () => Promise<T>): Promise<T> {
    this.#busy.set(client, (this.#busy.get(client) ?? 0) + 1);
    try {
      return await request();
    } finally {
      const left = (this.#busy.get(client) ?? 1) - 1;
      if (left > 0) this.#busy.set(client, left);
      else {
        this.#busy.delete(client);
        if (this.#retired.has(client)) void client.close().catch(() => undefined);
      }
    }
  }

  /**
   * The next call opens a new client (a new MCP session over HTTP); this one is closed once the
   * requests still in flight on it are done. No backoff: only a failed start backs off.
   */
  retire(client: Client): void {
    if (this.#client === client) this.#client = undefined;
    this.#retired.add(client);
    if (!this.#busy.has(client)) void client.close().catch(() => undefined);
  }

  #transport(): Transport {
    const input = this.#input;
    if ("transport" in input) return input.transport as unknown as Transport;
    if ("url" in input) {
      this.#fetch ??= upstreamFetch();
      return new CallTransport(
        new URL(input.url),
        this.#fetch,
        input.headers,
        this.#auth,
      ) as Transport;
    }
    return new StdioClientTransport({
      command: input.command,
      args: input.args,
      ...(input.env === undefined ? {} : { env: input.env }),
      ...(input.cwd === undefined ? {} : { cwd: input.cwd }),
      stderr: "inherit",
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    // A start that hangs (a server that never answers its handshake) is ended, not waited for:
    // the SDK's own handshake timeout is 60 s.
    await this.#handshaking?.close().catch(() => undefined);
    const client = this.#client ?? (await this.#connecting?.catch(() => undefined));
    this.#client = undefined;
    await client?.close().catch(() => undefined);
    this.#fetch?.close();
  }
}

/** Whether `error` (or what caused it) is a connection to an HTTP upstream lost or not made. */
function lostConnection(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; depth++) {
    if (cause instanceof UpstreamLost || cause instanceof UpstreamUnreached) return true;
    cause = cause.cause;
  }
  return false;
}

async function listAll(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (cursor === undefined) break;
  }
  return tools;
}

/** Where an upstream is, for a message: its URL (no credentials, no query) or its command. */
function whereIs(input: UpstreamInput | undefined): string {
  if (input === undefined || "transport" in input) return "an in-process transport";
  if ("url" in input) {
    const url = new URL(input.url);
    url.username = "";
    url.password = "";
    url.search = "";
    return url.href;
  }
  return [input.command, ...(input.args ?? [])].join(" ");
}

/** An error's message and its causes' (fetch's own says only "fetch failed"), each once. */
function causes(error: unknown): string {
  const messages: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && depth < 5; depth++) {
    const message =
      current instanceof Error ? current.message : typeof current === "string" ? current : "";
    if (message !== "" && !messages.some((m) => m.includes(message))) messages.push(message);
    current = (current as { cause?: unknown } | null)?.cause;
  }
  return messages.join(": ") || "no reason given";
}

/**
 * Connects one SDK client per upstream and reads each one's tools. A tool whose name is outside
 * MCP's recommended alphabet is not exposed (it could not be a path segment safely), and a
 * binding that names a tool the upstream does not list at start is a configuration error. When
 * an upstream later announces `notifications/tools/list_changed` (or restarts), its entries are
 * replaced and `onChange` runs, so the gateway can tell its own clients.
 */
export async function connectUpstreams(
  inputs: Readonly<Record<string, UpstreamInput>>,
  rules: ToolRules,
  onChange: () => void = () => undefined,
  restartBackoffMs = 250,
  /** The clock tokens expire by (the gateway's). */
  now: () => number = Date.now,
): Promise<Upstreams> {
  const catalog = new Map<string, CatalogEntry>();
  /** Each upstream's last listing: a restart that lists the same tools changes nothing. */
  const listed = new Map<Upstream, string>();
  let started = false;
  const table = (upstream: Upstream, tools: Tool[]): void => {
    const server = upstream.name;
    const signature = JSON.stringify(tools);
    if (listed.get(upstream) === signature) return;
    listed.set(upstream, signature);
    for (const [name, entry] of catalog) if (entry.upstream === upstream) catalog.delete(name);
    const serverRules = rules[server] ?? {};
    for (const definition of tools) {
      const tool = definition.name;
      if (!TOOL_NAME.test(tool) || tool === "." || tool === "..") continue;
      const exposedName = `${server}.${tool}`;
      catalog.set(exposedName, {
        server,
        tool,
        bind: serverRules[tool]?.bind ?? [],
        exposedName,
        definition: { ...definition, name: exposedName },
        upstream,
      });
    }
    if (started) onChange();
  };
  const upstreams = Object.entries(inputs).map(
    ([name, input]) => new Upstream(name, input, table, restartBackoffMs, now),
  );
  const close = async (): Promise<void> => {
    await Promise.allSettled(upstreams.map((upstream) => upstream.close()));
  };
  try {
    // Every upstream is tried and every binding checked before refusing, so one start names
    // every problem (an operator fixing them one run at a time restarted once per problem).
    const problems: string[] = [];
    let firstCause: unknown;
    for (const upstream of upstreams) {
      try {
        await upstream.client();
      } catch (error) {
        firstCause ??= error;
        problems.push(
          `upstream ${upstream.name} (${whereIs(inputs[upstream.name])}) could not be reached: ${causes(error)}`,
        );
        continue;
      }
      for (const tool of Object.keys(rules[upstream.name] ?? {})) {
        if (!catalog.has(`${upstream.name}.${tool}`)) {
          problems.push(
            `tools.${upstream.name}.${tool}: upstream ${upstream.name} lists no such tool`,
          );
        }
      }
    }
    if (problems.length > 0) {
      throw new TesseraError("invalid_config", problems.join("; "), {
        ...(firstCause === undefined ? {} : { cause: firstCause }),
      });
    }
  } catch (error) {
    await close();
    throw error;
  }
  started = true;
  return { catalog, close };
}
