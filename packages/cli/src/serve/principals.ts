import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { TesseraError } from "@tessera/core";
import { z } from "zod";

/**
 * Who may call the service, and as whom. The host authenticates its agents; this file maps
 * each bearer token (stored only as its SHA-256) to the trusted turn identity the kernel
 * decides for. Nothing in a request body can change it.
 */
const id = z.string().min(1).max(512);
const PrincipalSchema = z.strictObject({
  tokenSha256: z.string().regex(/^[0-9a-f]{64}$/, "64 lowercase hex characters"),
  namespaceId: id,
  actor: id,
  authority: id,
  owner: id.optional(),
});
const PrincipalsFileSchema = z.strictObject({ principals: z.array(PrincipalSchema).min(1) });

export type Principal = z.infer<typeof PrincipalSchema>;

export function loadPrincipals(path: string): readonly Principal[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new TesseraError("invalid_config", "the principals file is unreadable or not JSON", {
      cause: error,
    });
  }
  const parsed = PrincipalsFileSchema.safeParse(raw);
  if (!parsed.success) {
    const where = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new TesseraError("invalid_config", `the principals file does not match: ${where}`);
  }
  return Object.freeze(parsed.data.principals.map((p) => Object.freeze(p)));
}

export function tokenDigest(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** The principal whose token this is, compared in constant time; undefined when none. */
export function authenticate(
  principals: readonly Principal[],
  authorization: string | undefined,
): Principal | undefined {
  const token = /^Bearer (\S{1,4096})$/.exec(authorization ?? "")?.[1];
  if (token === undefined) return undefined;
  const presented = Buffer.from(tokenDigest(token), "hex");
  return principals.find((p) => timingSafeEqual(Buffer.from(p.tokenSha256, "hex"), presented));
}
