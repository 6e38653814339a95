import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { octalMode, readPrivateFile } from "./private-file.js";

describe("readPrivateFile", () => {
  const dir = mkdtempSync(join(tmpdir(), "tessera-private-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads a file only its owner may read", () => {
    const path = join(dir, "ok");
    writeFileSync(path, "secret\n", { mode: 0o600 });
    expect(readPrivateFile(path)).toEqual({ status: "read", text: "secret\n" });
  });

  it.each([0o644, 0o640, 0o604, 0o660])("refuses mode %o without reading it", (mode) => {
    const path = join(dir, `open-${mode.toString(8)}`);
    writeFileSync(path, "secret");
    chmodSync(path, mode);
    const read = readPrivateFile(path);
    expect(read).toEqual({ status: "open_to_others", mode });
    expect(JSON.stringify(read)).not.toContain("secret");
    expect(octalMode(mode)).toBe(`0${mode.toString(8)}`);
  });

  it("tells a missing file from one that cannot be read", () => {
    expect(readPrivateFile(join(dir, "nope")).status).toBe("missing");
    expect(readPrivateFile(join(dir, "ok", "below")).status).toBe("missing");
    const read = readPrivateFile(dir);
    // A directory opens on Linux but cannot be read as a file.
    expect(read.status).toBe("unreadable");
    if (read.status === "unreadable") expect(read.code).toBe("EISDIR");
  });
});
