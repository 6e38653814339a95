import type { Grant, GrantSource } from "@tessera/core";

/** The resource namespace and action of every MCP tool call. */
export const MCP_NAMESPACE = "mcp";
export const TOOLS_CALL = "tools/call";

/** One tool the gateway fronts: where it lives and which arguments are path segments. */
export interface ToolRef {
  readonly server: string;
  readonly tool: string;
  readonly bind: readonly string[];
}

/**
 * Could this grant ever allow a call of this tool? True when one of its `tools/call`
 * capabilities in the `mcp` namespace covers some resource `[server, tool, ...bound values]`:
 * an exact capability of that depth naming the tool, or a descendants one on a prefix of it
 * (or below the tool, naming some bound values).
 */
function grantReaches(grant: Grant, ref: ToolRef): boolean {
  const depth = 2 + ref.bind.length;
  for (const capability of grant.capabilities) {
    const { namespace, path } = capability.resource;
    if (namespace !== MCP_NAMESPACE || !capability.actions.includes(TOOLS_CALL)) continue;
    const head = [ref.server, ref.tool];
    const shared = Math.min(path.length, 2);
    let prefixMatches = true;
    for (let i = 0; i < shared; i++) if (path[i] !== head[i]) prefixMatches = false;
    if (!prefixMatches) continue;
    if (capability.scope === "exact" ? path.length === depth : path.length <= depth) return true;
  }
  return false;
}

/**
 * The kernel decides on one action at a time, and every MCP tool shares the action
 * `tools/call`; so the gateway shows the kernel, per tool, only the grants that can reach that
 * tool. Discovery then answers "may this caller run this tool now", with the kernel's own rules
 * (issuer, revocation, purpose, window, unspent usage), and a spent single-use tool is refused
 * exactly like one never granted (`tool_unavailable`, audit `grant_exhausted`) even while the
 * caller holds tickets for other tools. Grants pass through unchanged, so the kernel's checks
 * and its seal on already-validated grants still apply.
 */
export function toolGrants(grants: readonly unknown[], ref: ToolRef): readonly unknown[] {
  return grants.filter((grant) => isGrantLike(grant) && grantReaches(grant, ref));
}

/** Malformed material is kept: the kernel then fails the turn closed, as it should. */
function isGrantLike(value: unknown): value is Grant {
  if (typeof value !== "object" || value === null) return true;
  const capabilities = (value as { capabilities?: unknown }).capabilities;
  if (!Array.isArray(capabilities)) return true;
  return capabilities.every(
    (c) =>
      typeof c === "object" &&
      c !== null &&
      typeof c.resource === "object" &&
      c.resource !== null &&
      Array.isArray(c.resource.path) &&
      Array.isArray(c.actions),
  );
}

/** A grant source that answers one fixed list: the turn's grants, read once by the gateway. */
export function fixedSource(grants: readonly unknown[]): GrantSource {
  return { listGrants: async () => grants };
}
