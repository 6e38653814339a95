/**
 * The longest bearer token read, in characters: longer than any access token a provider mints
 * (a JWT with a large `groups` claim runs to 8 KiB and more), and within Node's default 16 KiB
 * of request headers. The JWT verifier reads tokens up to the same length, so a token one face
 * takes is never cut off before the verifier sees it.
 */
export const MAX_BEARER_CHARS = 16_384;

/**
 * The token of an `Authorization: Bearer <token>` header, or undefined. The scheme name is
 * case-insensitive (RFC 7235 §2.1: `bearer`, `BEARER` and `Bearer` are one scheme) and may be
 * followed by more than one space; the token itself is taken as sent, at most
 * `MAX_BEARER_CHARS` characters with no white space in it. Both faces (the service and the MCP
 * gateway) read headers here, so they cannot disagree on who presented a token.
 */
export function bearerToken(authorization: string | undefined): string | undefined {
  return BEARER.exec(authorization ?? "")?.[1];
}

const BEARER = new RegExp(`^bearer +(\\S{1,${MAX_BEARER_CHARS}})$`, "i");
