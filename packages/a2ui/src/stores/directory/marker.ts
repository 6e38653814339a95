import { constants } from "node:fs";
import { type FileHandle, lstat, open } from "node:fs/promises";
import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type JsonValue,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";

/**
 * Marker file layout (one file per claim, named by `claimKeyDigest`):
 *
 *     {"v":1,"session":…,"functionCallId":…,"bodyHash":…,"claimedAt":…,"worker":…}\n
 *     {"status":"dispatched","settledAt":…,"answer":…}\n        ← appended by settle
 *
 * The file's existence is the claim; its content is informational. The first line is the
 * record, written right after the exclusive create. `settle` appends one receipt line
 * (O_APPEND, no rename: replacing the file would make ext4 flush data on the next
 * directory fsync), in one write, the answer (when given) inside it: receipt and answer are
 * one line, so the first complete line gives both, and a torn one neither. A marker without
 * a complete receipt line is a claim in doubt.
 *
 * `answer` is optional and was added without a version bump, both ways compatible: markers
 * of the previous release (receipt lines without it) read back without an answer, and that
 * release reads a receipt line with it as before (it picks `status` and `settledAt` and
 * leaves the rest).
 */
export const MARKER_NAME = /^[0-9a-f]{64}$/;

export function encodeRecord(key: ClaimKey, record: ClaimRecord): string {
  const line = JSON.stringify({
    v: 1,
    session: key.session,
    functionCallId: key.functionCallId,
    bodyHash: record.bodyHash,
    claimedAt: record.claimedAt,
    ...(record.worker === undefined ? {} : { worker: record.worker }),
  });
  return `${line}\n`;
}

/** `answer` is the JSON text `serializeAnswer` checked (no raw newline: JSON escapes them). */
export function encodeReceipt(receipt: ClaimReceipt, answer?: string): string {
  const line = JSON.stringify({ status: receipt.status, settledAt: receipt.settledAt });
  return answer === undefined ? `${line}\n` : `${line.slice(0, -1)},"answer":${answer}}\n`;
}

const SETTLED = new Set(["dispatched", "denied", "failed"]);

/** The stored claim, or undefined when the record line is not (yet) whole. */
export function decodeMarker(text: string): StoredClaim | undefined {
  const [first, ...rest] = text.split("\n");
  const record = parseLine(first);
  if (!record) return undefined;
  const { session, functionCallId, bodyHash, claimedAt, worker } = record;
  if (
    record.v !== 1 ||
    typeof session !== "string" ||
    typeof functionCallId !== "string" ||
    typeof bodyHash !== "string" ||
    typeof claimedAt !== "number"
  ) {
    return undefined;
  }
  // The first complete receipt line counts (the first outcome stands in every store; a
  // second settle only appends a line nothing reads); a torn (partial) line is ignored.
  let receipt: ClaimReceipt | undefined;
  let answer: { answer: JsonValue } | undefined;
  for (const line of rest) {
    const parsed = parseLine(line);
    if (parsed && SETTLED.has(parsed.status as string) && typeof parsed.settledAt === "number") {
      receipt = Object.freeze({
        status: parsed.status as ClaimReceipt["status"],
        settledAt: parsed.settledAt,
      });
      if (Object.hasOwn(parsed, "answer")) answer = { answer: parsed.answer as JsonValue };
      break;
    }
  }
  return Object.freeze({
    session,
    functionCallId,
    bodyHash,
    claimedAt,
    ...(typeof worker === "string" ? { worker } : {}),
    ...(receipt ? { receipt } : {}),
    ...answer,
  });
}

function parseLine(line: string | undefined): Record<string, unknown> | undefined {
  if (!line) return undefined;
  try {
    const parsed = JSON.parse(line);
    return parsed !== null && typeof parsed === "object" ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One marker as read: the claim, or why there is none. `not_a_file`: a FIFO, directory,
 * symlink or socket under a marker's name (never made by the store); `no_record`: a regular
 * file without a whole record line (its writer died, or a full disk stopped the write).
 */
export type MarkerRead = StoredClaim | "missing" | "not_a_file" | "no_record";

/**
 * Non-blocking and never following a symlink: an entry named like a marker may be a FIFO,
 * whose plain open waits for a peer forever and holds one of libuv's four threads while it
 * does (four such opens stalled every claim in the process).
 */
const READ_MARKER = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Reads one marker without ever blocking on it. The type is checked before the open (so a
 * FIFO or device is never opened) and again on the open handle (in case the entry was
 * swapped in between). Other I/O errors are thrown as they are.
 */
export async function readMarker(entry: string): Promise<MarkerRead> {
  let handle: FileHandle;
  try {
    if (!(await lstat(entry)).isFile()) return "not_a_file";
    handle = await open(entry, READ_MARKER);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return "missing";
    // A symlink swapped in after the lstat (O_NOFOLLOW), or a socket or FIFO (no peer).
    if (code === "ELOOP" || code === "ENXIO") return "not_a_file";
    throw error;
  }
  try {
    if (!(await handle.stat()).isFile()) return "not_a_file";
    return decodeMarker(await handle.readFile("utf8")) ?? "no_record";
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** The exclusive create of a claim's marker. */
export const CREATE_MARKER =
  constants.O_WRONLY |
  constants.O_CREAT |
  constants.O_EXCL |
  constants.O_NOFOLLOW |
  constants.O_APPEND;
/** Non-blocking, like every open of an existing marker (see `readMarker`). */
export const APPEND_TO_MARKER =
  constants.O_WRONLY | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export function notAFile(): TesseraError {
  return new TesseraError(
    "claim_store_unavailable",
    "an entry named like this claim's marker is not a regular file",
  );
}

export function claimOf(read: MarkerRead): StoredClaim | undefined {
  return typeof read === "string" ? undefined : read;
}

export function sameKey(claim: StoredClaim, key: ClaimKey): boolean {
  return claim.session === key.session && claim.functionCallId === key.functionCallId;
}
