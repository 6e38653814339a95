import type { AuditEvent } from "../contracts/schemas.js";
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

/**
 * `inner`, with `seen` told of each decision's event the store took: an act's recorded event
 * (the exhausted one when its spend lost) and a withdrawal's. What the service's and the MCP
 * gateway's decision logs write their one line per decision from; all else is `wrapActLedger`.
 */
export function observeActLedger(inner: ActLedger, seen: (event: AuditEvent) => void): ActLedger {
  const record: ActLedger["record"] = async (act) => {
    const result = await inner.record(act);
    if (result.status === "recorded") {
      seen(result.recorded === "exhausted" && act.exhausted ? act.exhausted : act.event);
    }
    return result;
  };
  const withdraw = inner.withdraw?.bind(inner);
  return wrapActLedger(
    inner,
    record,
    withdraw &&
      (async (withdrawal) => {
        const result = await withdraw(withdrawal);
        // A withdrawal's event is a decision's record like any other.
        if (result === "withdrawn") seen(withdrawal.event);
        return result;
      }),
  );
}
