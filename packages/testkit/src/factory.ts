import { it } from "vitest";

/**
 * How a conformance suite gets hold of a store. A factory opens a fresh, isolated store per
 * test; the optional hooks say what else the store can do (be opened by another OS process,
 * be interrupted), and the cases that need a hook are skipped, with the reason in their
 * name, when it is absent.
 */

/** How a child OS process opens the same store: `(await import(module))[exportName](arg)`. */
export interface ProcessSpec {
  /** A package name the worker can resolve (`@tessera/sqlite`) or an absolute file path/URL. */
  readonly module: string;
  /** An export of that module, or a dotted path to a static method (`DirectoryClaimStore.open`). */
  readonly exportName: string;
  /** JSON-serialisable argument (a URL, a directory, an options object). */
  readonly arg: unknown;
  /**
   * When the export returns a bundle (`openStores(url)` → `{ usage, claims, … }`), the
   * property holding the port. The bundle's own `close()` is called when the worker ends.
   */
  readonly pick?: string;
}

/** Cuts the store off from its backing service and brings it back. */
export interface OutageControl {
  interrupt(): Promise<void>;
  restore(): Promise<void>;
  /**
   * `"down"` (default): between `interrupt` and `restore` every operation must fail with the
   * port's `*_unavailable` code. `"blip"`: the interruption is one event (connections killed)
   * and the client may reconnect by itself, so each operation must either fail with that code
   * or answer correctly; the counting invariants are checked either way.
   */
  readonly kind?: "down" | "blip";
}

/** One opened store. Extra fields (a file path, a schema name) may ride along for the hooks. */
export interface OpenedStore<S> {
  readonly store: S;
  /** Releases everything `open` acquired (connections, temp files). Called once per test. */
  close(): Promise<void>;
}

export interface StoreFactory<S, H extends OpenedStore<S> = OpenedStore<S>> {
  /** A fresh, empty store no other test sees. */
  open(): Promise<H>;
  /** How another OS process opens the very store behind `opened`. Absent: one process only. */
  processSpec?(opened: H): ProcessSpec;
  /** How to interrupt the service behind `opened`. Absent: the outage cases are skipped. */
  outage?(opened: H): OutageControl;
  /**
   * Titles (or title prefixes) of cases this store is known to fail. They still run, as
   * `it.fails`: the report shows them, and once the store is fixed they fail loudly until
   * the entry is removed. For tracking a gap openly, never for hiding one.
   */
  knownFailures?: readonly string[];
}

/**
 * `it`, or `it.fails` for a case the factory lists as a known failure. `timeoutMs` is for a
 * case that starts OS processes more than once, which a loaded machine makes slow.
 */
export function caseFor(factory: {
  knownFailures?: readonly string[];
}): (title: string, body: () => Promise<unknown>, timeoutMs?: number) => void {
  const known = factory.knownFailures ?? [];
  return (title, body, timeoutMs) => {
    const run = known.some((prefix) => title.startsWith(prefix)) ? it.fails : it;
    run(
      title,
      async () => {
        await body();
      },
      timeoutMs,
    );
  };
}

/** Runs `body` against a freshly opened store and always closes it. */
export async function withStore<S, H extends OpenedStore<S>, T>(
  factory: StoreFactory<S, H>,
  body: (opened: H) => Promise<T>,
): Promise<T> {
  const opened = await factory.open();
  try {
    return await body(opened);
  } finally {
    await opened.close();
  }
}

type Case = (title: string, body: () => Promise<unknown>, timeoutMs?: number) => void;

/**
 * What every suite declares its cases with: `use` opens a fresh store, `check` is the plain
 * case, and the cross-process and outage cases fall back to a visibly skipped case (with a
 * note in its title) when the factory has no hook for them.
 */
export function suiteCases<S, H extends OpenedStore<S>>(factory: StoreFactory<S, H>) {
  const check = caseFor(factory);
  return {
    use: <T>(body: (opened: H) => Promise<T>) => withStore(factory, body),
    check,
    crossProcess: (factory.processSpec ? check : it.skip) as Case,
    skipNote: factory.processSpec ? "" : " (skipped: one process only)",
    outageCase: (factory.outage ? check : it.skip) as Case,
    outageNote: factory.outage ? "" : " (skipped: no outage hook)",
  };
}
