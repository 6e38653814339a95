import { InMemoryClaimStore } from "@tessera/core";

/** @deprecated Renamed `InMemoryClaimStore` (now in `@tessera/core`); kept for one release. */
export const MemoryClaimStore = InMemoryClaimStore;
/** @deprecated Renamed `InMemoryClaimStore`; kept for one release. */
export type MemoryClaimStore = InMemoryClaimStore;
