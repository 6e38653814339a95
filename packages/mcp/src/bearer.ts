import { bearerToken } from "@tessera/core/http";
import type { Principal } from "./config.js";
import { tokenDigest } from "./principals.js";

/**
 * The MCP gateway as an OAuth resource server (the MCP authorization spec): access tokens of
 * the host's identity provider beside the static principals, Protected Resource Metadata
 * (RFC 9728) telling clients where to get one, and RFC 6750 challenges. The token is verified
 * elsewhere, in one place for both faces: `JwtVerifier` of `@tessera/server/identity` has the
 * shape below, so this package needs neither jose nor the service.
 */
export interface BearerVerifier {
  verify(token: string): Promise<
    | {
        readonly ok: true;
        readonly identity: {
          readonly namespaceId: string;
          readonly actor: string;
          readonly authority: string;
          readonly owner?: string;
          readonly purpose?: string;
          /** Absent for a verifier that maps no roles: then every token acts as an agent. */
          readonly role?: string;
        };
      }
    | {
        readonly ok: false;
        readonly status: 401 | 403;
        readonly reason: string;
        readonly detail: string;
      }
  >;
}

export interface ProtectedResource {
  /** This gateway's resource URL, its MCP endpoint (`https://mcp.example.com/mcp`): the tokens' audience. */
  readonly resource: string;
  /** The issuers clients get tokens from (the verifier's `issuer`). */
  readonly authorizationServers: readonly string[];
  /** The scope the verifier requires, named in 403 challenges and the metadata. */
  readonly requiredScope?: string;
  readonly verifier: BearerVerifier;
  /** Told of every refused token: what failed, never the token. */
  readonly onRefused?: (refusal: { reason: string; detail: string }) => void;
}

/** RFC 9728 §3: the well-known segment goes between the host and the resource's path. */
export function resourceMetadataUrl(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === "/" ? "" : url.pathname.replace(/\/$/, "");
  return `${url.origin}/.well-known/oauth-protected-resource${path}`;
}

/** The Protected Resource Metadata document. */
export function resourceMetadata(protectedResource: ProtectedResource): Record<string, unknown> {
  const { resource, authorizationServers, requiredScope } = protectedResource;
  return {
    resource,
    authorization_servers: [...authorizationServers],
    bearer_methods_supported: ["header"],
    ...(requiredScope === undefined ? {} : { scopes_supported: [requiredScope] }),
  };
}

export interface BearerRefusal {
  readonly status: 401 | 403;
  /** `WWW-Authenticate`; none for a good token whose claims do not map (nothing to retry). */
  readonly challenge?: string;
  readonly message: string;
}

/**
 * The principal an access token maps to, or the refusal to answer: 401 pointing at the
 * resource metadata (with `error="invalid_token"` when a token was presented), 403
 * `insufficient_scope` naming the scope, 403 for claims that do not map.
 */
export async function bearerPrincipal(
  protectedResource: ProtectedResource,
  authorization: string | undefined,
): Promise<Principal | BearerRefusal> {
  const metadata = `resource_metadata="${resourceMetadataUrl(protectedResource.resource)}"`;
  const token = bearerToken(authorization);
  if (token === undefined) {
    return {
      status: 401,
      challenge: `Bearer ${metadata}`,
      message: "a valid bearer token is required",
    };
  }
  const verdict = await protectedResource.verifier.verify(token);
  const role = verdict.ok ? verdict.identity.role : undefined;
  if (role !== undefined && role !== "agent") {
    // An issuer token manages grants on the service; the gateway's callers act as agents, as
    // the service's agent routes refuse an issuer token. Nothing to retry: no challenge.
    const detail = `this gateway is for agent tokens; the token's role is ${role}`;
    protectedResource.onRefused?.({ reason: "wrong_role", detail });
    return { status: 403, message: detail };
  }
  if (verdict.ok) {
    const { namespaceId, actor, authority, owner, purpose } = verdict.identity;
    return Object.freeze({
      // The presented token's digest: what a static principal holds in the same field.
      tokenSha256: tokenDigest(token),
      namespaceId,
      actor,
      authority,
      ...(owner === undefined ? {} : { owner }),
      ...(purpose === undefined ? {} : { purpose }),
    });
  }
  protectedResource.onRefused?.({ reason: verdict.reason, detail: verdict.detail });
  if (verdict.status === 401) {
    return {
      status: 401,
      challenge: `Bearer error="invalid_token", error_description="${verdict.detail}", ${metadata}`,
      message: verdict.detail,
    };
  }
  const scope = protectedResource.requiredScope;
  if (verdict.reason === "insufficient_scope" && scope !== undefined) {
    return {
      status: 403,
      challenge: `Bearer error="insufficient_scope", scope="${scope}", ${metadata}`,
      message: verdict.detail,
    };
  }
  return { status: 403, message: verdict.detail };
}
