/** Injected so tests and demos can fix the decision instant. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export const systemClock: Clock = Object.freeze({ now: () => Date.now() });
