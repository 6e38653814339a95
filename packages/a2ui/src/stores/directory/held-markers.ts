import type { FileHandle } from "node:fs/promises";

/** Markers kept open between claim and settle (one per call in flight, in practice). */
const MAX_HELD_MARKERS = 256;

/**
 * The claimer settles soon after claiming, so its marker stays open until then: settle is one
 * append instead of a path lookup, an open and an append. Bounded: past the bound the oldest is
 * closed (its settle opens the marker again).
 */
export class HeldMarkers {
  readonly #held = new Map<string, FileHandle>();

  /**
   * Keeps `marker` under `name`. A handle already held under this name is for a marker removed
   * since (another process ended the session, so the exclusive create succeeded again): it is
   * closed, not dropped, or each such re-claim would leak a file descriptor. Its close is
   * returned, for the claim to await (only then, so the common claim pays no extra turn).
   */
  keep(name: string, marker: FileHandle): Promise<void> | undefined {
    const replaced = this.#held.get(name);
    this.#held.delete(name);
    this.#held.set(name, marker);
    if (this.#held.size > MAX_HELD_MARKERS) {
      const [oldest, handle] = this.#held.entries().next().value as [string, FileHandle];
      this.#held.delete(oldest);
      handle.close().catch(() => undefined);
    }
    return replaced?.close().catch(() => undefined);
  }

  /** The handle held under `name`, no longer held (the caller closes it), if any. */
  take(name: string): FileHandle | undefined {
    const marker = this.#held.get(name);
    this.#held.delete(name);
    return marker;
  }

  /** Closes what is held under `name` (its marker was removed). */
  async drop(name: string): Promise<void> {
    await this.take(name)
      ?.close()
      .catch(() => undefined);
  }

  /** Closes every handle held. */
  async closeAll(): Promise<void> {
    const held = [...this.#held.values()];
    this.#held.clear();
    await Promise.all(held.map((marker) => marker.close().catch(() => undefined)));
  }
}
