import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { DrainingTransport, GATEWAY_STOPPING } from "./stdio-drain.js";
import type { McpTransport } from "./types.js";

/** A connection whose client side is this test: what it receives, and what was written back. */
function connection() {
  const written: JSONRPCMessage[] = [];
  let closed = false;
  const inner: McpTransport = {
    start: async () => {},
    send: async (message) => {
      written.push(message);
    },
    close: async () => {
      closed = true;
      inner.onclose?.();
    },
  };
  const transport = new DrainingTransport(inner);
  const taken: JSONRPCMessage[] = [];
  transport.onmessage = (message) => taken.push(message);
  const receive = (message: object) => inner.onmessage?.(message as JSONRPCMessage);
  const answer = (id: number) => transport.send({ jsonrpc: "2.0", id, result: {} });
  return { transport, written, taken, receive, answer, closed: () => closed };
}

const call = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "x" } });

describe("DrainingTransport", () => {
  it("stops taking requests, waits for the answers under way, then closes", async () => {
    const c = connection();
    await c.transport.start();
    c.receive(call(1));
    c.receive(call(1)); // a live id repeated: both answers are waited for
    let stopped = false;
    const stopping = c.transport.stop(60_000).then(() => {
      stopped = true;
    });
    c.receive(call(2));
    expect(c.taken.map((m) => "id" in m && m.id)).toEqual([1, 1]);
    expect(c.written).toEqual([{ jsonrpc: "2.0", id: 2, error: GATEWAY_STOPPING }]);
    await c.answer(1);
    await Promise.resolve();
    expect(stopped).toBe(false);
    await c.answer(1);
    await stopping;
    expect(c.closed()).toBe(true);
  });

  it("does not wait for a request the client cancelled (the SDK answers none)", async () => {
    const c = connection();
    await c.transport.start();
    c.receive(call(7));
    const stopping = c.transport.stop(60_000);
    c.receive({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7 } });
    await stopping;
    expect(c.closed()).toBe(true);
    // The cancellation still reached the server, so the handler was told.
    expect(c.taken.map((m) => "method" in m && m.method)).toEqual([
      "tools/call",
      "notifications/cancelled",
    ]);
  });

  it("cuts after drainMs an answer that does not come", async () => {
    const c = connection();
    await c.transport.start();
    c.receive(call(1));
    const began = Date.now();
    await c.transport.stop(50);
    expect(Date.now() - began).toBeGreaterThanOrEqual(45);
    expect(c.closed()).toBe(true);
  });

  it("closes at once with nothing under way", async () => {
    const c = connection();
    await c.transport.start();
    c.receive(call(1));
    await c.answer(1);
    await c.transport.stop(60_000);
    expect(c.closed()).toBe(true);
  });
});
