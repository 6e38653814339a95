import { TesseraError } from "../contracts/errors.js";

/**
 * The query of a server store's URL, checked before anything reads it: an option given twice
 * (which value the operator meant cannot be known, and the drivers take the last:
 * `sslmode=require&sslmode=disable` connected without TLS), and a driver option that would
 * change how Tessera drives the server (`refused`: each name, and the Tessera option to use
 * instead where there is one), are `invalid_config`.
 */
export function checkStoreUrlQuery(
  params: URLSearchParams,
  server: string,
  refused: Readonly<Record<string, string | undefined>>,
): void {
  const seen = new Set<string>();
  for (const key of params.keys()) {
    if (seen.has(key)) {
      throw new TesseraError("invalid_config", `the URL gives ${key} more than once`);
    }
    seen.add(key);
    if (!Object.hasOwn(refused, key)) continue;
    const own = refused[key];
    throw new TesseraError(
      "invalid_config",
      `the URL option ${key} would change how Tessera drives ${server}${own === undefined ? "" : `; use ${own}`}`,
    );
  }
}
