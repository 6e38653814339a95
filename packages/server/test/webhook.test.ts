import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { MessageEnvelope } from "@tessera/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyWebhookSignature, webhookTransport } from "../src/transport/webhook.js";

/** The webhook transport against a real local receiver. */
const SECRET = "bob-secret-0123456789";
let receiver: Server;
let base: string;
const received: {
  body: string;
  signature: string | undefined;
  traceparent: string | undefined;
}[] = [];
const behaviour: Record<string, (req: IncomingMessage, res: ServerResponse, body: string) => void> =
  {
    "/ok": (_req, res, body) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ got: JSON.parse(body).payload }));
    },
    "/empty": (_req, res) => res.writeHead(204).end(),
    "/slow": () => {
      // never answers
    },
    "/boom": (_req, res) => res.writeHead(503).end("down"),
    "/nope": (_req, res) => res.writeHead(401).end(),
    "/text": (_req, res) => res.writeHead(200).end("not json"),
    // 5,000 levels in 30 KB: under the size bound, past the depth one.
    "/deep": (_req, res) => res.writeHead(200).end(`${"[".repeat(5_000)}${"]".repeat(5_000)}`),
    "/deep-64": (_req, res) => res.writeHead(200).end(`${"[".repeat(64)}${"]".repeat(64)}`),
    "/moved": (_req, res) => res.writeHead(302, { location: "/ok" }).end(),
    "/moved-for-good": (_req, res) => res.writeHead(308, { location: `${base}/ok` }).end(),
    "/not-modified": (_req, res) => res.writeHead(304).end(),
    // A JSON array that never ends, written as fast as the client reads it.
    "/endless": (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      stream(res, "[", "0,");
    },
    // Says 100 MiB are coming, sends a first chunk, then holds the connection open.
    "/huge-declared": (_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": 100 * MIB });
      res.write(`[${"0,".repeat(1024)}`);
    },
    "/endless-error": (_req, res) => {
      res.writeHead(503, { "content-type": "text/plain" });
      stream(res, "", "down ");
    },
  };

const MIB = 1024 * 1024;
/** Bytes each endless answer wrote before the client let go of it. */
const streamed: number[] = [];

/** Writes `head`, then `unit` over and over while the client reads, until it hangs up. */
function stream(res: ServerResponse, head: string, unit: string): void {
  const chunk = unit.repeat(Math.ceil((64 * 1024) / unit.length));
  let written = 0;
  let open = true;
  res.on("close", () => {
    open = false;
    streamed.push(written);
  });
  const more = () => {
    while (open) {
      written += chunk.length;
      if (!res.write(chunk)) {
        res.once("drain", more);
        return;
      }
    }
  };
  res.write(head);
  more();
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      received.push({
        body,
        signature: req.headers["tessera-signature"] as string | undefined,
        traceparent: req.headers.traceparent as string | undefined,
      });
      behaviour[req.url ?? ""]?.(req, res, body);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});

afterAll(() => {
  receiver.closeAllConnections();
  receiver.close();
});

const envelope = (recipient: string): MessageEnvelope => ({
  messageId: "m-1",
  sender: "asker",
  recipient,
  payload: { q: "lunch?" },
  traceId: "t-1",
  callId: "c-1",
  grantId: "g-1",
});

const transportTo = (path: string, timeoutMs = 2000) =>
  webhookTransport({ recipients: { bob: { url: `${base}${path}`, secret: SECRET } }, timeoutMs });

describe("webhook transport", () => {
  it("POSTs the envelope signed over timestamp and body; the receiver's check verifies it", async () => {
    const result = await transportTo("/ok").deliver(envelope("bob"));
    expect(result).toEqual({ status: "delivered", reply: { got: { q: "lunch?" } } });
    const last = received.at(-1);
    expect(JSON.parse(last?.body ?? "")).toMatchObject({ messageId: "m-1", recipient: "bob" });
    expect(
      verifyWebhookSignature({ secret: SECRET, body: last?.body ?? "", header: last?.signature }),
    ).toBe(true);
    // Another secret, a changed body, a stale timestamp: refused.
    const check = { secret: SECRET, body: last?.body ?? "", header: last?.signature };
    expect(verifyWebhookSignature({ ...check, secret: "another-secret-0123" })).toBe(false);
    expect(verifyWebhookSignature({ ...check, body: `${check.body} ` })).toBe(false);
    expect(verifyWebhookSignature({ ...check, now: Math.floor(Date.now() / 1000) + 3600 })).toBe(
      false,
    );
    expect(verifyWebhookSignature({ ...check, header: undefined })).toBe(false);
  });

  it("sends a traceparent with the envelope's W3C trace ID, none for another kind of ID", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    await transportTo("/ok").deliver({ ...envelope("bob"), traceId });
    // Not traced by the service (no request span): a fresh parent ID, not sampled.
    expect(received.at(-1)?.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    expect(received.at(-1)?.traceparent).not.toMatch(/-0{16}-/);
    // A host's own kernel may name its traces anyhow: "t-1" is no W3C trace ID.
    await transportTo("/ok").deliver(envelope("bob"));
    expect(received.at(-1)?.traceparent).toBeUndefined();
  });

  it("delivers with no reply on an empty 2xx", async () => {
    expect(await transportTo("/empty").deliver(envelope("bob"))).toEqual({ status: "delivered" });
  });

  it("fails with timeout when the receiver does not answer in time", async () => {
    const started = Date.now();
    expect(await transportTo("/slow", 200).deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "timeout",
    });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("maps a 5xx, a 4xx and a non-JSON reply to failures with codes", async () => {
    expect(await transportTo("/boom").deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "receiver_error",
    });
    expect(await transportTo("/nope").deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "rejected",
    });
    expect(await transportTo("/text").deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "invalid_reply",
    });
  });

  it("reads no reply past 64 KiB: an endless or oversized 2xx is invalid_reply, a streaming 5xx receiver_error", async () => {
    // The whole body was read before its size was checked: an endless one until the timeout
    // ("timeout"), a large one into memory (400 MB took the service from 94 MB to 1.3 GB).
    const before = streamed.length;
    expect(await transportTo("/endless", 30_000).deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "invalid_reply",
    });
    expect(await transportTo("/huge-declared", 30_000).deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "invalid_reply",
    });
    expect(await transportTo("/endless-error", 30_000).deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "receiver_error",
    });
    // Once refused, the answers are let go: their receivers see the connection close.
    await expect.poll(() => streamed.length - before).toBe(2);
    for (const bytes of streamed.slice(before)) expect(bytes).toBeLessThan(64 * MIB);
  }, 60_000);

  it("fails invalid_reply on a reply nested past 64 levels; 64 are delivered", async () => {
    expect(await transportTo("/deep").deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "invalid_reply",
    });
    const at64 = await transportTo("/deep-64").deliver(envelope("bob"));
    expect(at64.status).toBe("delivered");
  });

  it("answers receiver_error to a 3xx: the receiver answered, and a redirect is never followed", async () => {
    for (const path of ["/moved", "/moved-for-good", "/not-modified"]) {
      const before = received.length;
      expect(await transportTo(path).deliver(envelope("bob")), path).toEqual({
        status: "failed",
        code: "receiver_error",
      });
      // One POST, to the receiver's own URL: the signed body went nowhere else.
      expect(received.length - before, path).toBe(1);
    }
  });

  it("fails with unreachable on a refused connection, and no_route for an unknown recipient: both sent nothing", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refused = webhookTransport({
      recipients: { bob: { url: `http://127.0.0.1:${port}/x`, secret: SECRET } },
    });
    expect(await refused.deliver(envelope("bob"))).toEqual({
      status: "failed",
      code: "unreachable",
      sent: false,
    });
    expect(await transportTo("/ok").deliver(envelope("carol"))).toEqual({
      status: "failed",
      code: "no_route",
      sent: false,
    });
  });
});
