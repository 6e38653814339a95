import { z } from "zod";

const text = z.string().min(1, "expected a non-empty string").max(4096);
const port = z.number().int().min(0).max(65_535);
/** A timeout in whole milliseconds, up to an hour. */
const ms = z.number().int().min(1).max(3_600_000);

/**
 * How TLS reaches this service. `proxy`: a TLS-terminating proxy in front of it (the service
 * itself speaks plain HTTP), which silences the warning a non-loopback bind gives without it.
 */
const TlsSchema = z.literal("proxy", {
  error: 'expected "proxy" (a TLS-terminating proxy in front)',
});

/**
 * `tessera.json` in a data directory. Strict: a misspelt key (`prot`) is refused by name
 * instead of silently leaving the default in force. Relative paths, and a relative
 * `sqlite:` file, are the data directory's.
 */
export const ConfigFileSchema = z.strictObject({
  version: z.literal(1),
  store: text,
  principals: text,
  claims: text.optional(),
  host: text.optional(),
  port: port.optional(),
  tls: TlsSchema.optional(),
  /** The webhook recipients file (`tessera serve --webhooks`). */
  webhooks: text.optional(),
  /** The A2UI gate's catalogs file (`tessera serve --a2ui`). */
  a2ui: text.optional(),
  /** JWT access tokens from an identity provider: its config file (`tessera serve --identity`). */
  identity: text.optional(),
  /** How long a client may take to send a request or stay idle (`tessera serve --*-timeout`). */
  headersTimeoutMs: ms.optional(),
  requestTimeoutMs: ms.optional(),
  keepAliveTimeoutMs: ms.optional(),
  connectionTimeoutMs: ms.optional(),
});
export type ConfigFile = z.infer<typeof ConfigFileSchema>;

const envPort = z
  .string()
  .regex(/^\d{1,5}$/, "expected a whole number from 0 to 65535")
  .transform(Number)
  .pipe(port);
const envMs = z
  .string()
  .regex(/^\d{1,7}$/, "expected whole milliseconds from 1 to 3600000")
  .transform(Number)
  .pipe(ms);

/**
 * The environment a service reads. A variable set to the empty string is refused, never
 * taken as unset: it is nearly always a slip (`TESSERA_STORE=$UNSET_VAR`).
 */
export const ServeEnvSchema = z.object({
  TESSERA_DATA: text.optional(),
  TESSERA_STORE: text.optional(),
  TESSERA_PRINCIPALS: text.optional(),
  TESSERA_HOST: text.optional(),
  TESSERA_PORT: envPort.optional(),
  TESSERA_TLS: TlsSchema.optional(),
  TESSERA_WEBHOOKS: text.optional(),
  TESSERA_A2UI: text.optional(),
  TESSERA_IDENTITY: text.optional(),
  TESSERA_HEADERS_TIMEOUT_MS: envMs.optional(),
  TESSERA_REQUEST_TIMEOUT_MS: envMs.optional(),
  TESSERA_KEEP_ALIVE_TIMEOUT_MS: envMs.optional(),
  TESSERA_CONNECTION_TIMEOUT_MS: envMs.optional(),
});

/** The environment a client command reads. */
export const ClientEnvSchema = z.object({
  TESSERA_URL: z
    .url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" })
    .optional(),
  TESSERA_TOKEN: text.optional(),
  TESSERA_DATA: text.optional(),
});

/** Zod issues as one line the operator can act on: `where: field: message; …`. */
export function describeIssues(where: string, error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const field = issue.path.join(".");
      return field ? `${where}: ${field}: ${issue.message}` : `${where}: ${issue.message}`;
    })
    .join("; ");
}
