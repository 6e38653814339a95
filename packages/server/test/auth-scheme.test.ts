import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, principal, type Service, startService } from "./support/service.js";

/** The bearer scheme is read as RFC 7235 says: its name in any case, then the token. */
const alice = principal("token-alice-scheme", {
  namespaceId: "team",
  actor: "asker",
  authority: "host",
});
let service: Service;

beforeAll(async () => {
  service = await startService([alice.config]);
});
afterAll(async () => {
  await service?.close();
});

const tools = (authorization: string) =>
  call(service.server.url, "GET", "/v1/tools", { headers: { authorization } });

describe("the Authorization header", () => {
  it("takes the scheme name in any case, and more than one space after it", async () => {
    for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"]) {
      const answer = await tools(`${scheme} ${alice.token}`);
      expect(answer.status, scheme).toBe(200);
      expect(answer.body).toEqual({ tools: [] });
    }
    expect((await tools(`bearer   ${alice.token}`)).status).toBe(200);
  });

  it("refuses another scheme, a missing token, a glued one and an unknown one: 401", async () => {
    for (const header of [
      `Basic ${alice.token}`,
      "bearer",
      "bearer ",
      `bearer${alice.token}`,
      `bearer ${alice.token} extra`,
      "bearer token-nobody-has",
    ]) {
      const answer = await tools(header);
      expect(answer.status, header).toBe(401);
      expect(answer.body.error.code).toBe("unauthenticated");
      expect(answer.headers.get("www-authenticate")).toBe('Bearer realm="tessera"');
    }
  });
});
