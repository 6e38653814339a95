import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  rmSync,
  type Stats,
  writeFileSync,
} from "node:fs";
import { dirname, resolve } from "node:path";
import { DirectoryClaimStore } from "@tessera/a2ui";
import { isTesseraError, TesseraError } from "@tessera/core";
import { sqliteUrlOf } from "@tessera/core/store-kit";
import { parsePrincipals, tokenDigest } from "@tessera/server";
import { openStoresByUrl } from "../stores.js";
import {
  DATA_LAYOUT,
  dataPath,
  PRIVATE_DIR_MODE,
  PRIVATE_FILE_MODE,
  unsafeBecause,
} from "./data-dir.js";
import { mintToken } from "./principals-file.js";
import { type ConfigFile, ConfigFileSchema } from "./schema.js";

export interface ProvisionOptions {
  readonly namespace: string;
  readonly authority: string;
  readonly host: string;
  readonly port: number;
  /** The agent token's actor: the `subject` a grant names to let that token act. */
  readonly agent: string;
}

/** What `tessera init` made. The token exists only here and in the operator's terminal. */
export interface Provisioned {
  readonly dataDir: string;
  readonly config: string;
  readonly database: string;
  readonly claims: string;
  readonly principals: string;
  readonly issuerToken: string;
  /** The first agent token: decides and sends as `agent`, in the issuer's namespace. */
  readonly agentToken: string;
}

/**
 * Provisions a data directory: the directory and its private claim directory (0700), the
 * SQLite database with its tables, the principals file holding the SHA-256 of the first
 * issuer token and of the first agent token (a newcomer acts at once, with no hand-hashing),
 * and `tessera.json`, written last, so a directory without it was never finished.
 * Anything this call created is removed again if a later step fails: a half-provisioned
 * directory would be refused by serve, and by a second init, with no way forward.
 */
export async function provisionDataDir(
  dir: string,
  options: ProvisionOptions,
): Promise<Provisioned> {
  const dataDir = resolve(dir);
  const issuerToken = mintToken();
  const agentToken = mintToken();
  const principalsFile = {
    principals: [
      {
        tokenSha256: tokenDigest(issuerToken),
        role: "issuer",
        namespaceId: options.namespace,
        actor: "issuer",
        authority: options.authority,
      },
      {
        tokenSha256: tokenDigest(agentToken),
        role: "agent",
        namespaceId: options.namespace,
        actor: options.agent,
        authority: options.authority,
      },
    ],
  };
  const file: ConfigFile = {
    version: 1,
    store: `sqlite:${DATA_LAYOUT.database}?create=false`,
    principals: DATA_LAYOUT.principals,
    claims: DATA_LAYOUT.claims,
    host: options.host,
    port: options.port,
  };
  // Checked as serve will check them, before anything is made: a directory whose principals
  // or config serve refuses could neither be served nor provisioned again (it is not empty).
  checkAsServeWould(principalsFile, file);
  const created = prepareDirectory(dataDir);
  try {
    const claims = dataPath(dataDir, "claims");
    makePrivateDir(claims);
    // The claim store checks what the gate will check: mode, owner, a real directory.
    await (await DirectoryClaimStore.open(claims)).close();

    const database = dataPath(dataDir, "database");
    const stores = await openStoresByUrl(sqliteUrlOf(database));
    await stores.close();
    chmodSync(database, PRIVATE_FILE_MODE);

    const principals = dataPath(dataDir, "principals");
    writePrivate(principals, principalsFile);

    const config = dataPath(dataDir, "config");
    writePrivate(config, file);
    return Object.freeze({
      dataDir,
      config,
      database,
      claims,
      principals,
      issuerToken,
      agentToken,
    });
  } catch (error) {
    undo(dataDir, created);
    // A file that could not be written (a full disk, a quota) is said with the system's code,
    // not left to reach the operator as an unexpected failure with a stack.
    if (error instanceof TesseraError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    throw new TesseraError(
      "store_unavailable",
      `${dataDir} could not be provisioned: a file could not be written (${code}); nothing was kept`,
      { cause: error },
    );
  }
}

/** The flag of `tessera init` each checked field comes from. */
const FLAG_OF: Readonly<Record<string, string>> = {
  namespaceId: "--namespace",
  authority: "--authority",
  actor: "--agent",
  host: "--host",
  port: "--port",
};

/**
 * The principals file and `tessera.json` checked whole, with the schemas `tessera serve` and
 * `tessera tokens` check them with. A value serve would refuse (an ID over 512 characters, a
 * host over 4096) is the operator's `invalid_usage`, naming the flag, and nothing is made.
 */
function checkAsServeWould(principals: unknown, config: ConfigFile): void {
  const issues: string[] = [];
  try {
    parsePrincipals(principals);
  } catch (error) {
    if (!isTesseraError(error)) throw error;
    issues.push(...fieldsOf(error.message));
  }
  const parsed = ConfigFileSchema.safeParse(config);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const field = String(issue.path.at(-1) ?? "");
      issues.push(`${FLAG_OF[field] ?? field}: ${issue.message}`);
    }
  }
  if (issues.length > 0) {
    throw new TesseraError(
      "invalid_usage",
      `tessera serve would refuse what these flags provision, so nothing was made: ${[...new Set(issues)].join("; ")}`,
    );
  }
}

/** `principals.1.actor: Too big…; …` (the principals check's message) as flags and reasons. */
function fieldsOf(message: string): string[] {
  const found = [...message.matchAll(/principals\.\d+\.(\w+): ([^;]+)/g)];
  if (found.length === 0) return [message];
  return found.map(([, field = "", why = ""]) => `${FLAG_OF[field] ?? field}: ${why.trim()}`);
}

/**
 * Makes the directory, or accepts an existing one only if it is empty and this user's own
 * (then closes it to others). Never merges into a directory that holds anything: it could be
 * another service's data. Returns whether the directory itself was created here.
 */
function prepareDirectory(dataDir: string): boolean {
  let stat: Stats | undefined;
  try {
    stat = lstatSync(dataDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw inspectFailure(dataDir, error);
  }
  if (stat === undefined) {
    try {
      mkdirSync(dataDir, { mode: PRIVATE_DIR_MODE });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") {
        throw new TesseraError(
          "data_dir_missing",
          `cannot create ${dataDir}: its parent ${dirname(dataDir)} does not exist (init makes one directory, not a path)`,
          { cause: error },
        );
      }
      throw inspectFailure(dataDir, error);
    }
    // mkdir's mode passes through the umask; set it exactly.
    chmodSync(dataDir, PRIVATE_DIR_MODE);
    return true;
  }
  const unsafe = unsafeBecause(stat);
  if (unsafe !== undefined && !unsafe.startsWith("is open to group")) {
    throw new TesseraError("data_dir_insecure", `${dataDir} ${unsafe}`);
  }
  if (readdirSync(dataDir).length > 0) {
    throw new TesseraError(
      "data_dir_not_empty",
      `${dataDir} already holds files; init provisions an empty or new directory and never overwrites one`,
    );
  }
  chmodSync(dataDir, PRIVATE_DIR_MODE);
  return false;
}

function makePrivateDir(path: string): void {
  mkdirSync(path, { mode: PRIVATE_DIR_MODE });
  chmodSync(path, PRIVATE_DIR_MODE);
}

/** Exclusive create (`wx`): provisioning never replaces a file someone else made meanwhile. */
function writePrivate(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`, {
    flag: "wx",
    mode: PRIVATE_FILE_MODE,
  });
  chmodSync(path, PRIVATE_FILE_MODE);
}

function undo(dataDir: string, created: boolean): void {
  try {
    if (created) {
      rmSync(dataDir, { recursive: true, force: true });
      return;
    }
    for (const entry of readdirSync(dataDir)) {
      rmSync(resolve(dataDir, entry), { recursive: true, force: true });
    }
  } catch {
    // The original failure is what the operator needs; a failed clean-up leaves files that
    // the next init refuses by name (data_dir_not_empty).
  }
}

function inspectFailure(dataDir: string, error: unknown): TesseraError {
  const code = (error as NodeJS.ErrnoException).code;
  return new TesseraError(
    "data_dir_insecure",
    `${dataDir} cannot be provisioned (${code ?? "error"})`,
    { cause: error },
  );
}
