import { randomUUID } from "node:crypto";
import { type Grant, type GrantInput, type GrantStore, TesseraError } from "@tessera/core";
import {
  checkId,
  checkRevocationInstant,
  parseGrantInput,
  storageDigest,
} from "@tessera/core/store-kit";
import { type Connection, script } from "./connection.js";

/**
 * Per namespace (keys by digest of the namespace ID):
 *   grants:<ns>            hash   grant-id digest → grant JSON, as added (never rewritten)
 *   grants-revoked:<ns>    hash   grant-id digest → ISO instant of the first revocation
 *   grants-order:<ns>      zset   grant-id digest, scored by a global add counter
 *   grants-subject:<ns>:<subject>  zset, the same, for one subject's lookups
 *   grants-versions:<ns>   hash   subject digest → the holder's grants version
 * Each write is one script, so a grant is never visible half-added, nor without its holder's
 * new version. A version is a random token the writer draws, never a counter: a prefix
 * flushed and filled again never repeats a version a running kernel has cached.
 */

/**
 * Adds a batch, all or nothing. KEYS: the add counter, then four keys per namespace (grants,
 * revoked, order, versions), then one order key per holder. ARGV: the version token, the
 * grant count, then six values per grant: namespace slot, holder slot, grant-id digest, grant
 * JSON, revocation instant or '', holder digest. Every ID is checked, against the store and
 * the batch, before anything is written.
 */
const ADD = script(`
local n = tonumber(ARGV[2])
local seen = {}
for i = 0, n - 1 do
  local at = 3 + i * 6
  local ns = tonumber(ARGV[at])
  local mark = ns .. ':' .. ARGV[at + 2]
  if seen[mark] or redis.call('HEXISTS', KEYS[2 + (ns - 1) * 4], ARGV[at + 2]) == 1 then
    return 0
  end
  seen[mark] = true
end
for i = 0, n - 1 do
  local at = 3 + i * 6
  local base = 2 + (tonumber(ARGV[at]) - 1) * 4
  local id = ARGV[at + 2]
  redis.call('HSET', KEYS[base], id, ARGV[at + 3])
  local seq = redis.call('INCR', KEYS[1])
  redis.call('ZADD', KEYS[base + 2], seq, id)
  redis.call('ZADD', KEYS[tonumber(ARGV[at + 1])], seq, id)
  if ARGV[at + 4] ~= '' then redis.call('HSETNX', KEYS[base + 1], id, ARGV[at + 4]) end
  redis.call('HSET', KEYS[base + 3], ARGV[at + 5], ARGV[1])
end
return 1
`);

/** Bumps the holder's version only when this call is the grant's first revocation. */
const REVOKE = script(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
return 1
`);

/** Reads the grants listed in an order zset with their revocations, as one consistent step. */
const LIST = script(`
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
  out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
end
return out
`);

export class RedisGrantStore implements GrantStore {
  readonly #connection: Connection;
  /** The act ledger over the same connection checks these versions in its script. */
  readonly versionSpace: object;

  constructor(connection: Connection) {
    this.#connection = connection;
    this.versionSpace = connection.versionSpace;
  }

  async add(input: GrantInput): Promise<Grant> {
    const grant = parseGrantInput(input);
    await this.#add([grant]);
    return grant;
  }

  async addMany(inputs: readonly GrantInput[]): Promise<readonly Grant[]> {
    if (!Array.isArray(inputs)) throw new TesseraError("invalid_input", "addMany takes an array");
    const grants = inputs.map((input) => parseGrantInput(input));
    if (grants.length > 0) await this.#add(grants);
    return grants;
  }

  async revoke(namespaceId: string, grantId: string, at: Date = new Date()): Promise<boolean> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkRevocationInstant(at);
    const ns = storageDigest(namespaceId);
    const id = storageDigest(grantId);
    // The holder is read first: a grant's JSON is never rewritten, so its subject cannot
    // change between this read and the script, which checks the grant is still there.
    const body = await this.#connection.run("grant_store_unavailable", (redis) =>
      redis.hget(this.#key("grants", ns), id),
    );
    if (body === null) return false;
    const subject = (JSON.parse(body) as { subject?: unknown }).subject;
    if (typeof subject !== "string") {
      throw new TesseraError("grant_store_unavailable", "a stored grant names no subject");
    }
    const revoked = await this.#connection.eval(
      "grant_store_unavailable",
      REVOKE,
      [this.#key("grants", ns), this.#key("grants-revoked", ns), this.#key("grants-versions", ns)],
      [id, at.toISOString(), storageDigest(subject), randomUUID()],
    );
    return revoked === 1;
  }

  async grantsVersion(namespaceId: string, subject: string): Promise<string> {
    checkId(namespaceId, "namespaceId");
    checkId(subject, "subject");
    const version = await this.#connection.run("grant_store_unavailable", (redis) =>
      redis.hget(this.#key("grants-versions", storageDigest(namespaceId)), storageDigest(subject)),
    );
    return version ?? "0";
  }

  async #add(grants: readonly Grant[]): Promise<void> {
    const keys = [this.#key("grants-seq")];
    const namespaces = new Map<string, number>();
    const holders = new Map<string, number>();
    const args: (string | number)[] = [randomUUID(), grants.length];
    const holderOf: number[] = [];
    for (const { revokedAt, ...grant } of grants) {
      const ns = storageDigest(grant.namespaceId);
      const subject = storageDigest(grant.subject);
      let nsSlot = namespaces.get(ns);
      if (nsSlot === undefined) {
        nsSlot = namespaces.size + 1;
        namespaces.set(ns, nsSlot);
      }
      const holder = `${ns}:${subject}`;
      let holderSlot = holders.get(holder);
      if (holderSlot === undefined) {
        holderSlot = holders.size;
        holders.set(holder, holderSlot);
      }
      holderOf.push(holderSlot);
      args.push(
        nsSlot,
        0,
        storageDigest(grant.id),
        JSON.stringify(grant),
        revokedAt ?? "",
        subject,
      );
    }
    for (const ns of namespaces.keys()) {
      keys.push(
        this.#key("grants", ns),
        this.#key("grants-revoked", ns),
        this.#key("grants-order", ns),
        this.#key("grants-versions", ns),
      );
    }
    const firstHolderKey = keys.length + 1;
    for (const holder of holders.keys()) {
      const [ns, subject] = holder.split(":") as [string, string];
      keys.push(this.#key("grants-subject", ns, subject));
    }
    // Each grant's holder slot, now that the namespace keys' count is known.
    holderOf.forEach((slot, i) => {
      args[2 + i * 6 + 1] = firstHolderKey + slot;
    });
    const added = await this.#connection.eval("grant_store_unavailable", ADD, keys, args);
    if (added !== 1) {
      throw new TesseraError(
        "invalid_grant",
        "a grant with this id already exists in the namespace",
      );
    }
  }

  async listGrants(namespaceId: string, subject: string): Promise<readonly unknown[]> {
    checkId(namespaceId, "namespaceId");
    checkId(subject, "subject");
    const ns = storageDigest(namespaceId);
    return this.#list(this.#key("grants-subject", ns, storageDigest(subject)), ns);
  }

  async listNamespace(namespaceId: string): Promise<readonly Grant[]> {
    checkId(namespaceId, "namespaceId");
    const ns = storageDigest(namespaceId);
    return this.#list(this.#key("grants-order", ns), ns);
  }

  async #list(order: string, ns: string): Promise<Grant[]> {
    const reply = await this.#connection.eval(
      "grant_store_unavailable",
      LIST,
      [order, this.#key("grants", ns), this.#key("grants-revoked", ns)],
      [],
    );
    if (!Array.isArray(reply)) {
      throw new TesseraError("grant_store_unavailable", "unexpected reply to the grant listing");
    }
    const grants: Grant[] = [];
    for (let i = 0; i + 1 < reply.length; i += 2) {
      const body = reply[i] as string;
      const revokedAt = reply[i + 1] as string;
      if (body === "") continue;
      const grant = JSON.parse(body) as Grant;
      grants.push(revokedAt === "" ? grant : { ...grant, revokedAt });
    }
    return grants;
  }

  #key(...parts: string[]): string {
    return this.#connection.key(...parts);
  }
}
