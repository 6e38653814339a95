#!/usr/bin/env node
import { CommanderError } from "commander";
import { reportError, useJsonErrors } from "./output.js";
import { buildProgram } from "./program.js";

useJsonErrors(process.argv.slice(2).includes("--json"));
try {
  await buildProgram().parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // Help and version exit 0; usage errors were already printed by commander.
    process.exitCode = error.exitCode === 0 ? 0 : 2;
  } else {
    process.exitCode = reportError(error);
  }
}
