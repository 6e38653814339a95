import { Command } from "commander";
import { COMMANDS } from "./commands/index.js";
import { jsonErrorsOn, writeError } from "./output.js";

export const VERSION = "0.1.0";

/**
 * The program for one command line: only the command it names is loaded (its options,
 * arguments and subcommands in full, so `tessera serve --help` lists everything); every other
 * command is a stand-in with its name and summary, enough for `tessera --help` and for an
 * unknown-command error's suggestions. `tessera --version` loads none.
 */
export async function programFor(argv: readonly string[]): Promise<Command> {
  const args = argv.slice(2);
  const first = args.find((arg) => !arg.startsWith("-"));
  // `tessera help serve` shows serve's help: load the command it names.
  const named = first === "help" ? args[args.indexOf("help") + 1] : first;
  const commands = await Promise.all(
    COMMANDS.map((entry) =>
      entry.name === named ? entry.load() : new Command(entry.name).description(entry.summary),
    ),
  );
  return assemble(commands);
}

export function assemble(commands: readonly Command[]): Command {
  const program = new Command("tessera")
    .description("Tessera: the authority kernel agent hosts trust")
    .version(VERSION);
  for (const command of commands) program.addCommand(command);
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
