import * as crypto from "node:crypto";
import type { ClaimKey } from "@tessera/core";

/**
 * How a `tools/call` is keyed: the claim a call's key is recorded under, and the digest of its
 * request that tells a duplicate from another call reusing the key.
 */

export interface CallKeys {
  readonly claim: ClaimKey;
  /** Where the release before the act ledger kept the answer: read for replays, never written. */
  readonly legacy: ClaimKey;
}

export function callKeys(scope: string, id: string): CallKeys {
  return {
    claim: { session: `mcp:${scope}`, functionCallId: id },
    legacy: { session: `mcp.result:${scope}`, functionCallId: id },
  };
}

/** SHA-256 of canonical JSON (keys sorted): key order does not make a new call. */
export function digest(value: unknown): string {
  return sha256Hex(canonical(value));
}

/** SHA-256 hex of a string: one-shot `crypto.hash` (Node 20.12+) where there is one. */
export const sha256Hex: (text: string) => string =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha256", text, "hex")
    : (text) => crypto.createHash("sha256").update(text).digest("hex");

/** JSON with every object's keys sorted: the text `digest` hashes. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
