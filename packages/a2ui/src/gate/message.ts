import * as crypto from "node:crypto";
import { isPrintable } from "@tessera/core";
import { boundedCanonicalJson, redact } from "@tessera/core/store-kit";
import type { ErrorObject } from "ajv/dist/2020.js";
import type { CatalogFunction, CatalogRefusal, CatalogSet } from "../catalog/catalog.js";
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
  /** Computed while reading, so a body that cannot be hashed is refused as a bad message. */
  readonly bodyHash: string;
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
 * back and kept in claims, audit and operators' terminals, so it must be short and printable.
 * Refused: C0, DEL and C1 controls (U+009B is a terminal's CSI), the bidi controls (U+061C,
 * U+200E/F, U+202A–202E, U+2066–2069, which can make an ID read as another) and the line
 * and paragraph separators U+2028/2029. Anything else (`../`, `/`,
 * other non-ASCII, emoji with joiners) is fine: stores key claims by a hash, never the raw ID.
 */
export const MAX_CALL_ID_LENGTH = 256;
/** Raw JSON text above this size is refused before parsing. */
export const MAX_MESSAGE_CHARS = 1 << 20;
/**
 * How deep `args` may nest (the args object itself is level 1). Hashing and the host's
 * callback walk args recursively; without a bound, one message 20,000 levels deep overflowed
 * the stack in the claim step, and any agent could raise "claim store down" at will.
 */
export const MAX_ARGS_DEPTH = 64;
/** How many values `args` may hold in all: an in-process object can share subtrees, JSON cannot. */
const MAX_ARGS_VALUES = MAX_MESSAGE_CHARS;
const ARGS_POINTER = "/callRendererFunction/callFunction/args";

export function isUsableCallId(value: unknown): value is string {
  // The set core's `isPrintable` refuses, as the service's call IDs and the gateway's keys (a
  // test checks it is exactly \p{Cc}, \p{Bidi_Control}, U+2028/2029 and lone surrogates).
  return (
    typeof value === "string" &&
    value.length > 0 &&
    value.length <= MAX_CALL_ID_LENGTH &&
    isPrintable(value)
  );
}

/**
 * Parses (when given text) and validates one message. Never throws on any input, including
 * an object from an in-process host whose getters throw or whose args form a cycle.
 */
export function readCall(input: unknown): ReadResult {
  let usableId: string | undefined;
  try {
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
    usableId = isUsableCallId(id) ? id : undefined;
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
        `The functionCallId must be 1 to ${MAX_CALL_ID_LENGTH} printable characters (no control, bidi or line separator characters, no lone surrogate).`,
      );
    }
    const body = (message as { callRendererFunction: { callFunction: Record<string, unknown> } })
      .callRendererFunction.callFunction;
    const args = body.args as Record<string, unknown> | undefined;
    // The schema has checked that both are strings.
    const catalogId = body.catalogId as string;
    const call = body.call as string;
    const hash = bodyHash({ catalogId, call, args });
    if (hash === undefined) {
      return refuse(
        usableId,
        ARGS_POINTER,
        `The args nest deeper than ${MAX_ARGS_DEPTH} levels or hold too many values.`,
      );
    }
    return {
      ok: true,
      message: { functionCallId: usableId, catalogId, call, args, bodyHash: hash },
    };
  } catch {
    // Only a host's own object can throw here (a getter, a proxy): JSON text cannot.
    return refuse(usableId, "", "The message could not be read.");
  }
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

/**
 * SHA-256 of the call body in canonical JSON (sorted keys), to tell a changed body from a
 * retry; `undefined` when the args exceed the bounds (checked in the same walk, which is
 * the only walk of the args before the catalog's schema). A missing `args` hashes as `{}`:
 * the callback gets `{}` either way, so a retry that differs only there is the same body.
 */
export function bodyHash(
  message: Pick<CallMessage, "catalogId" | "call" | "args">,
): string | undefined {
  const args = boundedCanonicalJson(message.args ?? {}, MAX_ARGS_DEPTH, MAX_ARGS_VALUES);
  if (args === undefined) return undefined;
  const body =
    `{"args":${args},` +
    `"call":${JSON.stringify(message.call)},"catalogId":${JSON.stringify(message.catalogId)}}`;
  return sha256Hex(body);
}

/** One-shot `crypto.hash` (Node ≥ 20.12) is ~4× faster than a Hash object; fall back to one. */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === "function"
    ? (text) => crypto.hash("sha256", text, "hex")
    : (text) => crypto.createHash("sha256").update(text).digest("hex");

/** The function an agent may call with these args, why it may not, or `unreadable`. */
export function checkCatalog(
  catalogs: CatalogSet,
  message: CallMessage,
): CatalogFunction | CatalogRefusal | "unreadable" {
  const found = catalogs.lookup(message.catalogId, message.call);
  if (typeof found === "string") return found;
  // The catalog's function schema validates the wire-level call object `{ call, args }`.
  const wire =
    message.args === undefined
      ? { call: message.call }
      : { call: message.call, args: message.args };
  try {
    return found.validate(wire) === true ? found : "invalid_args";
  } catch {
    return "unreadable";
  }
}
