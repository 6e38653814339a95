import {
  type ActLedger,
  type AuditSink,
  type ClaimStore,
  type GrantUsageStore,
  InMemoryClaimStore,
  TesseraError,
} from "@tessera/core";
import { composeActLedger } from "@tessera/core/store-kit";

/**
 * The act ledger the gateway records its calls through: the host's (a store bundle's `acts`,
 * one write per act), checked to come with the claim store the answers are settled into; else
 * one composed of the ports given one by one (a memory claim store when none is) (claim, spend, event, one write after another; see
 * core's composeActLedger). Without a usage store a bounded grant cannot be counted: its act
 * fails (`usage_store_unavailable`) and nothing runs. Without an audit sink the events go
 * nowhere, as the gateway's own do.
 */
export function gatewayActs(options: {
  readonly acts?: ActLedger | undefined;
  readonly claims?: ClaimStore | undefined;
  readonly usage?: GrantUsageStore | undefined;
  readonly audit?: AuditSink | undefined;
}): { readonly acts: ActLedger; readonly claims: ClaimStore } {
  const { acts, usage, audit } = options;
  if (acts !== undefined) {
    if (typeof acts?.record !== "function") {
      throw new TesseraError("invalid_config", "acts is an act ledger: { record(act) }");
    }
    if (options.claims === undefined) {
      throw new TesseraError("invalid_config", "acts needs the claim store of the same stores");
    }
    return { acts, claims: options.claims };
  }
  const claims = options.claims ?? new InMemoryClaimStore();
  const unavailable = async (): Promise<never> => {
    throw new TesseraError(
      "usage_store_unavailable",
      "no usage store: a bounded grant is not spent",
    );
  };
  return {
    claims,
    acts: composeActLedger({
      claims,
      usage: usage ?? { getUsage: unavailable, tryConsume: unavailable },
      audit: audit ?? { append: () => undefined },
    }),
  };
}
