import { z } from "zod";

const text = z.string().min(1, "expected a non-empty string").max(4096);
const port = z.number().int().min(0).max(65_535);

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
});
export type ConfigFile = z.infer<typeof ConfigFileSchema>;

const envPort = z
  .string()
  .regex(/^\d{1,5}$/, "expected a whole number from 0 to 65535")
  .transform(Number)
  .pipe(port);

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
