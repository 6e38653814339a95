export type {
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  StoredClaim,
} from "./contracts/claims.js";
export { claimKeyDigest } from "./contracts/claims.js";
export { isTesseraError, redact, TesseraError } from "./contracts/errors.js";
export type {
  AccessContext,
  AuditEvent,
  Capability,
  Grant,
  GrantConstraints,
  GrantInput,
} from "./contracts/schemas.js";
export {
  AccessContextSchema,
  AuditEventSchema,
  CapabilitySchema,
  GrantSchema,
} from "./contracts/schemas.js";
export type {
  AuditReason,
  CallerCode,
  DecisionGate,
  ErrorCode,
  ReceiptStatus,
} from "./contracts/vocabulary.js";
export {
  AUDIT_REASONS,
  CALLER_CODES,
  ERROR_CODES,
  RECEIPT_STATUSES,
} from "./contracts/vocabulary.js";
export type { AuditSink, ReadableAuditSink } from "./ports/audit-sink.js";
export type { Clock } from "./ports/clock.js";
export { systemClock } from "./ports/clock.js";
export type { GrantSource, GrantStore } from "./ports/grant-source.js";
export type {
  DeliveryResult,
  MessageEnvelope,
  MessageTransport,
} from "./ports/transport.js";
export type { ConsumeResult, GrantUsageStore } from "./ports/usage-store.js";
