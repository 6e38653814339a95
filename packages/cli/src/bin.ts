#!/usr/bin/env node
import { CommanderError } from "commander";
import { endQuietlyWhenReaderLeaves, useJsonErrors } from "./output.js";
import { programFor } from "./program.js";

useJsonErrors(process.argv.slice(2).includes("--json"));
endQuietlyWhenReaderLeaves();
try {
  await (await programFor(process.argv)).parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // Help and version exit 0; usage errors were already printed by commander.
    process.exitCode = error.exitCode === 0 ? 0 : 2;
  } else {
    process.exitCode = (await import("./report-error.js")).reportError(error);
  }
}
