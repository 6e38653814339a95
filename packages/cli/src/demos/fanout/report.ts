import type { AuditReason, CallerCode } from "@tessera/core";

/** One send attempt as the demo saw it. Every field is read from the run. */
export interface FanoutLine {
  readonly verdict: "SENT" | "DENY";
  readonly recipient: string;
  /** Caller-facing code of a refusal. */
  readonly code?: CallerCode;
  /** What audit recorded for the attempt (the owner's view). */
  readonly reason: AuditReason;
  /** The reply the recipient's router returned, for a delivered message. */
  readonly reply?: string;
  /** Uses of the ticket named by `ticketOf`, read from the usage store after the scene. */
  readonly ticket?: {
    readonly of: string;
    readonly used: number;
    readonly maxUses: number;
    readonly revoked: boolean;
  };
}

export interface FanoutScene {
  readonly number: number;
  readonly title: string;
  readonly lines: readonly FanoutLine[];
  /** Envelopes the transport actually delivered in this scene. */
  readonly deliveries: number;
  /** Scene 1: every delivery went to a different recipient, with a different message ID. */
  readonly allDistinct?: boolean;
  /** How the scene's one turn ended (TurnExecutor): `completed` when every step ran. */
  readonly turn: "completed" | "step_budget_exhausted" | "timed_out" | "aborted";
  /** Whether the run showed what the scene is meant to show; the text says so if not. */
  readonly asExpected: boolean;
}

export interface FanoutReport {
  readonly recipients: number;
  /** `memory` for the in-memory usage store, `host` for a store the caller supplied. */
  readonly usageStore: "memory" | "host";
  readonly scenes: readonly FanoutScene[];
}
