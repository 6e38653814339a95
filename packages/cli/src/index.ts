import type { StoreBundle } from "@tessera/core";
import { openStoresByUrl as openExplained } from "./stores.js";

export { buildProgram } from "./full-program.js";

/** @deprecated Use `StoreBundle` from `@tessera/core`. Kept for one release. */
export type OpenedStores = StoreBundle;
/**
 * @deprecated Use `openStores(url)` from `@tessera/core` (this one also words an open failure
 * for an operator, as the CLI prints it). Kept for one release.
 */
export const openStoresByUrl: (url: string) => Promise<StoreBundle> = openExplained;
