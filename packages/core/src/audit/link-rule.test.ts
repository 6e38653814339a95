import * as crypto from "node:crypto";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../contracts/schemas.js";
import {
  AUDIT_LINK_DOMAIN,
  auditContentDigest,
  auditEventHash,
  auditLinkHash,
  EMPTY_HEAD,
  GENESIS_HASH,
  linkAuditEvent,
} from "./chain.js";
import { verifyAuditChain } from "./verify.js";

const event = (callId: string): AuditEvent => ({
  at: "2026-01-01T00:00:00.000Z",
  source: "kernel",
  outcome: "allowed",
  code: null,
  reason: "allowed",
  traceId: "t",
  callId,
  namespaceId: "ns",
});

/** Links as the v1 rule did (a trail written by an older release). */
function linkV1(content: AuditEvent, seq: number, prev: string): AuditEvent {
  const unhashed = { ...content, seq, prev };
  return { ...unhashed, hash: auditEventHash(unhashed) };
}

describe("the link rule (v2)", () => {
  it("is a hash over position, previous hash and content digest, as SQL would compute it", () => {
    const linked = linkAuditEvent(event("a"), EMPTY_HEAD);
    const digest = auditContentDigest(event("a"));
    const text = `${AUDIT_LINK_DOMAIN}\n1\n${GENESIS_HASH}\n${digest}`;
    expect(linked.hash).toBe(crypto.createHash("sha256").update(text).digest("hex"));
    expect(auditLinkHash(1, GENESIS_HASH, digest)).toBe(linked.hash);
    // The digest ignores the chain fields: the writer's and the store's agree.
    expect(auditContentDigest(linked)).toBe(digest);
  });

  it("changes when the content, the position or the previous hash changes", () => {
    const a = linkAuditEvent(event("a"), EMPTY_HEAD);
    expect(linkAuditEvent(event("b"), EMPTY_HEAD).hash).not.toBe(a.hash);
    expect(linkAuditEvent(event("a"), { seq: 1, hash: a.hash }).hash).not.toBe(a.hash);
    expect(linkAuditEvent(event("a"), { seq: 0, hash: "1".repeat(64) }).hash).not.toBe(a.hash);
  });

  it("verifies a trail begun under v1 and continued under v2, and finds an edit in either part", () => {
    const first = linkV1(event("old-1"), 1, GENESIS_HASH);
    const second = linkV1(event("old-2"), 2, first.hash as string);
    const third = linkAuditEvent(event("new-3"), { seq: 2, hash: second.hash as string });
    const fourth = linkAuditEvent(event("new-4"), { seq: 3, hash: third.hash });
    expect(verifyAuditChain([first, second, third, fourth]).ok).toBe(true);

    const editedOld = { ...second, callId: "forged" };
    const report = verifyAuditChain([first, editedOld, third, fourth]);
    expect(report.ok).toBe(false);
    const editedNew = { ...fourth, callId: "forged" };
    const later = verifyAuditChain([first, second, third, editedNew]);
    expect(later.ok).toBe(false);
    if (!later.ok) expect(later.break.kind).toBe("edited");
  });
});
