// One writer process of the multi-process audit test: appends `count` events tagged with its
// name to the shared log, then exits. Runs the compiled package, as a host would.
import { JsonlAuditSink } from "../dist/index.js";

const [path, writer, count] = process.argv.slice(2);
const sink = JsonlAuditSink.open(path);
for (let i = 0; i < Number(count); i++) {
  sink.append({
    at: new Date().toISOString(),
    source: "kernel",
    outcome: "allowed",
    code: null,
    reason: "allowed",
    traceId: writer,
    callId: `${writer}:${i}`,
    // Long enough that a torn or interleaved write would show as a broken line.
    detail: "x".repeat(512),
  });
}
sink.close();
