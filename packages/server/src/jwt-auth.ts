import type { FastifyBaseLogger } from "fastify";
import { HttpProblem } from "./errors.js";
import type { JwtVerifier, TokenIdentity, TokenVerdict } from "./identity/verify.js";
import { type Principal, tokenDigest } from "./principals.js";

/**
 * A bearer token that is no static principal's, tried as a JWT access token of the configured
 * issuer. Resolves the principal, or the problem to answer: 401 for the token (expired, wrong
 * audience, unknown key, bad signature…), 403 for a good token whose claims do not map or
 * whose scope falls short. Every refusal is logged with what failed, never the token.
 */
export async function jwtPrincipal(
  verifier: JwtVerifier,
  token: string,
  log: FastifyBaseLogger,
): Promise<Principal | HttpProblem> {
  return verdictPrincipal(verifier, await verifier.verify(token), token, log);
}

/**
 * The principal of a token the verifier's cache already judged, synchronously; undefined when
 * it must be verified (`jwtPrincipal`).
 */
export function cachedJwtPrincipal(
  verifier: JwtVerifier,
  token: string,
  log: FastifyBaseLogger,
): Principal | HttpProblem | undefined {
  const verdict = verifier.verifyCached(token);
  return verdict === undefined ? undefined : verdictPrincipal(verifier, verdict, token, log);
}

function verdictPrincipal(
  verifier: JwtVerifier,
  verdict: TokenVerdict,
  token: string,
  log: FastifyBaseLogger,
): Principal | HttpProblem {
  if (verdict.ok) return principalOf(verdict.identity, token);
  log.warn(
    { identity: { reason: verdict.reason, issuer: verifier.config.issuer } },
    `bearer token refused: ${verdict.detail}`,
  );
  if (verdict.status === 401) {
    return new HttpProblem("unauthenticated", verdict.detail, undefined, {
      "www-authenticate": `Bearer realm="tessera", error="invalid_token", error_description="${verdict.detail}"`,
    });
  }
  const scope = verifier.config.requiredScope;
  return new HttpProblem(
    "forbidden",
    verdict.detail,
    undefined,
    verdict.reason === "insufficient_scope" && scope !== undefined
      ? {
          "www-authenticate": `Bearer realm="tessera", error="insufficient_scope", scope="${scope}"`,
        }
      : {},
  );
}

/**
 * The token's identity in the shape of a configured principal. `tokenSha256` is this token's
 * digest: what a static principal would hold, so code that reads it sees the presented token.
 */
function principalOf(identity: TokenIdentity, token: string): Principal {
  // A cached token hands out the same identity object on every use (one per verification, so
  // one per token): its principal is built and hashed once.
  const known = byIdentity.get(identity);
  if (known !== undefined) return known;
  const { namespaceId, actor, authority, owner, purpose, role, session } = identity;
  const principal: Principal = Object.freeze({
    tokenSha256: tokenDigest(token),
    namespaceId,
    actor,
    authority,
    role,
    ...(owner === undefined ? {} : { owner }),
    ...(purpose === undefined ? {} : { purpose }),
    ...(session === undefined ? {} : { session }),
  });
  byIdentity.set(identity, principal);
  return principal;
}

const byIdentity = new WeakMap<TokenIdentity, Principal>();
