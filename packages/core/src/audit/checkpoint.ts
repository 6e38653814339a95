import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from "node:crypto";
import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import type { AuditBreak } from "./verify-types.js";
import { AuditTrailWalker } from "./walk.js";

/**
 * A stream's head signed with Ed25519. Kept away from the trail (another machine, a ticket, a
 * printout), it proves the trail up to that head: whoever can rewrite the whole log can
 * recompute every hash, but cannot sign a new head without the private key.
 */
export interface AuditCheckpoint {
  readonly format: typeof FORMAT;
  readonly stream: string;
  readonly seq: number;
  readonly hash: string;
  /** When it was signed (ISO 8601), covered by the signature. */
  readonly at: string;
  /** Ed25519 signature over the fields above, base64. */
  readonly signature: string;
}

/** What a checkpoint signs: a stream's head. */
export interface AuditCheckpointHead {
  readonly stream: string;
  readonly seq: number;
  readonly hash: string;
}

export type AuditCheckpointResult =
  | { readonly ok: true; readonly stream: string; readonly seq: number }
  | {
      readonly ok: false;
      readonly stream: string;
      readonly seq: number;
      /**
       * - `signature`: not signed by that key, or a signed field was changed;
       * - `malformed`: not a checkpoint at all;
       * - `truncated`: the trail ends before the checkpoint's seq (its tail was cut);
       * - `mismatch`: the event at that seq has another hash (the trail was rewritten);
       * - `broken`: the chain breaks at or before that seq (`break` says where).
       */
      readonly reason: "signature" | "malformed" | "truncated" | "mismatch" | "broken";
      readonly break?: AuditBreak;
    };

const FORMAT = "tessera-audit-checkpoint-v1";
const HEX64 = /^[0-9a-f]{64}$/;

/** A private key as PEM (PKCS#8) or a KeyObject; refused unless it is Ed25519. */
export type AuditSigningKey = string | KeyObject;

/** Signs `head` with an Ed25519 private key. `at` defaults to now. */
export function signAuditCheckpoint(
  head: AuditCheckpointHead,
  privateKey: AuditSigningKey,
  options: { readonly at?: string } = {},
): AuditCheckpoint {
  const unsigned = {
    format: FORMAT,
    stream: head.stream,
    seq: head.seq,
    hash: head.hash,
    at: options.at ?? new Date().toISOString(),
  } as const;
  if (!isHead(unsigned) || Number.isNaN(Date.parse(unsigned.at))) {
    throw new TesseraError("invalid_input", "a checkpoint signs a stream, a seq and a hash");
  }
  const key = ed25519(privateKey, createPrivateKey, "private");
  const signature = sign(null, payload(unsigned), key).toString("base64");
  return Object.freeze(Object.assign({}, unsigned, { signature }));
}

/**
 * Checks `checkpoint` against an Ed25519 public key and the trail (in the sink's read order;
 * every stream may be in it, only the checkpoint's matters). Passes when the signature holds,
 * the stream's chain is intact up to the checkpoint's seq, and the event at that seq has the
 * signed hash. Events after it are not the checkpoint's business.
 *
 * The trail is either the events themselves or a walker that was given them page by page,
 * created watching the checkpoint's stream and seq (`watch`): a trail too long to hold.
 */
export function verifyAuditCheckpoint(
  checkpoint: unknown,
  publicKey: AuditSigningKey,
  trail: readonly AuditEvent[] | AuditTrailWalker,
): AuditCheckpointResult {
  const key = ed25519(publicKey, createPublicKey, "public");
  if (!isCheckpoint(checkpoint)) {
    return Object.freeze({ ok: false, stream: "", seq: 0, reason: "malformed" });
  }
  const { stream, seq } = checkpoint;
  const fail = (reason: Exclude<AuditCheckpointResult, { ok: true }>["reason"], b?: AuditBreak) =>
    Object.freeze({
      ok: false as const,
      stream,
      seq,
      reason,
      ...(b === undefined ? {} : { break: b }),
    });
  let signed: boolean;
  try {
    signed = verify(null, payload(checkpoint), key, Buffer.from(checkpoint.signature, "base64"));
  } catch {
    signed = false;
  }
  if (!signed) return fail("signature");

  let walker: AuditTrailWalker;
  if (trail instanceof AuditTrailWalker) {
    walker = trail;
  } else {
    walker = new AuditTrailWalker({ watch: [{ stream, seq }] });
    walker.push(trail);
  }
  const report = walker.result().streams.find((walked) => walked.stream === stream);
  if ((report?.head.seq ?? 0) < seq) {
    const found = report?.break;
    return found === undefined ? fail("truncated") : fail("broken", found);
  }
  if (walker.hashAt(stream, seq) !== checkpoint.hash) return fail("mismatch");
  return Object.freeze({ ok: true as const, stream, seq });
}

/** The signed bytes: a domain tag and the fields in a fixed order. */
function payload(fields: Omit<AuditCheckpoint, "signature">): Buffer {
  return Buffer.from(
    `${FORMAT}\n${JSON.stringify([fields.stream, fields.seq, fields.hash, fields.at])}`,
    "utf8",
  );
}

function ed25519(
  given: AuditSigningKey,
  read: (pem: string) => KeyObject,
  kind: "private" | "public",
): KeyObject {
  let key: KeyObject;
  try {
    key = typeof given === "string" ? read(given) : given;
  } catch (error) {
    throw new TesseraError("invalid_input", `the ${kind} key is not a readable key`, {
      cause: error,
    });
  }
  if (key.type !== kind || key.asymmetricKeyType !== "ed25519") {
    throw new TesseraError("invalid_input", `the ${kind} key is not an Ed25519 key`);
  }
  return key;
}

function isHead(value: { stream: unknown; seq: unknown; hash: unknown }): boolean {
  return (
    typeof value.stream === "string" &&
    Number.isSafeInteger(value.seq) &&
    (value.seq as number) > 0 &&
    typeof value.hash === "string" &&
    HEX64.test(value.hash)
  );
}

function isCheckpoint(value: unknown): value is AuditCheckpoint {
  if (typeof value !== "object" || value === null) return false;
  const c = value as Record<string, unknown>;
  return (
    c.format === FORMAT &&
    isHead(c as { stream: unknown; seq: unknown; hash: unknown }) &&
    typeof c.at === "string" &&
    typeof c.signature === "string"
  );
}
