import type { GrantSource } from "../ports/grant-source.js";
import type { DeliveryResult, MessageEnvelope, MessageTransport } from "../ports/transport.js";
import type { ConsumeResult, GrantUsageStore } from "../ports/usage-store.js";

/**
 * Port methods that can answer without yielding: the in-memory usage store's `tryConsume`
 * (whose atomicity is that it never yields anyway) and the in-process transport's `deliver`
 * (when the recipient's handler answers at once). The kernel calls such a twin directly instead
 * of awaiting the promise the port returns, so a send through the in-memory ports allocates no
 * promise or suspended frame on the way (those were most of a fan-out's garbage). The answer is
 * the one the method would resolve to; a throw is the rejection it would give.
 *
 * Keyed by the method itself, not by the object's class: a subclass or an instance that
 * replaces the method (a spy, a wrapper that logs or fails) is called through the port as usual.
 */
export type ConsumeNow = (
  store: GrantUsageStore,
  namespaceId: string,
  grantId: string,
  maxUses: number,
) => ConsumeResult;

/** A delivery's result now, or a promise of it when the recipient answers later. */
export type DeliverNow = (
  transport: MessageTransport,
  envelope: MessageEnvelope,
) => DeliveryResult | Promise<DeliveryResult>;

const CONSUMERS = new WeakMap<GrantUsageStore["tryConsume"], ConsumeNow>();
const DELIVERERS = new WeakMap<MessageTransport["deliver"], DeliverNow>();

/** Registers the synchronous twin of a `tryConsume` implementation. */
export function answersSynchronously(
  tryConsume: GrantUsageStore["tryConsume"],
  consumeNow: ConsumeNow,
): void {
  CONSUMERS.set(tryConsume, consumeNow);
}

/** Registers the synchronous twin of a `deliver` implementation. */
export function deliversSynchronously(
  deliver: MessageTransport["deliver"],
  deliverNow: DeliverNow,
): void {
  DELIVERERS.set(deliver, deliverNow);
}

/** The synchronous twin of `usage.tryConsume`, when it has one. */
export function consumeNowOf(usage: GrantUsageStore): ConsumeNow | undefined {
  const method = usage.tryConsume;
  return typeof method === "function" ? CONSUMERS.get(method) : undefined;
}

/** The synchronous twin of `transport.deliver`, when it has one. */
export function deliverNowOf(transport: MessageTransport): DeliverNow | undefined {
  const method = transport.deliver;
  return typeof method === "function" ? DELIVERERS.get(method) : undefined;
}

/** A grant version now: the in-memory grant store's `grantsVersion`, which never yields. */
export type VersionNow = (source: GrantSource, namespaceId: string, subject: string) => string;

type GrantsVersion = NonNullable<GrantSource["grantsVersion"]>;
const VERSIONS = new WeakMap<GrantsVersion, VersionNow>();

/** Registers the synchronous twin of a `grantsVersion` implementation. */
export function versionsSynchronously(grantsVersion: GrantsVersion, versionNow: VersionNow): void {
  VERSIONS.set(grantsVersion, versionNow);
}

/** The synchronous twin of `source.grantsVersion`, when it has one. */
export function versionNowOf(source: GrantSource): VersionNow | undefined {
  const method = source.grantsVersion;
  return typeof method === "function" ? VERSIONS.get(method) : undefined;
}
