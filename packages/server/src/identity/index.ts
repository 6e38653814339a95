/**
 * `@tessera/server/identity`: JWT access tokens from the host's identity provider, verified
 * with `jose` (issuer, audience, token type, expiry, asymmetric algorithms, cached JWKS) and
 * mapped to a principal by configured claims. The service and the MCP gateway both verify
 * through it.
 */
export {
  ASYMMETRIC_ALGORITHMS,
  type AsymmetricAlgorithm,
  type ClaimMap,
  type ClaimSource,
  httpsOrLoopback,
  type JwtIdentityConfig,
  type JwtIdentityInput,
  JwtIdentitySchema,
  loadJwtIdentity,
  NOT_ACCESS_TOKEN_TYPES,
  parseJwtIdentity,
} from "./config.js";
export {
  JwtVerifier,
  type JwtVerifierOptions,
  looksLikeJwt,
  type TokenIdentity,
  type TokenRefusal,
  type TokenVerdict,
} from "./verify.js";
