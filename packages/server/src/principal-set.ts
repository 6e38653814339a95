import type { Principal } from "./principals.js";

/**
 * The principals in force, replaceable while the service runs (`tessera serve` on SIGHUP).
 * Replaced whole, by one assignment: each request authenticates against one complete set, the
 * old or the new, never a mixture; a request already authenticated keeps its principal.
 */
export class PrincipalSet {
  #current: readonly Principal[];

  constructor(initial: readonly Principal[]) {
    this.#current = initial;
  }

  get current(): readonly Principal[] {
    return this.#current;
  }

  /** `next` must already be checked (`parsePrincipals`): nothing here can fail half-way. */
  replace(next: readonly Principal[]): void {
    this.#current = next;
  }
}
