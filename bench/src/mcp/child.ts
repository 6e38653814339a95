import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { openStores, type StoreBundle } from "@tessera/core";
import { gatewayOver, memoryPorts } from "./gateway-setup.js";
import { startProxy } from "./proxy.js";
import { startUpstream } from "./upstream.js";

/**
 * The bench's servers in processes of their own, as they run in reality: the upstream MCP
 * server, and the gateway in front of it. Run as a script, this file is one of them; it says
 * its URL to its parent over IPC and serves until told to stop.
 */

export interface Child {
  readonly url: string;
  close(): Promise<void>;
}

const SELF = fileURLToPath(import.meta.url);

type Role =
  | { readonly role: "upstream" }
  | { readonly role: "proxy"; readonly upstream: string }
  | { readonly role: "gateway"; readonly upstream: string; readonly stores?: string };

/** Starts one server process and resolves with its URL. */
export function startChild(role: Role): Promise<Child> {
  const child: ChildProcess = fork(SELF, [JSON.stringify(role)], {
    execArgv: [],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise<Child>((resolve, reject) => {
    const exited = (code: number | null) =>
      reject(new Error(`the bench ${role.role} process exited (${code}) before serving`));
    child.once("exit", exited);
    child.once("message", (message: { url?: string; error?: string }) => {
      child.off("exit", exited);
      if (message.url === undefined) {
        reject(new Error(`the bench ${role.role} process failed: ${message.error}`));
        return;
      }
      resolve({
        url: message.url,
        close: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once("exit", () => done());
            child.send("stop");
          }),
      });
    });
  });
}

async function serve(role: Role): Promise<void> {
  let stop: () => Promise<void>;
  let url: string;
  if (role.role === "upstream") {
    const upstream = await startUpstream();
    url = upstream.url;
    stop = upstream.close;
  } else if (role.role === "proxy") {
    const proxy = await startProxy(role.upstream);
    url = proxy.url;
    stop = proxy.close;
  } else {
    let stores: StoreBundle | undefined;
    if (role.stores !== undefined) stores = await openStores(role.stores);
    const gateway = await gatewayOver(role.upstream, stores ?? memoryPorts());
    url = gateway.url;
    stop = async () => {
      await gateway.close();
      await stores?.close();
    };
  }
  process.on("message", (message) => {
    if (message === "stop") void stop().finally(() => process.exit(0));
  });
  // A bench that dies leaves no server behind.
  process.on("disconnect", () => process.exit(0));
  process.send?.({ url });
}

if (process.argv[1] === SELF && process.send !== undefined) {
  const role = JSON.parse(process.argv[2] as string) as Role;
  serve(role).catch((error: unknown) => {
    process.send?.({ error: (error as Error).message }, () => process.exit(1));
  });
}
