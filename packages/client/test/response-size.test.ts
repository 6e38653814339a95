import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { createTesseraClient, TesseraClientError } from "../src/index.js";
import { clientErrorOf, type StubRequest, stubService } from "./stub.js";

/**
 * An answer's body is read up to `maxResponseBytes` (64 MiB by default), never further: before,
 * a service (or an impostor, or a proxy serving a download) streaming a body without end filled
 * the host's memory until the attempt's deadline, 3.5 GB in 8 s on loopback.
 */
const fast = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };
const MIB = 1024 * 1024;

let stub: Awaited<ReturnType<typeof stubService>> | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

/** A valid tools answer of about `size` bytes, chunked (no Content-Length) or declared. */
function bigTools(size: number, declared: boolean) {
  const body = `{"tools":["${"a".repeat(size)}"]}`;
  return (_: StubRequest, response: ServerResponse) => {
    response.writeHead(200, {
      "content-type": "application/json",
      ...(declared ? { "content-length": String(Buffer.byteLength(body)) } : {}),
    });
    const step = 64 * 1024;
    const write = (from: number): void => {
      for (let at = from; at < body.length; at += step) {
        if (response.destroyed) return; // the client stopped reading and closed
        if (!response.write(body.slice(at, at + step))) {
          response.once("drain", () => write(at + step));
          return;
        }
      }
      response.end();
    };
    write(0);
  };
}

describe("an answer longer than maxResponseBytes", () => {
  it("is invalid_response, not read to its end and not retried (no Content-Length)", async () => {
    stub = await stubService([bigTools(4 * MIB, false)]);
    const client = createTesseraClient({ url: stub.url, retry: fast, maxResponseBytes: MIB });
    const error = await clientErrorOf(client.tools());
    expect(error).toMatchObject({ code: "invalid_response", status: 200, attempts: 1 });
    expect(error.message).toContain("maxResponseBytes");
    expect(stub.seen).toHaveLength(1);
  });

  it("is refused from its Content-Length, before it is read", async () => {
    stub = await stubService([bigTools(4 * MIB, true)]);
    const client = createTesseraClient({ url: stub.url, retry: fast, maxResponseBytes: MIB });
    const error = await clientErrorOf(client.tools());
    expect(error).toMatchObject({ code: "invalid_response", status: 200, attempts: 1 });
  });

  it("an answer within the limit is read as before", async () => {
    stub = await stubService([bigTools(MIB / 2, false)]);
    const client = createTesseraClient({ url: stub.url, retry: fast, maxResponseBytes: MIB });
    const answer = await client.tools();
    expect(answer.tools[0]).toHaveLength(MIB / 2);
  });
});

describe("a maxResponseBytes the client cannot use", () => {
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
    "is invalid_config when the client is made (%s)",
    (maxResponseBytes) => {
      let error: unknown;
      try {
        createTesseraClient({ url: "http://127.0.0.1:1", maxResponseBytes });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(TesseraClientError);
      expect(error).toMatchObject({ code: "invalid_config", field: "maxResponseBytes" });
    },
  );
});
