export { describeAuditSinkConformance } from "./audit-suite.js";
export { describeClaimStoreConformance } from "./claims-suite.js";
export { expectClosedStoresRefuse, type StoresBundle } from "./closed-stores.js";
export type { OpenedStore, OutageControl, ProcessSpec, StoreFactory } from "./factory.js";
export { describeGrantStoreConformance } from "./grants-suite.js";
export {
  propertyParameters,
  SEED_VARIABLE,
  seedFromEnvironment,
  seedReport,
} from "./properties.js";
export { type ServiceVariable, serviceUrl } from "./services.js";
export { describeUsageStoreConformance } from "./usage-suite.js";
