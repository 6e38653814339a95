import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/**
 * Runs one A2UI `FunctionCallGate` per OS process, each over its own connection to a shared
 * claim store and nothing else (no shared directory, no shared memory), all handling a call
 * at the same instant. Each callback appends a line to a file, so the count of callbacks is
 * what the processes actually ran, not what they reported. Shared by the PostgreSQL and
 * Redis suites.
 */
const run = promisify(execFile);
const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

export interface GateWorkersResult {
  readonly callbacks: number;
  readonly statuses: string[];
  readonly replies: string[];
}

export async function runGateWorkers(options: {
  /** Absolute path of the store module's built entry (`packages/<x>/dist/index.js`). */
  readonly storeModule: string;
  readonly url: string;
  /** One entry per worker process: the trusted host session it serves. */
  readonly sessions: readonly string[];
  readonly functionCallId: string;
}): Promise<GateWorkersResult> {
  const dir = mkdtempSync(join(tmpdir(), "tessera-gate-workers-"));
  const callbackFile = join(dir, "callbacks");
  const startAt = Date.now() + 2_000;
  const child = (session: string, index: number) => `
    import { appendFileSync } from "node:fs";
    const { FunctionCallGate } = await import("@tessera/a2ui");
    const { openClaimStore } = await import(${JSON.stringify(options.storeModule)});
    const claims = await openClaimStore(${JSON.stringify(options.url)});
    const catalogId = "https://tessera.dev/catalogs/test";
    const gate = new FunctionCallGate({
      claims,
      catalog: { catalogId, functions: { add: {
        type: "object", returnType: "number", allowedCallers: "agentOnly",
        properties: { call: { const: "add" }, args: { type: "object",
          properties: { a: { type: "number" }, b: { type: "number" } },
          required: ["a", "b"], additionalProperties: false } },
        required: ["call", "args"] } } },
      invoke: ({ args }) => {
        appendFileSync(${JSON.stringify(callbackFile)}, "${index}\\n");
        return args.a + args.b;
      },
    });
    await new Promise((r) => setTimeout(r, ${startAt} - Date.now()));
    const { reply, receipt } = await gate.handle(${JSON.stringify(session)}, {
      version: "v1.0",
      callRendererFunction: {
        functionCallId: ${JSON.stringify(options.functionCallId)},
        callFunction: { call: "add", catalogId, args: { a: 1, b: 2 } },
      },
    });
    await claims.close();
    const code = reply.error?.code ?? reply.rendererFunctionResponse?.error?.code ?? "value";
    process.stdout.write(JSON.stringify({ status: receipt.status, code }));`;
  try {
    const outputs = await Promise.all(
      options.sessions.map((session, index) =>
        run(process.execPath, ["--input-type=module", "-e", child(session, index)], {
          cwd: repoRoot,
          timeout: 60_000,
        }),
      ),
    );
    const results = outputs.map(
      (output) => JSON.parse(output.stdout) as { status: string; code: string },
    );
    let callbacks = 0;
    try {
      callbacks = readFileSync(callbackFile, "utf8").split("\n").filter(Boolean).length;
    } catch {
      callbacks = 0;
    }
    return {
      callbacks,
      statuses: results.map((result) => result.status).sort(),
      replies: results.map((result) => result.code).sort(),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
