import { MESSAGE_NAMESPACE, MESSAGE_SEND_ACTION } from "../contracts/messages.js";
import type { Grant } from "../contracts/schemas.js";

export interface SharedBudgetWarning {
  readonly grantId: string;
  readonly maxUses: number;
  /** The recipients named, or "any" when a descendants capability covers a whole subtree. */
  readonly recipients: readonly string[] | "any";
  readonly message: string;
}

/**
 * Finds bounded grants whose one usage budget covers several recipients: the first send would
 * spend the others' share. Not an error — a host may mean it — but rarely what a fan-out wants.
 */
export function findSharedBudgets(grants: readonly Grant[]): readonly SharedBudgetWarning[] {
  const warnings: SharedBudgetWarning[] = [];
  for (const grant of grants) {
    const maxUses = grant.constraints.maxUses;
    if (maxUses === undefined) continue;
    const named = new Set<string>();
    let subtree = false;
    for (const capability of grant.capabilities) {
      if (!capability.actions.includes(MESSAGE_SEND_ACTION)) continue;
      if (capability.resource.namespace !== MESSAGE_NAMESPACE) continue;
      // Message resources are one segment deep, so only the root with descendants scope
      // reaches more than the one recipient it names.
      const recipient = capability.resource.path[0];
      if (recipient === undefined) subtree ||= capability.scope === "descendants";
      else named.add(recipient);
    }
    if (!subtree && named.size < 2) continue;
    const recipients = subtree ? "any" : Object.freeze([...named].sort());
    const count = subtree ? "every recipient" : `${named.size} recipients`;
    warnings.push(
      Object.freeze({
        grantId: grant.id,
        maxUses,
        recipients,
        message: `one budget of ${maxUses} use(s) is shared by ${count}: issue one ticket per recipient`,
      }),
    );
  }
  return Object.freeze(warnings);
}
