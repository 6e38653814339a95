/**
 * `Symbol.asyncDispose` ships with Node 20.4+ (as `nodejs.asyncDispose`) and with the ES2023
 * disposable proposal elsewhere; fall back to the registry symbol the TypeScript helpers use so
 * `await using` keeps working on runtimes without it.
 */
export const asyncDispose: typeof Symbol.asyncDispose =
  (Symbol.asyncDispose as typeof Symbol.asyncDispose | undefined) ??
  (Symbol.for("Symbol.asyncDispose") as typeof Symbol.asyncDispose);
