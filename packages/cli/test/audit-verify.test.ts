import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type AuditEvent, JsonlAuditSink } from "@tessera/core";
import { EMPTY_HEAD, linkAuditEvent } from "@tessera/core/store-kit";
import { describe, expect, it } from "vitest";
import { expectRefusal, scratch, tessera } from "./support/cli.js";

/**
 * `tessera audit verify` on a real JSON-lines log, tampered with as someone with write access
 * to the file would: each of the four breaks is reported by kind and position, exit 3.
 */

const event = (i: number, namespaceId?: string): AuditEvent => ({
  at: "2026-11-30T00:00:00.000Z",
  source: namespaceId === undefined ? "gate" : "kernel",
  outcome: "allowed",
  code: null,
  reason: "allowed",
  traceId: "t",
  callId: `c${i}`,
  ...(namespaceId === undefined ? {} : { namespaceId }),
});

/** A log of 7 events: lines 0, 3, 6 in the gate's stream, the rest in "team" (seq 1..4). */
function log(): { dir: string; file: string; lines: string[] } {
  const dir = scratch();
  const file = join(dir, "audit.jsonl");
  const sink = JsonlAuditSink.open(file);
  for (let i = 0; i < 7; i++) sink.append(event(i, i % 3 === 0 ? undefined : "team"));
  sink.close();
  return { dir, file, lines: readFileSync(file, "utf8").trimEnd().split("\n") };
}

const write = (file: string, lines: readonly string[]) =>
  writeFileSync(file, `${lines.join("\n")}\n`);

const verify = (file: string, ...extra: string[]) =>
  tessera("audit", "verify", "--file", file, ...extra);

describe("tessera audit verify", () => {
  it("counts one event in one stream in the singular", () => {
    const file = join(scratch(), "one.jsonl");
    const sink = JsonlAuditSink.open(file);
    sink.append(event(0, "team"));
    sink.close();
    const run = verify(file);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("intact: 1 event in 1 stream\n");
  });

  it("exits 0 on an intact log, naming each stream and how far it verified", () => {
    const { file } = log();
    const run = verify(file);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("intact: 7 events in 2 streams");
    expect(run.stdout).toContain('stream "team": 4 events, verified to seq 4');
    expect(run.stdout).toContain("stream (gate): 3 events, verified to seq 3");
  });

  it.each([
    [
      "edited",
      (lines: string[]) => lines.map((l, i) => (i === 2 ? l.replace('"allowed"', '"denied"') : l)),
      'broken: edited event in stream "team" at index 2 (seq 2, expected seq 2)',
    ],
    [
      "deleted",
      (lines: string[]) => lines.filter((_, i) => i !== 2),
      'broken: deleted event in stream "team" at index 3 (seq 3, expected seq 2)',
    ],
    [
      "inserted",
      (lines: string[]) => [
        ...lines.slice(0, 2),
        JSON.stringify(event(9, "team")),
        ...lines.slice(2),
      ],
      'broken: inserted event in stream "team" at index 2 (no seq, expected seq 2)',
    ],
    [
      "inserted (a copy)",
      (lines: string[]) => [...lines.slice(0, 5), lines[1] as string, ...lines.slice(5)],
      'broken: inserted event in stream "team" at index 5 (seq 1, expected seq 4)',
    ],
    [
      "reordered",
      (lines: string[]) => [lines[0], lines[2], lines[1], ...lines.slice(3)] as string[],
      'broken: reordered event in stream "team" at index 1 (seq 2, expected seq 1)',
    ],
  ])("reports a log %s by hand, exit 3", (_kind, tamper, report) => {
    const { file, lines } = log();
    write(file, tamper(lines));
    const run = verify(file);
    expect(run.code).toBe(3);
    expect(run.stdout.split("\n")[0]).toContain(report);
  });

  it("prints the report as JSON with --json, still exit 3", () => {
    const { file, lines } = log();
    write(file, [lines[0], lines[2], lines[1], ...lines.slice(3)] as string[]);
    const json = verify(file, "--json");
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stdout)).toMatchObject({
      ok: false,
      intact: false,
      events: 7,
      break: { kind: "reordered", stream: "team", index: 1, seq: 2, expectedSeq: 1 },
    });
  });

  it("refuses, exit 2, a log it cannot read or half a checkpoint request", () => {
    const { dir, file } = log();
    const missing = verify(join(dir, "missing.jsonl"));
    expectRefusal(missing, "file_not_found");
    expect(missing.stderr).toContain(join(dir, "missing.jsonl"));
    expectRefusal(verify(file, "--checkpoint", join(dir, "cp.json")), "invalid_usage");
  });
});

describe("tessera audit checkpoint and keygen", () => {
  function signed() {
    const { dir, file, lines } = log();
    const keys = join(dir, "keys");
    expect(tessera("audit", "keygen", "--out", keys).code).toBe(0);
    const checkpoints = join(dir, "checkpoints.json");
    const sign = (out: string) =>
      tessera(
        "audit",
        "checkpoint",
        "--file",
        file,
        "--private-key",
        join(keys, "audit-signing.key"),
        "--out",
        out,
      );
    const run = sign(checkpoints);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("signed 2 stream heads");
    const check = (publicKey = join(keys, "audit-signing.pub")) =>
      verify(file, "--checkpoint", checkpoints, "--public-key", publicKey);
    return { dir, file, lines, keys, check, sign, checkpoints };
  }

  it("keygen writes a private key only its owner reads, and never over an existing one", () => {
    const { dir } = log();
    const keys = join(dir, "keys");
    expect(tessera("audit", "keygen", "--out", keys).code).toBe(0);
    expect(statSync(join(keys, "audit-signing.key")).mode & 0o777).toBe(0o600);
    const before = readFileSync(join(keys, "audit-signing.key"), "utf8");
    expectRefusal(tessera("audit", "keygen", "--out", keys), "invalid_usage");
    expect(readFileSync(join(keys, "audit-signing.key"), "utf8")).toBe(before);
  });

  it("checkpoint --out never replaces a file; a path that cannot take it is invalid_usage", () => {
    const { dir, sign, checkpoints } = signed();
    const before = readFileSync(checkpoints, "utf8");
    // The signed proof of yesterday's trail is not overwritten by today's run.
    expectRefusal(sign(checkpoints), "invalid_usage");
    expect(readFileSync(checkpoints, "utf8")).toBe(before);
    for (const out of [join(dir, "no-such-dir", "c.json"), dir]) {
      expectRefusal(sign(out), "invalid_usage");
    }
  });

  it("keygen --out naming a file is invalid_usage, not a crash", () => {
    const { file } = log();
    expectRefusal(tessera("audit", "keygen", "--out", file), "invalid_usage");
  });

  it("a checkpoint holds on the log it signed, and on that log grown since", () => {
    const { file, check } = signed();
    const sink = JsonlAuditSink.open(file);
    sink.append(event(10, "team"));
    sink.close();
    const run = check();
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('checkpoint of stream "team" at seq 4: holds');
    expect(run.stdout).toContain("checkpoint of stream (gate) at seq 3: holds");
  });

  it("catches what the chain alone cannot: a cut tail and a rewrite with every hash recomputed", () => {
    const { file, lines, check } = signed();
    write(
      file,
      lines.filter((_, i) => i !== 5),
    ); // "team"'s last event is gone; the chain still links
    expect(verify(file).code).toBe(0);
    const cut = check();
    expect(cut.code).toBe(3);
    expect(cut.stdout).toContain('checkpoint of stream "team" at seq 4: FAILS (truncated)');
    // The first line is the verdict, and a failing checkpoint makes it "not intact".
    expect(cut.stdout).toMatch(
      /^not intact: the chains hold \(\d+ events in 2 streams\), but 1 checkpoint fails/,
    );

    // Every "team" event rewritten (one denied now) and relinked from genesis.
    let head = EMPTY_HEAD;
    const rewritten = lines.map((line) => {
      const parsed = JSON.parse(line) as AuditEvent;
      if (parsed.namespaceId !== "team") return line;
      const linked = linkAuditEvent({ ...parsed, outcome: "denied" }, head);
      head = { seq: linked.seq, hash: linked.hash };
      return JSON.stringify(linked);
    });
    write(file, rewritten);
    expect(verify(file).code).toBe(0);
    const forged = check();
    expect(forged.code).toBe(3);
    expect(forged.stdout).toContain('checkpoint of stream "team" at seq 4: FAILS (mismatch)');
  });

  it("refuses, exit 2, a checkpoint file that is missing or holds no checkpoint", () => {
    const { dir, file, check } = signed();
    const keys = join(dir, "keys", "audit-signing.pub");
    const missing = join(dir, "nope.json");
    const absent = verify(file, "--checkpoint", missing, "--public-key", keys);
    expectRefusal(absent, "file_not_found");
    expect(absent.stderr).toContain(missing);
    const notOne = join(dir, "object.json");
    writeFileSync(notOne, "{}");
    const empty = verify(file, "--checkpoint", notOne, "--public-key", keys);
    expectRefusal(empty, "invalid_input");
    expect(empty.stderr).toContain("holds no checkpoint");
    expect(check().code).toBe(0);
  });

  it("fails under another key, and refuses to sign a broken trail", () => {
    const { dir, file, lines, check } = signed();
    const other = join(dir, "other");
    expect(tessera("audit", "keygen", "--out", other).code).toBe(0);
    const wrongKey = check(join(other, "audit-signing.pub"));
    expect(wrongKey.code).toBe(3);
    expect(wrongKey.stdout).toContain("FAILS (signature)");

    write(
      file,
      lines.filter((_, i) => i !== 1),
    );
    const refused = tessera(
      "audit",
      "checkpoint",
      "--file",
      file,
      "--private-key",
      join(other, "audit-signing.key"),
    );
    expect(refused.code).toBe(3);
    expect(refused.stdout).toContain('not signed: deleted event in stream "team"');
  });

  // Before: `--json` printed the text line "not signed: …" on stdout, which a script that
  // asked for JSON could not parse (and `> checkpoints.json` kept as the checkpoint file).
  it("with --json, refuses to sign a broken trail in JSON: signed false and the break", () => {
    const { dir, file, lines } = signed();
    write(
      file,
      lines.filter((_, i) => i !== 1),
    );
    const key = join(dir, "keys", "audit-signing.key");
    for (const out of [[], ["--out", join(dir, "unsigned.json")]]) {
      const refused = tessera(
        "audit",
        "checkpoint",
        "--file",
        file,
        "--private-key",
        key,
        ...out,
        "--json",
      );
      expect(refused.code).toBe(3);
      expect(refused.stderr).toBe("");
      const report = JSON.parse(refused.stdout) as {
        signed: boolean;
        break: { kind: string; stream: string };
      };
      expect(report.signed).toBe(false);
      expect(report.break).toMatchObject({ kind: "deleted", stream: "team" });
    }
    expect(existsSync(join(dir, "unsigned.json"))).toBe(false);
  });
});
