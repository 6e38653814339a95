/**
 * The load generator's own process (forked by `LoadClient`): takes one `LoadSpec` at a time
 * over IPC, runs autocannon for it and answers its rate and latencies.
 */
import { performance } from "node:perf_hooks";
import autocannon from "autocannon";
import { CATALOG_ID } from "../a2ui/fixtures.js";
import type { LoadResult, LoadSpec } from "./load.js";

const TOKEN = "bench-service-token";
const HEADERS = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
/** What a connection carries from a claim's answer to its settle. */
type Context = { handle?: string };
const DENIED_BODY = JSON.stringify({ recipient: "stranger", payload: "hi" });

function requests(spec: LoadSpec): autocannon.Request[] {
  let n = 0;
  const headers =
    spec.token === undefined ? HEADERS : { ...HEADERS, authorization: `Bearer ${spec.token}` };
  const post = { method: "POST" as const, headers };
  switch (spec.shape) {
    case "denied":
      return [{ ...post, path: "/v1/messages", body: DENIED_BODY }];
    case "allowed":
      return [
        {
          ...post,
          path: "/v1/messages",
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({
              recipient: "colleague",
              payload: "hi",
              callId: `${spec.tag}-${n++}`,
            }),
          }),
        },
      ];
    case "a2ui":
      return [
        {
          ...post,
          path: "/v1/a2ui/claim",
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({
              message: {
                version: "v1.0",
                callRendererFunction: {
                  functionCallId: `${spec.tag}-${n++}`,
                  callFunction: { call: "add", catalogId: CATALOG_ID, args: { a: 1, b: 2 } },
                },
              },
            }),
          }),
          onResponse: (_status, body, context: Context) => {
            context.handle = (JSON.parse(body) as { handle?: string }).handle;
          },
        },
        {
          ...post,
          path: "/v1/a2ui/settle",
          setupRequest: (request, context: Context) => ({
            ...request,
            body: JSON.stringify({ handle: context.handle, value: 3 }),
          }),
        },
      ];
  }
}

/**
 * The rate is completed requests over the wall time measured here: autocannon's own
 * per-second samples are too coarse for slices under a few seconds. A non-2xx answer is a
 * broken bench, not a figure: it fails the slice.
 */
async function run(spec: LoadSpec): Promise<LoadResult> {
  // autocannon's histogram keeps whole milliseconds; its `response` event has the exact time.
  const times: number[] = [];
  const start = performance.now();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        pipelining: 1,
        duration: spec.ms / 1000,
        requests: requests(spec),
      },
      (error, done) => (error ? reject(error) : resolve(done)),
    );
    instance.on("response", (_client, _status, _bytes, responseTime) => times.push(responseTime));
  });
  const elapsed = performance.now() - start;
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(
      `bench: ${spec.url} (${spec.shape}): ${result.non2xx} non-2xx answers, ${result.errors} errors`,
    );
  }
  times.sort((a, b) => a - b);
  return {
    rate: (result.requests.total / elapsed) * 1000,
    p50: times[Math.floor(0.5 * times.length)] ?? 0,
    p99: times[Math.min(times.length - 1, Math.floor(0.99 * times.length))] ?? 0,
  };
}

process.on("message", (spec: LoadSpec) => {
  run(spec).then(
    (result) => process.send?.({ ok: true, result }),
    (error: unknown) => process.send?.({ ok: false, message: (error as Error).message }),
  );
});
// The parent's IPC channel closing is the end of the bench: leave with it.
process.on("disconnect", () => process.exit(0));
