import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { principal, type Service, startService } from "./support/service.js";

/**
 * Requests Node's parser refuses before any route runs are answered in the service's error
 * shape (`{ error: { code, message } }`), which the clients read, not Fastify's default body.
 */
const alice = principal("token-alice", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
  owner: "alice",
});

let service: Service;
beforeAll(async () => {
  service = await startService([alice.config]);
});
afterAll(async () => {
  await service?.close();
});

/** Writes `request` as raw bytes and reads everything the server sends until it closes. */
function rawExchange(request: string): Promise<{ status: number; headers: string; body: string }> {
  const { hostname, port } = new URL(service.server.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    let answer = "";
    socket.on("data", (chunk) => {
      answer += chunk;
    });
    socket.on("error", () => {}); // a reset after the answer is a close like any other
    socket.on("close", () => {
      const [head = "", body = ""] = answer.split("\r\n\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
      if (Number.isNaN(status)) reject(new Error(`no HTTP answer: ${JSON.stringify(answer)}`));
      else resolve({ status, headers: head, body });
    });
  });
}

describe("requests that never parsed", () => {
  it("headers over the size limit: 431 invalid_request in the service's shape", async () => {
    const answer = await rawExchange(
      `GET /v1/tools HTTP/1.1\r\nHost: t\r\nX-Pad: ${"x".repeat(20_000)}\r\n\r\n`,
    );
    expect(answer.status).toBe(431);
    expect(answer.headers).toMatch(/content-type: application\/json/i);
    expect(JSON.parse(answer.body)).toEqual({
      error: { code: "invalid_request", message: expect.stringContaining("headers") },
    });
  });

  it("a malformed header line: 400 invalid_request in the service's shape", async () => {
    const answer = await rawExchange("GET /healthz HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n");
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toEqual({
      error: { code: "invalid_request", message: "the request is not valid HTTP" },
    });
  });
});
