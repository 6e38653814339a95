/** Digits of an ISO 8601 instant past the millisecond (`.0005` → `5`). */
const SUB_MILLISECOND = /(?<=\.\d{3})\d+/;

/**
 * The first whole millisecond at or after an ISO 8601 instant. `Date.parse` drops the digits
 * past the millisecond, so `…00.0005Z` reads as `…00.000Z`, and a window opening there would
 * open up to 1 ms early. A grant's lower bounds (`issuedAt`, `notBefore`) are read with this;
 * its upper bound (`expiresAt`) keeps `Date.parse`, which closes it up to 1 ms early: the safe
 * side.
 */
export function openingMs(instant: string): number {
  const extra = SUB_MILLISECOND.exec(instant);
  if (extra === null) return Date.parse(instant);
  // The digits are cut from the text rather than trusting how the engine rounds them.
  const cut = instant.slice(0, extra.index) + instant.slice(extra.index + extra[0].length);
  const whole = Date.parse(cut);
  return /[1-9]/.test(extra[0]) ? whole + 1 : whole;
}
