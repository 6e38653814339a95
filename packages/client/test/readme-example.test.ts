import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { createTesseraClient, isTesseraClientError } from "../src/index.js";
import { json, stubService } from "./stub.js";

const README = readFileSync(new URL("../README.md", import.meta.url), "utf8");

/**
 * The README's first example, run as written (its import line aside, given the client from
 * src) with `process.env` and `console` of the test's own. Before, it made the client outside
 * its `try`: with TESSERA_TOKEN unset, `createTesseraClient` threw `invalid_config` past the
 * `catch` that shows how errors are handled.
 */
const EXAMPLE = /```ts\n([\s\S]*?)```/.exec(README)?.[1] ?? "";

type Example = (
  create: typeof createTesseraClient,
  isError: typeof isTesseraClientError,
  process: { env: Record<string, string | undefined> },
  console: { log: (...args: unknown[]) => void; error: (...args: unknown[]) => void },
) => Promise<void>;

async function runExample(
  env: Record<string, string | undefined>,
  url?: string,
): Promise<{ log: unknown[][]; error: unknown[][] }> {
  const imports =
    /^import \{ createTesseraClient, isTesseraClientError \} from "@tessera\/client";\n/;
  expect(EXAMPLE).toMatch(imports);
  let body = EXAMPLE.replace(imports, "");
  if (url !== undefined) body = body.replaceAll("http://127.0.0.1:8787", url);
  const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (
    ...args: string[]
  ) => Example;
  const example = new AsyncFunction(
    "createTesseraClient",
    "isTesseraClientError",
    "process",
    "console",
    body,
  );
  const printed = { log: [] as unknown[][], error: [] as unknown[][] };
  await example(
    createTesseraClient,
    isTesseraClientError,
    { env },
    {
      log: (...args) => printed.log.push(args),
      error: (...args) => printed.error.push(args),
    },
  );
  return printed;
}

let stub: Awaited<ReturnType<typeof stubService>> | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

describe("the client README's example", () => {
  it("catches invalid_config when TESSERA_TOKEN is unset, as its catch shows", async () => {
    const printed = await runExample({});
    expect(printed.log).toEqual([]);
    expect(printed.error).toHaveLength(1);
    expect(printed.error[0]?.slice(0, 2)).toEqual(["invalid_config", undefined]);
  });

  it("prints a delivery, and a refusal as an answer", async () => {
    const delivered = {
      status: "delivered",
      messageId: "m-1",
      grantId: "g-1",
      callId: "ask-bob-1",
      reply: { ok: true },
    };
    stub = await stubService([
      json(200, delivered),
      json(200, { status: "denied", code: "tool_unavailable" }),
    ]);
    const token = { TESSERA_TOKEN: "tsk_example" };
    expect(await runExample(token, stub.url)).toEqual({ log: [["m-1", { ok: true }]], error: [] });
    expect(await runExample(token, stub.url)).toEqual({
      log: [["refused:", "tool_unavailable"]],
      error: [],
    });
    expect(stub.seen.map((r) => r.authorization)).toEqual([
      "Bearer tsk_example",
      "Bearer tsk_example",
    ]);
  });
});
