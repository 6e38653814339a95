import { isSealedGrant } from "../kernel/validated-grants.js";
import type { AuditFilter, AuditPageOptions } from "../ports/audit-sink.js";
import type { ClaimKey, ClaimReceipt, ClaimRecord, JsonValue } from "./claims.js";
import { redact, TesseraError } from "./errors.js";
import { type AuditEvent, AuditEventSchema, type Grant, GrantSchema } from "./schemas.js";

/**
 * Shape checks at the store boundary, one copy for every store (memory, directory, SQLite,
 * PostgreSQL, Redis): each copy used to refuse a slightly different set of calls. TypeScript
 * callers are already typed; these guard JavaScript callers and deserialised input, so a
 * malformed call is refused with `invalid_input` (a grant with `invalid_grant`) before any
 * storage is touched. Backends keep only their primitives.
 */

const SETTLED_STATUSES: ReadonlySet<string> = new Set(["dispatched", "denied", "failed"]);

export function checkClaimKey(key: ClaimKey): void {
  if (
    typeof key !== "object" ||
    key === null ||
    typeof key.session !== "string" ||
    typeof key.functionCallId !== "string"
  ) {
    throw new TesseraError(
      "invalid_input",
      "a claim key is { session: string, functionCallId: string }",
    );
  }
}

export function checkRecord(record: ClaimRecord): void {
  if (
    typeof record !== "object" ||
    record === null ||
    typeof record.bodyHash !== "string" ||
    !Number.isSafeInteger(record.claimedAt) ||
    (record.worker !== undefined && typeof record.worker !== "string")
  ) {
    throw new TesseraError(
      "invalid_input",
      "a claim record is { bodyHash: string, claimedAt: integer ms, worker?: string }",
    );
  }
}

export function checkReceipt(receipt: ClaimReceipt): void {
  if (
    typeof receipt !== "object" ||
    receipt === null ||
    !SETTLED_STATUSES.has(receipt.status) ||
    !Number.isSafeInteger(receipt.settledAt)
  ) {
    throw new TesseraError(
      "invalid_input",
      "a receipt is { status: dispatched | denied | failed, settledAt: integer ms }",
    );
  }
}

/** The largest answer a claim keeps, as JSON text (UTF-16 code units, a bound not a budget). */
export const MAX_ANSWER_BYTES = 1 << 20;

/**
 * A claim's answer, serialised: JSON text of at most `MAX_ANSWER_BYTES`, or `undefined` when
 * there is none. One serialisation for every store, so what a store keeps is what it checked.
 * A value `JSON.stringify` cannot write (a cycle, a BigInt, nesting too deep) is
 * `invalid_input`, never a thrown TypeError or RangeError.
 */
export function serializeAnswer(answer: JsonValue | undefined): string | undefined {
  if (answer === undefined) return undefined;
  let text: string | undefined;
  try {
    text = JSON.stringify(answer);
  } catch {
    throw new TesseraError("invalid_input", "a claim's answer is not JSON-safe");
  }
  if (text === undefined) throw new TesseraError("invalid_input", "a claim's answer is not JSON");
  if (text.length > MAX_ANSWER_BYTES) {
    throw new TesseraError(
      "invalid_input",
      `a claim's answer is over ${MAX_ANSWER_BYTES} bytes as JSON`,
    );
  }
  return text;
}

/** A session of `listInDoubt` (optional there) or `endSession`. */
export function checkSession(session: string | undefined, optional = false): void {
  if (typeof session === "string" || (optional && session === undefined)) return;
  throw new TesseraError("invalid_input", "a session is a string");
}

/** An ID (namespace, grant, subject): refused unless a string, naming the argument, never its value. */
export function checkId(value: string, what: string): void {
  if (typeof value !== "string") throw new TesseraError("invalid_input", `${what} is a string`);
}

/**
 * A usage bound. A positive whole number, as every bounded grant's `maxUses` is: a bound of 0
 * has no grant behind it, and a store that counts first uses by upsert would spend one.
 */
export function checkMaxUses(maxUses: number): void {
  if (!Number.isSafeInteger(maxUses) || maxUses < 1) {
    throw new TesseraError("invalid_input", "maxUses is a positive whole number");
  }
}

/** The inputs of `tryConsumeMany`, checked alike by every store: two IDs, a count and a bound. */
export function checkCarve(
  namespaceId: string,
  grantId: string,
  count: number,
  maxUses: number,
): void {
  checkId(namespaceId, "namespaceId");
  checkId(grantId, "grantId");
  checkMaxUses(count);
  checkMaxUses(maxUses);
}

/** The instant of a revocation: a `Date` that names a time. */
export function checkRevocationInstant(at: Date): void {
  if (!(at instanceof Date) || Number.isNaN(at.getTime())) {
    throw new TesseraError("invalid_input", "a revocation instant is a valid Date");
  }
}

/** A `read` filter: IDs are strings, `limit` a non-negative whole number. */
export function checkAuditFilter(filter: AuditFilter | undefined): void {
  if (filter === undefined) return;
  if (
    typeof filter !== "object" ||
    filter === null ||
    (filter.callId !== undefined && typeof filter.callId !== "string") ||
    (filter.traceId !== undefined && typeof filter.traceId !== "string") ||
    (filter.limit !== undefined && (!Number.isSafeInteger(filter.limit) || filter.limit < 0)) ||
    (filter.newest !== undefined && typeof filter.newest !== "boolean")
  ) {
    throw new TesseraError(
      "invalid_input",
      "an audit filter is { callId?: string, traceId?: string, limit?: non-negative integer, newest?: boolean }",
    );
  }
}

/** The page size a trail is read with when the reader names none. */
export const DEFAULT_AUDIT_PAGE_SIZE = 5_000;

/** A `readPages` page size: a positive whole number, or absent for the default. */
export function checkPageSize(options: AuditPageOptions | undefined): number {
  const size = options?.pageSize;
  if (size === undefined) return DEFAULT_AUDIT_PAGE_SIZE;
  if (!Number.isSafeInteger(size) || size < 1) {
    throw new TesseraError("invalid_input", "an audit page size is a positive whole number");
  }
  return size;
}

/**
 * A true/false store URL option (`?selfTest=false`): absent or `true` is true, `false` is
 * false, anything else is `invalid_config` (a typo must not silently keep the default).
 */
export function flagOption(value: string | null, name: string): boolean {
  if (value === null || value === "true") return true;
  if (value === "false") return false;
  throw new TesseraError("invalid_config", `${name} must be true or false`);
}

/**
 * The grant a store keeps: the input validated (defaults filled), or `invalid_grant` naming
 * where it first fails the schema (see `grantSchemaError`). A sealed grant (parsed or built
 * from validated parts by this library, then deeply frozen) is already exactly that and comes
 * back as it is: fan-out issuance hands stores thousands of them.
 */
export function parseGrantInput(input: unknown): Grant {
  if (isSealedGrant(input)) return input;
  const parsed = GrantSchema.safeParse(input);
  if (!parsed.success) throw grantSchemaError(parsed.error.issues);
  return parsed.data;
}

/** One issue of a failed schema parse, as far as `grantSchemaError` reads it. */
interface SchemaIssue {
  readonly code: string;
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly keys?: readonly string[];
}

/**
 * `invalid_grant` naming where the input first fails the grant schema, as
 * `the grant does not match the grant schema: capabilities.0.actions: <why>`, or `(root)` for
 * the grant itself. Every grant refusal names its field this way: adding a grant, fan-out
 * tickets, `deriveGrant`. The path's keys and an unrecognized key are the caller's text: each
 * is redacted as IDs are (`redact`); the schema's own messages never echo the input.
 */
export function grantSchemaError(issues: readonly SchemaIssue[]): TesseraError {
  const issue = issues[0];
  const where =
    issue === undefined || issue.path.length === 0
      ? "(root)"
      : issue.path
          .map((key) => (typeof key === "number" ? String(key) : redact(String(key))))
          .join(".");
  const why =
    issue === undefined
      ? "does not match"
      : issue.code === "unrecognized_keys"
        ? `unrecognized key ${(issue.keys ?? []).map(redact).join(", ")}`
        : issue.message;
  return new TesseraError(
    "invalid_grant",
    `the grant does not match the grant schema: ${where}: ${why}`,
  );
}

/** The event a sink writes: the input validated, or `invalid_input`. */
export function parseAuditEvent(event: unknown): AuditEvent {
  const parsed = AuditEventSchema.safeParse(event);
  if (!parsed.success) {
    throw new TesseraError("invalid_input", "the audit event does not match the event schema");
  }
  checkAuditEventIds(parsed.data);
  return parsed.data;
}

/**
 * The fields stores index or key by (call, trace, stream) and people search by. A lone
 * surrogate there reads as U+FFFD once a store has written it as UTF-8: two call IDs, or two
 * streams, would meet. Checked on write only: the read schema still takes a trail written
 * before this rule. Free text (`detail`, `resource`) is kept whole inside the event's JSON.
 */
export function checkAuditEventIds(event: AuditEvent): void {
  // No array of the fields: this runs for every event a sink takes.
  if (
    wellFormed(event.traceId) &&
    wellFormed(event.callId) &&
    wellFormed(event.namespaceId) &&
    wellFormed(event.actor) &&
    wellFormed(event.authority) &&
    wellFormed(event.owner) &&
    wellFormed(event.purpose) &&
    wellFormed(event.grantId) &&
    wellFormed(event.session) &&
    (event.chain === undefined || event.chain.every(wellFormed))
  ) {
    return;
  }
  throw new TesseraError(
    "invalid_input",
    "an ID of the audit event holds a lone surrogate, which a store cannot keep apart",
  );
}

function wellFormed(id: string | undefined): boolean {
  return id === undefined || id.isWellFormed();
}
