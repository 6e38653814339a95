import type { z } from "zod";
import {
  A2uiCallRequestSchema,
  A2uiClaimRequestSchema,
  A2uiClaimResponseSchema,
  A2uiReplySchema,
  A2uiSettleRequestSchema,
  AuditQuerySchema,
  AuditResponseSchema,
  AuthorizeRequestSchema,
  AuthorizeResponseSchema,
  DeriveGrantRequestSchema,
  ExplainQuerySchema,
  ExplainResponseSchema,
  GrantListResponseSchema,
  GrantResponseSchema,
  HealthResponseSchema,
  InDoubtClaimsResponseSchema,
  IssueGrantRequestSchema,
  ReadyResponseSchema,
  RevokeGrantResponseSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  ToolsResponseSchema,
} from "./bodies.js";

/** Who may call a route: no token, an agent token, or an issuer token. */
export type RouteRole = "public" | "agent" | "issuer";

export interface RouteSpec {
  readonly method: "GET" | "POST" | "DELETE";
  /** Fastify-style path; `:grantId` is a path parameter. */
  readonly path: string;
  readonly role: RouteRole;
  readonly body?: z.ZodType;
  readonly query?: z.ZodType;
  /** The body of a 200 answer. */
  readonly response: z.ZodType;
  /** Carries a `callId` whose retry answers the original response again. */
  readonly retrySafe?: boolean;
}

/** Every route of the service: one table the server registers and the client calls. */
export const ROUTES = {
  health: { method: "GET", path: "/healthz", role: "public", response: HealthResponseSchema },
  ready: { method: "GET", path: "/readyz", role: "public", response: ReadyResponseSchema },
  tools: { method: "GET", path: "/v1/tools", role: "agent", response: ToolsResponseSchema },
  authorize: {
    method: "POST",
    path: "/v1/authorize",
    role: "agent",
    body: AuthorizeRequestSchema,
    response: AuthorizeResponseSchema,
    retrySafe: true,
  },
  sendMessage: {
    method: "POST",
    path: "/v1/messages",
    role: "agent",
    body: SendMessageRequestSchema,
    response: SendMessageResponseSchema,
    retrySafe: true,
  },
  a2uiClaim: {
    method: "POST",
    path: "/v1/a2ui/claim",
    role: "agent",
    body: A2uiClaimRequestSchema,
    response: A2uiClaimResponseSchema,
  },
  a2uiSettle: {
    method: "POST",
    path: "/v1/a2ui/settle",
    role: "agent",
    body: A2uiSettleRequestSchema,
    response: A2uiReplySchema,
  },
  a2uiCall: {
    method: "POST",
    path: "/v1/a2ui/call",
    role: "agent",
    body: A2uiCallRequestSchema,
    response: A2uiReplySchema,
  },
  explain: {
    method: "GET",
    path: "/v1/explain",
    role: "agent",
    query: ExplainQuerySchema,
    response: ExplainResponseSchema,
  },
  audit: {
    method: "GET",
    path: "/v1/audit",
    role: "agent",
    query: AuditQuerySchema,
    response: AuditResponseSchema,
  },
  inDoubtClaims: {
    method: "GET",
    path: "/v1/claims/in-doubt",
    role: "agent",
    response: InDoubtClaimsResponseSchema,
  },
  issueGrant: {
    method: "POST",
    path: "/v1/grants",
    role: "issuer",
    body: IssueGrantRequestSchema,
    response: GrantResponseSchema,
  },
  deriveGrant: {
    method: "POST",
    path: "/v1/grants/derive",
    role: "issuer",
    body: DeriveGrantRequestSchema,
    response: GrantResponseSchema,
  },
  listGrants: {
    method: "GET",
    path: "/v1/grants",
    role: "issuer",
    response: GrantListResponseSchema,
  },
  revokeGrant: {
    method: "DELETE",
    path: "/v1/grants/:grantId",
    role: "issuer",
    response: RevokeGrantResponseSchema,
  },
} as const satisfies Record<string, RouteSpec>;
export type RouteName = keyof typeof ROUTES;
