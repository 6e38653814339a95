import { expect } from "vitest";

/**
 * Errors are matched on their stable `code`, never on class identity or message text: a
 * host's store may load its own copy of @tessera/core, and messages are for people.
 */
export function errorCode(error: unknown): string | undefined {
  const code = error instanceof Error ? (error as Error & { code?: unknown }).code : undefined;
  return typeof code === "string" ? code : undefined;
}

/** Awaits `action` and asserts that it rejects with one of `codes`. */
export async function expectCode(
  action: () => Promise<unknown>,
  codes: readonly string[],
): Promise<void> {
  let outcome: { threw: false; value: unknown } | { threw: true; error: unknown };
  try {
    outcome = { threw: false, value: await action() };
  } catch (error) {
    outcome = { threw: true, error };
  }
  if (!outcome.threw) {
    expect.fail(`expected a rejection with code ${codes.join(" or ")}, but it resolved`);
  }
  expect(codes).toContain(errorCode(outcome.error));
}

/**
 * Runs `action`; a rejection must carry one of `codes` (then `undefined` is returned), any
 * other rejection fails the test. Used where either answer is conformant (oversize input,
 * operations during a "blip" outage).
 */
export async function resultOrCode<T>(
  action: () => Promise<T>,
  codes: readonly string[],
): Promise<{ ok: true; value: T } | { ok: false; code: string }> {
  try {
    return { ok: true, value: await action() };
  } catch (error) {
    const code = errorCode(error);
    if (code === undefined || !codes.includes(code)) throw error;
    return { ok: false, code };
  }
}
