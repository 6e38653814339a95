import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK } from "jose";
// Typed by ./oidc-provider.d.ts (the package ships no types).
import Provider from "oidc-provider";

/**
 * A real OpenID provider (`oidc-provider`) on a loopback port, for the tests of JWT access
 * tokens: clients get tokens by the client-credentials grant with a resource indicator (RFC
 * 8707), so each access token is a JWT whose `aud` is the resource asked for. Each client's
 * extra claims are what the service maps to a principal. Keys can be rotated (the provider is
 * rebuilt with the new set on the same issuer URL) and the endpoint taken down.
 */
export interface TestClient {
  readonly id: string;
  readonly secret: string;
  /** Added to every access token this client gets. */
  readonly claims: Readonly<Record<string, unknown>>;
  /** Seconds an access token of this client lives (default 300). */
  readonly ttl?: number;
}

export interface SigningKey {
  readonly kid: string;
  readonly privateJwk: JWK;
  readonly publicJwk: JWK;
  readonly publicKey: KeyPair["publicKey"];
  readonly privateKey: KeyPair["privateKey"];
}

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

export async function signingKey(kid: string): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const base = { kid, alg: "ES256", use: "sig" };
  return {
    kid,
    privateJwk: { ...(await exportJWK(privateKey)), ...base },
    publicJwk: { ...(await exportJWK(publicKey)), ...base },
    publicKey,
    privateKey,
  };
}

export interface TestIssuer {
  readonly issuer: string;
  readonly jwksUri: string;
  /** An access token for `resource`, by the client-credentials grant. */
  token(clientId: string, resource: string, scope?: string): Promise<string>;
  /** Signs with `keys` from now on (the first signs), and publishes exactly their public parts. */
  rotate(keys: readonly SigningKey[]): void;
  /** While down, every request to the provider is answered 503. */
  down(isDown: boolean): void;
  jwksRequests(): number;
  close(): Promise<void>;
}

export async function startIssuer(
  clients: readonly TestClient[],
  keys: readonly SigningKey[],
): Promise<TestIssuer> {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = () => {};
  let isDown = false;
  let jwksRequests = 0;
  const server = createServer((req, res) => {
    if (isDown) {
      res.writeHead(503).end();
      return;
    }
    if (req.url?.startsWith("/jwks")) jwksRequests++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const byId = new Map(clients.map((c) => [c.id, c]));
  const build = (signing: readonly SigningKey[]) => {
    const provider = new Provider(issuer, {
      clients: clients.map((c) => ({
        client_id: c.id,
        client_secret: c.secret,
        grant_types: ["client_credentials"],
        redirect_uris: [],
        response_types: [],
        id_token_signed_response_alg: "ES256",
        scope: "tessera:call tessera:other",
      })),
      jwks: { keys: signing.map((k) => k.privateJwk) },
      scopes: ["tessera:call", "tessera:other"],
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => undefined as unknown as string,
          useGrantedResource: () => true,
          getResourceServerInfo: (
            _ctx: unknown,
            resource: string,
            client: { readonly clientId: string },
          ) => ({
            scope: "tessera:call tessera:other",
            audience: resource,
            accessTokenTTL: byId.get(client.clientId)?.ttl ?? 300,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256" } },
          }),
        },
      },
      extraTokenClaims: async (_ctx: unknown, token: unknown) =>
        ({ ...byId.get((token as { clientId?: string }).clientId ?? "")?.claims }) as Record<
          string,
          unknown
        >,
    });
    // Quiet: a refused test request is expected, not an error to print.
    provider.on("server_error", () => {});
    handler = provider.callback();
  };
  build(keys);
  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    token: async (clientId, resource, scope = "tessera:call") => {
      const client = byId.get(clientId);
      if (client === undefined) throw new Error(`no client ${clientId}`);
      const reply = await fetch(`${issuer}/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString("base64")}`,
        },
        body: new URLSearchParams({ grant_type: "client_credentials", resource, scope }),
      });
      const body = (await reply.json()) as { access_token?: string };
      if (!reply.ok || body.access_token === undefined) {
        throw new Error(`token request failed: ${reply.status} ${JSON.stringify(body)}`);
      }
      return body.access_token;
    },
    rotate: (next) => build(next),
    down: (value) => {
      isDown = value;
    },
    jwksRequests: () => jwksRequests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
