import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores, type StoreBundle } from "@tessera/core";
import { listen, type RunningServer, tokenDigest } from "@tessera/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTesseraClient, TesseraClientError } from "../src/index.js";

const ISSUER = "issuer-token-for-derive-tests";
const toCarol = [
  {
    resource: { namespace: "messages", path: ["carol"], owner: "alice" },
    actions: ["messages.send"],
    scope: "exact" as const,
  },
];

let stores: StoreBundle;
let server: RunningServer;

beforeAll(async () => {
  stores = await openStores(
    `sqlite:${join(mkdtempSync(join(tmpdir(), "tessera-client-")), "t.db")}`,
  );
  server = await listen({
    stores,
    principals: [
      {
        tokenSha256: tokenDigest(ISSUER),
        role: "issuer",
        actor: "issuer",
        namespaceId: "team",
        authority: "host",
      },
    ],
    port: 0,
    log: false,
  });
});

afterAll(async () => {
  await server?.close();
  await stores?.close();
});

describe("client.deriveGrant against the real service", () => {
  it("derives a narrower grant; a widened axis is an error carrying its code", async () => {
    const issuer = createTesseraClient({ url: server.url, token: ISSUER });
    await issuer.issueGrant({
      id: "g-carol",
      subject: "asker",
      capabilities: toCarol,
      constraints: { maxUses: 2 },
    });
    const derive = { parentId: "g-carol", subject: "helper", capabilities: toCarol };
    const { grant } = await issuer.deriveGrant({
      ...derive,
      id: "g-carol-1",
      constraints: { maxUses: 1 },
    });
    expect(grant).toMatchObject({
      id: "g-carol-1",
      parentId: "g-carol",
      issuer: "asker",
      depth: 1,
    });
    const widened = await issuer.deriveGrant({ ...derive, constraints: { maxUses: 3 } }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(widened).toBeInstanceOf(TesseraClientError);
    expect(widened).toMatchObject({ code: "delegation_wider_uses", status: 400 });
  });
});
