import net from "node:net";

/**
 * A TCP forwarder between a store and its server, owned by one test: `interrupt()` cuts every
 * connection through it and refuses new ones until `restore()`. It makes a real network
 * outage for this test's connections only, without stopping the server that other test runs
 * (and other engineers) share: the outage hook of the PostgreSQL and Redis conformance runs.
 */
export interface TcpProxy {
  /** `host:port` the store should connect to instead of the server. */
  readonly address: string;
  readonly port: number;
  interrupt(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let down = false;
  const server = net.createServer((client) => {
    if (down) {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    port,
    interrupt() {
      down = true;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    restore() {
      down = false;
    },
    close() {
      down = true;
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
