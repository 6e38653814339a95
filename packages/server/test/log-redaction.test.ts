import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listen, type RunningServer } from "../src/listen.js";
import { call, principal, rawRequest, startService } from "./support/service.js";

/**
 * A credential in a request target (`?access_token=…`, userinfo in an absolute-form target)
 * never reaches a log line, whatever answers the request: 401, 404, 400 or 200. Only the
 * routes' own query parameters keep their values.
 */
const alice = principal("token-alice-logs", { namespaceId: "team", actor: "a", authority: "h" });
const lines: string[] = [];
let server: RunningServer;
let close: () => Promise<void>;

beforeAll(async () => {
  const service = await startService([alice.config]);
  await service.server.close();
  server = await listen({
    stores: service.stores,
    principals: [alice.config],
    port: 0,
    log: { level: "debug", stream: { write: (line) => lines.push(line) } },
  });
  close = async () => {
    await server.close();
    await service.stores.close();
  };
});
afterAll(async () => {
  await close?.();
});

const incoming = (id: string) =>
  lines
    .map((l) => JSON.parse(l) as { reqId?: string; req?: { url?: string } })
    .find((l) => l.reqId === id && l.req?.url !== undefined)?.req?.url;

describe("log lines", () => {
  it("never carry a credential from the query string or the target's userinfo", async () => {
    const secrets: string[] = [];
    const secret = () => {
      const value = `s3cr3t-${secrets.length}-${"x".repeat(8)}`;
      secrets.push(value);
      return value;
    };
    const get = (target: string, token?: string, id = `r-${secrets.length}`) =>
      call(server.url, "GET", target, {
        headers: { "x-request-id": id, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      });

    expect((await get(`/v1/tools?access_token=${secret()}`, undefined, "r-401")).status).toBe(401);
    expect((await get(`/v1/tools?token=${secret()}&access_token=${secret()}`)).status).toBe(401);
    expect((await get(`/v1/tools?ACCESS_TOKEN=${secret()}`)).status).toBe(401);
    expect((await get(`/v1/nowhere?api_key=${secret()}`)).status).toBe(404);
    expect((await get(`/v1/tools?${secret()}`)).status).toBe(401);
    const explain = await get(
      `/v1/explain?callId=c-1&id_token=${secret()}`,
      alice.token,
      "r-explain",
    );
    expect(explain.status).toBe(400); // an unknown query parameter: the schema is strict
    // Targets fetch would normalise, sent as they are: absolute-form with userinfo, a bad path.
    const absolute = `http://user:${secret()}@localhost/v1/tools?refresh_token=${secret()}`;
    expect((await rawRequest(server.url, absolute)).status).toBe(401);
    expect((await rawRequest(server.url, `/v1/tools%zz?password=${secret()}`)).status).toBe(400);
    expect((await rawRequest(server.url, `//?client_secret=${secret()}`)).status).toBe(404);

    // Header credentials besides authorization: a cookie, a proxy's, an API key.
    await call(server.url, "GET", "/v1/tools", {
      headers: {
        cookie: `session=${secret()}`,
        "proxy-authorization": `Basic ${secret()}`,
        "x-api-key": secret(),
      },
    });

    const log = lines.join("\n");
    for (const value of secrets) expect(log, value).not.toContain(value);
    // The line still says what was asked, with the credential's name and a marker.
    expect(incoming("r-401")).toBe("/v1/tools?access_token=[redacted]");
    expect(incoming("r-explain")).toBe("/v1/explain?callId=c-1&id_token=[redacted]");
  });
});
