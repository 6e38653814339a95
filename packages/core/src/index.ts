export { JsonlAuditSink, type JsonlAuditSinkOptions } from "./audit/jsonl-audit-sink.js";
export { checkClaimKey, checkReceipt, checkRecord } from "./contracts/claim-input.js";
export type {
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  StoredClaim,
} from "./contracts/claims.js";
export { claimKeyDigest } from "./contracts/claims.js";
export { storageDigest, uniqueStorageDigest } from "./contracts/digest.js";
export { isTesseraError, redact, TesseraError } from "./contracts/errors.js";
export {
  MESSAGE_NAMESPACE,
  MESSAGE_SEND_ACTION,
  messageResource,
  messageSendCapability,
} from "./contracts/messages.js";
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
export type { ScriptedStep } from "./executor/scripted-driver.js";
export { ScriptedDriver } from "./executor/scripted-driver.js";
export type {
  StepContext,
  TurnDriver,
  TurnExecutorOptions,
  TurnOutcome,
} from "./executor/turn-executor.js";
export { TurnExecutor } from "./executor/turn-executor.js";
export type { ExplainPrincipal, ExplainVerdict, Explanation } from "./kernel/explain.js";
export { explain } from "./kernel/explain.js";
export { createKernel } from "./kernel/kernel.js";
export type {
  AuthorizeRequest,
  AuthorizeResult,
  Kernel,
  KernelOptions,
  Refusal,
  ResourceRef,
  SendMessageRequest,
  SendMessageResult,
  TurnAuthority,
  TurnTools,
} from "./kernel/types.js";
export { InMemoryAuditSink } from "./memory/audit-sink.js";
export { fixedClock, ManualClock } from "./memory/clock.js";
export { InMemoryGrantSource } from "./memory/grant-source.js";
export { InProcessTransport, type ReplyHandler } from "./memory/transport.js";
export { InMemoryGrantUsageStore } from "./memory/usage-store.js";
export { type FanoutTicketOptions, issueFanoutTickets } from "./messaging/fanout.js";
export { findSharedBudgets, type SharedBudgetWarning } from "./messaging/shared-budget.js";
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
