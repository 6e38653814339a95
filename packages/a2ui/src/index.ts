export type {
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  StoredClaim,
} from "@tessera/core";
// The in-memory claim store lives in core beside the other in-memory ports; re-exported here,
// where hosts of the gate have always found it.
export { InMemoryClaimStore } from "@tessera/core";
export { claimKeyDigest } from "@tessera/core/store-kit";
export type { CatalogDefinition, FunctionDefinition } from "./catalog/catalog.js";
export { FunctionCallGate } from "./gate/gate.js";
export { kernelApproval, kernelDecision } from "./gate/kernel-approval.js";
export type { SettleTiming } from "./gate/settle-queue.js";
export type {
  ApprovalVerdict,
  ApproveFunction,
  CallClaim,
  DecideFunction,
  FunctionCallGateOptions,
  FunctionInvocation,
  GateReceipt,
  GateReply,
  GateResult,
  InvokeFunction,
} from "./gate/types.js";
export {
  DirectoryClaimStore,
  type DirectoryClaimStoreOptions,
  type InDoubtReport,
  type SkippedMarker,
} from "./stores/directory/directory-store.js";
export { MemoryClaimStore } from "./stores/memory-alias.js";
