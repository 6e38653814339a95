export type {
  ClaimKey,
  ClaimReceipt,
  ClaimRecord,
  ClaimResult,
  ClaimStore,
  StoredClaim,
} from "@tessera/core";
export { claimKeyDigest } from "@tessera/core/store-kit";
export type { CatalogDefinition, FunctionDefinition } from "./catalog/catalog.js";
export { FunctionCallGate } from "./gate/gate.js";
export type {
  ApprovalVerdict,
  ApproveFunction,
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
export { InMemoryClaimStore, MemoryClaimStore } from "./stores/memory.js";
