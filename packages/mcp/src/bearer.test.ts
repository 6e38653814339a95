import { describe, expect, it } from "vitest";
import { type BearerVerifier, bearerPrincipal, type ProtectedResource } from "./bearer.js";

/** A verifier that maps every token to one identity, `role` included or not. */
function resourceFor(role: string | undefined, refused: { reason: string }[]): ProtectedResource {
  const verifier: BearerVerifier = {
    verify: async () => ({
      ok: true,
      identity: {
        namespaceId: "acme",
        actor: "asker",
        authority: "host",
        ...(role === undefined ? {} : { role }),
      },
    }),
  };
  return {
    resource: "https://mcp.example.com/mcp",
    authorizationServers: ["https://login.example.com"],
    verifier,
    onRefused: (refusal) => refused.push(refusal),
  };
}

describe("bearerPrincipal and the token's role", () => {
  it("lets an agent token in, and a token of a verifier that maps no role", async () => {
    for (const role of ["agent", undefined]) {
      const refused: { reason: string }[] = [];
      const principal = await bearerPrincipal(resourceFor(role, refused), "Bearer a.b.c");
      expect(principal).toMatchObject({ namespaceId: "acme", actor: "asker", authority: "host" });
      expect(refused).toEqual([]);
    }
  });

  it("refuses an issuer token 403, as the service's agent routes do, and reports why", async () => {
    const refused: { reason: string }[] = [];
    const answer = await bearerPrincipal(resourceFor("issuer", refused), "Bearer a.b.c");
    expect(answer).toEqual({
      status: 403,
      message: "this gateway is for agent tokens; the token's role is issuer",
    });
    expect(refused).toEqual([{ reason: "wrong_role", detail: expect.any(String) }]);
  });
});
