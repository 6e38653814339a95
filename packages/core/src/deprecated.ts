import { claimKeyDigest as claimKeyDigestOf } from "./contracts/claims.js";
import {
  storageDigest as storageDigestOf,
  uniqueStorageDigest as uniqueStorageDigestOf,
} from "./contracts/digest.js";
import { redact as redactOf } from "./contracts/errors.js";
import {
  checkClaimKey as checkClaimKeyOf,
  checkReceipt as checkReceiptOf,
  checkRecord as checkRecordOf,
} from "./contracts/store-input.js";
import {
  ScriptedDriver as ScriptedDriverClass,
  type ScriptedStep as ScriptedStepOf,
} from "./executor/scripted-driver.js";
import { fixedClock as fixedClockOf, ManualClock as ManualClockClass } from "./memory/clock.js";

/**
 * Names that moved out of the main entry, kept here for one release as deprecated aliases of
 * the very same values (so `instanceof` and identity hold across old and new imports).
 * Test helpers moved to `@tessera/core/testing`, store-author helpers to
 * `@tessera/core/store-kit`.
 */

/** @deprecated Import from `@tessera/core/testing`. Kept in the main entry for one release. */
export const ManualClock = ManualClockClass;
/** @deprecated Import from `@tessera/core/testing`. Kept in the main entry for one release. */
export type ManualClock = ManualClockClass;
/** @deprecated Import from `@tessera/core/testing`. Kept in the main entry for one release. */
export const fixedClock = fixedClockOf;
/** @deprecated Import from `@tessera/core/testing`. Kept in the main entry for one release. */
export const ScriptedDriver = ScriptedDriverClass;
/** @deprecated Import from `@tessera/core/testing`. Kept in the main entry for one release. */
export type ScriptedDriver = ScriptedDriverClass;
/** @deprecated Import from `@tessera/core/testing`. Kept in the main entry for one release. */
export type ScriptedStep = ScriptedStepOf;

/** @deprecated Import from `@tessera/core/store-kit`. Kept in the main entry for one release. */
export const checkClaimKey = checkClaimKeyOf;
/** @deprecated Import from `@tessera/core/store-kit`. Kept in the main entry for one release. */
export const checkRecord = checkRecordOf;
/** @deprecated Import from `@tessera/core/store-kit`. Kept in the main entry for one release. */
export const checkReceipt = checkReceiptOf;
/** @deprecated Import from `@tessera/core/store-kit`. Kept in the main entry for one release. */
export const claimKeyDigest = claimKeyDigestOf;
/** @deprecated Import from `@tessera/core/store-kit`. Kept in the main entry for one release. */
export const storageDigest = storageDigestOf;
/** @deprecated Import from `@tessera/core/store-kit`. Kept in the main entry for one release. */
export const uniqueStorageDigest = uniqueStorageDigestOf;
/** @deprecated Import from `@tessera/core/store-kit`. Kept in the main entry for one release. */
export const redact = redactOf;
