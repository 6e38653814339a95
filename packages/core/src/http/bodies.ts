import { z } from "zod";
import { isPrintable } from "../contracts/printable.js";
import { AuditEventSchema, GrantSchema } from "../contracts/schemas.js";
import { CALLER_CODES, RECEIPT_STATUSES } from "../contracts/vocabulary.js";

/**
 * The wire contracts of the Tessera service: every route's request and response body, as zod
 * schemas. `@tessera/server` validates requests and generates its OpenAPI document from them;
 * `@tessera/client` validates responses with the same ones, so the two cannot drift apart.
 *
 * Identity is never on the wire: the bearer token names the principal (namespace, actor,
 * authority, owner, purpose, host session). A body field that tried to name one is refused.
 */

const id = z.string().min(1).max(512);
const callId = z.string().min(1).max(256);
/**
 * A call ID a request names for its act: printable, as the A2UI gate requires of function call
 * IDs. It is echoed in answers and kept in claims and audit, where people read it, and a
 * control, bidi or line-separator character there can forge a line or disguise an ID (and a
 * lone surrogate, which UTF-8 cannot hold, would meet another ID in a store). Queries
 * (`/v1/audit`, `/v1/explain`) take any call ID, so a trail written before this rule still reads.
 */
const actCallId = callId
  .refine(isPrintable, {
    message:
      "a call ID may not hold control, bidi or line-separator characters or a lone surrogate",
  })
  .describe(
    "1–256 characters, none of them a control, bidi or line-separator character or a lone surrogate",
  );
const callerCode = z.enum(CALLER_CODES);

/** Every 4xx/5xx: no decision was taken. `field` names the offending body or query field. */
export const ErrorBodySchema = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    field: z.string().optional(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** A decision that refused: HTTP 200, because a decision was made. Read `status`, not the HTTP code. */
export const DeniedSchema = z.strictObject({ status: z.literal("denied"), code: callerCode });

// ---- GET /v1/tools ---------------------------------------------------------------------------

export const ToolsResponseSchema = z.strictObject({ tools: z.array(z.string()) });
export type ToolsResponse = z.infer<typeof ToolsResponseSchema>;

// ---- POST /v1/authorize ----------------------------------------------------------------------

export const AuthorizeRequestSchema = z.strictObject({
  action: id,
  resource: z.strictObject({
    namespace: id,
    path: z.array(id).max(64),
    owner: id.optional(),
  }),
  /** Makes the request safe to retry: the same ID and body answer the original decision again. */
  callId: actCallId.optional(),
});
export type AuthorizeRequestBody = z.infer<typeof AuthorizeRequestSchema>;

export const AuthorizeResponseSchema = z.discriminatedUnion("status", [
  z.strictObject({ status: z.literal("allowed"), grantId: z.string(), callId: z.string() }),
  DeniedSchema,
]);
export type AuthorizeResponse = z.infer<typeof AuthorizeResponseSchema>;

// ---- POST /v1/messages -----------------------------------------------------------------------

export const SendMessageRequestSchema = z.strictObject({
  recipient: id,
  /** Data only: nothing in it is read as authority. */
  payload: z.unknown(),
  callId: actCallId.optional(),
});
export type SendMessageRequestBody = z.infer<typeof SendMessageRequestSchema>;

export const SendMessageResponseSchema = z.discriminatedUnion("status", [
  z.strictObject({
    status: z.literal("delivered"),
    messageId: z.string(),
    grantId: z.string(),
    callId: z.string(),
    reply: z.unknown().optional(),
  }),
  DeniedSchema,
]);
export type SendMessageResponse = z.infer<typeof SendMessageResponseSchema>;

// ---- the A2UI gate: /v1/a2ui/claim, /v1/a2ui/settle, /v1/a2ui/call -----------------------

/** An A2UI v1.0 message object (`callRendererFunction`), validated by the gate's schemas. */
const a2uiMessage = z.record(z.string(), z.unknown());
const receiptStatus = z.enum(RECEIPT_STATUSES);

export const A2uiClaimRequestSchema = z.strictObject({ message: a2uiMessage });
export type A2uiClaimRequest = z.infer<typeof A2uiClaimRequestSchema>;

/**
 * `refused`: send `reply` (an A2UI error message) to the agent; nothing may run.
 * `dispatch`: run `call` on the host, then settle `handle` with its value or error.
 */
export const A2uiClaimResponseSchema = z.discriminatedUnion("status", [
  z.strictObject({ status: z.literal("refused"), reply: a2uiMessage, receipt: receiptStatus }),
  z.strictObject({
    status: z.literal("dispatch"),
    handle: z.string(),
    call: z.strictObject({
      functionCallId: z.string(),
      catalogId: z.string(),
      call: z.string(),
      args: z.record(z.string(), z.unknown()),
    }),
  }),
]);
export type A2uiClaimResponse = z.infer<typeof A2uiClaimResponseSchema>;

export const A2uiSettleRequestSchema = z.union(
  [
    z.strictObject({ handle: z.string().min(1).max(1024), value: z.unknown() }),
    z.strictObject({
      handle: z.string().min(1).max(1024),
      error: z.strictObject({
        code: z.string().max(128).optional(),
        message: z.string().max(4096),
      }),
    }),
  ],
  // A union that fails says only "Invalid input": name what is wrong with the settle instead.
  { error: (issue) => settleProblem(issue.input) },
);

const SETTLE_FIELDS = new Set(["handle", "value", "error"]);

/** Why a body is not a settle, in one sentence a host's developer can act on. */
function settleProblem(body: unknown): string {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return "a settle is an object: { handle, value } or { handle, error }";
  }
  const has = (key: string) => Object.hasOwn(body, key);
  const fields = body as Record<string, unknown>;
  const handle = fields.handle;
  if (typeof handle !== "string" || handle.length === 0 || handle.length > 1024) {
    return "handle must be the dispatch handle the claim answered (1 to 1024 characters)";
  }
  // The unknown key itself is not echoed: a response never repeats what a caller made up.
  if (Object.keys(body).some((key) => !SETTLE_FIELDS.has(key))) {
    return "a settle has no fields but handle, and value or error";
  }
  if (has("value") && has("error")) return "give the call's value or its error, not both";
  if (!has("value") && !has("error")) return "give the call's value or its error";
  return "error must be { message, code? }: message a string of at most 4096 characters, code of at most 128";
}
export type A2uiSettleRequest = z.infer<typeof A2uiSettleRequestSchema>;

/** The A2UI reply to send to the agent, and the receipt recorded for the call. */
export const A2uiReplySchema = z.strictObject({ reply: a2uiMessage, receipt: receiptStatus });
export type A2uiReply = z.infer<typeof A2uiReplySchema>;

/** One-step mode: the service calls the host's function endpoint itself. */
export const A2uiCallRequestSchema = A2uiClaimRequestSchema;
export type A2uiCallRequest = A2uiClaimRequest;

// ---- grants (issuer tokens only) -----------------------------------------------------------

/**
 * A grant to issue. The namespace and issuer are the issuer token's, never the body's;
 * `id` and `issuedAt` default to a fresh UUID and now.
 */
export const IssueGrantRequestSchema = z.strictObject({
  id: id.optional(),
  subject: id,
  capabilities: GrantSchema.shape.capabilities,
  constraints: GrantSchema.shape.constraints.optional(),
  issuedAt: GrantSchema.shape.issuedAt.optional(),
});
export type IssueGrantRequest = z.infer<typeof IssueGrantRequestSchema>;

/**
 * A narrower grant to derive from `parentId`, a grant of the token's namespace whose chain
 * starts at the token's issuer. The delegator is the parent's holder (its subject), never
 * the body's; `id` defaults to a fresh UUID, `issuedAt` to now (or the parent's, if later).
 */
export const DeriveGrantRequestSchema = z.strictObject({
  parentId: id,
  id: id.optional(),
  subject: id,
  capabilities: GrantSchema.shape.capabilities,
  constraints: GrantSchema.shape.constraints.optional(),
  issuedAt: GrantSchema.shape.issuedAt.optional(),
});
export type DeriveGrantRequest = z.infer<typeof DeriveGrantRequestSchema>;

export const GrantResponseSchema = z.strictObject({ grant: GrantSchema });
export type GrantResponse = z.infer<typeof GrantResponseSchema>;

export const RevokeGrantResponseSchema = z.strictObject({ revoked: z.boolean() });
export type RevokeGrantResponse = z.infer<typeof RevokeGrantResponseSchema>;

export const GrantListResponseSchema = z.strictObject({
  grants: z.array(z.strictObject({ grant: GrantSchema, uses: z.int().nonnegative() })),
});
export type GrantListResponse = z.infer<typeof GrantListResponseSchema>;

// ---- audit, explain, claims ------------------------------------------------------------------

/** Query of `GET /v1/audit`: exactly one of `callId` or `traceId`. */
export const AuditQuerySchema = z.strictObject({
  callId: callId.optional(),
  traceId: id.optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
});
export type AuditQuery = z.infer<typeof AuditQuerySchema>;

export const AuditResponseSchema = z.strictObject({ events: z.array(AuditEventSchema) });
export type AuditResponse = z.infer<typeof AuditResponseSchema>;

export const ExplainQuerySchema = z.strictObject({ callId });
export type ExplainQuery = z.infer<typeof ExplainQuerySchema>;

export const ExplainResponseSchema = z.strictObject({
  callId: z.string(),
  verdict: z.string(),
  code: callerCode.nullable(),
  summary: z.string(),
});
export type ExplainResponse = z.infer<typeof ExplainResponseSchema>;

export const InDoubtClaimsResponseSchema = z.strictObject({
  claims: z.array(
    z.strictObject({
      functionCallId: z.string(),
      claimedAt: z.int(),
      worker: z.string().optional(),
    }),
  ),
});
export type InDoubtClaimsResponse = z.infer<typeof InDoubtClaimsResponseSchema>;

// ---- health ----------------------------------------------------------------------------------

export const HealthResponseSchema = z.strictObject({ ok: z.literal(true) });
export const ReadyResponseSchema = z.strictObject({ ready: z.literal(true) });
