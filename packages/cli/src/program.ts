import { Command } from "commander";
import { auditCommand } from "./commands/audit.js";
import { claimsCommand } from "./commands/claims.js";
import { demoCommand } from "./commands/demo.js";
import { grantsCommand } from "./commands/grants.js";
import { initCommand } from "./commands/init.js";
import { reportCommand } from "./commands/report.js";
import { serveCommand } from "./commands/serve.js";

export function buildProgram(): Command {
  const program = new Command("tessera")
    .description("Tessera: the authority kernel agent hosts trust")
    .version("0.1.0")
    .addCommand(demoCommand())
    .addCommand(claimsCommand())
    .addCommand(grantsCommand())
    .addCommand(auditCommand())
    .addCommand(initCommand())
    .addCommand(serveCommand())
    .addCommand(reportCommand());
  // addCommand does not pass settings down, so each command gets them here: usage errors
  // throw (bin.ts maps them to exit 2) instead of exiting from inside commander, and print
  // as every other refusal does, `tessera: <code>: <message>`, so scripts match one shape.
  const configure = (command: Command): void => {
    command
      .exitOverride()
      .showHelpAfterError()
      .configureOutput({
        outputError: (text, write) => write(text.replace(/^error: /, "tessera: invalid_usage: ")),
      });
    for (const sub of command.commands) configure(sub);
  };
  configure(program);
  return program;
}
