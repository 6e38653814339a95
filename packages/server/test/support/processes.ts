import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { verifyWebhookSignature } from "../../src/transport/webhook.js";

const BIN = fileURLToPath(new URL("../../../cli/dist/bin.js", import.meta.url));

export interface ServeProcess {
  readonly url: string;
  readonly child: ChildProcess;
  output(): string;
  /** SIGTERM; SIGKILL after `graceMs` if still running. Resolves with the exit signal or code. */
  stop(graceMs?: number): Promise<number | string | null>;
}

/** `tessera serve` as a child process, resolved once it listens. */
export async function serveProcess(args: readonly string[]): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, "serve", "--port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const found = /tessera serve: listening on (http:\S+)/.exec(output)?.[1];
      if (found) resolve(found);
    };
    child.stdout?.on("data", read);
    child.stderr?.on("data", read);
    child.once("close", (code) => reject(new Error(`serve exited early with ${code}: ${output}`)));
  });
  return {
    url,
    child,
    output: () => output,
    stop: (graceMs = 5000) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        return Promise.resolve(child.exitCode ?? child.signalCode);
      }
      const exited = new Promise<number | string | null>((resolve) =>
        child.once("close", (code, signal) => resolve(code ?? signal)),
      );
      child.kill("SIGTERM");
      const kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
      return exited.finally(() => clearTimeout(kill));
    },
  };
}

export const WEBHOOK_SECRET = "webhook-secret-0123456789";
export const FUNCTION_SECRET = "function-secret-0123456789";

/**
 * A receiver for both outbound calls of the service: deliveries (`/deliver`, counted by call
 * ID) and A2UI function calls (`/fn`, counted by function call ID). Unsigned requests are 401.
 */
export async function startReceiver() {
  const deliveries: string[] = [];
  const functionCalls: string[] = [];
  const server: Server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      const header = request.headers["tessera-signature"] as string | undefined;
      const secret = request.url === "/fn" ? FUNCTION_SECRET : WEBHOOK_SECRET;
      if (!verifyWebhookSignature({ secret, body, header })) {
        response.writeHead(401).end();
        return;
      }
      const parsed = JSON.parse(body) as Record<string, unknown>;
      if (request.url === "/fn") functionCalls.push(String(parsed.functionCallId));
      else deliveries.push(String(parsed.callId));
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(request.url === "/fn" ? { value: 3 } : { ok: parsed.recipient }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    deliveries,
    functionCalls,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The files `tessera serve` reads: principals, webhooks for `recipients`, the A2UI catalog. */
export function serviceFiles(
  receiver: string,
  principals: readonly unknown[],
  recipients: readonly string[],
  catalog: unknown,
): string[] {
  const dir = mkdtempSync(join(tmpdir(), "serve-files-"));
  const file = (name: string, value: unknown) => {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify(value), { mode: 0o600 });
    return path;
  };
  return [
    "--principals",
    file("principals.json", { principals }),
    "--webhooks",
    file("webhooks.json", {
      recipients: Object.fromEntries(
        recipients.map((r) => [r, { url: `${receiver}/deliver`, secret: WEBHOOK_SECRET }]),
      ),
    }),
    "--a2ui",
    file("a2ui.json", {
      catalogs: [catalog],
      functionEndpoint: { url: `${receiver}/fn`, secret: FUNCTION_SECRET },
    }),
  ];
}
