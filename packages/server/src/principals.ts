import * as crypto from "node:crypto";
import { readFileSync } from "node:fs";
import {
  type AccessContext,
  type AuditEvent,
  type ExplainPrincipal,
  TesseraError,
} from "@tessera/core";
import { bearerToken } from "@tessera/core/http";
import { octalMode, readPrivateFile, uniqueStorageDigest } from "@tessera/core/store-kit";
import { z } from "zod";

/**
 * Who may call the service, and as whom. The host authenticates its agents; this file maps
 * each bearer token (stored only as its SHA-256) to the trusted turn identity the kernel
 * decides for, purpose included: a purpose is what a grant's `purposes` admit, so an agent
 * that could name its own would pass every purpose check. Nothing in a request body can
 * change any of it.
 */
const id = z.string().min(1).max(512);
const PrincipalSchema = z.strictObject({
  tokenSha256: z.string().regex(/^[0-9a-f]{64}$/, "64 lowercase hex characters"),
  namespaceId: id,
  actor: id,
  authority: id,
  owner: id.optional(),
  purpose: id.optional(),
  /**
   * `agent` (default) decides, sends and uses the A2UI gate; `issuer` issues, revokes and
   * lists grants in its namespace, as the issuer named by `authority`. Neither does the other's.
   */
  role: z.enum(["agent", "issuer"]).default("agent"),
  /** The trusted host session the A2UI gate keys calls by; derived from the identity when absent. */
  session: id.optional(),
});
/**
 * May be empty: a deployment whose callers all bring the identity provider's JWTs needs no
 * static token. Whether some way in exists is `requireCallers`' question, asked where both
 * the principals and the identity provider are known.
 */
const PrincipalsFileSchema = z.strictObject({ principals: z.array(PrincipalSchema) });

export type Principal = z.infer<typeof PrincipalSchema>;
/** A principal as written in a file or passed by a host: `role` may be left out. */
export type PrincipalInput = z.input<typeof PrincipalSchema>;

/**
 * Reads and checks a principals file (`-` is standard input): `{ "principals": [...] }`. A
 * missing file is `file_not_found`; anything else wrong with it is `invalid_config`, a file
 * that group or others may read or write included (as the webhooks and A2UI files are
 * refused): one others may write lets them add a token of their own, and the digests of
 * tokens a person chose are guessable offline. The mode is checked on the descriptor the file
 * is read from, at start and on every reload.
 */
export function loadPrincipals(path: string): readonly Principal[] {
  const text = path === "-" ? readStandardInput() : readPrincipalsFile(path);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new TesseraError("invalid_config", "the principals file is not JSON", { cause: error });
  }
  return checked(raw, "the principals file does not match");
}

function readPrincipalsFile(path: string): string {
  const read = readPrivateFile(path);
  switch (read.status) {
    case "read":
      return read.text;
    case "open_to_others":
      throw new TesseraError(
        "invalid_config",
        `the principals file at ${path} is mode ${octalMode(read.mode)}: it decides who may call, so others may not read or write it; chmod 600 ${path}`,
      );
    case "missing":
      throw new TesseraError("file_not_found", `no principals file at ${path}`, {
        cause: read.cause,
      });
    case "unreadable":
      throw new TesseraError(
        "invalid_config",
        `the principals file at ${path} cannot be read (${read.code})`,
        { cause: read.cause },
      );
  }
}

/** Standard input has no mode of its own to check: the operator's pipe is theirs. */
function readStandardInput(): string {
  try {
    return readFileSync(0, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TesseraError(
      "invalid_config",
      `the principals on standard input cannot be read (${code ?? "error"})`,
      { cause: error },
    );
  }
}

/**
 * Checks principals given as data, in the file's shape `{ principals: [...] }`: the service
 * takes no principal it has not checked, whether it came from a file or from the host's code.
 */
export function parsePrincipals(value: unknown): readonly Principal[] {
  return checked(value, "the principals do not match");
}

function checked(value: unknown, mismatch: string): readonly Principal[] {
  const parsed = PrincipalsFileSchema.safeParse(value);
  if (!parsed.success) {
    const where = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new TesseraError("invalid_config", `${mismatch}: ${where}`);
  }
  return Object.freeze(parsed.data.principals.map((p) => Object.freeze(p)));
}

/**
 * A service with neither a static principal nor an identity provider would refuse every
 * caller: `invalid_config`, naming both ways in. With an identity provider, no static
 * principal is needed (a JWT-only deployment).
 */
export function requireCallers(principals: readonly Principal[], hasIdentity: boolean): void {
  if (principals.length > 0 || hasIdentity) return;
  throw new TesseraError(
    "invalid_config",
    "no principal and no identity provider: every caller would be refused; give at least one principal (a principals file) or an identity provider (--identity, identity in tessera.json)",
  );
}

/**
 * A token's SHA-256: one-shot where Node has `crypto.hash` (20.12+), which skips the Hash
 * object and its stream machinery a `createHash` chain builds on every request.
 */
const sha256: (token: string) => Buffer =
  typeof crypto.hash === "function"
    ? (token) => crypto.hash("sha256", token, "buffer")
    : (token) => crypto.createHash("sha256").update(token).digest();

export function tokenDigest(token: string): string {
  return sha256(token).toString("hex");
}

/** The principal whose token this is, compared in constant time; undefined when none. */
export function authenticate(
  principals: readonly Principal[],
  authorization: string | undefined,
): Principal | undefined {
  const token = bearerToken(authorization);
  if (token === undefined) return undefined;
  const presented = sha256(token);
  return principals.find((p) => crypto.timingSafeEqual(storedDigest(p), presented));
}

/** Each principal's digest decoded once, not on every request. */
const decoded = new WeakMap<Principal, Buffer>();
function storedDigest(principal: Principal): Buffer {
  let digest = decoded.get(principal);
  if (digest === undefined) {
    digest = Buffer.from(principal.tokenSha256, "hex");
    decoded.set(principal, digest);
  }
  return digest;
}

/**
 * The key call IDs are scoped by: the whole turn identity, purpose included, so two principals
 * never share one (one whose purpose a grant refuses would otherwise be answered the other's
 * recorded decisions), and a rotated token keeps its principal's calls. A principal without a
 * purpose keeps the key it had before the purpose was part of it.
 */
export function principalKey(principal: Principal): string {
  const { namespaceId, actor, authority, owner, purpose } = principal;
  return purpose === undefined
    ? uniqueStorageDigest(namespaceId, actor, authority, owner ?? "")
    : uniqueStorageDigest(namespaceId, actor, authority, owner ?? "", purpose);
}

/** The trusted host session of the A2UI gate for this principal. */
export function gateSession(principal: Principal): string {
  return principal.session ?? `principal:${principalKey(principal)}`;
}

/**
 * Whose decisions a principal may read back: exactly its own turn identity, every part,
 * purpose included (none means events decided under no purpose).
 */
export function explainPrincipal(principal: Principal): ExplainPrincipal {
  return Object.assign(turnIdentity(principal), { purpose: principal.purpose ?? null });
}

/** The turn identity of a principal: all of it, purpose included; never the body's. */
export function turnContext(principal: Principal, traceId: string): AccessContext {
  // Set on the fresh object, not spread into a new one: see docs/architecture.md, "Object
  // spreads on hot paths".
  return Object.assign(turnIdentity(principal), { traceId });
}

type TurnIdentityFields = Required<Pick<AuditEvent, "namespaceId" | "actor" | "authority">> &
  Pick<AuditEvent, "owner" | "purpose">;

/** The principal's turn identity as an audit event carries it (absent parts left out). */
export function turnIdentity(principal: Principal): TurnIdentityFields {
  const { namespaceId, actor, authority, owner, purpose } = principal;
  return {
    namespaceId,
    actor,
    authority,
    ...(owner === undefined ? {} : { owner }),
    ...(purpose === undefined ? {} : { purpose }),
  };
}
