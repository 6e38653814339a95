import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type CallToolResult, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { UpstreamLost, UpstreamUnreached } from "./http-fetch.js";
import { CallTransport } from "./upstream-http.js";
import type { CatalogEntry } from "./upstreams.js";

/*
 * One call sent upstream, and what its ending means. A call that may have reached the
 * upstream's tool and has no answer is in doubt (it is never sent again); one the upstream
 * answered with an error, or provably never received, failed. Which is which is told by where
 * the error came from, never by its number: an upstream may send any JSON-RPC code, including
 * the -32000 and -32001 the SDK uses for its own closed connection and timeout.
 */

export type Forwarded =
  | { readonly kind: "result"; readonly result: CallToolResult }
  | {
      readonly kind: "failed";
      readonly why: string;
      /** False when nothing reached the upstream (no connection, an unknown session). */
      readonly sent: boolean;
    }
  | { readonly kind: "in_doubt"; readonly why: string };

/** The SDK's own request timeout, never reached: the call's deadline is this module's. */
const NO_SDK_TIMEOUT = 2_147_483_647;

export async function forward(
  entry: CatalogEntry,
  args: Record<string, unknown>,
  timeoutMs: number,
): Promise<Forwarded> {
  const upstream = entry.upstream;
  let client: Client;
  try {
    // A client that exited is restarted here, for this new call (never for one in doubt).
    client = await upstream.client();
  } catch {
    return { kind: "failed", why: "upstream not connected", sent: false };
  }
  // The deadline is a signal of our own, rejecting with this very object: a -32001 the
  // upstream sends cannot pass for it. Over HTTP it also aborts the request (see upstream-http.ts).
  const deadline = new AbortController();
  let timedOut: McpError | undefined;
  const timer = setTimeout(() => {
    timedOut = new McpError(ErrorCode.RequestTimeout, `no answer in ${timeoutMs} ms`);
    deadline.abort(timedOut);
  }, timeoutMs);
  const transport = client.transport;
  const request = (): Promise<CallToolResult> =>
    client.callTool({ name: entry.tool, arguments: args }, undefined, {
      signal: deadline.signal,
      timeout: NO_SDK_TIMEOUT,
    }) as Promise<CallToolResult>;
  try {
    const result = await upstream.run(client, () =>
      transport instanceof CallTransport
        ? transport.sendingWith(deadline.signal, request)
        : request(),
    );
    return { kind: "result", result };
  } catch (error) {
    if (timedOut !== undefined && error === timedOut)
      return { kind: "in_doubt", why: `no answer in ${timeoutMs} ms` };
    const outcome = ending(error, client, transport);
    if (outcome.retire) upstream.retire(client);
    return outcome.forwarded;
  } finally {
    clearTimeout(timer);
  }
}

function ending(
  error: unknown,
  client: Client,
  transport: unknown,
): { readonly forwarded: Forwarded; readonly retire: boolean } {
  const inDoubt = (why: string, retire = false) => ({
    forwarded: { kind: "in_doubt", why } as const,
    retire,
  });
  const failed = (why: string, sent: boolean, retire = false) => ({
    forwarded: { kind: "failed", why, sent } as const,
    retire,
  });
  // The SDK's own "connection closed" comes after it detached the transport (Protocol._onclose);
  // the same code from an upstream that is still connected is that upstream's answer.
  if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
    if (client.transport === undefined) return inDoubt("the upstream connection closed");
  }
  if (error instanceof McpError) return failed(`upstream error ${error.code}`, true);
  if (error instanceof UpstreamLost) {
    return inDoubt("the connection was lost after the request was sent", true);
  }
  if (error instanceof UpstreamUnreached)
    return failed("the upstream was not reached", false, true);
  if (error instanceof StreamableHTTPError) {
    // 404 to a request carrying a session ID: the upstream no longer knows the session (it
    // restarted, say) and ran nothing; the spec's answer is a new session.
    const sessioned = (transport as CallTransport | undefined)?.sessionId !== undefined;
    if (error.code === 404 && sessioned) {
      return failed("the upstream no longer knows the session", false, true);
    }
    return failed(`upstream answered HTTP ${error.code}`, true);
  }
  if (error instanceof Error && /not connected/i.test(error.message)) {
    return failed("upstream not connected", false);
  }
  return failed("malformed upstream result", true);
}
