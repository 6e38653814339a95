import type { ResourceRef } from "./messages.js";
import type { Capability } from "./schemas.js";

/**
 * An A2UI function call as an act the kernel decides, like `messages.send`: its action, its
 * resource namespace, and the capability that allows one catalog function. Contracts, so the
 * service, hosts and grant issuers name the same resource without depending on the gate.
 */

/** The action of calling an A2UI catalog function. */
export const A2UI_CALL_ACTION = "a2ui.call";

/** Resource namespace of A2UI functions: `a2ui:/<catalogId>/<function>`, each part encoded. */
export const A2UI_NAMESPACE = "a2ui";

/**
 * One path segment for a catalog ID or a function name. Catalog IDs are usually URLs, and a
 * segment may not hold `/`, controls or bidi marks: `encodeURIComponent` escapes every one of
 * them (and every non-ASCII character) reversibly, and leaves a plain name like `add` as it is.
 * `.` and `..` survive it, so they are escaped by hand.
 */
function segment(part: string): string {
  const encoded = encodeURIComponent(part);
  return encoded === "." ? "%2E" : encoded === ".." ? "%2E%2E" : encoded;
}

/** The resource a call of `functionName` in `catalogId` asks for. */
export function a2uiFunctionResource(
  catalogId: string,
  functionName: string,
  owner?: string,
): ResourceRef {
  const path = [segment(catalogId), segment(functionName)];
  return owner === undefined
    ? { namespace: A2UI_NAMESPACE, path }
    : { namespace: A2UI_NAMESPACE, path, owner };
}

/**
 * Authority to call exactly one function of one catalog (on behalf of `owner`, or of the
 * turn's owner when none is named): exact scope, so it never covers another function. A grant
 * for every function of a catalog holds `{ resource: { namespace: "a2ui", path:
 * [<encoded catalogId>] }, actions: ["a2ui.call"], scope: "descendants" }`.
 */
export function a2uiFunctionCapability(
  catalogId: string,
  functionName: string,
  owner?: string,
): Capability {
  const path = [segment(catalogId), segment(functionName)];
  return {
    resource:
      owner === undefined
        ? { namespace: A2UI_NAMESPACE, path }
        : { namespace: A2UI_NAMESPACE, path, owner },
    actions: [A2UI_CALL_ACTION],
    scope: "exact",
  };
}
