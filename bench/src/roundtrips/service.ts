import { randomBytes } from "node:crypto";
import {
  a2uiFunctionCapability,
  InProcessTransport,
  messageSendCapability,
  openStores,
} from "@tessera/core";
import { buildApp, type Principal } from "@tessera/server";
import type { DriverCounter } from "@tessera/testkit/round-trips";
import { CATALOG, CATALOG_ID } from "../a2ui/fixtures.js";
import { PRINCIPAL, TOKEN } from "../service/service.js";

const AGENT = { ...PRINCIPAL, role: "agent" } as Principal;
const HEADERS = { authorization: `Bearer ${TOKEN}` };

/** The writes counted before each reply of one kind of act, over `acts` of them. */
export interface Counted {
  readonly acts: number;
  readonly writes: number;
  /** Every statement, script or commit the driver saw before the replies, reads included. */
  readonly total: number;
  /** What a request answered, for the row to check it measured the act it names. */
  readonly answers: readonly string[];
}

/** What the service's acts are counted as: each kind, `acts` times. */
export interface ServiceCounts {
  readonly allowed: Counted;
  readonly denied: Counted;
  readonly deniedWithoutCallId: Counted;
  /** `POST /v1/a2ui/claim`, allowed (the act); its settle is counted apart. */
  readonly a2uiClaim: Counted;
  readonly a2uiSettle: Counted;
}

interface Reading {
  writes: number;
  total: number;
}

/**
 * The service over `url`, counted by `counter` (installed before the stores open, as a Redis
 * connection binds its driver's method when it is made): each request is sent alone, after
 * the writes of the ones before it landed, and the counter is read when its reply is handed
 * to the socket (Fastify's onSend).
 */
export async function countService(
  url: string,
  counter: DriverCounter,
  acts: number,
): Promise<ServiceCounts> {
  const stores = await openStores(url);
  const issuedAt = new Date(Date.now() - 60_000).toISOString();
  await stores.grants.add({
    id: `rt-ticket-${randomBytes(4).toString("hex")}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "asker",
    capabilities: [messageSendCapability("colleague", "alice")],
    constraints: { maxUses: 10 * acts },
    issuedAt,
  });
  await stores.grants.add({
    id: `rt-a2ui-${randomBytes(4).toString("hex")}`,
    namespaceId: "bench",
    issuer: "host",
    subject: "asker",
    capabilities: [a2uiFunctionCapability(CATALOG_ID, "add")],
    constraints: { maxUses: 10 * acts },
    issuedAt,
  });
  const app = buildApp({
    stores,
    principals: [AGENT],
    transport: InProcessTransport.echo(),
    a2ui: { catalogs: [CATALOG] },
    log: false,
  });
  const atReply = new Map<string, Reading>();
  app.addHook("onSend", async (request) => {
    atReply.set(request.id, { writes: counter.writes, total: counter.total });
  });
  await app.ready();
  const drain = () => (app as unknown as { drainWrites(): Promise<void> }).drainWrites();
  let sent = 0;
  /** One request alone, after the writes of the earlier ones landed: its answer and counts. */
  const one = async (path: string, body: unknown) => {
    const id = `rt-${sent++}`;
    // The principal's grant set read and cached first: a cold read on Redis is a script,
    // which a count at the driver cannot tell from a write.
    await app.inject({ method: "GET", url: "/v1/tools", headers: HEADERS });
    await drain();
    counter.reset();
    const reply = await app.inject({
      method: "POST",
      url: path,
      headers: { ...HEADERS, "x-request-id": id },
      payload: body as Record<string, unknown>,
    });
    const seen = atReply.get(id) ?? { writes: Number.NaN, total: Number.NaN };
    return { answer: reply.json() as Record<string, unknown>, ...seen };
  };
  const count = async (
    make: (i: number) => Promise<{ answer: Record<string, unknown> } & Reading>,
  ): Promise<Counted> => {
    let writes = 0;
    let total = 0;
    const answers: string[] = [];
    for (let i = 0; i < acts; i++) {
      const done = await make(i);
      writes += done.writes;
      total += done.total;
      answers.push(String(done.answer.status ?? done.answer.receipt ?? "?"));
    }
    return { acts, writes, total, answers };
  };
  const tag = randomBytes(4).toString("hex");
  const handles: string[] = [];
  try {
    return {
      allowed: await count((i) =>
        one("/v1/messages", { recipient: "colleague", payload: "hi", callId: `a-${tag}-${i}` }),
      ),
      denied: await count((i) =>
        one("/v1/messages", { recipient: "stranger", payload: "hi", callId: `d-${tag}-${i}` }),
      ),
      deniedWithoutCallId: await count(() =>
        one("/v1/messages", { recipient: "stranger", payload: "hi" }),
      ),
      a2uiClaim: await count(async (i) => {
        const claimed = await one("/v1/a2ui/claim", {
          message: {
            version: "v1.0",
            callRendererFunction: {
              functionCallId: `c-${tag}-${i}`,
              callFunction: { call: "add", catalogId: CATALOG_ID, args: { a: 1, b: 2 } },
            },
          },
        });
        handles.push(String(claimed.answer.handle));
        return { ...claimed, answer: { status: claimed.answer.handle ? "claimed" : "refused" } };
      }),
      a2uiSettle: await count((i) => one("/v1/a2ui/settle", { handle: handles[i], value: 3 })),
    };
  } finally {
    await app.close();
    await stores.close();
  }
}
