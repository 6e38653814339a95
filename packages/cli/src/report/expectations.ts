import type { CaseKey, PhaseMeasure } from "./types.js";

/**
 * The seed's expected verdicts: what each case and scene must measure for the gate and the
 * kernel to be doing their job. The page never displays these figures; it displays the run's
 * and compares them with these, so a regression shows as a failed case, not as a pretty page.
 * The seed's figures are for two workers; `workers` scales them as the seed's argument does
 * (every worker but the first is a duplicate).
 */

export interface ExpectedCase {
  readonly mode: "parallel OS processes" | "sequential new OS process";
  readonly before: PhaseMeasure;
  readonly after: PhaseMeasure;
}

const times = <T>(n: number, value: T): T[] => Array.from({ length: n }, () => value);
/** The runner sorts each list (default sort); expectations are sorted the same way. */
const sorted = (values: string[]): string[] => [...values].sort();

/** Every process ran the callback: nothing was shared, so nothing was refused. */
function everyoneRan(processes: number, markers: number): PhaseMeasure {
  return {
    tool_callbacks: processes,
    claimed: processes,
    reused: 0,
    claim_markers: markers,
    response_codes: times(processes, "value"),
    receipt_statuses: times(processes, "dispatched"),
  };
}

/** One process won the shared claim; every other one got a correlated refusal. */
function oneRan(processes: number): PhaseMeasure {
  return {
    tool_callbacks: 1,
    claimed: 1,
    reused: processes - 1,
    claim_markers: 1,
    response_codes: sorted(["value", ...times(processes - 1, "INVALID_FUNCTION_CALL")]),
    receipt_statuses: sorted(["dispatched", ...times(processes - 1, "none")]),
  };
}

/** Total over the cases: a new case fails compilation until it has an expectation. */
const CASE_EXPECTATIONS: Record<CaseKey, (workers: number) => ExpectedCase> = {
  "two-workers-one-id": (n) => ({
    mode: "parallel OS processes",
    before: everyoneRan(n, 0),
    after: oneRan(n),
  }),
  "same-id-changed-body": (n) => ({
    mode: "parallel OS processes",
    before: everyoneRan(n, 0),
    after: oneRan(n),
  }),
  // A restart, not a race: always two processes, one after the other.
  "new-worker-old-id": () => ({
    mode: "sequential new OS process",
    before: everyoneRan(2, 0),
    after: oneRan(2),
  }),
  // The control: another trusted session may use the same ID, so every worker runs.
  "two-trusted-sessions": (n) => ({
    mode: "parallel OS processes",
    before: everyoneRan(n, 0),
    after: everyoneRan(n, n),
  }),
};

export function expectedCase(key: CaseKey, workers: number): ExpectedCase {
  return CASE_EXPECTATIONS[key](workers);
}

/** The fields of a fan-out line that decide its verdict; `code: undefined` means "no code". */
export interface ExpectedLine {
  readonly verdict: "SENT" | "DENY";
  readonly recipient: string;
  readonly code: string | undefined;
  readonly reason: string;
  readonly ticket?: {
    readonly of: string;
    readonly used: number;
    readonly maxUses: number;
    readonly revoked: boolean;
  };
}

export interface ExpectedScene {
  readonly lines: readonly ExpectedLine[];
  readonly deliveries: number;
  readonly allDistinct?: boolean;
  readonly turn: "completed";
  readonly asExpected: true;
}

const colleague = (i: number) => `colleague-${i}`;
const ticket = (of: string, used: number, revoked = false) => ({ of, used, maxUses: 1, revoked });
const sent = (i: number): ExpectedLine => ({
  verdict: "SENT",
  recipient: colleague(i),
  code: undefined,
  reason: "allowed",
  ticket: ticket(colleague(i), 1),
});

/** The five scenes of recipient-scoped single-use messaging, as the seed tells them. */
export function expectedScene(scene: number, recipients: number): ExpectedScene | undefined {
  const done = { turn: "completed", asExpected: true } as const;
  switch (scene) {
    case 1:
      return {
        lines: Array.from({ length: recipients }, (_, i) => sent(i)),
        deliveries: recipients,
        allDistinct: true,
        ...done,
      };
    case 2: // the replay is refused at discovery: a spent bounded grant is not reach
      return {
        lines: [
          sent(0),
          {
            verdict: "DENY",
            recipient: colleague(0),
            code: "tool_unavailable",
            reason: "grant_exhausted",
          },
        ],
        deliveries: 1,
        ...done,
      };
    case 3: // refused on the recipient; the asker's own ticket stays unspent
      return {
        lines: [
          {
            verdict: "DENY",
            recipient: colleague(1),
            code: "no_matching_grant",
            reason: "no_capability",
            ticket: ticket(colleague(0), 0),
          },
        ],
        deliveries: 0,
        ...done,
      };
    case 4: // the revoked ticket is refused; the other one is untouched by the revocation
      return {
        lines: [
          {
            verdict: "DENY",
            recipient: colleague(0),
            code: "no_matching_grant",
            reason: "revoked",
            ticket: ticket(colleague(0), 0, true),
          },
          sent(1),
        ],
        deliveries: 1,
        ...done,
      };
    case 5: // no usage store: fails closed before the transport
      return {
        lines: [0, 1].map((i) => ({
          verdict: "DENY" as const,
          recipient: colleague(i),
          code: "tool_unavailable",
          reason: "usage_store_unavailable",
        })),
        deliveries: 0,
        ...done,
      };
    default:
      return undefined;
  }
}

export const SCENE_NUMBERS = [1, 2, 3, 4, 5] as const;
