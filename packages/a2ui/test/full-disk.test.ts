import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

const CHILD = new URL("./fixtures/full-disk-child.ts", import.meta.url).pathname;

/** A real full disk needs a tmpfs in a private mount namespace: root and `unshare -m`. */
function canMountTmpfs(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = spawnSync("unshare", ["-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"]);
  return probe.status === 0;
}

describe.runIf(canMountTmpfs())("a full disk under the directory store (real tmpfs)", () => {
  it("the gate answers claim_store_unavailable, leaves no marker, and the ID stays usable", () => {
    const mount = mkdtempSync(path.join(tmpdir(), "tessera-full-disk-"));
    try {
      const script = `mount -t tmpfs -o size=64k,mode=0700 tmpfs "$1" && exec "$2" --import tsx "$3" "$1"`;
      const out = execFileSync(
        "unshare",
        ["-m", "sh", "-c", script, "sh", mount, process.execPath, CHILD],
        { encoding: "utf8", timeout: 30_000 },
      );
      expect(JSON.parse(out.trim().split("\n").at(-1) as string)).toEqual({
        full: true,
        onFullDisk: expect.objectContaining({
          status: "denied",
          reason: "claim_store_unavailable",
        }),
        markersWhileFull: [],
        afterSpace: expect.objectContaining({ status: "dispatched" }),
        runs: 1,
      });
    } finally {
      rmSync(mount, { recursive: true, force: true });
    }
  });
});
