import { TesseraError } from "@tessera/core";
import { octalMode, readPrivateFile } from "@tessera/core/store-kit";
import { z } from "zod";
import type { A2uiOptions } from "./routes/a2ui.js";
import { type WebhookRecipient, webhookTransport } from "./transport/webhook.js";

const endpoint = z.strictObject({
  url: z.url({ protocol: /^https?$/ }),
  /** At least 16 characters: an HMAC key a person typed as a word is guessable. */
  secret: z.string().min(16),
});
const WebhooksFile = z.strictObject({
  recipients: z.record(z.string().min(1).max(512), endpoint),
  timeoutMs: z.int().min(1).max(120_000).optional(),
});
const A2uiFile = z.strictObject({
  catalogs: z.array(z.unknown()).min(1),
  functionEndpoint: endpoint.optional(),
  settleTimeoutMs: z.int().min(1).optional(),
  callTimeoutMs: z.int().min(1).max(120_000).optional(),
});

/**
 * `{ "recipients": { "<name>": { "url", "secret" } }, "timeoutMs"? }` → the webhook transport.
 * The file holds secrets: mode 0600 (one others may read is refused `invalid_config`).
 */
export function loadWebhookTransport(path: string) {
  const file = readJsonFile(path, WebhooksFile, "webhooks");
  const recipients: Record<string, WebhookRecipient> = file.recipients;
  return webhookTransport({
    recipients,
    ...(file.timeoutMs === undefined ? {} : { timeoutMs: file.timeoutMs }),
  });
}

/** `{ "catalogs": [...], "functionEndpoint"?: { "url", "secret" }, … }` → the A2UI gate's options. */
export function loadA2uiOptions(path: string): A2uiOptions {
  const file = readJsonFile(path, A2uiFile, "A2UI");
  return {
    catalogs: file.catalogs,
    ...(file.functionEndpoint === undefined ? {} : { functionEndpoint: file.functionEndpoint }),
    ...(file.settleTimeoutMs === undefined ? {} : { settleTimeoutMs: file.settleTimeoutMs }),
    ...(file.callTimeoutMs === undefined ? {} : { callTimeoutMs: file.callTimeoutMs }),
  };
}

/**
 * Both files hold secrets (HMAC keys), so, like the principals file and the data directory,
 * one that others may read is refused rather than used: a webhook secret read by another user
 * forges deliveries. Checked on the descriptor the file is read from.
 */
function readJsonFile<S extends z.ZodType>(path: string, schema: S, what: string): z.output<S> {
  const read = readPrivateFile(path);
  if (read.status === "open_to_others") {
    throw new TesseraError(
      "invalid_config",
      `the ${what} file at ${path} is mode ${octalMode(read.mode)}: it holds secrets, so others may not read it; chmod 600 ${path}`,
    );
  }
  if (read.status === "missing") {
    throw new TesseraError("file_not_found", `no ${what} file at ${path}`, { cause: read.cause });
  }
  if (read.status === "unreadable") {
    throw new TesseraError(
      "invalid_config",
      `the ${what} file at ${path} cannot be read (${read.code})`,
      {
        cause: read.cause,
      },
    );
  }
  const text = read.text;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new TesseraError("invalid_config", `the ${what} file is not JSON`, { cause: error });
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const where = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new TesseraError("invalid_config", `the ${what} file does not match: ${where}`);
  }
  return parsed.data;
}
