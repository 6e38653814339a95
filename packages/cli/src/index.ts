export { buildProgram } from "./program.js";
export { type OpenedStores, openStoresByUrl } from "./stores.js";
