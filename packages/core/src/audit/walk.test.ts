import { generateKeyPairSync } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { linkedTrail as chain, auditEventOf as raw } from "../../test/fixtures.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { auditEventHash, auditStreamOf } from "./chain.js";
import { signAuditCheckpoint, verifyAuditCheckpoint } from "./checkpoint.js";
import { verifyAuditChain } from "./verify.js";
import { AuditTrailWalker } from "./walk.js";

function at<T>(list: readonly T[], index: number): T {
  const value = list[index];
  if (value === undefined) throw new Error(`no element at ${index}`);
  return value;
}

/** Walks `events` cut into pages of the given sizes (the rest in one last page). */
function walk(
  events: readonly AuditEvent[],
  cuts: readonly number[],
  walker = new AuditTrailWalker(),
) {
  let from = 0;
  for (const cut of cuts) {
    walker.push(events.slice(from, from + cut));
    from += cut;
  }
  walker.push(events.slice(from));
  return walker;
}

type Tamper =
  | { kind: "delete" | "edit" | "rehash" | "strip"; i: number }
  | { kind: "swap" | "copy" | "move"; i: number; j: number }
  | { kind: "insert"; i: number; stream: "a" | "b" | undefined };

const stream = fc.constantFrom("a" as const, "b" as const, undefined);
const tamper: fc.Arbitrary<Tamper> = fc.oneof(
  fc.record({
    kind: fc.constantFrom("delete" as const, "edit" as const, "rehash" as const, "strip" as const),
    i: fc.nat(),
  }),
  fc.record({
    kind: fc.constantFrom("swap" as const, "copy" as const, "move" as const),
    i: fc.nat(),
    j: fc.nat(),
  }),
  fc.record({ kind: fc.constant("insert" as const), i: fc.nat(), stream }),
);

/** What a forger can do to a stored trail, applied in turn. */
function tampered(events: readonly AuditEvent[], tampers: readonly Tamper[]): AuditEvent[] {
  const trail = [...events];
  for (const change of tampers) {
    if (trail.length === 0) break;
    const i = change.i % trail.length;
    const event = at(trail, i);
    if ("j" in change) {
      const j = change.j % trail.length;
      if (change.kind === "swap") {
        trail[i] = at(trail, j);
        trail[j] = event;
      } else if (change.kind === "copy") trail.splice(j, 0, event);
      else trail.splice(j, 0, ...trail.splice(i, 1));
    } else if (change.kind === "delete") trail.splice(i, 1);
    else if (change.kind === "edit") trail[i] = { ...event, callId: "forged" };
    else if (change.kind === "rehash") {
      const forged = { ...event, callId: "forged" };
      trail[i] = { ...forged, hash: auditEventHash(forged) };
    } else if (change.kind === "strip") {
      const { hash: _dropped, ...rest } = event;
      trail[i] = rest;
    } else if (change.kind === "insert") trail.splice(i, 0, raw("forged", change.stream));
  }
  return trail;
}

describe("AuditTrailWalker", () => {
  it("gives the same verdict and checkpoint results whatever the pages, on tampered trails", () => {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const kinds = new Set<string>();
    fc.assert(
      fc.property(
        fc.array(stream, { maxLength: 30 }),
        fc.nat({ max: 3 }),
        fc.array(tamper, { maxLength: 4 }),
        fc.array(fc.nat({ max: 5 }), { maxLength: 30 }),
        fc.record({ stream: fc.constantFrom("a", "b", ""), seq: fc.integer({ min: 1, max: 12 }) }),
        (streams, legacy, tampers, cuts, head) => {
          const unchained = Array.from({ length: legacy }, (_, i) => raw(`old${i}`, "a"));
          const intact = [...unchained, ...chain(streams.map((name, i) => raw(`c${i}`, name)))];
          const signedEvent = intact.find(
            (e) => auditStreamOf(e) === head.stream && e.seq === head.seq,
          );
          const checkpoint = signAuditCheckpoint(
            { ...head, hash: signedEvent?.hash ?? "ab".repeat(32) },
            privateKey,
          );
          const trail = tampered(intact, tampers);
          const whole = verifyAuditChain(trail);
          kinds.add(whole.ok ? "ok" : whole.break.kind);
          const walker = walk(trail, cuts, new AuditTrailWalker({ watch: [head] }));
          expect(walker.result()).toEqual(whole);
          expect(verifyAuditCheckpoint(checkpoint, publicKey, walker)).toEqual(
            verifyAuditCheckpoint(checkpoint, publicKey, trail),
          );
        },
      ),
      { numRuns: 3000 },
    );
    // The generator reaches every kind of break, so the property covers each.
    expect([...kinds].sort()).toEqual(["deleted", "edited", "inserted", "ok", "reordered"]);
  });

  it("keeps a gap open across pages: filled later it is reordered, never filled it is deleted", () => {
    const events = chain(Array.from({ length: 6 }, (_, i) => raw(`c${i}`, "a")));
    const moved = [...events.slice(0, 2), ...events.slice(3), at(events, 2)];
    expect(walk(moved, [1, 1, 1, 1, 1]).result()).toMatchObject({
      ok: false,
      break: { kind: "reordered", index: 2, seq: 4, expectedSeq: 3 },
    });
    const cut = [...events.slice(0, 2), ...events.slice(3)];
    expect(walk(cut, [3]).result()).toMatchObject({
      ok: false,
      break: { kind: "deleted", index: 2, seq: 4, expectedSeq: 3 },
    });
  });

  it("counts every event of a stream after its break, and other streams go on verifying", () => {
    const events = chain([
      raw("a0", "a"),
      raw("b0", "b"),
      raw("a1", "a"),
      raw("b1", "b"),
      raw("a2", "a"),
    ]);
    const edited = events.map((event, i) => (i === 2 ? { ...event, callId: "forged" } : event));
    const result = walk(edited, [2, 2]).result();
    expect(result.events).toBe(5);
    expect(result.streams.map((s) => [s.stream, s.events, s.head.seq, s.break?.kind])).toEqual([
      ["a", 3, 1, "edited"],
      ["b", 2, 2, undefined],
    ]);
  });

  it("an unreadable event in a later page is a break at its position in the whole trail", () => {
    const events = chain(Array.from({ length: 4 }, (_, i) => raw(`c${i}`, "a")));
    const walker = new AuditTrailWalker();
    walker.push(events.slice(0, 3));
    walker.push([at(events, 3), null as unknown as AuditEvent, at(events, 0)]);
    expect(walker.result()).toMatchObject({
      ok: false,
      events: 4,
      break: { kind: "unreadable", index: 4 },
    });
  });

  it("answers the same once ended, takes no more events, and keeps only watched hashes", () => {
    const events = chain(Array.from({ length: 3 }, (_, i) => raw(`c${i}`, "a")));
    const walker = walk(events, [], new AuditTrailWalker({ watch: [{ stream: "a", seq: 2 }] }));
    expect(walker.result()).toBe(walker.result());
    expect(() => walker.push(events)).toThrow(expect.objectContaining({ code: "invalid_input" }));
    expect(walker.hashAt("a", 2)).toBe(at(events, 1).hash);
    // Asking for a position the walk did not keep is the caller's mistake, not a "mismatch".
    expect(() => walker.hashAt("a", 3)).toThrow(expect.objectContaining({ code: "invalid_input" }));
  });

  it("a watched position past the verified head has no hash", () => {
    const events = chain(Array.from({ length: 3 }, (_, i) => raw(`c${i}`, "a")));
    const edited = [at(events, 0), { ...at(events, 1), callId: "forged" }, at(events, 2)];
    const walker = walk(edited, [1], new AuditTrailWalker({ watch: [{ stream: "a", seq: 2 }] }));
    expect(walker.hashAt("a", 2)).toBeUndefined();
  });
});
