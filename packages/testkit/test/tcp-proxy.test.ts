/**
 * The TCP proxy the PostgreSQL and Redis outage cases cut: it forwards, `interrupt()` drops
 * the open connections and refuses new ones, `restore()` forwards again. Against a local
 * echo server, so it runs without any database.
 */
import net from "node:net";
import { startTcpProxy } from "@tessera/testkit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

let echo: net.Server;
let echoPort: number;

beforeEach(async () => {
  echo = net.createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  echoPort = (echo.address() as net.AddressInfo).port;
});

afterEach(async () => {
  await new Promise((resolve) => echo.close(resolve));
});

/** Connects, sends `text`, and says what came back before the connection ended or 2 s passed. */
function roundTrip(port: number, text: string): Promise<{ echoed: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let echoed = "";
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ echoed, closed });
    };
    const timer = setTimeout(() => finish(false), 2_000);
    socket.on("data", (chunk) => {
      echoed += chunk.toString();
      if (echoed === text) finish(false);
    });
    socket.on("error", () => finish(true));
    socket.on("close", () => finish(true));
    socket.write(text);
  });
}

describe("startTcpProxy", () => {
  it("forwards, cuts open connections and refuses new ones while interrupted, then restores", async () => {
    const proxy = await startTcpProxy("127.0.0.1", echoPort);
    try {
      expect(proxy.address).toBe(`127.0.0.1:${proxy.port}`);
      expect(await roundTrip(proxy.port, "before")).toEqual({ echoed: "before", closed: false });

      const open = net.connect(proxy.port, "127.0.0.1");
      await new Promise((resolve) => open.once("connect", resolve));
      open.write("hello");
      await new Promise((resolve) => open.once("data", resolve));
      const cut = new Promise((resolve) => open.once("close", resolve));
      proxy.interrupt();
      await cut; // the open connection is dropped, not left hanging

      expect(await roundTrip(proxy.port, "during")).toEqual({ echoed: "", closed: true });

      proxy.restore();
      expect(await roundTrip(proxy.port, "after")).toEqual({ echoed: "after", closed: false });
    } finally {
      await proxy.close();
    }
  });
});
