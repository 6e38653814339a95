import type { IncomingMessage, ServerResponse } from "node:http";

/** What a route answers: an HTTP status and a JSON body. */
export interface Reply {
  readonly status: number;
  readonly body: unknown;
}

export const MAX_BODY_BYTES = 64 * 1024;

/** A refusal of the request itself (not a decision): `{ error: { code, message } }`. */
export function problem(status: number, code: string, message: string): Reply {
  return { status, body: { error: { code, message } } };
}

/** The body as JSON; a `RangeError` past `MAX_BODY_BYTES`, a `SyntaxError` when not JSON. */
export async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new RangeError("body too large");
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/**
 * The path and query of a request target; undefined when it has no path (`*`, garbage).
 * Origin-form (`/path?query`) is split by hand: `new URL("//", base)` reads `//` as the start
 * of a host name and throws, which once made `GET //` answer 503 before authentication.
 * Absolute-form (`http://host/path`) is read as HTTP/1.1 asks of every server.
 */
export function requestTarget(raw = ""): { path: string; query: URLSearchParams } | undefined {
  if (raw.startsWith("/")) {
    const at = raw.indexOf("?");
    if (at === -1) return { path: raw, query: new URLSearchParams() };
    return { path: raw.slice(0, at), query: new URLSearchParams(raw.slice(at + 1)) };
  }
  if (!URL.canParse(raw)) return undefined;
  const url = new URL(raw);
  if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
  return { path: url.pathname, query: url.searchParams };
}

export function send(response: ServerResponse, { status, body }: Reply): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(body));
}
