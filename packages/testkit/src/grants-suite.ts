import { type GrantInput, GrantSchema, type GrantStore } from "@tessera/core";
import { describe, expect } from "vitest";
import { expectCode, resultOrCode } from "./errors.js";
import { type OpenedStore, type StoreFactory, suiteCases } from "./factory.js";
import { grantInput, parsed } from "./grants-fixtures.js";
import { describeGrantVersionCases } from "./grants-versions.js";
import { HOSTILE_KEYS } from "./hostile.js";
import { raceInProcesses } from "./processes.js";

export { grantInput } from "./grants-fixtures.js";
export { checkVersionedReads } from "./grants-versions.js";

const INVALID = ["invalid_grant", "invalid_input"];

/**
 * The `GrantStore` contract: add validates and returns the stored grant; listGrants filters by
 * namespace and subject and returns material that parses; revoke marks (and only when the
 * grant exists in that namespace); hostile IDs round-trip; concurrent and cross-process adds
 * are all kept; an outage fails closed.
 */
export function describeGrantStoreConformance<H extends OpenedStore<GrantStore>>(
  name: string,
  factory: StoreFactory<GrantStore, H>,
): void {
  const { use, check, crossProcess, skipNote } = suiteCases(factory);

  describe(`GrantStore conformance: ${name}`, () => {
    check("add returns the validated grant and listGrants returns it", () =>
      use(async ({ store }) => {
        const added = await store.add(grantInput({ constraints: undefined }));
        expect(added).toEqual(GrantSchema.parse(grantInput({ constraints: undefined })));
        expect(added.constraints).toEqual({});
        expect(parsed(await store.listGrants("ns", "agent"))).toEqual([added]);
        expect(await store.listNamespace("ns")).toEqual([added]);
      }),
    );

    check("listGrants filters by namespace and subject; listNamespace by namespace", () =>
      use(async ({ store }) => {
        const a = await store.add(grantInput({ id: "a" }));
        const b = await store.add(grantInput({ id: "b", subject: "other" }));
        const c = await store.add(grantInput({ id: "c", namespaceId: "ns2" }));
        const d = await store.add(grantInput({ id: "a", namespaceId: "ns2", subject: "other" }));
        expect(parsed(await store.listGrants("ns", "agent"))).toEqual([a]);
        expect(parsed(await store.listGrants("ns", "other"))).toEqual([b]);
        expect(parsed(await store.listGrants("ns2", "agent"))).toEqual([c]);
        expect(parsed(await store.listNamespace("ns2"))).toEqual([d, c]);
        expect(parsed(await store.listNamespace("ns"))).toEqual([a, b]);
        expect(await store.listGrants("nowhere", "agent")).toEqual([]);
      }),
    );

    check("keeps constraints, owners and descendant scopes exactly", () =>
      use(async ({ store }) => {
        const input = grantInput({
          capabilities: [
            {
              resource: { namespace: "files", path: ["a", "b"] },
              actions: ["read", "write"],
              scope: "descendants",
            },
          ],
          constraints: {
            maxUses: 3,
            notBefore: "2026-01-01T00:00:00.000Z",
            expiresAt: "2026-02-01T00:00:00.000Z",
            purposes: ["support"],
          },
        });
        await store.add(input);
        expect(parsed(await store.listGrants("ns", "agent"))).toEqual([GrantSchema.parse(input)]);
      }),
    );

    check("refuses an invalid grant with invalid_grant and stores nothing", () =>
      use(async ({ store }) => {
        const bad = [
          { ...grantInput(), capabilities: [] },
          { ...grantInput(), id: "" },
          { ...grantInput(), issuedAt: "yesterday" },
          { ...grantInput(), id: "x".repeat(513) },
          { ...grantInput(), authority: "smuggled" },
        ];
        for (const grant of bad) await expectCode(() => store.add(grant as GrantInput), INVALID);
        expect(await store.listNamespace("ns")).toEqual([]);
      }),
    );

    check("revoke marks the grant in that namespace only and says whether it existed", () =>
      use(async ({ store }) => {
        await store.add(grantInput({ id: "keep" }));
        await store.add(grantInput({ id: "drop" }));
        await store.add(grantInput({ id: "drop", namespaceId: "ns2" }));
        const at = new Date("2026-03-04T05:06:07.000Z");
        expect(await store.revoke("ns", "drop", at)).toBe(true);
        expect(await store.revoke("ns", "missing", at)).toBe(false);
        expect(await store.revoke("ns3", "drop", at)).toBe(false);
        const grants = parsed(await store.listGrants("ns", "agent"));
        expect(grants.map((g) => [g.id, g.revokedAt])).toEqual([
          ["drop", "2026-03-04T05:06:07.000Z"],
          ["keep", undefined],
        ]);
        expect(parsed(await store.listGrants("ns2", "agent"))[0]?.revokedAt).toBeUndefined();
      }),
    );

    check("refuses IDs that are not strings and an invalid instant with invalid_input", () =>
      use(async ({ store }) => {
        await store.add(grantInput());
        const notAString = 7 as unknown as string;
        await expectCode(() => store.listGrants(notAString, "agent"), ["invalid_input"]);
        await expectCode(() => store.listGrants("ns", notAString), ["invalid_input"]);
        await expectCode(() => store.listNamespace(notAString), ["invalid_input"]);
        await expectCode(() => store.revoke(notAString, "grant-1"), ["invalid_input"]);
        await expectCode(() => store.revoke("ns", notAString), ["invalid_input"]);
        for (const at of [new Date(Number.NaN), "2026-01-01" as unknown as Date]) {
          await expectCode(() => store.revoke("ns", "grant-1", at), ["invalid_input"]);
        }
        expect(parsed(await store.listGrants("ns", "agent"))[0]?.revokedAt).toBeUndefined();
      }),
    );

    check("revoke without an instant stamps the current time", () =>
      use(async ({ store }) => {
        await store.add(grantInput());
        const before = Date.now();
        expect(await store.revoke("ns", "grant-1")).toBe(true);
        const [grant] = parsed(await store.listGrants("ns", "agent"));
        const at = Date.parse(grant?.revokedAt ?? "");
        expect(at).toBeGreaterThanOrEqual(before - 1000);
        expect(at).toBeLessThanOrEqual(Date.now() + 1000);
      }),
    );

    check("hostile IDs, subjects and namespaces round-trip and stay apart", () =>
      use(async ({ store }) => {
        for (const key of HOSTILE_KEYS) {
          await store.add(grantInput({ id: key, namespaceId: key, subject: key, issuer: key }));
        }
        for (const key of HOSTILE_KEYS) {
          const grants = parsed(await store.listGrants(key, key));
          expect(grants.map((g) => [g.id, g.namespaceId, g.subject, g.issuer])).toEqual([
            [key, key, key, key],
          ]);
        }
        expect(await store.listGrants("a", "a")).toEqual([]);
        expect(await store.revoke("a\u0000b", "a\u0000b")).toBe(true);
        expect(parsed(await store.listGrants("a\u0000b", "a\u0000b"))[0]?.revokedAt).toBeDefined();
        expect(parsed(await store.listGrants("\u0000", "\u0000"))[0]?.revokedAt).toBeUndefined();
      }),
    );

    check("a grant holding 1,024 capabilities (the schema's maximum) round-trips", () =>
      use(async ({ store }) => {
        const capabilities = Array.from({ length: 1024 }, (_, i) => ({
          resource: { namespace: "messages", path: [`recipient-${i}`.padEnd(500, "-")] },
          actions: ["messages.send"],
          scope: "exact" as const,
        }));
        const outcome = await resultOrCode(() => store.add(grantInput({ capabilities })), INVALID);
        if (outcome.ok) {
          expect(parsed(await store.listGrants("ns", "agent"))[0]?.capabilities).toHaveLength(1024);
        }
      }),
    );

    check("64 concurrent adds are all kept", () =>
      use(async ({ store }) => {
        await Promise.all(
          Array.from({ length: 64 }, (_, i) => store.add(grantInput({ id: `g-${i}` }))),
        );
        expect(await store.listGrants("ns", "agent")).toHaveLength(64);
      }),
    );

    crossProcess(`grants added by 8 OS processes (25 each) are all visible here${skipNote}`, () =>
      use(async (opened) => {
        const spec = factory.processSpec?.(opened);
        if (!spec) throw new Error("unreachable: guarded by processSpec");
        await raceInProcesses(spec, 8, (worker) => ({
          kind: "addGrants",
          grants: Array.from({ length: 25 }, (_, i) => grantInput({ id: `p${worker}-${i}` })),
        }));
        const ids = parsed(await opened.store.listGrants("ns", "agent")).map((g) => g.id);
        expect(new Set(ids).size).toBe(200);
      }),
    );

    describeGrantVersionCases(factory);
  });
}
