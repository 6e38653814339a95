import { dirname, resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { octalMode, readGuardedFile, WRITABLE_BY_OTHERS } from "@tessera/core/store-kit";
import { z } from "zod";
import { storeInFolder } from "./config-paths.js";

/**
 * The gateway's configuration file: which upstream MCP servers it fronts, which tool arguments
 * become resource path segments, who may call (bearer tokens stored only as SHA-256), where its
 * stores live, and its limits. Checked once at start; every problem names its field.
 */

const id = z.string().min(1).max(512);
/** Server names become the first path segment and the exposed name's prefix. */
export const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** MCP's recommended tool-name alphabet; anything else is never exposed or forwarded. */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

const serverName = z.string().regex(SERVER_NAME, "letters, digits, _ and -, at most 64");
const toolName = z
  .string()
  .regex(TOOL_NAME, "letters, digits, _, . and -, at most 128")
  .refine((name) => name !== "." && name !== "..", "not . or ..");
const argumentName = z.string().min(1).max(128);

/**
 * An HTTP upstream's own OAuth credential (RFC 6749 §4.4, client credentials): the gateway gets
 * its access token from `tokenUrl` and sends it upstream; a caller's token never goes there.
 * The secret is read from a file of mode 0600 (relative to the config's folder) or from an
 * environment variable, never written in the config itself.
 */
export const ClientCredentialsSchema = z
  .strictObject({
    type: z.literal("client_credentials"),
    tokenUrl: z.url({ protocol: /^https?$/ }),
    clientId: z.string().min(1).max(512),
    clientSecretFile: z.string().min(1).optional(),
    clientSecretEnv: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, "an environment variable name")
      .optional(),
    /** How the secret is sent: HTTP Basic (the default) or in the form body. */
    method: z.enum(["client_secret_basic", "client_secret_post"]).optional(),
    scope: z.string().min(1).max(2048).optional(),
    /** RFC 8707 resource indicator: the upstream's URL as its tokens' audience. */
    resource: z.url().optional(),
    /** The `audience` parameter some providers take instead of `resource`. */
    audience: z.string().min(1).max(2048).optional(),
  })
  .refine(
    (auth) => (auth.clientSecretFile === undefined) !== (auth.clientSecretEnv === undefined),
    "name exactly one of clientSecretFile and clientSecretEnv",
  )
  .refine(
    (auth) => !URL.canParse(auth.tokenUrl) || isSecureOrLocal(auth.tokenUrl),
    "the token endpoint must be https (http only on loopback): the client secret goes there",
  );
export type ClientCredentialsSpec = z.infer<typeof ClientCredentialsSchema>;

function isSecureOrLocal(url: string): boolean {
  const { protocol, hostname } = new URL(url);
  if (protocol === "https:") return true;
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

export const UpstreamSchema = z.union([
  z.strictObject({
    command: z.string().min(1),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().min(1).optional(),
  }),
  z
    .strictObject({
      url: z.url({ protocol: /^https?$/ }),
      headers: z.record(z.string(), z.string()).optional(),
      auth: ClientCredentialsSchema.optional(),
    })
    .refine(
      (spec) =>
        spec.auth === undefined ||
        !Object.keys(spec.headers ?? {}).some((name) => name.toLowerCase() === "authorization"),
      "an upstream has one credential: a static authorization header or auth, not both",
    ),
]);
export type UpstreamSpec = z.infer<typeof UpstreamSchema>;

export const ToolRuleSchema = z.strictObject({
  /** Arguments whose values become further path segments, in this order (`to` of `send_email`). */
  bind: z.array(argumentName).max(8).default([]),
});
export type ToolRule = z.infer<typeof ToolRuleSchema>;
export type ToolRules = Readonly<Record<string, Readonly<Record<string, ToolRule>>>>;

export const PrincipalSchema = z.strictObject({
  tokenSha256: z.string().regex(/^[0-9a-f]{64}$/, "64 lowercase hex characters"),
  namespaceId: id,
  actor: id,
  authority: id,
  owner: id.optional(),
  purpose: id.optional(),
});
export type Principal = z.infer<typeof PrincipalSchema>;

export const LimitsSchema = z.strictObject({
  /** The serialized `arguments` of one call; larger is refused before anything is claimed. */
  maxArgumentBytes: z.int().positive().max(16_777_216).default(65_536),
  /** How long an upstream may take; past it the call is in doubt, never retried. */
  upstreamTimeoutMs: z.int().positive().max(3_600_000).default(30_000),
  /** Upstream results larger than this are answered but not kept for replays. */
  maxRecordedResultBytes: z.int().positive().max(16_777_216).default(1_048_576),
  /**
   * After an upstream exits or fails to start, the first wait before it is started again (for
   * the next call that needs it); each failed start doubles it, up to 30 s.
   */
  restartBackoffMs: z.int().positive().max(30_000).default(250),
  /** An HTTP session idle this long is closed (its client never sent DELETE). */
  sessionIdleMs: z.int().positive().max(86_400_000).default(1_800_000),
});
export type Limits = z.infer<typeof LimitsSchema>;

export const GatewayConfigSchema = z.strictObject({
  upstreams: z
    .record(serverName, UpstreamSchema)
    .refine((u) => Object.keys(u).length > 0, "name at least one upstream server"),
  tools: z.record(serverName, z.record(toolName, ToolRuleSchema)).default({}),
  /**
   * Static bearer tokens. May be empty (or left out) when `identity` names a provider: a
   * JWT-only gateway, which serves HTTP only (stdio carries no header, so no token to verify).
   */
  principals: z.array(PrincipalSchema).default([]),
  /** A store URL for `openStores` (`sqlite:…`, `postgres://…`, `redis://…`); memory when absent. */
  stores: z.string().min(1).optional(),
  /**
   * Stateless Streamable HTTP: no MCP session, so a call must carry an idempotency key in
   * `_meta` (a JSON-RPC id alone is not a replay key).
   */
  stateless: z.boolean().default(false),
  /**
   * The identity provider's config file (`@tessera/server/identity`'s, as `tessera serve
   * --identity` reads it): its access tokens are accepted over HTTP beside `principals`, and its
   * `audience` is this gateway's resource URL. Relative to the config's folder.
   */
  identity: z.string().min(1).optional(),
  limits: LimitsSchema.default(LimitsSchema.parse({})),
});
export type GatewayConfig = z.infer<typeof GatewayConfigSchema>;
export type GatewayConfigInput = z.input<typeof GatewayConfigSchema>;

/** Checks a configuration given as data; `invalid_config` names every wrong field, all at once. */
export function parseGatewayConfig(value: unknown, source = "the gateway config"): GatewayConfig {
  const parsed = GatewayConfigSchema.safeParse(value);
  const problems = [
    ...(parsed.success
      ? []
      : parsed.error.issues.map((issue) => `${issue.path.join(".") || "(top)"}: ${issue.message}`)),
    ...crossFieldProblems(value),
  ];
  if (!parsed.success || problems.length > 0) {
    throw new TesseraError("invalid_config", `${source} does not match: ${problems.join("; ")}`);
  }
  return parsed.data;
}

/**
 * What the schema cannot see field by field: a caller for the gateway, a binding's server, an
 * argument bound twice. Read from the raw value (each check only where its part has the right
 * shape; the schema names the rest), so they come in the same refusal as the schema's.
 */
function crossFieldProblems(value: unknown): string[] {
  if (!isRecord(value)) return [];
  const problems: string[] = [];
  const { principals, identity, upstreams, tools } = value;
  if ((principals === undefined || isEmptyArray(principals)) && identity === undefined) {
    problems.push(
      "principals: name at least one principal (static tokens), or an identity provider (identity) whose JWTs callers bring",
    );
  }
  if (!isRecord(tools)) return problems;
  for (const [server, rules] of Object.entries(tools)) {
    if (isRecord(upstreams) && !Object.hasOwn(upstreams, server)) {
      problems.push(`tools.${server}: no upstream of that name`);
    }
    if (!isRecord(rules)) continue;
    for (const [tool, rule] of Object.entries(rules)) {
      const bind = isRecord(rule) ? rule.bind : undefined;
      if (Array.isArray(bind) && new Set(bind).size !== bind.length) {
        problems.push(`tools.${server}.${tool}.bind: an argument is bound twice`);
      }
    }
  }
  return problems;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isEmptyArray(value: unknown): boolean {
  return Array.isArray(value) && value.length === 0;
}

/**
 * Reads and checks a configuration file: missing is `file_not_found`, the rest `invalid_config`.
 * Its paths (a stdio upstream's `cwd`, a `sqlite:` store file) are resolved against the file's
 * folder, whatever the working directory (see config-paths.ts).
 */
export function loadGatewayConfig(path: string): GatewayConfig {
  let text: string;
  try {
    text = readConfigText(path);
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new TesseraError("file_not_found", `no gateway config at ${path}`, { cause: error });
    }
    throw new TesseraError("invalid_config", `the gateway config at ${path} cannot be read`, {
      cause: error,
    });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new TesseraError("invalid_config", `the gateway config at ${path} is not JSON`, {
      cause: error,
    });
  }
  const config = parseGatewayConfig(raw, `the gateway config at ${path}`);
  return resolveConfigPaths(config, dirname(resolve(path)));
}

/**
 * The file's text, read through one descriptor with its mode: a config that group or others
 * may write is refused, since it names the principals the gateway lets in (a token digest
 * added there is a caller) and the commands it runs. Readable by others stays allowed, as a
 * desktop app's config often is: secrets belong in files of their own (mode 0600) or the
 * environment, as docs/mcp.md says.
 */
function readConfigText(path: string): string {
  const read = readGuardedFile(path, WRITABLE_BY_OTHERS);
  if (read.status === "read") return read.text;
  if (read.status === "open_to_others") {
    throw new TesseraError(
      "invalid_config",
      `the gateway config at ${path} is mode ${octalMode(read.mode)}: others may change who it lets in and what it runs; chmod 644 ${path} (or 600)`,
    );
  }
  // The system's error, which the caller names (missing, unreadable).
  throw read.cause;
}

/**
 * The config with its paths resolved against `baseDir` (the config file's folder): a stdio
 * upstream runs there unless its `cwd` says otherwise (a relative `cwd` is the folder's), so its
 * relative command and arguments are the folder's; a relative `sqlite:` file is the folder's.
 * A desktop app starts MCP servers from `/`: read against that, the upstream is not found and
 * the store is another (empty) database, with none of the claims that refuse replays.
 */
function resolveConfigPaths(config: GatewayConfig, baseDir: string): GatewayConfig {
  const upstreams: GatewayConfig["upstreams"] = {};
  for (const [name, spec] of Object.entries(config.upstreams)) {
    upstreams[name] =
      "command" in spec
        ? { ...spec, cwd: resolve(baseDir, spec.cwd ?? ".") }
        : spec.auth?.clientSecretFile === undefined
          ? spec
          : {
              ...spec,
              auth: {
                ...spec.auth,
                clientSecretFile: resolve(baseDir, spec.auth.clientSecretFile),
              },
            };
  }
  const stores = config.stores === undefined ? undefined : storeInFolder(config.stores, baseDir);
  return {
    ...config,
    upstreams,
    ...(stores === undefined ? {} : { stores }),
    ...(config.identity === undefined ? {} : { identity: resolve(baseDir, config.identity) }),
  };
}
