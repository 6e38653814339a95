// One writer process of the audit chain test: appends `count` events (or, with count "forever",
// until killed) to the shared log, spreading them over the given namespaces. Runs the
// compiled package, as a host would.
import { JsonlAuditSink } from "../dist/index.js";

const [path, writer, count, namespaces] = process.argv.slice(2);
const streams = namespaces.split(",");
const sink = JsonlAuditSink.open(path, { lockWaitMs: 60_000 });
const limit = count === "forever" ? Number.POSITIVE_INFINITY : Number(count);
if (count === "forever") process.send?.("started");
for (let i = 0; i < limit; i++) {
  const namespaceId = streams[i % streams.length];
  sink.append({
    at: new Date().toISOString(),
    source: namespaceId === "" ? "gate" : "kernel",
    outcome: "allowed",
    code: null,
    reason: "allowed",
    traceId: writer,
    callId: `${writer}:${i}`,
    ...(namespaceId === "" ? {} : { namespaceId }),
  });
}
sink.close();
