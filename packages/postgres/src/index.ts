export type { PostgresConfig } from "./config.js";
export { parsePostgresUrl } from "./config.js";
export { SCHEMA_VERSION } from "./migrations.js";
export type { Closable, PostgresStores } from "./open.js";
export {
  openAuditReader,
  openAuditSink,
  openClaimReader,
  openClaimStore,
  openGrantStore,
  openStores,
  openUsageStore,
} from "./open.js";
