import { createPrivateKey, generateKeyPairSync, sign } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { median } from "../measure.js";
import { type BenchRow, ratioRow } from "../report.js";
import type { LoadClient, LoadResult } from "./load.js";
import { service } from "./service.js";

/**
 * A request authenticated by a JWT access token against the same request with the static
 * token, on one service (memory stores, the denied send): what a JWT costs per request once
 * the issuer's keys are cached. The keys come from a JWKS file, read once before the slices;
 * the token is ES256 (P-256), as a provider mints it, and ONE token is reused by every request
 * of every slice, as a host reuses its access token until it expires: its signature is checked
 * once (in the warm-up), and the measured requests are answered by the verifier's cache of
 * verified tokens (SHA-256 of the token, then exp/nbf and the signing kid checked per use).
 * What this row does not measure: a fresh token per request (every one a signature check).
 */
const ISSUER = "https://id.bench.test/";
const AUDIENCE = "https://tessera.bench.test/";
const ROUNDS = 4;
const SLICE_MS = 700;
const CONNECTIONS = 10;

function es256Token(privateKeyPem: string, kid: string): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const input = `${part({ alg: "ES256", typ: "at+jwt", kid })}.${part({
    iss: ISSUER,
    aud: AUDIENCE,
    sub: "asker",
    client_id: "asker",
    iat: now,
    exp: now + 3600,
  })}`;
  const signature = sign("sha256", Buffer.from(input), {
    key: createPrivateKey(privateKeyPem),
    dsaEncoding: "ieee-p1363",
  });
  return `${input}.${signature.toString("base64url")}`;
}

export async function identityRows(
  client: LoadClient,
  scratch: string,
  rows: BenchRow[],
): Promise<void> {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const kid = "bench-1";
  const jwksFile = join(scratch, "jwks.json");
  writeFileSync(
    jwksFile,
    JSON.stringify({ keys: [{ ...publicKey.export({ format: "jwk" }), kid, alg: "ES256" }] }),
  );
  const token = es256Token(privateKey.export({ format: "pem", type: "pkcs8" }) as string, kid);
  const running = await service("memory", undefined, {
    issuer: ISSUER,
    audience: AUDIENCE,
    jwksFile,
    algorithms: ["ES256"],
    claims: {
      namespaceId: { value: "bench" },
      actor: { claim: "client_id" },
      authority: { value: "host" },
      owner: { value: "alice" },
    },
  });
  try {
    const slice = (jwt: boolean, tag: string, ms: number): Promise<LoadResult> =>
      client.run({
        url: running.url,
        shape: "denied",
        connections: CONNECTIONS,
        ms,
        tag,
        ...(jwt ? { token } : {}),
      });
    await slice(false, "warm-static", 300);
    await slice(true, "warm-jwt", 300);
    const staticRates: number[] = [];
    const jwtRates: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? [false, true] : [true, false];
      for (const jwt of order) {
        const { rate } = await slice(jwt, `id-${round}-${jwt}`, SLICE_MS);
        (jwt ? jwtRates : staticRates).push(rate);
      }
    }
    rows.push(
      ratioRow(
        `service denied send, JWT access token (ES256, keys cached) vs static token, c=${CONNECTIONS}`,
        median(jwtRates),
        { name: "the same request, static token", value: median(staticRates) },
        "JWT ÷ static token, same service, memory stores; one ES256 token reused by every request (as hosts do): verified once, then answered by the verified-token cache (exp/nbf and kid rechecked per use)",
        { text: "≥ 0.8×", minRatio: 0.8 },
      ),
    );
  } finally {
    await running.close();
  }
}
