import * as crypto from "node:crypto";
import type { AuditEvent } from "../contracts/schemas.js";

/**
 * The audit trail is a hash chain per stream, so that an edit, a deletion, an insertion or a
 * reordering shows. A stream is one namespace (kernel events); gate events carry no namespace
 * and share the stream `""`. The sink, not the writer, links an event: it alone knows the
 * stream's head, and it must read the head and append under one lock (a transaction, a
 * script, a lock file) so that concurrent writers, in one process or many, still produce one
 * chain.
 *
 * A linked event carries three fields beside its content:
 * - `seq`: its position in the stream, from 1;
 * - `prev`: the `hash` of the event before it, `GENESIS_HASH` for the first;
 * - `hash`: `auditEventHash` of the event with `seq` and `prev` set and `hash` left out.
 */

/** The `prev` of a stream's first event. */
export const GENESIS_HASH = "0".repeat(64);

/** Bumped if the preimage ever changes, so an old trail is never read with the wrong rule. */
const DOMAIN = "tessera-audit-chain-v1\n";

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
 * SHA-256 hex over the domain tag and the canonical JSON of the event without its `hash`
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
  const unhashed = { ...content, seq: head.seq + 1, prev: head.hash } as AuditEvent;
  return Object.freeze({ ...unhashed, hash: auditEventHash(unhashed) }) as AuditEvent & ChainLink;
}
