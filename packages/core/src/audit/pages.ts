import type { AuditEvent } from "../contracts/schemas.js";
import { checkPageSize } from "../contracts/store-input.js";
import type { AuditPageOptions, ReadableAuditSink } from "../ports/audit-sink.js";

/**
 * A sink's trail a page at a time: through its own `readPages`, or, for a sink without one,
 * its whole `read` cut into pages (which holds the trail, as that sink always did).
 */
export async function* readAuditPages(
  sink: Pick<ReadableAuditSink, "read" | "readPages">,
  options?: AuditPageOptions,
): AsyncGenerator<readonly AuditEvent[]> {
  const pageSize = checkPageSize(options);
  if (sink.readPages !== undefined) {
    yield* sink.readPages({ pageSize });
    return;
  }
  const events = await sink.read();
  for (let from = 0; from < events.length; from += pageSize) {
    yield events.slice(from, from + pageSize);
  }
}
