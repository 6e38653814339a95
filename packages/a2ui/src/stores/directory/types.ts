import type { StoredClaim } from "@tessera/core";

/** The directory claim store's options and reports, apart from the store that uses them. */

/**
 * A directory entry named like a marker that names no claim: `not_a_file` (a FIFO, a
 * directory, a symlink, a socket: not made by this store) or `no_record` (a marker whose
 * record line is missing or torn: its worker died, or a full disk kept it from being written
 * and removed; the ID stays claimed, in doubt, but its key cannot be named).
 */
export interface SkippedMarker {
  readonly marker: string;
  readonly why: "not_a_file" | "no_record";
}

/** What `inDoubtReport` finds: the claims in doubt, and the entries it could not read. */
export interface InDoubtReport {
  readonly inDoubt: StoredClaim[];
  /** Never filtered by session: an entry that cannot be read cannot be attributed. */
  readonly skipped: SkippedMarker[];
}

export interface DirectoryClaimStoreOptions {
  /**
   * Also fsync each marker's content before the directory. The claim is the marker's name,
   * made durable by the directory fsync; the content is informational (a marker whose
   * content was lost in a crash reads in doubt). Default false.
   */
  readonly syncMarkerContent?: boolean;
  /**
   * Group commit (default true): claims in flight together share one directory fsync, each
   * released only by an fsync that started after its marker was created. Measured against
   * one fsync per claim in bench/src/a2ui; turn off to get exactly one fsync per claim.
   */
  readonly groupCommit?: boolean;
}
