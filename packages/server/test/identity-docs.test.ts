import { readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { parseJwtIdentity } from "../src/identity/config.js";
import { JwtVerifier } from "../src/identity/verify.js";
import { signingKey, startIssuer, type TestIssuer } from "./support/oidc.js";

/**
 * The identity example of docs/service.md, as a reader would copy it, against a real OpenID
 * provider's client-credentials tokens (the flow the same section recommends): only the
 * provider's URLs and the audience are swapped in. Every claim the example maps must be one
 * such a token carries, or every token would be 403.
 */
const DOC = new URL("../../../docs/service.md", import.meta.url);
const AUDIENCE = "https://tessera.example.com/";

function docExample(): Record<string, unknown> {
  const text = readFileSync(DOC, "utf8");
  const section = text.slice(text.indexOf("### JWT access tokens from your identity provider"));
  const block = /```json\n([\s\S]*?)```/.exec(section);
  if (block === null) throw new Error("no JSON example in the identity section");
  return JSON.parse(block[1] as string) as Record<string, unknown>;
}

let issuer: TestIssuer | undefined;
afterAll(async () => {
  await issuer?.close();
});

describe("docs/service.md identity example", () => {
  it("accepts a client-credentials token mapped as the example says", async () => {
    const key = await signingKey("docs-k1");
    issuer = await startIssuer(
      [
        {
          id: "billing-agent",
          secret: "client-secret-".padEnd(48, "d"),
          claims: { tessera_ns: "team", tessera_owner: "alice", tessera_role: "agent" },
        },
      ],
      [key],
    );
    const example = docExample();
    expect(example.audience).toBe(AUDIENCE);
    const verifier = new JwtVerifier(
      parseJwtIdentity({ ...example, issuer: issuer.issuer, jwksUri: issuer.jwksUri }),
    );
    const token = await issuer.token("billing-agent", AUDIENCE);
    expect(await verifier.verify(token)).toMatchObject({
      ok: true,
      identity: {
        namespaceId: "team",
        actor: "billing-agent",
        authority: "host",
        owner: "alice",
        role: "agent",
      },
    });
  });
});
