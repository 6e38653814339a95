import { Cluster, Redis } from "ioredis";
import type { RedisConfig } from "./config.js";

/** A server or a cluster: the stores send the same commands through either. */
export type Client = Redis | Cluster;

/**
 * The driver a `Connection` sends through, for one server or, with `cluster=true`, a cluster,
 * set up as `Connection` says: to fail rather than wait. Not connected yet (`lazyConnect`):
 * the connection connects it, and explains a refusal.
 */
export function createClient(config: RedisConfig, readOnly: boolean): Client {
  const options = {
    lazyConnect: true,
    enableReadyCheck: !readOnly,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: config.commandTimeoutMs,
    connectTimeout: config.connectTimeoutMs,
    connectionName: config.connectionName,
    retryStrategy: (attempt: number) => Math.min(50 * attempt, 1_000),
  };
  return config.cluster
    ? new Cluster([config.url], {
        lazyConnect: true,
        enableOfflineQueue: false,
        // A MOVED or ASK reply means the node did not run the command, so following it is
        // safe; a command whose socket dropped is not re-sent (maxRetriesPerRequest 0 on
        // the nodes), as on one server.
        maxRedirections: 16,
        // Asking a node for the slot map is part of connecting: the connect timeout, not
        // ioredis's 1 s (a loaded machine misses that and the open fails).
        slotsRefreshTimeout: config.connectTimeoutMs,
        clusterRetryStrategy: (attempt: number) => Math.min(50 * attempt, 1_000),
        // The nodes keep the cluster's own settings for queueing and reconnecting (a node's
        // queue holds a command only until its socket is ready: the cluster asks the first
        // node for its slots that way); a command already sent when a socket drops still
        // fails (maxRetriesPerRequest 0), and the cluster reconnects.
        enableReadyCheck: !readOnly,
        redisOptions: {
          enableReadyCheck: !readOnly,
          maxRetriesPerRequest: 0,
          commandTimeout: config.commandTimeoutMs,
          connectTimeout: config.connectTimeoutMs,
          connectionName: config.connectionName,
          ...credentialsOf(config.url),
        },
      })
    : new Redis(config.url, options);
}

/** The user and password of a `redis://` URL, for each node of a cluster. */
function credentialsOf(url: string): { username?: string; password?: string; tls?: object } {
  const parsed = new URL(url);
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === "rediss:" ? { tls: {} } : {}),
  };
}
