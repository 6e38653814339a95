/**
 * `@tessera/core`: what a host wires and calls. Test helpers live in `@tessera/core/testing`,
 * store-author helpers in `@tessera/core/store-kit`.
 */

export {
  type AuditCheckpoint,
  type AuditCheckpointHead,
  type AuditCheckpointResult,
  type AuditSigningKey,
  signAuditCheckpoint,
  verifyAuditCheckpoint,
} from "./audit/checkpoint.js";
export {
  decidedBy,
  type ExplainPrincipal,
  type ExplainVerdict,
  type Explanation,
  explain,
} from "./audit/explain.js";
export { JsonlAuditSink, type JsonlAuditSinkOptions } from "./audit/jsonl-audit-sink.js";
export { readAuditPages } from "./audit/pages.js";
export { UnreadableAuditEvent } from "./audit/unreadable.js";
export {
  type AuditBreak,
  type AuditBreakKind,
  type AuditStreamReport,
  type AuditVerification,
  unreadableTrail,
  verifyAuditChain,
} from "./audit/verify.js";
export { AuditTrailWalker, type AuditTrailWalkerOptions } from "./audit/walk.js";
export {
  A2UI_CALL_ACTION,
  A2UI_NAMESPACE,
  a2uiFunctionCapability,
  a2uiFunctionResource,
} from "./contracts/a2ui-calls.js";
export type {
  ClaimKey,
  ClaimReader,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  JsonValue,
  StoredClaim,
} from "./contracts/claims.js";
export { isTesseraError, TesseraError } from "./contracts/errors.js";
export {
  MESSAGE_NAMESPACE,
  MESSAGE_SEND_ACTION,
  messageResource,
  messageSendCapability,
} from "./contracts/messages.js";
export { isPrintable } from "./contracts/printable.js";
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
  MAX_DELEGATION_DEPTH,
} from "./contracts/schemas.js";
export type {
  AuditReason,
  CallerCode,
  DecisionGate,
  DecisionStage,
  ErrorCode,
  GateReason,
  KernelReason,
  ReceiptStatus,
} from "./contracts/vocabulary.js";
export {
  AUDIT_REASONS,
  CALLER_CODES,
  ERROR_CATALOG,
  ERROR_CODES,
  RECEIPT_STATUSES,
} from "./contracts/vocabulary.js";
export {
  addDerivedGrant,
  carveDelegatedUses,
  type DerivationOptions,
  type DerivationRequest,
  deriveGrant,
} from "./delegation/derive.js";
export {
  checkClaimKey,
  checkReceipt,
  checkRecord,
  claimKeyDigest,
  fixedClock,
  ManualClock,
  redact,
  ScriptedDriver,
  type ScriptedStep,
  storageDigest,
  uniqueStorageDigest,
} from "./deprecated.js";
export type {
  StepContext,
  TurnDriver,
  TurnExecutorOptions,
  TurnOutcome,
} from "./executor/turn-executor.js";
export { TurnExecutor } from "./executor/turn-executor.js";
export { createKernel } from "./kernel/kernel.js";
export { releaseUse } from "./kernel/returned-uses.js";
export type { TurnCacheOptions } from "./kernel/turn-cache.js";
export type {
  ActOptions,
  AlreadyClaimed,
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
export { InMemoryClaimStore } from "./memory/claim-store.js";
export { InMemoryGrantSource, InMemoryGrantStore } from "./memory/grant-store.js";
export { InProcessTransport, type ReplyHandler } from "./memory/transport.js";
export { InMemoryGrantUsageStore } from "./memory/usage-store.js";
export { type FanoutTicketOptions, issueFanoutTickets } from "./messaging/fanout.js";
export { findSharedBudgets, type SharedBudgetWarning } from "./messaging/shared-budget.js";
export type {
  Act,
  ActLedger,
  ActResult,
  ActSpend,
  DeniedAnswer,
  GrantVersionCheck,
  Withdrawal,
  WithdrawResult,
} from "./ports/act-ledger.js";
export type {
  AuditFilter,
  AuditPageOptions,
  AuditSink,
  ReadableAuditSink,
} from "./ports/audit-sink.js";
export type { Clock } from "./ports/clock.js";
export { systemClock } from "./ports/clock.js";
export type { GrantSource, GrantStore } from "./ports/grant-source.js";
export type { Closable, StoreBundle } from "./ports/stores.js";
export type {
  DeliveryResult,
  MessageEnvelope,
  MessageTransport,
} from "./ports/transport.js";
export type { ConsumeResult, GrantUsageStore, ReleaseResult } from "./ports/usage-store.js";
export {
  openAuditReader,
  openClaimReader,
  openStores,
  storePackageFor,
} from "./stores/open-stores.js";
