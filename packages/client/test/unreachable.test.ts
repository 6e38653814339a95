import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { createTesseraClient, type TesseraClientError } from "../src/index.js";

/** A port that was free a moment ago: nothing listens there now. */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

async function failure(url: string): Promise<TesseraClientError> {
  const client = createTesseraClient({ url, token: "t", retry: { attempts: 1 } });
  return client.tools().then(
    () => {
      throw new Error("answered");
    },
    (error: TesseraClientError) => error,
  );
}

describe("service_unreachable says where and why", () => {
  it("names the URL and the refusal, with its system code", async () => {
    const port = await closedPort();
    const error = await failure(`http://127.0.0.1:${port}`);
    expect(error.code).toBe("service_unreachable");
    expect(error.message).toBe(
      `GET http://127.0.0.1:${port}/v1/tools: connection refused (ECONNREFUSED)`,
    );
  });

  it("gives fetch's cause, never a bare 'fetch failed' (a port fetch refuses to use)", async () => {
    const error = await failure("http://127.0.0.1:1");
    expect(error.code).toBe("service_unreachable");
    expect(error.message).toBe("GET http://127.0.0.1:1/v1/tools: bad port");
    expect(error.message).not.toContain("fetch failed");
  });
});
