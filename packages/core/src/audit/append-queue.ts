import type { AuditEvent } from "../contracts/schemas.js";
import { parseAuditEvent } from "../contracts/store-input.js";
import { auditStreamOf } from "./chain.js";

/** Streams whose head a queue remembers while idle; past it, an idle one is forgotten. */
const MAX_IDLE_STREAMS = 1_024;

export interface AuditAppendQueueOptions<Head> {
  /** Events handed to one `write` at most: bounds one statement or script under a burst. */
  readonly maxBatch: number;
  /**
   * The head a stream starts from, and starts from again after a failed write: whether that
   * write landed is unknown, so the head remembered before it may be stale.
   */
  readonly startHead: Head;
  /** Links `events` after `head` and writes them, all or none; answers the new head. */
  readonly write: (stream: string, head: Head, events: readonly AuditEvent[]) => Promise<Head>;
}

interface Pending {
  readonly event: AuditEvent;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

interface StreamQueue<Head> {
  readonly pending: Pending[];
  running: boolean;
  head: Head;
}

/**
 * A sink's appends, one write in flight per audit stream: events waiting behind a write go
 * out together in the next, linked after the head the last write answered, so a lone writer
 * never races itself for a stream's head and a burst costs one write per batch. Each append
 * settles when its batch is written or fails. Streams are independent of one another.
 */
export class AuditAppendQueue<Head> {
  readonly #options: AuditAppendQueueOptions<Head>;
  readonly #streams = new Map<string, StreamQueue<Head>>();

  constructor(options: AuditAppendQueueOptions<Head>) {
    this.#options = options;
  }

  /** Validates `event` (a malformed one is refused before any write) and queues it. */
  append(event: AuditEvent): Promise<void> {
    let valid: AuditEvent;
    try {
      valid = parseAuditEvent(event);
    } catch (error) {
      return Promise.reject(error);
    }
    const stream = auditStreamOf(valid);
    let queue = this.#streams.get(stream);
    if (queue === undefined) {
      queue = { pending: [], running: false, head: this.#options.startHead };
      this.#streams.set(stream, queue);
    }
    const appended = new Promise<void>((resolve, reject) => {
      queue.pending.push({ event: valid, resolve, reject });
    });
    if (!queue.running) void this.#drain(stream, queue);
    return appended;
  }

  async #drain(stream: string, queue: StreamQueue<Head>): Promise<void> {
    queue.running = true;
    while (queue.pending.length > 0) {
      const batch = queue.pending.splice(0, this.#options.maxBatch);
      try {
        queue.head = await this.#options.write(
          stream,
          queue.head,
          batch.map((pending) => pending.event),
        );
        for (const pending of batch) pending.resolve();
      } catch (error) {
        queue.head = this.#options.startHead;
        for (const pending of batch) pending.reject(error);
      }
    }
    queue.running = false;
    if (this.#streams.size > MAX_IDLE_STREAMS) this.#streams.delete(stream);
  }
}
