import * as cedar from "@cedar-policy/cedar-wasm/nodejs";
import { newEnforcer, newModelFromString, StringAdapter } from "casbin";

/**
 * The same decision — may `asker` send to recipient N? — made by two peer libraries, each with
 * one policy line per recipient, as their documentation shows.
 */

export const PEER_POLICIES = 100;

const recipient = (i: number) => `colleague-${i}`;

/** Cedar with a preparsed policy set: `statefulIsAuthorized` parses nothing per call. */
export function cedarDecision(target: number): () => boolean {
  const policies = Array.from(
    { length: PEER_POLICIES },
    (_, i) =>
      `permit(principal == Agent::"asker", action == Action::"messages.send", resource == Recipient::"${recipient(i)}");`,
  ).join("\n");
  const parsed = cedar.preparsePolicySet("fanout", { staticPolicies: policies });
  if (parsed.type !== "success") throw new Error("cedar refused the policy set");
  const call: cedar.StatefulAuthorizationCall = {
    principal: { type: "Agent", id: "asker" },
    action: { type: "Action", id: "messages.send" },
    resource: { type: "Recipient", id: recipient(target) },
    context: {},
    preparsedPolicySetId: "fanout",
    entities: [],
  };
  return () => {
    const answer = cedar.statefulIsAuthorized(call);
    return answer.type === "success" && answer.response.decision === "allow";
  };
}

const CASBIN_MODEL = `
[request_definition]
r = sub, obj, act

[policy_definition]
p = sub, obj, act

[policy_effect]
e = some(where (p.eft == allow))

[matchers]
m = r.sub == p.sub && r.obj == p.obj && r.act == p.act
`;

/** casbin's `enforceSync`; `target` picks which policy line matches (first or last). */
export async function casbinDecision(target: number): Promise<() => boolean> {
  const lines = Array.from(
    { length: PEER_POLICIES },
    (_, i) => `p, asker, ${recipient(i)}, messages.send`,
  ).join("\n");
  const enforcer = await newEnforcer(newModelFromString(CASBIN_MODEL), new StringAdapter(lines));
  const who = recipient(target);
  return () => enforcer.enforceSync("asker", who, "messages.send");
}
