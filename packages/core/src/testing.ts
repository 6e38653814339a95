/**
 * `@tessera/core/testing`: what tests and demos use in place of time and a model. Nothing here
 * belongs in a host's production wiring.
 */

export { ScriptedDriver, type ScriptedStep } from "./executor/scripted-driver.js";
export { fixedClock, ManualClock } from "./memory/clock.js";
