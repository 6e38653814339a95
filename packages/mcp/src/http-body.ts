import type { IncomingMessage, ServerResponse } from "node:http";

/** The HTTP side of the gateway's Streamable HTTP endpoint: headers, JSON-RPC errors, bodies. */

export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function rpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

/** The ids of the JSON-RPC requests in a message or batch, as keys (1 and "1" differ). */
export function requestIds(body: unknown): string[] {
  const ids: string[] = [];
  for (const message of Array.isArray(body) ? body : [body]) {
    if (typeof message !== "object" || message === null || !("method" in message)) continue;
    const id = (message as { id?: unknown }).id;
    if (typeof id === "string") ids.push(`s:${id}`);
    else if (typeof id === "number") ids.push(`n:${id}`);
  }
  return ids;
}

/** Whether a JSON-RPC batch holds two requests with one id (JSON-RPC answers each id once). */
export function repeatsAnId(body: unknown): boolean {
  if (!Array.isArray(body) || body.length < 2) return false;
  const ids = requestIds(body);
  return new Set(ids).size !== ids.length;
}

export type Read =
  | { readonly kind: "ok"; readonly value: unknown }
  | { readonly kind: "too_large" }
  | { readonly kind: "not_json" };

/** The body, refused past `limit` bytes without buffering the rest. */
export async function readJson(req: IncomingMessage, limit: number): Promise<Read> {
  const declared = Number(header(req, "content-length"));
  if (Number.isFinite(declared) && declared > limit) return { kind: "too_large" };
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) return { kind: "too_large" };
    chunks.push(chunk as Buffer);
  }
  try {
    return { kind: "ok", value: JSON.parse(Buffer.concat(chunks).toString("utf8")) };
  } catch {
    return { kind: "not_json" };
  }
}
