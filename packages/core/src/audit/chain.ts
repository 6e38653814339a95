import * as crypto from "node:crypto";
import type { AuditEvent } from "../contracts/schemas.js";

/**
 * The audit trail is a hash chain per stream, so that an edit, a deletion, an insertion or a
 * reordering shows. A stream is one namespace (kernel events); gate events carry no namespace
 * and share the stream `""` (the service's gate events carry the principal's, and join it). The sink, not the writer, links an event: it alone knows the
 * stream's head, and it must read the head and append under one lock (a transaction, a
 * script, a lock file) so that concurrent writers, in one process or many, still produce one
 * chain.
 *
 * A linked event carries three fields beside its content:
 * - `seq`: its position in the stream, from 1;
 * - `prev`: the `hash` of the event before it, `GENESIS_HASH` for the first;
 * - `hash`: the link, `auditLinkHash(seq, prev, auditContentDigest(event))`.
 *
 * The link hashes a short text of three parts (the position, the previous hash and the
 * digest of the event's content), so a store can compute it itself, under its own head lock,
 * from a digest the writer sent: PostgreSQL links a whole batch inside one statement, with no
 * ordering on the client (`sha256()` in SQL). Trails written before this rule (v1: the hash
 * over the whole event with `seq` and `prev`, `auditEventHash`) stay verifiable: `verify`
 * accepts an event whose hash matches either rule, and both are collision-resistant.
 */

/** The `prev` of a stream's first event. */
export const GENESIS_HASH = "0".repeat(64);

/** Bumped if the preimage ever changes, so an old trail is never read with the wrong rule. */
const DOMAIN = "tessera-audit-chain-v1\n";
/** The link rule's domain (v2), written out in every store that links in its own language. */
export const AUDIT_LINK_DOMAIN = "tessera-audit-chain-v2";
const CHAIN_FIELDS: ReadonlySet<string> = new Set(["seq", "prev", "hash"]);

/** The chain fields a sink adds to an event. */
export interface ChainLink {
  readonly seq: number;
  readonly prev: string;
  readonly hash: string;
}

/** A stream's head: what a sink must know to link the next event. */
export interface ChainHead {
  readonly seq: number;
  readonly hash: string;
}

/** The head of an empty stream. */
export const EMPTY_HEAD: ChainHead = Object.freeze({ seq: 0, hash: GENESIS_HASH });

/** Which stream an event belongs to. */
export function auditStreamOf(event: Pick<AuditEvent, "namespaceId">): string {
  return event.namespaceId ?? "";
}

/**
 * The v1 rule, kept to verify trails written before the link rule: SHA-256 hex over the
 * domain tag and the canonical JSON of the event without its `hash`
 * (keys sorted at every level, `undefined` members left out). Events are flat but for
 * `chain`, an array of strings, so sorting the top level is enough to be canonical.
 * `JSON.stringify` with the sorted key list writes exactly that in one native call (a list
 * filters object keys only, never array items): several times cheaper than a call per key,
 * which matters because every sink hashes every decision.
 */
export function auditEventHash(event: AuditEvent): string {
  const keys = Object.keys(event)
    .filter((key) => key !== "hash")
    .sort();
  return sha256Hex(DOMAIN + JSON.stringify(event, keys));
}

/** One-shot `crypto.hash` where the runtime has it (Node ≥ 20.12), else a Hash object. */
const sha256Hex: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === "function"
    ? (text) =>
        (crypto as unknown as { hash(a: string, d: string, e: string): string }).hash(
          "sha256",
          text,
          "hex",
        )
    : (text) => crypto.createHash("sha256").update(text, "utf8").digest("hex");

/**
 * The event linked after `head`: a new frozen object with `seq`, `prev` and `hash` set.
 * Any chain fields the writer passed are replaced: only the sink links.
 */
export function linkAuditEvent(event: AuditEvent, head: ChainHead): AuditEvent & ChainLink {
  const { seq: _seq, prev: _prev, hash: _hash, ...content } = event;
  const seq = head.seq + 1;
  const hash = auditLinkHash(seq, head.hash, auditContentDigest(content as AuditEvent));
  // `content` is this call's own copy: setting the link on it spares Node 20's slow path for
  // a spread followed by more members (about 1 µs an event).
  const linked: AuditEvent & ChainLink = Object.assign(content, { seq, prev: head.hash, hash });
  return Object.freeze(linked);
}

/**
 * SHA-256 hex over the canonical JSON of the event's content: every member but `seq`, `prev`
 * and `hash`, keys sorted (see `auditEventHash` on why sorting the top level is canonical).
 * A writer computes it; the store links it.
 */
export function auditContentDigest(event: AuditEvent): string {
  const keys = Object.keys(event)
    .filter((key) => !CHAIN_FIELDS.has(key))
    .sort();
  return sha256Hex(`${AUDIT_LINK_DOMAIN}-content\n${JSON.stringify(event, keys)}`);
}

/**
 * The link of an event at `seq` after the hash `prev`, over its content digest:
 * SHA-256 hex of `tessera-audit-chain-v2 \n seq \n prev \n digest` (no spaces; `seq` in
 * decimal). Short and fixed in shape, so SQL computes the same.
 */
export function auditLinkHash(seq: number, prev: string, contentDigest: string): string {
  return sha256Hex(`${AUDIT_LINK_DOMAIN}\n${seq}\n${prev}\n${contentDigest}`);
}

/** Whether a linked event's `hash` matches its content, under the current rule or v1. */
export function auditHashMatches(event: AuditEvent & ChainLink): boolean {
  return (
    auditLinkHash(event.seq, event.prev, auditContentDigest(event)) === event.hash ||
    auditEventHash(event) === event.hash
  );
}
