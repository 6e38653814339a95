import type { Command } from "commander";
import { auditCommand } from "./commands/audit.js";
import { claimsCommand } from "./commands/claims.js";
import { demoCommand } from "./commands/demo.js";
import { explainCommand } from "./commands/explain.js";
import { grantsCommand } from "./commands/grants.js";
import { initCommand } from "./commands/init.js";
import { mcpCommand } from "./commands/mcp.js";
import { reportCommand } from "./commands/report.js";
import { serveCommand } from "./commands/serve.js";
import { tokensCommand } from "./commands/tokens.js";
import { assemble } from "./program.js";

/**
 * The whole program with every command loaded, for a host or a test that inspects it. The
 * `tessera` binary does not use it: it loads only the command it runs (`programFor`).
 */
export function buildProgram(): Command {
  return assemble([
    demoCommand(),
    claimsCommand(),
    grantsCommand(),
    auditCommand(),
    explainCommand(),
    initCommand(),
    serveCommand(),
    tokensCommand(),
    mcpCommand(),
    reportCommand(),
  ]);
}
