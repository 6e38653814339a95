import type { Socket } from "node:net";
import { HttpProblem } from "./errors.js";

/**
 * What a connection whose request never parsed is answered (Node's `clientError`: a header
 * block over the size limit, a malformed request line or header, headers slower than their
 * timeout). No route ran and no decision was made, so the answer is the service's error shape
 * like any other, not Fastify's default body, which the clients read as an impostor service:
 * 400 and 431 `invalid_request`, and 408 with no body, as docs/service.md says. The connection
 * is closed after it: the parser cannot find the next request's start.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has no one to answer.
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  if (socket.writable) socket.write(rawAnswer(error.code));
  socket.destroy(error);
}

function rawAnswer(code: string | undefined): string {
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
  }
  const [status, reason, message] =
    code === "HPE_HEADER_OVERFLOW"
      ? [431, "Request Header Fields Too Large", "the request's headers are over the size limit"]
      : [400, "Bad Request", "the request is not valid HTTP"];
  const body = JSON.stringify(new HttpProblem("invalid_request", message).body());
  return (
    `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\n` +
    `Content-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}
