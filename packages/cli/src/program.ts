import { Command } from "commander";
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
import { jsonErrorsOn, writeError } from "./output.js";

export function buildProgram(): Command {
  const program = new Command("tessera")
    .description("Tessera: the authority kernel agent hosts trust")
    .version("0.1.0")
    .addCommand(demoCommand())
    .addCommand(claimsCommand())
    .addCommand(grantsCommand())
    .addCommand(auditCommand())
    .addCommand(explainCommand())
    .addCommand(initCommand())
    .addCommand(serveCommand())
    .addCommand(tokensCommand())
    .addCommand(mcpCommand())
    .addCommand(reportCommand());
  // addCommand does not pass settings down, so each command gets them here: usage errors
  // throw (bin.ts maps them to exit 2) instead of exiting from inside commander, and print
  // as every other refusal does, `tessera: <code>: <message>`, so scripts match one shape.
  const configure = (command: Command): void => {
    command
      .exitOverride()
      // Help after a usage error would break the one JSON object a --json caller parses.
      .showHelpAfterError(!jsonErrorsOn())
      .configureOutput({
        outputError: (text, write) =>
          jsonErrorsOn()
            ? writeError("invalid_usage", text.replace(/^error: /, "").trim())
            : write(text.replace(/^error: /, "tessera: invalid_usage: ")),
      });
    for (const sub of command.commands) configure(sub);
  };
  configure(program);
  return program;
}
