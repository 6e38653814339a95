import { afterEach, describe, expect, it } from "vitest";
import { createTesseraClient, TesseraClientError } from "../src/index.js";
import { clientErrorOf, json, stubService } from "./stub.js";

/**
 * Mistakes the caller can fix are refused here, once, with a code of their own: before, a token
 * with a newline (fetch will not put it in a header) was retried with backoff and ended as
 * `service_unreachable`, and a grant ID of "." was revoked as "nothing revoked".
 */

const fast = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };

let stub: Awaited<ReturnType<typeof stubService>> | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

function thrownBy(make: () => unknown): unknown {
  try {
    make();
  } catch (error) {
    return error;
  }
  throw new Error("nothing was thrown");
}

describe("a token fetch cannot send", () => {
  it.each([
    ["a newline", "tsk_a\nb"],
    ["a trailing CR LF", "tsk_ab\r\n"],
    ["a control character", "tsk_a\u0001b"],
    ["a space", "tsk_a b"],
    ["a character above U+00FF", "tsk_a€b"],
    ["nothing", ""],
  ])("is invalid_config when the client is made (%s), and the message hides it", (_, token) => {
    const error = thrownBy(() => createTesseraClient({ url: "http://127.0.0.1:1", token }));
    expect(error).toBeInstanceOf(TesseraClientError);
    expect(error).toMatchObject({ code: "invalid_config", field: "token" });
    if (token !== "") expect((error as Error).message).not.toContain(token.trim());
  });

  it("takes the tokens the service mints and JWTs", () => {
    for (const token of ["tsk_Zx9-_.~+/=", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"]) {
      expect(() => createTesseraClient({ url: "http://127.0.0.1:1", token })).not.toThrow();
    }
  });

  it("a URL that is not absolute http(s) is invalid_config too", () => {
    for (const url of ["127.0.0.1:8787", "ftp://h/", "not a url"]) {
      expect(thrownBy(() => createTesseraClient({ url }))).toMatchObject({
        code: "invalid_config",
        field: "url",
      });
    }
  });
});

describe("a request fetch refuses to build", () => {
  it("is invalid_input after one attempt, not service_unreachable after retries", async () => {
    stub = await stubService([json(200, { tools: [] })]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    // A BigInt is a TypeError from JSON.stringify, before anything is sent.
    const error = await clientErrorOf(
      client.sendMessage({ recipient: "bob", payload: { n: 1n }, callId: "c-1" }),
    );
    expect(error).toMatchObject({ code: "invalid_input", attempts: 1 });
    expect(error.message).toContain("BigInt");
    expect(stub.seen).toHaveLength(0);
  });

  it("a fetch that throws a TypeError without a cause is not retried", async () => {
    let calls = 0;
    const client = createTesseraClient({
      url: "http://127.0.0.1:1",
      token: "t",
      retry: fast,
      fetch: async () => {
        calls++;
        throw new TypeError('Headers.append: "x" is an invalid header value.');
      },
    });
    const error = await clientErrorOf(client.tools());
    expect(error).toMatchObject({ code: "invalid_input", attempts: 1 });
    expect(calls).toBe(1);
  });

  it("a network failure (fetch failed, with its cause) is still retried", async () => {
    let calls = 0;
    const client = createTesseraClient({
      url: "http://127.0.0.1:1",
      token: "t",
      retry: fast,
      fetch: async () => {
        calls++;
        throw new TypeError("fetch failed", {
          cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
        });
      },
    });
    const error = await clientErrorOf(client.tools());
    expect(error).toMatchObject({ code: "service_unreachable", attempts: 3 });
    expect(calls).toBe(3);
  });
});

describe("revokeGrant of a grant whose ID a URL path cannot name", () => {
  it.each([".", ".."])("refuses %j locally, naming the way to revoke it", async (id) => {
    stub = await stubService([json(200, { revoked: false })]);
    const client = createTesseraClient({ url: stub.url, token: "t" });
    const error = await clientErrorOf(client.revokeGrant(id));
    expect(error).toMatchObject({ code: "invalid_input", field: "grantId" });
    expect(error.message).toContain("cannot be named in a URL path");
    expect(error.message).toContain(`tessera grants revoke --id ${id} --store`);
    // Nothing reached the service: before, "." was sent as DELETE /v1/grants/ and answered
    // { revoked: false } while the grant stayed active.
    expect(stub.seen).toHaveLength(0);
  });

  it("still sends an ID with dots that is not a whole segment of dots", async () => {
    stub = await stubService([json(200, { revoked: true })]);
    const client = createTesseraClient({ url: stub.url, token: "t" });
    await expect(client.revokeGrant("...")).resolves.toEqual({ revoked: true });
    await expect(client.revokeGrant("a/.")).resolves.toEqual({ revoked: true });
    expect(stub.seen.map((r) => r.url)).toEqual(["/v1/grants/...", "/v1/grants/a%2F."]);
  });
});

describe("a URL with credentials in it", () => {
  it.each([
    "http://alice:hunter2@127.0.0.1:8787",
    "http://:hunter2@127.0.0.1:8787/",
    "https://alice@tessera.example",
  ])("is invalid_config when the client is made, and the message hides them (%s)", (url) => {
    const error = thrownBy(() => createTesseraClient({ url, token: "t" }));
    expect(error).toBeInstanceOf(TesseraClientError);
    expect(error).toMatchObject({ code: "invalid_config", field: "url" });
    expect((error as Error).message).not.toContain("hunter2");
    expect((error as Error).message).not.toContain("alice");
  });
});

describe("a URL with a query or a fragment", () => {
  it.each(["http://127.0.0.1:8787/?x=1", "http://127.0.0.1:8787/#frag", "http://127.0.0.1:8787?"])(
    "is invalid_config when the client is made: the routes would land inside it (%s)",
    (url) => {
      const error = thrownBy(() => createTesseraClient({ url, token: "t" }));
      expect(error).toMatchObject({ code: "invalid_config", field: "url" });
    },
  );

  it("a base path is kept", () => {
    expect(() => createTesseraClient({ url: "http://127.0.0.1:8787/tessera/" })).not.toThrow();
  });
});

describe("a retry policy a timer cannot follow", () => {
  it("is invalid_config naming the field, when the client is made", () => {
    const error = thrownBy(() =>
      createTesseraClient({ url: "http://127.0.0.1:1", retry: { maxDelayMs: Number.NaN } }),
    );
    expect(error).toBeInstanceOf(TesseraClientError);
    expect(error).toMatchObject({ code: "invalid_config", field: "retry.maxDelayMs" });
  });
});

describe("a timeoutMs setTimeout cannot take", () => {
  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31, 2 ** 40])(
    "is invalid_config when the client is made (%s)",
    (timeoutMs) => {
      const error = thrownBy(() => createTesseraClient({ url: "http://127.0.0.1:1", timeoutMs }));
      expect(error).toBeInstanceOf(TesseraClientError);
      expect(error).toMatchObject({ code: "invalid_config", field: "timeoutMs" });
    },
  );

  it("takes 1 ms up to the largest setTimeout delay", () => {
    for (const timeoutMs of [1, 10_000, 2 ** 31 - 1]) {
      expect(() => createTesseraClient({ url: "http://127.0.0.1:1", timeoutMs })).not.toThrow();
    }
  });
});

describe("a body JSON.stringify cannot write", () => {
  let deep: unknown = {};
  for (let i = 0; i < 200_000; i++) deep = { d: deep };
  const throwing = {
    toJSON() {
      throw new Error("nope");
    },
  };
  it.each([
    ["nested 200,000 deep (a RangeError)", deep],
    ["a toJSON that throws", throwing],
    [
      "a cycle",
      (() => {
        const cycle: Record<string, unknown> = {};
        cycle.self = cycle;
        return cycle;
      })(),
    ],
  ])("is invalid_input after one attempt, nothing sent (%s)", async (_, payload) => {
    stub = await stubService([json(200, { status: "denied", code: "tool_unavailable" })]);
    const client = createTesseraClient({ url: stub.url, token: "t", retry: fast });
    const error = await clientErrorOf(
      client.sendMessage({ recipient: "bob", payload, callId: "c-1" }),
    );
    expect(error).toMatchObject({ code: "invalid_input", attempts: 1 });
    expect(error.message).toContain("JSON");
    expect(stub.seen).toHaveLength(0);
  });
});
