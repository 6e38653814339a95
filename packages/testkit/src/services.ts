/**
 * Which real services a test run may use. Backend suites read their URL from the
 * environment: without it a local `npm test` skips them (the run's closing summary says which
 * and why, once); under `CI=true` a missing URL is a failure, never a skip.
 */
export type ServiceVariable = "TESSERA_PG_URL" | "TESSERA_REDIS_URL";

export function serviceUrl(variable: ServiceVariable): string | undefined {
  const url = process.env[variable];
  if (url) return url;
  if (process.env.CI === "true") {
    throw new Error(`${variable} is not set: under CI=true the backend suites must run, not skip`);
  }
  // Said once, at the end of the run (test/support/run-summary.ts), not once per file.
  return undefined;
}
