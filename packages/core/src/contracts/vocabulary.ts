/**
 * The one refusal vocabulary shared by the kernel, the A2UI gate, the service and the CLI.
 *
 * A refusal has two faces: a caller-facing `code` (what the agent may learn) and an audit
 * `reason` (what the owner may learn). The caller code never tells whether a ticket existed;
 * the reason does, and only audit carries it. Error codes are the stable `code` of thrown
 * `TesseraError`s (misconfiguration, stores that are down), never shown to an agent as a
 * refusal.
 *
 * docs/codes.md lists exactly these names; a test keeps the two in step.
 */

/** What the agent may learn about a refusal. */
export const CALLER_CODES = [
  "tool_unavailable",
  "no_matching_grant",
  "invalid_request",
  "authority_unavailable",
  "turn_closed",
  "delivery_failed",
  // A2UI protocol codes the gate answers with (the protocol fixes their spelling).
  "INVALID_FUNCTION_CALL",
  "VALIDATION_FAILED",
  "EXECUTION_FAILED",
] as const;
export type CallerCode = (typeof CALLER_CODES)[number];

/**
 * Where in the pipeline a decision was taken. "Gate" means only the A2UI function-call gate;
 * the positions in a pipeline (the kernel's or the gate's) are stages.
 */
export type DecisionStage =
  | "lease"
  | "validation"
  | "discovery"
  | "capability"
  | "usage"
  | "transport"
  | "catalog"
  | "claim"
  | "approval"
  | "dispatch";

/** @deprecated Renamed `DecisionStage` ("gate" now means only the A2UI gate); goes in 0.3. */
export type DecisionGate = DecisionStage;

/**
 * Why a grant does not count for one decision, each with its stage. The kernel ranks these
 * (which one the owner hears when several grants fail), so they are a table of their own: a
 * new one fails compilation until it is ranked.
 */
export const GRANT_REASONS = {
  grant_exhausted: "discovery",
  revoked: "capability",
  expired: "capability",
  not_yet_valid: "capability",
  purpose_mismatch: "capability",
  issuer_mismatch: "capability",
  owner_mismatch: "capability",
  no_capability: "capability",
  // A derived grant whose chain does not resolve: an ancestor missing, or a link not narrower.
  chain_broken: "capability",
  usage_store_unavailable: "usage",
} as const satisfies Record<string, DecisionStage>;
export type GrantReason = keyof typeof GRANT_REASONS;

/** What the owner may learn about a kernel decision, and the stage that produces it. */
export const KERNEL_REASONS = {
  allowed: "capability",
  ...GRANT_REASONS,
  authority_unavailable: "lease",
  turn_closed: "lease",
  invalid_request: "validation",
  delivery_failed: "transport",
  // No transport is configured: a send is refused before any grant is looked at, nothing spent.
  no_transport: "transport",
  // The transport reported it sent nothing (no connection made, a payload it cannot
  // serialize): the use the decision spent was given back. Its own event, after delivery_failed.
  use_returned: "transport",
  // The act was recorded but the store's answer was lost before anything ran: withdrawn (its
  // claim settled with a refusal, its use given back) so its call ID is not blocked forever.
  act_withdrawn: "lease",
} as const satisfies Record<string, DecisionStage>;
export type KernelReason = keyof typeof KERNEL_REASONS;

/** What the owner may learn about an A2UI gate decision, and the stage that produces it. */
export const GATE_REASONS = {
  dispatched: "dispatch",
  invalid_message: "validation",
  unknown_catalog: "catalog",
  unknown_function: "catalog",
  caller_not_allowed: "catalog",
  user_activation_required: "catalog",
  invalid_args: "catalog",
  duplicate_call: "claim",
  claim_store_unavailable: "claim",
  policy_denied: "approval",
  approval_denied: "approval",
  callback_failed: "dispatch",
} as const satisfies Record<string, DecisionStage>;
export type GateReason = keyof typeof GATE_REASONS;

/** Every audit reason: the kernel's and the gate's, which share no name. */
export const AUDIT_REASONS = { ...KERNEL_REASONS, ...GATE_REASONS } as const satisfies Record<
  string,
  DecisionStage
>;
export type AuditReason = keyof typeof AUDIT_REASONS;
// A name in both tables would merge silently in the spread above: refuse it at compile time.
const disjoint: [KernelReason & GateReason] extends [never] ? true : false = true;
void disjoint;

/** One row of the error catalogue: what the code means, and the HTTP status a service answers. */
export interface ErrorEntry {
  readonly meaning: string;
  readonly httpStatus: 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 500 | 503;
}

/**
 * Stable codes of thrown errors (configuration, stores, I/O), one row each for every package.
 * A store that cannot answer is 503 (the request may succeed later); a wrong argument is 400;
 * the host's own misconfiguration is 500. docs/codes.md shows the same rows; a test compares.
 */
export const ERROR_CATALOG = {
  invalid_config: {
    meaning: "A configuration is wrong: a constructor option, a store URL option, a catalog.",
    httpStatus: 500,
  },
  invalid_grant: {
    meaning: "A grant does not match the grant schema, or its ID is taken in its namespace.",
    httpStatus: 400,
  },
  invalid_input: {
    meaning:
      "An argument has the wrong shape: a key, record, receipt, bound, filter, access context.",
    httpStatus: 400,
  },
  authority_unavailable: {
    meaning: "Trustworthy authority could not be loaded.",
    httpStatus: 503,
  },
  usage_store_unavailable: {
    meaning: "The usage store did not answer or is closed: bounded grants fail closed.",
    httpStatus: 503,
  },
  claim_store_unavailable: {
    meaning: "The claim store did not answer or is closed: no call runs.",
    httpStatus: 503,
  },
  audit_unavailable: {
    meaning: "The audit sink did not answer, is closed, or holds an unreadable log.",
    httpStatus: 503,
  },
  grant_store_unavailable: {
    meaning: "The grant store did not answer or is closed.",
    httpStatus: 503,
  },
  claim_dir_missing: {
    meaning:
      "The claim directory does not exist (never made, or removed since it was opened); the gate never creates it.",
    httpStatus: 503,
  },
  claim_dir_insecure: {
    meaning:
      "The claim directory is a symlink, not a directory, not the user's own, or open to others.",
    httpStatus: 500,
  },
  claim_dir_changed: {
    meaning: "The claim directory was replaced (another directory, a symlink) since it was opened.",
    httpStatus: 503,
  },
  store_self_test_failed: {
    meaning: "The store could not prove its atomic primitives when it was opened.",
    httpStatus: 500,
  },
  store_file_shared: {
    meaning: "The SQLite file has a second name (a hard link, a bind mount of the file).",
    httpStatus: 500,
  },
  schema_unavailable: {
    meaning:
      "A schema (store or A2UI) is missing or newer than this build; older, to a claim reader.",
    httpStatus: 503,
  },
  unsupported_store_url: {
    meaning: "No backend serves the store URL's scheme, or its package is not installed.",
    httpStatus: 500,
  },
  turn_closed: {
    meaning: "The turn's authority lease is closed; open a new turn.",
    httpStatus: 409,
  },
  invalid_request: {
    meaning: "A request, or a turn driver's step result, is not of its documented shape.",
    httpStatus: 400,
  },
  store_unavailable: {
    meaning: "A store bundle could not be opened: its file, server or connection is unreachable.",
    httpStatus: 503,
  },
  // The CLI's edges: a command line, a file it names, an address it listens on.
  invalid_usage: {
    meaning: "The command line cannot run: an unknown option, a missing or empty value.",
    httpStatus: 400,
  },
  file_not_found: {
    meaning: "A file the command names does not exist.",
    httpStatus: 500,
  },
  address_in_use: {
    meaning: "Another process holds the port to listen on.",
    httpStatus: 500,
  },
  address_unavailable: {
    meaning: "This machine cannot listen on the host address.",
    httpStatus: 500,
  },
  verdict_mismatch: {
    meaning: "A measured verdict differs from the expected one; the report page shows which.",
    httpStatus: 500,
  },
  // tessera init / serve --data: the data directory is provisioned once, never by serve.
  data_dir_missing: {
    meaning: "The data directory or its config does not exist; tessera init provisions it.",
    httpStatus: 500,
  },
  data_dir_insecure: {
    meaning:
      "The data directory is a symlink, not a directory, not the user's own, or open to others.",
    httpStatus: 500,
  },
  data_dir_not_empty: {
    meaning: "tessera init was pointed at a directory that already holds files.",
    httpStatus: 500,
  },
  // @tessera/client: what a caller learns when no usable answer came back.
  service_unreachable: {
    meaning: "The service did not answer: refused connection, reset, DNS failure or timeout.",
    httpStatus: 503,
  },
  invalid_response: {
    meaning: "The service answered with a body that does not match its documented schema.",
    httpStatus: 500,
  },
  call_id_conflict: {
    meaning: "The call ID was used before by the same principal with a different body.",
    httpStatus: 409,
  },
  call_in_progress: {
    meaning: "The first request with this call ID has not answered yet, or stopped mid-way.",
    httpStatus: 409,
  },
  // @tessera/server: the error bodies of requests answered without a decision.
  unauthenticated: {
    meaning: "The request carried no bearer token, or one no principal holds.",
    httpStatus: 401,
  },
  forbidden: {
    meaning: "The token's role may not use the route (an issuer token deciding, or the reverse).",
    httpStatus: 403,
  },
  not_found: {
    meaning: "No such route, an unknown or foreign dispatch handle, or A2UI not configured.",
    httpStatus: 404,
  },
  method_not_allowed: {
    meaning: "The path is known but not with this method; the Allow header lists its methods.",
    httpStatus: 405,
  },
  body_too_large: {
    meaning: "The request body is larger than the service's limit.",
    httpStatus: 413,
  },
  unsupported_media_type: {
    meaning: "The request body is not application/json.",
    httpStatus: 415,
  },
  unavailable: {
    meaning: "A store did not answer, or the service is stopping: nothing was decided.",
    httpStatus: 503,
  },
  internal_error: {
    meaning: "A fault of the service itself; the cause is logged, never answered.",
    httpStatus: 500,
  },
  // @tessera/mcp: the gateway's JSON-RPC errors carry these in `data.code`.
  idempotency_key_required: {
    meaning:
      "A stateless MCP call carried no idempotency key: a JSON-RPC id alone is no replay key.",
    httpStatus: 400,
  },
  call_in_doubt: {
    meaning:
      "The first call with this key was forwarded and never answered: in doubt, never re-run.",
    httpStatus: 409,
  },
  upstream_failed: {
    meaning:
      "The upstream MCP server answered an error or a malformed result, or was not reached (nothing sent); it is not retried.",
    httpStatus: 503,
  },
  // deriveGrant refuses rather than clamps: one code per axis a child would widen.
  delegation_not_holder: {
    meaning: "The delegator is not the parent grant's subject: only its holder may derive from it.",
    httpStatus: 400,
  },
  delegation_parent_revoked: {
    meaning: "The parent grant is revoked: nothing is derived from it.",
    httpStatus: 400,
  },
  delegation_too_deep: {
    meaning: "The child sits deeper, or allows a deeper chain, than the parent's maxDepth.",
    httpStatus: 400,
  },
  delegation_wider_path: {
    meaning: "A child resource lies outside every parent capability (a sibling, a wider path).",
    httpStatus: 400,
  },
  delegation_wider_scope: {
    meaning: "A child capability widens an exact parent capability to descendants.",
    httpStatus: 400,
  },
  delegation_other_owner: {
    meaning: "A child capability names another owner than the parent's, or drops its owner.",
    httpStatus: 400,
  },
  delegation_wider_action: {
    meaning: "A child capability holds an action no parent capability has on its resource.",
    httpStatus: 400,
  },
  delegation_assembled_capability: {
    meaning: "One child capability is assembled from parts of several parent capabilities.",
    httpStatus: 400,
  },
  delegation_wider_purpose: {
    meaning: "The child's purposes are not within the parent's, or it drops the parent's.",
    httpStatus: 400,
  },
  delegation_wider_window: {
    meaning: "The child's window opens before or closes after the parent's, or has no end.",
    httpStatus: 400,
  },
  delegation_wider_uses: {
    meaning: "The child allows more uses than the parent (or is unbounded under a bounded one).",
    httpStatus: 400,
  },
  delegation_budget_exhausted: {
    meaning: "The parent has fewer unspent uses than the child's maxUses; none were spent.",
    httpStatus: 409,
  },
} as const satisfies Record<string, ErrorEntry>;
export type ErrorCode = keyof typeof ERROR_CATALOG;

/** Every error code, in catalogue order. */
export const ERROR_CODES = Object.freeze(Object.keys(ERROR_CATALOG)) as readonly [
  ErrorCode,
  ...ErrorCode[],
];

/** Receipt statuses of a handled A2UI function call. */
export const RECEIPT_STATUSES = ["dispatched", "none", "denied", "failed", "in_doubt"] as const;
export type ReceiptStatus = (typeof RECEIPT_STATUSES)[number];
