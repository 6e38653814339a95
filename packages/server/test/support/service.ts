import { mkdtempSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type GrantInput, openStores, type StoreBundle } from "@tessera/core";
import { GATE_CATALOG, GATE_CATALOG_ID } from "@tessera/testkit";
import { listen, type RunningServer } from "../../src/listen.js";
import { type Principal, type PrincipalInput, tokenDigest } from "../../src/principals.js";

/** A principal for tests: the token in clear (for requests) beside its configured identity. */
export function principal(token: string, identity: Omit<PrincipalInput, "tokenSha256">) {
  return {
    token,
    config: { tokenSha256: tokenDigest(token), role: "agent", ...identity } as Principal,
  };
}

/** Alice's agent `asker` in namespace `team`, acting for her under the host's authority. */
export const ASKER = principal("alice-token", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

export interface Service {
  readonly stores: StoreBundle;
  readonly server: RunningServer;
  close(): Promise<void>;
}

/** The real service on a loopback port (`listen`), over a fresh SQLite store holding `grants`. */
export async function startService(
  principals: readonly Principal[],
  grants: readonly GrantInput[] = [],
): Promise<Service> {
  const dir = mkdtempSync(join(tmpdir(), "tessera-serve-"));
  const stores = await openStores(`sqlite:${join(dir, "t.db")}`);
  for (const grant of grants) await stores.grants.add(grant);
  const server = await listen({ stores, principals, port: 0, log: false });
  return {
    stores,
    server,
    close: async () => {
      await server.close();
      await stores.close();
    },
  };
}

export async function authorize(base: string, token: string | null, body: unknown) {
  const reply = await fetch(`${base}/v1/authorize`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify(body),
  });
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
}

export async function explainCall(base: string, token: string, callId: string) {
  const reply = await fetch(`${base}/v1/explain?callId=${encodeURIComponent(callId)}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
}

/**
 * Sends `target` exactly as given in the request line (fetch would normalise `//` or an
 * absolute URL before it reaches the server).
 */
export function rawRequest(
  base: string,
  target: string,
  token?: string,
): Promise<{ status: number; body: unknown }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const sent = request(
      {
        host: hostname.replace(/^\[|\]$/g, ""),
        port,
        path: target,
        method: "GET",
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      },
      (reply) => {
        const chunks: Buffer[] = [];
        reply.on("data", (chunk: Buffer) => chunks.push(chunk));
        reply.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: reply.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
        });
      },
    );
    sent.on("error", reject);
    sent.end();
  });
}

/** A single-use ticket for `recipient`, owned by `owner`, issued by `issuer` to `subject`. */
export function ticket(
  id: string,
  recipient: string,
  options: { owner?: string; issuer?: string; subject?: string; purposes?: string[] } = {},
): GrantInput {
  return {
    id,
    namespaceId: "team",
    issuer: options.issuer ?? "host",
    subject: options.subject ?? "asker",
    capabilities: [
      {
        resource: { namespace: "messages", path: [recipient], owner: options.owner ?? "alice" },
        actions: ["messages.send"],
        scope: "exact",
      },
    ],
    constraints: {
      maxUses: 1,
      ...(options.purposes === undefined ? {} : { purposes: options.purposes }),
    },
    issuedAt: new Date(Date.now() - 60_000).toISOString(),
  };
}

export const send = (recipient: string, callId: string, owner = "alice") => ({
  action: "messages.send",
  resource: { namespace: "messages", path: [recipient], owner },
  callId,
});

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: a test reads any field of the JSON answer
  readonly body: any;
}

/** One request to the service; `body` is sent as JSON unless `raw` is given. */
export async function call(
  base: string,
  method: string,
  path: string,
  options: {
    token?: string;
    body?: unknown;
    raw?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<Answer> {
  const hasBody = options.body !== undefined || options.raw !== undefined;
  const reply = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(hasBody ? { "content-type": "application/json" } : {}),
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      ...options.headers,
    },
    ...(hasBody ? { body: options.raw ?? JSON.stringify(options.body) } : {}),
  });
  const text = await reply.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // /metrics is text
  }
  return { status: reply.status, headers: reply.headers, body };
}

/** The testkit's one-function catalog (an agent-callable `add`): a call that runs is observable. */
export const CATALOG_ID = GATE_CATALOG_ID;
export const CATALOG = GATE_CATALOG;

/** An A2UI v1.0 `callRendererFunction` message for `CATALOG`. */
export function a2uiCall(functionCallId: string, args: unknown = { a: 1, b: 2 }, call = "add") {
  return {
    version: "v1.0",
    callRendererFunction: { functionCallId, callFunction: { call, catalogId: CATALOG_ID, args } },
  };
}

/**
 * `port` with one method replaced, every other member read from the port itself (its methods
 * bound to it, so private fields still work): a store made slow, failing or watched in one
 * call only, for a service of the test's own.
 */
export function replacingMethod<T extends object, K extends keyof T>(
  port: T,
  name: K,
  replacement: T[K],
): T {
  return new Proxy(port, {
    get(target, property) {
      if (property === name) return replacement;
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
