import { TesseraError } from "@tessera/core";
import { type Principal, PrincipalSchema, type ToolRule, ToolRuleSchema } from "./config.js";

/**
 * No static principal is allowed only beside an identity provider (a JWT-only gateway, HTTP
 * only: `serve` refuses stdio then); with neither, every caller would be refused.
 */
export function checkPrincipals(
  input: readonly Principal[],
  hasIdentity: boolean,
): readonly Principal[] {
  if (!Array.isArray(input) || (input.length === 0 && !hasIdentity)) {
    throw new TesseraError(
      "invalid_config",
      "the MCP gateway needs at least one principal (static tokens) or an identity provider (protectedResource)",
    );
  }
  return Object.freeze(
    input.map((p, i) => {
      const parsed = PrincipalSchema.safeParse(p);
      if (!parsed.success) {
        throw new TesseraError("invalid_config", `principals.${i} does not match the schema`);
      }
      return Object.freeze(parsed.data);
    }),
  );
}

export function checkRules(
  input: Readonly<Record<string, Readonly<Record<string, { bind?: string[] }>>>>,
): Record<string, Record<string, ToolRule>> {
  const rules: Record<string, Record<string, ToolRule>> = {};
  for (const [server, tools] of Object.entries(input)) {
    rules[server] = {};
    for (const [tool, rule] of Object.entries(tools)) {
      const parsed = ToolRuleSchema.safeParse(rule);
      if (!parsed.success) {
        throw new TesseraError("invalid_config", `tools.${server}.${tool} does not match`);
      }
      (rules[server] as Record<string, ToolRule>)[tool] = parsed.data;
    }
  }
  return rules;
}
