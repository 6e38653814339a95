import type { TesseraClient } from "@tessera/client";
import { type AuditEvent, TesseraError } from "@tessera/core";
import { Command } from "commander";
import {
  DATA_READ_HELP,
  dataDirToRead,
  oneSource,
  type RemoteOptions,
  requireRemote,
  withRemoteOptions,
} from "../config/remote.js";
import { nonEmpty, wholeNumber } from "../options.js";
import { printJson, printLines, printList } from "../output.js";
import { followByCount, followNewest, LAST_WINDOW } from "./audit-follow.js";
import { formatEvent, NO_DECISIONS, openAudit, type SourceOptions } from "./audit-source.js";

/** The most events a service answers at once (`GET /v1/audit`). */
const SERVICE_CAP = 1000;

interface FilterOptions {
  callId?: string;
  traceId?: string;
  limit?: number;
  json?: boolean;
}

type ReadOptions = SourceOptions & RemoteOptions & FilterOptions;

/**
 * Where the events come from: a store or a log file (every principal's), or a service (only
 * the token's own, and only by call or trace ID: the service never lists a whole trail).
 */
async function reader(options: ReadOptions, what: string) {
  oneSource(options, [options.store, options.file]);
  const data = dataDirToRead(options, [options.store, options.file]);
  if (options.store !== undefined || options.file !== undefined || data !== undefined) {
    const { audit, close } = await openAudit({ store: options.store, file: options.file, data });
    const read = (limit?: number, newest?: boolean) =>
      audit.read({
        ...(options.callId ? { callId: options.callId } : {}),
        ...(options.traceId ? { traceId: options.traceId } : {}),
        ...(limit ? { limit } : {}),
        ...(newest ? { newest } : {}),
      });
    return { read, follower: () => followNewest((limit) => read(limit, true)), close };
  }
  const client = requireRemote(options, what);
  const read = (limit?: number) => remoteRead(client, options, limit);
  return { read, follower: () => followByCount(() => read(SERVICE_CAP)), close: async () => {} };
}

/**
 * Exactly one of `--call-id` and `--trace-id`, as the service's `GET /v1/audit` takes exactly
 * one of `callId` and `traceId`: neither would be the whole trail, both an ID pair no reader
 * of one call or trace asks for. `why` says which rule refused.
 */
function oneCallOrTrace(options: FilterOptions, why: string): void {
  if ((options.callId === undefined) === (options.traceId === undefined)) {
    throw new TesseraError("invalid_usage", `give exactly one of --call-id or --trace-id: ${why}`);
  }
}

async function remoteRead(
  client: TesseraClient,
  options: FilterOptions,
  limit: number | undefined,
): Promise<readonly AuditEvent[]> {
  oneCallOrTrace(options, "a service answers by one call or one trace");
  const query =
    options.callId === undefined ? { traceId: options.traceId } : { callId: options.callId };
  const { events } = await client.audit({ ...query, ...(limit ? { limit } : {}) });
  return events;
}

function filters(command: Command): Command {
  return withRemoteOptions(
    command
      .option("--store <url>", "audit store (sqlite:, postgres://, redis://)", nonEmpty)
      .option("--file <path>", "a JSON-lines audit log", nonEmpty)
      .option("--call-id <id>", "only this call", nonEmpty)
      .option("--trace-id <id>", "only this trace", nonEmpty),
    DATA_READ_HELP,
  );
}

export function auditQueryCommand(): Command {
  return filters(
    new Command("query").description(
      "decisions for exactly one call (--call-id) or one trace (--trace-id), oldest first, from a service (the token's own), a store, a log or a data directory; tessera audit list reads the whole trail",
    ),
  )
    .option("--limit <n>", "at most this many", wholeNumber(1, 1000))
    .option("--json", "print JSON")
    .action(async (options: ReadOptions) => {
      // Before any source is opened, and alike for every source: a query is of one call or
      // one trace, never the whole trail read at once (`audit list` reads that page by page).
      oneCallOrTrace(
        options,
        "audit query reads one call or one trace (tessera audit list reads the whole trail)",
      );
      const source = await reader(options, "audit query without --store, --file or --data");
      try {
        const events = await source.read(options.limit);
        if (options.json) printJson(events);
        else printList(events.map(formatEvent), NO_DECISIONS);
      } finally {
        await source.close();
      }
    });
}

interface TailOptions extends ReadOptions {
  lines: number;
  follow?: boolean;
  interval: number;
}

export function auditTailCommand(): Command {
  return filters(
    new Command("tail").description(
      "the last decisions, and with --follow each new one as it is recorded (JSON lines with --json)",
    ),
  )
    .option(
      "-n, --lines <n>",
      "how many of the last events to show first",
      wholeNumber(0, 1000),
      20,
    )
    .option("-f, --follow", "keep reading; stop with Ctrl-C")
    .option("--interval <ms>", "how often --follow reads again", wholeNumber(50, 600_000), 1000)
    .option("--json", "print one JSON object per line")
    .action(async (options: TailOptions) => {
      const source = await reader(options, "audit tail without --store, --file or --data");
      const print = (events: readonly AuditEvent[]) => {
        if (options.json) printLines(events.map((event) => JSON.stringify(event)));
        else printLines(events.map(formatEvent));
      };
      try {
        const trail = source.follower();
        const first = await trail.latest(options.lines);
        print(options.lines === 0 ? [] : first.slice(-options.lines));
        if (first.length === 0 && !options.json) {
          process.stderr.write(
            `${NO_DECISIONS}${options.follow ? "; waiting for new ones" : ""}\n`,
          );
        }
        if (!options.follow) return;
        const stopped = stopSignal();
        while (!(await stopped.wait(options.interval))) {
          const fresh = await trail.next();
          if (fresh.overrun) {
            process.stderr.write(
              `more than ${LAST_WINDOW} decisions since the last read: only the newest are shown (tessera audit list has them all)\n`,
            );
          }
          print(fresh.events);
        }
        stopped.dispose();
      } finally {
        await source.close();
      }
    });
}

/** SIGINT/SIGTERM end a --follow cleanly (stores closed), instead of killing mid-read. */
function stopSignal() {
  let stopped = false;
  let wake: (() => void) | undefined;
  const stop = () => {
    stopped = true;
    wake?.();
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return {
    wait: (ms: number) =>
      new Promise<boolean>((resolve) => {
        if (stopped) {
          resolve(true);
          return;
        }
        const timer = setTimeout(() => resolve(stopped), ms);
        wake = () => {
          clearTimeout(timer);
          resolve(true);
        };
      }),
    dispose: () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
    },
  };
}
