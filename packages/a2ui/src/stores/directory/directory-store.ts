import { constants, existsSync } from "node:fs";
import { type FileHandle, open, readdir, unlink } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  type ClaimKey,
  type ClaimReceipt,
  type ClaimRecord,
  type ClaimResult,
  type ClaimStore,
  isTesseraError,
  type JsonValue,
  type StoredClaim,
  TesseraError,
} from "@tessera/core";
import {
  checkClaimKey,
  checkReceipt,
  checkRecord,
  checkSession,
  claimKeyDigest,
  serializeAnswer,
} from "@tessera/core/store-kit";
import { checkPrivateDirectory, checkSameDirectory, type DirectoryIdentity } from "./checks.js";
import { GroupSync } from "./group-sync.js";
import { HeldMarkers } from "./held-markers.js";
import {
  APPEND_TO_MARKER,
  CREATE_MARKER,
  claimOf,
  encodeReceipt,
  encodeRecord,
  MARKER_NAME,
  type MarkerRead,
  notAFile,
  readMarker,
  sameKey,
} from "./marker.js";
import type { DirectoryClaimStoreOptions, InDoubtReport, SkippedMarker } from "./types.js";

export type { DirectoryClaimStoreOptions, InDoubtReport, SkippedMarker } from "./types.js";

const OPEN_DIRECTORY = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** How long a loser waits for the winner's marker content before reporting it unknown. */
const CONTENT_WAIT_MS = 200;

/**
 * Claims as marker files in a private directory the host provisioned: exclusive create
 * (`O_CREAT|O_EXCL`) of a file named by SHA-256 of (session, functionCallId), made durable by
 * an fsync of the directory before `claim` returns. One machine, local filesystem only: this
 * is not multi-machine coordination (use PostgreSQL or Redis for that).
 *
 * On Linux markers are created through `/proc/self/fd/<directory fd>`, so they land in the
 * directory that was checked even if its path is swapped between the check and the create.
 */
export class DirectoryClaimStore implements ClaimStore {
  readonly #dir: string;
  readonly #identity: DirectoryIdentity;
  readonly #handle: FileHandle;
  /** Where entries are created: the held directory fd on Linux, else the path. */
  readonly #base: string;
  readonly #syncDir: () => Promise<void>;
  readonly #syncContent: boolean;
  #closed = false;
  readonly #held = new HeldMarkers();
  /**
   * Every operation under way (claims, settles, reads, listings, session ends): `close` waits
   * for them before it closes the directory. A claim cut off by the close would find its fsync
   * failing on a closed descriptor and then fail to remove its marker through that
   * descriptor's path too, leaving the ID blocked, in doubt, for a call that never ran. A read
   * or a session end cut off by it would go on through `/proc/self/fd/<fd>` after the number
   * was freed: reading nothing (a listing that reports no claim in doubt) or, once the number
   * is reused by another directory, reading and removing that directory's markers.
   */
  readonly #working = new Set<Promise<unknown>>();

  private constructor(
    dir: string,
    identity: DirectoryIdentity,
    handle: FileHandle,
    options: DirectoryClaimStoreOptions,
  ) {
    this.#dir = dir;
    this.#identity = identity;
    this.#handle = handle;
    const viaFd = `/proc/self/fd/${handle.fd}`;
    this.#base = existsSync(viaFd) ? viaFd : dir;
    const syncOnce = () => handle.sync();
    if (options.groupCommit === false) {
      this.#syncDir = syncOnce;
    } else {
      const group = new GroupSync(syncOnce);
      this.#syncDir = () => group.request();
    }
    this.#syncContent = options.syncMarkerContent === true;
  }

  /**
   * Opens (never creates) a claim directory. Refuses a missing path (`claim_dir_missing`),
   * a symlink, a non-directory, another owner or any group/other mode bit
   * (`claim_dir_insecure`).
   */
  static async open(
    dir: string,
    options: DirectoryClaimStoreOptions = {},
  ): Promise<DirectoryClaimStore> {
    if (typeof dir !== "string" || dir.length === 0) {
      throw new TesseraError(
        "invalid_config",
        "the claim directory path must be a non-empty string",
      );
    }
    const absolute = path.resolve(dir);
    const stats = checkPrivateDirectory(absolute);
    let handle: FileHandle;
    try {
      handle = await open(absolute, OPEN_DIRECTORY);
    } catch (error) {
      throw new TesseraError(
        "claim_dir_changed",
        "the claim directory changed while it was opened",
        { cause: error },
      );
    }
    const held = await handle.stat();
    if (held.dev !== stats.dev || held.ino !== stats.ino) {
      await handle.close();
      throw new TesseraError(
        "claim_dir_changed",
        "the claim directory changed while it was opened",
      );
    }
    return new DirectoryClaimStore(absolute, { dev: stats.dev, ino: stats.ino }, handle, options);
  }

  /** The directory this store was opened on (absolute). */
  get directory(): string {
    return this.#dir;
  }

  claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    return this.#whileOpen(() => this.#claim(key, record));
  }

  async #claim(key: ClaimKey, record: ClaimRecord): Promise<ClaimResult> {
    checkClaimKey(key);
    checkRecord(record);
    checkSameDirectory(this.#dir, this.#identity);
    const name = claimKeyDigest(key);
    let marker: FileHandle;
    try {
      marker = await open(this.#entry(name), CREATE_MARKER, 0o600);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EEXIST")
        return { status: "already_claimed", existing: await this.#readClaimed(key, name) };
      throw unavailable("the claim marker could not be created", error);
    }
    try {
      await marker.writeFile(encodeRecord(key, record));
      if (this.#syncContent) await marker.sync();
      // The claim is durable once the directory entry is: only then may anything run.
      await this.#syncDir();
    } catch (error) {
      await marker.close().catch(() => undefined);
      throw await this.#abandon(name, error);
    }
    const replaced = this.#held.keep(name, marker);
    if (replaced) await replaced;
    return CLAIMED;
  }

  /**
   * After a failed write or fsync (a full disk) the caller is told the call could not be
   * claimed and nothing runs, so the marker goes too: left behind, it would refuse the ID
   * forever while its empty content kept it out of `listInDoubt`. A loser that saw it in the
   * meantime was refused, and nothing ran for it either. If the removal fails as well, the
   * error says so, and `inDoubtReport` lists the marker as `no_record`.
   */
  async #abandon(name: string, cause: unknown): Promise<TesseraError> {
    try {
      await unlink(this.#entry(name));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
        return unavailable(
          "the claim marker could not be written nor removed: the ID stays claimed, in doubt",
          cause,
        );
      }
    }
    return unavailable("the claim marker could not be written; it was removed", cause);
  }

  /**
   * Records the outcome by appending a receipt line to the marker, with the answer inside it
   * (never creating one: a missing marker means nothing was claimed, or the session ended:
   * `invalid_input`). The first complete receipt line is the outcome, answer included. Not
   * fsynced: if the outcome is lost in a crash the claim reads in doubt, and is still never
   * claimable.
   */
  settle(key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue): Promise<void> {
    return this.#whileOpen(() => this.#settle(key, receipt, answer));
  }

  async #settle(key: ClaimKey, receipt: ClaimReceipt, answer?: JsonValue): Promise<void> {
    checkClaimKey(key);
    checkReceipt(receipt);
    const answerText = serializeAnswer(answer);
    checkSameDirectory(this.#dir, this.#identity);
    const name = claimKeyDigest(key);
    let marker = this.#held.take(name);
    if (!marker) {
      try {
        marker = await open(this.#entry(name), APPEND_TO_MARKER);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") {
          throw new TesseraError("invalid_input", "settle: no such claim");
        }
        throw unavailable("the claim outcome could not be recorded", error);
      }
    }
    try {
      await marker.writeFile(encodeReceipt(receipt, answerText));
    } catch (error) {
      throw unavailable("the claim outcome could not be recorded", error);
    } finally {
      await marker.close();
    }
  }

  get(key: ClaimKey): Promise<StoredClaim | undefined> {
    return this.#whileOpen(() => this.#get(key));
  }

  async #get(key: ClaimKey): Promise<StoredClaim | undefined> {
    checkClaimKey(key);
    checkSameDirectory(this.#dir, this.#identity);
    const name = claimKeyDigest(key);
    const read = await this.#read(name);
    if (read === "not_a_file") throw notAFile();
    if (read === "missing") return undefined;
    const claim = claimOf(read);
    if (claim && sameKey(claim, key)) return claim;
    // A marker without this key's record line (its writer died between the create and the
    // write, or is writing it now) still holds the ID: a claim of it is refused. `get` says
    // what that losing claim would report (the record once it appears, else an unknown one,
    // in doubt), never that the ID is free; unless the marker goes meanwhile.
    return this.#readClaimed(key, name, { missing: "free" });
  }

  /**
   * Markers without a recorded outcome, oldest first. Entries that name no claim (see
   * `SkippedMarker`) are left out; `inDoubtReport` lists them.
   */
  async listInDoubt(session?: string): Promise<StoredClaim[]> {
    return (await this.inDoubtReport(session)).inDoubt;
  }

  /** `listInDoubt`, plus every entry named like a marker that could not be read as a claim. */
  inDoubtReport(session?: string): Promise<InDoubtReport> {
    return this.#whileOpen(() => this.#inDoubtReport(session));
  }

  async #inDoubtReport(session?: string): Promise<InDoubtReport> {
    checkSession(session, true);
    checkSameDirectory(this.#dir, this.#identity);
    const inDoubt: StoredClaim[] = [];
    const skipped: SkippedMarker[] = [];
    for (const name of await this.#markerNames()) {
      const read = await this.#read(name);
      if (read === "missing") continue; // removed since the listing (endSession)
      if (typeof read === "string") skipped.push(Object.freeze({ marker: name, why: read }));
      else if (read.receipt === undefined && (session === undefined || read.session === session))
        inDoubt.push(read);
    }
    inDoubt.sort((a, b) => a.claimedAt - b.claimedAt);
    return Object.freeze({ inDoubt, skipped });
  }

  endSession(session: string): Promise<void> {
    return this.#whileOpen(() => this.#endSession(session));
  }

  async #endSession(session: string): Promise<void> {
    checkSession(session);
    checkSameDirectory(this.#dir, this.#identity);
    for (const name of await this.#markerNames()) {
      // An entry that names no claim belongs to no session: it stays for the operator.
      const claim = claimOf(await this.#read(name));
      if (claim?.session !== session) continue;
      try {
        await unlink(this.#entry(name));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT")
          throw unavailable("a claim marker could not be removed", error);
      }
      // A marker this process holds for its settle goes too, so a settle after the session
      // ended is refused like one in any store. (A marker held by another process is not
      // reached: that settle appends to the removed file, and the outcome is dropped.)
      await this.#held.drop(name);
    }
  }

  /** Runs `work` once the store is known open, and lets `close` wait for it. */
  #whileOpen<T>(work: () => Promise<T>): Promise<T> {
    try {
      this.#checkOpen();
    } catch (error) {
      return Promise.reject(error);
    }
    const running = work();
    this.#working.add(running);
    const done = () => this.#working.delete(running);
    running.then(done, done);
    return running;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Refused from now on (#checkOpen); those already started finish on an open directory.
    await Promise.allSettled([...this.#working]);
    await this.#held.closeAll();
    await this.#handle.close();
  }

  #entry(name: string): string {
    return `${this.#base}/${name}`;
  }

  #checkOpen(): void {
    if (this.#closed)
      throw new TesseraError("claim_store_unavailable", "the claim store is closed");
  }

  async #markerNames(): Promise<string[]> {
    try {
      return (await readdir(this.#base)).filter((name) => MARKER_NAME.test(name));
    } catch (error) {
      throw unavailable("the claim directory could not be listed", error);
    }
  }

  async #read(name: string): Promise<MarkerRead> {
    try {
      return await readMarker(this.#entry(name));
    } catch (error) {
      throw unavailable("a claim marker could not be read", error);
    }
  }

  /**
   * The existing claim a loser is told about. The winner writes its content just after the
   * exclusive create, so a loser may briefly see an empty marker; it waits a little, and if
   * the content never appears (the winner died in between) reports the claim with an unknown
   * record — still claimed, still in doubt.
   */
  #readClaimed(key: ClaimKey, name: string): Promise<StoredClaim>;
  /** For `get`: a marker removed while it waits means the ID is free (`undefined`). */
  #readClaimed(
    key: ClaimKey,
    name: string,
    options: { missing: "free" },
  ): Promise<StoredClaim | undefined>;
  async #readClaimed(
    key: ClaimKey,
    name: string,
    options?: { missing: "free" },
  ): Promise<StoredClaim | undefined> {
    const deadline = Date.now() + CONTENT_WAIT_MS;
    for (let pause = 1; ; pause = Math.min(pause * 2, 20)) {
      const read = await this.#read(name);
      // Not made by this store: the ID's name is taken, but by nothing that is a claim.
      if (read === "not_a_file") throw notAFile();
      if (read === "missing" && options?.missing === "free") return undefined;
      const claim = claimOf(read);
      if (claim && sameKey(claim, key)) return claim;
      if (Date.now() >= deadline) break;
      await sleep(pause);
    }
    return Object.freeze({
      session: key.session,
      functionCallId: key.functionCallId,
      bodyHash: "",
      claimedAt: 0,
    });
  }
}

const CLAIMED: ClaimResult = Object.freeze({ status: "claimed" });

function unavailable(message: string, cause: unknown): TesseraError {
  if (isTesseraError(cause)) return cause;
  const code = (cause as NodeJS.ErrnoException)?.code;
  if (code === "ENOENT") {
    return new TesseraError("claim_dir_missing", "the claim directory disappeared", { cause });
  }
  return new TesseraError("claim_store_unavailable", message, { cause });
}
