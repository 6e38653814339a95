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

/** Where in the pipeline a decision was taken. */
export type DecisionGate =
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

/** What the owner may learn, and which gate produces it. */
export const AUDIT_REASONS = {
  // allowed decisions
  allowed: "capability",
  dispatched: "dispatch",
  // kernel refusals
  grant_exhausted: "discovery",
  revoked: "capability",
  expired: "capability",
  not_yet_valid: "capability",
  purpose_mismatch: "capability",
  issuer_mismatch: "capability",
  owner_mismatch: "capability",
  no_capability: "capability",
  usage_store_unavailable: "usage",
  authority_unavailable: "lease",
  turn_closed: "lease",
  invalid_request: "validation",
  delivery_failed: "transport",
  // gate refusals
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
} as const satisfies Record<string, DecisionGate>;
export type AuditReason = keyof typeof AUDIT_REASONS;

/** Stable codes of thrown errors (configuration, stores, I/O), one list for every package. */
export const ERROR_CODES = [
  "invalid_config",
  "invalid_grant",
  "invalid_input",
  "authority_unavailable",
  "usage_store_unavailable",
  "claim_store_unavailable",
  "audit_unavailable",
  "grant_store_unavailable",
  "claim_dir_missing",
  "claim_dir_insecure",
  "claim_dir_changed",
  "store_self_test_failed",
  "store_file_shared",
  "schema_unavailable",
  "unsupported_store_url",
  "turn_closed",
  // A turn driver returned something other than a documented step result.
  "invalid_request",
  "store_unavailable",
  // The CLI's edges: a command line, a file it names, an address it listens on.
  "invalid_usage",
  "file_not_found",
  "address_in_use",
  "address_unavailable",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** Receipt statuses of a handled A2UI function call. */
export const RECEIPT_STATUSES = ["dispatched", "none", "denied", "failed", "in_doubt"] as const;
export type ReceiptStatus = (typeof RECEIPT_STATUSES)[number];
