/**
 * `@tessera/core/store-kit`: what a store author (a backend, a claim store, a sink) builds on,
 * so that every store checks its input, names its keys and reports a failed open the same way.
 * A host wiring the kernel needs none of it.
 */
export { AuditAppendQueue, type AuditAppendQueueOptions } from "./audit/append-queue.js";
export {
  AUDIT_LINK_DOMAIN,
  auditContentDigest,
  auditEventHash,
  auditHashMatches,
  auditLinkHash,
  auditStreamOf,
  type ChainHead,
  type ChainLink,
  EMPTY_HEAD,
  GENESIS_HASH,
  linkAuditEvent,
} from "./audit/chain.js";
export { auditHolds } from "./audit/holds.js";
export { misindexedAuditEvent, parseStoredAuditEvent } from "./audit/unreadable.js";
export {
  checkAct,
  checkVersions,
  checkWithdrawal,
  deniedAnswerOf,
} from "./contracts/act-input.js";
export {
  boundedCanonicalJson,
  MAX_JSON_DEPTH,
  withinJsonDepth,
} from "./contracts/canonical-json.js";
export { claimKeyDigest } from "./contracts/claims.js";
export { storageDigest, uniqueStorageDigest } from "./contracts/digest.js";
export { redact } from "./contracts/errors.js";
export {
  checkAuditFilter,
  checkCarve,
  checkClaimKey,
  checkId,
  checkMaxUses,
  checkPageSize,
  checkReceipt,
  checkRecord,
  checkRevocationInstant,
  checkSession,
  flagOption,
  MAX_ANSWER_BYTES,
  parseAuditEvent,
  parseGrantInput,
  serializeAnswer,
} from "./contracts/store-input.js";
export {
  octalMode,
  type PrivateFileRead,
  readGuardedFile,
  readPrivateFile,
  WRITABLE_BY_OTHERS,
} from "./files/private-file.js";
export type { AuditFilter, AuditPageOptions } from "./ports/audit-sink.js";
export {
  type ConnectOptions,
  type OpenFailCode,
  openFailure,
  type StoreBackend,
  type StoreOpeners,
  type StoreVersion,
  storeOpeners,
} from "./stores/backend.js";
export { type ComposedActPorts, composeActLedger } from "./stores/composed-act-ledger.js";
export { sqliteUrlOf } from "./stores/sqlite-url.js";
export { checkStoreUrlQuery } from "./stores/url-query.js";
export { observeActLedger, wrapActLedger } from "./stores/wrap-act-ledger.js";
export { WriteWindow } from "./stores/write-window.js";
