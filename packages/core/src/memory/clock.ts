import type { Clock } from "../ports/clock.js";

/** A clock that reads `at` until moved: tests and demos fix the decision instant with it. */
export class ManualClock implements Clock {
  #now: number;

  constructor(at: number | string | Date = 0) {
    this.#now = at instanceof Date ? at.getTime() : typeof at === "string" ? Date.parse(at) : at;
  }

  now(): number {
    return this.#now;
  }

  set(at: number | string | Date): void {
    this.#now = at instanceof Date ? at.getTime() : typeof at === "string" ? Date.parse(at) : at;
  }

  advance(ms: number): void {
    this.#now += ms;
  }
}

export function fixedClock(at: number | string | Date): Clock {
  const clock = new ManualClock(at);
  return Object.freeze({ now: () => clock.now() });
}
