import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../contracts/schemas.js";
import { InMemoryAuditSink } from "../memory/audit-sink.js";
import { auditEventHash, linkAuditEvent } from "./chain.js";
import { signAuditCheckpoint, verifyAuditCheckpoint } from "./checkpoint.js";

const pem = () => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  return {
    publicKey: publicKey.export({ type: "spki", format: "pem" }).toString(),
    privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
  };
};
const keys = pem();
const other = pem();

const event = (callId: string, namespaceId: string): AuditEvent => ({
  at: "2026-01-01T00:00:00.000Z",
  source: "kernel",
  outcome: "allowed",
  code: null,
  reason: "allowed",
  traceId: "t",
  callId,
  namespaceId,
});

/** Six events, interleaved over n1 and n2: n1 holds seq 1..3 at indexes 0, 2, 4. */
function trail(): AuditEvent[] {
  const sink = new InMemoryAuditSink();
  for (let i = 0; i < 6; i++) sink.append(event(`c${i}`, i % 2 === 0 ? "n1" : "n2"));
  return [...sink.events];
}

function headOf(events: readonly AuditEvent[], index: number) {
  const e = events[index] as AuditEvent & { seq: number; hash: string };
  return { stream: e.namespaceId ?? "", seq: e.seq, hash: e.hash };
}

describe("signed audit checkpoints", () => {
  it("a checkpoint of a head verifies against the trail, with later events appended", () => {
    const events = trail();
    const checkpoint = signAuditCheckpoint(headOf(events, 2), keys.privateKey, {
      at: "2026-01-02T00:00:00.000Z",
    });
    expect(checkpoint).toMatchObject({
      format: "tessera-audit-checkpoint-v1",
      stream: "n1",
      seq: 2,
    });
    const roundTrip = JSON.parse(JSON.stringify(checkpoint));
    expect(verifyAuditCheckpoint(roundTrip, keys.publicKey, events)).toEqual({
      ok: true,
      stream: "n1",
      seq: 2,
    });
  });

  it("fails on another key, and on any signed field changed", () => {
    const events = trail();
    const checkpoint = signAuditCheckpoint(headOf(events, 4), keys.privateKey);
    expect(verifyAuditCheckpoint(checkpoint, other.publicKey, events)).toMatchObject({
      ok: false,
      reason: "signature",
    });
    const n1seq2 = headOf(events, 2);
    for (const changed of [
      { ...checkpoint, seq: 2, hash: n1seq2.hash },
      { ...checkpoint, at: "2030-01-01T00:00:00.000Z" },
      { ...checkpoint, stream: "n2" },
    ]) {
      expect(verifyAuditCheckpoint(changed, keys.publicKey, events)).toMatchObject({
        ok: false,
        reason: "signature",
      });
    }
    expect(verifyAuditCheckpoint({ ...checkpoint, seq: -1 }, keys.publicKey, events)).toMatchObject(
      { ok: false, reason: "malformed" },
    );
    expect(verifyAuditCheckpoint("nope", keys.publicKey, events)).toMatchObject({
      reason: "malformed",
    });
  });

  it("fails on a truncated trail: its last events dropped, which the chain alone cannot see", () => {
    const events = trail();
    const checkpoint = signAuditCheckpoint(headOf(events, 4), keys.privateKey); // n1 seq 3
    expect(verifyAuditCheckpoint(checkpoint, keys.publicKey, events.slice(0, 4))).toMatchObject({
      ok: false,
      reason: "truncated",
      stream: "n1",
      seq: 3,
    });
  });

  it("fails on a trail rewritten with every hash recomputed (a changed head)", () => {
    const events = trail();
    const checkpoint = signAuditCheckpoint(headOf(events, 4), keys.privateKey);
    // The attacker edits n1's first event and relinks the whole stream.
    let head = { seq: 0, hash: "0".repeat(64) };
    const rewritten = events.map((e) => {
      if (e.namespaceId !== "n1") return e;
      const linked = linkAuditEvent(e.callId === "c0" ? { ...e, outcome: "denied" } : e, head);
      head = { seq: linked.seq, hash: linked.hash };
      return linked;
    });
    expect(verifyAuditCheckpoint(checkpoint, keys.publicKey, rewritten)).toMatchObject({
      ok: false,
      reason: "mismatch",
    });
  });

  it("fails on a chain broken before the checkpoint, naming the break in the whole list", () => {
    const events = trail();
    const checkpoint = signAuditCheckpoint(headOf(events, 4), keys.privateKey);
    const edited = events.map((e, i) => (i === 2 ? { ...e, outcome: "denied" as const } : e));
    expect(verifyAuditCheckpoint(checkpoint, keys.publicKey, edited)).toMatchObject({
      ok: false,
      reason: "broken",
      break: { kind: "edited", stream: "n1", index: 2, seq: 2 },
    });
    // A break after the checkpoint's seq is not the checkpoint's business.
    const early = signAuditCheckpoint(headOf(events, 0), keys.privateKey);
    expect(verifyAuditCheckpoint(early, keys.publicKey, edited)).toMatchObject({ ok: true });
  });

  it("refuses keys that are not Ed25519, or not keys, and heads that are not heads", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const events = trail();
    expect(() => signAuditCheckpoint(headOf(events, 0), rsa.privateKey)).toThrowError(
      expect.objectContaining({ code: "invalid_input" }),
    );
    expect(() => signAuditCheckpoint(headOf(events, 0), "not a pem")).toThrowError(
      expect.objectContaining({ code: "invalid_input" }),
    );
    expect(() => verifyAuditCheckpoint({}, rsa.publicKey, events)).toThrowError(
      expect.objectContaining({ code: "invalid_input" }),
    );
    const hash = auditEventHash(event("x", "n1"));
    for (const head of [
      { stream: "n1", seq: 0, hash },
      { stream: "n1", seq: 1, hash: "zz" },
    ]) {
      expect(() => signAuditCheckpoint(head, keys.privateKey)).toThrowError(
        expect.objectContaining({ code: "invalid_input" }),
      );
    }
  });
});
