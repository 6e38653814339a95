import type { GrantInput } from "@tessera/core";
import { ticket } from "./service.js";

/**
 * The load of one round of the database-kill test, and what each client saw. Clients behave
 * as the service asks them to: a retry-safe send is retried with its call ID after a 503, a
 * dropped connection or `call_in_progress`, until it gets a decision or the round's deadline;
 * a send without a call ID is asked once (a retry would be a new decision).
 */
export interface Job {
  readonly recipient: string;
  /** Absent: a wrong-recipient send without a call ID (its denial is written after the reply). */
  readonly callId?: string;
  /** A second client sends this call ID at the same moment (a concurrent retry). */
  readonly duplicate?: boolean;
}

export interface Seen {
  readonly job: Job;
  /** Every status answered, in order (0: the connection failed or timed out). */
  readonly statuses: number[];
  /** The decision, once one came (a 200). */
  answer?: { status: string; code?: string; grantId?: string };
  answeredAt?: number;
}

export interface Round {
  readonly tickets: GrantInput[];
  readonly jobs: Job[];
}

/**
 * `tickets` single-use tickets, each fought over by `callsPerTicket` call IDs (every fourth
 * sent twice at once), and `strangers` wrong-recipient sends, half with a call ID, half without.
 */
export function plan(round: string, tickets: number, callsPerTicket: number, strangers: number) {
  const result: Round = { tickets: [], jobs: [] };
  for (let t = 0; t < tickets; t++) {
    const recipient = `r-${round}-${t}`;
    result.tickets.push(ticket(`t-${recipient}`, recipient));
    for (let c = 0; c < callsPerTicket; c++) {
      const callId = `c-${round}-${t}-${c}`;
      result.jobs.push({ recipient, callId });
      if ((t + c) % 4 === 0) result.jobs.push({ recipient, callId, duplicate: true });
    }
    if (t % Math.max(1, Math.floor(tickets / strangers)) === 0) {
      const stranger = `stranger-${round}-${t}`;
      result.jobs.push(
        t % 2 === 0 ? { recipient: stranger } : { recipient: stranger, callId: `c-${stranger}` },
      );
    }
  }
  return result;
}

export type Sender = (
  recipient: string,
  callId: string | undefined,
) => Promise<{ status: number; body: Record<string, unknown> }>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `jobs` over `workers` concurrent clients. `deadline()` is read at each retry: the round
 * sets it once the database is back, so every loop ends by itself.
 */
export async function drive(
  jobs: readonly Job[],
  workers: number,
  send: Sender,
  deadline: () => number,
  onAnswer: (seen: Seen) => void,
): Promise<Seen[]> {
  const seen: Seen[] = jobs.map((job) => ({ job, statuses: [] }));
  let next = 0;
  const one = async (s: Seen) => {
    for (let pause = 20; Date.now() < deadline(); pause = Math.min(pause * 2, 250)) {
      let status = 0;
      let body: Record<string, unknown> = {};
      try {
        ({ status, body } = await send(s.job.recipient, s.job.callId));
      } catch {
        // refused or dropped connection, or the client's own timeout: retry
      }
      s.statuses.push(status);
      if (status === 200) {
        s.answer = body as Seen["answer"];
        s.answeredAt = Date.now();
        onAnswer(s);
        return;
      }
      const retryable = status === 0 || status === 503 || status === 409;
      if (!retryable || s.job.callId === undefined) return;
      await sleep(pause);
    }
  };
  const worker = async () => {
    for (;;) {
      const i = next++;
      const s = seen[i];
      if (s === undefined) return;
      // A duplicate starts beside its twin, so both reach the service at once.
      if (jobs[i + 1]?.duplicate === true) {
        next++;
        await Promise.all([one(s), one(seen[i + 1] as Seen)]);
      } else await one(s);
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
  return seen;
}
