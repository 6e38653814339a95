import { setMaxListeners } from "node:events";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

/**
 * The global `fetch` with the warning about abort listeners turned off for the SDK transport's
 * signal. The transport hands its one signal to every request, and undici keeps a listener on
 * it per request until that request is collected. Nothing leaks, but past the limit every call
 * printed a `MaxListenersExceededWarning` (about 20,000 lines a run) from this process while it
 * was being measured.
 */
const quietSignals = new WeakSet<AbortSignal>();
const quietFetch: typeof fetch = (input, init) => {
  const signal = init?.signal;
  if (signal && !quietSignals.has(signal)) {
    quietSignals.add(signal);
    setMaxListeners(0, signal);
  }
  return fetch(input, init);
};

/** The bench's SDK client over Streamable HTTP, with `token` as its bearer when given. */
export async function client(url: string, token?: string): Promise<Client> {
  const c = new Client({ name: "bench-client", version: "1.0.0" });
  await c.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      fetch: quietFetch,
      ...(token === undefined
        ? {}
        : { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    }),
  );
  return c;
}
