import type { ActLedger } from "../ports/act-ledger.js";

/**
 * A ledger that records through `record` (a wrapper that traces, logs or stamps acts) and
 * keeps what the inner ledger declares: its `withdraw` (or the wrapper's own), and the grant
 * versions it checks (`checksVersionsIn`). A wrapper that dropped the latter would still be
 * correct, only slower: the kernel would read every turn's version again.
 */
export function wrapActLedger(
  inner: ActLedger,
  record: ActLedger["record"],
  withdraw: ActLedger["withdraw"] = inner.withdraw?.bind(inner),
): ActLedger {
  const space = inner.checksVersionsIn;
  return {
    record,
    ...(withdraw === undefined ? {} : { withdraw }),
    ...(space === undefined ? {} : { checksVersionsIn: space }),
  };
}
