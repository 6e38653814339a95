export type { RedisConfig } from "./config.js";
export { parseRedisUrl } from "./config.js";
export { LAYOUT_VERSION } from "./layout.js";
export type { Closable, RedisStores } from "./open.js";
export {
  openAuditReader,
  openAuditSink,
  openClaimReader,
  openClaimStore,
  openGrantStore,
  openStores,
  openUsageStore,
} from "./open.js";
