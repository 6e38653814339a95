import { createHash, timingSafeEqual } from "node:crypto";
import type { AccessContext, ExplainPrincipal } from "@tessera/core";
import { bearerToken, MAX_BEARER_CHARS } from "@tessera/core/http";
import { uniqueStorageDigest } from "@tessera/core/store-kit";
import type { Principal } from "./config.js";

/** SHA-256 of a bearer token, as the config stores it. */
export function tokenDigest(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** The principal whose token this is (`Bearer …` in any case, or a bare token), in constant time. */
export function authenticate(
  principals: readonly Principal[],
  presented: string | undefined,
  bare = false,
): Principal | undefined {
  const token = bare ? presented : bearerToken(presented);
  if (token === undefined || token.length === 0 || token.length > MAX_BEARER_CHARS)
    return undefined;
  const digest = createHash("sha256").update(token).digest();
  return principals.find((p) => timingSafeEqual(digestOf(p), digest));
}

/** Each principal's token digest as bytes, decoded once (principals are frozen at startup). */
const digests = new WeakMap<Principal, Buffer>();

function digestOf(principal: Principal): Buffer {
  let digest = digests.get(principal);
  if (digest === undefined) {
    digest = Buffer.from(principal.tokenSha256, "hex");
    digests.set(principal, digest);
  }
  return digest;
}

/** Principals are frozen at startup, so each one's key is hashed once, not on every call. */
const keys = new WeakMap<Principal, string>();

/**
 * What claims and MCP sessions are scoped by: the whole turn identity, purpose included, so two
 * principals never share a key (one whose purpose a grant refuses would otherwise be handed
 * the other's recorded answers and could act in its sessions). A principal without a purpose
 * keeps the key it had before the purpose was part of it, so its claims stay its own across
 * an upgrade.
 */
export function principalKey(principal: Principal): string {
  let key = keys.get(principal);
  if (key === undefined) {
    const { namespaceId, actor, authority, owner, purpose } = principal;
    key =
      purpose === undefined
        ? uniqueStorageDigest(namespaceId, actor, authority, owner ?? "")
        : uniqueStorageDigest(namespaceId, actor, authority, owner ?? "", purpose);
    keys.set(principal, key);
  }
  return key;
}

export function accessContext(principal: Principal, traceId: string): AccessContext {
  const { namespaceId, actor, authority, owner, purpose } = principal;
  return {
    namespaceId,
    actor,
    authority,
    traceId,
    ...(owner === undefined ? {} : { owner }),
    ...(purpose === undefined ? {} : { purpose }),
  };
}

/** Whose decisions `explain` reads back for this principal. */
export function explainPrincipal(principal: Principal): ExplainPrincipal {
  const { namespaceId, actor, authority, owner } = principal;
  return owner === undefined
    ? { namespaceId, actor, authority }
    : { namespaceId, actor, authority, owner };
}
