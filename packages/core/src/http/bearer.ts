/**
 * The token of an `Authorization: Bearer <token>` header, or undefined. The scheme name is
 * case-insensitive (RFC 7235 §2.1: `bearer`, `BEARER` and `Bearer` are one scheme) and may be
 * followed by more than one space; the token itself is taken as sent, at most 4096 characters
 * with no white space in it. Both faces (the service and the MCP gateway) read headers here,
 * so they cannot disagree on who presented a token.
 */
export function bearerToken(authorization: string | undefined): string | undefined {
  return BEARER.exec(authorization ?? "")?.[1];
}

const BEARER = /^bearer +(\S{1,4096})$/i;
