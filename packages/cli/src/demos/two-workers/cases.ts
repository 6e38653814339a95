import { quoteCall } from "./catalog.js";

/** The four cases of the seed page, each run before (process memory) and after (shared claim). */
export const CASE_KEYS = [
  "two-workers-one-id",
  "same-id-changed-body",
  "new-worker-old-id",
  "two-trusted-sessions",
] as const;
export type CaseKey = (typeof CASE_KEYS)[number];

export type CaseMode = "parallel OS processes" | "sequential new OS process";

export interface CaseDefinition {
  readonly key: CaseKey;
  readonly title: string;
  readonly mode: CaseMode;
  readonly summary: string;
  /** How many processes run, given `--workers N`. */
  workers(requested: number): number;
  /** The trusted session of worker `index` (the host authenticated it; prefix keeps runs apart). */
  session(index: number, prefix: string): string;
  message(index: number): unknown;
}

/** The one functionCallId every worker of a case sends. */
export const CALL_ID = "call-1";
const sameSession = (_index: number, prefix: string) => `${prefix}host-session-1`;

export const CASES: readonly CaseDefinition[] = [
  {
    key: "two-workers-one-id",
    title: "Two workers, one ID",
    mode: "parallel OS processes",
    summary: "Same functionCallId and host session.",
    workers: (n) => n,
    session: sameSession,
    message: () => quoteCall(CALL_ID, 2),
  },
  {
    key: "same-id-changed-body",
    title: "Same ID, changed body",
    mode: "parallel OS processes",
    summary: "Same functionCallId and host session; every later worker's args differ.",
    workers: (n) => n,
    session: sameSession,
    message: (index) => quoteCall(CALL_ID, 2 + index),
  },
  {
    key: "new-worker-old-id",
    title: "New worker, old ID",
    mode: "sequential new OS process",
    summary:
      "Same functionCallId and host session; the second process starts after the first exits.",
    workers: () => 2,
    session: sameSession,
    message: () => quoteCall(CALL_ID, 2),
  },
  {
    key: "two-trusted-sessions",
    title: "Two trusted sessions",
    mode: "parallel OS processes",
    summary: "Same functionCallId, but each worker has its own trusted host session.",
    workers: (n) => n,
    session: (index, prefix) => `${prefix}host-session-${index + 1}`,
    message: () => quoteCall(CALL_ID, 2),
  },
];
