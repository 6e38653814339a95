import { fstatSync, readSync } from "node:fs";
import { TesseraError } from "../contracts/errors.js";
import { type AuditEvent, AuditEventSchema } from "../contracts/schemas.js";
import { auditStreamOf, type ChainHead, EMPTY_HEAD } from "./chain.js";

const NEWLINE = 0x0a;
const CHUNK = 64 * 1024;

/**
 * The stream heads of a JSON-lines log, read from its end and cached, for a writer that holds
 * the log's lock. Only the lock holder appends, so while this writer holds it the file's size
 * says whether anyone appended since it last looked: if not, the cache is exact; if so, only
 * the bytes appended since are read.
 *
 * The cache holds, for every stream with an event at or after `#floor`, that stream's last
 * event. A stream not in it is looked for by reading backwards from `#floor`, a chunk at a
 * time, which usually ends within the last few kilobytes; only a stream with no event in
 * the log reads the whole of it, once, after which every unseen stream is known empty.
 */
export class JsonlHeads {
  readonly #fd: number;
  readonly #heads = new Map<string, ChainHead>();
  /** File size the cache describes. */
  #size = -1;
  /** Every byte from here to `#size` has been read; a line boundary. */
  #floor = 0;

  constructor(fd: number) {
    this.#fd = fd;
  }

  /** The head of `stream` as the file stands. Call only holding the lock. */
  headOf(stream: string): ChainHead {
    const size = fstatSync(this.#fd).size;
    if (size !== this.#size) this.#catchUp(size);
    for (;;) {
      const head = this.#heads.get(stream);
      if (head !== undefined) return head;
      if (this.#floor === 0) return EMPTY_HEAD;
      this.#readBack();
    }
  }

  /** After this writer appended `bytes` holding the lock: its event is now `stream`'s head. */
  appended(stream: string, head: ChainHead, bytes: number): void {
    this.#heads.set(stream, head);
    this.#size += bytes;
  }

  #catchUp(size: number): void {
    if (size > 0 && this.#byteAt(size - 1) !== NEWLINE) {
      throw new TesseraError(
        "audit_unavailable",
        "the audit log ends in a partial line; nothing is appended after it",
      );
    }
    if (this.#size < 0 || size < this.#size) {
      // First look, or the file shrank (it was replaced or cut): nothing cached holds.
      this.#heads.clear();
      this.#floor = size;
    } else {
      // Others appended: their lines are the newest of their streams.
      const text = this.#read(this.#size, size - this.#size);
      for (const event of parseLines(text)) {
        this.#heads.set(auditStreamOf(event), headOfEvent(event));
      }
    }
    this.#size = size;
  }

  /** Reads the whole lines of the chunk before `#floor`, newest first, into the cache. */
  #readBack(): void {
    let length = Math.min(CHUNK, this.#floor);
    for (;;) {
      const start = this.#floor - length;
      const bytes = this.#readBytes(start, length);
      // The first line in the chunk may have begun before it, unless the chunk starts the file.
      // The chunk's last byte ends the line just above `#floor`: a newline before it is needed.
      const cut = start === 0 ? 0 : bytes.subarray(0, bytes.length - 1).indexOf(NEWLINE) + 1;
      if (cut === 0 && start > 0) {
        length = Math.min(length * 2, this.#floor); // one line longer than the chunk
        continue;
      }
      const events = parseLines(bytes.subarray(cut).toString("utf8"));
      for (let i = events.length - 1; i >= 0; i--) {
        const event = events[i] as AuditEvent;
        const stream = auditStreamOf(event);
        if (!this.#heads.has(stream)) this.#heads.set(stream, headOfEvent(event));
      }
      this.#floor = start + cut;
      return;
    }
  }

  #byteAt(position: number): number {
    return this.#readBytes(position, 1)[0] as number;
  }

  #read(position: number, length: number): string {
    return this.#readBytes(position, length).toString("utf8");
  }

  #readBytes(position: number, length: number): Buffer {
    const buffer = Buffer.alloc(length);
    let done = 0;
    while (done < length) {
      const read = readSync(this.#fd, buffer, done, length - done, position + done);
      if (read === 0) break;
      done += read;
    }
    return buffer.subarray(0, done);
  }
}

/**
 * A stream's head is its last event: linked, it is that event's seq and hash; unchained (the
 * log predates the chain), the chain starts after it, at seq 1.
 */
function headOfEvent(event: AuditEvent): ChainHead {
  return event.seq !== undefined && event.hash !== undefined
    ? { seq: event.seq, hash: event.hash }
    : EMPTY_HEAD;
}

function parseLines(text: string): AuditEvent[] {
  const events: AuditEvent[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const event = parseEventLine(line);
    // Linking after a line that is not an event would chain onto something unverifiable.
    if (event === undefined) {
      throw new TesseraError(
        "audit_unavailable",
        "the audit log's tail holds a line that is not an event; nothing is appended after it",
      );
    }
    events.push(event);
  }
  return events;
}

/** One line of the log as an event, or undefined when it is not JSON or not an event. */
export function parseEventLine(line: string): AuditEvent | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  const parsed = AuditEventSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
