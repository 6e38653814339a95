export type { SqliteConfig } from "./config.js";
export { parseSqliteUrl } from "./config.js";
export { SCHEMA_VERSION } from "./migrations.js";
export type { Closable, SqliteStores } from "./open.js";
export {
  openAuditReader,
  openAuditSink,
  openClaimReader,
  openClaimStore,
  openGrantStore,
  openStores,
  openUsageStore,
} from "./open.js";
