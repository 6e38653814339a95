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
 * Each write is one script, so a grant is never visible half-added.
 */
const ADD = script(`
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
local seq = redis.call('INCR', KEYS[5])
redis.call('ZADD', KEYS[3], seq, ARGV[1])
redis.call('ZADD', KEYS[4], seq, ARGV[1])
if ARGV[3] ~= '' then redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[3]) end
return 1
`);

const REVOKE = script(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
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

  constructor(connection: Connection) {
    this.#connection = connection;
  }

  async add(input: GrantInput): Promise<Grant> {
    const parsed = parseGrantInput(input);
    const { revokedAt, ...grant } = parsed;
    const ns = storageDigest(grant.namespaceId);
    const added = await this.#connection.eval(
      "grant_store_unavailable",
      ADD,
      [
        this.#key("grants", ns),
        this.#key("grants-revoked", ns),
        this.#key("grants-order", ns),
        this.#key("grants-subject", ns, storageDigest(grant.subject)),
        this.#key("grants-seq"),
      ],
      [storageDigest(grant.id), JSON.stringify(grant), revokedAt ?? ""],
    );
    if (added !== 1) {
      throw new TesseraError(
        "invalid_grant",
        "a grant with this id already exists in the namespace",
      );
    }
    return parsed;
  }

  async revoke(namespaceId: string, grantId: string, at: Date = new Date()): Promise<boolean> {
    checkId(namespaceId, "namespaceId");
    checkId(grantId, "grantId");
    checkRevocationInstant(at);
    const ns = storageDigest(namespaceId);
    const revoked = await this.#connection.eval(
      "grant_store_unavailable",
      REVOKE,
      [this.#key("grants", ns), this.#key("grants-revoked", ns)],
      [storageDigest(grantId), at.toISOString()],
    );
    return revoked === 1;
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
