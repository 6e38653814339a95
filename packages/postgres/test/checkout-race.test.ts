/**
 * The server's FATAL right behind a new connection's ReadyForQuery, in one read: what a
 * PostgreSQL killed while the pool connected sends ("terminating connection due to unexpected
 * postmaster exit"). The pg driver parses both messages in one go, so the connection's 'error'
 * comes before any code waiting on the connect can add a listener; unheard, it ended the
 * process (found by kill -9 of PostgreSQL under `tessera serve`, CI). A fake server says
 * exactly that, every time: the transaction must fail as unavailable, with nothing uncaught.
 */
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parsePostgresUrl } from "../src/config.js";
import { Database } from "../src/database.js";
import { codeOf } from "./support/pg-test-stores.js";

/** One protocol message: its type byte, its length, its body. */
function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, "latin1");
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const AUTHENTICATION_OK = message("R", Buffer.from([0, 0, 0, 0]));
const READY_FOR_QUERY = message("Z", Buffer.from("I", "latin1"));
const FATAL = message(
  "E",
  Buffer.from(
    "SFATAL\0VFATAL\0C57P01\0Mterminating connection due to unexpected postmaster exit\0\0",
    "latin1",
  ),
);

describe("a connection whose server dies as it is handed out", () => {
  let server: Server;
  let port = 0;
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => {});
      // The startup message is the first thing a client sends: answer it all in one write.
      socket.once("data", () => {
        socket.end(Buffer.concat([AUTHENTICATION_OK, READY_FOR_QUERY, FATAL]));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it("fails the transaction as unavailable, 20 times, and nothing is left uncaught", async () => {
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", record);
    const db = new Database(
      parsePostgresUrl(`postgres://tessera@127.0.0.1:${port}/test?connectTimeoutMs=2000`),
    );
    try {
      for (let round = 0; round < 20; round++) {
        const failed = await db
          .transaction("audit_unavailable", async (client) => {
            await client.query("SELECT 1");
          })
          .then(
            () => undefined,
            (error: unknown) => error,
          );
        expect(codeOf(failed)).toBe("audit_unavailable");
      }
      // Give a late 'error' the chance to surface before judging.
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      process.off("uncaughtException", record);
      await db.close();
    }
    expect(uncaught).toEqual([]);
  });
});
