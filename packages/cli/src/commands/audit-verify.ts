import { generateKeyPairSync } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  type AuditBreak,
  type AuditCheckpoint,
  type AuditCheckpointResult,
  AuditTrailWalker,
  type AuditVerification,
  readAuditPages,
  signAuditCheckpoint,
  TesseraError,
  UnreadableAuditEvent,
  unreadableTrail,
  verifyAuditCheckpoint,
} from "@tessera/core";
import { Command } from "commander";
import { makePrivateDirectory, readNamedFile, writeNewFile } from "../files.js";
import { nonEmpty } from "../options.js";
import { printJson, printLines } from "../output.js";
import { openAudit, type SourceOptions, sourceOptions } from "./audit-source.js";

/**
 * Exit status when the trail does not verify (a break, or a checkpoint it fails): apart from
 * 2, a refusal to run, so that a script can tell "tampered" from "could not look".
 */
export const EXIT_NOT_INTACT = 3;

const KEY_FILE = "audit-signing.key";
const PUBLIC_KEY_FILE = "audit-signing.pub";

interface VerifyOptions extends SourceOptions {
  checkpoint?: string;
  publicKey?: string;
  json?: boolean;
}

interface CheckpointOptions extends SourceOptions {
  privateKey: string;
  out?: string;
  json?: boolean;
}

/**
 * Walks the trail a page at a time (the memory it takes is one page and a few fields per
 * stream, however long the trail) and gives the walk and its verdict. A stored event that is
 * not an event at all (a row replaced by JSON `null` or by text that is not JSON) is a break
 * too, `unreadable` at its position: tampering, reported as such (exit 3), not a crash with a
 * stack. So is an event a store files under a call or trace ID not its own (`misindexed`): the
 * store's paged read checks its index beside the event. `watch` names the positions whose
 * hashes signed checkpoints will be checked against.
 */
async function walkTrail(
  options: SourceOptions,
  watch: readonly { stream: string; seq: number }[] = [],
): Promise<{ walker: AuditTrailWalker | undefined; result: AuditVerification }> {
  const { audit, close } = await openAudit(options);
  try {
    const walker = new AuditTrailWalker({ watch });
    for await (const page of readAuditPages(audit)) walker.push(page);
    return { walker, result: walker.result() };
  } catch (error) {
    if (!(error instanceof UnreadableAuditEvent)) throw error;
    return { walker: undefined, result: unreadableTrail(error.position, error.misindexed) };
  } finally {
    await close();
  }
}

/** The stream and seq of each checkpoint that names them: what the walk keeps hashes of. */
function headsNamedBy(checkpoints: readonly unknown[]): { stream: string; seq: number }[] {
  return checkpoints.flatMap((checkpoint) => {
    const { stream, seq } = (checkpoint ?? {}) as { stream?: unknown; seq?: unknown };
    return typeof stream === "string" && typeof seq === "number" ? [{ stream, seq }] : [];
  });
}

function readText(path: string, what: string): string {
  return readNamedFile(path, `${what} file`, "invalid_input");
}

/** A checkpoint file holds one checkpoint or a list of them, as `audit checkpoint` writes. */
function readCheckpoints(path: string): unknown[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readText(path, "checkpoint"));
  } catch (error) {
    if (error instanceof TesseraError) throw error;
    throw new TesseraError("invalid_input", "the checkpoint file is not JSON");
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  if (list.length === 0) throw new TesseraError("invalid_input", "the checkpoint file is empty");
  // A file that holds no checkpoint at all is the caller's slip (another JSON file named), not
  // a checkpoint that fails; one that names its stream and seq is checked, signature and all.
  if (!list.some((entry) => headsNamedBy([entry]).length > 0)) {
    throw new TesseraError(
      "invalid_input",
      "the checkpoint file holds no checkpoint (each names a stream and a seq): write one with `tessera audit checkpoint`",
    );
  }
  return list;
}

const streamName = (stream: string) => (stream === "" ? "(gate)" : JSON.stringify(stream));

export function describeBreak(found: AuditBreak): string {
  if (found.kind === "unreadable")
    return `unreadable event at index ${found.index}: ${found.detail}`;
  if (found.kind === "misindexed")
    return `misindexed event in stream ${streamName(found.stream)} at index ${found.index}: ${found.detail}`;
  const seq = found.seq === undefined ? "no seq" : `seq ${found.seq}`;
  return `${found.kind} event in stream ${streamName(found.stream)} at index ${found.index} (${seq}, expected seq ${found.expectedSeq}): ${found.detail}`;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

function describe(result: AuditVerification, failedCheckpoints: number): string[] {
  const counted = `${plural(result.events, "event")} in ${plural(result.streams.length, "stream")}`;
  const lines = [
    !result.ok
      ? `broken: ${describeBreak(result.break)}`
      : failedCheckpoints > 0
        ? `not intact: the chains hold (${counted}), but ${plural(failedCheckpoints, "checkpoint")} ${failedCheckpoints === 1 ? "fails" : "fail"} (below)`
        : `intact: ${counted}`,
  ];
  for (const stream of result.streams) {
    const unchained = stream.unchained > 0 ? `, ${stream.unchained} unchained before it` : "";
    const state =
      stream.break === undefined ? "" : ` — ${stream.break.kind} at index ${stream.break.index}`;
    lines.push(
      `  stream ${streamName(stream.stream)}: ${stream.events} events, verified to seq ${stream.head.seq}${unchained}${state}`,
    );
  }
  return lines;
}

function describeCheckpoint(result: AuditCheckpointResult): string {
  const where = `checkpoint of stream ${streamName(result.stream)} at seq ${result.seq}`;
  if (result.ok) return `${where}: holds`;
  const found = result.break === undefined ? "" : `: ${describeBreak(result.break)}`;
  return `${where}: FAILS (${result.reason})${found}`;
}

export function auditVerifyCommand(): Command {
  return sourceOptions(
    new Command("verify").description(
      `walk the trail's hash chains and report the first break (exit ${EXIT_NOT_INTACT} if not intact)`,
    ),
  )
    .option("--checkpoint <file>", "signed checkpoints to check the trail against", nonEmpty)
    .option("--public-key <file>", "the Ed25519 public key (PEM) that signed them", nonEmpty)
    .option("--json", "print JSON")
    .action(async (options: VerifyOptions) => {
      if ((options.checkpoint === undefined) !== (options.publicKey === undefined)) {
        throw new TesseraError("invalid_usage", "--checkpoint and --public-key go together");
      }
      // Read the inputs before the trail: a missing key is the caller's slip, not tampering.
      const checkpoints =
        options.checkpoint === undefined ? undefined : readCheckpoints(options.checkpoint);
      const publicKey =
        options.publicKey === undefined ? undefined : readText(options.publicKey, "public key");
      const { walker, result } = await walkTrail(options, headsNamedBy(checkpoints ?? []));
      // A trail that cannot be read whole is not checked against checkpoints: it already fails.
      const checked =
        checkpoints === undefined || publicKey === undefined || walker === undefined
          ? undefined
          : checkpoints.map((checkpoint) => verifyAuditCheckpoint(checkpoint, publicKey, walker));
      const intact = result.ok && (checked ?? []).every((check) => check.ok);
      if (options.json) {
        printJson({
          ...result,
          ...(checked === undefined ? {} : { checkpoints: checked }),
          intact,
        });
      } else {
        const failed = (checked ?? []).filter((check) => !check.ok).length;
        printLines([...describe(result, failed), ...(checked ?? []).map(describeCheckpoint)]);
      }
      if (!intact) process.exitCode = EXIT_NOT_INTACT;
    });
}

export function auditCheckpointCommand(): Command {
  return sourceOptions(
    new Command("checkpoint").description(
      "sign the head of every stream (Ed25519); keep the output away from the trail",
    ),
  )
    .requiredOption("--private-key <file>", "the Ed25519 private key (PEM)", nonEmpty)
    .option("--out <file>", "write the checkpoints here (default: print them)", nonEmpty)
    .option("--json", "print JSON")
    .action(async (options: CheckpointOptions) => {
      const privateKey = readText(options.privateKey, "private key");
      const { result } = await walkTrail(options);
      if (!result.ok) {
        // Signing a broken trail would vouch for the tampering. With --json the refusal is
        // JSON too (the break as `audit verify --json` gives it): a script that asked for
        // JSON parses standard output, and `> checkpoints.json` never catches a line of text.
        if (options.json) printJson({ signed: false, break: result.break });
        else printLines([`not signed: ${describeBreak(result.break)}`]);
        process.exitCode = EXIT_NOT_INTACT;
        return;
      }
      const at = new Date().toISOString();
      const checkpoints: AuditCheckpoint[] = result.streams
        .filter((stream) => stream.head.seq > 0)
        .map((stream) =>
          signAuditCheckpoint({ stream: stream.stream, ...stream.head }, privateKey, { at }),
        );
      const text = `${JSON.stringify(checkpoints, null, 2)}\n`;
      if (options.out === undefined) {
        process.stdout.write(text);
        return;
      }
      // A checkpoint is the proof kept away from the trail: a second run never replaces one.
      writeNewFile(options.out, text, "a checkpoint file");
      if (options.json) printJson({ out: options.out, checkpoints: checkpoints.length });
      else printLines([`signed ${checkpoints.length} stream heads into ${options.out}`]);
    });
}

export function auditKeygenCommand(): Command {
  return new Command("keygen")
    .description(
      `make an Ed25519 key pair for checkpoints: ${KEY_FILE} (0600) and ${PUBLIC_KEY_FILE}`,
    )
    .requiredOption("--out <dir>", "directory to write them into (created if absent)", nonEmpty)
    .option("--json", "print JSON")
    .action((options: { out: string; json?: boolean }) => {
      const { publicKey, privateKey } = generateKeyPairSync("ed25519");
      makePrivateDirectory(options.out, "the key directory");
      const keyPath = join(options.out, KEY_FILE);
      const publicPath = join(options.out, PUBLIC_KEY_FILE);
      // Never over an existing key (checkpoints signed with it would no longer verify), nor
      // half a pair: both names are checked before either is written.
      if (existsSync(keyPath) || existsSync(publicPath)) {
        throw new TesseraError("invalid_usage", "a signing key is already there; not replaced");
      }
      writeNewFile(
        keyPath,
        privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
        "a private key",
        0o600,
      );
      writeNewFile(
        publicPath,
        publicKey.export({ type: "spki", format: "pem" }).toString(),
        "a public key",
      );
      if (options.json) printJson({ privateKey: keyPath, publicKey: publicPath });
      else printLines([`private key: ${keyPath} (keep it secret)`, `public key: ${publicPath}`]);
    });
}
