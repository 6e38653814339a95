import { statSync } from "node:fs";
import { connect } from "node:net";
import { dirname } from "node:path";
import { isTesseraError, TesseraError } from "@tessera/core";

/**
 * Why a store did not open, in the words of the operator who typed the URL. The backends
 * keep their messages short and never echo a server's text (it may quote keys or IDs); the
 * CLI may say more, because it talks to the person who owns the URL: which option of it is
 * at fault, and whether the server refused the connection, the database is missing or the
 * credentials were refused. The code never changes; only the message gains the cause.
 */
export async function explainOpenFailure(
  error: unknown,
  url: string,
  parse: (url: string) => unknown,
): Promise<unknown> {
  if (!isTesseraError(error)) return error;
  let cause: string | undefined;
  if (error.code === "invalid_config") {
    const options = faultyOptions(url, parse).filter((name) => !error.message.includes(name));
    if (options.length > 0) {
      cause = `at fault: ${options.map((name) => JSON.stringify(name.slice(0, 64))).join(", ")}`;
    }
  } else if (error.code.endsWith("_unavailable")) {
    cause = url.startsWith("sqlite:")
      ? (fileCause(parse(url) as { path: string; create: boolean }) ?? chainCause(error))
      : (chainCause(error) ?? (await serverCause(url)));
  }
  if (cause === undefined) return error;
  const message =
    error.code === "invalid_config" ? `${error.message} (${cause})` : `${error.message}: ${cause}`;
  return new TesseraError(error.code, message, { cause: error });
}

/**
 * The query options the backend's own parser refuses, each tried alone, so the CLI needs no
 * copy of any backend's option list. The parsers are pure: nothing here touches a server.
 */
function faultyOptions(url: string, parse: (url: string) => unknown): string[] {
  const at = url.indexOf("?");
  // A fragment is refused on its own (the parser says so); tried with one option, it would
  // ride on that option's value and name it as the fault.
  if (at === -1 || url.includes("#")) return [];
  const base = url.slice(0, at);
  const parses = (candidate: string) => {
    try {
      parse(candidate);
      return true;
    } catch {
      return false;
    }
  };
  if (!parses(base)) return [];
  const params = new URLSearchParams(url.slice(at + 1));
  return [...new Set(params.keys())].filter(
    (key) => !parses(`${base}?${new URLSearchParams([[key, params.get(key) ?? ""]])}`),
  );
}

function fileCause(config: { path: string; create: boolean }): string | undefined {
  if (config.path === ":memory:") return undefined;
  const directory = dirname(config.path);
  const inDirectory = reach(directory);
  if (inDirectory === "missing") return `the directory ${directory} does not exist`;
  if (inDirectory === "denied") {
    return `permission denied: this user cannot reach the directory ${directory} (a directory on its path is not searchable by this user)`;
  }
  const file = reach(config.path);
  if (file === "denied") {
    return `permission denied: this user cannot reach ${config.path} (its directory is not searchable by this user)`;
  }
  if (!config.create && file === "missing") {
    return `no database file at ${config.path}, and the URL says create=false`;
  }
  return undefined;
}

/**
 * What a stat of the path says. `existsSync` is false both for a path that is not there and
 * for one this user may not reach (EACCES), which sent an operator looking for a missing file
 * when the cause was a permission.
 */
function reach(path: string): "there" | "missing" | "denied" | "unknown" {
  try {
    statSync(path);
    return "there";
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return "missing";
    if (code === "EACCES" || code === "EPERM") return "denied";
    return "unknown";
  }
}

const SYSTEM_CAUSES: Record<string, string> = {
  ECONNREFUSED:
    "connection refused: nothing listens at that host and port (is the server running, is the port right?)",
  ENOTFOUND: "the host name does not resolve",
  EAI_AGAIN: "the host name could not be resolved (DNS)",
  ETIMEDOUT: "the server did not answer in time",
  EHOSTUNREACH: "the host is unreachable",
  ENETUNREACH: "the network is unreachable",
  ECONNRESET: "the server closed the connection (a TLS setting, or not that kind of server?)",
  EACCES: "permission denied",
  SQLITE_CANTOPEN: "the database file cannot be opened (permissions, or not a file?)",
  SQLITE_NOTADB: "the file is not a SQLite database",
  SQLITE_READONLY: "the database file is read-only",
};

/** PostgreSQL SQLSTATEs an operator meets when opening a store. */
const POSTGRES_CAUSES: Record<string, string> = {
  "3D000": "the database does not exist",
  "28P01": "authentication failed: the password was refused",
  "28000":
    "authentication failed: the server does not let this role connect (no such role, or no pg_hba.conf entry)",
  "42501": "permission denied: the role lacks a privilege the store needs (its schema or tables)",
  "53300": "the server has too many connections",
  "57P03": "the server is starting up or shutting down",
};

/** The first cause in the error chain that has a code we can name. */
function chainCause(error: unknown): string | undefined {
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 8; depth++) {
    const code = (at as { code?: unknown }).code;
    if (typeof code === "string") {
      const known = SYSTEM_CAUSES[code] ?? POSTGRES_CAUSES[code];
      if (known) return known;
    }
    at = at instanceof AggregateError && at.errors.length > 0 ? at.errors[0] : at.cause;
  }
  return undefined;
}

const DEFAULT_PORTS: Record<string, number> = {
  "postgres:": 5432,
  "postgresql:": 5432,
  "redis:": 6379,
  "rediss:": 6379,
};
const PROBE_TIMEOUT_MS = 2_000;

/**
 * When the chain names no cause (the Redis client reports only "Connection is closed.", a
 * PostgreSQL handshake that timed out carries no code), ask the server once ourselves: a
 * TCP connect tells refused from unreachable; a PostgreSQL SSLRequest or a Redis PING tells
 * the right server from a stranger on that port; and for plain Redis the same AUTH and
 * SELECT the client sent tell a refused password from a missing database.
 */
async function serverCause(url: string): Promise<string | undefined> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, "");
  const port = Number(parsed.port || DEFAULT_PORTS[parsed.protocol]);
  if (host === "" || !Number.isInteger(port)) return undefined;
  if (parsed.protocol === "rediss:") {
    // TLS: only the connect itself can be asked without a TLS client.
    const reply = await ask(host, port, undefined, () => true);
    return reply.error === undefined ? undefined : SYSTEM_CAUSES[reply.error];
  }
  if (parsed.protocol === "redis:") return redisCause(host, port, parsed);
  return postgresCause(host, port);
}

const stranger = (kind: string) =>
  `the connection was accepted, but nothing answered as ${kind} (wrong port, a TLS setting, or a proxy in the way?)`;

/** An SSLRequest: every PostgreSQL server answers it with one byte, `S` or `N`. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

async function postgresCause(host: string, port: number): Promise<string | undefined> {
  const reply = await ask(host, port, SSL_REQUEST, (data) => data.length >= 1);
  if (reply.error !== undefined) return SYSTEM_CAUSES[reply.error];
  const answer = reply.data.subarray(0, 1).toString("latin1");
  return answer === "S" || answer === "N" ? undefined : stranger("PostgreSQL");
}

async function redisCause(host: string, port: number, url: URL): Promise<string | undefined> {
  const commands: string[][] = [];
  const password = decodeURIComponent(url.password);
  const user = decodeURIComponent(url.username);
  if (password !== "") commands.push(user === "" ? ["AUTH", password] : ["AUTH", user, password]);
  const db = url.pathname.slice(1);
  if (db !== "") commands.push(["SELECT", db]);
  commands.push(["PING"]);
  const lines = (data: Buffer) =>
    data
      .toString("utf8")
      .split("\r\n")
      .filter((line) => /^[+\-:]/.test(line));
  const reply = await ask(
    host,
    port,
    Buffer.from(commands.map(resp).join("")),
    (data) => lines(data).length >= commands.length,
  );
  if (reply.error !== undefined) return SYSTEM_CAUSES[reply.error];
  const answers = lines(reply.data);
  const refusal = answers.find((line) => line.startsWith("-"));
  if (refusal === undefined) return answers.includes("+PONG") ? undefined : stranger("Redis");
  if (/^-(WRONGPASS|ERR invalid password|ERR AUTH)/.test(refusal)) {
    return "authentication failed: the user name or password was refused";
  }
  if (refusal.startsWith("-NOAUTH")) {
    return "authentication required: the server wants a password (put it in the URL)";
  }
  if (/^-ERR (DB index|invalid DB index)/.test(refusal))
    return "the database number does not exist";
  return undefined;
}

/** Connects, sends `payload`, and collects what comes back until `enough` or a close. */
function ask(
  host: string,
  port: number,
  payload: Buffer | undefined,
  enough: (data: Buffer) => boolean,
): Promise<{ error?: string; data: Buffer }> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let data = Buffer.alloc(0);
    let connected = false;
    const done = (error?: string) => {
      socket.destroy();
      resolve(error === undefined ? { data } : { error, data });
    };
    // Silence after a connect is an answer too (a server of another kind waiting for more).
    socket.setTimeout(PROBE_TIMEOUT_MS, () => done(connected ? undefined : "ETIMEDOUT"));
    socket.on("error", (error: NodeJS.ErrnoException) => done(error.code ?? "ECONNRESET"));
    socket.on("connect", () => {
      connected = true;
      if (payload === undefined) done();
      else socket.write(payload);
    });
    socket.on("data", (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (enough(data)) done();
    });
    socket.on("close", () => done());
  });
}

function resp(command: readonly string[]): string {
  return `*${command.length}\r\n${command.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join("")}`;
}
