import * as crypto from "node:crypto";
import { redact } from "@tessera/core";
import type { ErrorObject } from "ajv/dist/2020.js";
import { messageValidators } from "../schemas/official.js";
import { correlatedValidationError, uncorrelatedValidationError } from "./replies.js";
import type { GateReply } from "./types.js";

/** A `callRendererFunction` that passed the official v1.0 schema and the gate's ID rules. */
export interface CallMessage {
  readonly functionCallId: string;
  readonly catalogId: string;
  readonly call: string;
  /** Absent when the message carried none (the catalog decides whether that is allowed). */
  readonly args?: Readonly<Record<string, unknown>>;
}

export type ReadResult =
  | { readonly ok: true; readonly message: CallMessage }
  | {
      readonly ok: false;
      readonly reply: GateReply;
      /** The ID the reply was correlated with, when one could be read. */
      readonly functionCallId?: string;
      /** For audit: what was wrong, in schema terms (no input echoed). */
      readonly detail: string;
    };

/**
 * The gate is stricter than the schema about IDs (which allows any string): an ID is echoed
 * back and kept in claims and audit, so it must be short and printable. Anything else
 * (`../`, `/`, non-ASCII) is fine: stores key claims by a hash, never by the raw ID.
 */
export const MAX_CALL_ID_LENGTH = 256;
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const USABLE_ID = /^[^\u0000-\u001f\u007f]+$/;
/** Raw JSON text above this size is refused before parsing. */
export const MAX_MESSAGE_CHARS = 1 << 20;

export function isUsableCallId(value: unknown): value is string {
  return typeof value === "string" && value.length <= MAX_CALL_ID_LENGTH && USABLE_ID.test(value);
}

/** Parses (when given text) and validates one message. Never throws on any input. */
export function readCall(input: unknown): ReadResult {
  let message = input;
  if (typeof input === "string") {
    if (input.length > MAX_MESSAGE_CHARS) {
      return refuse(undefined, "", `The message is larger than ${MAX_MESSAGE_CHARS} characters.`);
    }
    try {
      message = JSON.parse(input);
    } catch {
      return refuse(undefined, "", "The message is not valid JSON.");
    }
  }
  const id = (message as { callRendererFunction?: { functionCallId?: unknown } } | null)
    ?.callRendererFunction?.functionCallId;
  const usableId = isUsableCallId(id) ? id : undefined;
  const validate = messageValidators().callRendererFunction;
  if (!validate(message)) {
    const error = validate.errors?.[0];
    return refuse(
      usableId,
      safePointer(error?.instancePath ?? ""),
      `The message is not a valid A2UI v1.0 callRendererFunction: ${describe(error)}.`,
    );
  }
  if (usableId === undefined) {
    return refuse(
      undefined,
      "/callRendererFunction/functionCallId",
      `The functionCallId must be 1 to ${MAX_CALL_ID_LENGTH} printable characters.`,
    );
  }
  const body = (message as { callRendererFunction: { callFunction: Record<string, unknown> } })
    .callRendererFunction.callFunction;
  return {
    ok: true,
    message: {
      functionCallId: usableId,
      catalogId: body.catalogId as string,
      call: body.call as string,
      args: body.args as Record<string, unknown> | undefined,
    },
  };
}

function refuse(functionCallId: string | undefined, path: string, text: string): ReadResult {
  return functionCallId === undefined
    ? { ok: false, reply: uncorrelatedValidationError(path, text), detail: `${path} ${text}` }
    : {
        ok: false,
        reply: correlatedValidationError(functionCallId, text),
        functionCallId,
        detail: `${path} ${text}`,
      };
}

/** Ajv's message names schema properties only; the instance path may hold hostile keys. */
function describe(error: ErrorObject | undefined): string {
  if (!error) return "unknown schema error";
  const at = safePointer(error.instancePath);
  return `${at === "" ? "the message" : at} ${error.message ?? "is invalid"}`;
}

function safePointer(pointer: string): string {
  return pointer
    .split("/")
    .map((segment, index) => (index === 0 ? segment : redact(segment)))
    .join("/");
}

/** SHA-256 of the call body in canonical JSON (sorted keys), to tell a changed body from a retry. */
export function bodyHash(message: CallMessage): string {
  const body =
    `{"args":${message.args === undefined ? "null" : canonicalJson(message.args)},` +
    `"call":${JSON.stringify(message.call)},"catalogId":${JSON.stringify(message.catalogId)}}`;
  return sha256Hex(body);
}

/** One-shot `crypto.hash` (Node ≥ 20.12) is ~4× faster than a Hash object; fall back to one. */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha256", text, "hex")
    : (text) => crypto.createHash("sha256").update(text).digest("hex");

/** JSON with object keys sorted; written out by hand because this runs on every call. */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + canonicalJson(value[i]);
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length > 1) keys.sort();
  let out = "{";
  let first = true;
  for (const key of keys) {
    const item = record[key];
    if (item === undefined) continue;
    out += `${first ? "" : ","}${JSON.stringify(key)}:${canonicalJson(item)}`;
    first = false;
  }
  return `${out}}`;
}
