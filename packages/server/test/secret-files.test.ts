import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isTesseraError } from "@tessera/core";
import { describe, expect, it } from "vitest";
import { loadA2uiOptions, loadWebhookTransport } from "../src/index.js";

/** The webhooks and A2UI files hold HMAC secrets: docs/service.md says mode 0600. */
function file(name: string, value: unknown, mode: number): string {
  const path = join(mkdtempSync(join(tmpdir(), "tessera-secret-files-")), name);
  writeFileSync(path, JSON.stringify(value));
  chmodSync(path, mode);
  return path;
}

const endpoint = { url: "http://127.0.0.1:9/", secret: "a-secret-of-sixteen-or-more" };
const webhooks = { recipients: { bob: endpoint } };
const a2ui = { catalogs: [{}], functionEndpoint: endpoint };

function refusal(load: () => unknown): unknown {
  try {
    load();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("files holding secrets", () => {
  it.each([0o644, 0o640, 0o604, 0o660])(
    "refuses a webhooks file of mode 0%o, naming it",
    (mode) => {
      const path = file("webhooks.json", webhooks, mode);
      const error = refusal(() => loadWebhookTransport(path));
      expect(isTesseraError(error, "invalid_config")).toBe(true);
      expect((error as Error).message).toContain(path);
      expect((error as Error).message).toContain(`mode 0${mode.toString(8)}`);
      expect((error as Error).message).toContain(`chmod 600 ${path}`);
    },
  );

  it("takes a webhooks file of mode 0600 or 0400", () => {
    for (const mode of [0o600, 0o400]) {
      expect(refusal(() => loadWebhookTransport(file("webhooks.json", webhooks, mode)))).toBe(
        undefined,
      );
    }
  });

  it("refuses an A2UI file others may read, and takes a private one", () => {
    const open = file("a2ui.json", a2ui, 0o644);
    expect(
      isTesseraError(
        refusal(() => loadA2uiOptions(open)),
        "invalid_config",
      ),
    ).toBe(true);
    expect(loadA2uiOptions(file("a2ui.json", a2ui, 0o600)).catalogs).toHaveLength(1);
  });

  it("still says file_not_found for a missing file", () => {
    const error = refusal(() => loadWebhookTransport("/nonexistent/webhooks.json"));
    expect(isTesseraError(error, "file_not_found")).toBe(true);
  });
});
