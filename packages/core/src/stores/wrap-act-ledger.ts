import type { ActLedger } from "../ports/act-ledger.js";

/**
 * A ledger that records through `record` (a wrapper that traces, logs or stamps acts) and
 * keeps what the inner ledger declares: its `withdraw` (or the wrapper's own), and the grant
 * versions it checks (`checksVersionsIn`), and whether it undoes acts whose spend lost
 * (`undoesLostSpends`). A wrapper that dropped the latter two would still be correct, only
 * slower: the kernel would read every turn's version again, and usage before choosing among
 * several grants.
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
    ...(inner.undoesLostSpends === true ? { undoesLostSpends: true } : {}),
  };
}
