import { readFileSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { TesseraError } from "../contracts/errors.js";
import type { AuditEvent } from "../contracts/schemas.js";
import { checkAuditFilter } from "../contracts/store-input.js";
import { selectEvents } from "../memory/audit-sink.js";
import type { AuditFilter } from "../ports/audit-sink.js";
import { parseEventLine } from "./jsonl-heads.js";
import { UnreadableAuditEvent } from "./unreadable.js";

/**
 * The JSON-lines log at `path`, read whole and filtered. A line that is not a valid event (a
 * torn last line after a crash, or tampering) is refused loudly rather than skipped.
 */
export async function readLog(path: string, filter: AuditFilter = {}) {
  // Checked before the file is read: a bad filter is the caller's, not the log's, fault.
  checkAuditFilter(filter);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new TesseraError("audit_unavailable", `cannot read the audit log${systemReason(error)}`, {
      cause: error,
    });
  }
  const events: AuditEvent[] = [];
  let lineNumber = 0;
  for (const line of text.split("\n")) {
    lineNumber++;
    if (line === "") continue;
    const event = parseEventLine(line);
    if (event === undefined) {
      throw new UnreadableAuditEvent(events.length, `not an event (log line ${lineNumber})`);
    }
    events.push(event);
  }
  return selectEvents(events, filter);
}

/**
 * ` (EISDIR)`: the system's error code of a failed file operation, for a message, or nothing
 * when `error` carries none. Only the code: a system error's own message names the path, and
 * nothing read from the file is ever shown.
 */
export function systemReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === "string" && /^E[A-Z0-9]{1,31}$/.test(code) ? ` (${code})` : "";
}

/** Bytes read from the log at a time. */
const CHUNK = 1 << 20;

/**
 * The events of the JSON-lines log at `path`, `pageSize` at a time, holding one chunk of the
 * file and one page: up to the length the log had when reading began, so an event appended
 * meanwhile is not read half. Lines are judged as `JsonlAuditSink.read` judges them.
 */
export async function* readLogPages(
  path: string,
  pageSize: number,
): AsyncGenerator<readonly AuditEvent[]> {
  let file: FileHandle;
  try {
    file = await open(path, "r");
  } catch (error) {
    throw new TesseraError(
      "audit_unavailable",
      `cannot open the audit log for reading${systemReason(error)}`,
      { cause: error },
    );
  }
  try {
    const end = (await file.stat()).size;
    const chunk = Buffer.alloc(CHUNK);
    let page: AuditEvent[] = [];
    let position = 0;
    let lineNumber = 0;
    const take = (line: Buffer) => {
      lineNumber++;
      if (line.length === 0) return;
      const event = parseEventLine(line.toString("utf8"));
      if (event === undefined) {
        throw new UnreadableAuditEvent(position, `not an event (log line ${lineNumber})`);
      }
      position++;
      page.push(event);
    };
    let rest = Buffer.alloc(0);
    for (let offset = 0; offset < end; ) {
      const bytesRead = await readAt(file, chunk, Math.min(CHUNK, end - offset), offset);
      if (bytesRead === 0) break;
      offset += bytesRead;
      const data = Buffer.concat([rest, chunk.subarray(0, bytesRead)]);
      let start = 0;
      for (let newline = data.indexOf(10); newline !== -1; newline = data.indexOf(10, start)) {
        take(data.subarray(start, newline));
        start = newline + 1;
        if (page.length === pageSize) {
          yield page;
          page = [];
        }
      }
      rest = data.subarray(start);
    }
    // A last line without its newline is judged too: torn by a crash, it is unreadable.
    if (rest.length > 0) take(rest);
    if (page.length > 0) yield page;
  } finally {
    await file.close();
  }
}

async function readAt(file: FileHandle, into: Buffer, length: number, at: number): Promise<number> {
  try {
    return (await file.read(into, 0, length, at)).bytesRead;
  } catch (error) {
    throw new TesseraError("audit_unavailable", `cannot read the audit log${systemReason(error)}`, {
      cause: error,
    });
  }
}
