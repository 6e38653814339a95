import {
  type ClaimReader,
  type Closable,
  isTesseraError,
  openAuditReader,
  openClaimReader,
  openStores,
  type ReadableAuditSink,
  type StoreBundle,
  storePackageFor,
  TesseraError,
} from "@tessera/core";
import { explainOpenFailure } from "./open-failure.js";

/**
 * Each backend's pure, offline URL parser: the CLI tries the URL's options one at a time with
 * it to name the one at fault. The scheme → package table itself is core's (`storePackageFor`).
 */
const URL_PARSERS: Readonly<Record<string, string>> = {
  "@tessera/sqlite": "parseSqliteUrl",
  "@tessera/postgres": "parsePostgresUrl",
  "@tessera/redis": "parseRedisUrl",
};

/**
 * Core's `openStores(url)`, with a failure told in the operator's words: the code stays the
 * backend's, the message gains which URL option is at fault or why the server did not answer.
 */
export async function openStoresByUrl(url: string): Promise<StoreBundle> {
  return explained(url, openStores);
}

/**
 * `openStoresByUrl` for a command that works on what a store already holds (`grants list`,
 * `revoke`, `derive`): a URL that names no Tessera store (a mistyped file, schema or key
 * prefix) is refused `schema_unavailable`, as the reading commands refuse it, instead of the
 * writer's open making an empty store there and the command answering that it found nothing.
 * Whether one is there is asked of the audit reader, which writes nothing; any other failure
 * of that look is left for the writer's open to report in its own words.
 */
export async function openExistingStoresByUrl(url: string, command: string): Promise<StoreBundle> {
  let reader: Closable<ReadableAuditSink> | undefined;
  try {
    reader = await openAuditReader(url);
  } catch (error) {
    if (isTesseraError(error) && error.code === "schema_unavailable") {
      throw new TesseraError(
        "schema_unavailable",
        `${error.message}: ${command} works on an existing store (grants add makes one)`,
        { cause: error },
      );
    }
  }
  await reader?.close();
  return openStoresByUrl(url);
}

/** Core's `openAuditReader(url)` (the trail to read, nothing written), failures explained. */
export async function openAuditReaderByUrl(url: string): Promise<Closable<ReadableAuditSink>> {
  return explained(url, openAuditReader);
}

/** Core's `openClaimReader(url)` (claims to list, nothing written), failures explained. */
export async function openClaimReaderByUrl(url: string): Promise<ClaimReader> {
  return explained(url, openClaimReader);
}

async function explained<T>(url: string, open: (url: string) => Promise<T>): Promise<T> {
  try {
    return await open(url);
  } catch (error) {
    const parse = await urlParser(url);
    throw parse === undefined ? error : await explainOpenFailure(error, url, parse);
  }
}

async function urlParser(url: string): Promise<((url: string) => unknown) | undefined> {
  try {
    const name = storePackageFor(url);
    const parser = ((await import(name)) as Record<string, unknown>)[URL_PARSERS[name] ?? ""];
    return typeof parser === "function" ? (parser as (url: string) => unknown) : undefined;
  } catch {
    // An unknown scheme or a package that does not load: the open's own error says so.
    return undefined;
  }
}
