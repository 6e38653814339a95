import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { TesseraClientError } from "../src/errors.js";

export interface StubRequest {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
  readonly body: string;
}

/** A local HTTP server whose answers a test scripts, one handler per request in order. */
export async function stubService(
  handlers: readonly ((request: StubRequest, response: ServerResponse) => void)[],
) {
  const seen: StubRequest[] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const entry = {
        method: request.method ?? "",
        url: request.url ?? "",
        authorization: request.headers.authorization,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      const handler = handlers[seen.length] ?? handlers[handlers.length - 1];
      seen.push(entry);
      handler?.(entry, response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_: StubRequest, response: ServerResponse) => {
    response.writeHead(status, { "content-type": "application/json", ...headers });
    response.end(JSON.stringify(body));
  };

/** Drops the connection without an answer, as a crashed or restarted service does. */
export const drop = (_: StubRequest, response: ServerResponse) => {
  response.socket?.destroy();
};

/** What `promise` rejected with, which must be a `TesseraClientError` (else the test fails). */
export async function clientErrorOf(promise: Promise<unknown>): Promise<TesseraClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof TesseraClientError)) throw new Error(`expected a client error: ${error}`);
  return error;
}
