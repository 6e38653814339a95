import type { ActLedger, Kernel, MessageTransport } from "@tessera/core";
import type { DecisionLog } from "./decision-log.js";
import type { Metrics } from "./metrics.js";
import type { Principal } from "./principals.js";
import type { RetryOptions } from "./retry.js";
import type { ServiceStores } from "./stores.js";

/** What every route is served with: built once per service. */
export interface ServiceContext {
  readonly kernel: Kernel;
  /** The store's act ledger, the kernel's own: events written beside acts go through it too. */
  readonly acts: ActLedger;
  /** One log line per decision (see decision-log.ts). */
  readonly decisions: DecisionLog;
  readonly stores: ServiceStores;
  readonly principals: readonly Principal[];
  readonly metrics: Metrics;
  readonly retry: RetryOptions;
  readonly transport?: MessageTransport;
}

declare module "fastify" {
  interface FastifyInstance {
    /**
     * Writes what still waits after its reply (answers, denial events, the A2UI gates'
     * receipts and events), and waits.
     */
    drainWrites(): Promise<void>;
  }
  interface FastifyRequest {
    /** The authenticated principal; set by the auth hook on every non-public route. */
    principal?: Principal;
  }
  interface FastifyContextConfig {
    role?: "public" | "agent" | "issuer";
  }
}
