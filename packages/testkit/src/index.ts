export { type ActLedgerPorts, actEvent, spendingAct } from "./act-ledger-fixtures.js";
export { describeActLedgerConformance } from "./act-ledger-suite.js";
export { withdrawalOf, withdrawnEvent } from "./act-ledger-withdraw.js";
export { auditEvent } from "./audit-fixtures.js";
export {
  describeAuditIndexCases,
  type IndexTamperableTrail,
  verifyAuditByPages,
} from "./audit-index-suite.js";
export { expectReadOnlyReader } from "./audit-reader.js";
export { describeAuditSinkConformance } from "./audit-suite.js";
export { describeAuditTamperCases, type TamperableTrail } from "./audit-tamper-suite.js";
export {
  type BackendOpeners,
  type BundleFactory,
  describeStoreBundleConformance,
} from "./bundle-suite.js";
export { expectClaimReaderReads } from "./claim-reader.js";
export { describeClaimStoreConformance } from "./claims-suite.js";
export { expectClosedStoresRefuse, type StoresBundle } from "./closed-stores.js";
export type { OpenedStore, OutageControl, ProcessSpec, StoreFactory } from "./factory.js";
export { GATE_CATALOG, GATE_CATALOG_ID, gateCallMessage } from "./gate-catalog.js";
export {
  type GateCall,
  type GateCallback,
  type GateOutcome,
  type GateWorkerPlan,
  type KillPoint,
  killGateWorkerAfterClaim,
  killGateWorkersMidway,
  readGateCallbacks,
  runGateWorkers,
} from "./gate-workers.js";
export {
  describeGateKillConformance,
  describeGateWorkersConformance,
} from "./gate-workers-conformance.js";
export { grantInput } from "./grants-fixtures.js";
export { checkVersionedReads, describeGrantStoreConformance } from "./grants-suite.js";
export {
  propertyParameters,
  SEED_VARIABLE,
  seedFromEnvironment,
  seedReport,
} from "./properties.js";
export {
  countPostgresStatements,
  countRedisCommands,
  countSqliteCommits,
  type DriverCounter,
} from "./round-trips.js";
export { type ServiceVariable, serviceUrl } from "./services.js";
export { describeSeveralGrantsRace, type SeveralGrantsStores } from "./several-grants-suite.js";
export { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";
export { describeUsageStoreConformance } from "./usage-suite.js";
